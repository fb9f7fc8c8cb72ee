{{ config(location_root=env_var('OFFSET_LEDGER_DBT_LOCATION_ROOT', '') or none) }}
-- checkpoints as of each operation's recorded checkpoints_version.
with checkpoints_at_operation_versions as (

    {{ operation_reads('checkpoints', 'checkpoints_version') }}

),

final as (

    select * from checkpoints_at_operation_versions

)

select * from final
