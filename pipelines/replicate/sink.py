"""The producing edge: the replica producer's settings and delivery-report pairing.

Used on the executors by both copies (``copy_task``, bounded; ``stream_task``, streaming),
which share its slow paths of the per-record produce (a full local queue, timestamp 0): the
records of one source partition are produced, in offset order, to the same partition number of
the replica topic with an idempotent producer, and each record's downstream offset is taken
from its delivery report. Only the resulting runs (a few per partition) go back to the driver.

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
      that), every produced record must have exactly one report, and no report may have failed;
      otherwise :meth:`PartitionDeliveries.summary` raises and the range returns no runs.
    * Between fetches the reports received so far are folded into runs with the records they
      pair with (:meth:`PartitionDeliveries.fold`): a task holds the offsets of the records in
      flight, not of the whole range, and folding in pieces yields the runs of one pairing.
    * A run is built only from successful delivery reports (``ledger.writer.RunBuilder``); if
      any record of the partition fails or is still undelivered at the flush deadline, nothing
      about the range is recorded (its copies stay unrecorded duplicates).
    * Cluster properties (which may hold secrets) are only handed to the producer; they are
      never part of an error message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from time import time as _now
from typing import Any

from ledger.errors import first_line
from ledger.translation import Run
from ledger.writer import PartitionSummary, RunBuilder

log = logging.getLogger(__name__)

PRODUCER_DEFAULTS: dict[str, Any] = {
    # A streaming task's records wait at most 2 ms to share a request; a bulk copy's batches
    # fill first (batch.size). 5 ms cost 3 ms of p50 at 2,000 records/s and saved about 0.02
    # cores at 50,000 (bench/README.md).
    "linger.ms": 2,
    "socket.nagle.disable": True,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "log_level": 3,
}
# Never overridable: exactness and order depend on them.
PRODUCER_REQUIRED: dict[str, Any] = {"enable.idempotence": True, "acks": "all"}
FLUSH_TIMEOUT_S = 120.0
# The copy calls ``Producer.produce`` once per record with positional arguments: confluent-kafka
# parses keyword arguments on every call, about half the call's cost (0.6 of 1.4 us). Its
# positional parameters are (topic, value, key, partition, on_delivery, callback, timestamp,
# headers), ``callback`` being the legacy alias of ``on_delivery`` (passed as None);
# confluent-kafka is pinned (pyproject.toml), and the copy tests check that key, value,
# timestamp, headers and partition arrive unchanged and that every record is reported.


class DeliveryError(RuntimeError):
    """Records of a partition could not be delivered to the replica."""


# In a transaction a record is readable only once the transaction commits (its flush sends at
# once, whatever the linger), so lingering costs no latency there; it only has to be short
# enough that each partition's first batch, which the broker verifies with the transaction
# coordinator, goes out while the transaction lingers (``transaction.boundary.interval.ms``).
TRANSACTIONAL_LINGER_MS = 5


def producer_config(target_properties: Mapping[str, str], *,
                    transactional: bool = False) -> dict[str, Any]:
    """librdkafka settings for the replica producer (secrets included: never log); the
    cluster's own ``linger.ms`` wins over either default."""
    defaults = ({**PRODUCER_DEFAULTS, "linger.ms": TRANSACTIONAL_LINGER_MS} if transactional
                else PRODUCER_DEFAULTS)
    return {**defaults, **target_properties, **PRODUCER_REQUIRED}


