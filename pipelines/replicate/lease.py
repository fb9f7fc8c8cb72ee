"""The driver's side of the runs channel: the flow's lease, the reports read, the hint.

::

    take    subscribe as the flow's static member -> partition 0 assigned within
            LEASE_TIMEOUT_S (else: the target away -> waited for once; another member holds
            partition 0 -> LeaseError naming it; nobody does -> waited for up to
            LEASE_RETAKE_S) -> announce: this driver's lease message, its offset kept
    read    poll / drain: partition 0's messages past ``consumed_to``, in order, decoded;
            another driver's lease message after this driver's own -> LeaseError (usurped)
    keep    held, not fenced            -> nothing to do
            fenced, or partition 0 away -> a newer lease message within LEASE_GRACE_S ->
            longer than LEASE_TIMEOUT_S    LeaseError; else the consumer is rebuilt and the
                                           lease taken back (for at most LEASE_RETAKE_S)
    hint    ``recorded_to`` committed as the group's offset: where a crashed driver's
            successor starts reading (Delta, not the hint, says what is recorded)

Invariants:
    * ``consumed_to`` only grows: a message is handed to the driver once, however often the
      consumer is rebuilt (a rebuilt consumer starts from the hint, never past it).
    * A drain returns everything partition 0 held when it was called: it writes a sync mark
      and reads up to it, read_committed, so every transaction begun before is decided.
    * Only another driver's lease message written *after* this driver's own ends this driver:
      a driver never stops for its predecessor's.
    * A missing ACL on the channel or the group is named (exit 2), never taken for a lease held
      by another job; so is a target that kept refusing the credentials or the certificate.
    * A target away (restarting, or killed in a disaster while this flow replicates back to it)
      is ridden out for LEASE_RETAKE_S in every step that needs it: the lease, a channel write,
      a drain; past that the driver stops with the target named unreachable. A stop request
      ends any such wait (:class:`StoppedWhileAway`): nothing is lost, since the channel keeps
      what the tasks reported and the next run records it first.
    * Closing a group member never blocks the driver (librdkafka's close can wait on an
      absent coordinator: torture history 20011 eos, a driver deaf to SIGTERM).
    * Only the current member's callbacks count: a rebuilt consumer's predecessor, closed
      aside, still reports (its revoke, the fencing its successor's join causes), and taking
      that for the successor's made each rebuild set off the next (F21, torture 43001 eos).
    * The Kafka clients come from a :class:`Clients`: Kafka's own in production, fakes with the
      same small surface in unit tests.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ledger.config import ClusterConfig
from ledger.errors import OffsetLedgerError
from pipelines import stops
from pipelines.edge import kafka_admin, kafka_errors, preflight
from pipelines.replicate import channel

log = logging.getLogger(__name__)

LEASE_TIMEOUT_S = 30.0
# How long the driver rides its target out: a lease lost without another driver seen in the
# group (the target unreachable, its own static member fenced by its rejoin) is tried back, and
# a channel write (lease message, sync mark) waited for, before the driver stops.
LEASE_RETAKE_S = 300.0
# How long a fenced driver looks for a newer driver's lease message before taking it back.
LEASE_GRACE_S = 10.0
# Reading a drain up to its sync mark (delivered already): a live target needs well under a
# second; the bound is the target's, should it go away between the write and the read.
DRAIN_TIMEOUT_S = LEASE_RETAKE_S
SESSION_TIMEOUT_MS = 10_000
CLOSE_TIMEOUT_S = 10.0
# A wait for an absent target ends on a stop request; a drain (a stop's own drain included)
# reads on for this long first, as a live target answers well within it.
STOP_GRACE_S = 20.0
# A stop request's delivery to the tasks (written to the channel on the target): a live target
# takes it at once; one that is away for this long keeps the tasks from hearing it at all.
CONTROL_FLUSH_S = 30.0


class LeaseError(OffsetLedgerError):
    """Another replicate job streams this flow (it holds the flow's runs channel)."""


class StoppedWhileAway(OffsetLedgerError):
    """A stop was asked while the driver waited for its target: it stops at once, and what
    the tasks copied since the last commit is recorded by the next run's catch-up."""


class Clients(Protocol):
    """Makes the channel's Kafka clients (confluent-kafka's surface, only what is used)."""

    def consumer(self, on_assign: Callable[..., None], on_revoke: Callable[..., None],
                 on_error: Callable[[Any], None]) -> Any:
        """The driver's member of the flow's group, subscribed to the channel."""

    def probe(self) -> Any:
        """A consumer outside the flow's group (``assign``, ``poll``, watermarks)."""

    def producer(self) -> Any:
        """The driver's producer to the channel (lease, sync marks, stop requests)."""

    def await_target(self, wait_s: float) -> bool:
        """False if the target answers; else wait up to ``wait_s`` for it: True once it
        answers, its classified error (``unreachable``) if it does not."""

    def lease_holder(self) -> str | None:
        """Another member of the flow's group holding partition 0 (its client.id and host),
        None if none does or the group cannot be described now."""


@dataclass(frozen=True)
class KafkaClients:
    """:class:`Clients` on the flow's target cluster."""

    target: ClusterConfig
    topic: str
    group: str
    client_id: str

    def consumer(self, on_assign: Callable[..., None], on_revoke: Callable[..., None],
                 on_error: Callable[[Any], None]) -> Any:
        from confluent_kafka import Consumer

        consumer = Consumer(self.target.client_config(**{
            "group.id": self.group, "enable.auto.commit": False,
            "enable.auto.offset.store": False, "isolation.level": "read_committed",
            "auto.offset.reset": "earliest", "enable.partition.eof": True,
            # Static membership: a restarted driver takes its place at once (and a second
            # driver of the flow fences the first, which stops); cooperative rebalancing keeps
            # partition 0 where it is while other members come and go. The client.id (this
            # run's) is the driver's name in its lease message.
            "group.instance.id": self.group, "session.timeout.ms": SESSION_TIMEOUT_MS,
            "client.id": self.client_id,
            "partition.assignment.strategy": "cooperative-sticky",
            "error_cb": on_error, "log_level": 3}))
        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        return consumer

    def probe(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer(self.target.client_config(**{
            "group.id": f"{self.group}.probe", "enable.auto.commit": False,
            "isolation.level": "read_committed", "log_level": 3}))

    def producer(self) -> Any:
        from confluent_kafka import Producer

        return Producer(self.target.client_config(**{
            "acks": "all", "enable.idempotence": True, "linger.ms": 0, "log_level": 3}))

    def await_target(self, wait_s: float) -> bool:
        try:
            preflight.check_reachable(self.target)
            return False
        except kafka_errors.KafkaAccessError as exc:
            if exc.kind != kafka_errors.UNREACHABLE:
                raise
        preflight.await_reachable(self.target, wait_s, 10.0, why="the runs channel's lease")
        return True

    def lease_holder(self) -> str | None:
        try:
            client = kafka_admin.admin(self.target)
            desc = client.describe_consumer_groups(
                [self.group], request_timeout=10)[self.group].result(timeout=15)
        except Exception as exc:  # cannot tell now (a coordinator loading): nobody known
            log.debug("describing group %s: %s", self.group, exc)
            return None
        for member in desc.members or []:
            tps = member.assignment.topic_partitions if member.assignment else []
            if member.client_id != self.client_id and any(
                    tp.topic == self.topic and tp.partition == channel.RUNS_PARTITION
                    for tp in tps):
                return f"client.id {member.client_id} on {member.host}"
        return None


class RunsChannel:
    """One driver's hold on its flow's runs channel (see the module docstring)."""

    def __init__(self, flow_name: str, target: ClusterConfig, topic: str, group: str,
                 client_id: str, clients: Clients | None = None, *,
                 lease_timeout_s: float = LEASE_TIMEOUT_S,
                 grace_s: float = LEASE_GRACE_S, retake_s: float = LEASE_RETAKE_S,
                 drain_timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        self.flow_name, self.target, self.topic, self.group = flow_name, target, topic, group
        self.client_id = client_id
        self.clients = clients or KafkaClients(target, topic, group, client_id)
        self.lease_timeout_s, self.grace_s = lease_timeout_s, grace_s
        self.retake_s, self.drain_timeout_s = retake_s, drain_timeout_s
        self.consumed_to = 0  # partition 0's next offset to hand to the driver
        self.recorded_to = 0  # the offset up to which everything consumed is in Delta
        self.announced_at = -1  # offset of this driver's lease message in partition 0
        self.fenced = False  # the consumer was fenced or hit a fatal error: it is dead
        self.watch = kafka_errors.ErrorWatch()  # the consumer's causes (error_cb)
        self._held = threading.Event()
        self._revoked_at = 0.0
        self._lost_since: float | None = None  # lease lost, not yet taken back
        self._early: list[Any] = []  # fetched while the lease was taken: drained first
        self._consumer: Any = None
        self._member = 0  # which consumer is the current member: older ones' callbacks are void
        self._producer: Any = None
        self.stop: stops.Stop | None = None  # the driver's stop request, set by its run

    def check_stop(self, waiting_for: str) -> None:
        """Raise :class:`StoppedWhileAway` if the driver was asked to stop."""
        if self.stop is not None and self.stop.is_set():
            raise StoppedWhileAway(
                f"flow {self.flow_name}: stopped while waiting for {waiting_for} on "
                f"{self.target.alias}; what was copied since the last commit is recorded by "
                f"the next run's catch-up from the channel")

    # --- the lease -----------------------------------------------------------------------

    def take(self) -> None:
        """Join the flow's group, wait for partition 0, then write this driver's lease message.

        Raises:
            LeaseError: another job holds partition 0 (it streams the flow).
            KafkaAccessError: a missing ACL, or credentials/TLS the target refuses.
        """
        self._consumer = self._new_consumer()
        started = time.monotonic()
        deadline = started + self.lease_timeout_s
        waited = warned = False
        while not self._held.is_set():
            msg = self._consumer.poll(0.2)
            if msg is not None and msg.error() is not None:
                self._refuse_unauthorized(msg.error())
            elif msg is not None:  # fetched as soon as assigned: the first drain reads it
                self._early.append(msg)
            if time.monotonic() <= deadline:
                continue
            self.check_stop("the runs channel lease")
            self._refuse_unauthorized(None)
            self.check_target(0.0)
            # No assignment because nothing answers (the target went away after the start-up
            # probe) is not another job's lease: wait for the target, once.
            if not waited and self.clients.await_target(self.retake_s):
                waited = True
                deadline = time.monotonic() + self.lease_timeout_s
                continue
            holder = self.clients.lease_holder()
            if holder is not None:
                raise LeaseError(
                    f"flow {self.flow_name} is streamed by another replicate job ({holder}): "
                    f"consumer group {self.group} on {self.target.alias} holds its runs "
                    f"channel {self.topic}; stop that job first")
            # Nobody holds it: the group's coordinator is still loading (a target broker just
            # restarted, torture history 17005 eos) or slow to assign; a newer driver of the
            # flow would have fenced another one anyway (same static member).
            if time.monotonic() - started > self.retake_s:
                raise LeaseError(
                    f"flow {self.flow_name}: the runs channel lease (group {self.group} on "
                    f"{self.target.alias}) was not assigned within {self.retake_s:.0f}s, and "
                    f"no other job holds it")
            if not warned:
                log.warning("flow %s: the runs channel lease (group %s on %s) is not assigned "
                            "after %.0fs and no other job holds it (the group coordinator may "
                            "still be loading); waiting up to %.0fs", self.flow_name,
                            self.group, self.target.alias, self.lease_timeout_s,
                            self.retake_s)
                warned = True
            deadline = time.monotonic() + self.lease_timeout_s
        self.announced_at = self._write(channel.encode_lease(self.client_id),
                                        channel.RUNS_PARTITION)

    def keep(self, now: float) -> None:
        """Called every loop turn: take a lost lease back, or stop if a newer driver has it."""
        if self._held.is_set() and not self.fenced:
            self._lost_since = None
        elif self.fenced or now - self._revoked_at > self.lease_timeout_s:
            self._retake(now)

    def _retake(self, now: float) -> None:
        """The lease looks lost: stop if a newer driver took it, else take it back.

        A newer driver of the flow joins with the same ``group.instance.id``, which fences this
        one, then writes its lease message to partition 0: this driver finds it there (after
        its own) and stops. The group cannot tell (a replaced static member keeps its
        predecessor's client.id). But librdkafka's static member can also be fenced by its own
        rejoin (after a restart of the target broker), or lose its assignment while the target
        is away: with no newer lease message within the grace, the consumer is rebuilt (a fenced
        consumer is dead) and the lease taken back, without a new lease message, so that a
        newer driver fenced by the rebuilt member in turn finds no newer one and wins.
        """
        if self._lost_since is None:
            self._lost_since = now
        newer = self._newer_lease()
        if newer is not None:
            self._usurped(newer)
        if now - self._lost_since > self.retake_s:
            raise LeaseError(f"flow {self.flow_name}: the runs channel lease (group "
                             f"{self.group} on {self.target.alias}) could not be taken back "
                             f"within {self.retake_s:.0f}s: stopping")
        log.warning("flow %s: the runs channel consumer lost the lease (%s) and no other job "
                    "took it: taking it back", self.flow_name,
                    "fenced by its own rejoin" if self.fenced else "assignment lost")
        self._rebuild()

    def _usurped(self, driver: str) -> None:
        raise LeaseError(f"flow {self.flow_name}: the runs channel lease was taken by another "
                         f"replicate job ({driver}, group {self.group} on "
                         f"{self.target.alias}): stopping")

    def _write(self, value: bytes, partition: int) -> int:
        """Write ``value`` to the channel and return its offset, riding out the target away.

        A lease message or sync mark not delivered yet is waited for (one warning), and
        produced again after a transient delivery error, for at most ``retake_s`` (torture
        history 14004 alo: the target killed just after the driver's start-up probe). A missing
        ACL, credentials or TLS stop at once.
        """
        producer = self._control_producer()
        deadline = time.monotonic() + self.retake_s
        warned = False
        last = "no delivery report"
        while True:
            done: list[tuple[Any, int]] = []
            producer.produce(self.topic, value, partition=partition,
                             on_delivery=lambda err, msg, done=done: done.append(
                                 (err, msg.offset() if err is None else -1)))
            while not done and time.monotonic() < deadline:
                if warned:  # waiting for an absent target (a live one delivers at once)
                    self.check_stop("a write to the runs channel")
                producer.flush(max(0.0, min(2.0, deadline - time.monotonic())))
                if not done and not warned:
                    log.warning("flow %s: cannot write to the runs channel %s on %s yet; "
                                "waiting up to %.0fs for it", self.flow_name, self.topic,
                                self.target.alias, self.retake_s)
                    warned = True
            if done and done[0][0] is None:
                if warned:
                    log.warning("flow %s: the runs channel on %s takes writes again",
                                self.flow_name, self.target.alias)
                return done[0][1]
            if done:
                problem = self._classify(done[0][0], "WRITE", f"topic {self.topic}")
                if problem.kind not in kafka_errors.TRANSIENT:
                    raise kafka_errors.KafkaAccessError.of(problem)
                last = problem.message
            if time.monotonic() >= deadline:
                raise kafka_errors.KafkaAccessError(
                    f"flow {self.flow_name}: cannot write to the runs channel {self.topic} on "
                    f"{self.target.alias} within {self.retake_s:.0f}s: {last}",
                    kafka_errors.UNREACHABLE)
            time.sleep(0.5)  # a retry back-off after a failed delivery, not a synchronisation

    def _newer_lease(self) -> str | None:
        """Another driver's lease message after this driver's own and after what it read, as
        it appears within the grace (a newer driver writes it just after fencing this one)."""
        from confluent_kafka import TopicPartition

        probe = self.clients.probe()
        try:
            probe.assign([TopicPartition(self.topic, channel.RUNS_PARTITION,
                                         max(self.consumed_to, self.announced_at + 1))])
            deadline = time.monotonic() + self.grace_s
            while time.monotonic() < deadline:
                msg = probe.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                holder = self._foreign_lease(msg, channel.decode(msg.value()))
                if holder is not None:
                    return holder
        finally:
            probe.close()
        return None

    def _foreign_lease(self, msg: Any, decoded: Any) -> str | None:
        holder = channel.lease_holder(decoded)
        if holder is not None and holder != self.client_id and msg.offset() > self.announced_at:
            return holder
        return None

    def _rebuild(self) -> None:
        self._close_aside("offset-ledger-lease-close")  # the old member is dead either way
        self._held.clear()
        self.fenced = False
        self._consumer = self._new_consumer()
        self._revoked_at = time.monotonic()

    def _close_aside(self, thread_name: str) -> threading.Thread:
        """Close the current member on a thread of its own, its callbacks void from now on.

        librdkafka's close of a group member can block while the coordinator does not answer
        (torture history 20011 eos: the driver hung, deaf to SIGTERM), and it serves the
        member's queue: its revoke and fencing must not reach a successor (F21).
        """
        consumer, self._consumer = self._consumer, None
        self._member += 1

        def close() -> None:
            try:
                consumer.close()
            except Exception as exc:  # a fenced consumer may refuse: it is gone either way
                log.debug("flow %s: closing the runs channel consumer: %s", self.flow_name, exc)

        closing = threading.Thread(target=close, name=thread_name, daemon=True)
        closing.start()
        return closing

    def _new_consumer(self) -> Any:
        member = self._member

        def current(handler: Callable[..., None]) -> Callable[..., None]:
            def call(*args: Any) -> None:
                if member == self._member:
                    handler(*args)
            return call

        return self.clients.consumer(current(self._on_assign), current(self._on_revoke),
                                     current(self._on_error))

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        if any(p.partition == channel.RUNS_PARTITION for p in partitions):
            self._held.set()

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        # A rebalance (a coordinator moving, a broker restarting) may take partition 0 away and
        # give it back: lost only if it stays away (``keep``) or another member holds it.
        if any(p.partition == channel.RUNS_PARTITION for p in partitions):
            self._held.clear()
            self._revoked_at = time.monotonic()

    def _on_error(self, err: Any) -> None:
        self.watch(err)
        if is_fenced(err):
            log.warning("flow %s: runs channel consumer: %s", self.flow_name, err.str())
            self.fenced = True

    # --- the reports ---------------------------------------------------------------------

    def poll(self, timeout: float, handle: Callable[[Any], None]) -> None:
        """Hand each new partition-0 message to ``handle`` as it is read (decoded).

        ``handle`` may poll again (stopping a task reads the channel): each message is still
        handed over once and in order, since ``consumed_to`` moves before ``handle`` runs.
        """
        msg = self._consumer.poll(timeout)
        while msg is not None:
            if msg.error() is not None and is_fenced(msg.error()):
                self.fenced = True
                return
            # A rebuilt consumer starts from the committed hint: what it read before is handled.
            if (msg.error() is None and msg.partition() == channel.RUNS_PARTITION
                    and msg.offset() >= self.consumed_to):
                handle(self._take_in(msg))
            msg = self._consumer.poll(0)

    def drain(self) -> list[Any]:
        """Everything partition 0 holds now, in order (read_committed), sync marks left out.

        The driver writes a sync mark to the partition and reads up to it: every transaction
        begun before the mark is decided by the time a read_committed reader gets the mark.
        """
        mark = uuid.uuid4().hex
        self._write(channel.encode_sync(mark), channel.RUNS_PARTITION)
        out: list[Any] = []
        deadline = time.monotonic() + self.drain_timeout_s
        began = time.monotonic()
        while time.monotonic() < deadline:
            if time.monotonic() - began > STOP_GRACE_S:  # a drain at a stop reads on first
                self.check_stop("the runs channel to be read")
            if self.fenced:  # a dead consumer reads nothing: take the lease back (or stop)
                self._retake(time.monotonic())
            msg = self._early.pop(0) if self._early else self._consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            if msg.partition() != channel.RUNS_PARTITION or msg.offset() < self.consumed_to:
                continue
            decoded = self._take_in(msg)
            if isinstance(decoded, dict) and decoded.get("kind") == "sync":
                if decoded.get("id") == mark:
                    return out
            elif decoded is not None:
                out.append(decoded)
        raise OffsetLedgerError(f"flow {self.flow_name}: the runs channel {self.topic} could "
                                f"not be read to its end within {self.drain_timeout_s:.0f}s")

    def _take_in(self, msg: Any) -> Any:
        self.consumed_to = msg.offset() + 1
        decoded = channel.decode(msg.value())
        holder = self._foreign_lease(msg, decoded)
        if holder is not None:
            self._usurped(holder)
        return decoded

    def commit_hint(self, *, all_recorded: bool) -> None:
        """Commit where Delta is recorded up to (a hint for the catch-up after a crash).

        ``all_recorded``: nothing consumed is still pending, so the hint moves to
        ``consumed_to``; otherwise it stays where the last commit with nothing pending put it.
        This commit also tells a driver replaced by a newer one: it finds itself fenced.
        """
        from confluent_kafka import KafkaException, TopicPartition

        if all_recorded:
            self.recorded_to = self.consumed_to
        if not self.recorded_to:
            return
        try:
            self._consumer.commit(offsets=[TopicPartition(
                self.topic, channel.RUNS_PARTITION, self.recorded_to)], asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if err is not None and is_fenced(err):
                self.fenced = True  # the consumer is dead: ``keep`` retakes the lease or stops
            # Only a hint: Delta is right, a restart reads more of the channel.
            log.warning("flow %s: runs channel offset not committed: %s", self.flow_name,
                        err.str() if err is not None else exc)

    # --- the control partition -----------------------------------------------------------

    def control_end(self) -> int:
        """The end of the control partition (where a new task starts reading its stops); a
        classified ``KafkaAccessError`` (``unreachable`` while the target is away) when
        neither the consumer nor a probe can read it."""
        from confluent_kafka import KafkaException, TopicPartition

        tp = TopicPartition(self.topic, channel.CONTROL_PARTITION)
        try:
            _, high = self._consumer.get_watermark_offsets(tp, timeout=10, cached=False)
        except KafkaException:  # the consumer was just fenced: ask with another
            probe = self.clients.probe()
            try:
                _, high = probe.get_watermark_offsets(tp, timeout=10, cached=False)
            except KafkaException as exc:
                raise kafka_admin.failure(self.target, exc, operation="DESCRIBE",
                                          resource=f"topic {self.topic}") from None
            finally:
                probe.close()
        return max(0, high)

    def send_control(self, value: bytes) -> bool:
        """A message to the tasks (a stop request); whether the target took it within
        :data:`CONTROL_FLUSH_S` (False: the tasks cannot read it either)."""
        producer = self._control_producer()
        producer.produce(self.topic, value, partition=channel.CONTROL_PARTITION)
        return producer.flush(CONTROL_FLUSH_S) == 0

    def _control_producer(self) -> Any:
        if self._producer is None:
            self._producer = self.clients.producer()
        return self._producer

    # --- errors --------------------------------------------------------------------------

    def check_target(self, persistent_s: float) -> None:
        """Stop (exit 2) once authentication or TLS with the target kept failing."""
        from pipelines.replicate import stream_task

        cause = self.watch.persistent_cause(persistent_s)
        if cause is None:
            return
        problem = self._classify(f"{cause[0]}: {cause[1]}")
        if problem.kind in stream_task.STOPPING_KINDS:
            raise kafka_errors.KafkaAccessError.of(problem)

    def _refuse_unauthorized(self, err: Any) -> None:
        """A missing ACL on the channel or the group stops the flow, named (``err``: a
        consumer error, or None for the cause the consumer's error_cb saw)."""
        if err is None:
            cause = self.watch.cause()
            if cause is None:
                return
            name, err = cause[0], f"{cause[0]}: {cause[1]}"
        else:
            name = err.name()
        if name == "GROUP_AUTHORIZATION_FAILED":
            problem = self._classify(err, "READ", f"group {self.group}")
        elif name == "TOPIC_AUTHORIZATION_FAILED":
            problem = self._classify(err, "READ", f"topic {self.topic}")
        else:
            return
        raise kafka_errors.KafkaAccessError.of(problem)

    def _classify(self, err: Any, operation: str | None = None,
                  resource: str | None = None) -> kafka_errors.Problem:
        return kafka_errors.classify(err, self.target.alias, self.target.properties,
                                     operation=operation, resource=resource, watch=self.watch)

    def close(self) -> None:
        try:
            if self._producer is not None:
                self._producer.flush(10)
        finally:
            if self._consumer is not None:
                # Bounded: a close that blocks on an absent coordinator must not hold the
                # job's exit (the static member times out on the broker's side).
                self._close_aside("offset-ledger-channel-close").join(CLOSE_TIMEOUT_S)


def is_fenced(err: Any) -> bool:
    """A fenced static member or any fatal error: the channel consumer cannot go on."""
    from confluent_kafka import KafkaError

    return bool(err.fatal()) or err.code() in (KafkaError.FENCED_INSTANCE_ID,
                                                KafkaError._FATAL)
