"""pipelines.replicate.sink without brokers: delivery reports -> exact runs, or a refusal."""

from __future__ import annotations

import pytest

from ledger.translation import Run
from pipelines.replicate import sink

pytestmark = pytest.mark.unit


class _Msg:
    def __init__(self, offset: int) -> None:
        self._o = offset

    def offset(self) -> int:
        return self._o


def _deliveries(upstream, downstream, fail_at=None):
    d = sink.PartitionDeliveries("orders", "P.orders", 0)
    d.upstream.extend(upstream)
    for i, off in enumerate(downstream):
        d.on_delivery("broker said no" if i == fail_at else None, _Msg(off))
    return d


def test_runs_from_reports_split_at_upstream_gaps():
    summary = _deliveries([10, 11, 12, 13, 20], [500, 501, 502, 503, 504]).summary()
    assert summary.runs == (Run(10, 500, 4), Run(20, 504, 1))
    assert (summary.records, summary.replica_topic, summary.partition) == (5, "P.orders", 0)


def test_reports_out_of_produce_order_are_refused():
    with pytest.raises(sink.DeliveryError, match="not in produce order"):
        _deliveries([1, 2, 3], [502, 501, 500]).summary()


def test_a_failed_or_missing_report_fails_the_partition():
    with pytest.raises(sink.DeliveryError, match="delivery failure"):
        _deliveries([1, 2, 3], [500, 501, 502], fail_at=1).summary()
    with pytest.raises(sink.DeliveryError, match="no delivery report"):
        _deliveries([1, 2, 3], [500, 501]).summary()


def test_required_producer_settings_cannot_be_overridden():
    conf = sink.producer_config({"bootstrap.servers": "b:9092", "enable.idempotence": "false",
                                 "acks": "1", "linger.ms": "50"})
    assert (conf["enable.idempotence"], conf["acks"], conf["linger.ms"]) == (True, "all", "50")


def test_a_transactional_producer_lingers_longer_unless_the_cluster_says_otherwise():
    assert sink.producer_config({})["linger.ms"] == 2
    assert sink.producer_config({}, transactional=True)["linger.ms"] == 5
    assert sink.producer_config({"linger.ms": "0"}, transactional=True)["linger.ms"] == "0"


@pytest.mark.parametrize("fold_after", [[], [1], [2, 4], [1, 2, 3, 4, 5]])
def test_folding_between_fetches_gives_the_runs_of_one_pairing(fold_after):
    upstream, downstream = [10, 11, 12, 13, 20, 21], [500, 501, 502, 503, 504, 507]
    d = sink.PartitionDeliveries("orders", "P.orders", 0)
    for i, (u, off) in enumerate(zip(upstream, downstream, strict=True)):
        d.upstream.append(u)
        d.on_delivery(None, _Msg(off))
        if i + 1 in fold_after:
            d.fold()
            assert len(d.upstream) == len(d.delivered) == 0  # memory: only what is in flight
    assert d.records_produced == 6

    summary = d.summary()

    assert summary.runs == (Run(10, 500, 4), Run(20, 504, 1), Run(21, 507, 1))
    assert summary.records == 6


def test_a_report_out_of_order_across_a_fold_is_refused():
    d = sink.PartitionDeliveries("orders", "P.orders", 0)
    d.upstream.extend([1, 2])
    d.on_delivery(None, _Msg(500))
    d.on_delivery(None, _Msg(501))
    d.fold()
    d.upstream.append(3)
    d.on_delivery(None, _Msg(499))

    with pytest.raises(sink.DeliveryError, match="not in produce order"):
        d.summary()


def test_records_still_in_flight_are_never_folded():
    d = sink.PartitionDeliveries("orders", "P.orders", 0)
    d.upstream.extend([1, 2, 3])
    d.on_delivery(None, _Msg(500))
    d.fold()

    assert d.upstream == [2, 3] and d.records_produced == 3
    with pytest.raises(sink.DeliveryError, match="2 record"):
        d.summary()


class _Consumed:
    """A consumed record's surface that the per-record produce reads."""

    def __init__(self, ts_type: int, ts: int, headers=None) -> None:
        self._ts, self._headers = (ts_type, ts), headers

    def timestamp(self):
        return self._ts

    def headers(self):
        return self._headers


class _Producer:
    """Records ``produce`` calls; raises BufferError ``full`` times first (a full queue)."""

    def __init__(self, full: int = 0) -> None:
        self.calls: list[tuple] = []
        self.full, self.polls = full, 0

    def produce(self, *args) -> None:
        if self.full:
            self.full -= 1
            raise BufferError("Local: Queue full")
        self.calls.append(args)

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0


def test_the_timestamp_type_constant_is_confluent_kafkas():
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE

    assert sink.TIMESTAMP_NOT_AVAILABLE == TIMESTAMP_NOT_AVAILABLE != TIMESTAMP_CREATE_TIME


@pytest.mark.parametrize(("ts_type", "ts", "produced_ts", "returned"), [
    (1, 1_700_000_000_123, 1_700_000_000_123, 1_700_000_000_123),  # CreateTime: kept
    (2, 1_700_000_000_123, 1_700_000_000_123, 1_700_000_000_123),  # LogAppendTime: kept
    (0, 1_700_000_000_123, 0, -1),  # no timestamp type: the produce time, none reported
    (1, -1, 0, -1),                 # no timestamp: the produce time
])
def test_one_record_is_produced_positionally_to_the_same_partition(ts_type, ts, produced_ts,
                                                                   returned):
    d = sink.PartitionDeliveries("T", "P.T", 3)
    producer = _Producer()
    headers = [("h", b"1"), ("n", None)]
    got = sink.produce_copy(producer, d, _Consumed(ts_type, ts, headers), 41, b"k", None, {})
    assert got == returned
    assert d.upstream == [41]
    assert producer.calls == [("P.T", None, b"k", 3, d.on_delivery, None, produced_ts, headers)]


def test_a_full_queue_is_served_until_the_record_fits():
    d = sink.PartitionDeliveries("T", "P.T", 0)
    producer = _Producer(full=3)
    assert sink.produce_copy(producer, d, _Consumed(1, 5), 7, None, b"v", {}) == 5
    # the first refusal leaves the fast path; the slow path serves reports after each other
    assert producer.polls == 2 and len(producer.calls) == 1 and d.upstream == [7]


def test_timestamp_zero_goes_the_epoch_zero_way(monkeypatch):
    d = sink.PartitionDeliveries("T", "P.T", 0)
    seen = []
    monkeypatch.setattr(sink, "produce_epoch_zero",
                        lambda producer, d_, offset, key, value, headers, zero:
                        seen.append((d_, offset, key, value, headers)))
    producer = _Producer()
    assert sink.produce_copy(producer, d, _Consumed(1, 0), 9, b"k", b"v", {}) == 0
    assert seen == [(d, 9, b"k", b"v", None)] and producer.calls == []
