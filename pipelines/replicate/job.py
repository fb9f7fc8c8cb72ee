"""``offset-ledger replicate --flow 'P->B' [--once]``: copy a flow's topics and record every run.

Two drivers. ``--once``: the driver (``replicator.FlowReplicator``)
plans each batch from the ledger and the clusters (``plan``, ``state``): per source partition,
the next upstream offset is where the recorded runs of the current epoch end, and a batch is a
set of bounded ranges ``(topic, partition, from, to)``. Copy tasks run the ranges
(``copy_task``: one task per group of ranges, librdkafka consumer -> idempotent producer) as a
Spark job on the executors, or, where Spark's master would be ``local``, in worker processes of
the driver (``executors``); the tasks return only the runs they wrote. The driver appends the
batch's runs to ``offset_syncs`` and then MERGEs ``replication_progress`` (``recorder``),
through delta-rs for a path ledger (``ledger.commits``) or Spark. A local pass on a path ledger
starts no JVM.

Without ``--once`` the job streams (``streaming``, docs/streaming.md): long-running copy tasks
(``stream_task``, ``stream_workers``) copy records as they arrive and report their delivered
runs through the flow's runs channel on the target cluster (``channel``); the driver accepts the
runs that continue each partition's recorded chain and commits them every
``--commit-interval``, with the same recorder and txn pair. ``--exactly-once`` makes the copy
transactional (records and runs in one Kafka transaction). No Spark streaming query and no
streaming checkpoint: the ledger (and, exactly-once, the committed transactions read back from
the channel) is the only position. A continuous run stops on SIGTERM or SIGINT after recording
what it copied (a second signal stops at once).

Invariants (both engines; the streaming ones in ``streaming``'s and ``channel``'s docstrings):
    * Positions never lead the ledger: a copy starts where the recorded (or, streaming, the
      accepted) runs end; a copy the ledger does not record is a duplicate, never a wrong
      mapping.
    * Order of effects per batch: every record of a range is delivered (flushed, each delivery
      report checked) **before** its runs leave the task; the ``offset_syncs`` append
      **before** the ``replication_progress`` MERGE, so progress never claims more than the
      runs record. A crash at any point loses at most the unrecorded copies of one batch: the
      next pass plans from the ledger and copies them again (at-least-once), and the ledger
      never holds a run for a copy that does not exist.
    * A retried task (executor or local worker lost) re-copies its ranges; a range whose copy
      fails returns an error and no runs. Only results that reach the driver are recorded,
      once: a copy the ledger does not record is a duplicate, never a wrong mapping.
      Speculative execution only adds such duplicates; it should be off for this job
      (``spark.speculation=false``).
    * Appends carry ``txnAppId = offset-ledger-replicate-<flow>`` and ``txnVersion`` = the
      flow's batch number, ``1 +`` the newest ``batch_id`` in the ledger (stored in each row):
      two jobs of one flow racing on the same batch number record it once, and the loser's
      copies stay unrecorded. The number comes from the ledger, so it survives restarts
      without a streaming checkpoint.
    * ``written_at`` strictly increases between the batches of a flow, across restarts too.
    * A flow-level check (flow alias, reachable clusters, a literally named topic missing on
      the source that was never replicated) refuses the flow before anything is written. A
      topic that cannot be replicated (replica cannot be created, grown or configured; its
      copy fails; its source was recreated: ``replicator``) is reported in the log and in the
      result's ``errors``, and the other topics go on.
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
import logging
import time
from collections.abc import Mapping
from typing import Any

from ledger.config import Config, ConfigError, reload_config
from ledger.errors import first_line
from ledger.policy import ReplicationPolicy
from pipelines import metrics, stops
from pipelines.acls import sync as acl_sync
from pipelines.args import add_flow_arguments, add_startup_wait
from pipelines.edge import kafka_admin, preflight
from pipelines.edge.kafka_offsets import list_offsets
from pipelines.metrics.observe import ReplicationObserver, set_aside_reasons
from pipelines.passes import stop_on_signals
from pipelines.replicate import executors, plan
from pipelines.replicate.lease import StoppedWhileAway
from pipelines.replicate.recorder import ReplicationError
from pipelines.replicate.replicator import FlowReplicator, ReplicationResult
from pipelines.replicate.streaming import (
    DEFAULT_COMMIT_INTERVAL_S,
    SESSION_TIMEOUT_MS,
    LeaseError,
    Observer,
    StreamingReplicator,
    streamed,
)

__all__ = ["FlowReplicator", "LeaseError", "ReplicationError", "ReplicationResult", "main",
           "replicate_continuously", "replicate_once"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 10.0
DEFAULT_REFRESH_S = 300.0
DEFAULT_UNTIL_TIMEOUT_S = 120.0
TP = plan.TP


# --- passes ------------------------------------------------------------------------------------


def replicate_once(spark: Any | None, config: Config, flow_name: str, *,
                   max_records_per_batch: int | None = None,
                   until: Mapping[TP, int] | None = None,
                   until_timeout_s: float = DEFAULT_UNTIL_TIMEOUT_S,
                   executor: str = "auto", ledger_writes: str = "auto",
                   observer: ReplicationObserver | None = None) -> ReplicationResult:
    """Replicate what the flow's source topics hold now, record the runs, and return.

    ``spark=None`` starts a session only when there is something to copy, and only if the
    copies or the ledger need one (``executor`` and ``ledger.commits``: a local run with a
    path ledger needs none). ``executor`` is ``auto``, ``spark`` or ``local``
    (``pipelines.replicate.executors``); ``ledger_writes="spark"`` makes every ledger commit
    with Spark (``auto``: delta-rs where the ledger allows, see ``recorder``).

    Without ``until``: loops over bounded batches until every partition reaches the end
    offset measured at the start. With ``until`` (``{(topic, partition): offset}``, e.g. a
    group's committed offsets for a failover catch-up): copies only those partitions, until the
    recorded runs (transaction markers and aborted records passed) reach the offsets, waiting up
    to ``until_timeout_s`` for offsets the source has not reached yet; ``result.caught_up`` says
    whether they were reached. Raises an :class:`OffsetLedgerError` subclass for an unknown
    flow, an unreachable cluster, a missing literally named topic, a failed ledger write, or a
    flow that a streaming job replicates now (:class:`LeaseError`); a topic that cannot be
    replicated is in ``result.errors``. ``observer`` (metrics) sees each recorded batch, the
    end offsets measured, and the positions at the end.
    """
    flow = config.flow(flow_name)
    for alias in (flow.source, flow.target):
        # The probe refresh makes, made first: a dead target is named after one metadata wait
        # instead of after the lease check's group lookup timed out on it as well.
        kafka_admin.check_reachable(config.cluster(alias))
    if streamed(config, flow_name, wait_s=SESSION_TIMEOUT_MS / 1000 + 2):
        # A second copy of the same records would interleave with the stream's in the replica.
        raise LeaseError(f"flow {flow_name} is streamed by a running `offset-ledger replicate` "
                         f"job: it records its runs every commit interval; a --once pass now "
                         f"would copy the same records again")
    started = time.perf_counter()
    replicator = FlowReplicator(spark, config, flow_name,
                                max_records_per_batch=max_records_per_batch, executor=executor,
                                ledger_writes=ledger_writes)
    _attach(observer, replicator)
    try:
        replicator.refresh()
        if until is None:
            ends, measured_at = replicator.end_offsets(), time.time()
            while replicator.run_batch(ends, ends):
                pass
            _observe(observer, replicator, ends, measured_at)
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
        if any(topic in replicator.broken for topic, _ in until):
            return  # an offset asked for cannot be reached: no point waiting for it
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
                           stop: stops.Stop | None = None,
                           executor: str = "auto", mode: str = "stream",
                           commit_interval_s: float = DEFAULT_COMMIT_INTERVAL_S,
                           exactly_once: bool | None = None,
                           on_commit: Observer | None = None,
                           observer: ReplicationObserver | None = None,
                           ledger_writes: str = "auto",
                           startup_wait_s: float = preflight.STARTUP_WAIT_S,
                           ) -> ReplicationResult:
    """Stream the flow until stopped (``stop`` set, or the process ends).

    Long-running copy tasks copy records as they arrive and the driver records their runs every
    ``commit_interval_s`` (``streaming``); ``interval_s`` is the period of heartbeats and
    housekeeping; ``exactly_once`` (None: the configuration's ``exactly.once.enabled``) makes
    the copy transactional; ``on_commit`` is called after each Delta commit with a
    :class:`~pipelines.replicate.channel.RecordedCommit`. Every ``refresh_s`` the configuration
    file is read again (allowlists), topics are re-selected and replicas created, grown and
    configured. ``observer`` (metrics) sees every recorded commit and every measurement of the
    source's end offsets. ``ledger_writes="spark"`` commits through Spark as a catalog ledger
    does. A cluster that does not answer at the start is waited for up to ``startup_wait_s``.
    ``mode`` is ``"stream"``; the retired ``"batch"`` raises :class:`RetiredModeError`.
    """
    if mode != "stream":
        raise RetiredModeError(mode)
    stop = stop or stops.StopEvent()
    observers = [o for o in (on_commit, observer and observer.commit_recorded) if o]
    streamer = StreamingReplicator(spark, config, flow_name,
                                   commit_interval_s=commit_interval_s,
                                   exactly_once=exactly_once, executor=executor,
                                   observers=observers, ledger_writes=ledger_writes,
                                   startup_wait_s=startup_wait_s)
    _attach(observer, streamer.r)
    try:
        streamer.run(stop, interval_s=interval_s, refresh_s=refresh_s, reload=reload_config)
    except StoppedWhileAway as exc:
        # A stop asked for while the target does not answer: nothing is lost (the channel
        # holds what was reported; the next run records it first), so the stop is clean.
        log.warning("%s", exc)
    finally:
        streamer.close()
    return streamer.result


class RetiredModeError(ConfigError):
    """``--mode batch`` (the former loop of bounded batches) is retired."""

    def __init__(self, mode: str) -> None:
        super().__init__(
            f"replicate --mode {mode} is retired: run the streaming job (replicate without "
            f"--once, the default: runs recorded every --commit-interval), or replicate --once "
            f"from a scheduler for bounded passes")


def _attach(observer: ReplicationObserver | None, replicator: FlowReplicator) -> None:
    """Batches recorded and end offsets measured reach ``observer`` (both modes)."""
    if observer is not None:
        replicator.on_recorded = observer.batch_recorded
        replicator.on_measured = lambda ends, at: _observe(observer, replicator, ends, at)
        replicator.acl_sync.on_report = lambda report: acl_sync.count(observer.m, report)


def _observe(observer: ReplicationObserver | None, replicator: FlowReplicator,
             ends: Mapping[TP, int], measured_at: float) -> None:
    if observer is None:
        return
    sync = replicator.result.topic_sync
    aside = set_aside_reasons(replicator.broken, replicator.refused, sync.errors if sync else {})
    if observer.aside(aside):
        try:  # topics set aside: their end offsets too, so that their lag keeps growing
            ends = {**list_offsets(replicator.config.cluster(replicator.flow.source), "latest",
                                   observer.aside(aside), read_committed=True,
                                   omit_unknown=True), **ends}
        except Exception as exc:
            log.warning("end offsets of topics set aside not read: %s", first_line(exc))
    observer.measured(ends, replicator.positions, aside, measured_at)


# --- command line ----------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flow_arguments(parser, "the flow to replicate")
    parser.add_argument("--once", action="store_true",
                        help="replicate up to the end offsets measured at start, then stop")
    parser.add_argument("--mode", default="stream",
                        help="stream (the only mode: long-running copy tasks, runs recorded "
                             "every --commit-interval); the former batch mode is retired "
                             "(use --once from a scheduler)")
    parser.add_argument("--commit-interval", type=float, default=DEFAULT_COMMIT_INTERVAL_S,
                        help="without --once: seconds between Delta commits of the delivered runs "
                             f"(default {DEFAULT_COMMIT_INTERVAL_S:g})")
    parser.add_argument("--exactly-once", action="store_true", default=None,
                        help="without --once: copy with a transactional producer (records and "
                             "their runs committed together; replica consumers read with "
                             "isolation.level=read_committed); default: the configuration's "
                             "exactly.once.enabled")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S,
                        help="without --once: seconds between heartbeats and housekeeping "
                             f"(sources behind, ended tasks; default {DEFAULT_INTERVAL_S:g})")
    parser.add_argument("--refresh-interval", type=float, default=DEFAULT_REFRESH_S,
                        help="seconds between re-reading the configuration, topic re-selection, "
                             f"replica growth and config sync (default {DEFAULT_REFRESH_S:g})")
    parser.add_argument("--max-records-per-batch", type=int, default=None,
                        help="--once: cap on records per batch, shared by the "
                             "partitions (default: "
                             f"{plan.DEFAULT_MAX_RECORDS_PER_PARTITION:,} per partition)")
    parser.add_argument("--executor", choices=executors.EXECUTORS, default="auto",
                        help="where copy tasks run: spark (Spark tasks), local (worker "
                             "processes of this driver, no JVM), or auto (default: local where "
                             "Spark's master would be local, else spark)")
    add_startup_wait(parser, preflight.STARTUP_WAIT_S)
    metrics.add_arguments(parser)


def run(args: argparse.Namespace, config: Config) -> int:
    flow = config.flow(args.flow)  # an unknown flow fails before a JVM starts
    if args.mode != "stream":
        raise RetiredModeError(args.mode)
    job_metrics = metrics.job_metrics("replicate", args, config, flow.source, flow.target,
                                      once=args.once)
    if job_metrics is None:
        return _run(args, config, None)
    with job_metrics:
        policy = ReplicationPolicy.from_config(config)
        observer = ReplicationObserver(
            job_metrics.metrics, flow.source, flow.target,
            interval_s=None if args.once else args.interval,
            replica_name=lambda topic: policy.remote_topic(flow.source, topic),
            on_update=job_metrics.exporter.publish)
        return _run(args, config, observer)


def _run(args: argparse.Namespace, config: Config, observer: ReplicationObserver | None) -> int:
    # Both modes start Spark (FlowReplicator.session) only once there is something to copy.
    if args.once:
        result = replicate_once(None, config, args.flow,
                                max_records_per_batch=args.max_records_per_batch,
                                executor=args.executor, observer=observer)
        print(f"flow {result.flow}: {len(result.topics)} topic(s), {result.batches} batch(es), "
              f"{result.records_copied} record(s) copied, {result.runs_written} run(s) "
              f"recorded in {result.wall_seconds:.1f}s (copy {result.copy_seconds:.1f}s, "
              f"ledger {result.ledger_seconds:.2f}s)")
        for p in sorted(result.progress.values(), key=lambda p: (p.topic, p.partition)):
            print(f"  {p.topic}[{p.partition}] -> {p.replica_topic}: last upstream offset "
                  f"{p.last_upstream_offset}, lag {p.lag}")
        for topic, message in sorted(result.errors.items()):
            print(f"error: topic {topic} not replicated: {message}", file=sys.stderr)
        return 1 if result.errors else 0
    stop = stops.StopEvent()
    restore = stop_on_signals(stop, "the copy tasks flush and their runs are recorded")
    started = time.perf_counter()
    try:
        result = replicate_continuously(None, config, args.flow, interval_s=args.interval,
                                        refresh_s=args.refresh_interval,
                                        stop=stop, executor=args.executor,
                                        commit_interval_s=args.commit_interval,
                                        exactly_once=args.exactly_once, observer=observer,
                                        startup_wait_s=args.startup_wait)
    finally:
        restore()
    wall = time.perf_counter() - started
    for topic, message in sorted(result.errors.items()):
        print(f"error: topic {topic} not replicated: {message}", file=sys.stderr)
    print(f"flow {result.flow}: stopped after streaming {wall:.1f}s, "
          f"{result.records_copied} record(s) copied, {result.runs_written} run(s) recorded "
          f"in {result.batches} commit(s) (ledger {result.ledger_seconds:.2f}s, "
          f"{_share(result.ledger_seconds, wall)} of the time)")
    return 1 if result.errors else 0


def _share(part: float, whole: float) -> str:
    # Of the busy time (copy + ledger): the time waiting for records is no one's share.
    return f"{part / whole:.1%}" if whole > 0 else "-"


def main(argv: list[str] | None = None) -> int:
    from pipelines.cli import job_main  # at call time: the CLI imports the verbs

    return job_main("replicate", argv)


if __name__ == "__main__":
    sys.exit(main())
