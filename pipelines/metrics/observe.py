"""The small observers the jobs call: what happened -> the metric families of :mod:`definitions`.

``replicate`` builds a :class:`ReplicationObserver` and calls ``batch_recorded`` once per
recorded batch (from the one hook in the replicator, ``FlowReplicator.on_recorded``) and
``measured`` after each measurement of the source's end offsets; ``checkpoint`` calls
:meth:`CheckpointObserver.pass_done` after each pass. Observers hold only what the gauges need
between calls; they never raise into the job (a metric is never a reason to stop replicating).

Time arithmetic of one partition, on the replicator's clock (RPO) and the records' (lag)::

    source  ... 97  98  99 | 100 101 102      end (last stable offset) = 103
    ledger  runs end here -^                  recorded = 100, lag_records = 3
    t_cov   newest moment the partition was measured with end <= recorded
    ts_new  timestamp of record 99 (the newest the ledger holds)
    rpo          = now - max(t_cov, ts_new)   (records written before either are recorded)
    lag_seconds  = now - ts_new while lag_records > 0, else 0

Invariants:
    * Only recorded copies count (records, bytes, latency): a copy the ledger did not record is
      a duplicate-to-be, not progress.
    * A partition of a topic set aside keeps its recorded offset and its coverage time while
      its end offset is still measured, so its lag and RPO keep growing; partitions no longer
      selected are removed.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger.clock import aware
from pipelines.metrics.definitions import REASONS, REFUSED, REPLICA, UNREADABLE, Metrics

log = logging.getLogger(__name__)

TP = tuple[str, int]


@dataclass(frozen=True)
class Delivery:
    """What a batch copied and recorded for one partition (built by the replicator)."""

    topic: str
    replica_topic: str
    partition: int
    records: int
    bytes: int
    newest_timestamp_ms: int | None
    delivered_at: float | None = None  # Unix time its copies were acknowledged, if known


@dataclass(frozen=True)
class RecordedBatch:
    """One batch whose runs were recorded: the replicator's ``on_recorded`` payload."""

    deliveries: tuple[Delivery, ...]
    copy_seconds: float | None  # None: not measured (a streaming commit)
    commit_seconds: float | None
    copied_at: float    # Unix time the copies were delivered (results back at the driver)
    recorded_at: float  # Unix time the ledger commit completed


@dataclass
class _Partition:
    end: int | None = None
    recorded: int | None = None
    newest_ts: float | None = None   # Unix seconds of the newest record the ledger holds
    covered_at: float | None = None  # newest measurement with end <= recorded
    exported: set[str] = field(default_factory=set)


