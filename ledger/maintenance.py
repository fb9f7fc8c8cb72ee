"""Retention and upkeep of the ledger's Delta tables: ``ledger init`` and ``ledger maintain``.

Invariants:
    * Retention is configuration, per table (:class:`Retention`): every table carries its days
      as ``delta.logRetentionDuration``, ``delta.deletedFileRetentionDuration`` and
      ``delta.checkpointRetentionDuration``. Applying it is idempotent: a table that already has
      the values gains no Delta version.
    * Three horizons, each capped by the one before: ``ledger.audit.retention.days`` (400) for
      the evidence and the operations; ``ledger.streamed.retention.days`` (7) for the tables a
      running job commits to continually (``schemas.STREAMED``); a day for those no read
      time-travels into (``schemas.LATEST_ONLY``). Rows are never deleted: a horizon bounds
      how far time travel reaches, the Delta log, and how long replaced files are kept, never
      the runs, checkpoints, commits or resume points themselves.
    * ``maintain`` never shortens what time travel can reach inside the retention horizon:
      VACUUM keeps every file a version younger than the retention needs (it retains exactly the
      configured days, never fewer), and the log is cleaned only by Delta itself at checkpoint
      time, under the same ``logRetentionDuration``.
    * Compaction (OPTIMIZE) rewrites files but not rows: every table answers the same before and
      after, at its latest version and, through time travel, at every retained version.
    * The Z-order columns are the predicates of the reads the product makes (a flow partition's
      runs by offset; checkpoints and commits by time, see pipelines.checkpoint.history), so
      that data skipping keeps those reads to a few files whatever the ledger's age.
    * Bounded by what was written since the last maintain, not by the history: Delta's
      ``OPTIMIZE ... ZORDER BY`` rewrites every file of the table each time (and VACUUM keeps
      the replaced copy for the retention, so a daily Z-order of a growing table would store a
      copy of it per day). A table is Z-ordered whole only while it holds at most
      ``ZORDER_WHOLE_BYTES``; above that, OPTIMIZE compacts only its files smaller than
      ``COMPACTED_BYTES`` (the small commits since the last maintain; larger files are never
      rewritten again). Appended in time order, the new files keep the time clustering every
      time-window read uses (the span snapshot's tail, checkpoint and commit windows); a read
      of one partition's raw runs over the whole history (a rewind into a snapshot, a load
      without one) reads the files of that history instead of the Z-ordered few.
    * A table no read time-travels into (``schemas.LATEST_ONLY``: the derived span snapshots,
      which a store reads at their latest version and ignores when newer than the version it
      asks for; ``replication_progress``, read for the current lag and readiness, whose version
      no operation records) keeps ``LATEST_ONLY_RETENTION_DAYS`` (1). Both are replaced all
      the time (a span refresh about once a minute for an exactly-once flow, a progress MERGE
      every commit).
    * A ``STREAMED`` table's log gains a commit every few seconds (``offset_syncs``) or every
      pass, and ``maintain`` replaces as many small files a day: kept 400 days, that is
      millions of log files a commit lists and millions of tombstones every log checkpoint
      repeats (``bench/README.md``, "The Delta log at a year"). A week bounds both. The versions
      an operation records in them are read by its audit only, which past the horizon reads the
      evidence the operation recorded (``operation_runs``, ``operation_checkpoints``, kept at
      the audit retention) and answers the same (``pipelines.audit.horizon``).
    * A table nothing was written to since its last OPTIMIZE (only VACUUM and property commits
      after it, and for a whole Z-order the same columns) is not optimized again: the rewrite
      would produce the same files. Most tables of a daily maintain (operations, ACL syncs,
      evidence) change rarely, and each OPTIMIZE costs a Spark job and a Delta version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ledger.config import (
    DEFAULT_AUDIT_RETENTION_DAYS,
    DEFAULT_SPANS_WINDOW,
    DEFAULT_STREAMED_RETENTION_DAYS,
    Config,
)
from ledger.schemas import (
    CHECKPOINTS,
    DERIVED,
    GROUP_OFFSETS,
    LATEST_ONLY,
    OFFSET_SYNC_SPANS,
    OFFSET_SYNCS,
    OPERATION_CHECKPOINTS,
    OPERATION_RUNS,
    RESUME_POINTS,
    STREAMED,
    TABLES,
)
from ledger.span_refresh import RefreshReport, refresh
from ledger.tables import Ledger

ZORDER: dict[str, tuple[str, ...]] = {
    OFFSET_SYNCS: ("topic", "partition", "downstream_offset"),
    # Every read of these two is a time window (the latest per key inside the refresh window,
    # the checkpoints around an operation): clustered by time, a window reads the newest files.
    CHECKPOINTS: ("checkpointed_at",),
    GROUP_OFFSETS: ("observed_at",),
    RESUME_POINTS: ("operation_id", "group_id"),
    # An audit reads one operation's evidence (literal operation ids): a few files.
    OPERATION_RUNS: ("operation_id",),
    OPERATION_CHECKPOINTS: ("operation_id",),
}
"""Per table, the columns OPTIMIZE clusters by (Z-order); other tables are only compacted."""

ZORDER_WHOLE_BYTES = 1 << 30
"""A table holding more than this is no longer Z-ordered whole (see the module invariants)."""

COMPACTED_BYTES = 64 << 20
"""An incremental compaction leaves files of at least this size as they are."""

LATEST_ONLY_RETENTION_DAYS = 1.0
"""The retention of the ``LATEST_ONLY`` tables: a day covers any reader that listed a version's
files before a commit replaced them (readers take seconds), and a day of replaced files is what
VACUUM keeps and the log checkpoints list."""

_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"


def retention_properties(days: float) -> dict[str, str]:
    """The Delta table properties that keep ``days`` of history readable.

    Whole days are written as days; a fraction of a day (tests that expire versions) in whole
    seconds, at least one.
    """
    interval = (f"interval {int(days)} days" if float(days).is_integer()
                else f"interval {max(1, round(days * 86400))} seconds")
    return {
        "delta.logRetentionDuration": interval,
        "delta.deletedFileRetentionDuration": interval,
        "delta.checkpointRetentionDuration": interval,
    }


@dataclass(frozen=True)
class TableDetail:
    """What ``DESCRIBE DETAIL`` says of a table (one query gives all three)."""

    files: int
    size: int
    properties: dict[str, str]


def table_detail(ledger: Ledger, name: str) -> TableDetail:
    row = ledger.spark.sql(f"DESCRIBE DETAIL {ledger.identifier(name)}").first()
    if row is None:
        return TableDetail(0, 0, {})
    return TableDetail(int(row["numFiles"] or 0), int(row["sizeInBytes"] or 0),
                       dict(row["properties"] or {}))


def table_properties(ledger: Ledger, name: str) -> dict[str, str]:
    return table_detail(ledger, name).properties


@dataclass(frozen=True)
class Retention:
    """The days of Delta history each ledger table keeps (see the module invariants)."""

    audit_days: float = DEFAULT_AUDIT_RETENTION_DAYS
    streamed_days: float = DEFAULT_STREAMED_RETENTION_DAYS

    @classmethod
    def of(cls, config: Config) -> Retention:
        return cls(config.audit_retention_days, config.streamed_retention_days)

    def days(self, name: str) -> float:
        """The days table ``name`` keeps."""
        if name in LATEST_ONLY:
            return min(self.audit_days, LATEST_ONLY_RETENTION_DAYS)
        if name in STREAMED:
            return min(self.audit_days, self.streamed_days)
        return self.audit_days

    def line(self) -> str:
        """One line naming the three horizons and the keys that set them."""
        streamed, latest = self.days(min(STREAMED)), self.days(min(LATEST_ONLY))
        return (f"retention {self.audit_days:g} days (ledger.audit.retention.days), "
                f"{streamed:g} for {', '.join(sorted(STREAMED))} "
                f"(ledger.streamed.retention.days), {latest:g} for "
                f"{', '.join(sorted(LATEST_ONLY))}")


def _set_retention(ledger: Ledger, name: str, retention: Retention,
                   current: dict[str, str]) -> bool:
    """Set ``name``'s retention properties unless ``current`` already holds them."""
    wanted = retention_properties(retention.days(name))
    if all(current.get(k) == v for k, v in wanted.items()):
        return False
    assignments = ", ".join(f"'{k}' = '{v}'" for k, v in wanted.items())
    ledger.spark.sql(f"ALTER TABLE {ledger.identifier(name)} SET TBLPROPERTIES ({assignments})")
    return True


