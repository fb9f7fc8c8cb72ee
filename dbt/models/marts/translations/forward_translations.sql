-- Every group partition committed on an original topic, translated to its replica.
with group_positions as (

    select * from {{ ref('int_group_positions') }}

),

runs as (

    select * from {{ ref('int_offset_syncs_epochs') }}

),

flow_topics as (

    select distinct flow, source_cluster, target_cluster, topic, replica_topic
    from runs

),

positions as (

    select
        flow_topics.flow,
        group_positions.group_id,
        flow_topics.source_cluster,
        flow_topics.topic as source_topic,
        group_positions.partition_id,
        group_positions.committed_offset as source_offset,
        flow_topics.target_cluster,
        flow_topics.replica_topic as target_topic,
        group_positions.group_state,
        group_positions.observed_at
    from group_positions
    inner join flow_topics
        on group_positions.cluster = flow_topics.source_cluster
        and group_positions.topic = flow_topics.topic

),

translated as (

    {{ forward_translate(
        'positions', 'runs',
        [('flow', 'flow'), ('source_topic', 'topic'), ('partition_id', 'partition_id')],
        ['flow', 'group_id', 'source_topic', 'partition_id'],
        'source_offset') }}

),

final as (

    select
        flow,
        group_id,
        source_cluster,
        source_topic,
        partition_id,
        source_offset,
        target_cluster,
        target_topic,
        translated_offset as target_offset,
        translation_status as status,
        translation_reason as reason,
        case when translation_status = 'translated' then candidate_kind end as candidate_kind,
        case when translation_status = 'translated' then run_upstream_offset end as run_upstream_offset,
        case when translation_status = 'translated' then run_downstream_offset end as run_downstream_offset,
        case when translation_status = 'translated' then run_length end as run_length,
        case when translation_status = 'translated' then run_id end as run_id,
        case when translation_status = 'translated' then run_batch_id end as run_batch_id,
        case when translation_status = 'translated' then run_written_at end as run_written_at,
        case when translation_status = 'translated' then run_epoch end as run_epoch,
        epoch_run_count,
        group_state,
        observed_at
    from translated

)

select * from final
