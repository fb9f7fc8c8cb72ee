"""The streaming copy task: one long-running librdkafka copy loop for a group of partitions.

A task (a local worker process or a Spark task: ``stream_workers``) assigns its source
partitions at the offsets the driver gave it (where the recorded runs end), consumes them
``read_committed`` without a group, and produces every record, as it arrives, to the same
partition of the replica (idempotent producer, a linger of a few ms). Delivery reports are
folded into runs (``sink.PartitionDeliveries``, ``ledger.writer.RunBuilder``) and reported to
the driver through the runs channel (``channel``)::

    at-least-once   consume -> produce -> reports -> every PUBLISH_INTERVAL_S: runs -> channel
    exactly-once    begin txn; consume -> produce; once the transaction's first record is
                    ``boundary_s`` old: flush, runs -> channel in the same transaction; commit
                    (records and runs visible together); the next transaction begins at once

When an exactly-once transaction commits, as named conditions (``_Txn.due``):

    ``holds_records``  something was produced since the transaction began (an idle task commits
                       nothing: no empty transactions, no control records on an idle replica),
    ``lingered``       its first record was produced at least ``boundary_s`` ago
                       (``transaction.boundary.interval.ms``; 0: at once, after every fetched
                       batch, as Connect's ``transaction.boundary=poll``).

A record's latency is then at most the interval plus one commit (flush, EndTxn, markers); under
load a commit takes longer and the next transaction gathers what arrived meanwhile, so
transactions grow with the rate instead of their number (each ends every replica partition's
run: a transaction marker takes a replica offset).

Invariants:
    * A partition's runs are reported only once all their records were acknowledged
      (at-least-once: the report follows the acknowledgements; exactly-once: the report is in
      the records' transaction). A report starts where the previous one ended (``start``), so
      the driver can check that reports chain (``channel.accept``).
    * A failed delivery, a failed transaction or a fatal producer error ends the task with an
      error reported on the channel; the partitions' records after the last report are then
      unrecorded (at-least-once: duplicates once re-copied; exactly-once: aborted, invisible to
      ``read_committed`` readers). The driver restarts the task from the ledger's position.
    * A source partition that cannot be read (its topic deleted, not authorised) is reported
      as a topic-level error; the task goes on with its other partitions. Every error the task
      reports is one line classified by ``pipelines.edge.kafka_errors`` (a missing ACL names the
      principal, the operation, the topic and the ACL to add); a persistent authentication or
      TLS failure is reported as cluster-wide (``TaskError.kind``): the driver stops (exit 2).
      Nothing the task raises is a librdkafka exception (those do not pickle): it raises
      :class:`TaskFailed` with the classified line.
    * The task stops when the driver asks on the channel's control partition (flushing and
      reporting what it copied, committing its open transaction; its last report is delivered
      before it exits, whatever the producer's ``linger.ms``: F24), or when its worker's
      parent (the driver) is gone.
    * Exactly-once: ``transactional.id`` is stable per task slot (``transactional_id``), so a
      restarted task fences its predecessor and aborts its open transaction.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledger.config import DEFAULT_TRANSACTION_BOUNDARY_INTERVAL_MS
from ledger.errors import first_line
from pipelines.edge import kafka_errors
from pipelines.replicate import channel
from pipelines.replicate.sink import (
    FLUSH_TIMEOUT_S,
    DeliveryError,
    PartitionDeliveries,
    close_epoch_zero,
    produce_copy,
    produce_when_queue_drains,
)

log = logging.getLogger(__name__)

CONSUME_BATCH = 5_000
PUBLISH_INTERVAL_S = 0.25
CONTROL_POLL_S = 0.25
# An authentication or TLS failure stops the flow only once it lasted this long (librdkafka
# retries; a broker restarting may refuse a few connections); checked every CLUSTER_CHECK_S.
PERSISTENT_S = 15.0
CLUSTER_CHECK_S = 5.0
# Cluster-wide problems that stop the flow (exit 2); "unreachable" is waited out.
STOPPING_KINDS = frozenset({kafka_errors.AUTHENTICATION, kafka_errors.TLS,
                            kafka_errors.PROTOCOL})
# librdkafka error names that concern one topic: the topic is refused, the others go on.
TOPIC_LEVEL = frozenset({
    "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION", "TOPIC_AUTHORIZATION_FAILED",
    "MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD", "POLICY_VIOLATION",
    "_MSG_TIMED_OUT_TOPIC", "INVALID_TOPIC_EXCEPTION"})


def transactional_id(source: str, target: str, slot: int) -> str:
    """Stable per flow and task slot: a restarted task fences the one it replaces."""
    return f"offset-ledger-replicate.{source}-{target}.{slot}"


@dataclass(frozen=True)
class StreamSpec:
    """What a task copies and where it reports (picklable: it travels to a Spark executor)."""

    task: str
    channel_topic: str
    control_start: int
    # (topic, replica topic, partition, first upstream offset to copy)
    partitions: tuple[tuple[str, str, int, int], ...]
    consumer_config: Mapping[str, Any]
    producer_config: Mapping[str, Any]
    control_config: Mapping[str, Any]  # a consumer of the target cluster (secrets: never log)
    transactional_id: str | None = None
    # exactly-once: ``transaction.boundary.interval.ms`` in seconds
    boundary_s: float = DEFAULT_TRANSACTION_BOUNDARY_INTERVAL_MS / 1000
    source_alias: str = "the source cluster"  # named in classified errors
    target_alias: str = "the target cluster"


class TaskFailed(RuntimeError):
    """The task cannot go on (reported on the channel before it is raised); its message is
    one classified line, and it pickles (it crosses process boundaries)."""


class _Txn:
    """The open exactly-once transaction: when its first record was produced."""

    __slots__ = ("boundary_s", "first_record_at")

    def __init__(self, boundary_s: float) -> None:
        self.boundary_s = boundary_s
        self.first_record_at: float | None = None

    def holds_records(self) -> bool:
        return self.first_record_at is not None

    def lingered(self, now: float) -> bool:
        return self.first_record_at is not None and now >= self.first_record_at + self.boundary_s

    def due(self, now: float) -> bool:
        return self.holds_records() and self.lingered(now)

    def deadline(self, now: float) -> float:
        """When the transaction is due (an idle one: not before the next control poll)."""
        if self.first_record_at is None:
            return now + CONTROL_POLL_S
        return self.first_record_at + self.boundary_s


class _Part:
    __slots__ = ("bytes", "d", "newest", "position", "start", "stopped")

    def __init__(self, topic: str, replica: str, partition: int, start: int) -> None:
        self.d = PartitionDeliveries(topic, replica, partition, latency=True)
        self.start = self.position = start
        self.bytes = 0
        self.newest = -1  # the newest record timestamp since the last report (-1: none)
        self.stopped = False  # a topic-level error: nothing more is read or reported


def run(spec: StreamSpec) -> None:
    """Copy until asked to stop; raises :class:`TaskFailed` when the task must be restarted."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    parts = {(t, p): _Part(t, r, p, s) for t, r, p, s in spec.partitions}
    pconf = dict(spec.producer_config)
    fatal: list[str] = []
    pconf["error_cb"] = lambda err: fatal.append(err.str()) if err.fatal() else None
    if spec.transactional_id:
        pconf["transactional.id"] = spec.transactional_id
    pconf, target_watch = kafka_errors.watched(pconf)
    cconf, source_watch = kafka_errors.watched(spec.consumer_config)
    try:
        producer = Producer(pconf)
        consumer = Consumer(cconf)
        control = Consumer(dict(spec.control_config))
    except Exception as exc:  # bad client settings: a librdkafka exception must not escape
        raise TaskFailed(f"cannot create Kafka clients: {first_line(exc)}") from None
    copier = _Copier(spec, parts, producer, consumer, control, fatal)
    copier.watches = (source_watch, target_watch)
    try:
        if spec.transactional_id:
            try:
                producer.init_transactions(FLUSH_TIMEOUT_S)
                producer.begin_transaction()
            except TaskFailed:
                raise
            except Exception as exc:
                copier.fail_classified(exc, "the replica producer's transactions failed",
                                       resource=f"transactional-id {spec.transactional_id}")
        control.assign([TopicPartition(spec.channel_topic, channel.CONTROL_PARTITION,
                                       spec.control_start)])
        consumer.assign([TopicPartition(t, p, s) for t, _, p, s in spec.partitions])
        copier.loop()
    except TaskFailed:
        raise
    except Exception as exc:  # anything else, classified, as TaskFailed (it pickles)
        copier.fail_classified(exc, "the copy failed")
    finally:
        consumer.close()
        control.close()
        close_epoch_zero(copier.zero)


