"""Checkpoint decisions and topic mapping: pure logic, no Spark or Kafka."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger import schemas
from ledger.config import config_from_mapping
from ledger.store import OffsetSyncStore
from ledger.translation import Run
from pipelines.checkpoint import engine as checkpoint_engine
from pipelines.checkpoint.compute import (
    GroupCommit,
    OffsetWrite,
    Previous,
    compute_checkpoints,
    decide_offset_writes,
)
from pipelines.checkpoint.engine import Checkpointer, CheckpointPlan, CheckpointResult, resume_point
from pipelines.checkpoint.mapping import FORWARD, REVERSE, map_topic, subscribe_topics
from pipelines.edge import kafka_admin

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 1, 1)
CONFIG = config_from_mapping({
    "clusters": {"P": {"bootstrap.servers": "h:1"}, "B": {"bootstrap.servers": "h:2"}},
    "flows": {"P->B": {"topics": [".*"]},
              "B->P": {"reverse.checkpointed.topics": ["P.Payments"]}},
})


def store(flow, topic, *runs, version=3):
    return OffsetSyncStore(flow, version, {(topic, 0): [Run(*r) for r in runs]})


def test_mapping_for_the_reference_scenario():
    p_to_b, b_to_p = CONFIG.flow("P->B"), CONFIG.flow("B->P")
    fwd = map_topic(CONFIG, p_to_b, "Payments")
    assert (fwd.direction, fwd.target_topic, fwd.sync_flow, fwd.sync_topic) == (
        FORWARD, "P.Payments", "P->B", "Payments")
    rev = map_topic(CONFIG, b_to_p, "P.Payments")
    assert (rev.direction, rev.target_topic, rev.sync_flow, rev.sync_topic) == (
        REVERSE, "Payments", "P->B", "Payments")
    back = map_topic(CONFIG, b_to_p, "Payments")
    assert (back.direction, back.target_topic, back.sync_flow) == (FORWARD, "B.Payments", "B->P")
    # P.Payments is never replicated back to P, and B.Payments on P never goes to B.
    assert map_topic(CONFIG, p_to_b, "B.Payments") is None
    assert map_topic(CONFIG, p_to_b, "__consumer_offsets") is None


def test_subscribe_topics_as_design_says():
    assert subscribe_topics(CONFIG, CONFIG.flow("P->B"), {"Payments"}) == [
        "P.Payments", "Payments"]
    assert subscribe_topics(CONFIG, CONFIG.flow("B->P"), {"Payments", "P.Payments"}) == [
        "B.Payments", "Payments"]


def test_without_reverse_checkpointing_the_replica_is_not_mapped():
    config = config_from_mapping({
        "clusters": {"P": {"bootstrap.servers": "h:1"}, "B": {"bootstrap.servers": "h:2"}},
        "flows": {"P->B": True, "B->P": True}})
    assert map_topic(config, config.flow("B->P"), "P.Payments") is None


def checkpoints(commits, previous=None, runs=((100, 500, 4), (110, 504, 2))):
    flow = CONFIG.flow("P->B")
    mappings = {c.topic: map_topic(CONFIG, flow, c.topic) for c in commits}
    return compute_checkpoints(commits, mappings, {"P->B": store("P->B", "Payments", *runs)},
                               previous or {}, checkpoint_id="c1", target_cluster="B", now=NOW)


def test_commits_below_their_windows_read_the_history_once_per_flow():
    """Groups behind a windowed partition's window make one history read for all of them."""
    history = [Run(10 * i, 20 * i, 10) for i in range(8)]  # gaps downstream: no coalescing
    windowed = OffsetSyncStore("P->B", 3, {("Payments", p): history[5:] for p in range(3)},
                               {"Payments": "P.Payments"}, dropped={("Payments", p): 5
                                                                    for p in range(3)})
    reads = []
    windowed.history = lambda keys: reads.append(set(keys)) or OffsetSyncStore(
        "P->B", 3, {k: history for k in keys}, {"Payments": "P.Payments"})
    flow = CONFIG.flow("P->B")
    commits = [GroupCommit("P", g, "Payments", p, x)
               for g, x in (("G1", 12), ("G2", 55), ("G3", 71)) for p in range(3)]
    mappings = {"Payments": map_topic(CONFIG, flow, "Payments")}
    rows = compute_checkpoints(commits, mappings, {"P->B": windowed}, {}, checkpoint_id="c1",
                               target_cluster="B", now=NOW)
    assert reads == [{("Payments", p) for p in range(3)}]  # G1's 12: below U = 50, 3 times
    assert {(r.group_id, r.target_offset) for r in rows} == {
        ("G1", 22), ("G2", 105), ("G3", 141)}
    assert windowed.dropped == {}


