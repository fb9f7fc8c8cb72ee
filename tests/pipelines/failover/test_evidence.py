"""An operation's evidence rows from typed checkpoints: pure row building, no Spark."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger.records import CheckpointRecord
from ledger.schemas import CHECKPOINTS_SCHEMA
from pipelines.failover.evidence import checkpoint_rows, sync_partition

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 1, 1)
FORWARD = CheckpointRecord("c1", "P->B", "forward", "G", "P", "Payments", 1, 14, "B",
                           "P.Payments", 14, "translated", None, False, 3, NOW)
REVERSE = CheckpointRecord("c2", "P->B", "reverse", "G", "B", "P.Payments", 0, 6, "P",
                           "Payments", 6, "translated", None, False, 3, NOW)


def test_the_runs_behind_a_checkpoint_are_keyed_by_the_original_topic():
    assert sync_partition(FORWARD) == ("P->B", "Payments", 1)
    assert sync_partition(REVERSE) == ("P->B", "Payments", 0)


def test_checkpoint_rows_only_for_groups_with_an_operation():
    other = FORWARD.replace(group_id="H")
    (row,) = checkpoint_rows([FORWARD, other], {"G": "op-1"}, 7)
    assert list(row)[:len(CHECKPOINTS_SCHEMA.fields)] == CHECKPOINTS_SCHEMA.fieldNames()
    assert (row["checkpoint_id"], row["operation_id"], row["checkpoints_version"]) == (
        "c1", "op-1", 7)


def test_the_evidence_holds_the_runs_a_seek_read_before_the_window():
    """A resume point below its partition's window was translated over the runs a seek put
    before the window: the evidence records them, so the audit re-translates alike."""
    from ledger.config import config_from_mapping
    from ledger.store import OffsetSyncStore
    from ledger.translation import Run, forward
    from pipelines.failover.evidence import run_rows

    history = [Run(10 * i, 20 * i, 10) for i in range(8)]
    written = [NOW + dt.timedelta(minutes=i) for i in range(8)]
    key = ("Payments", 1)
    store = OffsetSyncStore("P->B", 3, {key: history[5:]}, {"Payments": "P.Payments"},
                            dropped={key: 5}, seek={key: (0, 0)}, covered_until=written[7])
    store.recent = lambda keys, after, until: [
        {"topic": "Payments", "partition": 1, "upstream_offset": r.upstream_offset,
         "downstream_offset": r.downstream_offset, "length": r.length,
         "written_at": written[i], "batch_id": i}
        for i, r in enumerate(history) if after < written[i] <= until]
    assert store.forward("Payments", 1, 14).offset == forward(history, 14) == 24
    config = config_from_mapping({
        "clusters": {"P": {"bootstrap.servers": "h:1"}, "B": {"bootstrap.servers": "h:2"}},
        "flows": {"P->B": True}})
    rows = run_rows([FORWARD], {"G": "op-1"}, {"P->B": store}, config, NOW)
    evidence = [Run(r["upstream_offset"], r["downstream_offset"], r["length"])
                for r in sorted(rows, key=lambda r: r["batch_id"])]
    assert evidence == history  # the sought runs 0 to 4, then the window
    assert forward(evidence, 14) == 24
    assert not any(k.startswith("seek_") for r in rows for k in r)
