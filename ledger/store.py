"""Reads a flow's runs from ``offset_syncs`` and translates offsets (MM2's OffsetSyncStore).

Invariants:
    * A store is a snapshot: it is loaded at one Delta version of ``offset_syncs`` and records
      that version, so every translation it gives can be replayed with time travel.
    * Runs of a flow partition are taken in write order ``(written_at, batch_id,
      downstream_offset)``. ``runs`` holds, per (topic, partition), only the **spans** of the
      current downstream epoch (:mod:`ledger.spans`: contiguous runs coalesced where that
      changes no translation), computed in Spark or, on a path ledger, in the delta-rs query
      (:mod:`ledger.span_sql`), so a load collects a few rows per partition whatever the
      length of history; the raw runs stay in ``offset_syncs`` as the audit
      record. What Spark reads is bounded too when ``offset_sync_spans`` holds a snapshot of
      the flow: its spans plus the runs written since (:mod:`ledger.span_snapshots`).
      ``forward``, ``reverse``, ``upstream_end`` and ``downstream_end`` on the spans
      equal :mod:`ledger.translation` over the raw runs.
    * A translation is either an offset or :class:`Untranslatable` with the reason: the two are
      different types, so "cannot translate" can never be mistaken for an offset.
    * Windows are exact too: a partition in ``dropped`` holds only its snapshot window's spans
      (:func:`ledger.spans.window_start`), which answer every offset at or above the window's
      floors (``floors``); an offset below them makes the store read that partition's raw runs
      first (:meth:`OffsetSyncStore.deepen`, at the store's version), never guess. So a load
      costs the windows, whatever the age of an exactly-once flow. A group behind the window
      but at or above the partition's seek floors (``seek``) costs a read of the runs written
      since its offset's (:mod:`ledger.span_seek`); only one below those reads the partition's
      whole epoch::

          partition's epoch    |<-- whole epoch --|<-- seek: by time -->|<-- window -->|<- tail
          offsets answered      deepen() whole      deepen() to offset   forward(x >= U),
                                                                         reverse(c >= D)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ledger import span_seek, span_spark, translation
from ledger.schemas import OFFSET_SYNC_SPANS, OFFSET_SYNCS, added_columns
from ledger.span_snapshots import (
    SEEK_COLUMNS,
    SpanSnapshot,
    partition_filter,
    restrict,
    tail_start,
)
from ledger.span_sql import RUN_COLUMNS, spans_sql

if TYPE_CHECKING:
    from ledger.tables import Ledger

class SqlReader(Protocol):
    """What :meth:`OffsetSyncStore.load_direct` asks of an engine (``ledger.engine``'s
    ``LedgerEngine``, which calls the store: typed here so the store never imports it)."""

    def version(self, table: str) -> int: ...

    def exists(self, table: str) -> bool: ...

    def query(self, sql: str, versions: Mapping[str, int | None] | None = None,
              **tables: str) -> list[dict[str, Any]]: ...

    def columns(self, table: str) -> set[str]: ...

    def load_store(self, flow: str, version: int | None = None,
                   topics: set[str] | None = None,
                   partitions: set[tuple[str, int]] | None = None,
                   raw: bool = False) -> OffsetSyncStore: ...


RUNS_IN_PROCESS = 1_000_000
"""Up to this many runs (snapshot spans, tail, rewound partitions) a delta-rs load coalesces in
process (DataFusion, :mod:`ledger.span_sql`: 600,000 runs take about 2.5 s and 480 MB on a
2-core machine); beyond, Spark computes the spans (:mod:`ledger.span_spark`). The spans that
come back are never more than the runs, and a Spark load brings the same spans to the driver: an
exactly-once flow's (its runs do not coalesce) stay in process up to this bound too (after an
hour of a 1,000-partition exactly-once flow, 20 topics' 288,000 spans: 3.9 s in process, 17 s
in Spark after its JVM's start)."""


@dataclass(frozen=True)
class Translated:
    offset: int
    status: str = "translated"


@dataclass(frozen=True)
class Untranslatable:
    reason: str
    status: str = "untranslatable"
    offset: None = None


Translation = Translated | Untranslatable


