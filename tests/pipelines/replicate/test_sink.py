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