class _Copier:
    def __init__(self, spec: StreamSpec, parts: dict[tuple[str, int], _Part], producer: Any,
                 consumer: Any, control: Any, fatal: list[str]) -> None:
        self.spec, self.parts, self.producer, self.consumer = spec, parts, producer, consumer
        self.control, self.fatal = control, fatal
        self.eos = bool(spec.transactional_id)
        self.txn = _Txn(spec.boundary_s)
        self.zero: dict[str, Any] = {"config": dict(spec.producer_config)}
        self.watches: tuple[kafka_errors.ErrorWatch, ...] = ()  # (source, target)
        self.next_cluster_check = time.monotonic() + CLUSTER_CHECK_S

    def classify(self, error: Any, *, source: bool, operation: str | None = None,
                 resource: str | None = None) -> kafka_errors.Problem:
        """``error`` as a classified one-line problem of the source or the target cluster."""
        spec = self.spec
        watch = self.watches[0 if source else 1] if self.watches else None
        return kafka_errors.classify(
            error, spec.source_alias if source else spec.target_alias,
            spec.consumer_config if source else spec.producer_config,
            operation=operation, resource=resource, watch=watch)

    def fail_classified(self, exc: Any, what: str, resource: str | None = None) -> None:
        problem = self.classify(exc, source=False, operation="WRITE" if resource else None,
                                resource=resource)
        self._fail(None, f"{what}: {problem.message}", kind=problem.kind)

    def _check_clusters(self) -> None:
        """Fail with a cluster-wide error once authentication or TLS kept failing."""
        now = time.monotonic()
        if now < self.next_cluster_check:
            return
        self.next_cluster_check = now + CLUSTER_CHECK_S
        for i, watch in enumerate(self.watches):
            cause = watch.persistent_cause(PERSISTENT_S)
            if cause is None:
                continue
            problem = self.classify(f"{cause[0]}: {cause[1]}", source=i == 0)
            if problem.kind in STOPPING_KINDS:
                self._fail(None, problem.message, kind=problem.kind)

    def loop(self) -> None:
        txn = self.txn
        next_report = time.monotonic() + PUBLISH_INTERVAL_S
        next_control = time.monotonic() + CONTROL_POLL_S
        while True:
            now = time.monotonic()
            if now >= next_control:
                next_control = now + CONTROL_POLL_S
                if self._stop_requested():
                    break
                self._check_clusters()
            if self.eos:
                next_report = txn.deadline(now)
            msg = self.consumer.poll(min(0.1, max(0.0, next_report - now)))
            if msg is not None and self._copy([msg, *self.consumer.consume(CONSUME_BATCH - 1, 0)]):
                if self.eos and not txn.holds_records():
                    txn.first_record_at = time.monotonic()  # not the loop's: the poll waited
            self.producer.poll(0)
            if self.fatal:
                problem = self.classify(self.fatal[0], source=False)
                self._fail(None, f"the replica producer failed: {problem.message}",
                           kind=problem.kind)
            now = time.monotonic()
            if txn.due(now) if self.eos else now >= next_report:
                self._report()
                next_report = time.monotonic() + PUBLISH_INTERVAL_S
        self._report(final=True)

    def _stop_requested(self) -> bool:
        while (msg := self.control.poll(0)) is not None:
            if msg.error() is not None:
                continue
            try:
                body = json.loads(msg.value() or b"")
            except ValueError:
                continue
            if isinstance(body, dict) and body.get("kind") == "stop" and (
                    self.spec.task in body.get("tasks", ()) or "*" in body.get("tasks", ())):
                return True
        return False

    def _copy(self, msgs: list[Any]) -> int:
        """Produce ``msgs``' records to the replica; returns how many were produced."""
        producer, parts, zero = self.producer, self.parts, self.zero
        produced = 0
        for msg in msgs:
            if msg.error() is not None:
                self._read_error(msg)
                continue
            o = parts.get((msg.topic(), msg.partition()))
            if o is None or o.stopped:
                continue
            offset = msg.offset()
            key, value = msg.key(), msg.value()
            ts = produce_copy(producer, o.d, msg, offset, key, value, zero)
            if ts > o.newest:
                o.newest = ts
            o.position = offset + 1
            o.bytes += (len(key) if key else 0) + (len(value) if value else 0)
            produced += 1
        return produced

    def _read_error(self, msg: Any) -> None:
        from confluent_kafka import KafkaError

        err = msg.error()
        if err.code() == KafkaError._PARTITION_EOF:
            return
        o = self.parts.get((msg.topic(), msg.partition())) if msg.topic() else None
        if o is None or err.name() not in TOPIC_LEVEL:
            # Brokers down, a transport error: librdkafka reconnects and retries by itself.
            log.warning("task %s: reading: %s", self.spec.task, err.str())
            return
        o.stopped = True
        self.consumer.pause([_tp(o)])
        problem = self.classify(err, source=True, operation="READ", resource=f"topic {o.d.topic}")
        self._publish_error(o, problem.message, topic_level=True, kind=problem.kind)

    def _report(self, final: bool = False) -> None:
        """Report delivered runs (exactly-once: flush, report and commit the transaction)."""
        producer = self.producer
        if self.eos or final:
            remaining = producer.flush(FLUSH_TIMEOUT_S)
            if remaining:
                self._fail(None, f"{remaining} record(s) undelivered after "
                                 f"{FLUSH_TIMEOUT_S:.0f}s")
        else:
            producer.poll(0)
        now_ms = int(time.time() * 1000)
        out: list[channel.Delivered] = []
        for o in self.parts.values():
            if o.stopped:
                continue
            try:
                runs, records = o.d.take()
            except DeliveryError as exc:
                codes = set(o.d.failure_codes)
                if not self.eos:
                    # Exactly-once reports nothing: committing would make this partition's
                    # delivered but unreported copies visible, and the restarted task copies
                    # them again; _fail aborts the transaction (every copy in it invisible).
                    self._report_taken(out)
                problem = self.classify(" ".join(o.d.failures[:1]) or exc, source=False,
                                        operation="WRITE", resource=f"topic {o.d.replica}")
                self._fail(o, problem.message, kind=problem.kind,
                           topic_level=bool(codes) and codes <= TOPIC_LEVEL)
            if not runs:
                continue
            lat_max, lat_sum = o.d.latency
            o.d.latency[:] = [0, 0]
            out.append(channel.Delivered(
                o.d.topic, o.d.replica, o.d.partition, o.start, tuple(runs), o.position,
                records, o.bytes, o.newest if o.newest >= 0 else None, now_ms, lat_max,
                lat_sum, self.spec.task))
            o.start = runs[-1].upstream_end
            o.bytes, o.newest = 0, -1
        self._report_taken(out)
        if final and not self.eos:
            self._deliver_last_report()

    def _deliver_last_report(self) -> None:
        """At-least-once, stopping: send the report the final flush queued before the task
        exits (an exiting process drops what its producer still holds, and the copies it
        names would be copied again by the next run: F24). Exactly-once needs nothing: the
        report is in the transaction its commit flushed."""
        remaining = self.producer.flush(FLUSH_TIMEOUT_S)
        if remaining:
            log.warning("task %s: its last report was not delivered within %.0fs: the copies "
                        "it names are unrecorded, and copied again by the next run",
                        self.spec.task, FLUSH_TIMEOUT_S)

    def _report_taken(self, out: list[channel.Delivered]) -> None:
        if out:
            self._send(channel.encode_runs(self.spec.task, out))
        if self.eos:
            self.txn.first_record_at = None
            try:
                self.producer.commit_transaction(FLUSH_TIMEOUT_S)
                self.producer.begin_transaction()
            except Exception as exc:
                self._fail(None, f"committing a transaction failed: {first_line(exc)}")
        elif out:
            self.producer.poll(0)

    def _send(self, value: bytes) -> None:
        produce_when_queue_drains(self.producer, self.spec.channel_topic, value,
                                   self.spec.task.encode(), channel.RUNS_PARTITION, None, 0, None)

    def _publish_error(self, o: _Part | None, message: str, *, topic_level: bool,
                       kind: str = "") -> None:
        topic, partition = (o.d.topic, o.d.partition) if o else ("", -1)
        value = channel.encode_error(channel.TaskError(self.spec.task, topic, partition,
                                                       message, topic_level, kind))
        if self.eos:
            # Outside the (aborted) transaction a transactional producer cannot write: the
            # driver sees the task end and restarts it; a topic-level or cluster-wide error is
            # still sent.
            return self._send_plain(value) if topic_level or kind in STOPPING_KINDS else None
        self._send(value)
        self.producer.flush(10)

    def _send_plain(self, value: bytes) -> None:
        from confluent_kafka import Producer

        conf = {k: v for k, v in self.spec.producer_config.items()
                if k not in ("transactional.id",)}
        p = Producer(conf)
        p.produce(self.spec.channel_topic, value, self.spec.task.encode(),
                  channel.RUNS_PARTITION)
        p.flush(10)

    def _fail(self, o: _Part | None, message: str, *, topic_level: bool = False,
              kind: str = "") -> None:
        if self.eos:
            try:
                self.producer.abort_transaction(FLUSH_TIMEOUT_S)
            except Exception:
                pass  # fenced or fatal: the next holder of the id aborts it
        try:
            self._publish_error(o, message, topic_level=topic_level, kind=kind)
        except Exception as exc:
            log.warning("task %s: error not reported: %s", self.spec.task, first_line(exc))
        raise TaskFailed(message)


def _tp(o: _Part) -> Any:
    from confluent_kafka import TopicPartition

    return TopicPartition(o.d.topic, o.d.partition)
