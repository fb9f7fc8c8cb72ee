"""The ledger's Delta tables, defined once: names, columns (type, nullability, description), keys.

Every other form is derived from :data:`TABLES`, never written by hand:

    TABLES (pure Python, imports nothing heavy)
      -> spark_schema(name), SCHEMAS, <TABLE>_SCHEMA   Spark StructTypes (pyspark imported lazily)
      -> arrow_schema(name)                             pyarrow, for tables delta-rs creates
      -> dbt/models/staging/_sources.yml                columns of the dbt sources
      -> expectations.suites                            the GX columns check, the secrets check
      -> docs/ledger-tables.md                          the Columns section
    (``python -m ledger.schema_files`` rewrites the two files; tests/ledger/test_schemas.py
    fails when any form differs from the definition.)

Invariants:
    * Table names are fixed; only the ledger *location* (a path or a ``catalog.schema``) varies.
    * Offsets are Kafka "next offset to consume" positions (``bigint``). A value that could not
      be translated is NULL together with ``status = 'untranslatable'`` and a ``reason``: never
      -1 or any other sentinel offset.
    * Every table has a natural key (``NATURAL_KEYS``) on which writes are idempotent.
    * No table has a column for cluster properties, so a secret cannot land in a row.
    * Importing this module never imports pyspark (a copy-only install has none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
ACL_SYNCS = "acl_syncs"

# Column types, as Spark SQL spells them (DataType.simpleString(), dbt-spark's data_type).
STRING, BIGINT, INT, BOOLEAN, TIMESTAMP, DOUBLE = (
    "string", "bigint", "int", "boolean", "timestamp", "double")
STRINGS = "array<string>"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool
    description: str
    added: bool = False  # added after its table's first release: an older table lacks it


@dataclass(frozen=True)
class Table:
    name: str
    description: str          # one row per ...
    columns: tuple[Column, ...]
    key: tuple[str, ...]      # the natural key writes are idempotent on
    derived: bool = False     # recomputed from other tables: no audit reads it
    latest_only: bool = False  # only its latest version is ever read: its history is no evidence
    # committed to by a running job every few seconds or every pass: its Delta history grows
    # with the commits, and an operation's evidence answers for its old versions
    streamed: bool = False

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


def _c(name: str, type_: str, description: str, *, null: bool = False,
       added: bool = False) -> Column:
    return Column(name, type_, null, description, added)


_RUN_COLUMNS = (
    _c("flow", STRING, "the flow, e.g. P->B"),
    _c("source_cluster", STRING, "the flow's source cluster alias"),
    _c("target_cluster", STRING, "the flow's target cluster alias"),
    _c("topic", STRING, "topic on the source cluster"),
    _c("replica_topic", STRING, "topic on the target cluster"),
    _c("partition", INT, "partition (the same on both clusters)"),
    _c("upstream_offset", BIGINT, "u: the first record's offset in the source topic"),
    _c("downstream_offset", BIGINT, "d: its offset in the replica"),
    _c("length", BIGINT, "n >= 1: records u..u+n-1 were written at d..d+n-1"),
    _c("run_id", STRING, "replication run (one job start); orders runs with batch_id"),
    _c("batch_id", BIGINT, "micro-batch within the run"),
    _c("written_at", TIMESTAMP, "when the batch was recorded"),
)

_CHECKPOINT_COLUMNS = (
    _c("checkpoint_id", STRING, "the checkpoint pass"),
    _c("flow", STRING, "the offset_syncs flow translated over, e.g. P->B"),
    _c("direction", STRING, "'forward' | 'reverse'"),
    _c("group_id", STRING, "the consumer group"),
    _c("source_cluster", STRING, "where the group committed"),
    _c("source_topic", STRING, "the committed topic there"),
    _c("partition", INT, "partition"),
    _c("source_offset", BIGINT, "the group's committed offset there"),
    _c("target_cluster", STRING, "where the translation applies"),
    _c("target_topic", STRING, "the topic there"),
    _c("target_offset", BIGINT, "the translation; NULL when untranslatable", null=True),
    _c("status", STRING, "'translated' | 'untranslatable' | 'held' (never backwards)"),
    _c("reason", STRING, "why untranslatable or held", null=True),
    _c("group_rewound", BOOLEAN, "the group's committed offset went back since the last pass"),
    _c("offset_syncs_version", BIGINT, "the offset_syncs version translated over"),
    _c("checkpointed_at", TIMESTAMP, "when the pass ran"),
)

_TABLES = (
    Table(OFFSET_SYNCS, "run (u, d, n) of a flow partition written by one micro-batch",
          _RUN_COLUMNS,
          ("flow", "topic", "partition", "run_id", "batch_id", "upstream_offset"),
          streamed=True),
    Table(CHECKPOINTS, "forward or reverse checkpoint of a group partition in one pass",
          _CHECKPOINT_COLUMNS, ("checkpoint_id", "group_id", "source_topic", "partition"),
          streamed=True),
    Table(GROUP_OFFSETS, "committed offset observed in a group partition on a cluster", (
        _c("observation_id", STRING, "the observation (one pass)"),
        _c("cluster", STRING, "the cluster alias"),
        _c("group_id", STRING, "the consumer group"),
        _c("topic", STRING, "topic"),
        _c("partition", INT, "partition"),
        _c("committed_offset", BIGINT, "the group's committed offset"),
        _c("group_state", STRING, "the group's state (Empty, Stable, ...)", null=True),
        _c("observed_at", TIMESTAMP, "when it was observed"),
    ), ("observation_id", "cluster", "group_id", "topic", "partition"), streamed=True),
    Table(RESUME_POINTS, "offset this tool wrote into a group partition on a cluster", (
        _c("resume_point_id", STRING, "the write"),
        _c("operation_id", STRING, "the failover/failback; NULL for group offset sync",
           null=True),
        _c("reason", STRING, "'group_offset_sync' | 'failover' | 'failback'"),
        _c("cluster", STRING, "where the offset was written"),
        _c("group_id", STRING, "the consumer group"),
        _c("topic", STRING, "topic"),
        _c("partition", INT, "partition"),
        _c("offset", BIGINT, "the offset written"),
        _c("previous_offset", BIGINT, "what the group had there before, if anything",
           null=True),
        _c("checkpoint_id", STRING, "the checkpoint behind it; NULL for a topic start",
           null=True),
        _c("direction", STRING, "the checkpoint's direction", null=True),
        _c("source_cluster", STRING, "the checkpoint's source cluster", null=True),
        _c("source_topic", STRING, "the checkpoint's source topic", null=True),
        _c("source_offset", BIGINT, "the checkpoint's committed offset", null=True),
        _c("offset_syncs_version", BIGINT, "the offset_syncs version translated over",
           null=True),
        _c("checkpoints_version", BIGINT, "the checkpoints version holding the checkpoint",
           null=True),
        _c("written_at", TIMESTAMP, "when it was written"),
    ), ("resume_point_id",), streamed=True),
    Table(OPERATIONS, "failover or failback of a group, with the ledger versions it used", (
        _c("operation_id", STRING, "the operation"),
        _c("kind", STRING, "'failover' | 'failback'"),
        _c("group_id", STRING, "the group moved (spark:<name> for a Spark query)"),
        _c("from_cluster", STRING, "the cluster it left"),
        _c("to_cluster", STRING, "the cluster it resumes on"),
        _c("status", STRING, "'completed' | 'failed'"),
        _c("subscribe_topics", STRINGS, "the topics to subscribe to there"),
        _c("offset_syncs_version", BIGINT, "ledger version used", null=True),
        _c("checkpoints_version", BIGINT, "ledger version used", null=True),
        _c("group_offsets_version", BIGINT, "ledger version used", null=True),
        _c("resume_points_version", BIGINT, "ledger version used", null=True),
        _c("reverse_checkpointing", BOOLEAN, "a reverse checkpoint was part of it"),
        _c("started_at", TIMESTAMP, "when it started"),
        _c("ready_at", TIMESTAMP, "when the group could resume: its offsets written on the "
           "target, their checkpoints in the ledger", null=True),
        _c("seconds_to_ready", DOUBLE, "ready_at - started_at in seconds", null=True),
        _c("message", STRING, "a note (disaster, cutoff, Spark query)", null=True),
    ), ("operation_id",)),
    Table(REPLICATION_PROGRESS, "flow partition: its latest replication state (MERGE)", (
        _c("flow", STRING, "the flow, e.g. P->B"),
        _c("topic", STRING, "topic on the source cluster"),
        _c("replica_topic", STRING, "topic on the target cluster"),
        _c("partition", INT, "partition"),
        _c("last_upstream_offset", BIGINT, "the last replicated record's upstream offset",
           null=True),
        _c("next_upstream_offset", BIGINT, "last + 1: where replication resumes", null=True),
        _c("source_end_offset", BIGINT, "the source partition's end offset", null=True),
        _c("lag", BIGINT, "source end - next upstream offset", null=True),
        _c("newest_record_timestamp", TIMESTAMP, "the newest replicated record's timestamp",
           null=True),
        _c("record_age_ms", BIGINT, "its age when recorded", null=True),
        _c("batch_id", BIGINT, "the micro-batch that recorded it"),
        _c("updated_at", TIMESTAMP, "when it was recorded"),
    ), ("flow", "topic", "partition"), latest_only=True),
    # An operation's own audit evidence, written before its operations row, so that its audit
    # still answers once time travel no longer reaches the versions it recorded.
    Table(OPERATION_RUNS, "span of a flow partition an operation translated over, as its "
          "snapshot held it (run_id 'span', batch_id its position): its audit evidence", (
              _c("operation_id", STRING, "the operation"),
              _c("offset_syncs_version", BIGINT, "the version the spans were loaded at"),
              *_RUN_COLUMNS,
          ), ("operation_id", "flow", "topic", "partition", "batch_id")),
    Table(OPERATION_CHECKPOINTS, "checkpoint row of an operation's pass: its audit evidence", (
        _c("operation_id", STRING, "the operation"),
        _c("checkpoints_version", BIGINT, "the checkpoints version that holds these rows"),
        *_CHECKPOINT_COLUMNS,
    ), ("operation_id", "checkpoint_id", "group_id", "direction", "source_topic", "partition")),
    # Every ACL binding a flow's ACL sync created or deleted on its target (pipelines.acls):
    # who could do what on the target at any moment, and what the sync owns (may remove).
    Table(ACL_SYNCS, "ACL binding a flow's ACL sync added to or removed from its target", (
        _c("sync_id", STRING, "the sync pass"),
        _c("flow", STRING, "the flow, e.g. P->B"),
        _c("source_cluster", STRING, "the flow's source cluster alias"),
        _c("target_cluster", STRING, "the cluster the binding was changed on"),
        _c("action", STRING, "'added' | 'removed'"),
        _c("resource_type", STRING, "'TOPIC' | 'GROUP'"),
        _c("resource_name", STRING, "the topic or group name (or prefix) on the target"),
        _c("pattern_type", STRING, "'LITERAL' | 'PREFIXED'"),
        _c("principal", STRING, "e.g. User:app (User:* for every principal)"),
        _c("host", STRING, "the host the binding applies to ('*': any)"),
        _c("operation", STRING, "e.g. READ, DESCRIBE, ALL"),
        _c("permission_type", STRING, "'ALLOW' | 'DENY'"),
        _c("source_resource_name", STRING, "the source binding's name it came from; NULL for "
           "a removal", null=True),
        _c("synced_at", TIMESTAMP, "when the sync changed it"),
    ), ("sync_id", "resource_type", "resource_name", "pattern_type", "principal", "host",
        "operation", "permission_type")),
    # Recomputable from offset_syncs at any time (ledger.span_snapshots): never audit evidence.
    Table(OFFSET_SYNC_SPANS, "span of a flow partition's current epoch at one offset_syncs "
          "version (run_id 'span', written_at = covered_until, batch_id = the span's position "
          "in its epoch; a windowed partition starts above 0): what store loads start from", (
              _c("offset_syncs_version", BIGINT, "the version the spans cover"),
              _c("covered_until", TIMESTAMP, "the flow's newest written_at at that version"),
              *_RUN_COLUMNS,
              _c("seek_upstream_offset", BIGINT, "a windowed partition's seek floor upstream "
                 "(ledger.spans.seek_floors): from it up to the window, a read reads only the "
                 "runs written since the offset asked; NULL: the whole epoch", null=True,
                 added=True),
              _c("seek_downstream_offset", BIGINT, "the same seek floor on the replica",
                 null=True, added=True),
          ), ("flow", "topic", "partition", "batch_id"), derived=True),
)

TABLES: dict[str, Table] = {t.name: t for t in _TABLES}
"""Every ledger table, in creation order."""

DERIVED: frozenset[str] = frozenset(t.name for t in _TABLES if t.derived)
"""Tables recomputed from others (caches for reads): no audit reads them, none is evidence."""

LATEST_ONLY: frozenset[str] = frozenset(t.name for t in _TABLES if t.derived or t.latest_only)
"""Tables no read time-travels into (the derived ones; ``replication_progress``, read for the
current lag and readiness): their older versions are no evidence, so they keep a short history
(``ledger.maintenance.retention_days``)."""

STREAMED: frozenset[str] = frozenset(t.name for t in _TABLES if t.streamed)
"""Tables a running job commits to every few seconds (``offset_syncs``) or every pass
(``checkpoints``, ``group_offsets``, ``resume_points``): their Delta log and replaced files grow
with the commits, so they keep the shorter ``ledger.streamed.retention.days``; an operation
past it is audited from the evidence it recorded (``ledger.maintenance.Retention``)."""

NATURAL_KEYS: dict[str, tuple[str, ...]] = {t.name: t.key for t in _TABLES}

COLUMNS: dict[str, tuple[Column, ...]] = {t.name: t.columns for t in _TABLES}


def column_names(name: str) -> list[str]:
    """The columns of table ``name``, in order."""
    return TABLES[name].column_names


def added_columns(name: str) -> tuple[Column, ...]:
    """The columns of table ``name`` added after its first release: a table written by an
    earlier release lacks them until its writer adds them (:meth:`ledger.engine.LedgerEngine.
    add_columns`), and its readers do without them meanwhile."""
    return tuple(c for c in TABLES[name].columns if c.added)


def required_columns(name: str) -> list[str]:
    """The columns every table ``name`` has, whichever release created it."""
    return [c.name for c in TABLES[name].columns if not c.added]

PARTITION_COLUMNS: dict[str, tuple[str, ...]] = {name: () for name in TABLES}


# --- derived forms ---------------------------------------------------------------------------

def _spark_type(type_: str) -> Any:
    from pyspark.sql import types as T

    if type_.startswith("array<") and type_.endswith(">"):
        return T.ArrayType(_spark_type(type_[len("array<"):-1]))
    return {STRING: T.StringType(), BIGINT: T.LongType(), INT: T.IntegerType(),
            BOOLEAN: T.BooleanType(), TIMESTAMP: T.TimestampType(),
            DOUBLE: T.DoubleType()}[type_]


_SPARK: dict[str, StructType] = {}


def spark_schema(name: str) -> StructType:
    """The table's Spark schema (imports pyspark: only Spark paths call this)."""
    if name not in _SPARK:
        from pyspark.sql.types import StructField, StructType

        _SPARK[name] = StructType([StructField(c.name, _spark_type(c.type), c.nullable)
                                   for c in TABLES[name].columns])
    return _SPARK[name]


