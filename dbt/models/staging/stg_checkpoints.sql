with source as (

    select * from {{ ledger_relation('checkpoints') }}

),

final as (

    {{ staging_select('checkpoints', 'source') }}

)

select * from final
