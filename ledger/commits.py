"""JVM-free commits to a path ledger with delta-rs: the same Delta commits Spark makes.

A replication batch writes two small commits: its runs appended to ``offset_syncs`` and its
partitions' rows MERGEd into ``replication_progress``; a checkpoint pass, a failover or a
failback appends a few rows to ``group_offsets``, ``checkpoints``, ``resume_points``,
``operation_*`` and ``operations``. Through Spark each costs a JVM, Delta's class loading and a
job of its own (seconds of CPU for a few kilobytes); here they are made by the ``deltalake``
package (delta-rs) in this process, as the same Delta commits:

    offset_syncs        append  + txn(appId = offset-ledger-replicate-<flow>, version = batch)
    replication_progress MERGE on (flow, topic, partition): update all / insert all
    other tables        append (as ``Ledger.append`` without a txn pair) or MERGE on the
                        natural key; ``offset_sync_spans``: replace where (one commit)

``ledger.engine`` decides which engine commits (and falls back to Spark).

Invariants:
    * Spark's rule for ``txnAppId``/``txnVersion`` holds: an append whose ``(app_id, version)``
      is already at or below the version the table's log holds for ``app_id`` writes nothing
      (:data:`ALREADY_RECORDED`). Two writers committing the same app id at once cannot both
      win: delta-rs's conflict checker fails the later commit (``ConcurrentTransaction``),
      which is raised as :class:`CommitConflict`, as Spark's ``ConcurrentTransactionException``
      fails its append.
    * Only a ledger that ``ledger.direct`` reads as Spark does (a filesystem path seen alike by
      this process and Spark, a complete Delta log, a protocol delta-rs writes) is written
      here. Anything else, and any failure other than a conflict, is :data:`UNAVAILABLE`: the
      caller commits the same rows through Spark (``ledger.tables.Ledger``). That fallback is
      always safe, even after a failure that left a commit behind: the append's txn pair makes
      a repeat a no-op, and the MERGE on the natural key is idempotent.
    * Rows are converted with the table's own Arrow schema, so a commit never changes the
      table's schema or protocol; only :func:`add_columns` does, and only by adding the
      nullable columns a later release added to the table (``ledger.schemas.added_columns``).
    * Log checkpoints are written here only (delta-rs's own post-commit checkpoint is off: one
      policy, never two checkpoints of a version), by :func:`checkpoint_due`: at Spark's
      interval (``delta.checkpointInterval``, default 10; delta-rs alone would write one every
      100 commits) while the last checkpoint is small, and every ``actions /
      ACTIONS_PER_COMMIT`` commits once it holds more actions than that: a table that keeps a
      week of tombstones (120,000 for ``offset_syncs`` at 5 s commits) would otherwise write a
      9 MB checkpoint every 50 s, 16 GB a day kept for the week. So a checkpoint costs at most
      ``ACTIONS_PER_COMMIT`` actions per commit, and a reader replays at most as many JSON
      commits after it as a checkpoint of that size takes to read, whichever engine wrote it.
    * A commit never cleans the log: delta-rs would list the whole log folder after every
      commit for expired entries (0.9 s a commit at 100,000 log files, which a ledger committing
      every 5 s reaches in 6 days), where Spark cleans when it checkpoints: ``ledger
      maintain`` removes the log entries past the retention (``bench.log_growth``).
    * Both engines commit with put-if-absent on the log (rename without replace on a local
      filesystem), so they may share a table: ``ledger maintain``'s Spark OPTIMIZE and VACUUM
      do not conflict with a blind append.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledger import direct
from ledger.clock import aware
from ledger.errors import OffsetLedgerError, first_line
from ledger.schemas import TABLES, added_columns, arrow_schema

log = logging.getLogger(__name__)

SPARK_CHECKPOINT_INTERVAL = 10  # Delta Lake's default delta.checkpointInterval
ACTIONS_PER_COMMIT = 500
"""A log checkpoint's actions per commit since the last, at most (:func:`checkpoint_due`)."""
UNAVAILABLE = direct.UNAVAILABLE  # commit it with Spark instead
ALREADY_RECORDED = direct.Marker("ALREADY_RECORDED")  # the txn pair is in the log already
COMMITTED = direct.Marker("COMMITTED")


