"""The streaming driver of one flow: long-running copy tasks, runs committed every interval.

::

    start   lease (``lease.RunsChannel``: partition 0 in the flow's group) -> [exactly-once:
            fence the task ids] -> catch Delta up from the channel -> topics, positions
            from Delta -> tasks
    loop    channel -> accept runs (channel.accept) -> pending
            every --commit-interval   pending -> Delta (offset_syncs append, progress MERGE),
                                       then the channel offset (a hint) -> observers
            every --interval          heartbeats, sources behind, ended tasks replaced
            every --refresh-interval  topics re-selected; new partitions get a new task,
                                       tasks of dropped topics restart without them
    stop    ask every task to stop (they flush and report) -> drain the channel -> commit

Invariants (with ``channel``'s and ``stream_task``'s):
    * Delta is written only by the lease holder, one commit per interval with the flow's txn
      pair (``offset-ledger-replicate-<flow>``, batch number): a second driver of the flow
      refuses to start, and a driver replaced by a newer one (its lease message follows this
      driver's in the runs partition) stops. A lease lost otherwise (the static member fenced by
      its own rejoin, the assignment lost while the target was away) is taken back
      (``lease``, which also hands the driver each report once and in order).
    * Positions never lead the ledger: a task (first start or restart) starts where the
      accepted runs end, and only after the channel was drained (and, exactly-once, the task's
      transactional id fenced), so nothing of its predecessor is still to come that could be
      accepted; what its predecessor copied past that point is a duplicate no run maps.
    * After a crash the new driver first accepts what the channel holds beyond Delta (the same
      rule as live: the catch-up of a crash between a Kafka commit and a Delta commit), then
      plans from Delta. Exactly-once: every committed transaction's runs are in the channel,
      so Delta ends up with a run for every committed copy, and tasks restart exactly after it.
    * A topic-level task error refuses that topic only (named in the log and the result's
      errors); any other task failure restarts the task from the ledger's position.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from ledger import clock
from ledger.config import Config
from ledger.errors import OffsetLedgerError, first_line
from pipelines import stops
from pipelines.edge import kafka_admin, kafka_errors, preflight
from pipelines.replicate import channel, plan, sink, source, stream_task
from pipelines.replicate.lease import LEASE_RETAKE_S, SESSION_TIMEOUT_MS, LeaseError, RunsChannel
from pipelines.replicate.plan import TP
from pipelines.replicate.replicator import FlowReplicator, ReplicationResult
from pipelines.replicate.stream_workers import LocalStreams, SparkStreams

log = logging.getLogger(__name__)

DEFAULT_COMMIT_INTERVAL_S = 5.0
STOP_TIMEOUT_S = 60.0
MAX_RESTART_DELAY_S = 30.0

Observer = Callable[[channel.RecordedCommit], None]

__all__ = ["DEFAULT_COMMIT_INTERVAL_S", "SESSION_TIMEOUT_MS", "LeaseError", "Observer",
           "StreamingReplicator", "streamed"]


@dataclasses.dataclass
class _Task:
    task: str
    slot: int
    partitions: list[TP]
    stopping: bool = False


class StreamingReplicator:
    """Streams one flow (see the module docstring); :meth:`run` until ``stop`` is set."""

    def __init__(self, spark: Any | None, config: Config, flow_name: str, *,
                 commit_interval_s: float = DEFAULT_COMMIT_INTERVAL_S,
                 exactly_once: bool | None = None, executor: str = "auto",
                 observers: list[Observer] | None = None, ledger_writes: str = "auto",
                 startup_wait_s: float = preflight.STARTUP_WAIT_S) -> None:
        self.startup_wait_s = startup_wait_s
        self.r = FlowReplicator(spark, config, flow_name, executor=executor,
                                ledger_writes=ledger_writes)
        flow = self.r.flow
        self.exactly_once = (config.exactly_once(flow) if exactly_once is None
                             else exactly_once)
        self.commit_interval_s = commit_interval_s
        self.observers: list[Observer] = list(observers or [])
        self.topic = channel.topic_name(flow.source, flow.target)
        self.group = channel.group_name(flow.source, flow.target)
        self.tasks: dict[str, _Task] = {}
        self.owner: dict[TP, str] = {}  # partition -> the task whose reports count
        self.floors: dict[TP, int] = {}  # start of a partition's first task, if no tail
        self.pending: list[channel.Delivered] = []
        self.commits = 0
        self.failures: dict[int, int] = {}  # slot -> consecutive failed starts
        self.restart_at: dict[int, tuple[float, list[TP]]] = {}
        self._gen = 0
        self.channel = RunsChannel(flow.name, config.cluster(flow.target), self.topic,
                                   self.group, f"offset-ledger-replicate.{self.r.result.run_id}")
        self._syncing = self._resync = False
        self.workers: LocalStreams | SparkStreams | None = None
        self._ends: dict[TP, int] = {}  # the source's end offsets last read
        self._source_down_since: float | None = None  # a transient source fault, from when

    @property
    def result(self) -> ReplicationResult:
        return self.r.result

    # --- start ---------------------------------------------------------------------------

    def open(self) -> None:
        """Take the lease, fence (exactly-once), and catch Delta up from the channel."""
        target = self.r.config.cluster(self.r.flow.target)
        # Fails at once on wrong credentials or an untrusted certificate (exit 2), as the
        # operator verbs do; a slow but live cluster is given the whole 10 s, and a cluster
        # that is restarting (a supervisor restarted this job in an outage) startup_wait_s.
        for cluster in (self.r.config.cluster(self.r.flow.source), target):
            preflight.await_reachable(cluster, self.startup_wait_s, 10.0)
        preflight.ride_out(
            lambda: kafka_admin.create_topic(target, self.topic, 2, channel.TOPIC_CONFIGS,
                                             self.r.config.replication_factor),
            self.startup_wait_s, f"flow {self.r.flow.name}: the runs channel's creation",
            bound="--startup-wait")
        self.channel.take()
        if self.exactly_once:
            self._fence(range(self._slots()))
        self.catch_up()

    def _slots(self) -> int:
        return self._workers().slots

    def _workers(self) -> LocalStreams | SparkStreams:
        if self.workers is None:
            self.workers = LocalStreams() if self.r.local_copies else SparkStreams(
                self.r.session(), spark_ledger=not self.r.recorder.direct_possible)
        return self.workers

    def _fence(self, slots: Any) -> None:
        """Exactly-once: abort the open transaction of each slot's id and fence its holder."""
        from confluent_kafka import KafkaException, Producer

        target = self.r.config.cluster(self.r.flow.target)
        conf = sink.producer_config(target.properties)

        def fence(tid: str) -> None:
            conf_tid, watch = kafka_errors.watched({**conf, "transactional.id": tid})
            producer = Producer(conf_tid)
            try:
                producer.init_transactions(sink.FLUSH_TIMEOUT_S)
            except KafkaException as exc:  # a missing ACL (TransactionalId Write), ...
                kafka_errors.serve(producer)
                raise kafka_errors.KafkaAccessError.of(kafka_errors.classify(
                    exc, target.alias, target.properties, operation="WRITE",
                    resource=f"transactional-id {tid}", watch=watch)) from None
            producer.flush(0)

        for slot in slots:
            tid = stream_task.transactional_id(self.r.flow.source, self.r.flow.target, slot)
            # The target away (restarting, killed in a disaster) is ridden out as the lease is.
            fenced = preflight.ride_out(lambda tid=tid: fence(tid) or True, LEASE_RETAKE_S,
                                        f"flow {self.r.flow.name}: fencing {tid} on "
                                        f"{target.alias}", stop=self.channel.stop)
            if not fenced:  # a stop asked for during the wait
                self.channel.check_stop(f"the fencing of {tid}")

    def catch_up(self) -> None:
        """Record what the channel holds beyond Delta (after a crash), with the live rule."""
        messages = self.channel.drain()
        parts = [d for m in messages if isinstance(m, list) for d in m]
        touched = sorted({d.key for d in parts})
        if self.exactly_once:
            seen = {_slot_of(d.task) for d in parts} - set(range(self._slots()))
            if seen - {None}:
                self._fence(s for s in seen if s is not None)
                more = self.channel.drain()
                parts += [d for m in more if isinstance(m, list) for d in m]
                touched = sorted({d.key for d in parts})
        tails = dict(self.r.load_state(touched).tails)
        accepted = []
        for d in parts:
            if channel.accept(d, tails.get(d.key)):
                tails[d.key] = channel.advance(tails.get(d.key), d)
                accepted.append(d)
            else:
                log.debug("catch-up: not accepted: %s (tail %s)", d, tails.get(d.key))
        log.debug("catch-up: %s message(s) read, %s part(s), %s accepted, channel at %s",
                  len(messages), len(parts), len(accepted), self.channel.consumed_to)
        if accepted:
            log.warning("flow %s: %s report(s) in the runs channel were not in the ledger "
                        "(the previous job stopped between a copy and its Delta commit): "
                        "recording them now", self.r.flow.name, len(accepted))
            self.pending = accepted
            self.commit()
        else:
            self.channel.commit_hint(all_recorded=not self.pending)

    # --- the loop --------------------------------------------------------------------------

    def run(self, stop: stops.Stop, *, interval_s: float, refresh_s: float,
            reload: Callable[[Config], Config]) -> None:
        self.channel.stop = stop  # every wait for the target ends on a stop request
        self.open()
        self._first_refresh(stop, reload)
        next_commit = time.monotonic() + self.commit_interval_s
        next_tick = time.monotonic() + interval_s
        next_refresh = time.monotonic() + refresh_s
        while not stop.is_set():
            self._poll(0.1)
            now = time.monotonic()
            self.channel.keep(now)
            if now >= next_commit:
                self.commit()
                next_commit = now + self.commit_interval_s
            if now >= next_refresh:
                retry_s = refresh_s if self._refresh(reload) else min(refresh_s, interval_s)
                next_refresh = time.monotonic() + retry_s
            elif now >= next_tick:
                self.channel.check_target(stream_task.PERSISTENT_S)
                # Also how a driver replaced by a newer one learns it is fenced.
                self.channel.commit_hint(all_recorded=not self.pending)
                self.r.heartbeat()
                self._check_sources()
                next_tick = time.monotonic() + interval_s
            self._replace_ended()
        log.warning("flow %s: stopping: the copy tasks flush and report, then their runs are "
                    "recorded", self.r.flow.name)
        self._stop_tasks(list(self.tasks))
        self.commit()

    def _first_refresh(self, stop: stops.Stop, reload: Callable[[Config], Config],
                       retry_s: float = 1.0) -> None:
        """The first topic selection and placement, then the tasks; a transient fault of
        either cluster meanwhile is waited out for up to the start-up wait (a broker killed
        just after the start-up probe, during the placement's offset reads: the suite's
        broker-restart regression on a loaded machine), anything else stops the job."""
        done = preflight.ride_out(lambda: self.r.refresh(reload(self.r.config)) or True,
                                  self.startup_wait_s,
                                  f"flow {self.r.flow.name}: first refresh",
                                  bound="--startup-wait", retry_s=retry_s, stop=stop)
        if done:
            self._sync_tasks()

    def _poll(self, timeout: float) -> None:
        self.channel.poll(timeout, self._handle)

    def _handle(self, decoded: Any) -> None:
        if isinstance(decoded, list):
            for d in decoded:
                if self.owner.get(d.key) != d.task:
                    continue  # a task replaced since: its copies are unrecorded duplicates
                if channel.accept(d, self.r.tails.get(d.key), self.floors.get(d.key)):
                    self.r.tails[d.key] = channel.advance(self.r.tails.get(d.key), d)
                    self.pending.append(d)
                    slot = _slot_of(d.task)
                    self.failures.pop(slot if slot is not None else -1, None)
                else:
                    log.debug("flow %s: report not accepted (its copies are duplicates): %s",
                              self.r.flow.name, d)
        elif isinstance(decoded, channel.TaskError):
            self._task_error(decoded)

    def _task_error(self, error: channel.TaskError) -> None:
        task = self.tasks.get(error.task)
        if task is None:
            return
        if error.kind in stream_task.STOPPING_KINDS or (
                error.kind == kafka_errors.AUTHORIZATION and not error.topic_level):
            # Every task would fail alike (credentials, TLS, a transactional id's ACL).
            log.error("flow %s: copy task %s: %s", self.r.flow.name, error.task, error.message)
            raise kafka_errors.KafkaAccessError(error.message, error.kind)
        if not error.topic_level:
            log.error("flow %s: copy task %s failed (it restarts from the ledger's position): "
                      "%s", self.r.flow.name, error.task, error.message)
            return
        topic = error.topic
        if topic in self.r.broken:
            return  # refused already (its end offsets could not be read)
        found = self._look_up([topic]).get(topic)
        if found is None or (error.kind == kafka_errors.AUTHORIZATION
                             and not found.startswith("topic ")):
            found = f"{topic}[{error.partition}]: {error.message}"
        self._refuse(topic, found)

    def _look_up(self, topics: list[str]) -> dict[str, str]:
        """Why each of ``topics`` cannot be replicated, looked up by name (a topic the
        principal may no longer describe is unreadable, not removed); readable ones omitted."""
        src = self.r.config.cluster(self.r.flow.source)
        out = {}
        for topic, found in kafka_admin.describe_topics(src, topics, "READ").items():
            if isinstance(found, int):
                continue
            out[topic] = (f"topic {topic} was removed from {self.r.flow.source}: no longer "
                          f"replicated" if found.kind == kafka_errors.UNKNOWN_TOPIC
                          else str(found))  # e.g. READ revoked: names the missing ACL
        return out

    def _refuse(self, topic: str, message: str) -> None:
        """Stop replicating ``topic`` (named in the log and the result); the others go on."""
        log.error("flow %s: topic %s left: %s", self.r.flow.name, topic, message)
        self.r.broken[topic] = message
        self.r.result.errors[topic] = message
        self.r.drop_broken()
        self._sync_tasks()

    def _end_offsets(self) -> dict[TP, int]:
        """The source's end offsets; a topic that can no longer be read is refused first.

        A transient fault of the source (a broker restarting or away: unreachable, a leader
        moving) is ridden out: the ends last read stand in (they only measure lag and tell
        a recreated topic), and the runs the tasks reported are still recorded, so that a
        disaster declared meanwhile finds every copy in the ledger.
        """
        try:
            ends = self._read_end_offsets()
        except kafka_errors.KafkaAccessError as exc:
            if exc.kind not in kafka_errors.TRANSIENT:
                raise
            now = time.monotonic()
            if self._source_down_since is None:
                self._source_down_since = now
                log.warning("flow %s: source %s not answering (%s); replication waits for it "
                            "and records what was copied", self.r.flow.name,
                            self.r.flow.source, first_line(exc))
            return dict(self._ends)
        if self._source_down_since is not None:
            log.warning("flow %s: source %s answers again after %.0fs", self.r.flow.name,
                        self.r.flow.source, time.monotonic() - self._source_down_since)
            self._source_down_since = None
        self._ends = dict(ends)
        return ends

    def _read_end_offsets(self) -> dict[TP, int]:
        try:
            return self.r.end_offsets()
        except kafka_errors.KafkaAccessError as exc:
            if exc.kind not in (kafka_errors.AUTHORIZATION, kafka_errors.UNKNOWN_TOPIC):
                raise
            unreadable = self._look_up(sorted({t for t, _ in self.r.positions}))
            if not unreadable:
                raise
            for topic, message in unreadable.items():
                if topic not in self.r.broken:
                    self._refuse(topic, message)
            return self.r.end_offsets()

    def _refresh(self, reload: Callable[[Config], Config]) -> bool:
        """Re-read the configuration and the source's topics; False when the source did not
        answer (a transient fault: tried again at the next tick, the tasks copy on)."""
        try:
            self.r.refresh(reload(self.r.config))
        except kafka_errors.KafkaAccessError as exc:
            if exc.kind not in kafka_errors.TRANSIENT:
                raise
            log.warning("flow %s: refresh postponed: %s", self.r.flow.name, first_line(exc))
            return False
        self._sync_tasks()
        return True

    def commit(self) -> None:
        """Record the accepted runs in Delta, then move the channel hint; tell observers."""
        if not self.pending:
            return
        ends = self._end_offsets()  # may refuse a topic (and commit what its tasks reported)
        if not self.pending:
            return
        parts, self.pending = self.pending, []
        started = time.perf_counter()
        self.r.record_batch(channel.summaries(parts), ends)
        self.commits += 1
        self.r.positions = channel.positions_after(
            [d for d in parts if d.key in self.r.positions], self.r.positions)
        self.channel.commit_hint(all_recorded=not self.pending)
        log.debug("flow %s: commit of %s report(s) took %.3fs", self.r.flow.name, len(parts),
                  time.perf_counter() - started)
        event = channel.RecordedCommit(self.r.last_batch, self.r.last_written_at or
                                       clock.now(), parts)
        for observer in self.observers:
            try:
                observer(event)
            except Exception as exc:  # an observer never stops replication
                log.warning("flow %s: commit observer failed: %s", self.r.flow.name, exc)

    # --- tasks ---------------------------------------------------------------------------

    def _sync_tasks(self) -> None:
        """Tasks for the partitions to copy: new ones started, dropped ones restarted.

        Not reentrant: stopping a task reads the channel, whose messages (a topic refused)
        may ask for another sync; that one runs after this one, never inside it (two tasks
        would copy the partitions of the task being stopped).
        """
        if self._syncing:
            self._resync = True
            return
        self._syncing = True
        try:
            self._resync = True
            while self._resync:
                self._resync = False
                self._sync_tasks_once()
        finally:
            self._syncing = False

    def _sync_tasks_once(self) -> None:
        wanted = set(self.r.positions)
        # Partitions of a task being stopped are held: whoever stops it restarts them.
        held = {tp for t in self.tasks.values() for tp in t.partitions}
        pending_restart = {tp for _, tps in self.restart_at.values() for tp in tps}
        stale = [t for t in self.tasks.values()
                 if not t.stopping and any(tp not in wanted for tp in t.partitions)]
        if stale:
            keep = {t.slot: [tp for tp in t.partitions if tp in wanted] for t in stale}
            self._stop_tasks([t.task for t in stale])
            self.commit()  # what they delivered; their dropped partitions start afresh later
            for t in stale:
                for tp in t.partitions:
                    if tp not in wanted:
                        self.r.tails.pop(tp, None)
                        self.floors.pop(tp, None)
                        self.owner.pop(tp, None)
            for slot, tps in keep.items():
                if tps:
                    self._start(slot, tps)
            held = {tp for t in self.tasks.values() for tp in t.partitions}
        new = sorted(wanted - held - pending_restart)
        if not new:
            return
        if not self.tasks and not self.restart_at:  # the first start: spread over the tasks
            n = plan.task_count(len(new), self._slots(),
                                self.r.config.tasks_max_for(self.r.flow), streaming=True)
            for i in range(n):
                self._start(i, new[i::n])
        else:  # partitions added while streaming: a task of their own, the others go on
            self._start(self._free_slot(), new)

    def _free_slot(self) -> int:
        used = {t.slot for t in self.tasks.values()} | set(self.restart_at)
        return next(i for i in range(len(used) + 1) if i not in used)

    def _start(self, slot: int, partitions: list[TP]) -> None:
        # Before copying more of a partition: is its source still the topic copied so far?
        self.commit()  # the check and the start read where the accepted runs end
        self.r.check_continuity(set(partitions))
        self.r.drop_broken()
        partitions = [tp for tp in partitions if tp in self.r.positions]
        if not partitions:
            return
        try:
            control_start = self.channel.control_end()
        except kafka_errors.KafkaAccessError as exc:
            if exc.kind not in kafka_errors.TRANSIENT:
                raise
            # The target (the runs channel's cluster) does not answer: a task started now
            # could not report. Its partitions wait, as an ended task's do (torture 11003 eos:
            # partitions added on B while P, B->P's target, was down).
            self._postpone(slot, partitions)
            log.warning("flow %s: copy task for %d partition(s) not started, tried again "
                        "later: %s", self.r.flow.name, len(partitions), first_line(exc))
            return
        self._gen += 1
        task = f"{self.r.result.run_id}/{slot}/{self._gen}"
        starts = []
        for tp in partitions:
            tail = self.r.tails.get(tp)
            start = tail.upstream_end if tail is not None else self.r.positions[tp]
            if tail is None:
                self.floors[tp] = start
            starts.append((tp[0], self.r.replicas[tp[0]], tp[1], start))
            self.owner[tp] = task
        target = self.r.config.cluster(self.r.flow.target)
        spec = stream_task.StreamSpec(
            task=task, channel_topic=self.topic, control_start=control_start,
            partitions=tuple(starts),
            consumer_config=source.consumer_config(
                self.r.config.cluster(self.r.flow.source).properties, len(starts),
                transactional=self.exactly_once),
            producer_config=sink.producer_config(target.properties,
                                                 transactional=self.exactly_once),
            control_config=target.client_config(**{
                "group.id": f"{self.group}.task", "enable.auto.commit": False,
                "auto.offset.reset": "latest", "log_level": 3}),
            transactional_id=(stream_task.transactional_id(self.r.flow.source,
                                                           self.r.flow.target, slot)
                              if self.exactly_once else None),
            boundary_s=self.r.config.transaction_boundary_s(self.r.flow),
            source_alias=self.r.flow.source, target_alias=self.r.flow.target)
        self.tasks[task] = _Task(task, slot, list(partitions))
        self._workers().start(spec)
        log.info("flow %s: task %s copies %s partition(s)", self.r.flow.name, task,
                 len(partitions))

    def _stop_tasks(self, tasks: list[str]) -> None:
        """Ask tasks to stop, wait for them, then drain the channel: their reports are in."""
        running = [t for t in tasks if t in self.tasks]
        if not running:
            return
        for t in running:
            self.tasks[t].stopping = True
        heard = self.channel.send_control(channel.encode_stop(running))
        workers = self._workers()
        if heard:
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while any(workers.alive(t) for t in running) and time.monotonic() < deadline:
                self._poll(0.1)
        else:
            # Not delivered (the target is away): the tasks cannot read the request, nor flush
            # or report, so they end now as they would at the deadline; what they did not
            # report is not recorded, and the next run resumes from the ledger and the channel,
            # as after a crash (never a record lost: an unrecorded copy is copied again).
            log.warning("flow %s: the stop request did not reach the copy tasks (the runs "
                        "channel on %s is not writable): ending them now", self.r.flow.name,
                        self.r.flow.target)
        workers.wait(running, 1.0)
        workers.finished()
        self._settle([self.tasks[t].slot for t in running])
        for t in running:
            self.tasks.pop(t, None)

    def _settle(self, slots: list[int]) -> None:
        """After tasks ended: fence their ids (exactly-once), then read the channel's end."""
        if self.exactly_once:
            self._fence(slots)
        for m in self.channel.drain():
            self._handle(m)

    def _replace_ended(self) -> None:
        """Tasks that ended on their own (lost worker, failure): restart them from the ledger."""
        for task, ok in self._workers().finished():
            t = self.tasks.get(task)
            if t is None or t.stopping:
                continue
            self._end(task, ok)
        now = time.monotonic()
        for slot, (when, tps) in list(self.restart_at.items()):
            if now >= when:
                del self.restart_at[slot]
                tps = [tp for tp in tps if tp in self.r.positions]
                if tps:
                    self._start(slot, tps)

    def _end(self, task: str, ok: bool) -> None:
        t = self.tasks.pop(task)
        log.warning("flow %s: copy task %s ended %s: it restarts from the ledger's position",
                    self.r.flow.name, task, "cleanly" if ok else "with an error or was lost")
        self._settle([t.slot])
        self._postpone(t.slot, list(t.partitions))

    def _postpone(self, slot: int, partitions: list[TP]) -> None:
        """Start ``partitions`` in ``slot`` later, backing off while starts keep failing."""
        n = self.failures.get(slot, 0) + 1
        self.failures[slot] = n
        delay = min(MAX_RESTART_DELAY_S, 0.5 * 2 ** (n - 1))
        self.restart_at[slot] = (time.monotonic() + delay, partitions)

    def _check_sources(self) -> None:
        before = set(self.r.broken)
        self.r.refuse_sources_behind(self._end_offsets())
        if set(self.r.broken) - before:
            self.r.drop_broken()
            self._sync_tasks()

    def close(self) -> None:
        try:
            if self.workers is not None:
                self.workers.close()
        finally:
            try:
                self.channel.close()
            finally:
                self.r.close()


def streamed(config: Config, flow_name: str, wait_s: float = 0.0) -> bool:
    """Whether a streaming replicate job runs for the flow (its driver's group has members).

    A static member stays in the group for one session timeout after its driver stopped or
    died: ``wait_s`` waits that long for the group to empty before answering yes.
    """
    deadline = time.monotonic() + wait_s
    while _streamed(config, flow_name):
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.5)
    return False


def _streamed(config: Config, flow_name: str) -> bool:
    flow = config.flow(flow_name)
    try:
        info = kafka_admin.describe_group(config.cluster(flow.target),
                                          channel.group_name(flow.source, flow.target))
    except OffsetLedgerError:
        return False  # the target cannot tell: a copy would fail on it anyway
    return info.members > 0


def _slot_of(task: str) -> int | None:
    try:
        return int(task.split("/")[1])
    except (IndexError, ValueError):
        return None
