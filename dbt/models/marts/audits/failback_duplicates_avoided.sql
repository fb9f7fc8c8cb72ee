{{ config(location_root=env_var('OFFSET_LEDGER_DBT_LOCATION_ROOT', '') or none) }}
-- For each failback's reverse-checkpointed partition: how many records the group would
-- re-read on the original topic without reverse checkpointing (resuming at the offset it
-- had there before, previous_offset; from offset 0 when it had none) and with it (resuming
-- at the resume point), counted over the copies it read on the replica below its commit c,
-- with the runs as of the operation's offset_syncs_version.
with audit as (

    select * from {{ ref('resume_audit') }}
    where operation_kind = 'failback' and direction = 'reverse'

),

runs as (

    select * from {{ ref('int_operation_runs') }}
    where is_current_epoch

),

read_on_replica as (

    select
        audit.operation_id,
        audit.resume_point_id,
        -- records u .. u + min(c - d, n) - 1 of each run were read as copies below c
        sum(least(audit.source_offset - runs.downstream_offset, runs.run_length))
            as records_read_on_replica,
        sum(greatest(0,
            runs.upstream_offset
            + least(audit.source_offset - runs.downstream_offset, runs.run_length)
            - greatest(runs.upstream_offset, coalesce(audit.previous_offset, 0))
        )) as duplicates_without_reverse_checkpointing,
        sum(greatest(0,
            runs.upstream_offset
            + least(audit.source_offset - runs.downstream_offset, runs.run_length)
            - greatest(runs.upstream_offset, audit.resume_offset)
        )) as duplicates_with_reverse_checkpointing
    from audit
    inner join runs
        on audit.operation_id = runs.operation_id
        and audit.source_cluster = runs.target_cluster
        and audit.cluster = runs.source_cluster
        and audit.source_topic = runs.replica_topic
        and audit.partition_id = runs.partition_id
        and runs.downstream_offset < audit.source_offset
    group by audit.operation_id, audit.resume_point_id

),

final as (

    select
        audit.operation_id,
        audit.group_id,
        audit.cluster,
        audit.topic,
        audit.partition_id,
        audit.source_cluster as replica_cluster,
        audit.source_topic as replica_topic,
        audit.source_offset as replica_offset,
        audit.resume_offset as offset_with_reverse_checkpointing,
        coalesce(audit.previous_offset, 0) as offset_without_reverse_checkpointing,
        audit.previous_offset is null as previous_offset_assumed_zero,
        coalesce(read_on_replica.records_read_on_replica, 0) as records_read_on_replica,
        coalesce(read_on_replica.duplicates_without_reverse_checkpointing, 0)
            as duplicates_without_reverse_checkpointing,
        coalesce(read_on_replica.duplicates_with_reverse_checkpointing, 0)
            as duplicates_with_reverse_checkpointing,
        coalesce(read_on_replica.duplicates_without_reverse_checkpointing, 0)
            - coalesce(read_on_replica.duplicates_with_reverse_checkpointing, 0)
            as duplicates_avoided,
        audit.offset_syncs_version,
        audit.checkpoints_version
    from audit
    left join read_on_replica
        on audit.operation_id = read_on_replica.operation_id
        and audit.resume_point_id = read_on_replica.resume_point_id

)

select * from final
