"""``offset-ledger replicate --flow 'P->B' [--once]``: copy a flow's topics and record every run.

The driver plans each batch from the ledger and the clusters (``plan``, ``state``): per source
partition, the next upstream offset is where the recorded runs of the current epoch end, and a
batch is a set of bounded ranges ``(topic, partition, from, to)``. Copy tasks run the ranges
(``copy_task``: one task per group of ranges, librdkafka consumer -> idempotent producer) as a
Spark job on the executors, or, where Spark's master would be ``local``, in worker processes of
the driver (``executors``); the tasks return only the runs they wrote. The driver appends the
batch's runs to ``offset_syncs`` and then MERGEs ``replication_progress``, through delta-rs for
a path ledger (``ledger.commits``) or Spark. A local pass on a path ledger starts no JVM.
No Spark streaming query and no streaming checkpoint: a stopped job (SIGTERM, ``kill -9``)
leaves nothing that a later pass with other topics or partitions could trip over. A continuous
run stops on SIGTERM or SIGINT after recording its current batch (a second signal stops at
once) and prints its ledger share.

Invariants:
    * Order of effects per batch: every record of a range is delivered (flushed, each delivery
      report checked) **before** its runs leave the task; the ``offset_syncs`` append
      **before** the ``replication_progress`` MERGE, so progress never claims more than the
      runs record. A crash at any point loses at most the unrecorded copies of one batch: the
      next pass plans from the ledger and copies them again (at-least-once), and the ledger
      never holds a run for a copy that does not exist.
    * A retried task (executor lost) re-copies its ranges; a range whose copy fails returns an
      error and no runs. Only results that reach the driver are recorded, once: a copy the
      ledger does not record is a duplicate, never a wrong mapping. Speculative execution only
      adds such duplicates; it should be off for this job (``spark.speculation=false``).
    * Appends carry ``txnAppId = offset-ledger-replicate-<flow>`` and ``txnVersion`` = the
      flow's batch number, ``1 +`` the newest ``batch_id`` in the ledger (stored in each row):
      two jobs of one flow racing on the same batch number record it once, and the loser's
      copies stay unrecorded. The number comes from the ledger, so it survives restarts
      without a streaming checkpoint.
    * ``written_at`` strictly increases between the batches of a flow, across restarts too.
    * A flow-level check (flow alias, reachable clusters, a literally named topic missing on
      the source) refuses the flow before anything is written. A topic that cannot be
      replicated (replica cannot be created, grown or configured; its copy fails) is reported
      in the log and in the result's ``errors``, and the other topics go on.
    * Topic changes: every ``--refresh-interval`` (and at each start) the configuration file is
      read again (allowlists), topics are re-selected, replicas created or grown to the source's
      partition count, configs synced; new topics and partitions are copied from their start.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # `spark-submit pipelines/replicate/job.py`: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import dataclasses
import datetime as dt
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ledger import commits
from ledger.config import Config, FlowConfig, load_config
from ledger.errors import OffsetLedgerError
from ledger.records import ProgressRecord
from ledger.records import rows as record_rows
from ledger.schemas import (
    NATURAL_KEYS,
    OFFSET_SYNCS,
    OFFSET_SYNCS_SCHEMA,
    REPLICATION_PROGRESS,
    REPLICATION_PROGRESS_SCHEMA,
)
from ledger.tables import Ledger
from ledger.writer import PartitionSummary, next_written_at, progress_row, sync_rows
from pipelines import kafka_admin
from pipelines.cli import add_flow_arguments, job_main
from pipelines.mm2 import heartbeats
from pipelines.replicate import executors, plan, sink, source, state, topics

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 10.0
DEFAULT_REFRESH_S = 300.0
DEFAULT_UNTIL_TIMEOUT_S = 120.0
# The local driver JVM's options (ignored under spark-submit and on Databricks).
LEAN_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
TP = plan.TP


class ReplicationError(OffsetLedgerError):
    """A batch could not be recorded (the ledger append or MERGE failed, ...)."""


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

    Spark is started only when a batch has something to copy (``spark=None``): topic work and
    planning need the clusters and a read of the ledger, which a path ledger answers without a
    JVM (``state.read_flow_state_direct``). A pass that finds nothing to do never starts one.
    """

    def __init__(self, spark: Any | None, config: Config, flow_name: str, *,
                 max_records_per_batch: int | None = None,
                 max_bytes_per_partition: int = plan.DEFAULT_MAX_BYTES_PER_PARTITION,
                 executor: str = "auto", ledger_writes: str = "auto") -> None:
        if ledger_writes not in ("auto", "spark"):
            raise ValueError(f"ledger_writes must be auto or spark, not {ledger_writes!r}")
        self.local_copies = executors.use_local(executor, spark is not None)
        self.spark = spark
        self.config = config
        self.flow: FlowConfig = config.flow(flow_name)
        self.max_records = max_records_per_batch
        self.max_bytes = max_bytes_per_partition
        self.result = ReplicationResult(self.flow.name, _new_run_id(), [])
        self.positions: dict[TP, int] = {}
        self.replicas: dict[str, str] = {}
        self.broken: dict[str, str] = {}
        self.last_batch = -1
        self.last_written_at: dt.datetime | None = None
        self.ledger: Ledger | None = None
        self._background = ThreadPoolExecutor(max_workers=1,
                                              thread_name_prefix="offset-ledger-progress")
        self._progress_write: Future[None] | None = None
        self._tables_verified = False
        # Batch commits through delta-rs (ledger.commits) once the direct read verified the
        # tables; off for good after the first commit it could not make.
        self._commit_direct = False
        self._ledger_writes = ledger_writes
        self._opening: Future[Ledger] | None = None
        self._copies: executors.LocalCopies | executors.SparkCopies | None = None

    # --- Spark and the ledger, when first needed ---------------------------------------------

    def session(self) -> Any:
        if self.spark is None:
            from pipelines.spark import get_spark

            # The driver JVM only plans and writes small Delta commits: the quick compiler and
            # the serial collector start it with a fraction of the CPU (record bytes never
            # enter it).
            self.spark = get_spark("offset-ledger-replicate", java_options=LEAN_JVM)
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

    def _open_ledger(self) -> Ledger:
        ledger = Ledger(self.session(), self.config.ledger_location)
        if not self._tables_verified:  # else the two tables written here were read already
            ledger.init()
        return ledger

    def _open_and_warm(self) -> Ledger:
        ledger = self._open_ledger()
        # Delta's classes and the two tables' snapshots load now, so the batch's append and
        # MERGE do not pay for them on the critical path.
        for name in (OFFSET_SYNCS, REPLICATION_PROGRESS):
            ledger.read(name).schema
        return ledger

    def open_ledger_while_copying(self) -> None:
        """Open the ledger in the background (before the first copy job is submitted)."""
        if self.ledger is None and self._opening is None:
            self._opening = self._background.submit(self._open_and_warm)

    def ledger_now(self) -> Ledger:
        """The initialised ledger (its tables created or checked on the first call)."""
        if self.ledger is None:
            opening, self._opening = self._opening, None
            self.ledger = opening.result() if opening is not None else self._open_ledger()
        return self.ledger

    # --- topics ----------------------------------------------------------------------------

    def refresh(self, config: Config | None = None) -> None:
        """(Re)select topics, create/grow/configure replicas, and place new partitions."""
        if config is not None:
            self.config = config
            self.flow = config.flow(self.flow.name)
        for alias in (self.flow.source, self.flow.target):
            kafka_admin.check_reachable(self.config.cluster(alias))
        plans = topics.plan_topics(self.config, self.flow)
        report = topics.ensure_replicas(self.config, self.flow, plans)
        self.heartbeat()
        self.broken = dict(report.errors)
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

    def _place(self, partitions: list[TP]) -> None:
        flow_state = state.read_flow_state_direct(self.config.ledger_location, self.flow.name,
                                                  partitions)
        if flow_state is None:
            flow_state = state.read_flow_state(self.ledger_now(), self.flow.name, partitions)
        elif self.ledger is None:
            self._tables_verified = flow_state.tables_verified
            self._commit_direct = self._tables_verified and self._ledger_writes == "auto"
        self.last_batch = max(self.last_batch, flow_state.last_batch)
        if flow_state.newest_written_at and (self.last_written_at is None or
                                             flow_state.newest_written_at > self.last_written_at):
            self.last_written_at = flow_state.newest_written_at
        src, dst = self.config.cluster(self.flow.source), self.config.cluster(self.flow.target)
        starts = source.list_offsets(src, partitions, "earliest")
        replica_ends = source.list_offsets(
            dst, [(self.replicas[t], p) for t, p in partitions], "latest")
        positions, new_epoch = plan.resume_offsets(
            partitions, flow_state.tails, {(t, p): replica_ends.get((self.replicas[t], p), 0)
                                           for t, p in partitions}, starts)
        for t, p in new_epoch:
            log.warning("flow %s: replica %s[%s] ends before the recorded runs (recreated or "
                        "truncated): a new epoch starts from %s[%s] offset %s", self.flow.name,
                        self.replicas[t], p, t, p, positions[(t, p)])
        self.positions.update(positions)

    def end_offsets(self) -> dict[TP, int]:
        return source.list_offsets(self.config.cluster(self.flow.source), self.positions,
                                   "latest")

    # --- one batch ---------------------------------------------------------------------------

    def run_batch(self, targets: Mapping[TP, int], ends: Mapping[TP, int]) -> int:
        """Copy one bounded batch towards ``targets`` and record it; the ranges planned."""
        ranges = plan.plan_batch(self.positions, targets, self.replicas, self.max_records)
        if not ranges:
            return 0
        copies = self.copies()
        if not self._commit_direct:
            # The first batch's copy runs while the ledger's tables are opened with Spark in
            # the background (its runs are recorded once they are): the tables it needs were
            # already read without a JVM, so a damaged ledger failed before anything was copied.
            self.open_ledger_while_copying()
        groups = plan.group_for_tasks(ranges, copies.slots)
        started = time.perf_counter()
        results = copies.run(
            groups, source.consumer_config(self.config.cluster(self.flow.source).properties),
            sink.producer_config(self.config.cluster(self.flow.target).properties),
            self.max_bytes, f"offset-ledger replicate {self.flow.name}: {len(ranges)} range(s)")
        self.result.copy_seconds += time.perf_counter() - started
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
            self._record(summaries, ends)
        for r in results:  # after the append: positions never lead the ledger
            if r.error is None:
                self.positions[r.range.key] = max(self.positions[r.range.key], r.position)
        for topic in self.broken:
            self.positions = {tp: o for tp, o in self.positions.items() if tp[0] != topic}
        return len(ranges)

    def _record(self, summaries: list[PartitionSummary], ends: Mapping[TP, int]) -> None:
        batch = self.last_batch + 1
        written_at = next_written_at(dt.datetime.now(dt.UTC), self.last_written_at)
        flow = self.flow
        rows = sync_rows(flow=flow.name, source_cluster=flow.source, target_cluster=flow.target,
                         summaries=summaries, run_id=self.result.run_id, batch_id=batch,
                         written_at=written_at)
        progress = [progress_row(flow=flow.name, summary=s, source_end_offsets=ends,
                                 batch_id=batch, updated_at=written_at) for s in summaries]
        started = time.perf_counter()
        try:
            self._append_runs(rows, batch)
        except Exception as exc:
            raise ReplicationError(f"flow {flow.name}: recording batch {batch} failed: "
                                   f"{str(exc).strip().splitlines()[0][:300]}") from exc
        self.result.ledger_seconds += time.perf_counter() - started
        self.last_batch, self.last_written_at = batch, written_at
        # After the append: progress never claims more than offset_syncs records. The MERGE
        # overlaps the next batch's copy; the next one (and close()) waits for it first.
        self.wait_for_progress()
        self._progress_write = self._background.submit(self._merge_progress, progress)
        records = sum(s.records for s in summaries)
        self.result.batches += 1
        self.result.records_copied += records
        self.result.runs_written += len(rows)
        for p in progress:
            self.result.progress[(p.topic, p.partition)] = p
        log.info("flow %s batch %s: %s records, %s runs", flow.name, batch, records, len(rows))

    def _append_runs(self, rows: list[tuple], batch: int) -> None:
        app_id = f"offset-ledger-replicate-{self.flow.name}"
        if self._commit_direct:
            names = [f.name for f in OFFSET_SYNCS_SCHEMA.fields]
            outcome = commits.append_with_txn(self.config.ledger_location, OFFSET_SYNCS,
                                              [dict(zip(names, r, strict=True)) for r in rows],
                                              app_id=app_id, version=batch)
            if outcome is not commits.UNAVAILABLE:
                return
            self._commit_direct = False
        ledger = self.ledger_now()
        ledger.append(OFFSET_SYNCS, ledger.spark.createDataFrame(rows, OFFSET_SYNCS_SCHEMA),
                      txn_app_id=app_id, txn_version=batch)

    def _merge_progress(self, progress: list[ProgressRecord]) -> None:
        if self._commit_direct and commits.merge_on_keys(
                self.config.ledger_location, REPLICATION_PROGRESS, record_rows(progress),
                NATURAL_KEYS[REPLICATION_PROGRESS]) is commits.COMMITTED:
            return
        ledger = self.ledger_now()
        ledger.merge(REPLICATION_PROGRESS,
                     ledger.spark.createDataFrame(record_rows(progress),
                                                  REPLICATION_PROGRESS_SCHEMA))

    def wait_for_progress(self) -> None:
        if self._progress_write is None:
            return
        started = time.perf_counter()
        try:
            self._progress_write.result()
        except Exception as exc:
            raise ReplicationError(f"flow {self.flow.name}: replication_progress MERGE "
                                   f"failed: {str(exc).strip().splitlines()[0][:300]}") from exc
        finally:
            self._progress_write = None
            self.result.ledger_seconds += time.perf_counter() - started

    def close(self) -> None:
        try:
            self.wait_for_progress()
        finally:
            self._background.shutdown(wait=True, cancel_futures=True)
            if self._copies is not None:
                self._copies.close()
            self.result.positions = dict(self.positions)


