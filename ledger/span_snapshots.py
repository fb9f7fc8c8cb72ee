"""Persisted spans: what lets a store load read the newest runs only, whatever the ledger's age.

``offset_sync_spans`` holds, per flow, the current-epoch spans (:mod:`ledger.spans`) of every
flow partition at one ``offset_syncs`` version ``W``, and ``covered_until``: the flow's newest
``written_at`` at ``W``. ``ledger maintain`` refreshes it (:func:`ledger.span_refresh.refresh`);
a store load (:meth:`ledger.store.OffsetSyncStore.load`) then reads::

    offset_syncs of the flow    |<--------- covered at W --------->|<-- tail -->|
                                 written_at <= covered_until          written_at > covered_until
    what the load computes on    the snapshot's spans (a few rows)  +  the tail's runs

Invariants:
    * Exact, never approximate: spans then tail translate like the raw runs
      (:func:`ledger.spans.extend`, a property test), because every commit of a flow's runs is
      at least ``WRITTEN_AT_STEP`` (2 ms) after every earlier one (the replicator's
      :func:`ledger.writer.next_written_at`, MM2 ingest's floor), so the runs committed after
      ``W`` are exactly those after :func:`tail_start`, ``covered_until`` truncated to the
      millisecond plus 1 ms: above every covered run, below every later one, and above the
      millisecond statistics of every covered file, which Delta therefore skips.
    * A flow partition whose tail starts upstream below its spans' highest end (a rewind into
      the covered history) is read raw, its whole current epoch, as without a snapshot.
    * A snapshot newer than the version asked for (time travel to before it) is not used.
    * The table is derived: deleting it loses nothing but speed; a flow without rows is read
      raw. A refresh replaces one flow's rows in one Delta commit, so a reader sees the old
      snapshot or the new one, never a mix.
    * Bounded: a load reads the snapshot (a few rows per partition) and the runs written since
      the last refresh; Delta skips every older data file by its ``written_at`` statistics.
    * Windowed: a partition whose spans do not coalesce (exactly-once runs split by markers,
      MirrorMaker 2's point syncs) keeps only the spans from a valid cut on
      (:func:`ledger.spans.window_start`). ``batch_id`` is a span's position in its epoch's
      spans, so a partition's lowest ``batch_id`` is how many spans its window leaves out
      (:meth:`SpanSnapshot.dropped`; 0: the whole epoch). A load carries that count on while
      the epoch goes on; a new epoch in the tail, or a rewind read raw, holds the whole epoch.
      The window's seek floors (``SEEK_COLUMNS``, :meth:`SpanSnapshot.seeks`) go with it.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import TYPE_CHECKING

from ledger.schemas import OFFSET_SYNC_SPANS
from ledger.spans import extend
from ledger.translation import Run, epoch_starts

if TYPE_CHECKING:  # pyspark is imported where Spark reads: a delta-rs load never needs it
    from pyspark.sql import Column, DataFrame

    from ledger.tables import Ledger

TAIL_ON_DRIVER = 50_000
"""Up to this many runs after the snapshot, a load coalesces them on the driver (no shuffle)."""

SNAPSHOT_ON_DRIVER = 200_000
"""Up to this many snapshot spans a Spark load brings to the driver (to extend them there with
a short tail); beyond, they stay a DataFrame and Spark extends them
(:meth:`SpanSnapshot.with_tail`)."""

ROW_COLUMNS = ("topic", "partition", "replica_topic", "upstream_offset", "downstream_offset",
               "length", "batch_id")
"""The columns of a snapshot row a load uses on the driver."""

SEEK_COLUMNS = ("seek_upstream_offset", "seek_downstream_offset")
"""A windowed partition's seek floors (on each of its rows; a table of an earlier release
lacks the columns until its next refresh: its windows have no seek floors meanwhile)."""

SPAN_RUN_ID = "span"
"""``run_id`` of a row that stands for a span of runs, not one replication run."""

Key = tuple[str, int]

Extended = tuple[dict[Key, list[Run]], dict[str, str], set[Key], dict[Key, int]]
"""What extending a snapshot with its tail gives: the spans, the replica topics, the rewound
partitions (to read raw) and the windowed partitions' dropped span counts."""


def _table(ledger: Ledger) -> DataFrame | None:
    """The snapshot table at its current version, or ``None`` on a ledger created before it
    existed. Pinned: Spark reads an unpinned Delta table again at each action, and a refresh
    in another process may commit between a load's actions (the head of one snapshot with
    the spans of the next reads the runs between the two twice, F22)."""
    from ledger.tables import LedgerError, damaged

    try:
        return ledger.read(OFFSET_SYNC_SPANS, version=ledger.version(OFFSET_SYNC_SPANS))
    except Exception as exc:  # the version of a missing table is Spark's AnalysisException
        if not ledger.exists(OFFSET_SYNC_SPANS):
            return None
        if isinstance(exc, LedgerError):
            raise  # there, but unreadable: the error names the damage
        raise damaged(ledger.location, OFFSET_SYNC_SPANS, exc) from exc


