"""Names and schemas of the ledger's Delta tables.

Invariants:
    * Table names are fixed; only the ledger *location* (a path or a ``catalog.schema``) varies.
    * Offsets are Kafka "next offset to consume" positions (LONG). A value that could not be
      translated is NULL together with ``status = 'untranslatable'`` and a ``reason``: never -1
      or any other sentinel offset.
    * Every table has a natural key (``NATURAL_KEYS``) on which writes are idempotent.
    * No table has a column for cluster properties, so a secret cannot land in a row.
    * Importing this module imports no pyspark: the columns are plain tuples (``COLUMNS``), and
      the Spark ``StructType`` of a table (``SCHEMAS[name]``, ``OFFSET_SYNCS_SCHEMA``, ...) is
      built from them on first use, so a verb that reads the ledger with delta-rs never loads
      Spark's Python package.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

OFFSET_SYNCS = "offset_syncs"
CHECKPOINTS = "checkpoints"
GROUP_OFFSETS = "group_offsets"
RESUME_POINTS = "resume_points"
OPERATIONS = "operations"
REPLICATION_PROGRESS = "replication_progress"
OPERATION_RUNS = "operation_runs"
OPERATION_CHECKPOINTS = "operation_checkpoints"
OFFSET_SYNC_SPANS = "offset_sync_spans"


class Column(NamedTuple):
    """One column: its name, its Spark SQL type (``bigint``, ``array<string>``, ...), nullable."""

    name: str
    type: str
    nullable: bool


def _schema(*fields: tuple[str, str, bool]) -> tuple[Column, ...]:
    return tuple(Column(*field) for field in fields)


S, L, INT, B, T, D = "string", "bigint", "int", "boolean", "timestamp", "double"

# One row per run: upstream u..u+n-1 written, in order, at downstream d..d+n-1.
OFFSET_SYNCS_COLUMNS = _schema(
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
CHECKPOINTS_COLUMNS = _schema(
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
GROUP_OFFSETS_COLUMNS = _schema(
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
RESUME_POINTS_COLUMNS = _schema(
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
OPERATIONS_COLUMNS = _schema(
    ("operation_id", S, False),
    ("kind", S, False),               # 'failover' | 'failback'
    ("group_id", S, False),
    ("from_cluster", S, False),
    ("to_cluster", S, False),
    ("status", S, False),             # 'completed' | 'failed'
    ("subscribe_topics", f"array<{S}>", False),
    ("offset_syncs_version", L, True),
    ("checkpoints_version", L, True),
    ("group_offsets_version", L, True),
    ("resume_points_version", L, True),
    ("reverse_checkpointing", B, False),
    ("started_at", T, False),
    ("ready_at", T, True),
    ("seconds_to_ready", D, True),
    ("message", S, True),
)

# Latest replication state per flow partition (MERGE on the key; history via Delta versions).
REPLICATION_PROGRESS_COLUMNS = _schema(
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
OPERATION_RUNS_COLUMNS = _schema(
    ("operation_id", S, False),
    ("offset_syncs_version", L, False),  # the version the spans were loaded at
    *OFFSET_SYNCS_COLUMNS,
)

# The checkpoint rows an operation's pass computed (every group partition of its groups).
OPERATION_CHECKPOINTS_COLUMNS = _schema(
    ("operation_id", S, False),
    ("checkpoints_version", L, False),   # the version that holds these rows
    *CHECKPOINTS_COLUMNS,
)

# Per flow, the spans (ledger.spans) of the current epoch of every flow partition at one
# offset_syncs version, as ``ledger maintain`` last computed them (ledger.span_snapshots): a
# store load reads these plus the runs written after ``covered_until`` instead of the whole
# epoch. Derived from offset_syncs and recomputable from it at any time: never audit evidence.
# offset_syncs' columns, one row per span, run_id "span", batch_id the span's position in write
# order, written_at = covered_until.
OFFSET_SYNC_SPANS_COLUMNS = _schema(
    ("offset_syncs_version", L, False),  # the version the spans cover
    ("covered_until", T, False),         # the flow's newest written_at at that version
    *OFFSET_SYNCS_COLUMNS,
)

COLUMNS: dict[str, tuple[Column, ...]] = {
    OFFSET_SYNCS: OFFSET_SYNCS_COLUMNS,
    CHECKPOINTS: CHECKPOINTS_COLUMNS,
    GROUP_OFFSETS: GROUP_OFFSETS_COLUMNS,
    RESUME_POINTS: RESUME_POINTS_COLUMNS,
    OPERATIONS: OPERATIONS_COLUMNS,
    REPLICATION_PROGRESS: REPLICATION_PROGRESS_COLUMNS,
    OPERATION_RUNS: OPERATION_RUNS_COLUMNS,
    OPERATION_CHECKPOINTS: OPERATION_CHECKPOINTS_COLUMNS,
    OFFSET_SYNC_SPANS: OFFSET_SYNC_SPANS_COLUMNS,
}

TABLES: tuple[str, ...] = tuple(COLUMNS)
"""Every ledger table, in creation order."""


def column_names(name: str) -> list[str]:
    """The columns of table ``name``, in order."""
    return [c.name for c in COLUMNS[name]]


@cache
def spark_schema(name: str) -> StructType:
    """The Spark schema of table ``name`` (imports pyspark)."""
    from pyspark.sql import types

    simple = {S: types.StringType(), L: types.LongType(), INT: types.IntegerType(),
              B: types.BooleanType(), T: types.TimestampType(), D: types.DoubleType()}

    def spark_type(name: str) -> types.DataType:
        if name.startswith("array<"):
            return types.ArrayType(spark_type(name[len("array<"):-1]))
        return simple[name]

    return types.StructType([types.StructField(c.name, spark_type(c.type), c.nullable)
                             for c in COLUMNS[name]])


def __getattr__(attr: str) -> Any:
    """``SCHEMAS`` (table -> ``StructType``) and ``<TABLE>_SCHEMA``, built on first use."""
    if attr == "SCHEMAS":
        return {name: spark_schema(name) for name in TABLES}
    if attr.endswith("_SCHEMA") and isinstance(globals().get(attr[:-len("_SCHEMA")]), str):
        name = globals()[attr[:-len("_SCHEMA")]]
        if name in COLUMNS:
            return spark_schema(name)
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


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

PARTITION_COLUMNS: dict[str, tuple[str, ...]] = {name: () for name in TABLES}
