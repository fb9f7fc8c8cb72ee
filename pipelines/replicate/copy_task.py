"""The executor task: copy planned offset ranges with librdkafka and return only their runs.

One task (a Spark task, or a local worker's: ``executors``) receives a few :class:`CopyRange`
(distinct source partitions), consumes them with one confluent-kafka consumer (``assign`` at
the planned offsets, ``read_committed``, no group, no commits) and produces every record to the
same partition number of the replica with one idempotent producer. Record bytes stay in
librdkafka and this Python worker; only one
:class:`RangeResult` per range (its runs, counts, the offset it reached, or its error) goes
back to the driver.

Invariants:
    * Per range, records are produced in upstream offset order, and only records with
      ``start <= offset < end`` (or fewer, when the byte bound stops the range early: then
      ``position`` says where it stopped). ``position`` is the next upstream offset to read:
      it passes transaction markers and aborted records, which are never copied.
    * Runs come only from successful delivery reports, paired and checked by
      ``sink.PartitionDeliveries``: a range with any failed, missing or out-of-order report
      returns an ``error`` and no runs. Its copies are then unrecorded duplicates, never a
      wrong mapping.
    * A range's failure is returned, not raised, so the other ranges of the batch are still
      recorded; it is one line classified by ``pipelines.edge.kafka_errors`` (a missing ACL names
      the operation, topic and principal). Nothing a task raises is a librdkafka exception
      (those do not pickle: a local worker could not return it). A crash of the task itself
      (executor lost) is retried by Spark, and a retried attempt re-copies its ranges: only
      the attempt whose result reaches the driver is recorded.
    * Key, value (``None`` kept), headers (order and ``None`` values kept) and the source
      timestamp are copied. The timestamp is passed explicitly, whatever the source's
      timestamp type (a LogAppendTime source yields a CreateTime replica with the source's
      timestamps). librdkafka treats a produce timestamp of 0 as "now", so a record with
      timestamp 0 is produced through ``sink.produce_epoch_zero`` (kafka-python); a record
      without a timestamp (-1) gets the produce time, as a Java producer would give it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.errors import first_line
from ledger.writer import PartitionSummary
from pipelines.edge import kafka_errors
from pipelines.replicate.sink import (
    FLUSH_TIMEOUT_S,
    DeliveryError,
    PartitionDeliveries,
    close_epoch_zero,
    produce_copy,
)

log = logging.getLogger(__name__)

CONSUME_BATCH = 10_000
# A range that yields nothing (no record, no end-of-partition) for this long fails.
IDLE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CopyRange:
    """Copy upstream offsets ``[start, end)`` of ``topic[partition]`` to ``replica_topic``."""

    topic: str
    replica_topic: str
    partition: int
    start: int
    end: int

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class RangeResult:
    """What a task did with one range (built on the executor, read on the driver)."""

    range: CopyRange
    summary: PartitionSummary | None  # the runs written; None if no record was copied
    position: int                     # next upstream offset to read
    records: int
    bytes: int
    error: str | None = None


class _Open:
    """One range being copied."""

    __slots__ = ("bytes", "deliveries", "done", "error", "position", "range")

    def __init__(self, r: CopyRange) -> None:
        self.range = r
        self.deliveries = PartitionDeliveries(r.topic, r.replica_topic, r.partition)
        self.position = r.start
        self.bytes = 0
        self.done = r.start >= r.end
        self.error: str | None = None

    def save(self, position: int, nbytes: int, newest_timestamp_ms: int) -> None:
        """Store the copy loop's locals for this range (``-1``: no timestamp seen)."""
        self.position, self.bytes = position, nbytes
        if newest_timestamp_ms >= 0:
            self.deliveries.newest_timestamp_ms = newest_timestamp_ms


