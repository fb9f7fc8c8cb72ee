with source as (

    select * from {{ ledger_relation('resume_points') }}

),

final as (

    {{ staging_select('resume_points', 'source') }}

)

select * from final
