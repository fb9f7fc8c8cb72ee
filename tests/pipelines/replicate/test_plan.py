"""pipelines.replicate.plan: resume offsets from the ledger's runs, bounded ranges."""

from __future__ import annotations

import os

import pytest

from pipelines.replicate.copy_task import CopyRange
from pipelines.replicate.plan import (
    RecordedTail,
    group_for_tasks,
    plan_batch,
    resume_offsets,
    sources_behind,
    task_count,
    task_slots,
)

pytestmark = pytest.mark.unit


def test_resume_where_the_runs_end_or_at_log_start():
    parts = [("a", 0), ("a", 1), ("a", 2), ("a", 3)]
    recorded = {("a", 0): RecordedTail(100, 500), ("a", 1): RecordedTail(5, 5),
                ("a", 3): RecordedTail(40, 40)}
    replica_ends = {("a", 0): 503, ("a", 1): 0, ("a", 3): 40}  # a,1 recreated empty
    starts = {("a", 0): 0, ("a", 1): 2, ("a", 2): 7, ("a", 3): 50}  # a,3: retention
    positions, new_epoch = resume_offsets(parts, recorded, replica_ends, starts)
    assert positions == {("a", 0): 100, ("a", 1): 2, ("a", 2): 7, ("a", 3): 50}
    assert new_epoch == [("a", 1)]


def test_a_source_that_ends_below_the_copy_was_recreated_or_truncated():
    positions = {("a", 0): 100, ("a", 1): 20, ("b", 0): 0, ("c", 0): 9}
    ends = {("a", 0): 100, ("a", 1): 3, ("b", 0): 0}  # c,0: no end known, not judged
    assert sources_behind(positions, ends) == [("a", 1)]
    assert sources_behind({("a", 0): 5}, {("a", 0): 6}) == []


def test_batch_bounded_per_partition_and_by_target():
    positions = {("a", 0): 0, ("a", 1): 50, ("b", 0): 10}
    targets = {("a", 0): 100, ("a", 1): 50, ("b", 0): 15}
    ranges = plan_batch(positions, targets, {"a": "P.a", "b": "P.b"}, 40)
    assert ranges == [CopyRange("a", "P.a", 0, 0, 20), CopyRange("b", "P.b", 0, 10, 15)]
    assert plan_batch(positions, {("a", 1): 50}, {"a": "P.a"}, None) == []


def test_groups_balance_and_keep_every_range_once():
    ranges = [CopyRange("t", "P.t", p, 0, n) for p, n in enumerate([100, 10, 60, 50, 5])]
    groups = group_for_tasks(ranges, 2)
    assert sorted((r for g in groups for r in g), key=lambda r: r.partition) == ranges
    assert sorted(sum(r.end - r.start for r in g) for g in groups) == [110, 115]
    assert len(group_for_tasks(ranges[:1], 4)) == 1


@pytest.mark.parametrize(("partitions", "slots", "tasks_max", "streaming", "tasks"), [
    (6, 2, None, True, 1),       # few partitions stream in one task (its costs are per task)
    (1000, 2, None, True, 2),    # one per STREAM_PARTITIONS_PER_TASK, at most the slots
    (1001, 8, None, True, 3),
    (6, 2, None, False, 2),      # a bulk copy uses every slot
    (6, 8, 4, True, 4),          # tasks.max decides when set...
    (6, 2, 4, False, 2),         # ...never more than the slots
    (3, 8, 5, True, 3),          # or the partitions
    (0, 2, None, True, 1),
])
def test_task_count(partitions, slots, tasks_max, streaming, tasks):
    assert task_count(partitions, slots, tasks_max, streaming=streaming) == tasks


@pytest.mark.parametrize(("master", "slots"), [
    ("local", 1), ("local[2]", 2), ("local[3,4]", 3), ("local[*]", os.cpu_count() or 1),
    ("spark://host:7077", 8), ("yarn", 8)])
def test_one_task_group_per_slot_that_runs_at_once(master, slots):
    assert task_slots(master, 8) == slots
