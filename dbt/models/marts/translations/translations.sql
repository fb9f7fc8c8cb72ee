-- Every group partition committed on either side of a flow, translated to the other side:
-- direction 'forward' for a commit on an original topic (to its replica, DESIGN.md's forward
-- rule), 'reverse' for a commit on a replica topic (back to the original, the reverse rule).
-- Both directions share this one model; forward_translations and reverse_translations are
-- its two halves under their stable names.
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

{#- A commit's side: its cluster and topic (`here`), and the side it translates to (`there`). #}
{%- set directions = {
    'forward': {'here': ('source_cluster', 'topic'), 'there': ('target_cluster', 'replica_topic'),
                'rule': forward_translate},
    'reverse': {'here': ('target_cluster', 'replica_topic'), 'there': ('source_cluster', 'topic'),
                'rule': reverse_translate},
} %}
{%- for direction, side in directions.items() %}

{{ direction }}_positions as (

    select
        flow_topics.flow,
        group_positions.group_id,
        flow_topics.{{ side.here[0] }} as source_cluster,
        flow_topics.{{ side.here[1] }} as source_topic,
        group_positions.partition_id,
        group_positions.committed_offset as source_offset,
        flow_topics.{{ side.there[0] }} as target_cluster,
        flow_topics.{{ side.there[1] }} as target_topic,
        group_positions.group_state,
        group_positions.observed_at
    from group_positions
    inner join flow_topics
        on group_positions.cluster = flow_topics.{{ side.here[0] }}
        and group_positions.topic = flow_topics.{{ side.here[1] }}

),

{{ direction }}_translated as (

    {{ side.rule(
        direction ~ '_positions', 'runs',
        [('flow', 'flow'), ('source_topic', side.here[1]), ('partition_id', 'partition_id')],
        ['flow', 'group_id', 'source_topic', 'partition_id'],
        'source_offset') }}

),

{{ direction }}_rows as (

    select
        '{{ direction }}' as direction,
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
    from {{ direction }}_translated

),
{%- endfor %}

final as (

    select * from forward_rows
    union all
    select * from reverse_rows

)

select * from final
