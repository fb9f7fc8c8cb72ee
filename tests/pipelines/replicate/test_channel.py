
"""The runs channel's acceptance rule and message format (pure logic)."""

from __future__ import annotations

import pytest

from ledger.translation import Run
from pipelines.replicate import channel
from pipelines.replicate.plan import RecordedTail

pytestmark = pytest.mark.unit


def part(start: int, *runs: tuple[int, int, int], task: str = "t/0/1") -> channel.Delivered:
    rs = tuple(Run(*r) for r in runs)
    return channel.Delivered("T", "P.T", 0, start, rs, rs[-1].upstream_end if rs else start,
                             sum(r.length for r in rs), 10, 1_000, 2_000, 5, 7, task)


def test_a_report_that_continues_the_chain_is_accepted():
    tail = RecordedTail(100, 500)
    assert channel.accept(part(100, (100, 500, 10)), tail)
    # Records 100..104 were transaction markers or aborted: the read began at the tail.
    assert channel.accept(part(100, (105, 501, 3)), tail)
    assert channel.advance(tail, part(100, (105, 501, 3), (110, 505, 2))) == RecordedTail(112,
                                                                                        507)


def test_a_report_that_would_overlap_leave_a_hole_or_go_down_is_refused():
    tail = RecordedTail(100, 500)
    assert not channel.accept(part(90, (90, 480, 20)), tail)   # overlaps recorded runs
    assert not channel.accept(part(104, (104, 505, 5)), tail)  # 100..103 never read: a hole
    assert not channel.accept(part(100, (100, 499, 5)), tail)  # below the recorded replica end
    assert not channel.accept(part(100), tail)                 # no run


def test_without_a_tail_the_first_start_bounds_the_report():
    assert channel.accept(part(0, (0, 0, 5)), None, floor=0)
    assert channel.accept(part(0, (3, 0, 5)), None)
    assert not channel.accept(part(7, (7, 0, 5)), None, floor=5)


def test_messages_round_trip_and_reports_fold_into_maximal_runs():
    a = part(100, (100, 500, 10))
    b = part(110, (110, 510, 5), (120, 516, 1))
    decoded = channel.decode(channel.encode_runs("t/0/1", [a]))
    assert decoded == [a]
    (summary,) = channel.summaries([a, b])
    assert summary.runs == (Run(100, 500, 15), Run(120, 516, 1))
    assert summary.records == 16
    error = channel.TaskError("t/0/1", "T", 0, "Broker: Unknown topic", True)
    assert channel.decode(channel.encode_error(error)) == error
    assert channel.decode(b"not json") is None
    assert channel.topic_name("P", "B") == "offset-ledger-runs.P-B.internal"
    lease = channel.decode(channel.encode_lease("offset-ledger-replicate.run-2"))
    assert channel.lease_holder(lease) == "offset-ledger-replicate.run-2"
    assert channel.lease_holder(channel.decode(channel.encode_sync("m"))) is None
    assert channel.lease_holder(decoded) is None


def test_positions_pass_markers_and_never_go_back():
    a = part(100, (100, 500, 10))
    moved = channel.positions_after([a], {("T", 0): 200})
    assert moved == {("T", 0): 200}
    assert channel.positions_after([a], {("T", 0): 50}) == {("T", 0): 110}