def apply_retention(ledger: Ledger, retention: Retention,
                    names: tuple[str, ...] = ()) -> dict[str, bool]:
    """Set the retention properties where they differ; return ``{table: changed}``."""
    return {name: _set_retention(ledger, name, retention, table_properties(ledger, name))
            for name in names or tuple(TABLES)}


@dataclass(frozen=True)
class MaintenanceReport:
    """What ``maintain`` did to one table."""

    table: str
    files_before: int
    files_after: int
    version_before: int
    version_after: int
    retention_changed: bool
    vacuumed: bool
    zorder: tuple[str, ...]
    refreshed: tuple[RefreshReport, ...] = field(default=())
    incremental: bool = False
    optimized: bool = True

    def line(self) -> str:
        clustering = ("empty" if not self.optimized and not self.files_before else
                      "unchanged since its last OPTIMIZE" if not self.optimized else
                      f"zorder by {', '.join(self.zorder)}" if self.zorder else
                      "compacted, new files only" if self.incremental else "compacted")
        return "\n".join([
            f"{self.table:22} files {self.files_before:>5} -> {self.files_after:<5} "
            f"{clustering:50} version {self.version_before} -> {self.version_after}"
            f"{'  retention set' if self.retention_changed else ''}"
            f"{'  vacuumed' if self.vacuumed else ''}",
            *(r.line() for r in self.refreshed)])


