"""The producing edge: write one Spark partition's records to the replica with confluent-kafka.

Runs on the executors. Each Spark partition of the Kafka source holds one topic-partition's
records in offset order; they are produced, in that order, to the same partition number of the
replica topic with an idempotent producer, and each record's downstream offset is taken from
its delivery report. Only the resulting runs (a few per partition) go back to the driver.

Invariants:
    * Key, value (``None`` stays ``None``: a tombstone stays a tombstone), headers (order and
      ``None`` values kept), timestamp and partition number are copied unchanged.
    * Per replica partition, records are produced in source order with ``enable.idempotence``
      (so retries neither reorder nor duplicate within one producer session).
    * A run is built only from successful delivery reports (``ledger.writer.RunBuilder``); if
      any record of the partition fails or is still undelivered at the flush deadline, the task
      raises and returns no runs, so the batch fails and nothing about it is recorded.
    * Cluster properties (which may hold secrets) are only handed to the producer; they are
      never part of an error message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any

from ledger.writer import PartitionSummary, RunBuilder

# Columns of pipelines.replicate.transforms.kafka_records, in order.
RECORD_COLUMNS = ("topic", "partition", "offset", "key", "value", "headers", "timestamp_ms")

PRODUCER_DEFAULTS: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "log_level": 3,
}
# Never overridable: exactness and order depend on them.
PRODUCER_REQUIRED: dict[str, Any] = {"enable.idempotence": True, "acks": "all"}
FLUSH_TIMEOUT_S = 120.0
POLL_EVERY = 1000


class DeliveryError(RuntimeError):
    """Records of a partition could not be delivered to the replica."""


def producer_config(target_properties: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka settings for the replica producer (secrets included: never log)."""
    return {**PRODUCER_DEFAULTS, **target_properties, **PRODUCER_REQUIRED}


def _bytes(value: Any) -> bytes | None:
    # Spark hands binary columns to Python as bytearray, which confluent-kafka refuses.
    return None if value is None else bytes(value)


class _PartitionCopier:
    """Produces records and turns their delivery reports into runs, per source partition."""

    def __init__(self, producer: Any, replica_topics: Mapping[str, str]) -> None:
        self.producer = producer
        self.replica_topics = replica_topics
        self.builders: dict[tuple[str, int], RunBuilder] = {}
        self.failures: list[str] = []
        self.pending = 0

    def _delivered(self, builder: RunBuilder, upstream: int, timestamp_ms: int,
                   err: Any, msg: Any) -> None:
        self.pending -= 1
        if err is not None:
            if len(self.failures) < 5:
                self.failures.append(f"{msg.topic()}[{msg.partition()}] upstream offset "
                                     f"{upstream}: {err.str() if hasattr(err, 'str') else err}")
            return
        builder.add(upstream, msg.offset(), timestamp_ms)

    def copy(self, rows: Iterable[tuple]) -> None:
        produce = self.producer.produce
        poll = self.producer.poll
        builder: RunBuilder | None = None
        current: tuple[str, int] | None = None
        replica = ""
        produced = 0
        for topic, partition, offset, key, value, headers, timestamp_ms in rows:
            if (topic, partition) != current:
                current = (topic, partition)
                builder = self.builders.setdefault(current, RunBuilder())
                replica = self.replica_topics[topic]
            callback = partial(self._delivered, builder, offset, timestamp_ms)
            kwargs = {"partition": partition, "key": _bytes(key), "value": _bytes(value),
                      "on_delivery": callback}
            if headers:
                kwargs["headers"] = [(h[0], _bytes(h[1])) for h in headers]
            # librdkafka takes 0 as "now"; records without a timestamp (-1) get the produce time.
            if timestamp_ms is not None and timestamp_ms > 0:
                kwargs["timestamp"] = timestamp_ms
            while True:
                try:
                    produce(replica, **kwargs)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    poll(0.05)
            self.pending += 1
            produced += 1
            if produced % POLL_EVERY == 0:
                poll(0)

    def finish(self, timeout_s: float) -> list[PartitionSummary]:
        remaining = self.producer.flush(timeout_s)
        if self.failures or remaining or self.pending:
            raise DeliveryError(
                f"{len(self.failures)} delivery failure(s), {max(remaining, self.pending)} "
                f"record(s) undelivered after {timeout_s:.0f}s; first failures: "
                f"{'; '.join(self.failures) or 'none'}")
        out = []
        for (topic, partition), builder in self.builders.items():
            runs = tuple(builder.runs())
            if runs:
                out.append(PartitionSummary(topic, self.replica_topics[topic], partition, runs,
                                            builder.records, builder.newest_timestamp_ms))
        return out


def partition_writer(config: Mapping[str, Any], replica_topics: Mapping[str, str],
                     flush_timeout_s: float = FLUSH_TIMEOUT_S,
                     ) -> Callable[[Iterator[tuple]], Iterator[PartitionSummary]]:
    """The function given to ``rdd.mapPartitions``: rows in, one summary per topic-partition out.

    Args:
        config: producer settings from :func:`producer_config`.
        replica_topics: ``{source topic: replica topic}``.
        flush_timeout_s: how long to wait for outstanding deliveries before failing the task.
    """
    config = dict(config)
    replica_topics = dict(replica_topics)

    def write(rows: Iterator[tuple]) -> Iterator[PartitionSummary]:
        from confluent_kafka import Producer

        first = next(rows, None)
        if first is None:  # an empty offset range: no producer needed
            return iter(())
        copier = _PartitionCopier(Producer(config), replica_topics)
        copier.copy(_chain(first, rows))
        return iter(copier.finish(flush_timeout_s))

    return write


def _chain(first: tuple, rest: Iterator[tuple]) -> Iterator[tuple]:
    yield first
    yield from rest