def copy_ranges(consumer_config: Mapping[str, Any], producer_config: Mapping[str, Any],
                max_bytes: int | None = None, flush_timeout_s: float = FLUSH_TIMEOUT_S,
                ) -> Callable[[Iterator[CopyRange]], Iterator[RangeResult]]:
    """The function given to ``RDD.mapPartitions``: ranges in, one result per range out.

    Args:
        consumer_config: from ``source.consumer_config`` (secrets included: never logged).
        producer_config: from ``sink.producer_config``.
        max_bytes: per-range bound on copied key + value bytes; a range stops after the
            record that reaches it (``position`` tells the driver where).
        flush_timeout_s: how long to wait for outstanding deliveries.
    """
    consumer_config, producer_config = dict(consumer_config), dict(producer_config)

    def run(ranges: Iterator[CopyRange]) -> Iterator[RangeResult]:
        todo = list(ranges)
        if todo:
            yield from _copy(todo, consumer_config, producer_config, max_bytes, flush_timeout_s)

    return run


def copy_group(ranges: Sequence[CopyRange], consumer_config: Mapping[str, Any],
               producer_config: Mapping[str, Any], max_bytes: int | None = None,
               flush_timeout_s: float = FLUSH_TIMEOUT_S) -> list[RangeResult]:
    """One task's work outside Spark (``executors.LocalCopies``): one result per range."""
    if not ranges:
        return []
    return _copy(list(ranges), dict(consumer_config), dict(producer_config), max_bytes,
                 flush_timeout_s)


def _copy(ranges: Sequence[CopyRange], consumer_config: dict[str, Any],
          producer_config: dict[str, Any], max_bytes: int | None,
          flush_timeout_s: float) -> list[RangeResult]:
    from confluent_kafka import Consumer, Producer

    opened = {r.key: _Open(r) for r in ranges}
    if not any(not o.done for o in opened.values()):
        return [_result(o) for o in opened.values()]
    consumer_config, source_watch = kafka_errors.watched(consumer_config)
    producer_config, target_watch = kafka_errors.watched(producer_config)
    try:
        consumer = Consumer(consumer_config)
        producer = Producer(producer_config)
    except Exception as exc:  # bad client settings: every range fails alike
        return [_result(o, f"cannot create Kafka clients: {first_line(exc)}")
                for o in opened.values()]
    zero: dict[str, Any] = {"config": producer_config}
    try:
        _consume_and_produce(consumer, producer, opened, max_bytes, zero)
        remaining = producer.flush(flush_timeout_s)
        if remaining:
            for o in opened.values():
                o.error = o.error or f"{remaining} record(s) undelivered after " \
                                     f"{flush_timeout_s:.0f}s"
    except Exception as exc:  # a fatal producer error (a missing WRITE ACL), a client error
        for o in opened.values():
            o.error = o.error or _classified(exc, o, producer_config, target_watch)
    finally:
        consumer.close()
        close_epoch_zero(zero)
    for o in opened.values():
        if o.error is None and (o.deliveries.failures or target_watch.fatal):
            o.error = _classified(" ".join(o.deliveries.failures[:1]) or "fatal producer error",
                                  o, producer_config, target_watch)
        elif o.error is not None and o.error.startswith(READ_FAILED):
            o.error = kafka_errors.classify(
                o.error[len(READ_FAILED):], "the source cluster", consumer_config,
                operation="READ", resource=f"topic {o.range.topic}", watch=source_watch).message
    return [_result(o) for o in opened.values()]


READ_FAILED = "reading failed: "


def _classified(exc: Any, o: _Open, producer_config: Mapping[str, Any],
                watch: kafka_errors.ErrorWatch) -> str:
    """A producing failure of range ``o`` as one classified line (a librdkafka exception
    never leaves the task: it does not pickle)."""
    return kafka_errors.classify(exc, "the target cluster", producer_config, operation="WRITE",
                                 resource=f"topic {o.range.replica_topic}", watch=watch).message


