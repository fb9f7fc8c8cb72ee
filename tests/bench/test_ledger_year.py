"""bench.ledger_year at a tiny size: the simulated commit pattern, the closed-form snapshot
against the product's own span computation, and what ``ledger maintain`` does to it."""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools

import pytest

from bench import ledger_scale
from bench import ledger_year as ly
from bench import year_history as yh
from tests.tiny_spark import compiled_queries


@pytest.mark.unit
def test_closed_forms_and_rates() -> None:
    for block in range(yh.BLOCKS):
        idle = [i for i in range(60) if i % yh.BLOCKS == yh.idle_residue(block)]
        for i in range(60):
            assert yh.active_before(i, block) == i - len([k for k in idle if k < i])
    # the figures: about 575,000 rows an hour at-least-once, 2.9 million exactly-once
    assert yh.MODES["alo"].rows_per_hour == pytest.approx(575_000, rel=0.01)
    assert yh.MODES["eos"].rows_per_hour == pytest.approx(2_900_000, rel=0.01)
    # a commit's runs continue the previous commit's, on both sides (alo) or after a marker
    t0 = 1_700_000_000
    for pattern in yh.MODES.values():
        rows = [r for i in range(7) for r in yh.commit_rows(pattern, t0, i)]
        assert sum(1 for r in rows if r["batch_id"] == 3) == pattern.rows_per_commit
        mine = sorted((r for r in rows if (r["topic"], r["partition"]) == ("T000", 0)),
                      key=lambda r: r["downstream_offset"])
        for a, b in itertools.pairwise(mine):
            assert b["upstream_offset"] == a["upstream_offset"] + a["length"]
            assert b["downstream_offset"] == (a["downstream_offset"] + a["length"]
                                              + pattern.marker)


def _store_runs(store) -> dict:
    return {k: [(r.upstream_offset, r.downstream_offset, r.length) for r in v]
            for k, v in store.runs.items()}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["alo", "eos"])
def test_tiny_ledger(spark, tmp_path, monkeypatch, mode: str) -> None:
    # Exactly-once writes five runs per partition and commit, 104,000 rows here: generated code
    # pays for its compiling (the test alone: 62.9 s -> 45.5 s, 21 CPU-s fewer). The
    # at-least-once case's 20,800 rows run faster interpreted, as the session runs everything.
    with compiled_queries(spark) if mode == "eos" else contextlib.nullcontext():
        _check_tiny_ledger(spark, tmp_path, monkeypatch, mode)


def _check_tiny_ledger(spark, tmp_path, monkeypatch, mode: str) -> None:
    from ledger import schemas
    from ledger.span_refresh import span_rows
    from ledger.store import OffsetSyncStore
    from ledger.tables import Ledger

    pattern, commits, tail = yh.MODES[mode], 26, 3
    location = tmp_path / "ledger"
    t0 = int(dt.datetime.now(dt.UTC).timestamp()) - yh.COMMIT_S * commits - 60
    built = yh.build(spark, location, pattern, commits, t0, tail)
    assert (built["history_commits"], built["tail_commits"]) == (commits - tail, tail)
    ledger = Ledger(spark, str(location))

    # every commit holds the pattern's rows: rows per simulated hour are the pattern's
    per_batch = {r["batch_id"]: r["count"] for r in
                 ledger.read(schemas.OFFSET_SYNCS).groupBy("batch_id").count().collect()}
    assert per_batch == dict.fromkeys(range(commits), pattern.rows_per_commit)
    before = ly.table_stats(spark, location)["tables"]
    assert before["offset_syncs"]["files"] > tail  # one file per tail commit, and the history

    # the closed-form snapshot is what the product computes from the raw history
    history_version = 1  # init is version 0, the history append version 1
    with_snapshot = OffsetSyncStore.load(ledger, yh.FLOW)
    snapshot = {(r["topic"], r["partition"], r["batch_id"]):
                (r["upstream_offset"], r["downstream_offset"], r["length"])
                for r in ledger.read(schemas.OFFSET_SYNC_SPANS).collect()}
    spark.sql(f"DELETE FROM {ledger.identifier(schemas.OFFSET_SYNC_SPANS)}")
    raw_history = OffsetSyncStore.load(ledger, yh.FLOW, version=history_version)
    expected = {(r["topic"], r["partition"], r["batch_id"]):
                (r["upstream_offset"], r["downstream_offset"], r["length"])
                for r in span_rows(raw_history, "P", "B", dt.datetime.now())}
    assert snapshot == expected
    raw = OffsetSyncStore.load(ledger, yh.FLOW)
    assert _store_runs(with_snapshot) == _store_runs(raw)
    if not pattern.marker:  # contiguous runs: one span per partition over the whole history
        assert all(len(v) == 1 for v in raw.runs.values()) and len(raw.runs) == yh.PARTITIONS

    # maintain compacts the files, keeps every row, and the answers stay the same
    done = ly.maintain(spark, location, (schemas.OFFSET_SYNCS, schemas.OFFSET_SYNC_SPANS))
    after = ly.table_stats(spark, location)["tables"]
    assert after["offset_syncs"]["files"] < before["offset_syncs"]["files"]
    assert after["offset_syncs"]["rows"] == before["offset_syncs"]["rows"]
    assert done["s"] > 0 and "offset_sync_spans" in done["tables_s"]
    assert _store_runs(OffsetSyncStore.load(ledger, yh.FLOW)) == _store_runs(raw)

    # the verbs run on it and check their translations against the closed forms
    monkeypatch.setattr(ledger_scale, "REPEATS", 1)  # one call each, checked, no warm-up
    timed = ly.time_verbs(spark, location, pattern, commits, built["operations"], "test",
                          warm_up=False)
    assert all("s" in v for v in timed.values()), timed
