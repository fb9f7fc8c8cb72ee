with source as (

    select * from {{ ledger_relation('replication_progress') }}

),

final as (

    {{ staging_select('replication_progress', 'source') }}

)

select * from final