def test_commits_below_their_windows_seek_together_each_to_its_lowest_commit():
    """With seek floors (exactly-once runs never rewind: the epoch's start), the groups behind
    the windows read slices of time going back, for all their partitions at once, and each
    partition stops at its lowest commit's run: no whole-history read."""
    history = [Run(10 * i, 20 * i, 10) for i in range(8)]
    written = [NOW + dt.timedelta(minutes=i) for i in range(8)]  # one run a minute
    keys = [("Payments", p) for p in range(3)]
    windowed = OffsetSyncStore("P->B", 3, {k: history[5:] for k in keys},
                               {"Payments": "P.Payments"}, dropped=dict.fromkeys(keys, 5),
                               seek=dict.fromkeys(keys, (0, 0)), covered_until=written[7])
    slices = []

    def recent(asked, after, until):
        slices.append(sorted(p for _, p in asked))
        return [{"topic": t, "partition": p, "upstream_offset": r.upstream_offset,
                 "downstream_offset": r.downstream_offset, "length": r.length,
                 "written_at": written[i], "batch_id": i}
                for t, p in asked for i, r in enumerate(history) if after < written[i] <= until]

    windowed.recent = recent
    windowed.history = lambda asked: pytest.fail(f"the whole history of {asked} was read")
    flow = CONFIG.flow("P->B")
    commits = [GroupCommit("P", g, "Payments", p, x)
               for g, p, x in (("G1", 0, 12), ("G4", 0, 45), ("G2", 1, 45), ("G3", 2, 71))]
    mappings = {"Payments": map_topic(CONFIG, flow, "Payments")}
    rows = compute_checkpoints(commits, mappings, {"P->B": windowed}, {}, checkpoint_id="c1",
                               target_cluster="B", now=NOW)
    # slices of 1, 3 and 12 minutes back from run 7's: p1 (45, run 4's) is reached by the
    # second (runs 4 to 6), p0 (12, run 1's) by the third; p2's 71 is in its window
    assert slices == [[0, 1], [0, 1], [0]]
    assert windowed.prepended == {("Payments", 0): 5, ("Payments", 1): 1}
    assert windowed.dropped == dict.fromkeys(keys, 5)
    assert {(r.group_id, r.target_offset) for r in rows} == {
        ("G1", 22), ("G4", 85), ("G2", 85), ("G3", 141)}


def test_forward_checkpoints_follow_the_design_example():
    rows = checkpoints([GroupCommit("P", "G", "Payments", 0, x) for x in (102, 105, 112)])
    assert [(r.source_offset, r.target_offset, r.status) for r in rows] == [
        (102, 502, "translated"), (105, 504, "translated"), (112, 506, "translated")]
    assert {r.offset_syncs_version for r in rows} == {3}


def test_untranslatable_has_no_offset_and_a_reason():
    (row,) = checkpoints([GroupCommit("P", "G", "Payments", 0, 50)])
    assert row.target_offset is None and row.status == "untranslatable" and not row.translated
    assert "before the first replicated record" in row.reason