@dataclass
class OffsetSyncStore:
    """The current-epoch spans of one flow at one ``offset_syncs`` version, by (topic, partition).

    ``topic`` is the topic on the flow's source cluster (the original); ``replica_topics`` maps
    it to the replica's name on the target.
    """

    flow: str
    version: int
    runs: dict[tuple[str, int], list[translation.Run]] = field(default_factory=dict)
    replica_topics: dict[str, str] = field(default_factory=dict)
    topics: frozenset[str] | None = None
    """The topics whose every partition this store holds (None: every topic of the flow); a
    load restricted to some partitions holds no topic whole."""
    dropped: dict[tuple[str, int], int] = field(default_factory=dict)
    """Per windowed partition, how many of its epoch's spans precede the ones held."""
    history: Callable[[set[tuple[str, int]]], OffsetSyncStore] | None = field(
        default=None, compare=False, repr=False)
    """Loads the raw-run spans of some partitions at ``version`` (what :meth:`deepen` uses);
    set by the load."""
    seek: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    """Per windowed partition that has them, its seek floors (:func:`ledger.spans.
    seek_floors`): from them up to its window, :meth:`deepen` reads by time."""
    covered_until: dt.datetime | None = None
    """The snapshot's ``covered_until`` when the store holds windows (seeks go back from it)."""
    recent: span_seek.Reader | None = field(default=None, compare=False, repr=False)
    """Reads some partitions' runs written in a slice of time, at ``version`` (a seek's
    read); set by the load."""
    prepended: dict[tuple[str, int], int] = field(default_factory=dict)
    """Per partition a seek reached, how many runs it put before the window as loaded."""
    seek_step: dt.timedelta = span_seek.SEEK_FIRST_STEP
    """The first slice of time a seek reads (:data:`ledger.span_seek.SEEK_FIRST_STEP`)."""

    def floors(self, topic: str, partition: int) -> tuple[int, int] | None:
        """``(U, D)``: the lowest upstream and downstream offsets the held window of
        ``topic[partition]`` answers; ``None`` when the whole epoch is held."""
        spans = self.runs.get((topic, partition))
        if not self.dropped.get((topic, partition)) or not spans:
            return None
        return min(r.upstream_offset for r in spans), spans[0].downstream_offset

    def below(self, topic: str, partition: int, upstream: int | None = None,
              downstream: int | None = None) -> bool:
        """Whether ``upstream`` (forward) or ``downstream`` (reverse) lies below the window
        of ``topic[partition]`` (then :meth:`deepen` it before translating)."""
        floors = self.floors(topic, partition)
        return floors is not None and (
            (upstream is not None and upstream < floors[0])
            or (downstream is not None and downstream < floors[1]))

    def window(self, topic: str, partition: int) -> list[translation.Run]:
        """The spans of ``topic[partition]`` as loaded (without the runs a seek put before)."""
        return self.runs.get((topic, partition), [])[self.prepended.get((topic, partition), 0):]

    def deepen(self, keys: Iterable[tuple[str, int]],
               offsets: Mapping[tuple[str, int], tuple[int | None, int | None]] | None = None,
               ) -> None:
        """Make the windows of ``keys`` answer lower offsets, reading the raw runs.

        Args:
            keys: the partitions to deepen (those held whole are left as they are).
            offsets: per partition, the lowest ``(upstream, downstream)`` offsets to answer
                (``None`` on a side: none there). A partition whose offsets lie at or above its
                seek floors gets the runs written since their run (:mod:`ledger.span_seek`);
                any other, or one not given, its whole epoch.

        Raises:
            ValueError: the store has no ledger to read from (built from rows).
        """
        wanted = {k for k in keys if self.dropped.get(k)}
        if offsets and self.recent is not None and self.covered_until is not None:
            targets = {}
            for key in wanted & set(offsets) & set(self.seek):
                if not self.window(*key):
                    continue
                upstream, downstream = offsets[key]
                floor_u, floor_d = self.seek[key]
                if (upstream is None or upstream >= floor_u) \
                        and (downstream is None or downstream >= floor_d):
                    targets[key] = span_seek.Target(upstream, downstream, self.seek[key],
                                                    self.window(*key)[0].downstream_offset)
            found = span_seek.seek(self.recent, self.covered_until,
                                   tail_start(self.covered_until), targets, self.seek_step)
            for key, runs in found.items():
                self.runs[key] = runs + self.window(*key)
                self.prepended[key] = len(runs)
            wanted -= set(found)
        if not wanted:
            return
        if self.history is None:
            raise ValueError(f"the store of flow {self.flow} holds windows only and no ledger "
                             f"to read the history of {sorted(wanted)} from")
        whole = self.history(wanted)
        for key in wanted:
            self.runs[key] = whole.runs.get(key, [])
            self.dropped.pop(key)
            self.seek.pop(key, None)
            self.prepended.pop(key, None)
        self.replica_topics.update(whole.replica_topics)

    def holds(self, topics: set[str] | None) -> bool:
        """Whether this store answers a load of ``topics`` (None: the whole flow)."""
        return self.topics is None or (topics is not None and topics <= self.topics)

    @classmethod
    def load(cls, ledger: Ledger, flow: str, version: int | None = None,
             topics: set[str] | None = None,
             partitions: set[tuple[str, int]] | None = None,
             raw: bool = False) -> OffsetSyncStore:
        """Load ``flow``'s current-epoch spans at ``version`` (default: latest).

        ``topics`` and ``partitions`` (``(topic, partition)`` pairs), when given, restrict what
        is read; the driver receives only the spans, computed in Spark
        (:func:`ledger.span_spark.spans`). With a persisted snapshot
        (:mod:`ledger.span_snapshots`) at or before ``version``, the spans are computed from it
        and the runs written after it, not from the whole epoch; ``raw`` reads the runs only
        (every partition whole, as :meth:`deepen` needs).
        """
        from pyspark.sql import functions as F

        version = ledger.version(OFFSET_SYNCS) if version is None else version
        store = cls(flow, version, topics=_held(topics, partitions))
        store.history = lambda keys: cls.load(ledger, flow, version, partitions=keys, raw=True)
        if (topics is not None and not topics) or (partitions is not None and not partitions):
            return store
        runs = restrict(ledger.read(OFFSET_SYNCS, version=version).where(F.col("flow") == flow),
                        topics, partitions)
        snapshot = None if raw else SpanSnapshot.read(ledger, flow, topics, partitions)
        windows: dict[tuple[str, int], int] = {}
        seeks: dict[tuple[str, int], tuple[int, int]] = {}
        if snapshot is not None and snapshot.version <= version:
            store.covered_until = snapshot.covered_until
            store.recent = lambda keys, after, until: span_spark.recent(
                ledger, flow, version, keys, after, until)
            extended = snapshot.extend_on_driver(runs)
            if extended is None:  # a long tail: spans and tail coalesced in Spark
                runs, rewound = snapshot.with_tail(runs)
                windows, seeks = snapshot.windows()
                windows = {k: v for k, v in windows.items() if k not in rewound}
            else:
                spans, replica_topics, rewound, dropped = extended
                store.runs.update(spans)
                store.replica_topics.update(replica_topics)
                store.dropped.update(dropped)
                store.seek.update({k: v for k, v in snapshot.seeks().items() if k in dropped})
                if not rewound:
                    return store
                runs = runs.where(partition_filter(rewound))
        # Arrow, not Rows: an exactly-once flow's spans number millions, and a Row costs tens
        # of microseconds to unpickle where an Arrow column value costs one.
        found = span_spark.spans(runs).select("topic", "partition", "replica_topic", "u", "d", "n",
                                    "first_at")
        store.add_spans(zip(*found.toArrow().to_pydict().values(), strict=True), windows,
                        seeks)
        return store

    def add_spans(self, rows: Iterable[tuple], windows: Mapping[tuple[str, int], int],
                  seeks: Mapping[tuple[str, int], tuple[int, int]] | None = None) -> None:
        """Append spans ``(topic, partition, replica_topic, u, d, n, first_at)`` in write
        order; a partition of ``windows`` stays windowed (with its ``seeks`` floors) when its
        epoch starts with the first input row (its snapshot's first span: no new epoch since)."""
        for topic, partition, replica_topic, u, d, n, first_at in rows:
            key = (topic, partition)
            if key not in self.runs and key in windows and first_at == 1:
                self.dropped[key] = windows[key]
                if seeks and key in seeks:
                    self.seek[key] = seeks[key]
            self.runs.setdefault(key, []).append(translation.Run(u, d, n))
            self.replica_topics[topic] = replica_topic

    @classmethod
    def load_direct(cls, engine: SqlReader, flow: str, version: int | None = None,
                    topics: set[str] | None = None,
                    partitions: set[tuple[str, int]] | None = None,
                    raw: bool = False) -> OffsetSyncStore | None:
        """:meth:`load` through ``engine``'s SQL (delta-rs, without a JVM): the same spans.

        The same reads as :meth:`load`: the snapshot's spans and the runs written after it
        (``written_at`` above :func:`~ledger.span_snapshots.tail_start`, so Delta skips every
        older file), the raw runs of a partition only without a snapshot or after a rewind into
        it. The spans are computed by the query itself (:mod:`ledger.span_sql`, the plan
        ``ledger.span_spark.spans`` runs in Spark): only spans reach Python. ``None`` when more
        than ``RUNS_IN_PROCESS`` runs would be coalesced: :meth:`load` computes those in Spark.
        ``raw`` reads the runs only, as :meth:`load`.
        """
        from ledger.sql import literal, timestamp

        version = engine.version(OFFSET_SYNCS) if version is None else version
        store = cls(flow, version, topics=_held(topics, partitions))
        store.history = lambda keys: engine.load_store(flow, version, partitions=keys, raw=True)
        if (topics is not None and not topics) or (partitions is not None and not partitions):
            return store
        # Partitions are kept below, not in the SQL: a predicate of hundreds of
        # (topic, partition IN ...) terms, evaluated at every scan of the query's plan, costs
        # more than the spans of a selected topic's other partitions. A raw read (the history
        # deepen asks for: a few partitions, every run of them) names them.
        if partitions is not None:
            asked = {t for t, _ in partitions}
            topics = asked if topics is None else asked & topics
        where = f"flow = {literal(flow)}" + restrict_sql(topics)
        if raw and partitions is not None:
            where += f" AND ({_partitions_sql(partitions)})"
        at = {"s": version}
        tables = {"s": OFFSET_SYNCS}
        runs = f"SELECT {RUN_COLUMNS} FROM {{s}} WHERE {where}"
        windows: dict[tuple[str, int], int] = {}
        seeks: dict[tuple[str, int], tuple[int, int]] = {}
        if not raw and engine.exists(OFFSET_SYNC_SPANS):
            # Every read of the snapshot at one version: a refresh in another process may
            # commit between them, and a head of one snapshot with the spans of the next
            # reads the runs between the two twice (F22: a false epoch).
            pinned = {"sp": engine.version(OFFSET_SYNC_SPANS)}
            head = engine.query(f"SELECT offset_syncs_version, covered_until FROM {{sp}} "
                                f"WHERE flow = {literal(flow)} LIMIT 1", pinned,
                                sp=OFFSET_SYNC_SPANS)
            if head and head[0]["offset_syncs_version"] <= version:
                tables["sp"] = OFFSET_SYNC_SPANS
                at.update(pinned)
                after = f"written_at > {timestamp(tail_start(head[0]['covered_until']))}"
                rewound, windows, seeks = _snapshot_bounds(engine, where, after, at)
                store.covered_until = head[0]["covered_until"]
                store.recent = lambda keys, since, until: engine.query(
                    f"SELECT {RUN_COLUMNS} FROM {{s}} WHERE flow = {literal(flow)} AND "
                    f"({_partitions_sql(keys)}) AND written_at > {timestamp(since)} AND "
                    f"written_at <= {timestamp(until)}", {"s": version}, s=OFFSET_SYNCS)
                kept = f" AND NOT ({_partitions_sql(rewound)})" if rewound else ""
                runs = (f"SELECT {RUN_COLUMNS} FROM {{sp}} WHERE {where}{kept} UNION ALL "
                        f"SELECT {RUN_COLUMNS} FROM {{s}} WHERE {where} AND {after}{kept}")
                if rewound:  # read raw, its whole history, as without a snapshot
                    runs += (f" UNION ALL SELECT {RUN_COLUMNS} FROM {{s}} WHERE {where} "
                             f"AND ({_partitions_sql(rewound)})")
        counted = engine.query(f"SELECT COUNT(*) AS runs FROM (SELECT 1 FROM ({runs}) AS r "
                               f"LIMIT {RUNS_IN_PROCESS + 1}) AS c", at, **tables)
        if counted[0]["runs"] > RUNS_IN_PROCESS:
            return None
        store.add_spans(((r["topic"], r["partition"], r["replica_topic"], r["u"], r["d"], r["n"],
                          r["first_rn"]) for r in engine.query(spans_sql(runs), at, **tables)
                         if partitions is None or (r["topic"], r["partition"]) in partitions),
                        windows, seeks)
        return store

    def _epoch(self, topic: str, partition: int) -> list[translation.Run] | Untranslatable:
        runs = self.runs.get((topic, partition))
        if not runs:
            return Untranslatable(f"no offset-syncs for {topic}[{partition}] in flow "
                                  f"{self.flow} at offset_syncs version {self.version}")
        return runs

    def forward(self, topic: str, partition: int, offset: int) -> Translation:
        """A group at ``offset`` on the original ``topic`` -> its position on the replica."""
        if self.below(topic, partition, upstream=offset):
            self.deepen([(topic, partition)], {(topic, partition): (offset, None)})
        runs = self._epoch(topic, partition)
        if isinstance(runs, Untranslatable):
            return runs
        result = translation.forward(runs, offset)
        if result is None:
            return Untranslatable(
                f"offset {offset} of {topic}[{partition}] is before the first replicated "
                f"record ({min(r.upstream_offset for r in runs)}) of the current epoch")
        return Translated(result)

    def reverse(self, topic: str, partition: int, offset: int) -> Translation:
        """A group at ``offset`` on the replica of ``topic`` -> its position on the original."""
        if self.below(topic, partition, downstream=offset):
            self.deepen([(topic, partition)], {(topic, partition): (None, offset)})
        runs = self._epoch(topic, partition)
        if isinstance(runs, Untranslatable):
            return runs
        result = translation.reverse(runs, offset)
        if result is None:
            return Untranslatable(
                f"replica offset {offset} of {topic}[{partition}] is before the first recorded "
                f"copy ({min(r.downstream_offset for r in runs)}) of the current epoch")
        return Translated(result)

    def upstream_end(self, topic: str, partition: int) -> int | None:
        """One past the highest upstream record the runs hold (how far replication got)."""
        runs = self.runs.get((topic, partition))
        return max(r.upstream_end for r in runs) if runs else None

    def downstream_end(self, topic: str, partition: int) -> int | None:
        """One past the highest replica offset the runs hold (what a reader there may have read)."""
        runs = self.runs.get((topic, partition))
        return max(r.downstream_end for r in runs) if runs else None


