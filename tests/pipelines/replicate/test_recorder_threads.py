"""The recorder's two threads: appends on the caller's, MERGEs on the background (no JVM).

The ledger is a stand-in that records the calls: what is under test is the order of commits
and the engine switch shared by the threads, not Delta (``test_recorder.py`` covers that).
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import ClassVar

import pytest

from ledger import commits, tables
from ledger.records import ProgressRecord
from ledger.schemas import OFFSET_SYNCS, REPLICATION_PROGRESS
from pipelines.replicate.recorder import LedgerRecorder

pytestmark = pytest.mark.unit

T0 = dt.datetime(2026, 3, 1, 12, 0, 0)
WAIT = 30.0  # seconds: a deadlock fails the test instead of hanging the suite


def _batch(batch: int) -> tuple[list[tuple], list[ProgressRecord]]:
    runs = [("P->B", "P", "B", "orders", "P.orders", 0, batch * 10, batch * 10, 10, "r1",
             batch, T0)]
    progress = [ProgressRecord("P->B", "orders", "P.orders", 0, batch * 10 + 9,
                               batch * 10 + 10, batch * 10 + 10, 0, T0, 0, batch, T0)]
    return runs, progress


class FakeSpark:
    def createDataFrame(self, rows, schema):
        return list(rows)


class FakeLedger:
    """Spark's ledger, as the recorder uses it; every call lands in ``log``."""

    opened: ClassVar[list[FakeLedger]] = []
    log: ClassVar[list[tuple]] = []

    def __init__(self, spark, location):
        self.spark = spark
        FakeLedger.opened.append(self)

    def init(self):
        FakeLedger.log.append(("init",))

    def read(self, name):
        return type("Frame", (), {"schema": None})()

    def append(self, name, rows, *, txn_app_id, txn_version):
        FakeLedger.log.append(("spark append", name, txn_version))

    def merge(self, name, rows):
        FakeLedger.log.append(("spark merge", name, rows[0]["batch_id"]))


@pytest.fixture
def fake_ledger(monkeypatch):
    FakeLedger.opened, FakeLedger.log = [], []
    monkeypatch.setattr(tables, "Ledger", FakeLedger)
    return FakeLedger


def assert_merge_order(log: list[tuple]) -> None:
    """MERGEs one at a time in batch order, each after its own batch's append (when the
    append went through Spark too); batch N+1's append may come before or after MERGE N."""
    merges = [entry[2] for entry in log if entry[0] == "spark merge"]
    assert merges == sorted(merges)
    for entry in log:
        if entry[0] == "spark append" and entry[2] in merges:
            assert log.index(entry) < log.index(("spark merge", REPLICATION_PROGRESS, entry[2]))


def run_with_timeout(fn) -> None:
    """Run ``fn`` on a thread; fail (rather than hang) if it does not finish."""
    errors = []

    def target():
        try:
            fn()
        except BaseException as exc:  # re-raised on the test's thread
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive(), "the recorder deadlocked"
    if errors:
        raise errors[0]


def test_a_merge_declining_delta_rs_while_the_next_batch_appends(fake_ledger, monkeypatch):
    """MERGE 0 (background) falls back to Spark while append 1 (caller) is in delta-rs."""
    merging, appending = threading.Event(), threading.Event()
    order: list[tuple] = []

    def append_with_txn(location, table, rows, *, app_id, version, opened=None):
        order.append(("delta-rs append", table, version))
        if version == 1:
            appending.set()
            assert merging.wait(WAIT)  # MERGE 0 is running beside this append
        return commits.COMMITTED

    def merge_on_keys(location, table, rows, keys, opened=None):
        merging.set()
        assert appending.wait(WAIT)
        order.append(("delta-rs merge refused", table, rows[0]["batch_id"]))
        return commits.UNAVAILABLE

    monkeypatch.setattr(commits, "append_with_txn", append_with_txn)
    monkeypatch.setattr(commits, "merge_on_keys", merge_on_keys)
    recorder = LedgerRecorder("/ledger", "P->B", FakeSpark)
    recorder.tables_verified(True)

    def batches():
        recorder.record(*_batch(0), batch=0)
        recorder.record(*_batch(1), batch=1)  # its append overlaps MERGE 0
        assert not recorder.direct
        recorder.tables_verified(True)  # a later refresh does not bring delta-rs back
        assert not recorder.direct
        recorder.record(*_batch(2), batch=2)
        recorder.close()

    run_with_timeout(batches)
    assert order == [("delta-rs append", OFFSET_SYNCS, 0), ("delta-rs append", OFFSET_SYNCS, 1),
                     ("delta-rs merge refused", REPLICATION_PROGRESS, 0)]
    assert sorted(fake_ledger.log) == [("spark append", OFFSET_SYNCS, 2),
                                       ("spark merge", REPLICATION_PROGRESS, 0),
                                       ("spark merge", REPLICATION_PROGRESS, 1),
                                       ("spark merge", REPLICATION_PROGRESS, 2)]
    assert_merge_order(fake_ledger.log)
    assert len(fake_ledger.opened) == 1


def test_an_opening_queued_behind_a_merge_that_needs_it_does_not_deadlock(fake_ledger,
                                                                          monkeypatch):
    """The caller queues the Spark ledger's opening while MERGE 0 runs; MERGE 0 then falls
    back to Spark and needs that ledger, whose opening waits behind MERGE 0 itself."""
    queued = threading.Event()

    def merge_on_keys(location, table, rows, keys, opened=None):
        assert queued.wait(WAIT)
        return commits.UNAVAILABLE

    monkeypatch.setattr(commits, "append_with_txn", lambda *a, **k: commits.COMMITTED)
    monkeypatch.setattr(commits, "merge_on_keys", merge_on_keys)
    recorder = LedgerRecorder("/ledger", "P->B", FakeSpark)
    recorder.tables_verified(True)

    def batches():
        recorder.record(*_batch(0), batch=0)
        recorder.tables_verified(False)  # a refresh could not read the tables directly
        recorder.open_while_copying()    # queued behind MERGE 0 on the background thread
        queued.set()
        recorder.record(*_batch(1), batch=1)
        recorder.close()

    run_with_timeout(batches)
    assert len(fake_ledger.opened) == 1
    assert fake_ledger.log[0] == ("init",)  # the tables were not verified: checked once
    assert sorted(fake_ledger.log[1:]) == [("spark append", OFFSET_SYNCS, 1),
                                           ("spark merge", REPLICATION_PROGRESS, 0),
                                           ("spark merge", REPLICATION_PROGRESS, 1)]
    assert_merge_order(fake_ledger.log)
