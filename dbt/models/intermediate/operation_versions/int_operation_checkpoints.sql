{{ config(location_root=env_var('OFFSET_LEDGER_DBT_LOCATION_ROOT', '') or none) }}
-- checkpoints as each audited operation saw them: read with time travel at its recorded
-- checkpoints_version, or the checkpoint rows it recorded (operation_checkpoints).
with checkpoints_at_operation_versions as (

    {{ operation_reads('checkpoints', 'checkpoints_version',
                       own_rows={'group_id': 'group_id'}) }}

),

recorded_checkpoints as (

    {{ evidence_reads('checkpoints', 'operation_checkpoints', 'checkpoints_version') }}

),

final as (

    select * from checkpoints_at_operation_versions

    union all

    select * from recorded_checkpoints

)

select * from final
