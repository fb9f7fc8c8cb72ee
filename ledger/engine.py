"""Which engine reads and commits a ledger: delta-rs in this process, or Spark.

Every verb that reads or writes the ledger (checkpoint, translate, status, failover, failback,
audit of one operation) goes through one :class:`LedgerEngine`; it alone decides::

    ledger.location             runtime                     engine
    a local path (or file://)   a plain program             delta-rs: ledger.direct reads,
                                                            ledger.commits writes, no JVM
    a local path                spark-submit, Databricks    Spark (ledger.tables.Ledger)
    a catalog schema, an        any                         Spark
      object store, a path on
      another default FS
    delta-rs cannot read or     any                         Spark from then on: it names the
      write a table (damaged,                               damage (``ledger.tables.damaged``)
      a feature delta-rs lacks,                             or creates the missing tables
      a table not created yet)

Reads are SQL written once for both engines: ``{name}`` placeholders become the table (Spark:
``delta.`path``` or ``schema.table``, with ``VERSION AS OF`` for time travel; delta-rs: the
registered name) and ``{partition}`` the quoted column, so both engines push the same
predicates down and Delta skips the same files. Rows come back as dicts with timestamps as
naive local datetimes, as Spark's ``collect()`` gives them: a verb that computes with one (an
age, a window, a comparison with now) makes it aware with ``ledger.clock.aware``.

Invariants:
    * Same commits whichever engine makes them (``ledger.commits``): an append is one commit
      (with its txn pair when the caller gives one), a MERGE upserts on the natural key.
      A commit delta-rs declined made nothing it can repeat: the Spark commit that follows is
      the only one (a declined append wrote nothing; a MERGE is idempotent).
    * Once delta-rs declines a read or a commit, the engine uses Spark for the rest of its
      life: a verb never mixes answers of a table one engine reads and the other cannot.
    * The Spark session starts only when Spark is needed (:attr:`spark`), never at import.
    * A delta-rs store load is kept for the engine's life, by flow and ``offset_syncs``
      version: a later load of the same version and of topics it holds (a move's plan after
      its coverage check) gets it again instead of a second read. A version is immutable, and
      a store holding more partitions than asked answers the asked ones the same.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ledger import commits, direct
from ledger.clock import local_naive, local_naive_converter
from ledger.schemas import DERIVED, NATURAL_KEYS, OFFSET_SYNCS, TABLES, spark_schema

# Re-exported: the verbs import the literals with the engine that runs their SQL.
from ledger.sql import literal, literals, quoted, timestamp  # noqa: F401

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ledger.store import OffsetSyncStore
    from ledger.tables import Ledger

log = logging.getLogger(__name__)

ENGINES = ("auto", "spark")
DIRECT, SPARK = "delta-rs", "spark"


def _local_naive(value: Any, convert: Callable[[dt.datetime], dt.datetime] = local_naive
                 ) -> Any:
    if isinstance(value, dt.datetime):
        return convert(value)
    if isinstance(value, dict):
        return {k: _local_naive(v, convert) for k, v in value.items()}
    if isinstance(value, list):
        return [_local_naive(v, convert) for v in value]
    return value


def _rows_local_naive(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with every time as :func:`local_naive`, converting only the columns that hold
    one (a column's values share one type: the first non-null value tells)."""
    if not rows:
        return rows
    timed = []
    for key in rows[0]:
        first = next((r[key] for r in rows if r[key] is not None), None)
        if isinstance(first, dt.datetime | dict | list):
            timed.append(key)
    convert = local_naive_converter()
    for row in rows:
        for key in timed:
            value = row[key]
            row[key] = (convert(value) if isinstance(value, dt.datetime)
                        else _local_naive(value, convert))
    return rows


