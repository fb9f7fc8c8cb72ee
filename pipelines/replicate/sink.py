"""The producing edge: the replica producer's settings and delivery-report pairing.

Used on the executors by ``pipelines.replicate.copy_task``: the records of one source partition are
produced, in offset order, to the same partition number of the replica topic with an idempotent
producer, and each record's downstream offset is taken from its delivery report. Only the
resulting runs (a few per partition) go back to the driver.

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

from collections.abc import Mapping
from time import time as _now
from typing import Any

from ledger.translation import Run
from ledger.writer import PartitionSummary, RunBuilder

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
# coordinator, goes out while the transaction lingers (stream_task.TXN_LINGER_S).
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
