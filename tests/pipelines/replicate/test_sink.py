"""pipelines.replicate.sink without brokers: Arrow batches in, exact runs out, or a failure."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ledger.translation import Run
from pipelines.replicate import sink

pytestmark = pytest.mark.unit

SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                    ("key", pa.binary()), ("value", pa.binary()), ("headers_json", pa.string()),
                    ("timestamp_ms", pa.int64())])
# As Spark's to_json writes them (see test_transforms): a null value is an absent field.
HEADERS_JSON = '[{"key":"h"},{"key":"h","value":"eA=="}]'


class _Msg:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._t, self._p, self._o = topic, partition, offset

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class FakeProducer:
    """Assigns downstream offsets in produce order; reports deliveries on flush."""

    def __init__(self, start: int = 500, reorder: bool = False, fail_at: int | None = None):
        self.next = start
        self.reorder = reorder
        self.fail_at = fail_at
        self.produced: list[tuple] = []
        self.pending: list[tuple] = []

    def produce(self, topic, value=None, key=None, partition=-1, on_delivery=None,
                timestamp=0, headers=None):
        self.produced.append((topic, partition, key, value, headers, timestamp))
        self.pending.append((on_delivery, _Msg(topic, partition, self.next)))
        self.next += 1

    def poll(self, timeout=0):
        return 0

    def flush(self, timeout=0):
        reports = self.pending[::-1] if self.reorder else self.pending
        for i, (callback, msg) in enumerate(reports):
            callback("broker said no" if i == self.fail_at else None, msg)
        self.pending = []
        return 0


def _batch(offsets, partition=0, topic="orders"):
    n = len(offsets)
    return pa.record_batch([
        pa.array([topic] * n), pa.array([partition] * n, pa.int32()), pa.array(offsets, pa.int64()),
        pa.array([b"k%d" % o if o % 2 else None for o in offsets], pa.binary()),
        pa.array([None if o % 3 == 0 else b"v%d" % o for o in offsets], pa.binary()),
        pa.array([HEADERS_JSON if o % 2 else None for o in offsets], pa.string()),
        pa.array([1_700_000_000_000 + o if o % 5 else -1 for o in offsets], pa.int64()),
    ], schema=SCHEMA)


def test_records_copied_unchanged_and_runs_from_reports():
    producer = FakeProducer()
    copier = sink._PartitionCopier(producer, {"orders": "P.orders"})
    copier.copy_batch(_batch([10, 11, 12]))
    copier.copy_batch(_batch([13, 20]))  # an upstream gap splits the run
    [summary] = copier.finish(1)
    assert summary.runs == (Run(10, 500, 4), Run(20, 504, 1))
    assert (summary.records, summary.replica_topic, summary.partition) == (5, "P.orders", 0)
    assert summary.newest_timestamp_ms == 1_700_000_000_013  # 20 has none (-1)
    assert producer.produced[0] == ("P.orders", 0, None, b"v10", None, 0)  # -1: produce time
    assert producer.produced[1] == ("P.orders", 0, b"k11", b"v11", [("h", None), ("h", b"x")],
                                    1_700_000_000_011)
    assert producer.produced[2][3] is None  # a tombstone stays a tombstone


def test_mixed_partitions_in_one_batch_keep_order_per_partition():
    producer = FakeProducer()
    copier = sink._PartitionCopier(producer, {"orders": "P.orders"})
    table = pa.Table.from_batches([_batch([1, 2], partition=0), _batch([7, 8], partition=1)])
    [batch] = table.combine_chunks().to_batches()
    copier.copy_batch(batch)
    summaries = {s.partition: s.runs for s in copier.finish(1)}
    assert summaries == {0: (Run(1, 500, 2),), 1: (Run(7, 502, 2),)}


def test_reports_out_of_produce_order_are_refused():
    copier = sink._PartitionCopier(FakeProducer(reorder=True), {"orders": "P.orders"})
    copier.copy_batch(_batch([1, 2, 3]))
    with pytest.raises(sink.DeliveryError, match="not in produce order"):
        copier.finish(1)


def test_a_failed_delivery_fails_the_partition():
    copier = sink._PartitionCopier(FakeProducer(fail_at=1), {"orders": "P.orders"})
    copier.copy_batch(_batch([1, 2, 3]))
    with pytest.raises(sink.DeliveryError, match="delivery failure"):
        copier.finish(1)


def test_writer_returns_pickled_summaries_and_nothing_for_empty_input():
    write = sink.partition_writer({}, {"orders": "P.orders"})
    assert list(write(iter([]))) == []


def test_decode_headers_keeps_order_null_and_empty_values():
    text = '[{"key":"b","value":"/wA="},{"key":"a"},{"key":"b","value":""},{"key":"\u00e9"}]'
    assert sink.decode_headers(text) == [("b", b"\xff\x00"), ("a", None), ("b", b""),
                                         ("\u00e9", None)]
    assert sink.decode_headers(None) is None