def _use_driver_python_locally(spark: Any) -> None:
    # In local mode the Python workers must be an interpreter with confluent-kafka: this one,
    # unless PYSPARK_PYTHON chose another, rather than PySpark's default `python3` from PATH.
    sc = spark.sparkContext
    if sc.master.startswith("local") and sc.pythonExec in ("python3", "python"):
        sc.pythonExec = os.environ.get("PYSPARK_PYTHON") or sys.executable


def _warn_if_speculative(spark: Any) -> None:
    if spark.sparkContext.getConf().get("spark.speculation", "false").lower() == "true":
        log.warning("spark.speculation is on: speculative copy tasks only add unrecorded "
                    "duplicates on the replica; submit replicate with "
                    "--conf spark.speculation=false")


def _new_run_id() -> str:
    return f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"


# --- passes ------------------------------------------------------------------------------------


def replicate_once(spark: Any | None, config: Config, flow_name: str, *,
                   max_records_per_batch: int | None = None,
                   until: Mapping[TP, int] | None = None,
                   until_timeout_s: float = DEFAULT_UNTIL_TIMEOUT_S,
                   executor: str = "auto") -> ReplicationResult:
    """Replicate what the flow's source topics hold now, record the runs, and return.

    ``spark=None`` starts a session only when there is something to copy, and only if the
    copies or the ledger need one (``executor`` and ``ledger.commits``: a local run with a
    path ledger needs none). ``executor`` is ``auto``, ``spark`` or ``local``
    (``pipelines.replicate.executors``).

    Without ``until``: loops over bounded batches until every partition reaches the end
    offset measured at the start. With ``until`` (``{(topic, partition): offset}``, e.g. a
    group's committed offsets for a failover catch-up): copies only those partitions, until the
    recorded runs (transaction markers and aborted records passed) reach the offsets, waiting up
    to ``until_timeout_s`` for offsets the source has not reached yet; ``result.caught_up`` says
    whether they were reached. Raises an :class:`OffsetLedgerError` subclass for an unknown
    flow, an unreachable cluster, a missing literally named topic, or a failed ledger write; a
    topic that cannot be replicated is in ``result.errors``.
    """
    started = time.perf_counter()
    replicator = FlowReplicator(spark, config, flow_name,
                                max_records_per_batch=max_records_per_batch, executor=executor)
    try:
        replicator.refresh()
        if until is None:
            ends = replicator.end_offsets()
            while replicator.run_batch(ends, ends):
                pass
            goal = {tp: ends[tp] for tp in ends if tp in replicator.positions}
            replicator.result.caught_up = not replicator.broken and all(
                replicator.positions[tp] >= o for tp, o in goal.items())
        else:
            _replicate_until(replicator, dict(until), until_timeout_s)
    finally:
        replicator.close()
    result = replicator.result
    result.wall_seconds = time.perf_counter() - started
    return result


