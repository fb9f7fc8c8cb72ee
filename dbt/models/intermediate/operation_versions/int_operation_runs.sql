{{ config(location_root=env_var('OFFSET_LEDGER_DBT_LOCATION_ROOT', '') or none) }}
-- offset_syncs as each audited operation saw it, with epochs: read with time travel at its
-- recorded offset_syncs_version, or its recorded spans (operation_runs) past the horizon.
with runs_at_operation_versions as (

    {{ operation_reads('offset_syncs', 'offset_syncs_version') }}

),

recorded_spans as (

    {{ evidence_reads('offset_syncs', 'operation_runs', 'offset_syncs_version') }}

),

runs as (

    select * from runs_at_operation_versions

    union all

    select * from recorded_spans

),

final as (

    {{ runs_with_epochs('runs', ['operation_id']) }}

)

select * from final