# Commits that add no data file: an OPTIMIZE before them still describes the table's files.
_FILELESS_OPERATIONS = frozenset({"VACUUM START", "VACUUM END", "SET TBLPROPERTIES",
                                  "UNSET TBLPROPERTIES", "UPGRADE PROTOCOL"})
_HISTORY_LOOKBACK = 20


def _zorder_of(parameters: dict | None) -> tuple[str, ...]:
    """The Z-order columns an OPTIMIZE commit records (``zOrderBy``, a JSON list)."""
    try:
        return tuple(json.loads((parameters or {}).get("zOrderBy") or "[]"))
    except (TypeError, ValueError):
        return ()


def optimized_since_written(ledger: Ledger, name: str, zorder: tuple[str, ...]) -> bool:
    """Whether the newest commit that may have added files is an OPTIMIZE (Z-ordered by
    ``zorder`` when given): nothing was written since, so another OPTIMIZE would only rewrite
    the same rows into the same files. Unknown (a long run of fileless commits) is False."""
    rows = ledger.spark.sql(f"DESCRIBE HISTORY {ledger.identifier(name)} "
                            f"LIMIT {_HISTORY_LOOKBACK}").select(
        "operation", "operationParameters").collect()
    for row in rows:  # newest first
        operation = row["operation"]
        if operation in _FILELESS_OPERATIONS:
            continue
        return operation == "OPTIMIZE" and (
            not zorder or _zorder_of(row["operationParameters"]) == zorder)
    return False


def _clustering(name: str, size: int) -> tuple[tuple[str, ...], bool]:
    """How ``name`` is optimized at ``size`` bytes: Z-ordered whole while small (its columns),
    else only its small files compacted (incremental); a table without Z-order columns
    compacted as Delta's OPTIMIZE does. Returns ``(zorder, incremental)``."""
    zorder = ZORDER.get(name, ())
    if not zorder:
        return (), False
    return (zorder, False) if size <= ZORDER_WHOLE_BYTES else ((), True)


def _optimize(ledger: Ledger, name: str, zorder: tuple[str, ...], incremental: bool) -> None:
    """OPTIMIZE ``name`` as :func:`_clustering` decided."""
    spark, table = ledger.spark, ledger.identifier(name)
    if not zorder and not incremental:
        spark.sql(f"OPTIMIZE {table}").collect()
        return
    if zorder:
        columns = ", ".join(f"`{c}`" for c in zorder)
        spark.sql(f"OPTIMIZE {table} ZORDER BY ({columns})").collect()
        return
    previous = spark.conf.get(_MIN_FILE_SIZE, None)
    spark.conf.set(_MIN_FILE_SIZE, str(COMPACTED_BYTES))
    try:
        spark.sql(f"OPTIMIZE {table}").collect()
    finally:
        if previous is None:
            spark.conf.unset(_MIN_FILE_SIZE)
        else:
            spark.conf.set(_MIN_FILE_SIZE, previous)