class ReplicationObserver:
    """The replication metrics of one flow ``source -> target``."""

    def __init__(self, metrics: Metrics, source: str, target: str, *,
                 interval_s: float | None = None,
                 replica_name: Callable[[str], str] | None = None,
                 on_update: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.m = metrics
        self.flow = (source, target)
        self.replica_name = replica_name or (lambda topic: topic)
        self.on_update = on_update
        self.clock = clock
        self.parts: dict[TP, _Partition] = {}
        self.labels: dict[TP, tuple[str, ...]] = {}
        self.set_aside: dict[str, str] = {}
        if interval_s is not None:
            self.m.interval.labels(*self.flow).set(interval_s)

    def _labels(self, topic: str, partition: int, replica: str | None = None) -> tuple[str, ...]:
        key = (topic, partition)
        if key not in self.labels:
            self.labels[key] = (*self.flow, replica or self.replica_name(topic), topic,
                                str(partition))
        return self.labels[key]

    def batch_recorded(self, batch: RecordedBatch, latency: bool = True) -> None:
        """Count a recorded batch: records, bytes, latencies, the ledger commit."""
        try:
            for d in batch.deliveries:
                labels = self._labels(d.topic, d.partition, d.replica_topic)
                self.m.records.labels(*labels).inc(d.records)
                self.m.bytes.labels(*labels).inc(d.bytes)
                if d.newest_timestamp_ms is not None and d.newest_timestamp_ms > 0:
                    newest = d.newest_timestamp_ms / 1000
                    if latency:
                        self.m.replication_latency.labels(*labels).observe(
                            max(0.0, batch.recorded_at - newest))
                    copied_at = d.delivered_at if d.delivered_at is not None else batch.copied_at
                    self.m.record_age.labels(*labels).set(max(0.0, copied_at - newest))
                    part = self.parts.setdefault((d.topic, d.partition), _Partition())
                    part.newest_ts = max(part.newest_ts or 0.0, newest)
            self.m.batches.labels(*self.flow).inc()
            self.m.commits.labels(*self.flow).inc()
            if batch.copy_seconds is not None and batch.commit_seconds is not None:
                self.m.batch_duration.labels(*self.flow).observe(batch.copy_seconds +
                                                                 batch.commit_seconds)
                self.m.commit_duration.labels(*self.flow).observe(batch.commit_seconds)
            self.m.last_commit.labels(*self.flow).set(batch.recorded_at)
        except Exception as exc:  # a metric is never a reason to stop replicating
            log.warning("replication metrics not updated: %s", exc)

    def commit_recorded(self, commit: Any) -> None:
        """A streaming commit (``pipelines.replicate.channel.RecordedCommit``): its reports
        carry per partition the records, bytes, newest timestamp, when the copies were
        acknowledged and their latency (record timestamp to delivery) summed over records."""
        recorded_at = aware(commit.committed_at).timestamp()
        for d in commit.parts:
            labels = self._labels(d.topic, d.partition, d.replica_topic)
            if d.records:
                # The report's mean latency: one observation per partition and report.
                self.m.replication_latency.labels(*labels).observe(
                    max(0.0, d.latency_sum_ms / d.records / 1000))
        self.batch_recorded(RecordedBatch(
            tuple(Delivery(d.topic, d.replica_topic, d.partition, d.records, d.bytes,
                           d.newest_timestamp_ms, d.delivered_at_ms / 1000)
                  for d in commit.parts),
            copy_seconds=None, commit_seconds=None, copied_at=recorded_at,
            recorded_at=recorded_at), latency=False)

    def measured(self, ends: Mapping[TP, int], recorded: Mapping[TP, int],
                 set_aside: Mapping[str, str], at: float | None = None) -> None:
        """After the source's end offsets were read (``at``, Unix time) against ``recorded``.

        ``set_aside`` maps each topic not replicated now to a reason in
        :data:`~pipelines.metrics.definitions.REASONS`.
        """
        at = self.clock() if at is None else at
        try:
            for tp, end in ends.items():
                if tp not in recorded and (tp not in self.parts or tp[0] not in set_aside):
                    continue
                part = self.parts.setdefault(tp, _Partition())
                # A partition set aside keeps its last recorded offset: its lag grows.
                part.end, part.recorded = end, recorded.get(tp, part.recorded)
                if end <= part.recorded:
                    part.covered_at = at
                self._export(tp, part)
            keep = set(recorded) | {tp for tp in self.parts if tp[0] in set_aside}
            for tp in [tp for tp in self.parts if tp not in keep]:
                self._forget(tp)
            self._set_aside(set_aside)
            self.m.replication_passes.labels(*self.flow).inc()
            self.m.last_pass.labels(*self.flow).set(at)
        except Exception as exc:
            log.warning("replication metrics not updated: %s", exc)
        if self.on_update is not None:
            self.on_update()

    def aside(self, set_aside: Mapping[str, str]) -> list[TP]:
        """Known partitions of the topics in ``set_aside``: the job measures their end offsets
        too, so that their lag and RPO keep growing while nothing is copied."""
        return [tp for tp, part in self.parts.items()
                if tp[0] in set_aside and part.recorded is not None]

    def _export(self, tp: TP, part: _Partition) -> None:
        labels = self._labels(*tp)
        self.m.end_offset.labels(*labels).set(part.end)
        self.m.recorded_offset.labels(*labels).set(part.recorded)
        self.m.lag_records.labels(*labels).set(max(0, part.end - part.recorded))
        for name, family, value in (("lag_seconds", self.m.lag_seconds, _lag_seconds),
                                    ("covered_at", self.m.covered_at, _covered_at),
                                    ("rpo", self.m.rpo, _rpo)):
            if name not in part.exported:
                family.labels(*labels).set_function(
                    lambda p=part, f=value: f(p, self.clock()))
                part.exported.add(name)

    def _forget(self, tp: TP) -> None:
        labels = self.labels.pop(tp, None)
        self.parts.pop(tp, None)
        if labels is None:
            return
        for family in (self.m.end_offset, self.m.recorded_offset, self.m.lag_records,
                       self.m.lag_seconds, self.m.covered_at, self.m.rpo):
            try:
                family.remove(*labels)
            except KeyError:
                pass

    def _set_aside(self, set_aside: Mapping[str, str]) -> None:
        for topic, reason in set_aside.items():
            if reason not in REASONS:
                raise ValueError(f"unknown reason {reason!r}")
        for topic, reason in self.set_aside.items():
            if set_aside.get(topic) != reason:
                self.m.not_replicated.remove(*self.flow, self.replica_name(topic), topic, reason)
        for topic, reason in set_aside.items():
            self.m.not_replicated.labels(*self.flow, self.replica_name(topic), topic,
                                         reason).set(1)
        self.set_aside = dict(set_aside)


def set_aside_reasons(broken: Mapping[str, str], refused: set[str],
                      replica_errors: Mapping[str, str]) -> dict[str, str]:
    """``{topic: reason}`` of the topics a replicator set aside (``broken``): refused (its
    source no longer holds the copy), replica (the replica could not be set up), else
    unreadable (its copy failed)."""
    return {t: REFUSED if t in refused else REPLICA if t in replica_errors else UNREADABLE
            for t in broken}


def _lag_seconds(p: _Partition, now: float) -> float:
    if p.end is None or p.recorded is None or p.end <= p.recorded:
        return 0.0
    return math.nan if p.newest_ts is None else max(0.0, now - p.newest_ts)


def _covered_at(p: _Partition, now: float) -> float:
    known = [t for t in (p.covered_at, p.newest_ts) if t is not None]
    return max(known) if known else math.nan


def _rpo(p: _Partition, now: float) -> float:
    covered = _covered_at(p, now)
    return covered if math.isnan(covered) else max(0.0, now - covered)


# --- checkpoints -------------------------------------------------------------------------------


class CheckpointObserver:
    """The checkpoint metrics of one flow ``source -> target``."""

    def __init__(self, metrics: Metrics, source: str, target: str, *,
                 interval_s: float | None = None,
                 on_update: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.m = metrics
        self.flow = (source, target)
        self.on_update = on_update
        self.clock = clock
        self.groups: set[str] = set()
        if interval_s is not None:
            self.m.checkpoint_interval.labels(*self.flow).set(interval_s)

    def pass_done(self, result: Any, seconds: float,
                  readiness: Mapping[str, tuple[bool, int]]) -> None:
        """After a pass (a ``CheckpointResult``) of ``seconds``; ``readiness`` per group is
        ``(ready to move, committed records not covered)``
        (``pipelines.checkpoint.readiness.pass_readiness``)."""
        now = self.clock()
        try:
            counts: dict[str, int] = {}
            for cp in result.checkpoints:
                counts[cp.status] = counts.get(cp.status, 0) + 1
                if cp.translated:
                    at = aware(cp.checkpointed_at).timestamp()
                    self.m.checkpoint_latency.labels(
                        *self.flow, cp.group_id, cp.source_topic, str(cp.partition)).observe(
                        max(0.0, now - at))
            for status, n in counts.items():
                self.m.checkpoints.labels(*self.flow, status).inc(n)
            for w in result.writes:
                self.m.group_offsets_written.labels(*self.flow, w.group_id).inc()
            for group in self.groups - set(readiness):
                for family in (self.m.group_ready, self.m.group_missing):
                    family.remove(*self.flow, group)
            for group, (ready, missing) in readiness.items():
                self.m.group_ready.labels(*self.flow, group).set(1 if ready else 0)
                self.m.group_missing.labels(*self.flow, group).set(missing)
            self.groups = set(readiness)
            self.m.checkpoint_passes.labels(*self.flow).inc()
            self.m.checkpoint_pass_duration.labels(*self.flow).observe(seconds)
            self.m.checkpoint_last_pass.labels(*self.flow).set(now)
        except Exception as exc:
            log.warning("checkpoint metrics not updated: %s", exc)
        if self.on_update is not None:
            self.on_update()
