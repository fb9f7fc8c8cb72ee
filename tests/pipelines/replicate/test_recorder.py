"""Recording batches: delta-rs where it can, Spark otherwise, the same commits either way."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger import commits
from ledger.records import ProgressRecord
from ledger.schemas import OFFSET_SYNCS, REPLICATION_PROGRESS
from pipelines.replicate.recorder import LedgerRecorder, ReplicationError

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)

pytestmark = pytest.mark.spark


def _batch(batch: int) -> tuple[list[tuple], list[ProgressRecord]]:
    at = T0 + dt.timedelta(seconds=batch)
    runs = [("P->B", "P", "B", "orders", "P.orders", 0, batch * 10, batch * 10, 10, "r1",
             batch, at)]
    progress = [ProgressRecord("P->B", "orders", "P.orders", 0, batch * 10 + 9,
                               batch * 10 + 10, batch * 10 + 10, 0, at, 0, batch, at)]
    return runs, progress


@pytest.fixture
def ledger(replication_ledger):
    return replication_ledger


def _state(ledger):
    runs = sorted((r["batch_id"], r["upstream_offset"]) for r in ledger.read(OFFSET_SYNCS)
                  .collect())
    progress = [(r["batch_id"], r["next_upstream_offset"])
                for r in ledger.read(REPLICATION_PROGRESS).collect()]
    return runs, progress


def test_a_commit_delta_rs_cannot_make_goes_to_spark_from_then_on(ledger, spark, monkeypatch):
    recorder = LedgerRecorder(ledger.location, "P->B", lambda: spark)
    recorder.tables_verified(True)
    assert recorder.direct
    recorder.record(*_batch(0), batch=0)
    recorder.wait_for_progress()
    monkeypatch.setattr(commits, "append_with_txn", lambda *a, **k: commits.UNAVAILABLE)

    recorder.record(*_batch(1), batch=1)
    recorder.tables_verified(True)  # a later refresh does not bring delta-rs back
    assert not recorder.direct
    recorder.record(*_batch(2), batch=2)
    recorder.close()

    assert _state(ledger) == ([(0, 0), (1, 10), (2, 20)], [(2, 30)])


def test_a_batch_already_recorded_is_not_recorded_again(ledger, spark):
    first = LedgerRecorder(ledger.location, "P->B", lambda: spark)
    first.tables_verified(True)
    first.record(*_batch(0), batch=0)
    first.close()
    # Another job of the flow (or a restart racing it) records the same batch number.
    for writes in ("auto", "spark"):
        again = LedgerRecorder(ledger.location, "P->B", lambda: spark, ledger_writes=writes)
        again.tables_verified(True)
        again.record(*_batch(0), batch=0)
        again.close()

    assert _state(ledger)[0] == [(0, 0)]


def test_a_failed_append_names_the_flow_and_batch(ledger, spark, monkeypatch):
    def broken(*args, **kwargs):
        raise commits.CommitConflict("another writer recorded it at the same time")

    monkeypatch.setattr(commits, "append_with_txn", broken)
    recorder = LedgerRecorder(ledger.location, "P->B", lambda: spark)
    recorder.tables_verified(True)

    with pytest.raises(ReplicationError, match=r"flow P->B: recording batch 4 failed: another"):
        recorder.record(*_batch(4), batch=4)
    recorder.close()
    assert _state(ledger) == ([], [])