def _checkpoint(ledger: Ledger, name: str) -> None:
    """Write a Delta checkpoint now; Delta then cleans log files past the log retention.

    Spark Connect (Databricks serverless) exposes no JVM: there the call is skipped, and Delta
    writes its own checkpoint every 10 commits (cleaning the log at the same retention).
    """
    try:
        jvm = ledger.spark.sparkContext._jvm
    except Exception:  # Spark Connect: no SparkContext
        return
    if jvm is None:
        return
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog
    log = (delta_log.forTable(ledger.spark._jsparkSession, ledger.table_path(name))
           if ledger.path_based else
           delta_log.forTable(ledger.spark._jsparkSession,
                              jvm.org.apache.spark.sql.catalyst.TableIdentifier(
                                  name, jvm.scala.Some(ledger.location))))
    log.checkpoint()


def _vacuum(ledger: Ledger, name: str) -> None:
    """VACUUM at the table's own deletedFileRetentionDuration (set to exactly the configured
    retention; a RETAIN clause takes whole hours only).

    VACUUM lists the table's files in ``spark.sql.sources.parallelPartitionDiscovery.
    parallelism`` tasks (10,000 by default: minutes of task overhead for a ledger table of a
    few hundred files); a few tasks per core list them as fast.
    """
    spark = ledger.spark
    key = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
    previous = spark.conf.get(key, None)
    try:
        cores = spark.sparkContext.defaultParallelism
    except Exception:  # Spark Connect (serverless) has no SparkContext: its default stands
        cores = None
    if cores is not None:
        spark.conf.set(key, str(max(8, 4 * cores)))
    try:
        spark.sql(f"VACUUM {ledger.identifier(name)}").collect()
    finally:
        if cores is not None and previous is None:
            spark.conf.unset(key)
        elif cores is not None:
            spark.conf.set(key, previous)


def maintain(ledger: Ledger, retention: Retention, names: tuple[str, ...] = (), *,
             vacuum: bool = True, flows: dict[str, tuple[str, str]] | None = None,
             window: int = DEFAULT_SPANS_WINDOW,
             rebuild_spans: bool = False) -> list[MaintenanceReport]:
    """Compact (and Z-order), checkpoint, and VACUUM each table within its ``retention``.

    With ``offset_sync_spans`` among the tables (the default: all), each flow's persisted spans
    are first refreshed to the current ``offset_syncs`` version (after offset_syncs' own
    compaction, so its compacted files all lie before the new ``covered_until``).

    Args:
        flows: ``{flow: (source, target)}`` of the configured flows, for the span refresh.
        window: ``ledger.spans.window``, for the span refresh.
        rebuild_spans: the refresh computes the spans from the raw runs (not incrementally).
    """
    ledger.require(*(n for n in names or TABLES if n not in DERIVED), verify=True)
    ledger.init()  # a derived table a ledger predates is created here
    reports = []
    for name in [n for n in TABLES if n in (names or TABLES)]:
        before, version_before = table_detail(ledger, name), ledger.version(name)
        changed = _set_retention(ledger, name, retention, before.properties)
        refreshed = (tuple(refresh(ledger, flows or {}, window=window,
                                         rebuild=rebuild_spans))
                     if name == OFFSET_SYNC_SPANS else ())
        zorder, incremental = _clustering(name, before.size)
        # A refresh commits new span files, which the history then shows as written.
        optimize = not ((before.files == 0 and not refreshed)
                        or optimized_since_written(ledger, name, zorder))
        if optimize:
            _optimize(ledger, name, zorder, incremental)
        else:
            zorder, incremental = (), False
        _checkpoint(ledger, name)
        if vacuum:
            _vacuum(ledger, name)
        reports.append(MaintenanceReport(name, before.files, table_detail(ledger, name).files,
                                         version_before, ledger.version(name), changed, vacuum,
                                         zorder, refreshed, incremental, optimize))
    return reports
