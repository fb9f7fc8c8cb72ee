with source as (

    select * from {{ ledger_relation('operations') }}

),

final as (

    {{ staging_select('operations', 'source') }}

)

select * from final