class PartitionDeliveries:
    """One replica partition's produced upstream offsets and reported downstream offsets."""

    __slots__ = ("_builder", "_folded", "delivered", "failure_codes", "failures", "latency",
                 "newest_timestamp_ms", "on_delivery", "partition", "replica", "topic",
                 "upstream")

    def __init__(self, topic: str, replica: str, partition: int, *,
                 latency: bool = False) -> None:
        self.topic, self.replica, self.partition = topic, replica, partition
        self.upstream: list[int] = []      # produce order
        self.delivered: list[int] = []     # downstream offsets, report order
        self.failures: list[str] = []
        self.failure_codes: list[str] = []  # librdkafka error names, for classification
        # [max, sum] of send (record timestamp) -> delivery report in ms, when ``latency``.
        self.latency = [0, 0]
        self.newest_timestamp_ms: int | None = None
        self._builder = RunBuilder()  # the runs of the pairs folded so far
        self._folded = 0
        # One callback per partition (not one closure per record).
        append = self.delivered.append
        failures, codes, lat = self.failures, self.failure_codes, self.latency

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                append(msg.offset())
            else:
                failures.append(err.str() if hasattr(err, "str") else str(err))
                codes.append(err.name() if hasattr(err, "name") else "")

        def on_delivery_timed(err: Any, msg: Any) -> None:
            if err is None:
                append(msg.offset())
                ms = int(_now() * 1000) - msg.timestamp()[1]
                lat[1] += ms
                if ms > lat[0]:
                    lat[0] = ms
            else:
                failures.append(err.str() if hasattr(err, "str") else str(err))
                codes.append(err.name() if hasattr(err, "name") else "")
        self.on_delivery = on_delivery_timed if latency else on_delivery

    @property
    def records_produced(self) -> int:
        return self._folded + len(self.upstream)

    def fold(self) -> None:
        """Pair the reports received so far with their records, into runs, and forget both.

        Called between fetches, so memory holds the records in flight, not the whole range.
        Reports arrive (in ``poll``/``flush``) on this thread only: nothing appends meanwhile.
        """
        n = len(self.delivered)
        if not n or self.failures or n > len(self.upstream):
            return  # nothing to pair, or summary() refuses the partition anyway
        self._builder.extend(self.upstream[:n], self.delivered)
        del self.upstream[:n]
        del self.delivered[:]  # in place: on_delivery appends to this list
        self._folded += n

    def take(self) -> tuple[list[Run], int]:
        """Fold, then hand over the runs folded so far and start afresh (a streaming report).

        Returns ``(runs, records)``; raises :class:`DeliveryError` if
        a report failed or the reports are out of order (nothing is handed over then).
        """
        label = f"{self.replica}[{self.partition}]"
        if self.failures:
            raise DeliveryError(f"{len(self.failures)} delivery failure(s) on {label}; first: "
                                f"{'; '.join(self.failures[:5])}")
        self.fold()
        builder = self._builder
        if builder.out_of_order:
            raise DeliveryError(f"delivery reports of {label} are not in produce order "
                                f"(downstream offsets do not increase): refusing to pair them")
        if not builder.records:
            return [], 0
        self._builder = RunBuilder()
        return builder.runs(), builder.records

    def summary(self) -> PartitionSummary | None:
        """The partition's runs; raises if the reports cannot be paired exactly."""
        label = f"{self.replica}[{self.partition}]"
        if self.failures:
            raise DeliveryError(f"{len(self.failures)} delivery failure(s) on {label}; first: "
                                f"{'; '.join(self.failures[:5])}")
        self.fold()
        if len(self.delivered) != len(self.upstream):
            raise DeliveryError(f"{len(self.upstream) - len(self.delivered)} record(s) of "
                                f"{label} have no delivery report")
        builder = self._builder
        builder.extend(self.upstream, self.delivered, self.newest_timestamp_ms)
        if builder.out_of_order:
            raise DeliveryError(f"delivery reports of {label} are not in produce order "
                                f"(downstream offsets do not increase): refusing to pair them")
        runs = tuple(builder.runs())
        if not runs:
            return None
        return PartitionSummary(self.topic, self.replica, self.partition, runs,
                                builder.records, builder.newest_timestamp_ms)


# --- the per-record produce (both copies: copy_task, stream_task) ----------------------------

# confluent_kafka.TIMESTAMP_NOT_AVAILABLE (a test pins it): a constant here keeps the import of
# confluent-kafka out of the per-record path.
TIMESTAMP_NOT_AVAILABLE = 0


def produce_copy(producer: Any, d: PartitionDeliveries, msg: Any, offset: int,
                 key: bytes | None, value: bytes | None, zero: dict[str, Any]) -> int:
    """Produce one consumed record (``msg``, at upstream ``offset``) to ``d``'s replica
    partition, queueing ``offset`` for pairing with its delivery report; return the record's
    timestamp in ms, -1 when it has none.

    The one per-record path of both copies, so it is their CPU: ``produce`` is called
    positionally (the order: see the note above :class:`DeliveryError`). A record without a
    timestamp is produced with the produce time, as the Java producer gives it; timestamp 0
    goes through :func:`produce_epoch_zero` (librdkafka would replace it).
    """
    ts_type, ts = msg.timestamp()
    d.upstream.append(offset)
    if ts_type == TIMESTAMP_NOT_AVAILABLE:
        ts = -1
    if ts > 0:
        try:
            producer.produce(d.replica, value, key, d.partition, d.on_delivery, None, ts,
                             msg.headers())
        except BufferError:
            produce_when_queue_drains(producer, d.replica, value, key, d.partition,
                                      d.on_delivery, ts, msg.headers())
    elif ts == 0:
        produce_epoch_zero(producer, d, offset, key, value, msg.headers(), zero)
    else:  # no timestamp: 0 asks librdkafka for the produce time
        produce_when_queue_drains(producer, d.replica, value, key, d.partition, d.on_delivery,
                                  0, msg.headers())
        ts = -1
    return ts