def _consume_and_produce(consumer: Any, producer: Any, opened: dict[tuple[str, int], _Open],
                         max_bytes: int | None, zero: dict[str, Any]) -> None:
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(o.range.topic, o.range.partition, o.range.start)
                     for o in opened.values() if not o.done])
    active = sum(1 for o in opened.values() if not o.done)
    poll, consume = producer.poll, consumer.consume
    limit = max_bytes or 0
    last_progress = time.monotonic()
    while active:
        msgs = consume(CONSUME_BATCH, 0.5)
        if not msgs:
            if time.monotonic() - last_progress > IDLE_TIMEOUT_S:
                for o in opened.values():
                    if not o.done:
                        o.done, o.error = True, (f"nothing read from {o.range.topic}"
                                                 f"[{o.range.partition}] for "
                                                 f"{IDLE_TIMEOUT_S:.0f}s at offset {o.position}")
                return
            poll(0)
            continue
        last_progress = time.monotonic()
        # The per-record path is the job's CPU: the current range's state lives in locals,
        # loaded when the partition changes (a fetch returns runs of one partition) and
        # saved back before the next one, an error, and the end of the fetch.
        ctopic, cpart = None, -1
        o: _Open | None = None
        position = nbytes = newest = 0
        for msg in msgs:
            if msg.error() is not None:
                if o is not None:
                    o.save(position, nbytes, newest)
                    o = None
                active -= _read_error(msg, opened)
                ctopic = None
                continue
            topic, part = msg.topic(), msg.partition()
            if part != cpart or topic != ctopic:
                if o is not None:
                    o.save(position, nbytes, newest)
                ctopic, cpart = topic, part
                o = opened[(topic, part)]
                d = o.deliveries
                end = o.range.end
                position, nbytes, done = o.position, o.bytes, o.done
                newest = d.newest_timestamp_ms if d.newest_timestamp_ms is not None else -1
            if done:
                continue
            offset = msg.offset()
            if offset >= end:  # the range ended with markers or aborted records
                position, done = end, True
                o.done = True
                active -= 1
                consumer.pause([TopicPartition(topic, part)])
                continue
            key, value = msg.key(), msg.value()
            ts = produce_copy(producer, d, msg, offset, key, value, zero)
            if ts > newest:
                newest = ts
            position = offset + 1
            if limit:
                nbytes += (len(key) if key else 0) + (len(value) if value else 0)
            if position >= end or (limit and nbytes >= limit):
                done = True
                o.done = True
                active -= 1
                consumer.pause([TopicPartition(topic, part)])
        if o is not None:
            o.save(position, nbytes, newest)
        poll(0)  # serve the delivery reports of this fetch
        for o in opened.values():
            o.deliveries.fold()


def _read_error(msg: Any, opened: dict[tuple[str, int], _Open]) -> int:
    """Handle an error message of the consumer; returns how many ranges it closed."""
    from confluent_kafka import KafkaError

    err = msg.error()
    o = opened.get((msg.topic(), msg.partition()))
    if err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED and o is None:
        # The consumer's group.id is never joined or committed to (assign only): librdkafka
        # still looks up its coordinator, which needs an ACL this task can do without.
        return 0
    if err.code() == KafkaError._PARTITION_EOF:
        if o is not None and not o.done and msg.offset() >= o.range.end:
            o.position, o.done = o.range.end, True
            return 1
        return 0
    closed = 0
    for t in [o] if o is not None else list(opened.values()):
        if not t.done:
            t.done, t.error = True, f"{READ_FAILED}{err.name()}: {err.str()}"
            closed += 1
    return closed


def _result(o: _Open, error: str | None = None) -> RangeResult:
    error = error or o.error
    summary = None
    if error is None:
        try:
            summary = o.deliveries.summary()
        except DeliveryError as exc:
            error = str(exc)
    records = o.deliveries.records_produced
    if error is not None:
        return RangeResult(o.range, None, o.range.start, records, o.bytes, error)
    return RangeResult(o.range, summary, o.position, records, o.bytes, None)