def partition_filter(partitions: Iterable[Key]) -> Column:
    """``(topic = t AND partition IN (...)) OR ...`` for ``(topic, partition)`` pairs."""
    from pyspark.sql import functions as F

    by_topic: dict[str, set[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, set()).add(partition)
    if not by_topic:
        return F.lit(False)
    return reduce(operator.or_, [(F.col("topic") == t) & F.col("partition").isin(sorted(ps))
                                 for t, ps in sorted(by_topic.items())])


def restrict(df: DataFrame, topics: set[str] | None,
             partitions: set[Key] | None) -> DataFrame:
    """``df`` (rows with topic and partition) limited to ``topics`` and ``partitions``."""
    from pyspark.sql import functions as F

    if topics is not None:
        df = df.where(F.col("topic").isin(sorted(topics)))
    if partitions is not None:
        df = df.where(partition_filter(partitions))
    return df


def tail_start(covered_until: dt.datetime) -> dt.datetime:
    """The tail is ``written_at > tail_start(covered_until)`` (see the module invariants)."""
    return (covered_until.replace(microsecond=covered_until.microsecond // 1000 * 1000)
            + dt.timedelta(milliseconds=1))


def after(covered_until: dt.datetime) -> Column:
    from pyspark.sql import functions as F

    return F.col("written_at") > F.lit(tail_start(covered_until))


@dataclass(frozen=True)
class SpanSnapshot:
    """One flow's persisted spans (those of the partitions read), at ``version``.

    ``rows`` holds them on the driver (only the columns a load uses) when they number at most
    ``SNAPSHOT_ON_DRIVER``; beyond (an exactly-once flow's spans, split by the transaction
    markers, grow with every commit), ``rows`` is ``None`` and they stay in ``frame``, which
    Spark extends with the tail (:meth:`with_tail`) without a round trip through Python.
    """

    flow: str
    version: int
    covered_until: dt.datetime
    rows: dict[Key, list[dict]] | None = field(default_factory=dict)
    frame: DataFrame | None = field(default=None, compare=False, repr=False)

    @classmethod
    def read(cls, ledger: Ledger, flow: str, topics: set[str] | None = None,
             partitions: set[Key] | None = None) -> SpanSnapshot | None:
        """The flow's snapshot restricted to ``topics``/``partitions``; ``None`` if it has none.

        A ledger created before the table existed has none: loads read raw until ``ledger
        maintain`` (or ``ledger init``) creates it.
        """
        from pyspark.sql import functions as F

        table = _table(ledger)
        if table is None:
            return None
        table = table.where(F.col("flow") == flow)
        head = table.select("offset_syncs_version", "covered_until").limit(1).collect()
        if not head:  # the flow has no snapshot
            return None
        frame = restrict(table, topics, partitions)
        columns = (*ROW_COLUMNS, *(c for c in SEEK_COLUMNS if c in table.columns))
        # Arrow, not Rows: a Row costs tens of microseconds to unpickle, a column value one.
        found = (frame.select(*columns).limit(SNAPSHOT_ON_DRIVER + 1).toArrow()
                 .to_pylist())
        if len(found) > SNAPSHOT_ON_DRIVER:
            return cls(flow, int(head[0]["offset_syncs_version"]), head[0]["covered_until"],
                       None, frame)
        return replace(cls.from_rows(flow, found, head[0].asDict()), frame=frame)

    @classmethod
    def from_rows(cls, flow: str, found: Iterable[dict], head: dict) -> SpanSnapshot:
        """The snapshot of ``found`` (its rows of the partitions read); ``head`` is any row
        of the flow's snapshot (its version and ``covered_until``)."""
        rows: dict[Key, list[dict]] = {}
        for row in sorted(found, key=lambda r: (r["topic"], r["partition"], r["batch_id"])):
            rows.setdefault((row["topic"], row["partition"]), []).append(row)
        return cls(flow, int(head["offset_syncs_version"]), head["covered_until"], rows)

    def dropped(self) -> dict[Key, int]:
        """Per windowed partition of the rows held, how many of its epoch's spans the window
        leaves out (its lowest ``batch_id``; partitions held whole are absent)."""
        return {key: int(rows[0]["batch_id"]) for key, rows in (self.rows or {}).items()
                if rows and rows[0]["batch_id"] > 0}

    def seeks(self) -> dict[Key, tuple[int, int]]:
        """Per windowed partition of the rows held that has them, its seek floors."""
        return {key: (int(rows[0][SEEK_COLUMNS[0]]), int(rows[0][SEEK_COLUMNS[1]]))
                for key, rows in (self.rows or {}).items()
                if rows and rows[0]["batch_id"] > 0
                and rows[0].get(SEEK_COLUMNS[0]) is not None
                and rows[0].get(SEEK_COLUMNS[1]) is not None}

    def extend_on_driver(self, runs: DataFrame, limit: int | None = None) -> Extended | None:
        """The spans of every partition, from the snapshot and the tail collected to the driver
        (:func:`ledger.spans.extend`, the same spans Spark computes in :meth:`with_tail`).

        Returns:
            ``(spans, replica topics, rewound partitions, dropped)``: the rewound partitions (a
            tail run starts below what the spans cover) have no spans here and must be read
            raw; ``dropped`` as :meth:`dropped`, for the windows whose epoch goes on.
            ``None`` when the tail has more than ``limit`` runs (default ``TAIL_ON_DRIVER``) or
            the snapshot stayed in Spark: coalesce them in Spark.
        """
        if self.rows is None:  # the snapshot itself is too large for the driver
            return None
        limit = TAIL_ON_DRIVER if limit is None else limit
        rows = (runs.where(after(self.covered_until))
                .select("topic", "partition", "replica_topic", "upstream_offset",
                        "downstream_offset", "length", "written_at", "batch_id")
                .limit(limit + 1).collect())
        if len(rows) > limit:
            return None
        return self.extend_rows([r.asDict() for r in rows])

    def extend_rows(self, rows: Iterable[dict]) -> Extended:
        """:meth:`extend_on_driver` over the tail's rows (``offset_syncs`` columns, any order).
        A delta-rs load does this in its query instead (:mod:`ledger.span_sql`)."""
        tails: dict[Key, list] = {}
        replica_topics = {topic: spans_of[0]["replica_topic"]
                          for (topic, _), spans_of in self.rows.items()}
        for r in sorted(rows, key=lambda r: (r["written_at"], r["batch_id"],
                                             r["downstream_offset"])):
            tails.setdefault((r["topic"], r["partition"]), []).append(
                Run(r["upstream_offset"], r["downstream_offset"], r["length"]))
            replica_topics[r["topic"]] = r["replica_topic"]
        spans: dict[Key, list[Run]] = {}
        rewound: set[Key] = set()
        windows = self.dropped()
        dropped: dict[Key, int] = {}
        for key in set(self.rows) | set(tails):
            covered = [Run(r["upstream_offset"], r["downstream_offset"], r["length"])
                       for r in self.rows.get(key, [])]
            tail = tails.get(key, [])
            extended = extend(covered, tail)
            if extended is None:
                rewound.add(key)
                continue
            if extended:
                spans[key] = extended
            if key in windows and not any(epoch_starts(covered[-1:] + tail)[1:]):
                dropped[key] = windows[key]
        return spans, replica_topics, rewound, dropped

    def with_tail(self, runs: DataFrame) -> tuple[DataFrame, set[Key]]:
        """What to compute spans on instead of ``runs`` (the flow's restricted offset_syncs rows
        at a version >= ``self.version``): the snapshot's spans, then the runs after it; raw
        runs for partitions whose tail rewinds into the spans. Only per-partition bounds reach
        the driver (to find those partitions), never a span; they come back with the frame."""
        from pyspark.sql import functions as F

        if self.frame is None:
            raise ValueError("a snapshot built from rows has no frame to extend in Spark")
        tail = runs.where(after(self.covered_until))
        spans = self.frame.select(*runs.columns)
        key = ["topic", "partition"]
        lows = tail.groupBy(*key).agg(F.min("upstream_offset").alias("low"))
        highs = spans.groupBy(*key).agg(
            F.max(F.col("upstream_offset") + F.col("length")).alias("high"))
        rewound = {(r["topic"], r["partition"])
                   for r in lows.join(highs, key).where(F.col("low") < F.col("high")).collect()}
        if not rewound:
            return spans.unionByName(tail), rewound
        return (spans.where(~partition_filter(rewound))
                .unionByName(tail.where(~partition_filter(rewound)))
                .unionByName(runs.where(partition_filter(rewound)))), rewound

    def windows(self) -> tuple[dict[Key, int], dict[Key, tuple[int, int]]]:
        """:meth:`dropped` and :meth:`seeks` of a snapshot kept in Spark (one small aggregate
        to the driver)."""
        from pyspark.sql import functions as F

        if self.frame is None or self.rows is not None:
            return self.dropped(), self.seeks()
        floors = [F.min(c).alias(c) for c in SEEK_COLUMNS if c in self.frame.columns]
        found = (self.frame.groupBy("topic", "partition")
                 .agg(F.min("batch_id").alias("first"), *floors)
                 .where(F.col("first") > 0).collect())
        windows = {(r["topic"], r["partition"]): int(r["first"]) for r in found}
        seeks = {(r["topic"], r["partition"]): (int(r[SEEK_COLUMNS[0]]),
                                                int(r[SEEK_COLUMNS[1]]))
                 for r in found if len(floors) == 2 and r[SEEK_COLUMNS[0]] is not None
                 and r[SEEK_COLUMNS[1]] is not None}
        return windows, seeks
