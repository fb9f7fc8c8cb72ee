"""OffsetSyncStore.load on real Spark and Delta: bounded spans that translate like the raw runs."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger import translation
from ledger.schemas import OFFSET_SYNCS, OFFSET_SYNCS_SCHEMA
from ledger.spans import coalesce
from ledger.store import OffsetSyncStore, Translated
from ledger.tables import Ledger

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)

# Raw runs per partition of Payments, in write order (one batch each).
CONTIGUOUS = [(10 * i, 5 + 10 * i, 10) for i in range(1000)]  # 1000 batches -> 1 span
REWIND = [(10, 500, 3), (13, 503, 2), (15, 505, 4),  # 10..18
          (11, 509, 2), (13, 511, 3), (16, 514, 5),  # restart from 11: copied again
          (21, 519, 4), (30, 523, 2), (32, 525, 2)]  # then an upstream gap at 25..29
NEW_EPOCH = [(0, 0, 5), (5, 5, 5), (10, 10, 5),  # the replica is truncated at 7:
             (15, 7, 3), (18, 10, 3), (21, 13, 1), (22, 15, 2)]  # a hole at 14
HISTORIES = {0: CONTIGUOUS, 1: REWIND, 2: NEW_EPOCH}


def rows(topic: str, partition: int, runs: list[tuple[int, int, int]], first_batch: int = 0):
    # Batch ids restart with a replication run: written_at orders first.
    return [("P->B", "P", "B", topic, f"P.{topic}", partition, u, d, n, "run-1",
             (first_batch + i) % 7, T0 + dt.timedelta(seconds=10 * i))
            for i, (u, d, n) in enumerate(runs)]


@pytest.fixture(scope="module")
def ledger(spark, tmp_path_factory) -> Ledger:
    ledger = Ledger(spark, str(tmp_path_factory.mktemp("store") / "ledger"))
    ledger.init()
    data = [row for p, runs in HISTORIES.items() for row in rows("Payments", p, runs)]
    data += rows("Orders", 0, [(0, 0, 4), (4, 4, 4)])
    data += [("B->P", "B", "P", "Payments", "B.Payments", 0, 0, 0, 1, "run-9", 0, T0)]
    ledger.append(OFFSET_SYNCS, spark.createDataFrame(data, OFFSET_SYNCS_SCHEMA), "t", 1)
    return ledger


def test_spans_translate_like_the_raw_runs(ledger: Ledger) -> None:
    store = OffsetSyncStore.load(ledger, "P->B")
    assert store.version == ledger.version(OFFSET_SYNCS)
    assert store.replica_topics == {"Payments": "P.Payments", "Orders": "P.Orders"}
    assert set(store.runs) == {("Payments", 0), ("Payments", 1), ("Payments", 2), ("Orders", 0)}
    for partition, raw in HISTORIES.items():
        spans = store.runs[("Payments", partition)]
        # The Spark spans are ledger.spans' spans of the current epoch.
        assert spans == coalesce(translation.current_epoch(raw))
        epoch = translation.current_epoch(raw)
        top_u = max(r.upstream_end for r in epoch) + 3
        top_d = max(r.downstream_end for r in epoch) + 3
        for x in range(0, min(top_u, 400)):
            expected = translation.forward(raw, x)
            got = store.forward("Payments", partition, x)
            assert got.offset == expected, (partition, x)
            assert isinstance(got, Translated) == (expected is not None)
        for c in range(0, min(top_d, 400)):
            assert store.reverse("Payments", partition, c).offset == translation.reverse(raw, c)
        assert store.upstream_end("Payments", partition) == max(r.upstream_end for r in epoch)
        assert store.downstream_end("Payments", partition) == max(r.downstream_end
                                                                   for r in epoch)
    assert store.forward("Payments", 0, 9_990) == Translated(9_995)
    assert store.reverse("Payments", 0, 10_005) == Translated(10_000)


def test_spans_are_few(ledger: Ledger) -> None:
    store = OffsetSyncStore.load(ledger, "P->B", topics={"Payments"})
    assert store.runs[("Payments", 0)] == [translation.Run(0, 5, 10_000)]
    # The rewind keeps the boundaries forward needs: 7 spans of 9 runs.
    assert store.runs[("Payments", 1)] == [
        translation.Run(10, 500, 3), translation.Run(13, 503, 6), translation.Run(11, 509, 2),
        translation.Run(13, 511, 3), translation.Run(16, 514, 5), translation.Run(21, 519, 4),
        translation.Run(30, 523, 4)]
    assert store.runs[("Payments", 2)] == [translation.Run(15, 7, 7), translation.Run(22, 15, 2)]
    assert sum(len(v) for v in store.runs.values()) == 10  # of 1016 raw runs


def test_topics_and_partitions_restrict_the_load(ledger: Ledger) -> None:
    store = OffsetSyncStore.load(ledger, "P->B", partitions={("Payments", 1), ("Orders", 0)})
    assert set(store.runs) == {("Payments", 1), ("Orders", 0)}
    assert store.runs[("Orders", 0)] == [translation.Run(0, 0, 8)]
    store = OffsetSyncStore.load(ledger, "P->B", topics={"Orders"},
                                 partitions={("Payments", 1), ("Orders", 0)})
    assert set(store.runs) == {("Orders", 0)}
    assert store.forward("Payments", 1, 12).status == "untranslatable"
    assert OffsetSyncStore.load(ledger, "P->B", partitions=set()).runs == {}
    assert OffsetSyncStore.load(ledger, "P->B", topics=set()).runs == {}
    other = OffsetSyncStore.load(ledger, "B->P", partitions={("Payments", 0), ("Payments", 1)})
    assert other.runs == {("Payments", 0): [translation.Run(0, 0, 1)]}
    assert other.replica_topics == {"Payments": "B.Payments"}