# --- the slow paths of the per-record produce -------------------------------------------------


def produce_when_queue_drains(producer: Any, replica: str, value: bytes | None,
                              key: bytes | None, partition: int, on_delivery: Any,
                              timestamp: int, headers: Any) -> None:
    """Produce one record, serving delivery reports while librdkafka's local queue is full
    (the copies' slow path; a timestamp of 0 asks librdkafka for the produce time)."""
    while True:
        try:
            producer.produce(replica, value, key, partition, on_delivery, None, timestamp,
                             headers)  # positional (the order: sink.py)
            return
        except BufferError:  # local queue full: let deliveries drain
            producer.poll(0.05)


def produce_epoch_zero(producer: Any, d: PartitionDeliveries, upstream: int, key: bytes | None,
                       value: bytes | None, headers: Any, zero: dict[str, Any]) -> None:
    """Produce a record whose timestamp is 0 (1970-01-01T00:00:00Z) keeping timestamp 0.

    librdkafka replaces a produce timestamp of 0 with the current time (a negative one becomes
    "no timestamp"), so such a record goes through kafka-python, whose producer writes 0 as
    given. Order is kept: the librdkafka producer is flushed first (its reports are in), the
    record is sent synchronously, and its offset is appended as the next delivery report. The
    stored timestamp is checked; any difference fails the range (nothing recorded).
    kafka-python refuses a null header value and a record with neither key nor value: such a
    record with timestamp 0 fails its range (reported, nothing recorded).
    """
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if remaining:
        d.failures.append(f"{remaining} record(s) undelivered before upstream record {upstream}")
        return
    try:
        if "producer" not in zero:
            zero["producer"] = _python_producer(zero["config"])
        meta = zero["producer"].send(
            d.replica, value=value, key=key, partition=d.partition, timestamp_ms=0,
            headers=list(headers) if headers else None,
        ).get(timeout=FLUSH_TIMEOUT_S)
    except Exception as exc:
        d.failures.append(f"upstream record {upstream} (timestamp 0): {first_line(exc)}")
        return
    if meta.timestamp not in (0, -1):
        d.failures.append(f"timestamp 0 of upstream record {upstream} became {meta.timestamp}")
        return
    d.delivered.append(meta.offset)


def close_epoch_zero(zero: dict[str, Any]) -> None:
    """Close the kafka-python producer :func:`produce_epoch_zero` opened, if it did (its records
    were all acknowledged: each send was waited for)."""
    producer = zero.pop("producer", None)
    if producer is not None:
        try:
            producer.close(timeout=FLUSH_TIMEOUT_S)
        except Exception as exc:  # closing is cleanup: the records are already acknowledged
            log.warning("closing the timestamp-0 producer failed: %s", first_line(exc))


def _python_producer(config: Mapping[str, Any]) -> Any:
    """A kafka-python producer for the replica, from the librdkafka settings."""
    try:
        from kafka import KafkaProducer
    except ImportError as exc:
        raise RuntimeError("records with timestamp 0 need the kafka-python package "
                           "(librdkafka cannot produce timestamp 0)") from exc
    names = {"bootstrap.servers": "bootstrap_servers", "security.protocol": "security_protocol",
             "sasl.mechanism": "sasl_mechanism", "sasl.mechanisms": "sasl_mechanism",
             "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
             "ssl.ca.location": "ssl_cafile", "ssl.certificate.location": "ssl_certfile",
             "ssl.key.location": "ssl_keyfile", "ssl.key.password": "ssl_password",
             "client.id": "client_id"}
    kwargs = {names[k]: v for k, v in config.items() if k in names}
    if "security_protocol" in kwargs:
        kwargs["security_protocol"] = str(kwargs["security_protocol"]).upper()
    return KafkaProducer(acks="all", enable_idempotence=True, **kwargs)
