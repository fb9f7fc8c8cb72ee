{{ config(location_root=env_var('OFFSET_LEDGER_DBT_LOCATION_ROOT', '') or none) }}
-- offset_syncs as of each operation's recorded offset_syncs_version, with epochs.
with runs_at_operation_versions as (

    {{ operation_reads('offset_syncs', 'offset_syncs_version') }}

),

final as (

    {{ runs_with_epochs('runs_at_operation_versions', ['operation_id']) }}

)

select * from final
