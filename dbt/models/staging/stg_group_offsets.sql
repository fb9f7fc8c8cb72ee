with source as (

    select * from {{ ledger_relation('group_offsets') }}

),

final as (

    {{ staging_select('group_offsets', 'source') }}

)

select * from final