def _arrow_type(type_: str) -> Any:
    import pyarrow as pa

    if type_.startswith("array<") and type_.endswith(">"):
        return pa.list_(_arrow_type(type_[len("array<"):-1]))
    # Spark's TIMESTAMP is an instant (Delta `timestamp`): UTC microseconds in Arrow.
    return {STRING: pa.string(), BIGINT: pa.int64(), INT: pa.int32(), BOOLEAN: pa.bool_(),
            TIMESTAMP: pa.timestamp("us", tz="UTC"), DOUBLE: pa.float64()}[type_]


def arrow_schema(name: str) -> Any:
    """The table's pyarrow schema, as delta-rs creates the table Spark would."""
    import pyarrow as pa

    return pa.schema([pa.field(c.name, _arrow_type(c.type), c.nullable)
                      for c in TABLES[name].columns])


_SPARK_NAMES = {f"{name.upper()}_SCHEMA": name for name in TABLES}


def __getattr__(attr: str) -> Any:
    """``SCHEMAS`` and ``<TABLE>_SCHEMA``: the Spark forms, built on first use (PEP 562)."""
    if attr == "SCHEMAS":
        return {name: spark_schema(name) for name in TABLES}
    if attr in _SPARK_NAMES:
        return spark_schema(_SPARK_NAMES[attr])
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
