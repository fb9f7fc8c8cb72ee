-- Every group partition committed on an original topic, translated to its replica:
-- the 'forward' half of the translations model, under its stable name.
with translations as (

    select * from {{ ref('translations') }}

),

final as (

    select * except (direction)
    from translations
    where direction = 'forward'

)

select * from final