def _held(topics: set[str] | None, partitions: set[tuple[str, int]] | None
          ) -> frozenset[str] | None:
    if partitions is not None:
        return frozenset()
    return None if topics is None else frozenset(topics)


def _partitions_sql(partitions: Iterable[tuple[str, int]]) -> str:
    """``(topic = t AND {partition} IN (...)) OR ...`` for ``(topic, partition)`` pairs."""
    from ledger.sql import literal

    by_topic: dict[str, set[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, set()).add(int(partition))
    terms = [f"(topic = {literal(t)} AND {{partition}} IN ({', '.join(map(str, sorted(ps)))}))"
             for t, ps in sorted(by_topic.items())]
    return " OR ".join(terms) or "FALSE"


def _snapshot_bounds(engine: SqlReader, where: str, after: str, at: dict[str, int]
                     ) -> tuple[set[tuple[str, int]], dict[tuple[str, int], int],
                                dict[tuple[str, int], tuple[int, int]]]:
    """``(rewound, windows, seeks)`` of the snapshot's partitions (at ``at["sp"]``): those
    whose runs after the snapshot start upstream below its highest end (a rewind into what
    the spans cover: :func:`ledger.spans.extend` would give ``None``), the other windowed
    ones with the spans their windows leave out (their lowest ``batch_id``), and the seek
    floors of those that have them (none in a table of an earlier release)."""
    floors = ", ".join(f"MIN({c}) AS {c}" for c in SEEK_COLUMNS) \
        if {c.name for c in added_columns(OFFSET_SYNC_SPANS)} <= engine.columns(
            OFFSET_SYNC_SPANS) else "NULL AS seek_upstream_offset, NULL AS seek_downstream_offset"
    found = engine.query(
        f"SELECT topic, {{partition}}, MAX(upstream_offset + length) AS high, "
        f"MIN(batch_id) AS first, {floors} FROM {{sp}} WHERE {where} "
        f"GROUP BY topic, {{partition}}", {"sp": at["sp"]}, sp=OFFSET_SYNC_SPANS)
    bounds = {(r["topic"], r["partition"]): (r["high"], r["first"]) for r in found}
    lows = engine.query(f"SELECT topic, {{partition}}, MIN(upstream_offset) AS low FROM {{s}} "
                        f"WHERE {where} AND {after} GROUP BY topic, {{partition}}", at,
                        s=OFFSET_SYNCS) if bounds else []
    rewound = {(r["topic"], r["partition"]) for r in lows
               if (r["topic"], r["partition"]) in bounds
               and r["low"] < bounds[(r["topic"], r["partition"])][0]}
    windows = {key: int(first) for key, (_, first) in bounds.items()
               if first > 0 and key not in rewound}
    seeks = {(r["topic"], r["partition"]): (int(r[SEEK_COLUMNS[0]]), int(r[SEEK_COLUMNS[1]]))
             for r in found if (r["topic"], r["partition"]) in windows
             and r[SEEK_COLUMNS[0]] is not None and r[SEEK_COLUMNS[1]] is not None}
    return rewound, windows, seeks


def restrict_sql(topics: set[str] | None) -> str:
    """`` AND ...`` limiting a query to ``topics`` (``restrict`` in SQL; partitions are kept
    after the spans query, see :meth:`OffsetSyncStore.load_direct`)."""
    from ledger.sql import literals

    return "" if topics is None else f" AND topic IN {literals(topics)}"