def test_never_backwards_unless_the_group_rewound():
    key = ("G", FORWARD, "Payments", 0)
    # Previous checkpoint said 505 for source 111; now the group is still at 111 but the
    # translation (e.g. after a rewind of the replicator) says less: hold.
    (held,) = checkpoints([GroupCommit("P", "G", "Payments", 0, 111)], {key: Previous(111, 506)})
    assert (held.status, held.target_offset) == ("held", 506)
    # The group itself rewound to 101: the checkpoint moves back with it.
    (rewound,) = checkpoints([GroupCommit("P", "G", "Payments", 0, 101)], {key: Previous(111, 505)})
    assert (rewound.status, rewound.target_offset, rewound.group_rewound) == (
        "translated", 501, True)


def test_offset_sync_never_rewinds_and_skips_untranslatable():
    rows = checkpoints([GroupCommit("P", "G", "Payments", 0, 112),
                        GroupCommit("P", "H", "Payments", 0, 112),
                        GroupCommit("P", "K", "Payments", 0, 3)])
    writes, skipped = decide_offset_writes(rows, {("H", "P.Payments", 0): 900})
    assert [(w.group_id, w.offset, w.previous_offset) for w in writes] == [("G", 506, None)]
    reasons = {cp.group_id: why for cp, why in skipped}
    assert reasons["H"].startswith("never rewind")
    assert reasons["K"].startswith("untranslatable")
    assert writes[0].checkpoint is rows[0]


def test_a_resume_point_names_its_checkpoint_or_nothing():
    (cp,) = checkpoints([GroupCommit("P", "G", "Payments", 0, 112)])
    (write,), _ = decide_offset_writes([cp], {})
    point = resume_point(write, operation_id="op", reason="failover", cluster="B",
                         checkpoints_version=9, now=NOW)
    assert (point.checkpoint_id, point.direction, point.source_topic, point.source_offset,
            point.offset_syncs_version, point.checkpoints_version) == (
        "c1", FORWARD, "Payments", 112, 3, 9)
    assert (point.group_id, point.topic, point.partition, point.offset) == (
        "G", "P.Payments", 0, 506)
    start = OffsetWrite("G", "Payments", 1, 0, None, None)  # a log start: no translation
    point = resume_point(start, operation_id="op", reason="failover", cluster="B",
                         checkpoints_version=9, now=NOW)
    assert (point.checkpoint_id, point.source_offset, point.checkpoints_version) == (
        None, None, None)


class RecordingEngine:
    """The few engine calls :meth:`Checkpointer.commit` makes, kept in memory."""

    direct = True

    def __init__(self):
        self.appended: dict[str, list[dict]] = {}
        self.commits: list[str] = []

    def append(self, table, rows):
        self.commits.append(table)
        self.appended.setdefault(table, []).extend(rows)

    def version(self, table):
        return 7


def decided_twice(*args, **kwargs):
    raise AssertionError("the offset writes were decided again after the plan")


