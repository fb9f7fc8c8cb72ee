"""The driver of one flow: topics, where each partition resumes, and one batch at a time.

``FlowReplicator`` keeps a flow's state between batches (the partitions it replicates, the next
upstream offset of each, the batch number and ``written_at`` of the last recorded batch) and
runs a batch: plan bounded ranges (``plan``), run the copy tasks (``executors``), record the
runs (``recorder``), move the positions. ``pipelines.replicate.job`` drives it (``--once``,
continuous, ``until``).

Invariants:
    * Positions move only after the batch's runs are appended: they never lead the ledger. A
      range whose copy failed keeps its position, and its topic is set aside for the pass.
    * Batch numbers and ``written_at`` continue from the ledger (``state``), across restarts.
    * New partitions (new topics, grown partitions) resume where their recorded runs of the
      current epoch end, or at the log start (``plan.resume_offsets``).
    * A topic is never resumed on a source that no longer holds what was copied: a partition
      that ends below its recorded copy (``plan.sources_behind``, every batch), or whose
      record at the last recorded copy differs from the replica's (``continuity``, before
      each batch that copies more of it), refuses the topic with what to do about it.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger import clock, settings
from ledger.config import Config, FlowConfig
from ledger.records import ProgressRecord
from ledger.writer import PartitionSummary, next_written_at, progress_row, sync_rows
from pipelines.acls.sync import AclSync
from pipelines.edge import kafka_admin
from pipelines.edge.kafka_offsets import list_offsets
from pipelines.metrics.observe import Delivery, RecordedBatch
from pipelines.mm2 import heartbeats
from pipelines.replicate import continuity, executors, plan, sink, source, state, topics
from pipelines.replicate.recorder import LedgerRecorder
from pipelines.replicate.span_upkeep import SpanUpkeep

log = logging.getLogger(__name__)

TP = plan.TP


@dataclass
class ReplicationResult:
    """What one ``replicate_once`` (or one continuous run) did."""

    flow: str
    run_id: str
    topics: list[topics.TopicPlan]
    batches: int = 0
    records_copied: int = 0
    runs_written: int = 0
    progress: dict[tuple[str, int], ProgressRecord] = field(default_factory=dict)
    copy_seconds: float = 0.0
    ledger_seconds: float = 0.0
    wall_seconds: float = 0.0
    topic_sync: topics.TopicSyncReport | None = None
    # Source topic -> why it was not (fully) replicated in this pass.
    errors: dict[str, str] = field(default_factory=dict)
    # Whether every partition reached its target (the end offsets measured at the start of a
    # --once pass, or the ``until`` offsets); partitions of failed topics never do.
    caught_up: bool = False
    # Next upstream offset per partition (where the recorded runs end, markers passed).
    positions: dict[tuple[str, int], int] = field(default_factory=dict)


class FlowReplicator:
    """The driver's state for one flow: topics, positions, batch numbers, the ledger.

    Spark is started only when something needs it (``spark=None``): topic work and planning
    need the clusters and a read of the ledger, which a path ledger answers without a JVM
    (``state.read_flow_state_direct``); local copy workers and delta-rs commits need none
    either. A pass that finds nothing to do never starts one.
    """

    def __init__(self, spark: Any | None, config: Config, flow_name: str, *,
                 max_records_per_batch: int | None = None,
                 max_bytes_per_partition: int = plan.DEFAULT_MAX_BYTES_PER_PARTITION,
                 executor: str = "auto", ledger_writes: str = "auto") -> None:
        self.local_copies = executors.use_local(executor, spark is not None)
        self.spark = spark
        self.config = config
        self.flow: FlowConfig = config.flow(flow_name)
        self.max_records = max_records_per_batch
        self.max_bytes = max_bytes_per_partition
        self.result = ReplicationResult(self.flow.name, _new_run_id(), [])
        self.positions: dict[TP, int] = {}
        # Per partition, where the newest accepted run ends: recorded (from the ledger, then
        # each batch), or accepted by the streaming driver for its next commit (channel.accept).
        self.tails: dict[TP, plan.RecordedTail] = {}
        self.replicas: dict[str, str] = {}
        self.broken: dict[str, str] = {}
        self.refused: set[str] = set()  # of ``broken``: sources that no longer hold the copy
        # Metrics: after each batch recorded by run_batch, and after each end-offset reading
        # (``ends``, Unix time), in both modes.
        self.on_recorded: Callable[[RecordedBatch], None] | None = None
        self.on_measured: Callable[[Mapping[TP, int], float], None] | None = None
        self.last_batch = -1
        self.last_written_at: dt.datetime | None = None
        self.recorder = LedgerRecorder(config.ledger_location, self.flow.name, self.session,
                                       ledger_writes=ledger_writes)
        self.spans = SpanUpkeep(config.ledger_location, self.flow.name,
                                (self.flow.source, self.flow.target), config.spans_refresh_runs,
                               config.spans_window)
        self._copies: executors.LocalCopies | executors.SparkCopies | None = None
        # MM2's topic ACL sync, at each refresh when its interval has passed (pipelines.acls).
        self.acl_sync = AclSync(self.session)

    # --- Spark and the ledger, when first needed ---------------------------------------------

    def session(self) -> Any:
        if self.spark is None:
            from pipelines.spark import LONG_LIVED_LEAN_JVM, get_spark

            # The driver JVM only plans and writes small Delta commits: the quick compiler and
            # the serial collector start it with a fraction of the CPU (record bytes never
            # enter it).
            self.spark = get_spark("offset-ledger-replicate", java_options=LONG_LIVED_LEAN_JVM)
        _use_driver_python_locally(self.spark)
        return self.spark

    def copies(self) -> executors.LocalCopies | executors.SparkCopies:
        """Where copy tasks run (``executors``): started on the first batch with records."""
        if self._copies is None:
            if self.local_copies:
                self._copies = executors.LocalCopies()
            else:
                self._copies = executors.SparkCopies(self.session())
                _warn_if_speculative(self.spark)
        return self._copies

    # --- topics ----------------------------------------------------------------------------

    def refresh(self, config: Config | None = None) -> None:
        """(Re)select topics, create/grow/configure replicas, and place new partitions."""
        if config is not None:
            self.config = config
            self.flow = config.flow(self.flow.name)
        for alias in (self.flow.source, self.flow.target):
            kafka_admin.check_reachable(self.config.cluster(alias))
        # Heartbeats first: a flow that allowlists ``heartbeats`` (MM2's default topics do)
        # finds the topic its own pass creates, on a fresh cluster too.
        self.heartbeat()
        plans = topics.plan_topics(self.config, self.flow)
        report = topics.ensure_replicas(self.config, self.flow, plans)
        self.acl_sync.run_due(self.config, self.flow, [p.topic for p in plans])
        self.broken = dict(report.errors)
        self.refused = set()
        healthy = [p for p in plans if p.topic not in self.broken]
        self.result.topics = plans
        self.result.topic_sync = report
        self.result.errors.update(report.errors)
        self.replicas = {p.topic: p.replica_topic for p in healthy}
        wanted = [(p.topic, n) for p in healthy for n in range(p.partitions)]
        new = [tp for tp in wanted if tp not in self.positions]
        if new:
            self._place(new)
        # Partitions of deselected or broken topics are no longer planned.
        keep = set(wanted)
        self.positions = {tp: o for tp, o in self.positions.items() if tp in keep}

    def heartbeat(self) -> None:
        """Write the flow's heartbeats as MM2 does (a failure is logged: replication goes on)."""
        try:
            heartbeats.emit(self.config, self.flow)
        except Exception as exc:  # a heartbeat is evidence of life, never a reason to stop
            log.warning("flow %s: heartbeat not written: %s", self.flow.name, exc)

    def load_state(self, partitions: list[TP]) -> state.FlowState:
        """The flow's recorded state of ``partitions`` (read without a JVM where the ledger
        allows), its batch number and newest write time taken in; both drivers load it here."""
        flow_state = state.read_flow_state_direct(self.config.ledger_location, self.flow.name,
                                                  partitions)
        if flow_state is None:
            flow_state = state.read_flow_state(self.recorder.ledger_now(), self.flow.name,
                                               partitions)
        elif self.recorder.ledger is None:
            self.recorder.tables_verified(flow_state.tables_verified)
        self.last_batch = max(self.last_batch, flow_state.last_batch)
        if flow_state.newest_written_at and (self.last_written_at is None or
                                             flow_state.newest_written_at > self.last_written_at):
            self.last_written_at = flow_state.newest_written_at
        return flow_state

    def _place(self, partitions: list[TP]) -> None:
        flow_state = self.load_state(partitions)
        src, dst = self.config.cluster(self.flow.source), self.config.cluster(self.flow.target)
        starts = list_offsets(src, "earliest", partitions, read_committed=True,
                              omit_unknown=True)
        replica_ends = list_offsets(dst, "latest", [(self.replicas[t], p) for t, p in partitions],
                                    read_committed=True, omit_unknown=True)
        positions, new_epoch = plan.resume_offsets(
            partitions, flow_state.tails, {(t, p): replica_ends.get((self.replicas[t], p), 0)
                                           for t, p in partitions}, starts)
        for t, p in new_epoch:
            log.warning("flow %s: replica %s[%s] ends before the recorded runs (recreated or "
                        "truncated): a new epoch starts from %s[%s] offset %s", self.flow.name,
                        self.replicas[t], p, t, p, positions[(t, p)])
        self.positions.update(positions)
        self.tails.update({tp: tail for tp, tail in flow_state.tails.items()
                           if tp in positions and tp not in new_epoch})
        for tp in new_epoch:  # nothing copied yet in the new epoch (a tail kept from before
            self.tails.pop(tp, None)  # a topic's removal and return would resume past its start)

    def check_continuity(self, partitions: set[TP]) -> None:
        """Refuse topics whose source no longer holds the record last copied (``continuity``)."""
        tails = {tp: t for tp, t in self.tails.items()
                 if tp in partitions and tp[0] not in self.broken}
        src, dst = self.config.cluster(self.flow.source), self.config.cluster(self.flow.target)
        for (t, p), (u, d) in sorted(continuity.differing(src, dst, tails, self.replicas).items()):
            self._refuse(t, f"{t}[{p}] holds another record at offset {u} than the one copied "
                            f"to {self.replicas[t]}[{p}] at offset {d}")

    def end_offsets(self) -> dict[TP, int]:
        ends = list_offsets(self.config.cluster(self.flow.source), "latest", self.positions,
                            read_committed=True, omit_unknown=True)
        if self.on_measured is not None:
            self.on_measured(ends, time.time())
        return ends

    # --- one batch ---------------------------------------------------------------------------

    def run_batch(self, targets: Mapping[TP, int], ends: Mapping[TP, int]) -> int:
        """Copy one bounded batch towards ``targets`` and record it; the ranges planned."""
        self.refuse_sources_behind(ends)
        ranges = plan.plan_batch(self.positions, targets, self.replicas, self.max_records)
        # Before copying more of a partition: is its source still the topic copied so far?
        # (Only where something is copied: about 40 ms a batch, nothing when idle.)
        self.check_continuity({r.key for r in ranges})
        self.drop_broken()
        ranges = [r for r in ranges if r.topic not in self.broken]
        if not ranges:
            return 0
        copies = self.copies()
        # Where Spark commits, the first batch's copy runs while the ledger's tables are opened
        # in the background (its runs are recorded once they are): the tables it needs were
        # already read without a JVM, so a damaged ledger failed before anything was copied.
        self.recorder.open_while_copying()
        groups = plan.group_for_tasks(ranges, plan.task_count(
            len(ranges), copies.slots, self.config.tasks_max_for(self.flow), streaming=False))
        started = time.perf_counter()
        results = copies.run(
            groups, source.consumer_config(self.config.cluster(self.flow.source).properties),
            sink.producer_config(self.config.cluster(self.flow.target).properties),
            self.max_bytes, f"offset-ledger replicate {self.flow.name}: {len(ranges)} range(s)")
        copy_seconds = time.perf_counter() - started
        self.result.copy_seconds += copy_seconds
        copied_at = time.time()
        summaries: list[PartitionSummary] = []
        for r in results:
            if r.error is not None:
                topic = r.range.topic
                message = f"{topic}[{r.range.partition}]: {r.error}"
                log.error("flow %s: copy failed, topic %s left for now: %s", self.flow.name,
                          topic, message)
                self.broken[topic] = message
                self.result.errors[topic] = message
            elif r.summary is not None:
                summaries.append(r.summary)
        if summaries:
            recording = time.perf_counter()
            self.record_batch(summaries, ends)
            if self.on_recorded is not None:
                self.on_recorded(RecordedBatch(
                    tuple(Delivery(r.range.topic, r.range.replica_topic, r.range.partition,
                                   r.summary.records, r.bytes, r.summary.newest_timestamp_ms)
                          for r in results if r.error is None and r.summary is not None),
                    copy_seconds, time.perf_counter() - recording, copied_at, time.time()))
        for r in results:  # after the append: positions never lead the ledger
            if r.error is None:
                self.positions[r.range.key] = max(self.positions[r.range.key], r.position)
        self.drop_broken()
        return len(ranges)

    def drop_broken(self) -> None:
        """Topics set aside are not planned again in this pass (a refresh may bring them back)."""
        self.positions = {tp: o for tp, o in self.positions.items() if tp[0] not in self.broken}

    def refuse_sources_behind(self, ends: Mapping[TP, int]) -> None:
        """Refuse topics whose source ends below where their recorded copy ends."""
        for t, p in plan.sources_behind(self.positions, ends):
            self._refuse(t, f"{t}[{p}] ends at offset {ends[(t, p)]}, below offset "
                            f"{self.positions[(t, p)]} where its recorded copy ends")

    def _refuse(self, topic: str, why: str) -> None:
        # Copying on would resume past the recreated topic's records (lost) and record runs
        # whose upstream offsets collide with the old ones in the same epoch (wrong
        # translations): the topic is left, with what to do about it.
        if topic in self.broken:
            return  # set aside already (another partition, another reason): that one stands
        message = (
            f"{why}: the source topic was deleted and recreated, or lost records, so its "
            f"recorded runs no longer describe it. Nothing more is copied from it. To copy "
            f"it again as a new epoch from its log start, delete the replica topic "
            f"{self.replicas.get(topic, '?')} on {self.flow.target} (the next pass "
            f"recreates it), or remove the topic from the flow")
        log.error("flow %s: %s", self.flow.name, message)
        self.broken[topic] = message
        self.refused.add(topic)
        self.result.errors[topic] = message

    def record_batch(self, summaries: list[PartitionSummary], ends: Mapping[TP, int]) -> None:
        """Record one batch's runs (a bounded batch, or a streaming commit) as batch
        ``last_batch + 1``, then its progress; both drivers record through this."""
        batch = self.last_batch + 1
        written_at = next_written_at(clock.now(), self.last_written_at)
        flow = self.flow
        rows = sync_rows(flow=flow.name, source_cluster=flow.source, target_cluster=flow.target,
                         summaries=summaries, run_id=self.result.run_id, batch_id=batch,
                         written_at=written_at)
        progress = [progress_row(flow=flow.name, summary=s, source_end_offsets=ends,
                                 batch_id=batch, updated_at=written_at) for s in summaries]
        self.recorder.record(rows, progress, batch)
        self.result.ledger_seconds = self.recorder.seconds
        self.spans.appended(len(rows), self.recorder.direct)
        self.last_batch, self.last_written_at = batch, written_at
        records = sum(s.records for s in summaries)
        self.result.batches += 1
        self.result.records_copied += records
        self.result.runs_written += len(rows)
        for p in progress:
            self.result.progress[(p.topic, p.partition)] = p
        for summary in summaries:
            run = max(summary.runs, key=lambda r: r.downstream_offset)  # the newest copy
            self.tails[(summary.topic, summary.partition)] = plan.RecordedTail(
                run.upstream_end, run.downstream_end)
        log.info("flow %s batch %s: %s records, %s runs", flow.name, batch, records, len(rows))

    def close(self) -> None:
        try:
            self.spans.close()
            self.recorder.close()
        finally:
            self.result.ledger_seconds = self.recorder.seconds
            if self._copies is not None:
                self._copies.close()
            self.result.positions = dict(self.positions)


def _use_driver_python_locally(spark: Any) -> None:
    # In local mode the Python workers must be an interpreter with confluent-kafka: this one,
    # unless PYSPARK_PYTHON chose another, rather than PySpark's default `python3` from PATH.
    sc = spark.sparkContext
    if sc.master.startswith("local") and sc.pythonExec in ("python3", "python"):
        sc.pythonExec = settings.pyspark_python() or sys.executable


def _warn_if_speculative(spark: Any) -> None:
    if spark.sparkContext.getConf().get("spark.speculation", "false").lower() == "true":
        log.warning("spark.speculation is on: speculative copy tasks only add unrecorded "
                    "duplicates on the replica; submit replicate with "
                    "--conf spark.speculation=false")


def _new_run_id() -> str:
    return f"{clock.now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