def _replicate_until(replicator: FlowReplicator, until: dict[TP, int], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        wanted = {tp: o for tp, o in until.items() if tp in replicator.positions}
        if len(wanted) == len(until) and all(replicator.positions[tp] >= o
                                             for tp, o in wanted.items()):
            replicator.result.caught_up = True
            return
        ends = replicator.end_offsets()
        targets = {tp: min(o, ends.get(tp, 0)) for tp, o in wanted.items()}
        if not replicator.run_batch(targets, ends):
            if time.monotonic() > deadline:
                return
            time.sleep(0.2)  # the source has not reached an offset asked for yet


def replicate_continuously(spark: Any | None, config: Config, flow_name: str, *,
                           interval_s: float = DEFAULT_INTERVAL_S,
                           refresh_s: float = DEFAULT_REFRESH_S,
                           max_records_per_batch: int | None = None,
                           stop: threading.Event | None = None,
                           executor: str = "auto") -> ReplicationResult:
    """Run the flow until stopped (``stop`` set, or the process ends).

    Every ``refresh_s`` the configuration file is read again (allowlists), topics are
    re-selected and replicas created, grown and configured; between refreshes a batch runs
    every ``interval_s``, or at once while the previous batch was cut by its bounds.
    """
    stop = stop or threading.Event()
    replicator = FlowReplicator(spark, config, flow_name,
                                max_records_per_batch=max_records_per_batch, executor=executor)
    next_refresh = 0.0
    try:
        while not stop.is_set():
            if time.monotonic() >= next_refresh:
                replicator.refresh(_reload(config))
                next_refresh = time.monotonic() + refresh_s
            else:
                replicator.heartbeat()
            ends = replicator.end_offsets()
            replicator.run_batch(ends, ends)
            behind = any(replicator.positions[tp] < o for tp, o in ends.items()
                         if tp in replicator.positions)
            if not behind:
                stop.wait(min(interval_s, max(0.0, next_refresh - time.monotonic())))
    finally:
        replicator.close()
    return replicator.result


def _reload(config: Config) -> Config:
    """The configuration file as it is now (allowlists edited by ``topics --add`` ...)."""
    if not config.path:
        return config
    try:
        fresh = load_config(config.path)
    except OffsetLedgerError as exc:
        log.error("configuration %s not reloaded, keeping the previous one: %s", config.path, exc)
        return config
    # A --ledger-location override given on the command line stays.
    return dataclasses.replace(fresh, ledger_location=config.ledger_location)


# --- command line ----------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flow_arguments(parser, "the flow to replicate")
    parser.add_argument("--once", action="store_true",
                        help="replicate up to the end offsets measured at start, then stop")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S,
                        help=f"seconds between batches when caught up "
                             f"(default {DEFAULT_INTERVAL_S:g})")
    parser.add_argument("--refresh-interval", type=float, default=DEFAULT_REFRESH_S,
                        help="seconds between re-reading the configuration, topic re-selection, "
                             f"replica growth and config sync (default {DEFAULT_REFRESH_S:g})")
    parser.add_argument("--max-records-per-batch", type=int, default=None,
                        help="cap on records per batch, shared by the partitions (default: "
                             f"{plan.DEFAULT_MAX_RECORDS_PER_PARTITION:,} per partition)")
    parser.add_argument("--executor", choices=executors.EXECUTORS, default="auto",
                        help="where copy tasks run: spark (Spark tasks), local (worker "
                             "processes of this driver, no JVM), or auto (default: local where "
                             "Spark's master would be local, else spark)")


