{{ config(location_root=env_var('OFFSET_LEDGER_DBT_LOCATION_ROOT', '') or none) }}
-- The resume points each operation wrote (rows are append-only and carry operation_id),
-- flagged with whether they are already present at the operation's resume_points_version.
with resume_points as (

    select * from {{ ref('stg_resume_points') }}

),

resume_points_at_operation_versions as (

    {{ operation_reads('resume_points', 'resume_points_version', 'read_for_operation_id') }}

),

final as (

    select
        resume_points.*,
        at_version.resume_point_id is not null as present_at_recorded_version
    from resume_points
    left join resume_points_at_operation_versions as at_version
        on resume_points.operation_id = at_version.read_for_operation_id
        and at_version.operation_id = at_version.read_for_operation_id
        and resume_points.resume_point_id = at_version.resume_point_id
    where resume_points.operation_id is not null

)

select * from final
