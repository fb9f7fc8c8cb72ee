"""When an offset-sync is recorded: runs from delivered records, and the ledger rows for them.

Pure Python, no I/O: the replication job calls it on the executors, next to the producer, with
each record's ``(upstream_offset, downstream_offset)`` pair as its delivery report arrives, and
gets back a handful of runs per topic-partition instead of one row per record.

The rule, for the pairs of one topic-partition in delivery order: a pair **extends** the
current run when both

* ``upstream_contiguous``: its upstream offset is the one right after the run's last record, and
* ``downstream_contiguous``: its downstream offset is the one right after the run's last copy;

otherwise it **starts a new run**. An upstream gap (compaction, transaction markers, aborted
records skipped under ``read_committed``) or a downstream gap (another writer, a retried
batch) therefore splits a run, and nothing is ever interpolated across a gap.

Invariants:
    * Exactness: a run ``(u, d, n)`` is emitted only if, for every ``0 <= k < n``, the record
      at upstream ``u + k`` was delivered at downstream ``d + k``: every run is made only of
      delivery reports, never of offsets predicted before delivery.
    * Coverage: every pair given to :class:`RunBuilder` lands in exactly one run; the runs of a
      partition hold exactly as many records as were delivered.
    * Maximality: two consecutive pairs are in the same run if and only if both named
      conditions hold, so an uninterrupted copy of ``n`` consecutive records is a single run.
    * Records whose delivery failed are never passed in (the caller fails the batch), so a
      failed record can never be mapped.
    * ``written_at`` strictly increases between the batches of a flow (:func:`next_written_at`),
      which makes ``(written_at, batch_id, downstream_offset)`` a valid write order even across
      job restarts, whose batch ids may start again. A batch is at least ``WRITTEN_AT_STEP``
      (2 ms) after every earlier batch of its flow, so ``written_at > covered_until + 1 ms``
      selects exactly the runs committed after a span snapshot while Delta, whose file
      statistics keep milliseconds, skips every file of the covered history
      (:mod:`ledger.span_snapshots`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledger.clock import from_ms
from ledger.translation import Run

if TYPE_CHECKING:  # the copy tasks import this module: they need no Spark types
    from ledger.records import ProgressRecord

__all__ = [
    "PartitionSummary",
    "RunBuilder",
    "downstream_contiguous",
    "next_written_at",
    "progress_row",
    "runs_from_deliveries",
    "sync_rows",
    "upstream_contiguous",
]

# Consecutive batches of a flow are at least this far apart: twice the millisecond precision
# of Delta's file statistics, so a bound 1 ms above one batch's time separates it from the next
# in the statistics as well as in the rows (ledger.span_snapshots).
WRITTEN_AT_STEP = dt.timedelta(milliseconds=2)


def upstream_contiguous(run_upstream_end: int, upstream_offset: int) -> bool:
    """Whether the record is the one right after the run's last record in the original topic."""
    return upstream_offset == run_upstream_end


def downstream_contiguous(run_downstream_end: int, downstream_offset: int) -> bool:
    """Whether the copy landed right after the run's last copy in the replica."""
    return downstream_offset == run_downstream_end