def test_a_pass_writes_exactly_the_offsets_its_plan_decided(monkeypatch):
    commits = [GroupCommit("P", g, "Payments", 0, 112) for g in ("G", "H", "A")]
    rows = checkpoints([*commits, GroupCommit("P", "K", "Payments", 0, 3)])
    target = [GroupCommit("B", "H", "P.Payments", 0, 900)]
    planned, skipped = decide_offset_writes(
        rows, {(c.group_id, c.topic, c.partition): c.offset for c in target})
    result = CheckpointResult("c1", "P->B", checkpoints=rows, writes=list(planned),
                              skipped=list(skipped), source_commits=commits,
                              versions={schemas.OFFSET_SYNCS: 3})
    plan = CheckpointPlan(CONFIG.flow("P->B"), result, target, {}, NOW, writes=planned,
                          skipped=skipped)
    written = []

    def alter(cluster, offsets, *, skip_active=False):
        assert skip_active  # a periodic pass skips an active group, it does not fail
        # A became active since the plan: skipped whole, nothing re-decided.
        written.extend((g, o) for g, o in sorted(offsets.items()) if g != "A")
        return {"A": kafka_admin.GroupActiveError("group A has active members on B")}

    monkeypatch.setattr(kafka_admin, "alter_groups_offsets", alter)
    monkeypatch.setattr(checkpoint_engine, "decide_offset_writes", decided_twice)
    checkpointer = Checkpointer.__new__(Checkpointer)
    checkpointer.engine, checkpointer.config = RecordingEngine(), CONFIG
    out = checkpointer.commit(plan, sync=True, operation_id="op", reason="failover")

    assert [(w.group_id, w.offset) for w in planned] == [("A", 506), ("G", 506)]
    assert written == [("G", {("P.Payments", 0): 506})]
    assert out.writes == [w for w in planned if w.group_id == "G"]
    assert [(p["group_id"], p["offset"], p["checkpoint_id"])
            for p in checkpointer.engine.appended[schemas.RESUME_POINTS]] == [("G", 506, "c1")]
    reasons = {cp.group_id: why for cp, why in out.skipped}
    assert set(reasons) == {"A", "H", "K"} and "active" in reasons["A"]
    assert reasons["H"].startswith("never rewind")


def test_log_starts_go_out_in_the_checkpoints_requests_and_one_resume_points_commit(
        monkeypatch):
    commits = [GroupCommit("P", g, "Payments", 0, 112) for g in ("G", "A")]
    rows = checkpoints(commits)
    planned, skipped = decide_offset_writes(rows, {})
    result = CheckpointResult("c1", "P->B", checkpoints=rows, writes=list(planned),
                              skipped=list(skipped), source_commits=commits,
                              versions={schemas.OFFSET_SYNCS: 3})
    plan = CheckpointPlan(CONFIG.flow("P->B"), result, [], {}, NOW, writes=planned,
                          skipped=skipped)
    starts = [OffsetWrite("G", "Refunds", 0, 4, None, None),
              OffsetWrite("A", "Refunds", 1, 0, None, None),
              OffsetWrite("N", "Refunds", 0, 2, None, None)]  # a group with starts only
    calls = []

    def alter(cluster, offsets, *, skip_active=False):
        calls.append(({g: dict(o) for g, o in offsets.items()}, skip_active))
        return {"A": kafka_admin.GroupActiveError("group A has active members on B")}

    monkeypatch.setattr(kafka_admin, "alter_groups_offsets", alter)
    checkpointer = Checkpointer.__new__(Checkpointer)
    checkpointer.engine, checkpointer.config = RecordingEngine(), CONFIG
    out = checkpointer.commit(plan, sync=True, operation_id={"G": "op-g", "A": "op-a",
                                                             "N": "op-n"},
                              reason="failover", starts=starts)

    assert calls == [({"A": {("P.Payments", 0): 506, ("Refunds", 1): 0},
                       "G": {("P.Payments", 0): 506, ("Refunds", 0): 4},
                       "N": {("Refunds", 0): 2}}, True)]  # one wave, one request per group
    assert [(w.group_id, w.topic) for w in out.writes] == [("G", "P.Payments")]
    assert [(w.group_id, w.offset) for w in out.starts] == [("G", 4), ("N", 2)]
    assert [cp.group_id for cp, _ in out.skipped] == ["A"]  # an active group: nothing of it
    assert checkpointer.engine.commits.count(schemas.RESUME_POINTS) == 1
    points = checkpointer.engine.appended[schemas.RESUME_POINTS]
    assert [(p["operation_id"], p["topic"], p["offset"], p["checkpoint_id"]) for p in points] \
        == [("op-g", "P.Payments", 506, "c1"), ("op-g", "Refunds", 4, None),
            ("op-n", "Refunds", 2, None)]