# Another writer's commit touched the files a MERGE read (two replicate jobs MERGE their flows'
# rows into replication_progress): the MERGE is run again over the newer table. It is an
# upsert on the natural key, so running it again is always safe (torture history 21006 alo).
MERGE_CONFLICT_ATTEMPTS = 8


def merge_conflict(exc: BaseException) -> bool:
    """A MERGE failed only because a concurrent commit changed what it read (either engine):
    delta-rs's ``CommitFailedError`` ("a concurrent transaction ..."), Delta Lake's
    ``DELTA_CONCURRENT_*`` (``ConcurrentAppendException`` and its kin)."""
    text = f"{type(exc).__name__}: {exc}"
    return ("CommitFailedError" in text and "concurrent" in text.lower()) or any(
        code in text for code in ("DELTA_CONCURRENT_APPEND", "DELTA_CONCURRENT_DELETE_READ",
                                  "DELTA_CONCURRENT_DELETE_DELETE", "ConcurrentAppendException",
                                  "ConcurrentDeleteReadException",
                                  "ConcurrentDeleteDeleteException"))


def conflict_pause(attempt: int) -> None:
    """A short, growing, jittered pause before a MERGE runs again (writers do not collide in
    step again)."""
    time.sleep(min(2.0, 0.05 * 2 ** attempt) * (0.5 + random.random()))


class CommitConflict(OffsetLedgerError):
    """Another writer committed the same application transaction at the same time."""


def _table(location: str, name: str, opened: direct.Tables | None = None) -> Any:
    """The table opened with delta-rs at its newest version, or UNAVAILABLE (see the module
    invariants); with ``opened``, the one the caller's reads opened (``direct.open_table``)."""
    root = direct.local_path(location)
    if root is None:
        return UNAVAILABLE
    try:
        import deltalake  # noqa: F401
    except ImportError:
        return UNAVAILABLE
    path = root / name
    try:
        newest = direct.newest_version(path, opened)
        if newest is None:
            return UNAVAILABLE
        return direct.open_table(path, None, newest, opened)
    except Exception as exc:
        _fallback(location, name, exc)
        return UNAVAILABLE


def _fallback(location: str, name: str, exc: BaseException) -> None:
    log.info("ledger table %s at %s not committed with delta-rs (%s): committing with Spark",
             name, location, first_line(exc, 200))


def _value(value: Any) -> Any:
    # A naive datetime is local time, as Spark's createDataFrame reads it (ledger.clock).
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return aware(value)
    return value


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


def _column(kind: Any, values: list[Any]) -> Any:
    """One column as an arro3 array of the table's type ``kind`` (arro3 converts Python values
    without pyarrow's import of numpy and pandas, a large part of a verb's second)."""
    from arro3.core import Array, DataType, list_array

    if DataType.is_timestamp(kind):
        if kind.tz != "UTC" or kind.time_unit not in ("us", "ns"):
            raise ValueError(f"no direct conversion for {kind}")
        scale = 1000 if kind.time_unit == "ns" else 1
        ticks = [None if v is None else (_value(v) - _EPOCH) // _MICROSECOND * scale
                 for v in values]
        return Array(ticks, type=DataType.int64()).cast(kind)
    if DataType.is_list(kind):
        offsets, items = [0], []
        for v in values:
            if v is None:
                raise ValueError("a NULL list")  # pyarrow's conversion handles it
            items.extend(v)
            offsets.append(len(items))
        return list_array(Array(offsets, type=DataType.int32()),
                          _column(kind.value_type, items), type=kind)
    if DataType.is_nested(kind):
        raise ValueError(f"no direct conversion for {kind}")
    return Array(values, type=kind)


def _arrow(table: Any, rows: Sequence[Mapping[str, Any]]) -> Any:
    """``rows`` as an Arrow table of ``table``'s own schema (arro3; pyarrow where arro3
    cannot convert a column)."""
    try:
        from arro3.core import Schema, Table

        schema = Schema.from_arrow(table.schema())
        # Only a time needs _value (in _column): a plain get per cell for the other columns.
        return Table.from_arrays(
            [_column(f.type, [row.get(f.name) for row in rows]) for f in schema],
            schema=schema)
    except Exception:  # arro3 missing or a type it lacks: pyarrow's conversion (same rows)
        import pyarrow as pa

        schema = pa.schema(table.schema())
        return pa.Table.from_pylist([{f.name: _value(row.get(f.name)) for f in schema}
                                     for row in rows], schema=schema)