def run(args: argparse.Namespace, config: Config) -> int:
    config.flow(args.flow)  # an unknown flow fails before a JVM starts
    # Both modes start Spark (FlowReplicator.session) only once there is something to copy.
    if args.once:
        result = replicate_once(None, config, args.flow,
                                max_records_per_batch=args.max_records_per_batch,
                                executor=args.executor)
        print(f"flow {result.flow}: {len(result.topics)} topic(s), {result.batches} batch(es), "
              f"{result.records_copied} record(s) copied, {result.runs_written} run(s) "
              f"recorded in {result.wall_seconds:.1f}s (copy {result.copy_seconds:.1f}s, "
              f"ledger {result.ledger_seconds:.1f}s)")
        for p in sorted(result.progress.values(), key=lambda p: (p.topic, p.partition)):
            print(f"  {p.topic}[{p.partition}] -> {p.replica_topic}: last upstream offset "
                  f"{p.last_upstream_offset}, lag {p.lag}")
        for topic, message in sorted(result.errors.items()):
            print(f"error: topic {topic} not replicated: {message}", file=sys.stderr)
        return 1 if result.errors else 0
    stop = threading.Event()
    restore = _stop_on_signals(stop)
    started = time.perf_counter()
    try:
        result = replicate_continuously(None, config, args.flow, interval_s=args.interval,
                                        refresh_s=args.refresh_interval,
                                        max_records_per_batch=args.max_records_per_batch,
                                        stop=stop, executor=args.executor)
    finally:
        restore()
    wall = time.perf_counter() - started
    print(f"flow {result.flow}: stopped after {result.batches} batch(es), "
          f"{result.records_copied} record(s) copied, {result.runs_written} run(s) recorded "
          f"in {wall:.1f}s (copy {result.copy_seconds:.1f}s, ledger "
          f"{result.ledger_seconds:.1f}s, ledger share "
          f"{_share(result.ledger_seconds, result.copy_seconds + result.ledger_seconds)})")
    return 0


def _share(part: float, whole: float) -> str:
    # Of the busy time (copy + ledger): the time waiting for records is no one's share.
    return f"{part / whole:.1%}" if whole > 0 else "-"


def _stop_on_signals(stop: threading.Event) -> Callable[[], None]:
    """SIGTERM/SIGINT end a continuous run after its current batch is recorded (a second
    signal stops at once); returns the function restoring the previous handlers."""
    def handle(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        log.warning("signal %s: stopping after the current batch", signum)
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def main(argv: list[str] | None = None) -> int:
    return job_main("replicate", argv)


if __name__ == "__main__":
    sys.exit(main())
