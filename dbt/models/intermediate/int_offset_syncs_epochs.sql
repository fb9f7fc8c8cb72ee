with offset_syncs as (

    select * from {{ ref('stg_offset_syncs') }}

),

final as (

    {{ runs_with_epochs('offset_syncs') }}

)

select * from final
