"""A snapshot refresh that commits while a store load reads (F22: a checkpoint pass and the
streaming job's span upkeep refresh the same flow in two processes).

A load that took the snapshot's ``covered_until`` from one snapshot and its spans from the next
read the runs in between twice: a duplicated run starts a false epoch, every offset below it
became "cannot translate", and a refresh built on that load persisted the truncated epoch. Every
read of ``offset_sync_spans`` in a load is of one version; these tests commit a refresh between
the load's first read and the rest and require the raw runs' answers.
"""

from __future__ import annotations

import pytest

from ledger import span_snapshots
from ledger.engine import LedgerEngine
from ledger.schemas import OFFSET_SYNC_SPANS
from ledger.span_refresh import refresh
from ledger.store import OffsetSyncStore
from ledger.translation import Run, current_epoch
from tests.ledger.test_span_sql import FLOW, write
from tests.ledger.test_span_windows import WINDOW, assert_translates_like_raw, exactly_once

FLOWS = {FLOW: ("P", "B")}


def history(location: str) -> dict[int, list]:
    """Two partitions, an exactly-once one (windowed) and one of few spans: a refresh, then a
    tail the next refresh covers."""
    engine = LedgerEngine(location)
    engine.init()
    covered = {0: exactly_once(0, 0, 30), 1: exactly_once(500, 300, 3)}
    write(location, covered, 0)
    refresh(engine, FLOWS, window=WINDOW)
    tails = {p: exactly_once(runs[-1][0] + runs[-1][2], runs[-1][1] + runs[-1][2] + 1, 8)
             for p, runs in covered.items()}
    write(location, tails, 30)
    return {p: covered[p] + tails[p] for p in covered}


def refresh_after_snapshot_reads(engine: LedgerEngine, location: str, reads: int) -> list[int]:
    """Make ``engine`` commit a refresh (another process's) right after its ``reads``-th query
    of ``offset_sync_spans``; returns the list the refresh's snapshot version is appended to."""
    done: list[int] = []
    seen: list[str] = []
    query = engine.query

    def racing(sql, versions=None, **tables):
        rows = query(sql, versions, **tables)
        if OFFSET_SYNC_SPANS in tables.values():
            seen.append(sql)
        if len(seen) == reads and not done:
            other = LedgerEngine(location)
            refresh(other, FLOWS, window=WINDOW)
            done.append(other.version(OFFSET_SYNC_SPANS))
        return rows

    engine.query = racing
    return done


@pytest.mark.unit
@pytest.mark.parametrize("reads", [1, 2, 3])
def test_a_delta_rs_load_reads_one_snapshot_while_another_process_refreshes(
        tmp_path, reads: int) -> None:
    """The refresh commits after the load read the snapshot's head (1), its bounds (2), or
    counted the runs (3): the load answers as its first read's snapshot says."""
    location = str(tmp_path / "ledger")
    whole = history(location)
    engine = LedgerEngine(location)
    raced = refresh_after_snapshot_reads(engine, location, reads)
    store = engine.load_store(FLOW)
    assert raced, "the refresh did not run between the load's reads"
    for p, runs in whole.items():
        assert_translates_like_raw(store, p, runs)
    # the oldest copy of the partition still translates (F22: it was "before the first
    # recorded copy of the current epoch")
    assert store.reverse("T", 0, 0).offset == 0


@pytest.mark.unit
def test_a_refresh_racing_another_persists_the_whole_epoch(tmp_path) -> None:
    """Two refreshes interleaved as the two processes' were: the snapshot they leave holds the
    epoch's spans numbered from its true position, and a later load answers like the runs."""
    location = str(tmp_path / "ledger")
    whole = history(location)
    engine = LedgerEngine(location)
    refresh_after_snapshot_reads(engine, location, 4)
    refresh(engine, FLOWS, window=WINDOW)
    rows = engine.query("SELECT * FROM {sp}", sp=OFFSET_SYNC_SPANS)
    firsts = {r["partition"]: r["batch_id"] for r in sorted(rows, key=lambda r: -r["batch_id"])}
    spans = {p: len(current_epoch([Run(*r) for r in runs])) for p, runs in whole.items()}
    assert firsts[0] > 0 and firsts[0] == spans[0] - sum(r["partition"] == 0 for r in rows)
    again = LedgerEngine(location).load_store(FLOW)
    for p, runs in whole.items():
        assert_translates_like_raw(again, p, runs)


@pytest.mark.spark
def test_a_spark_load_reads_one_snapshot_while_another_process_refreshes(
        spark, tmp_path, monkeypatch) -> None:
    """A long tail (extended in Spark): the refresh commits after the load found no rewind and
    before Spark computes the spans, which read the snapshot's frame again."""
    from ledger.tables import Ledger

    location = str(tmp_path / "ledger")
    whole = history(location)
    raced: list[int] = []
    windows = span_snapshots.SpanSnapshot.windows

    def racing(snapshot):
        found = windows(snapshot)
        if not raced:
            other = LedgerEngine(location)
            refresh(other, FLOWS, window=WINDOW)
            raced.append(other.version(OFFSET_SYNC_SPANS))
        return found

    monkeypatch.setattr(span_snapshots, "TAIL_ON_DRIVER", 1)
    monkeypatch.setattr(span_snapshots.SpanSnapshot, "windows", racing)
    store = OffsetSyncStore.load(Ledger(spark, location), FLOW)
    assert raced
    for p, runs in whole.items():
        assert_translates_like_raw(store, p, runs)
    assert store.reverse("T", 0, 0).offset == 0


@pytest.mark.unit
def test_a_rebuild_repairs_a_snapshot_an_earlier_race_truncated(tmp_path) -> None:
    """A ledger written before the fix may keep F22's damage: a window numbered as a whole
    epoch (``batch_id`` from 0), which every incremental refresh carries on. ``ledger
    maintain --rebuild-spans`` (``refresh(rebuild=True)``) computes the spans from the raw
    runs again."""
    location = str(tmp_path / "ledger")
    whole = history(location)
    engine = LedgerEngine(location)
    refresh(engine, FLOWS, window=WINDOW)
    rows = engine.query("SELECT * FROM {sp}", sp=OFFSET_SYNC_SPANS)
    window = sorted((r for r in rows if r["partition"] == 0), key=lambda r: r["batch_id"])
    assert window[0]["batch_id"] > 0
    damaged = [r for r in rows if r["partition"] != 0] + [
        {**r, "batch_id": i} for i, r in enumerate(window)]
    engine.replace(OFFSET_SYNC_SPANS, damaged, "flow", FLOW)
    # fresh engines, as separate commands (an engine keeps the stores it loaded)
    refresh(LedgerEngine(location), FLOWS, window=WINDOW)
    assert LedgerEngine(location).load_store(FLOW).forward("T", 0, 0).offset is None

    (report,) = refresh(LedgerEngine(location), FLOWS, window=WINDOW, rebuild=True)
    assert report.previous_version is None  # "from the raw runs"
    store = LedgerEngine(location).load_store(FLOW)
    for p, runs in whole.items():
        assert_translates_like_raw(store, p, runs)
