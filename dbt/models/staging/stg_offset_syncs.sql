with source as (

    select * from {{ ledger_relation('offset_syncs') }}

),

final as (

    {{ staging_select('offset_syncs', 'source') }}

)

select * from final
