{{ config(location_root=env_var('OFFSET_LEDGER_DBT_LOCATION_ROOT', '') or none) }}
-- Per operation and resume point: the offset written, the checkpoint behind it and the run
-- that decides its translation, all read with Delta time travel at the ledger versions the
-- operation recorded (or, past the time-travel horizon, from the evidence it recorded:
-- audit_source); the translation is recomputed from those runs and compared.
with operations as (

    select * from {{ ref('int_audited_operations') }}

),

resume_points as (

    select * from {{ ref('int_operation_resume_points') }}

),

checkpoints as (

    select * from {{ ref('int_operation_checkpoints') }}

),

runs as (

    select * from {{ ref('int_operation_runs') }}

),

positions as (

    select
        resume_points.operation_id,
        resume_points.resume_point_id,
        resume_points.direction,
        resume_points.cluster,
        resume_points.source_cluster,
        resume_points.source_topic,
        resume_points.partition_id,
        resume_points.source_offset
    from resume_points
    inner join operations
        on resume_points.operation_id = operations.operation_id
    where resume_points.source_offset is not null

),

forward_positions as (

    select * from positions where direction = 'forward'

),

reverse_positions as (

    select * from positions where direction = 'reverse'

),

forward_retranslated as (

    {{ forward_translate(
        'forward_positions', 'runs',
        [('operation_id', 'operation_id'), ('source_cluster', 'source_cluster'),
         ('cluster', 'target_cluster'), ('source_topic', 'topic'),
         ('partition_id', 'partition_id')],
        ['operation_id', 'resume_point_id'],
        'source_offset') }}

),

reverse_retranslated as (

    {{ reverse_translate(
        'reverse_positions', 'runs',
        [('operation_id', 'operation_id'), ('source_cluster', 'target_cluster'),
         ('cluster', 'source_cluster'), ('source_topic', 'replica_topic'),
         ('partition_id', 'partition_id')],
        ['operation_id', 'resume_point_id'],
        'source_offset') }}

),

retranslated as (

    select
        operation_id, resume_point_id, translated_offset, translation_status,
        translation_reason, candidate_kind, run_upstream_offset, run_downstream_offset,
        run_length, run_id, run_batch_id, run_written_at, run_epoch, epoch_run_count
    from forward_retranslated

    union all

    select
        operation_id, resume_point_id, translated_offset, translation_status,
        translation_reason, candidate_kind, run_upstream_offset, run_downstream_offset,
        run_length, run_id, run_batch_id, run_written_at, run_epoch, epoch_run_count
    from reverse_retranslated

),

final as (

    select
        operations.operation_id,
        operations.kind as operation_kind,
        operations.status as operation_status,
        operations.group_id,
        operations.from_cluster,
        operations.to_cluster,
        operations.reverse_checkpointing,
        operations.started_at,
        operations.ready_at,
        operations.seconds_to_ready,
        operations.offset_syncs_version,
        operations.checkpoints_version,
        operations.group_offsets_version,
        operations.resume_points_version,
        operations.audit_source,
        resume_points.resume_point_id,
        resume_points.reason,
        resume_points.cluster,
        resume_points.topic,
        resume_points.partition_id,
        resume_points.resume_offset,
        resume_points.previous_offset,
        resume_points.written_at,
        resume_points.present_at_recorded_version,
        resume_points.direction,
        resume_points.source_cluster,
        resume_points.source_topic,
        resume_points.source_offset,
        resume_points.checkpoint_id,
        checkpoints.checkpoint_id is not null as checkpoint_found,
        checkpoints.flow as checkpoint_flow,
        checkpoints.source_offset as checkpoint_source_offset,
        checkpoints.target_offset as checkpoint_target_offset,
        checkpoints.status as checkpoint_status,
        checkpoints.reason as checkpoint_reason,
        checkpoints.group_rewound as checkpoint_group_rewound,
        checkpoints.checkpointed_at,
        retranslated.translated_offset as retranslated_offset,
        retranslated.translation_status as retranslation_status,
        coalesce(retranslated.translated_offset = resume_points.resume_offset, false)
            as matches_retranslation,
        retranslated.candidate_kind,
        retranslated.run_upstream_offset,
        retranslated.run_downstream_offset,
        retranslated.run_length,
        retranslated.run_id,
        retranslated.run_batch_id,
        retranslated.run_written_at,
        retranslated.run_epoch,
        retranslated.epoch_run_count
    from resume_points
    inner join operations
        on resume_points.operation_id = operations.operation_id
    left join checkpoints
        on resume_points.operation_id = checkpoints.operation_id
        and resume_points.checkpoint_id = checkpoints.checkpoint_id
        and resume_points.group_id = checkpoints.group_id
        and resume_points.source_topic = checkpoints.source_topic
        and resume_points.partition_id = checkpoints.partition_id
    left join retranslated
        on resume_points.operation_id = retranslated.operation_id
        and resume_points.resume_point_id = retranslated.resume_point_id

)

select * from final
