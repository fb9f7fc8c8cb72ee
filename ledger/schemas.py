"""Names and schemas of the ledger's Delta tables.

Invariants:
    * Table names are fixed; only the ledger *location* (a path or a ``catalog.schema``) varies.
    * Offsets are Kafka "next offset to consume" positions (LONG). A value that could not be
      translated is NULL together with ``status = 'untranslatable'`` and a ``reason``: never -1
      or any other sentinel offset.
    * Every table has a natural key (``NATURAL_KEYS``) on which writes are idempotent.
    * No table has a column for cluster properties, so a secret cannot land in a row.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

OFFSET_SYNCS = "offset_syncs"
CHECKPOINTS = "checkpoints"
GROUP_OFFSETS = "group_offsets"
RESUME_POINTS = "resume_points"
OPERATIONS = "operations"
REPLICATION_PROGRESS = "replication_progress"
OPERATION_RUNS = "operation_runs"
OPERATION_CHECKPOINTS = "operation_checkpoints"
OFFSET_SYNC_SPANS = "offset_sync_spans"


def _schema(*fields: tuple[str, object, bool]) -> StructType:
    return StructType([StructField(name, dtype, nullable) for name, dtype, nullable in fields])


S, L, INT, B, T = StringType(), LongType(), IntegerType(), BooleanType(), TimestampType()

# One row per run: upstream u..u+n-1 written, in order, at downstream d..d+n-1.
OFFSET_SYNCS_SCHEMA = _schema(
    ("flow", S, False),               # "P->B"
    ("source_cluster", S, False),
    ("target_cluster", S, False),
    ("topic", S, False),              # topic on the source cluster
    ("replica_topic", S, False),      # topic on the target cluster
    ("partition", INT, False),
    ("upstream_offset", L, False),    # u
    ("downstream_offset", L, False),  # d
    ("length", L, False),             # n >= 1
    ("run_id", S, False),             # replication run (one job start); orders runs with batch_id
    ("batch_id", L, False),           # micro-batch within the run
    ("written_at", T, False),
)

# Forward and reverse checkpoints, one row per (group, partition) per checkpoint pass.
CHECKPOINTS_SCHEMA = _schema(
    ("checkpoint_id", S, False),
    ("flow", S, False),               # the offset_syncs flow used, e.g. "P->B"
    ("direction", S, False),          # 'forward' | 'reverse'
    ("group_id", S, False),
    ("source_cluster", S, False),     # where the group committed
    ("source_topic", S, False),
    ("partition", INT, False),
    ("source_offset", L, False),      # the group's committed offset there
    ("target_cluster", S, False),     # where the translation applies
    ("target_topic", S, False),
    ("target_offset", L, True),       # NULL when untranslatable
    ("status", S, False),             # 'translated' | 'untranslatable' | 'held' (never backwards)
    ("reason", S, True),
    ("group_rewound", B, False),
    ("offset_syncs_version", L, False),
    ("checkpointed_at", T, False),
)

# Committed offsets observed in groups, one row per observation.
GROUP_OFFSETS_SCHEMA = _schema(
    ("observation_id", S, False),
    ("cluster", S, False),
    ("group_id", S, False),
    ("topic", S, False),
    ("partition", INT, False),
    ("committed_offset", L, False),
    ("group_state", S, True),
    ("observed_at", T, False),
)

# Offsets this tool wrote into a group on a cluster.
RESUME_POINTS_SCHEMA = _schema(
    ("resume_point_id", S, False),
    ("operation_id", S, True),        # NULL for periodic group offset sync
    ("reason", S, False),             # 'group_offset_sync' | 'failover' | 'failback'
    ("cluster", S, False),
    ("group_id", S, False),
    ("topic", S, False),
    ("partition", INT, False),
    ("offset", L, False),
    ("previous_offset", L, True),     # what the group had there before, if anything
    ("checkpoint_id", S, True),       # NULL when the offset is the topic start (nothing to map)
    ("direction", S, True),
    ("source_cluster", S, True),
    ("source_topic", S, True),
    ("source_offset", L, True),
    ("offset_syncs_version", L, True),
    ("checkpoints_version", L, True),
    ("written_at", T, False),
)

# Failover and failback operations with the ledger versions they were computed from.
OPERATIONS_SCHEMA = _schema(
    ("operation_id", S, False),
    ("kind", S, False),               # 'failover' | 'failback'
    ("group_id", S, False),
    ("from_cluster", S, False),
    ("to_cluster", S, False),
    ("status", S, False),             # 'completed' | 'failed'
    ("subscribe_topics", ArrayType(S), False),
    ("offset_syncs_version", L, True),
    ("checkpoints_version", L, True),
    ("group_offsets_version", L, True),
    ("resume_points_version", L, True),
    ("reverse_checkpointing", B, False),
    ("started_at", T, False),
    ("ready_at", T, True),
    ("seconds_to_ready", DoubleType(), True),
    ("message", S, True),
)

# Latest replication state per flow partition (MERGE on the key; history via Delta versions).
REPLICATION_PROGRESS_SCHEMA = _schema(
    ("flow", S, False),
    ("topic", S, False),
    ("replica_topic", S, False),
    ("partition", INT, False),
    ("last_upstream_offset", L, True),   # last replicated record's upstream offset
    ("next_upstream_offset", L, True),   # last + 1: where replication resumes
    ("source_end_offset", L, True),
    ("lag", L, True),
    ("newest_record_timestamp", T, True),
    ("record_age_ms", L, True),
    ("batch_id", L, False),
    ("updated_at", T, False),
)

# An operation's own audit evidence, written with it (before its ``operations`` row), so that
# its audit still answers once time travel no longer reaches the versions it recorded.
# The spans (ledger.spans) of the current epoch of every flow partition its checkpoints were
# translated over, as the store held them: offset_syncs' columns, one row per span, with
# run_id "span" and batch_id the span's position in write order.
OPERATION_RUNS_SCHEMA = _schema(
    ("operation_id", S, False),
    ("offset_syncs_version", L, False),  # the version the spans were loaded at
    *((f.name, f.dataType, f.nullable) for f in OFFSET_SYNCS_SCHEMA.fields),
)

# The checkpoint rows an operation's pass computed (every group partition of its groups).
OPERATION_CHECKPOINTS_SCHEMA = _schema(
    ("operation_id", S, False),
    ("checkpoints_version", L, False),   # the version that holds these rows
    *((f.name, f.dataType, f.nullable) for f in CHECKPOINTS_SCHEMA.fields),
)

# Per flow, the spans (ledger.spans) of the current epoch of every flow partition at one
# offset_syncs version, as ``ledger maintain`` last computed them (ledger.span_snapshots): a
# store load reads these plus the runs written after ``covered_until`` instead of the whole
# epoch. Derived from offset_syncs and recomputable from it at any time: never audit evidence.
# offset_syncs' columns, one row per span, run_id "span", batch_id the span's position in write
# order, written_at = covered_until.
OFFSET_SYNC_SPANS_SCHEMA = _schema(
    ("offset_syncs_version", L, False),  # the version the spans cover
    ("covered_until", T, False),         # the flow's newest written_at at that version
    *((f.name, f.dataType, f.nullable) for f in OFFSET_SYNCS_SCHEMA.fields),
)

SCHEMAS: dict[str, StructType] = {
    OFFSET_SYNCS: OFFSET_SYNCS_SCHEMA,
    CHECKPOINTS: CHECKPOINTS_SCHEMA,
    GROUP_OFFSETS: GROUP_OFFSETS_SCHEMA,
    RESUME_POINTS: RESUME_POINTS_SCHEMA,
    OPERATIONS: OPERATIONS_SCHEMA,
    REPLICATION_PROGRESS: REPLICATION_PROGRESS_SCHEMA,
    OPERATION_RUNS: OPERATION_RUNS_SCHEMA,
    OPERATION_CHECKPOINTS: OPERATION_CHECKPOINTS_SCHEMA,
    OFFSET_SYNC_SPANS: OFFSET_SYNC_SPANS_SCHEMA,
}

DERIVED: frozenset[str] = frozenset({OFFSET_SYNC_SPANS})
"""Tables recomputed from others (caches for reads): no audit reads them, none is evidence."""

NATURAL_KEYS: dict[str, tuple[str, ...]] = {
    OFFSET_SYNCS: ("flow", "topic", "partition", "run_id", "batch_id", "upstream_offset"),
    CHECKPOINTS: ("checkpoint_id", "group_id", "source_topic", "partition"),
    GROUP_OFFSETS: ("observation_id", "cluster", "group_id", "topic", "partition"),
    RESUME_POINTS: ("resume_point_id",),
    OPERATIONS: ("operation_id",),
    REPLICATION_PROGRESS: ("flow", "topic", "partition"),
    OPERATION_RUNS: ("operation_id", "flow", "topic", "partition", "batch_id"),
    OPERATION_CHECKPOINTS: ("operation_id", "checkpoint_id", "group_id", "direction",
                            "source_topic", "partition"),
    OFFSET_SYNC_SPANS: ("flow", "topic", "partition", "batch_id"),
}

PARTITION_COLUMNS: dict[str, tuple[str, ...]] = {name: () for name in SCHEMAS}
