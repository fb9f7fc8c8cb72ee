"""The replicator refreshing its flow's span snapshot as its runs accumulate (delta-rs only)."""

from __future__ import annotations

import logging

import pytest

from ledger import translation
from ledger.config import config_from_mapping
from ledger.engine import LedgerEngine
from ledger.schemas import OFFSET_SYNC_SPANS, OFFSET_SYNCS
from ledger.spans import coalesce
from ledger.writer import PartitionSummary
from pipelines.replicate import span_upkeep
from pipelines.replicate.replicator import FlowReplicator
from pipelines.replicate.span_upkeep import SpanUpkeep

pytestmark = pytest.mark.spark

PARTITIONS = 4


def _replicator(location: str, runs: int) -> FlowReplicator:
    config = config_from_mapping({
        "clusters": {"P": {"bootstrap.servers": "127.0.0.1:1"},
                     "B": {"bootstrap.servers": "127.0.0.1:2"}},
        "flows": {"P->B": True},
        "ledger": {"location": location},
        "ledger.spans.refresh.runs": runs,
    })
    replicator = FlowReplicator(None, config, "P->B")
    replicator.recorder.tables_verified(True)  # the two tables exist: delta-rs commits
    return replicator


def _record(replicator: FlowReplicator, batches: int) -> None:
    """``batches`` batches of one contiguous run on each partition (10 records each)."""
    for _ in range(batches):
        n = replicator.last_batch + 1
        replicator.record_batch(
            [PartitionSummary("orders", "P.orders", p,
                              (translation.Run(n * 10, 1000 + n * 10, 10),), 10, None)
             for p in range(PARTITIONS)], {})
        replicator.recorder.wait_for_progress()


def _snapshot(location: str) -> list[dict]:
    engine = LedgerEngine(location)
    if not engine.exists(OFFSET_SYNC_SPANS):
        return []
    return engine.query("SELECT * FROM {sp} ORDER BY \"partition\"", sp=OFFSET_SYNC_SPANS)


def test_the_replicator_refreshes_its_snapshot_once_its_runs_reach_the_bound(
        replication_ledger) -> None:
    location = replication_ledger.location
    replicator = _replicator(location, runs=20)
    _record(replicator, 4)  # 16 runs: below the bound, nothing read or written
    replicator.spans.wait()
    assert replicator.spans.counted == 16 and _snapshot(location) == []

    _record(replicator, 1)  # 20 runs: the tail outgrew the bound (and the absent snapshot)
    replicator.spans.wait()
    version = LedgerEngine(location).version(OFFSET_SYNCS)
    spans = _snapshot(location)
    # Its table created by delta-rs; one span per partition: 5 contiguous runs each.
    assert [(r["partition"], r["upstream_offset"], r["downstream_offset"], r["length"])
            for r in spans] == [(p, 0, 1000, 50) for p in range(PARTITIONS)]
    assert {(r["flow"], r["source_cluster"], r["target_cluster"], r["offset_syncs_version"])
            for r in spans} == {("P->B", "P", "B", version)}
    assert replicator.spans.counted == 0
    assert [r.spans for r in replicator.spans.reports] == [PARTITIONS]

    _record(replicator, 3)
    replicator.close()  # waits for nothing: 12 runs since the refresh
    assert _snapshot(location) == spans
    # A load from the snapshot and the tail after it gives the spans of every raw run.
    store = LedgerEngine(location).load_store("P->B")
    raw = [translation.Run(n * 10, 1000 + n * 10, 10) for n in range(8)]
    assert {k: v for k, v in store.runs.items()} == {
        ("orders", p): coalesce(raw) for p in range(PARTITIONS)}


def test_a_tail_that_does_not_outgrow_the_snapshot_is_left(replication_ledger) -> None:
    """Runs that never coalesce (an exactly-once flow's, split by markers): a refresh would
    rewrite as many rows as it saves, so the snapshot stays until the tail outgrows it."""
    location = replication_ledger.location
    replicator = _replicator(location, runs=4)
    _record(replicator, 1)
    replicator.spans.wait()
    first = _snapshot(location)
    assert len(first) == PARTITIONS
    for n in range(1, 3):  # every run a gap away from the last: nothing coalesces
        replicator.record_batch(
            [PartitionSummary("orders", "P.orders", p,
                              (translation.Run(n * 100, 5000 + n * 100, 1),), 1, None)
             for p in range(PARTITIONS)], {})
        replicator.spans.wait()
    replicator.close()
    # The second batch's 4 runs reach the first snapshot's 4 spans: refreshed (8 spans, none
    # coalesced); the third's 4 do not reach those 8: left.
    assert [r.spans for r in replicator.spans.reports] == [PARTITIONS, 2 * PARTITIONS]


def test_without_delta_rs_commits_nothing_is_read(replication_ledger, monkeypatch) -> None:
    replicator = _replicator(replication_ledger.location, runs=1)
    replicator.recorder.tables_verified(False)  # Spark commits (a catalog ledger, ...)
    monkeypatch.setattr(span_upkeep, "refresh", pytest.fail)
    replicator.spans.appended(10, replicator.recorder.direct)
    assert replicator.spans._thread is None
    replicator.close()


def test_a_failed_refresh_is_a_warning_naming_the_flow(replication_ledger, monkeypatch,
                                                       caplog) -> None:
    def conflict(*args, **kwargs):
        raise RuntimeError("a concurrent transaction wrote offset_sync_spans")

    monkeypatch.setattr(span_upkeep, "refresh", conflict)
    upkeep = SpanUpkeep(replication_ledger.location, "P->B", ("P", "B"), runs=1)
    monkeypatch.setattr(span_upkeep, "tail_outgrew", lambda *a: True)
    with caplog.at_level(logging.WARNING, logger=span_upkeep.__name__):
        upkeep.appended(1, direct=True)
        upkeep.wait()
        upkeep.appended(1, direct=True)  # tried again at the next bound
        upkeep.wait()
        upkeep.close()
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["flow P->B: span snapshot refresh skipped (reads stay exact, only "
                        "slower): a concurrent transaction wrote offset_sync_spans"] * 2
