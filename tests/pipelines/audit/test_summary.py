"""Operation summaries from typed operations and checkpoints: pure, no Spark or dbt."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger.records import CheckpointRecord, Operation
from pipelines.audit import summary as sm
from pipelines.audit.summary import Untouched, summarize

pytestmark = pytest.mark.unit

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def operation(op_id: str, kind: str, start: dt.datetime) -> Operation:
    return Operation(op_id, kind, "G", "P", "B", "completed", ("P.Payments", "Payments"), 1, 2,
                     3, 4, False, start, start + dt.timedelta(seconds=5), 5.0, None)


def checkpoint(partition: int, target: int | None, at: dt.datetime) -> CheckpointRecord:
    return CheckpointRecord(
        "c1", "P->B", "forward", "G", "P", "Payments", partition, 10, "B", "P.Payments", target,
        "translated" if target is not None else "untranslatable",
        None if target is not None else "offset before the first run", False, 1, at)


def test_operations_in_time_order_with_untouched_partitions_and_their_reason():
    failback = operation("op-2", "failback", T0 + dt.timedelta(hours=1))
    failover = operation("op-1", "failover", T0)
    resume = {"operation_id": "op-1", "topic": "P.Payments", "partition_id": 0,
              "source_offset": 10, "matches_retranslation": True}
    at = T0 + dt.timedelta(seconds=1)
    checkpoints = [checkpoint(0, 10, at), checkpoint(1, 12, at), checkpoint(2, None, at),
                   checkpoint(3, 9, T0 - dt.timedelta(days=1))]  # before: not this pass's
    first, second = summarize([failback, failover], {"resume_audit": [resume]}, checkpoints)
    assert (first.operation_id, second.operation_id) == ("op-1", "op-2")
    assert first.subscribe_topics == ["P.Payments", "Payments"]
    assert (first.translated, first.matched, first.all_match) == (1, 1, True)
    assert first.untouched == [
        Untouched("P.Payments", 1, "already at or past 12 on B (offsets are never rewound)"),
        Untouched("P.Payments", 2, "cannot be translated: offset before the first run")]
    assert second.untouched == []


def test_times_are_shown_in_utc_outside_utc():
    """A Spark row's naive time is local: five hours behind UTC, 07:00 local is 12:00 UTC."""
    from tests.local_zone import local_zone

    with local_zone():
        local = dt.datetime(2026, 11, 27, 7, 0, 0)
        assert sm.human_time(local) == "2026-11-27 12:00:00"
        assert sm.human_time(dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)) == (
            "2026-11-27 12:00:00")
