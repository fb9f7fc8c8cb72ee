"""The producing edge: write one Spark partition's records to the replica with confluent-kafka.

Runs on the executors, inside ``DataFrame.mapInArrow``: the Kafka source's columns arrive as
Arrow record batches (no per-row pickling) and are iterated column-wise. Each Spark partition of
the Kafka source holds one topic-partition's records in offset order; they are produced, in
that order, to the same partition number of the replica topic with an idempotent producer, and
each record's downstream offset is taken from its delivery report. Only the resulting runs (a
few per partition) go back to the driver.

Invariants:
    * Key, value (``None`` stays ``None``: a tombstone stays a tombstone), headers (order and
      ``None`` values kept), timestamp and partition number are copied unchanged.
    * Per replica partition, records are produced in source order with ``enable.idempotence``
      (so retries neither reorder nor duplicate within one producer session).
    * Pairing a delivery report with its upstream offset: per replica partition, the upstream
      offsets are queued in produce order and the successful reports' downstream offsets in
      report order, and the i-th report is paired with the i-th record. This relies on the
      idempotent producer delivering, and reporting, one partition's records in produce order.
      It is checked, not assumed: the downstream offsets of one partition must strictly
      increase in report order (a reordered report, or a record written out of order, breaks
      that), every produced record must have exactly one report, and any failed report fails
      the task; otherwise the task raises and returns no runs.
    * A run is built only from successful delivery reports (``ledger.writer.RunBuilder``); if
      any record of the partition fails or is still undelivered at the flush deadline, the task
      raises and returns no runs, so the batch fails and nothing about it is recorded.
    * Cluster properties (which may hold secrets) are only handed to the producer; they are
      never part of an error message.
"""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ledger.writer import PartitionSummary, RunBuilder

# Columns of pipelines.replicate.transforms.kafka_records, in order.
RECORD_COLUMNS = ("topic", "partition", "offset", "key", "value", "headers_json",
                  "timestamp_ms")
# What the sink returns to the driver: one pickled PartitionSummary per row.
SUMMARY_SCHEMA = "summary binary"

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


def decode_headers(text: str | None) -> list[tuple[str, bytes | None]] | None:
    """``headers_json`` of ``transforms.kafka_records`` -> confluent-kafka's header list."""
    if text is None:
        return None
    return [(h["key"], None if h.get("value") is None else base64.b64decode(h["value"]))
            for h in json.loads(text)]


