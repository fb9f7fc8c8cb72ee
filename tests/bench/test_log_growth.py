"""bench.log_growth at a tiny size: tombstones added to the log grow the replicator's checkpoint,
and the store translates the same with them as without."""

from __future__ import annotations

import pytest

from bench import log_growth

pytestmark = pytest.mark.unit


def test_tombstones_grow_the_checkpoint_and_change_no_answer(tmp_path, monkeypatch):
    monkeypatch.setattr(log_growth, "REPEATS", 1)
    monkeypatch.setattr(log_growth, "REFRESH_RUNS", 1000)  # a snapshot after 2 commits
    # raises if the answers differ
    result = log_growth.run(tmp_path, [0, 20_000], "alo", 3, log_files=(2_000,))
    none, some = result["points"]
    assert none["tombstones"] == 0 and some["tombstones"] == 20_000
    # replication_progress keeps a day: at most a day of replaced files (17,280 MERGEs)
    assert some["replication_progress_tombstones"] == 17_280
    # the checkpoint the replicator wrote lists the tombstones
    assert some["checkpoint_mb"] > none["checkpoint_mb"] + 0.5
    # Spark's interval for a small checkpoint; a large one every actions / 500 commits
    assert none["commits_between_checkpoints"] == 10
    assert some["commits_between_checkpoints"] == 20_000 // 500  # (+ a few dozen adds)
    assert some["replayed_commits"] == some["commits_between_checkpoints"] - 1
    assert all(p["append_with_checkpoint_s"] > 0 and p["load_store_s"] > 0
               for p in result["points"])
    assert result["year_tombstones"] == 17_280 * 400
    assert result["steady_tombstones"] == 17_280 * 7  # offset_syncs keeps a week
    spans = result["spans"]
    assert spans["snapshot_mb"] > 0 and spans["refreshes_per_day"] == round(17_280 * 800 / 50_000)
    assert spans["kept_mb_a_day"] * 400 / 1024 == pytest.approx(
        spans["kept_gb_at_audit_retention"], rel=0.05, abs=0.1)
    folder, = result["log_folders"]
    assert folder["log_files"] == 2_000
    # timed: the replicator's first commit (opens the table), its next (reuses it), the reads
    assert 0 < folder["next_append_s"] and 0 < folder["first_append_s"]
    assert folder["list_log_s"] > 0 and folder["load_store_s"] > 0
