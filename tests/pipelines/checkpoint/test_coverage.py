"""The one readiness rule (``pipelines.checkpoint.coverage``) on the ledger states that made
the verbs disagree before: empty partitions, log starts moved by retention, transaction-marker
tails, commits beyond the runs, several groups on one partition."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pipelines.checkpoint.coverage import CommitCoverage, Need, log_start_keys, needs_for
from pipelines.status.readiness import GroupStatus

pytestmark = pytest.mark.unit


def cover(committed, replicated_to, *, left=True, log_start=None, direction="forward"):
    return CommitCoverage(direction, "T" if direction == "forward" else "B.T", 0, committed,
                          replicated_to, committed_left=left, log_start=log_start)


@pytest.mark.parametrize(("coverage", "covered", "missing", "from_log_start"), [
    # runs reach the commit, or go past it
    (cover(10, 10), True, 0, False),
    (cover(10, 15), True, 0, False),
    # runs end below it, committed records between: wait
    (cover(10, 7), False, 3, False),
    # runs end below it, only transaction markers/aborted records between: covered
    (cover(10, 7, left=False), True, 3, False),
    # an open transaction: cannot tell, never covered
    (cover(10, 7, left=None), False, 3, False),
    # issue 35: a partition that received nothing (no run, log start 0, committed 0)
    (cover(0, None, log_start=0), True, 0, True),
    # retention moved the log start past the commit: nothing before it to copy
    (cover(40, None, log_start=40), True, 0, True),
    (cover(12, None, log_start=40), True, 0, True),
    # no run, but records the group read were never copied: wait for them
    (cover(12, None, log_start=0), False, 12, False),
    # no run, only markers before the commit (aborted transactions at the start)
    (cover(12, None, left=False, log_start=0), True, 12, True),
    # the reverse direction follows the same rule on the replica's side
    (cover(12, 10, direction="reverse"), False, 2, False),
    (cover(12, 10, left=False, direction="reverse"), True, 2, False),
    (cover(0, None, log_start=0, direction="reverse"), True, 0, True),
])
def test_the_rule(coverage, covered, missing, from_log_start):
    assert coverage.covered is covered
    assert coverage.missing == missing
    assert coverage.from_log_start is from_log_start


def test_describe_names_the_flow_the_log_start_and_an_open_transaction():
    assert cover(12, None, log_start=0).describe("B->P") == (
        "B->P T[0] runs end at nothing (log start 0), group committed 12")
    assert cover(10, 7, left=None, direction="reverse").describe() == (
        "B.T[0] (replica) runs end at 7, group committed 10 (an open transaction: cannot tell "
        "yet)")


@dataclass(frozen=True)
class C:
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class M:
    sync_flow: str
    sync_topic: str
    direction: str


def test_needs_keep_the_highest_commit_and_the_group_topic():
    mappings = {"T": M("P->B", "T", "forward"), "B.T": M("B->P", "T", "reverse")}
    needs = needs_for([C("T", 0, 5), C("T", 0, 9), C("B.T", 0, 3), C("X", 0, 1)], mappings)
    assert needs == [Need("B->P", "T", 0, 3, "reverse", "B.T"),
                     Need("P->B", "T", 0, 9, "forward", "T")]
    assert needs_for([C("T", 0, 5)], mappings, ends={("T", 0): 20})[0].offset == 20


def test_log_start_keys_and_a_status_verdict_agree():
    empty = cover(0, None, log_start=0)
    waiting = cover(12, None, log_start=0)
    assert log_start_keys([empty, waiting]) == {("forward", "T", 0)}
    ready = GroupStatus("G", "B->P", "B", "P", coverage=[empty, cover(10, 10)])
    assert ready.ready and ready.verdict == "ready to fail over B -> P"
    wait = GroupStatus("G", "B->P", "B", "P", coverage=[empty, waiting])
    assert not wait.ready and wait.verdict == "wait: 12 records not yet replicated"


def test_one_probe_answers_every_groups_commit_on_a_partition(monkeypatch):
    """Issue 37: status and a move assess all groups' commits in one call, one probe per
    partition; each commit's answer is still its own (runs end at 40, records 40..59 are
    aborted or markers, 60 is the first committed record)::

        40 ....... 59 | 60 (committed) ... 100
        A at 50: nothing committed in [40, 50): covered
        B at 100: record 60 is still to copy: wait
        C at 60: nothing committed in [40, 60): covered
    """
    from types import SimpleNamespace

    from pipelines.checkpoint import readiness
    from pipelines.edge import kafka_admin

    probes = []
    monkeypatch.setattr(readiness, "recorded_ends", lambda *a, **k: {
        ("P->B", "T", 0): readiness.RecordedEnd(40, 90)})
    monkeypatch.setattr(kafka_admin, "first_committed",
                        lambda cluster, ranges: probes.append(dict(ranges)) or {("T", 0): 60})
    needs = [Need("P->B", "T", 0, offset, "forward") for offset in (50, 100, 60)]
    config = SimpleNamespace(cluster=lambda alias: alias)
    coverage = readiness.assess(config, None, "P", needs)
    assert [c.covered for c in coverage] == [True, False, True]
    assert probes == [{("T", 0): (40, 100)}]  # one probe, to the highest commit
