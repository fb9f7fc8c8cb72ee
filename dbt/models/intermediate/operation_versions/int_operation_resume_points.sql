{{ config(location_root=env_var('OFFSET_LEDGER_DBT_LOCATION_ROOT', '') or none) }}
-- The resume points each audited operation wrote (rows are append-only and carry
-- operation_id), flagged with whether they are already present at the operation's
-- resume_points_version (NULL when the operation is audited from recorded evidence: that
-- version is past the time-travel horizon).
with resume_points as (

    select * from {{ ref('stg_resume_points') }}
    where {{ audited_filter('operation_id') }}

),

operations as (

    select * from {{ ref('int_audited_operations') }}

),

resume_points_at_operation_versions as (

    {{ operation_reads('resume_points', 'resume_points_version', 'read_for_operation_id',
                       own_rows={'operation_id': 'operation_id'}) }}

),

final as (

    select
        resume_points.*,
        case when operations.audit_source = 'time_travel'
             then at_version.resume_point_id is not null end as present_at_recorded_version
    from resume_points
    inner join operations
        on resume_points.operation_id = operations.operation_id
    left join resume_points_at_operation_versions as at_version
        on resume_points.operation_id = at_version.read_for_operation_id
        and resume_points.resume_point_id = at_version.resume_point_id

)

select * from final
