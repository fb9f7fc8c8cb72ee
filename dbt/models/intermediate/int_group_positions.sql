with group_offsets as (

    select * from {{ ref('stg_group_offsets') }}

),

ranked as (

    select
        group_offsets.*,
        row_number() over (
            partition by cluster, group_id, topic, partition_id
            order by observed_at desc, observation_id desc
        ) as observation_rank
    from group_offsets

),

final as (

    select
        cluster,
        group_id,
        topic,
        partition_id,
        committed_offset,
        group_state,
        observed_at,
        observation_id
    from ranked
    where observation_rank = 1

)

select * from final
