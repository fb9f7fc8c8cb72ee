"""bench.tail_growth at a tiny size: the replicator's upkeep refreshes as its runs pass the
bound, and a load of its ledger holds the same spans as a load of the tail alone."""

from __future__ import annotations

import pytest

from bench import tail_growth

pytestmark = pytest.mark.unit


def test_the_upkeep_refreshes_at_the_bound_and_loads_the_same_spans(tmp_path, monkeypatch):
    monkeypatch.setattr(tail_growth, "REPEATS", 1)
    # 800 runs a commit: the bound of 1,000 is passed at commits 2 and 4 (the count starts
    # again after each check); at 4 the tail's 1,600 runs outgrow the snapshot's 1,000 spans.
    results = tail_growth.run([2, 3, 4], runs=1000, work=tmp_path)  # raises if loads differ
    assert [(r["commits"], r["runs"], r["refreshes"]) for r in results] == [
        (2, 1600, 1), (3, 2400, 1), (4, 3200, 2)]
    assert all(isinstance(r["plain_s"], float) and r["upkeep_s"] > 0 for r in results)


def test_exactly_once_windows_translate_like_the_whole_epoch(tmp_path, monkeypatch):
    """The exactly-once pattern (nothing coalesces): the upkeep's snapshots keep windows, and
    the windowed loads translate like the plain ones, at the heads and below the windows."""
    monkeypatch.setattr(tail_growth, "REPEATS", 1)
    results = tail_growth.run([1, 3], runs=1000, work=tmp_path, mode="eos", window=2)
    assert [(r["commits"], r["runs"]) for r in results] == [(1, 4000), (3, 12000)]
    assert results[-1]["refreshes"] >= 1 and results[-1]["windowed_partitions"] > 0
    assert results[-1]["held_spans"] < 12000  # windows, not the whole epoch
    # exactly-once runs never rewind: every window seeks, down to the epoch's first run
    assert results[-1]["seek_floored_partitions"] == results[-1]["windowed_partitions"]
    assert results[-1]["below_start_read"] == "seek"
    assert 0 < results[-1]["below_start_runs_read"] <= 3 * 5


def test_refresh_cost_writes_bounded_windows_as_the_history_grows(tmp_path):
    """bench.refresh_cost: exactly-once refreshes keep at most twice the window a partition,
    however many commits the flow has, and each refresh's phases are timed."""
    from bench import refresh_cost

    results = refresh_cost.run(6, every=2, work=tmp_path, mode="eos", window=2)
    assert [(r["commits"], r["runs"]) for r in results] == [(2, 8000), (4, 16000),
                                                            (6, 24000)]
    for r in results:
        assert r["spans"] <= 2 * 2 * r["partitions"] and r["partitions"] == 1000
        assert 0 < r["load_s"] + r["commit_s"] <= r["refresh_s"]
    assert results[-1]["spans"] < results[-1]["runs"]  # windows, not the whole epoch