class LedgerEngine:
    """The ledger at ``location`` through delta-rs where it can, Spark otherwise.

    Args:
        location: ``ledger.location``.
        session: returns the SparkSession, starting it on the first call.
        engine: ``auto`` (delta-rs where the ledger allows) or ``spark``.
        ledger: an open Spark ``Ledger`` to use (then ``engine`` is Spark).
    """

    def __init__(self, location: str, session: Callable[[], SparkSession] | None = None, *,
                 engine: str = "auto", ledger: Ledger | None = None) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
        self.location = location
        self._session = session
        self._ledger = ledger
        self._direct = (ledger is None and engine == "auto"
                        and direct.local_path(location) is not None)
        self.declined: str | None = None  # why delta-rs gave way to Spark
        self._opened: direct.Tables = {}  # one log replay per table for this engine's reads
        # (flow, offset_syncs version) -> the store loaded (OffsetSyncStore.topics: what it holds)
        self._stores: dict[tuple[str, int], OffsetSyncStore] = {}

    @classmethod
    def of(cls, ledger: LedgerEngine | Ledger) -> LedgerEngine:
        """``ledger`` itself, or a Spark engine over an open Spark ``Ledger``."""
        return ledger if isinstance(ledger, LedgerEngine) else cls(ledger.location,
                                                                   ledger=ledger)

    # --- which engine ----------------------------------------------------------------------

    @property
    def direct(self) -> bool:
        """Whether the next read or commit goes through delta-rs."""
        return self._direct

    @property
    def name(self) -> str:
        return DIRECT if self._direct else SPARK

    def decline(self, why: str) -> None:
        """Spark from now on (see the module invariants)."""
        if self._direct:
            log.info("ledger at %s: %s; reading and committing with Spark", self.location, why)
            self._direct, self.declined = False, why

    @property
    def started(self) -> bool:
        """Whether a Spark session is open for this engine."""
        return self._ledger is not None

    @property
    def ledger(self) -> Ledger:
        """The Spark ``Ledger`` (its session starts now if it has not yet)."""
        if self._ledger is None:
            if self._session is None:
                raise RuntimeError("this ledger engine has no Spark session factory")
            from ledger.tables import Ledger

            self._ledger = Ledger(self._session(), self.location)
        return self._ledger

    @property
    def spark(self) -> SparkSession:
        return self.ledger.spark

    # --- reads -----------------------------------------------------------------------------

    def query(self, sql: str, versions: Mapping[str, int | None] | None = None,
              **tables: str) -> list[dict[str, Any]]:
        """Rows of ``sql`` where ``{alias}`` names ``tables[alias]`` (a ledger table) and
        ``{partition}`` the quoted column; ``versions`` maps aliases to a Delta version."""
        versions = {k: v for k, v in (versions or {}).items() if v is not None}
        if self._direct:
            text = sql.format(partition='"partition"', **{a: a for a in tables})
            rows = direct.query(self.location, tables, text, versions, self._opened)
            if isinstance(rows, list):
                return _rows_local_naive(rows)
            self.decline("a table is missing" if rows is direct.ABSENT
                         else "delta-rs cannot read a table")
        ledger = self.ledger
        refs = {}
        for alias, name in tables.items():
            ref = ledger.identifier(name)
            refs[alias] = f"{ref} VERSION AS OF {int(versions[alias])}" if alias in versions \
                else ref
        text = sql.format(partition="`partition`", **refs)
        try:
            return [r.asDict(recursive=True) for r in ledger.spark.sql(text).collect()]
        except Exception as exc:
            from ledger.tables import damage_from

            damage = damage_from(exc, self.location)
            if damage is not None:
                raise damage from exc
            raise

    def version(self, name: str) -> int:
        """The table's current Delta version."""
        if self._direct:
            found = direct.version(self.location, name)
            if isinstance(found, int):
                return found
            self.decline(f"the version of {name} is not in its log's file names")
        return self.ledger.version(name)

    def exists(self, name: str) -> bool:
        if self._direct:
            found = direct.version(self.location, name)
            if isinstance(found, int):
                return True
            if found is direct.ABSENT:
                return False
        return self.ledger.exists(name)

    def _readable(self, names: Iterable[str]) -> bool:
        """Every table is there with a complete Delta log (its file names: nothing is opened).

        A table is opened by the first query that reads it: a verb replays the logs of the
        tables it reads only. One delta-rs cannot open (a damaged log, a feature it lacks,
        missing columns) turns the engine to Spark there, which names the damage.
        """
        root = direct.local_path(self.location)
        return root is not None and all(direct.complete_version(root / n) is not None
                                        for n in names)

    def require(self, *names: str) -> None:
        """As ``Ledger.require``: every table (default: all but derived ones) exists and reads;
        a missing or damaged one raises ``LedgerError`` (Spark names the damage)."""
        names = names or tuple(n for n in TABLES if n not in DERIVED)
        if self._direct:
            found = {n: direct.version(self.location, n) for n in names}
            missing = [n for n, v in found.items() if v is direct.ABSENT]
            if missing:
                from ledger.tables import LedgerError

                raise LedgerError(f"ledger tables missing at {self.location}: "
                                  f"{', '.join(missing)} (run `offset-ledger ledger init`)")
            if self._readable(names):
                return
            self.decline("delta-rs cannot read every table")
        self.ledger.require(*names)

    def init(self) -> None:
        """As ``Ledger.init``: tables created when missing (by Spark, once), never altered."""
        if self._direct and self._readable(TABLES):
            return
        if self._direct:
            # A new ledger: delta-rs creates the missing tables, no JVM started. A damaged one
            # (or one delta-rs cannot create): Spark creates the tables, or names the damage.
            if isinstance(commits.create_missing_tables(self.location), list) \
                    and self._readable(TABLES):
                return
            self.ledger.init()
            if not self._readable(TABLES):
                self.decline("delta-rs cannot read every table")
            return
        self.ledger.init()

    # --- writes ----------------------------------------------------------------------------

    def _spark_frame(self, name: str, rows: Sequence[Mapping[str, Any]]) -> Any:
        return self.spark.createDataFrame([dict(r) for r in rows], spark_schema(name))

    def append(self, name: str, rows: Sequence[Mapping[str, Any]], *,
               txn: tuple[str, int] | None = None) -> None:
        """Append ``rows`` (dicts with the table's columns) in one commit; with ``txn``
        (``(app_id, version)``), a repeat of the same pair writes nothing."""
        if not rows:
            return
        if self._direct:
            outcome = (commits.append(self.location, name, rows, self._opened) if txn is None
                       else commits.append_with_txn(self.location, name, rows, app_id=txn[0],
                                                    version=txn[1], opened=self._opened))
            if outcome is not commits.UNAVAILABLE:
                return
            self.decline(f"delta-rs cannot commit to {name}")
        app_id, version = txn if txn is not None else (None, None)
        self.ledger.append(name, self._spark_frame(name, rows), txn_app_id=app_id,
                           txn_version=version)

    def merge(self, name: str, rows: Sequence[Mapping[str, Any]],
              keys: tuple[str, ...] | None = None) -> None:
        """Upsert ``rows`` on the natural key (update all columns, insert new keys)."""
        if not rows:
            return
        keys = keys or NATURAL_KEYS[name]
        if self._direct:
            if commits.merge_on_keys(self.location, name, rows, keys,
                                     self._opened) is commits.COMMITTED:
                return
            self.decline(f"delta-rs cannot commit to {name}")
        self.ledger.merge(name, self._spark_frame(name, rows), keys)

    def replace(self, name: str, rows: Sequence[Mapping[str, Any]], column: str,
                value: str) -> None:
        """Replace the rows whose ``column`` equals ``value`` with ``rows``, in one commit."""
        if self._direct:
            predicate = f"{column} = {quoted(value)}"
            if commits.replace_where(self.location, name, rows, predicate,
                                     self._opened) is commits.COMMITTED:
                return
            self.decline(f"delta-rs cannot commit to {name}")
        from pyspark.sql import functions as F

        self.ledger.replace(name, self._spark_frame(name, rows), F.col(column) == value)

    def columns(self, name: str) -> set[str]:
        """The columns table ``name`` has (one an earlier release created may lack the
        columns added since: ``ledger.schemas.added_columns``)."""
        if self._direct:
            found = direct.columns(self.location, name, self._opened)
            if isinstance(found, set):
                return found
            self.decline(f"delta-rs cannot open {name}")
        return set(self.ledger.read(name).columns)

    def add_columns(self, name: str) -> list[str]:
        """Add the columns a later release added that table ``name`` lacks (a metadata commit;
        none when it has them all): what a writer of the table does before writing them."""
        from ledger.schemas import added_columns

        have = self.columns(name)
        missing = [c for c in added_columns(name) if c.name not in have]
        if not missing:
            return []
        if self._direct:
            done = commits.add_columns(self.location, name, self._opened)
            if isinstance(done, list):
                return done
            self.decline(f"delta-rs cannot add columns to {name}")
        self.spark.sql(f"ALTER TABLE {self.ledger.identifier(name)} ADD COLUMNS ("
                       + ", ".join(f"`{c.name}` {c.type.upper()}" for c in missing) + ")")
        return [c.name for c in missing]

    # --- offset-sync stores ----------------------------------------------------------------

    def load_store(self, flow: str, version: int | None = None,
                   topics: set[str] | None = None,
                   partitions: set[tuple[str, int]] | None = None,
                   raw: bool = False) -> OffsetSyncStore:
        """``OffsetSyncStore.load`` through this engine (the same spans either way); the
        store deepens its windows through this engine too (delta-rs, else Spark)."""
        from ledger.store import OffsetSyncStore

        if self._direct:
            # The partitions are filtered after delta-rs's query (ledger.store): a load of
            # their topics costs the same, and serves a later load of those topics too. A
            # raw load (a window's history) is of a few partitions, and not kept.
            version = self.version(OFFSET_SYNCS) if version is None else version
            held = None if raw else self._stores.get((flow, version))
            if held is not None and held.holds(topics):
                return held
            store = OffsetSyncStore.load_direct(self, flow, version, topics,
                                                partitions if raw else None, raw=raw)
            if store is not None:
                if not raw:
                    self._stores[(flow, version)] = store
                return store
            self.decline(f"the runs of flow {flow} are not read with delta-rs")
        return OffsetSyncStore.load(self.ledger, flow, version, topics, partitions, raw=raw)