class RunBuilder:
    """Accumulates one topic-partition's delivered pairs, in delivery order, into runs.

    Memory is ``O(number of runs)``, not ``O(records)``: only the open run is kept as three ints.
    """

    __slots__ = ("_d", "_n", "_runs", "_u", "newest_timestamp_ms", "out_of_order", "records")

    def __init__(self) -> None:
        self._runs: list[Run] = []
        self._u = self._d = self._n = 0
        self.records = 0
        self.newest_timestamp_ms: int | None = None
        # Set by extend() if a downstream offset did not increase: the pairs cannot be
        # delivery-ordered copies of one producer session, and the caller must refuse them.
        self.out_of_order = False

    def add(self, upstream_offset: int, downstream_offset: int,
            timestamp_ms: int | None = None) -> None:
        """Record that upstream ``upstream_offset`` was delivered at ``downstream_offset``."""
        if self._n and upstream_contiguous(self._u + self._n, upstream_offset) and \
                downstream_contiguous(self._d + self._n, downstream_offset):
            self._n += 1
        else:
            self._close()
            self._u, self._d, self._n = upstream_offset, downstream_offset, 1
        self.records += 1
        if timestamp_ms is not None and (self.newest_timestamp_ms is None
                                         or timestamp_ms > self.newest_timestamp_ms):
            self.newest_timestamp_ms = timestamp_ms

    def extend(self, upstream_offsets: Sequence[int], downstream_offsets: Sequence[int],
               newest_timestamp_ms: int | None = None) -> None:
        """:meth:`add` for many pairs: ``upstream_offsets[i]`` went to ``downstream_offsets[i]``.

        Same rule and result as calling :meth:`add` pair by pair, in a tight loop. Also sets
        :attr:`out_of_order` if the downstream offsets (continuing from the open run) do not
        strictly increase. ``newest_timestamp_ms`` is the newest timestamp among these records.
        """
        if len(upstream_offsets) != len(downstream_offsets):
            raise ValueError("as many upstream as downstream offsets are needed")
        u0, d0, n = self._u, self._d, self._n
        runs = self._runs
        ordered = True
        for u, d in zip(upstream_offsets, downstream_offsets, strict=True):
            if n and u == u0 + n and d == d0 + n:
                n += 1
                continue
            if n:
                if d < d0 + n:  # the previous pair was the run's last, at d0 + n - 1
                    ordered = False
                runs.append(Run(u0, d0, n))
            u0, d0, n = u, d, 1
        self._u, self._d, self._n = u0, d0, n
        self.records += len(upstream_offsets)
        if not ordered:
            self.out_of_order = True
        if newest_timestamp_ms is not None and (self.newest_timestamp_ms is None
                                                or newest_timestamp_ms > self.newest_timestamp_ms):
            self.newest_timestamp_ms = newest_timestamp_ms

    def _close(self) -> None:
        if self._n:
            self._runs.append(Run(self._u, self._d, self._n))
            self._n = 0

    def runs(self) -> list[Run]:
        """The runs so far (the open run included), in delivery order."""
        self._close()
        return list(self._runs)


def runs_from_deliveries(pairs: Iterable[tuple[int, int]]) -> list[Run]:
    """The maximal exact runs of ``(upstream_offset, downstream_offset)`` pairs in delivery order.

    >>> runs_from_deliveries([(100, 500), (101, 501), (110, 502), (111, 503)])
    [Run(upstream_offset=100, downstream_offset=500, length=2), \
Run(upstream_offset=110, downstream_offset=502, length=2)]
    """
    builder = RunBuilder()
    for upstream, downstream in pairs:
        builder.add(upstream, downstream)
    return builder.runs()


def next_written_at(now: dt.datetime, previous: dt.datetime | None) -> dt.datetime:
    """The batch time to record: ``now``, or just after ``previous`` if the clock lags it."""
    if previous is not None and now < previous + WRITTEN_AT_STEP:
        return previous + WRITTEN_AT_STEP
    return now


@dataclass(frozen=True)
class PartitionSummary:
    """What one batch did to one topic-partition (built on the executors, sent to the driver)."""

    topic: str
    replica_topic: str
    partition: int
    runs: tuple[Run, ...]
    records: int
    newest_timestamp_ms: int | None

    @property
    def last_upstream_offset(self) -> int:
        return max(r.upstream_end for r in self.runs) - 1


def sync_rows(*, flow: str, source_cluster: str, target_cluster: str,
              summaries: Iterable[PartitionSummary], run_id: str, batch_id: int,
              written_at: dt.datetime) -> list[tuple]:
    """``offset_syncs`` rows (in :data:`ledger.schemas.OFFSET_SYNCS_SCHEMA` column order)."""
    return [(flow, source_cluster, target_cluster, s.topic, s.replica_topic, s.partition,
             r.upstream_offset, r.downstream_offset, r.length, run_id, batch_id, written_at)
            for s in summaries for r in s.runs]


def progress_row(*, flow: str, summary: PartitionSummary,
                 source_end_offsets: Mapping[tuple[str, int], int], batch_id: int,
                 updated_at: dt.datetime) -> ProgressRecord:
    """The ``replication_progress`` record of one topic-partition after a batch.

    ``lag`` is the number of offsets between where replication resumes and the source's end
    (never negative: the end offset is read after the batch and only grows); the record age is
    ``updated_at`` minus the newest replicated record's timestamp.
    """
    from ledger.records import ProgressRecord

    last = summary.last_upstream_offset
    end = source_end_offsets.get((summary.topic, summary.partition))
    lag = None if end is None else max(0, end - (last + 1))
    newest = None
    age_ms = None
    if summary.newest_timestamp_ms is not None:
        newest = from_ms(summary.newest_timestamp_ms)
        age_ms = max(0, int((updated_at - newest).total_seconds() * 1000))
    return ProgressRecord(flow=flow, topic=summary.topic, replica_topic=summary.replica_topic,
                          partition=summary.partition, last_upstream_offset=last,
                          next_upstream_offset=last + 1, source_end_offset=end, lag=lag,
                          newest_record_timestamp=newest, record_age_ms=age_ms,
                          batch_id=batch_id, updated_at=updated_at)