def _hooks() -> Any:
    """delta-rs's post-commit hooks, off (see the module invariants)."""
    from deltalake import PostCommitHookProperties

    return PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def checkpoint_due(version: int, interval: int, last: tuple[int, int] | None) -> bool:
    """Whether the commit of ``version`` is followed by a log checkpoint.

    ``last`` is the last checkpoint's ``(version, actions)``. Without one, Spark's rule (a
    version divisible by ``interval``); with one, ``version`` at least ``max(interval,
    actions // ACTIONS_PER_COMMIT)`` versions after it (see the module invariants)::

        last checkpoint  v=1000, 120,000 actions  ->  every 240 commits: 1240, 1480, ...
        last checkpoint  v=1000,      300 actions ->  every 10 commits:  1010, 1020, ...
    """
    if last is None:
        return version % max(1, interval) == 0
    last_version, actions = last
    return version - last_version >= max(interval, actions // ACTIONS_PER_COMMIT)


def _checkpoint_at_interval(table: Any) -> None:
    """A log checkpoint after a commit when :func:`checkpoint_due`. The commit has landed: a
    checkpoint that fails is logged, never raised, since the caller's fallback would commit
    the rows again (a plain append has no txn pair to make that a no-op); the next due commit
    writes one."""
    try:
        configured = table.metadata().configuration.get("delta.checkpointInterval")
        interval = max(1, int(configured) if configured else SPARK_CHECKPOINT_INTERVAL)
        path = direct.local_path(str(table.table_uri))
        last = direct.last_checkpoint(path) if path is not None else None
        if checkpoint_due(table.version(), interval, last):
            table.create_checkpoint()
    except Exception as exc:
        log.warning("ledger table at %s: log checkpoint not written after commit %s (%s)",
                    table.table_uri, table.version(), first_line(exc, 200))


def append_with_txn(location: str, name: str, rows: Sequence[Mapping[str, Any]], *,
                    app_id: str, version: int,
                    opened: direct.Tables | None = None) -> direct.Marker:
    """Append ``rows`` in one commit carrying the transaction ``(app_id, version)``.

    Returns :data:`COMMITTED`, :data:`ALREADY_RECORDED` (nothing written) or
    :data:`UNAVAILABLE` (nothing written here: commit with Spark). Raises
    :class:`CommitConflict` when a concurrent commit of ``app_id`` won.
    """
    table = _table(location, name, opened)
    if table is UNAVAILABLE:
        return UNAVAILABLE
    from deltalake import CommitProperties, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError

    try:
        recorded = table.transaction_version(app_id)
        if recorded is not None and recorded >= version:
            return ALREADY_RECORDED
        data = _arrow(table, rows)
        txn = Transaction(app_id, int(version), int(time.time() * 1000))
        write_deltalake(table, data, mode="append",
                        commit_properties=CommitProperties(app_transactions=[txn]),
                        post_commithook_properties=_hooks())
        _checkpoint_at_interval(table)
    except Exception as exc:
        if isinstance(exc, CommitFailedError) and "concurrent transaction" in str(exc).lower():
            raise CommitConflict(f"ledger table {name} at {location}: another writer recorded "
                                 f"transaction {app_id} version {version} at the same time"
                                 ) from exc
        _fallback(location, name, exc)
        return UNAVAILABLE
    return COMMITTED


def merge_on_keys(location: str, name: str, rows: Sequence[Mapping[str, Any]],
                  keys: Iterable[str], opened: direct.Tables | None = None) -> direct.Marker:
    """Upsert ``rows`` on ``keys`` (update all columns, insert new keys) in one commit.

    Returns :data:`COMMITTED` or :data:`UNAVAILABLE` (commit with Spark: the upsert is
    idempotent, so a failed attempt here followed by Spark's gives the same table).
    """
    predicate = " AND ".join(f't."{k}" = s."{k}"' for k in keys)
    for attempt in range(MERGE_CONFLICT_ATTEMPTS):
        table = _table(location, name, opened if attempt == 0 else None)
        if table is UNAVAILABLE:
            return UNAVAILABLE
        try:
            (table.merge(_arrow(table, rows), predicate=predicate, source_alias="s",
                         target_alias="t", post_commithook_properties=_hooks())
             .when_matched_update_all().when_not_matched_insert_all().execute())
            _checkpoint_at_interval(table)
            return COMMITTED
        except Exception as exc:
            if not merge_conflict(exc) or attempt == MERGE_CONFLICT_ATTEMPTS - 1:
                _fallback(location, name, exc)
                return UNAVAILABLE
            conflict_pause(attempt)
    return UNAVAILABLE


def append(location: str, name: str, rows: Sequence[Mapping[str, Any]],
           opened: direct.Tables | None = None) -> direct.Marker:
    """Append ``rows`` in one commit (``Ledger.append`` without a txn pair).

    Returns :data:`COMMITTED` or :data:`UNAVAILABLE` (nothing written here: commit with
    Spark). No rows: nothing is written, :data:`COMMITTED`.
    """
    if not rows:
        return COMMITTED
    table = _table(location, name, opened)
    if table is UNAVAILABLE:
        return UNAVAILABLE
    from deltalake import write_deltalake

    try:
        write_deltalake(table, _arrow(table, rows), mode="append",
                        post_commithook_properties=_hooks())
        _checkpoint_at_interval(table)
    except Exception as exc:
        _fallback(location, name, exc)
        return UNAVAILABLE
    return COMMITTED


def replace_where(location: str, name: str, rows: Sequence[Mapping[str, Any]],
                  predicate: str, opened: direct.Tables | None = None) -> direct.Marker:
    """Replace the rows matching the SQL ``predicate`` with ``rows``, in one commit
    (``Ledger.replace``). Returns :data:`COMMITTED` or :data:`UNAVAILABLE`."""
    table = _table(location, name, opened)
    if table is UNAVAILABLE:
        return UNAVAILABLE
    from deltalake import write_deltalake

    try:
        write_deltalake(table, _arrow(table, rows), mode="overwrite", predicate=predicate,
                        post_commithook_properties=_hooks())
        _checkpoint_at_interval(table)
    except Exception as exc:
        _fallback(location, name, exc)
        return UNAVAILABLE
    return COMMITTED


_DELTA_TYPES = {"bigint": "long", "int": "integer", "string": "string",
                "boolean": "boolean", "timestamp": "timestamp", "double": "double"}


def add_columns(location: str, name: str, opened: direct.Tables | None = None
                ) -> list[str] | direct.Marker:
    """Add to table ``name`` the nullable columns a later release added that it lacks (one
    metadata commit, no data file written); return their names, or :data:`UNAVAILABLE`."""
    table = _table(location, name, opened)
    if table is UNAVAILABLE:
        return UNAVAILABLE
    from deltalake.schema import Field, PrimitiveType

    have = {f.name for f in table.schema().fields}
    missing = [c for c in added_columns(name) if c.name not in have]
    try:
        if missing:
            table.alter.add_columns([Field(c.name, PrimitiveType(_DELTA_TYPES[c.type]),
                                           nullable=True) for c in missing])
    except Exception as exc:
        _fallback(location, name, exc)
        return UNAVAILABLE
    return [c.name for c in missing]


def create_missing_tables(location: str) -> list[str] | direct.Marker:
    """Create the ledger's missing tables at a local path with delta-rs, as ``ledger init``
    creates them with Spark (the columns of ``ledger.schemas``, Spark's types); return the
    names created, or :data:`UNAVAILABLE` (not a local path, or delta-rs failed).

    For an installation without Spark (``pip install offset-ledger``: replicate copies and
    commits with delta-rs); where Spark is installed it creates the tables (``Ledger.init``).
    An existing table is never touched.
    """
    from deltalake import DeltaTable  # a base requirement, unlike Spark

    root = direct.local_path(location)
    if root is None:
        return UNAVAILABLE
    created = []
    for name in TABLES:
        if direct.version(location, name) is not direct.ABSENT:
            continue
        try:
            DeltaTable.create(str(root / name), arrow_schema(name), mode="ignore")
        except Exception as exc:
            _fallback(location, name, exc)
            return UNAVAILABLE
        created.append(name)
    return created
