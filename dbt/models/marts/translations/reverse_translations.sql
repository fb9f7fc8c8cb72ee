-- Every group partition committed on a replica topic, translated back to the original:
-- the 'reverse' half of the translations model, under its stable name.
with translations as (

    select * from {{ ref('translations') }}

),

final as (

    select * except (direction)
    from translations
    where direction = 'reverse'

)

select * from final
