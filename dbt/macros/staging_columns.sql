{#-
  Rename and cast of each ledger table: the only place the ledger's column names appear.
  Used by the staging models and by the time-travel reads of the intermediate models, so a
  table read at an operation's version has exactly the staging columns.
  Renames: `partition` -> partition_id, `length` -> run_length, `offset` -> resume_offset
  (keywords in some dialects).
-#}
{% macro staging_spec(table) -%}
  {%- set s, l, i, t, b = 'string', 'bigint', 'int', 'timestamp', 'boolean' -%}
  {%- set specs = {
    'offset_syncs': [
      ('flow', 'flow', s), ('source_cluster', 'source_cluster', s),
      ('target_cluster', 'target_cluster', s), ('topic', 'topic', s),
      ('replica_topic', 'replica_topic', s), ('partition', 'partition_id', i),
      ('upstream_offset', 'upstream_offset', l), ('downstream_offset', 'downstream_offset', l),
      ('length', 'run_length', l), ('run_id', 'run_id', s), ('batch_id', 'batch_id', l),
      ('written_at', 'written_at', t)],
    'checkpoints': [
      ('checkpoint_id', 'checkpoint_id', s), ('flow', 'flow', s), ('direction', 'direction', s),
      ('group_id', 'group_id', s), ('source_cluster', 'source_cluster', s),
      ('source_topic', 'source_topic', s), ('partition', 'partition_id', i),
      ('source_offset', 'source_offset', l), ('target_cluster', 'target_cluster', s),
      ('target_topic', 'target_topic', s), ('target_offset', 'target_offset', l),
      ('status', 'status', s), ('reason', 'reason', s), ('group_rewound', 'group_rewound', b),
      ('offset_syncs_version', 'offset_syncs_version', l),
      ('checkpointed_at', 'checkpointed_at', t)],
    'group_offsets': [
      ('observation_id', 'observation_id', s), ('cluster', 'cluster', s),
      ('group_id', 'group_id', s), ('topic', 'topic', s), ('partition', 'partition_id', i),
      ('committed_offset', 'committed_offset', l), ('group_state', 'group_state', s),
      ('observed_at', 'observed_at', t)],
    'resume_points': [
      ('resume_point_id', 'resume_point_id', s), ('operation_id', 'operation_id', s),
      ('reason', 'reason', s), ('cluster', 'cluster', s), ('group_id', 'group_id', s),
      ('topic', 'topic', s), ('partition', 'partition_id', i), ('offset', 'resume_offset', l),
      ('previous_offset', 'previous_offset', l), ('checkpoint_id', 'checkpoint_id', s),
      ('direction', 'direction', s), ('source_cluster', 'source_cluster', s),
      ('source_topic', 'source_topic', s), ('source_offset', 'source_offset', l),
      ('offset_syncs_version', 'offset_syncs_version', l),
      ('checkpoints_version', 'checkpoints_version', l), ('written_at', 'written_at', t)],
    'operations': [
      ('operation_id', 'operation_id', s), ('kind', 'kind', s), ('group_id', 'group_id', s),
      ('from_cluster', 'from_cluster', s), ('to_cluster', 'to_cluster', s),
      ('status', 'status', s), ('offset_syncs_version', 'offset_syncs_version', l),
      ('checkpoints_version', 'checkpoints_version', l),
      ('group_offsets_version', 'group_offsets_version', l),
      ('resume_points_version', 'resume_points_version', l),
      ('reverse_checkpointing', 'reverse_checkpointing', b), ('started_at', 'started_at', t),
      ('ready_at', 'ready_at', t), ('seconds_to_ready', 'seconds_to_ready', 'double'),
      ('message', 'message', s)],
    'replication_progress': [
      ('flow', 'flow', s), ('topic', 'topic', s), ('replica_topic', 'replica_topic', s),
      ('partition', 'partition_id', i), ('last_upstream_offset', 'last_upstream_offset', l),
      ('next_upstream_offset', 'next_upstream_offset', l),
      ('source_end_offset', 'source_end_offset', l), ('lag', 'replication_lag', l),
      ('newest_record_timestamp', 'newest_record_timestamp', t),
      ('record_age_ms', 'record_age_ms', l), ('batch_id', 'batch_id', l),
      ('updated_at', 'updated_at', t)],
  } -%}
  {{ return(specs[table]) }}
{%- endmacro %}

{% macro staging_select(table, relation) -%}
  select
  {%- for column, name, type in staging_spec(table) %}
      cast({{ adapter.quote(column) }} as {{ type }}) as {{ name }}{{ "," if not loop.last }}
  {%- endfor %}
  from {{ relation }}
{%- endmacro %}
