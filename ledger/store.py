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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ledger import translation
from ledger.schemas import OFFSET_SYNC_SPANS, OFFSET_SYNCS
from ledger.span_snapshots import SpanSnapshot, partition_filter, restrict, tail_start
from ledger.span_sql import RUN_COLUMNS, spans_sql

if TYPE_CHECKING:  # pyspark is imported where Spark reads: a delta-rs load never needs it
    from pyspark.sql import DataFrame

    from ledger.tables import Ledger

class SqlReader(Protocol):
    """What :meth:`OffsetSyncStore.load_direct` asks of an engine (``ledger.engine``'s
    ``LedgerEngine``, which calls the store: typed here so the store never imports it)."""

    def version(self, table: str) -> int: ...

    def exists(self, table: str) -> bool: ...

    def query(self, sql: str, versions: Mapping[str, int | None] | None = None,
              **tables: str) -> list[dict[str, Any]]: ...


RUNS_IN_PROCESS = 1_000_000
"""Up to this many runs (snapshot spans, tail, rewound partitions) a delta-rs load coalesces in
process (DataFusion, :mod:`ledger.span_sql`: 600,000 runs take about 2.5 s and 480 MB on a
2-core machine); beyond, Spark computes the spans (:func:`_spans`). The spans that come back
are never more than the runs, and a Spark load brings the same spans to the driver: an
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

    def holds(self, topics: set[str] | None) -> bool:
        """Whether this store answers a load of ``topics`` (None: the whole flow)."""
        return self.topics is None or (topics is not None and topics <= self.topics)

    @classmethod
    def load(cls, ledger: Ledger, flow: str, version: int | None = None,
             topics: set[str] | None = None,
             partitions: set[tuple[str, int]] | None = None) -> OffsetSyncStore:
        """Load ``flow``'s current-epoch spans at ``version`` (default: latest).

        ``topics`` and ``partitions`` (``(topic, partition)`` pairs), when given, restrict what
        is read; the driver receives only the spans, computed in Spark (:func:`_spans`). With a
        persisted snapshot (:mod:`ledger.span_snapshots`) at or before ``version``, the spans
        are computed from it and the runs written after it, not from the whole epoch.
        """
        from pyspark.sql import functions as F

        version = ledger.version(OFFSET_SYNCS) if version is None else version
        store = cls(flow, version, topics=_held(topics, partitions))
        if (topics is not None and not topics) or (partitions is not None and not partitions):
            return store
        runs = restrict(ledger.read(OFFSET_SYNCS, version=version).where(F.col("flow") == flow),
                        topics, partitions)
        snapshot = SpanSnapshot.read(ledger, flow, topics, partitions)
        if snapshot is not None and snapshot.version <= version:
            extended = snapshot.extend_on_driver(runs)
            if extended is None:  # a long tail: spans and tail coalesced in Spark
                runs = snapshot.with_tail(runs)
            else:
                spans, replica_topics, rewound = extended
                store.runs.update(spans)
                store.replica_topics.update(replica_topics)
                if not rewound:
                    return store
                runs = runs.where(partition_filter(rewound))
        # Arrow, not Rows: an exactly-once flow's spans number millions, and a Row costs tens
        # of microseconds to unpickle where an Arrow column value costs one.
        found = _spans(runs).select("topic", "partition", "replica_topic", "u", "d", "n")
        columns = found.toArrow().to_pydict()
        for topic, partition, replica_topic, u, d, n in zip(*columns.values(), strict=True):
            store.runs.setdefault((topic, partition), []).append(translation.Run(u, d, n))
            store.replica_topics[topic] = replica_topic
        return store

    @classmethod
    def load_direct(cls, engine: SqlReader, flow: str, version: int | None = None,
                    topics: set[str] | None = None,
                    partitions: set[tuple[str, int]] | None = None) -> OffsetSyncStore | None:
        """:meth:`load` through ``engine``'s SQL (delta-rs, without a JVM): the same spans.

        The same reads as :meth:`load`: the snapshot's spans and the runs written after it
        (``written_at`` above :func:`~ledger.span_snapshots.tail_start`, so Delta skips every
        older file), the raw runs of a partition only without a snapshot or after a rewind into
        it. The spans are computed by the query itself (:mod:`ledger.span_sql`, the plan
        ``_spans`` runs in Spark): only spans reach Python. ``None`` when more than
        ``RUNS_IN_PROCESS`` runs would be coalesced: :meth:`load` computes those in Spark.
        """
        from ledger.sql import literal, timestamp

        version = engine.version(OFFSET_SYNCS) if version is None else version
        store = cls(flow, version, topics=_held(topics, partitions))
        if (topics is not None and not topics) or (partitions is not None and not partitions):
            return store
        # Partitions are kept below, not in the SQL: a predicate of hundreds of
        # (topic, partition IN ...) terms, evaluated at every scan of the query's plan, costs
        # more than the spans of a selected topic's other partitions.
        if partitions is not None:
            asked = {t for t, _ in partitions}
            topics = asked if topics is None else asked & topics
        where = f"flow = {literal(flow)}" + restrict_sql(topics)
        at = {"s": version}
        tables = {"s": OFFSET_SYNCS}
        runs = f"SELECT {RUN_COLUMNS} FROM {{s}} WHERE {where}"
        if engine.exists(OFFSET_SYNC_SPANS):
            head = engine.query(f"SELECT offset_syncs_version, covered_until FROM {{sp}} "
                                f"WHERE flow = {literal(flow)} LIMIT 1", sp=OFFSET_SYNC_SPANS)
            if head and head[0]["offset_syncs_version"] <= version:
                tables["sp"] = OFFSET_SYNC_SPANS
                after = f"written_at > {timestamp(tail_start(head[0]['covered_until']))}"
                rewound = _rewound(engine, where, after, at)
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
        for r in engine.query(spans_sql(runs), at, **tables):
            if partitions is None or (r["topic"], r["partition"]) in partitions:
                store.runs.setdefault((r["topic"], r["partition"]), []).append(
                    translation.Run(r["u"], r["d"], r["n"]))
                store.replica_topics[r["topic"]] = r["replica_topic"]
        return store

    def _epoch(self, topic: str, partition: int) -> list[translation.Run] | Untranslatable:
        runs = self.runs.get((topic, partition))
        if not runs:
            return Untranslatable(f"no offset-syncs for {topic}[{partition}] in flow "
                                  f"{self.flow} at offset_syncs version {self.version}")
        return runs

    def forward(self, topic: str, partition: int, offset: int) -> Translation:
        """A group at ``offset`` on the original ``topic`` -> its position on the replica."""
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


def _rewound(engine: SqlReader, where: str, after: str, at: dict[str, int]
             ) -> set[tuple[str, int]]:
    """Partitions whose runs after the snapshot start upstream below its highest end (a
    rewind into what the spans cover: :func:`ledger.spans.extend` would give ``None``)."""
    lows = engine.query(f"SELECT topic, {{partition}}, MIN(upstream_offset) AS low FROM {{s}} "
                        f"WHERE {where} AND {after} GROUP BY topic, {{partition}}", at,
                        s=OFFSET_SYNCS)
    if not lows:
        return set()
    highs = {(r["topic"], r["partition"]): r["high"] for r in engine.query(
        f"SELECT topic, {{partition}}, MAX(upstream_offset + length) AS high FROM {{sp}} "
        f"WHERE {where} GROUP BY topic, {{partition}}", sp=OFFSET_SYNC_SPANS)}
    return {(r["topic"], r["partition"]) for r in lows
            if (r["topic"], r["partition"]) in highs
            and r["low"] < highs[(r["topic"], r["partition"])]}


def restrict_sql(topics: set[str] | None) -> str:
    """`` AND ...`` limiting a query to ``topics`` (``restrict`` in SQL; partitions are kept
    after the spans query, see :meth:`OffsetSyncStore.load_direct`)."""
    from ledger.sql import literals

    return "" if topics is None else f" AND topic IN {literals(topics)}"


def _spans(runs: DataFrame) -> DataFrame:
    """The current epoch's spans of every (topic, partition) in ``runs`` (rows of offset_syncs).

    The same spans as :func:`ledger.spans.coalesce` on the current epoch, in Spark: the write
    order and the epoch starts (``LAG``), the last epoch kept; then for each run A the number of
    the epoch's upstream ends in ``(A.u, A.u + A.n]`` (a running count over the ends and the two
    bounds sorted together), and a gaps-and-islands: the next run continues A's span when it is
    contiguous on both sides and that count is 1 (A's own end: no rewind ends inside A). Columns:
    topic, partition, replica_topic, u, d, n, ordered by topic, partition and write order.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    part = ("topic", "partition")
    order = Window.partitionBy(*part).orderBy("written_at", "batch_id", "d")
    upto = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    epoch = (runs.select(*part, "replica_topic", F.col("upstream_offset").alias("u"),
                         F.col("downstream_offset").alias("d"), F.col("length").alias("n"),
                         "written_at", "batch_id")
             .withColumn("start", F.coalesce(
                 (F.col("d") < F.lag(F.col("d") + F.col("n")).over(order)).cast("int"), F.lit(1)))
             .withColumn("epoch", F.sum("start").over(upto))
             .withColumn("last", F.max("epoch").over(Window.partitionBy(*part)))
             .where(F.col("epoch") == F.col("last"))
             .withColumn("rid", F.row_number().over(order))
             .drop("start", "epoch", "last", "written_at", "batch_id"))
    # kind 0: an upstream end, counted; kinds 1 and 2: the bounds A.u and A.e, which see every
    # end <= them (ends sort first at equal offsets). Every point carries its run, so the runs
    # come back by a group-by on the same partitioning: a single shuffle in all.
    end = F.col("u") + F.col("n")
    points = epoch.select("*", F.explode(F.array(*(
        F.struct(at.alias("at"), F.lit(kind).alias("kind"))
        for at, kind in ((end, 0), (F.col("u"), 1), (end, 2))))).alias("p"))
    ends_below = F.sum((F.col("p.kind") == 0).cast("long")).over(
        Window.partitionBy(*part).orderBy("p.at", "p.kind")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    inside = (points.withColumn("below", ends_below).where(F.col("p.kind") > 0)
              .groupBy(*part, "rid", "u", "d", "n", "replica_topic")
              .agg(F.sum(F.when(F.col("p.kind") == 2, F.col("below"))
                         .otherwise(-F.col("below"))).alias("inside")))
    by_rid = Window.partitionBy(*part).orderBy("rid")
    continues = ((F.col("u") == F.lag(end).over(by_rid))
                 & (F.col("d") == F.lag(F.col("d") + F.col("n")).over(by_rid))
                 & (F.lag("inside").over(by_rid) == 1))
    islands = (inside
               .withColumn("new", F.when(F.coalesce(continues, F.lit(False)), 0).otherwise(1))
               .withColumn("span", F.sum("new").over(
                   by_rid.rowsBetween(Window.unboundedPreceding, Window.currentRow))))
    return (islands.groupBy(*part, "span")
            .agg(F.min("rid").alias("first"),
                 F.max_by("replica_topic", "rid").alias("replica_topic"),
                 F.min("u").alias("u"), F.min("d").alias("d"), F.sum("n").alias("n"))
            .orderBy(*part, "first")
            .select(*part, "replica_topic", "u", "d", "n"))