def producer_config(target_properties: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka settings for the replica producer (secrets included: never log)."""
    return {**PRODUCER_DEFAULTS, **target_properties, **PRODUCER_REQUIRED}


class _Partition:
    """One replica partition's produced upstream offsets and reported downstream offsets."""

    __slots__ = ("delivered", "failures", "newest_timestamp_ms", "on_delivery", "partition",
                 "replica", "topic", "upstream")

    def __init__(self, topic: str, replica: str, partition: int) -> None:
        self.topic, self.replica, self.partition = topic, replica, partition
        self.upstream: list[int] = []      # produce order
        self.delivered: list[int] = []     # downstream offsets, report order
        self.failures: list[str] = []
        self.newest_timestamp_ms: int | None = None
        # One callback per partition (not one closure per record).
        append = self.delivered.append
        failures = self.failures

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                append(msg.offset())
            else:
                failures.append(err.str() if hasattr(err, "str") else str(err))
        self.on_delivery = on_delivery

    def summary(self) -> PartitionSummary | None:
        """The partition's runs; raises if the reports cannot be paired exactly."""
        label = f"{self.replica}[{self.partition}]"
        if self.failures:
            raise DeliveryError(f"{len(self.failures)} delivery failure(s) on {label}; first: "
                                f"{'; '.join(self.failures[:5])}")
        if len(self.delivered) != len(self.upstream):
            raise DeliveryError(f"{len(self.upstream) - len(self.delivered)} record(s) of "
                                f"{label} have no delivery report")
        builder = RunBuilder()
        builder.extend(self.upstream, self.delivered, self.newest_timestamp_ms)
        if builder.out_of_order:
            raise DeliveryError(f"delivery reports of {label} are not in produce order "
                                f"(downstream offsets do not increase): refusing to pair them")
        runs = tuple(builder.runs())
        if not runs:
            return None
        return PartitionSummary(self.topic, self.replica, self.partition, runs,
                                builder.records, builder.newest_timestamp_ms)


class _PartitionCopier:
    """Produces Arrow record batches and turns their delivery reports into runs."""

    def __init__(self, producer: Any, replica_topics: Mapping[str, str]) -> None:
        self.producer = producer
        self.replica_topics = replica_topics
        self.partitions: dict[tuple[str, int], _Partition] = {}
        self.produced = 0

    def _target(self, topic: str, partition: int) -> _Partition:
        key = (topic, partition)
        target = self.partitions.get(key)
        if target is None:
            target = self.partitions[key] = _Partition(topic, self.replica_topics[topic],
                                                      partition)
        return target

    def copy_batch(self, batch: Any) -> None:
        """Produce one Arrow record batch (columns :data:`RECORD_COLUMNS`) in row order."""
        import pyarrow.compute as pc

        rows = batch.num_rows
        if not rows:
            return
        topic_col, partition_col = batch.column(0), batch.column(1)
        if pc.count_distinct(topic_col).as_py() == 1 and \
                pc.count_distinct(partition_col).as_py() == 1:
            segments: Iterable[tuple[int, int]] = ((0, rows),)
        else:  # several topic-partitions in one batch: split where they change, keep order
            topics, partitions = topic_col.to_pylist(), partition_col.to_pylist()
            bounds = [0] + [i for i in range(1, rows)
                            if topics[i] != topics[i - 1] or partitions[i] != partitions[i - 1]]
            segments = zip(bounds, [*bounds[1:], rows], strict=True)
        for start, end in segments:
            part = batch.slice(start, end - start)
            self._copy_segment(self._target(part.column(0)[0].as_py(),
                                            part.column(1)[0].as_py()), part)

    def _copy_segment(self, target: _Partition, part: Any) -> None:
        import pyarrow.compute as pc

        offsets = part.column(2).to_pylist()
        keys = part.column(3).to_pylist()
        values = part.column(4).to_pylist()
        header_col = part.column(5)
        if header_col.null_count == len(header_col):
            headers: Iterable[Any] = [None] * len(offsets)
        else:
            headers = [decode_headers(text) for text in header_col.to_pylist()]
        ts_col = part.column(6)
        newest = pc.max(ts_col).as_py()
        if newest is not None and (target.newest_timestamp_ms is None
                                   or newest > target.newest_timestamp_ms):
            target.newest_timestamp_ms = newest
        # librdkafka takes 0 as "now"; records without a timestamp (-1) get the produce time.
        timestamps = pc.if_else(pc.greater(ts_col, 0), ts_col, 0).fill_null(0).to_pylist()

        produce, poll = self.producer.produce, self.producer.poll
        replica, partition, callback = target.replica, target.partition, target.on_delivery
        target.upstream.extend(offsets)
        produced = self.produced
        for key, value, hdrs, ts in zip(keys, values, headers, timestamps, strict=True):
            while True:
                try:
                    produce(replica, value, key, partition, on_delivery=callback,
                            timestamp=ts, headers=hdrs)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    poll(0.05)
            produced += 1
            if produced % POLL_EVERY == 0:
                poll(0)
        self.produced = produced

    def finish(self, timeout_s: float) -> list[PartitionSummary]:
        remaining = self.producer.flush(timeout_s)
        if remaining:
            raise DeliveryError(f"{remaining} record(s) undelivered after {timeout_s:.0f}s")
        return [s for s in (p.summary() for p in self.partitions.values()) if s is not None]


def partition_writer(config: Mapping[str, Any], replica_topics: Mapping[str, str],
                     flush_timeout_s: float = FLUSH_TIMEOUT_S,
                     ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function given to ``DataFrame.mapInArrow``: record batches in, summaries out.

    Its input has the columns :data:`RECORD_COLUMNS`; it yields one record batch with a row per
    topic-partition (:data:`SUMMARY_SCHEMA`, a pickled :class:`PartitionSummary`), read back
    with :func:`summaries_from_rows`.

    Args:
        config: producer settings from :func:`producer_config`.
        replica_topics: ``{source topic: replica topic}``.
        flush_timeout_s: how long to wait for outstanding deliveries before failing the task.
    """
    config = dict(config)
    replica_topics = dict(replica_topics)

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from confluent_kafka import Producer

        copier: _PartitionCopier | None = None
        for batch in batches:
            if not batch.num_rows:
                continue
            if copier is None:  # an empty offset range needs no producer
                copier = _PartitionCopier(Producer(config), replica_topics)
            copier.copy_batch(batch)
        if copier is None:
            return
        summaries = copier.finish(flush_timeout_s)
        if summaries:
            yield pa.RecordBatch.from_pydict(
                {"summary": pa.array([pickle.dumps(s) for s in summaries], pa.binary())})

    return write


def summaries_from_rows(rows: Iterable[Any]) -> list[PartitionSummary]:
    """The driver side of :func:`partition_writer`: collected rows -> summaries."""
    return [pickle.loads(row[0]) for row in rows]  # our own executors' output
