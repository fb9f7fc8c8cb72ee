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
