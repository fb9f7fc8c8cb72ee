-- The operations this audit covers (var audit_operations; all when unset), each with where
-- its audit reads the ledger as the operation saw it: 'time_travel' (Delta time travel at the
-- versions it recorded), 'recorded_evidence' (its own operation_runs and
-- operation_checkpoints rows: the runner lists it in var evidence_operations because time
-- travel no longer reaches its versions, or because --evidence was asked; or it started
-- more than var time_travel_days ago) or 'unavailable' (evidence needed, none recorded: an
-- operation recorded before evidence existed).
with operations as (

    select * from {{ ref('stg_operations') }}

),

evidence as (

    select distinct operation_id
    from {{ ledger_relation('operation_checkpoints') }}
    where {{ audited_filter('operation_id') }}

),

final as (

    select
        operations.*,
        case
            when not {{ id_in('operations.operation_id', var('evidence_operations', [])) }}
                {%- if var('time_travel_days', none) is not none %}
                and operations.started_at >= current_timestamp()
                    - interval {{ (var('time_travel_days') | float * 86400) | int }} seconds
                {%- endif %}
                then 'time_travel'
            when evidence.operation_id is not null then 'recorded_evidence'
            else 'unavailable'
        end as audit_source
    from operations
    left join evidence
        on operations.operation_id = evidence.operation_id
    where {{ audited_filter('operations.operation_id') }}

)

select * from final
