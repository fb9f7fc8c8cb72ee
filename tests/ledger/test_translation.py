"""Unit and property tests of ledger.translation (DESIGN.md, "Translation rule")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.translation import (
    Candidate,
    CandidateKind,
    Run,
    current_epoch,
    epoch_starts,
    forward,
    forward_candidates,
    reverse,
    reverse_candidates,
)

pytestmark = pytest.mark.unit

# DESIGN.md's example: 100..103 at 500..503, records 104..109 do not exist, 110..111 at 504..505.
A = (100, 500, 4)
B = (110, 504, 2)
DESIGN = [A, B]


# --------------------------------------------------------------------------------------------
# Run and argument validation


def test_run_accepts_plain_tuples_and_runs() -> None:
    assert Run.of((1, 2, 3)) == Run(1, 2, 3)
    run = Run(1, 2, 3)
    assert Run.of(run) is run
    assert (run.upstream_end, run.downstream_end) == (4, 5)
    assert current_epoch([(1, 2, 3), Run(4, 5, 1)]) == [Run(1, 2, 3), Run(4, 5, 1)]


def test_run_is_frozen() -> None:
    run = Run(1, 2, 3)
    with pytest.raises(AttributeError):
        run.length = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ((-1, 0, 1), "upstream_offset must be >= 0"),
        ((0, -1, 1), "downstream_offset must be >= 0"),
        ((0, 0, 0), "length must be >= 1"),
        ((0, 0, -3), "length must be >= 1"),
    ],
)
def test_run_rejects_invalid_values(fields: tuple[int, int, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Run(*fields)
    with pytest.raises(ValueError, match=message):
        forward([A, fields], 100)
    with pytest.raises(ValueError, match=message):
        reverse([fields], 100)


@pytest.mark.parametrize("bad", [(1, 2), (1, 2, 3, 4), "abc", 7, None, (1.0, 2, 3), (True, 2, 3)])
def test_run_rejects_malformed_runs(bad: object) -> None:
    with pytest.raises(TypeError):
        Run.of(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        forward([bad], 5)  # type: ignore[list-item]


@pytest.mark.parametrize("function", [forward, reverse, forward_candidates, reverse_candidates])
def test_negative_offset_is_rejected(function) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        function(DESIGN, -1)
    with pytest.raises(ValueError, match="must be >= 0"):
        function([], -1)
    with pytest.raises(TypeError):
        function(DESIGN, 1.5)
    with pytest.raises(TypeError):
        function(DESIGN, True)


def test_runs_may_be_any_iterable() -> None:
    assert forward(iter(DESIGN), 102) == 502
    assert reverse((r for r in DESIGN), 503) == 103


# --------------------------------------------------------------------------------------------
# The DESIGN.md example, exact hits, between runs, past the last run, before the first run


def test_design_example() -> None:
    assert forward(DESIGN, 102) == 502
    assert forward(DESIGN, 105) == 504
    assert forward(DESIGN, 112) == 506
    assert reverse(DESIGN, 503) == 103
    assert reverse(DESIGN, 504) == 110
    assert reverse(DESIGN, 506) == 112


@pytest.mark.parametrize(("x", "d"), [(100, 500), (101, 501), (103, 503), (110, 504), (111, 505)])
def test_exact_hits(x: int, d: int) -> None:
    assert forward(DESIGN, x) == d
    assert reverse(DESIGN, d) == x


@pytest.mark.parametrize("x", range(104, 111))
def test_forward_in_an_upstream_gap_goes_to_the_next_record(x: int) -> None:
    assert forward(DESIGN, x) == 504


def test_between_runs_with_a_downstream_gap() -> None:
    # 504..509 hold no run (transaction markers, or copies of a crashed batch, see below).
    runs = [(100, 500, 4), (104, 510, 2)]
    assert forward(runs, 103) == 503
    assert forward(runs, 104) == 510  # 104 is at 510: skip the hole, nothing is missed
    assert forward(runs, 105) == 511
    assert reverse(runs, 504) == 104
    assert reverse(runs, 507) == 104
    assert reverse(runs, 510) == 104
    assert reverse(runs, 511) == 105


@pytest.mark.parametrize("x", [112, 113, 500, 10**12])
def test_forward_past_the_last_run_is_its_end(x: int) -> None:
    assert forward(DESIGN, x) == 506


@pytest.mark.parametrize("c", [506, 507, 10**12])
def test_reverse_past_the_last_run_is_its_upstream_end(c: int) -> None:
    assert reverse(DESIGN, c) == 112


@pytest.mark.parametrize("x", [0, 1, 99])
def test_forward_before_the_first_run_is_not_translatable(x: int) -> None:
    assert forward(DESIGN, x) is None


@pytest.mark.parametrize("c", [0, 499])
def test_reverse_before_the_first_run_is_not_translatable(c: int) -> None:
    assert reverse(DESIGN, c) is None


def test_no_runs_translate_nothing() -> None:
    assert forward([], 0) is None
    assert reverse([], 0) is None
    assert current_epoch([]) == []
    assert epoch_starts([]) == []
    assert forward_candidates([], 5) == []
    assert reverse_candidates([], 5) == []


def test_offset_zero() -> None:
    runs = [(0, 0, 3)]
    assert forward(runs, 0) == 0
    assert reverse(runs, 0) == 0
    assert forward(runs, 3) == 3
    assert reverse(runs, 3) == 3


# --------------------------------------------------------------------------------------------
# Upstream gaps (compaction, transaction markers)


def test_upstream_gaps_split_runs_and_are_skipped() -> None:
    # Compacted upstream: 0, 1, 5, 6, 7, 20 exist, copied densely at 0..5.
    runs = [(0, 0, 2), (5, 2, 3), (20, 5, 1)]
    expected_forward = {0: 0, 1: 1, 2: 2, 4: 2, 5: 2, 6: 3, 7: 4, 8: 5, 19: 5, 20: 5, 21: 6}
    for x, d in expected_forward.items():
        assert forward(runs, x) == d, x
    expected_reverse = {0: 0, 1: 1, 2: 5, 3: 6, 4: 7, 5: 20, 6: 21, 9: 21}
    for c, u in expected_reverse.items():
        assert reverse(runs, c) == u, c


# --------------------------------------------------------------------------------------------
# Downstream truncation or re-creation: a new epoch


def test_truncation_starts_a_new_epoch() -> None:
    runs = [A, B, (200, 300, 10)]  # the replica was truncated to 300, replication resumed at 200
    assert epoch_starts(runs) == [True, False, True]
    assert current_epoch(runs) == [Run(200, 300, 10)]
    assert forward(runs, 102) is None  # the copies of 100..111 no longer count
    assert forward(runs, 205) == 305
    assert forward(runs, 250) == 310
    assert reverse(runs, 299) is None
    assert reverse(runs, 304) == 204
    assert reverse(runs, 503) == 210  # 503 was in the old epoch; now past the end


def test_contiguous_run_is_the_same_epoch_one_below_is_a_new_one() -> None:
    assert epoch_starts([(0, 10, 5), (5, 15, 5)]) == [True, False]
    assert epoch_starts([(0, 10, 5), (5, 14, 5)]) == [True, True]
    assert epoch_starts([(0, 10, 5), (5, 20, 5)]) == [True, False]  # downstream gap: same epoch


def test_only_the_current_epochs_runs_delimit_it() -> None:
    # Recreated replica: the new epoch's runs are below the old epoch's end (1010), but they
    # follow each other, so they form one epoch.
    runs = [(0, 1000, 10), (10, 0, 5), (15, 5, 5), (20, 10, 5)]
    assert epoch_starts(runs) == [True, True, False, False]
    assert current_epoch(runs) == [Run(10, 0, 5), Run(15, 5, 5), Run(20, 10, 5)]
    assert forward(runs, 17) == 7
    assert reverse(runs, 12) == 22


def test_new_epoch_may_restart_upstream_anywhere() -> None:
    runs = [(100, 0, 50), (120, 10, 5)]  # recreated replica, replication restarted at 120
    assert forward(runs, 110) is None  # 110 was never copied into this epoch
    assert forward(runs, 122) == 12
    assert reverse(runs, 9) is None


# --------------------------------------------------------------------------------------------
# Duplicate copies after a restart or a rewind (same epoch, further downstream)


def test_rewind_copies_a_suffix_again() -> None:
    runs = [(100, 500, 10), (105, 510, 10)]  # 100..109 at 500..509, then 105..114 at 510..519
    assert epoch_starts(runs) == [True, False]
    assert forward(runs, 103) == 503
    assert forward(runs, 107) == 507  # first copy: the consumer also meets the second one
    # 110..114 exist only in the second copy; the rule keeps the first run's end as a candidate
    # (nothing starts in [110, x]), which is safe: it re-reads 105..109, it never skips.
    assert forward(runs, 110) == 510
    assert forward(runs, 114) == 510
    assert forward(runs, 115) == 510
    assert reverse(runs, 507) == 107
    assert reverse(runs, 512) == 110  # read 100..109, then 105, 106 again
    assert reverse(runs, 517) == 112
    assert reverse(runs, 520) == 115


def test_restart_that_copies_everything_again() -> None:
    runs = [(100, 500, 10), (100, 510, 10)]
    assert forward(runs, 100) == 500
    assert forward(runs, 104) == 504
    assert forward(runs, 110) == 510
    assert reverse(runs, 505) == 105
    assert reverse(runs, 515) == 110


def test_rewind_to_before_a_gap() -> None:
    # 100..103 at 500..503, 110..111 at 504..505, rewind: 100..103 at 506..509, 110 at 510.
    runs = [A, B, (100, 506, 4), (110, 510, 1)]
    assert forward(runs, 102) == 502
    assert forward(runs, 105) == 504
    assert forward(runs, 111) == 505
    assert forward(runs, 112) == 506  # A's copy ends at 104 <= 112 and no run starts in [104, 112]
    assert reverse(runs, 508) == 112


# --------------------------------------------------------------------------------------------
# Replication stopped half way through a batch


def test_stop_half_way_with_the_partial_run_recorded() -> None:
    # Batch 110..119 wrote 110..112 at 510..512 and stopped; the restart copied 110..119 again.
    runs = [(100, 500, 10), (110, 510, 3), (110, 513, 10)]
    assert forward(runs, 105) == 505
    assert forward(runs, 110) == 510
    assert forward(runs, 111) == 511
    assert forward(runs, 113) == 513  # 113 exists only in the re-copy, which starts at 513
    assert forward(runs, 119) == 513
    assert reverse(runs, 512) == 112
    assert reverse(runs, 514) == 113  # read 110..112, then 110 again: 113 is next
    assert reverse(runs, 523) == 120


def test_stop_half_way_with_the_partial_copies_unrecorded() -> None:
    # 510..512 hold copies of 110..112 that no run records; the restart copied 110..119 at 513.
    runs = [(100, 500, 10), (110, 513, 10)]
    assert forward(runs, 110) == 513  # exact: no run records 510..512, 110 is at 513
    assert forward(runs, 115) == 518
    assert reverse(runs, 511) == 110  # copies read at 510 are unknown: re-read, never skip
    assert reverse(runs, 513) == 110
    assert reverse(runs, 515) == 112


# --------------------------------------------------------------------------------------------
# Point syncs (n = 1), as MirrorMaker 2 writes them

SYNCS = [(100, 500, 1), (200, 650, 1), (300, 700, 1)]


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (99, None),
        (100, 500),
        (150, 501),
        (199, 501),
        (200, 650),
        (250, 651),
        (300, 700),
        (301, 701),
        (10**9, 701),
    ],
)
def test_point_syncs_forward_is_mm2(x: int, expected: int | None) -> None:
    assert forward(SYNCS, x) == expected
    assert forward(SYNCS, x) == mm2_translate_downstream(SYNCS, x)


@pytest.mark.parametrize(
    ("c", "expected"),
    [
        (499, None),
        (500, 100),
        (501, 101),
        (649, 101),
        (650, 200),
        (651, 201),
        (700, 300),
        (701, 301),
        (10**9, 301),
    ],
)
def test_point_syncs_reverse(c: int, expected: int | None) -> None:
    assert reverse(SYNCS, c) == expected
    assert reverse(SYNCS, c) == reference_reverse_point_syncs(SYNCS, c)


def mm2_translate_downstream(syncs: Sequence[tuple[int, int, int]], x: int) -> int | None:
    """MM2's OffsetSyncStore.translateDownstream, with every sync kept and no rewinds.

    The latest sync with upstream <= x: its downstream offset on an exact match, otherwise one
    past it; no such sync: not translatable (MM2 answers -1 or nothing).
    """
    eligible = [(u, d) for u, d, n in syncs if u <= x]
    assert all(n == 1 for _, _, n in syncs)
    if not eligible:
        return None
    u, d = eligible[-1]
    return d if u == x else d + 1


def reference_reverse_point_syncs(syncs: Sequence[tuple[int, int, int]], c: int) -> int | None:
    """Reverse checkpointing over point syncs: the latest sync with downstream <= c."""
    eligible = [(u, d) for u, d, _ in syncs if d <= c]
    if not eligible:
        return None
    u, d = eligible[-1]
    return u if d == c else u + 1


@st.composite
def increasing_point_syncs(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    upstream = sorted(draw(st.sets(st.integers(0, 200), min_size=1, max_size=15)))
    downstream = sorted(
        draw(st.sets(st.integers(0, 200), min_size=len(upstream), max_size=len(upstream)))
    )
    return [(u, d, 1) for u, d in zip(upstream, downstream, strict=True)]


@settings(max_examples=200, deadline=None)
@given(increasing_point_syncs())
def test_property_point_syncs_match_mm2(syncs: list[tuple[int, int, int]]) -> None:
    for x in range(0, 205):
        assert forward(syncs, x) == mm2_translate_downstream(syncs, x), x
    for c in range(0, 205):
        assert reverse(syncs, c) == reference_reverse_point_syncs(syncs, c), c


# --------------------------------------------------------------------------------------------
# Candidates (what the SQL models mirror)


def test_forward_candidates() -> None:
    assert forward_candidates(DESIGN, 102) == [
        Candidate(CandidateKind.FIRST_RECORD, 502, Run(*A), 0),
        Candidate(CandidateKind.FIRST_RECORD, 504, Run(*B), 1),
    ]
    assert forward_candidates(DESIGN, 105) == [
        Candidate(CandidateKind.RUN_END, 504, Run(*A), 0),
        Candidate(CandidateKind.FIRST_RECORD, 504, Run(*B), 1),
    ]
    # B starts in [104, 110]: A's end is not a candidate any more.
    assert forward_candidates(DESIGN, 110) == [
        Candidate(CandidateKind.FIRST_RECORD, 504, Run(*B), 1),
    ]
    assert forward_candidates(DESIGN, 112) == [Candidate(CandidateKind.RUN_END, 506, Run(*B), 1)]
    # Before the first run the candidates exist, but forward is None (nothing has u <= x).
    assert forward_candidates(DESIGN, 50) == [
        Candidate(CandidateKind.FIRST_RECORD, 500, Run(*A), 0),
        Candidate(CandidateKind.FIRST_RECORD, 504, Run(*B), 1),
    ]
    assert forward(DESIGN, 50) is None


def test_reverse_candidates() -> None:
    assert reverse_candidates(DESIGN, 503) == [
        Candidate(CandidateKind.NEXT_UNREAD, 103, Run(*A), 0)
    ]
    assert reverse_candidates(DESIGN, 505) == [
        Candidate(CandidateKind.NEXT_UNREAD, 104, Run(*A), 0),
        Candidate(CandidateKind.NEXT_UNREAD, 111, Run(*B), 1),
    ]


def test_candidate_run_index_is_the_write_order_in_the_input() -> None:
    runs = [A, B, (200, 300, 10), (210, 310, 5)]
    assert [c.run_index for c in forward_candidates(runs, 205)] == [2, 3]
    assert [c.run_index for c in reverse_candidates(runs, 312)] == [2, 3]


def test_candidate_kinds_are_strings_for_sql() -> None:
    assert {k.value for k in CandidateKind} == {"first_record", "run_end", "next_unread"}
    assert CandidateKind.RUN_END == "run_end"


# --------------------------------------------------------------------------------------------
# Properties on arbitrary runs


arbitrary_runs = st.lists(
    st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(1, 6)), max_size=8
)


@settings(max_examples=300, deadline=None)
@given(arbitrary_runs)
def test_property_monotonic_and_bounded(runs: list[tuple[int, int, int]]) -> None:
    epoch = current_epoch(runs)
    previous: int | None = None
    for x in range(0, 60):
        result = forward(runs, x)
        translatable = any(r.upstream_offset <= x for r in epoch)
        assert (result is not None) == translatable
        if result is None:
            assert previous is None
            continue
        assert isinstance(result, int)
        assert epoch[0].downstream_offset <= result <= epoch[-1].downstream_end
        if previous is not None:
            assert result >= previous
        previous = result
    previous = None
    for c in range(0, 60):
        result = reverse(runs, c)
        assert (result is None) == (not epoch or c < epoch[0].downstream_offset)
        if result is None:
            continue
        assert min(r.upstream_offset for r in epoch) <= result
        assert result <= max(r.upstream_end for r in epoch)
        if previous is not None:
            assert result >= previous
        previous = result


@settings(max_examples=300, deadline=None)
@given(arbitrary_runs)
def test_property_epoch_runs_do_not_overlap_downstream(runs: list[tuple[int, int, int]]) -> None:
    epoch = current_epoch(runs)
    assert epoch == [Run(*r) for r in runs[len(runs) - len(epoch) :]]
    flags = epoch_starts(runs)
    assert flags.count(True) == (1 if runs else 0) + sum(
        1 for prev, run in pairwise(runs) if run[1] < prev[1] + prev[2]
    )
    for earlier, later in pairwise(epoch):
        assert later.downstream_offset >= earlier.downstream_end


# --------------------------------------------------------------------------------------------
# Safety properties on simulated replication histories


@dataclass
class History:
    """A simulated replication of one partition, and the runs the ledger recorded for it."""

    records: list[int]  # upstream offsets that exist, ascending (gaps: compaction, markers)
    runs: list[tuple[int, int, int]] = field(default_factory=list)
    epoch_runs: list[tuple[int, int, int]] = field(default_factory=list)
    epoch_first_record: int = 0  # the first upstream record copied in the current epoch
    log: dict[int, int] = field(default_factory=dict)  # replica position -> upstream offset
    actions: list[str] = field(default_factory=list)


@st.composite
def histories(draw: st.DrawFn) -> History:
    """Upstream records with gaps, copied in order downstream, with every disaster in the rule.

    The replicator copies batches of records in upstream order from a cursor, and records one run
    per batch (split at upstream gaps). It may stop half way through a batch, the copies written
    being recorded as a run or not at all; restart or be rewound to any record from the epoch's
    first copied one up to the end of what the runs record (a committed offset never lies past
    that); find downstream offsets holding no record (transaction markers); and see the replica
    truncated below the last run's end, after which it copies from any record: a new epoch.
    """
    first = draw(st.integers(0, 20))
    gaps = draw(st.lists(st.sampled_from([0, 0, 0, 0, 1, 3]), min_size=1, max_size=40))
    records: list[int] = []
    offset = first
    for gap in gaps:
        offset += gap
        records.append(offset)
        offset += 1
    history = History(records)
    position = draw(st.integers(0, 10))

    def write(start: int, count: int, recorded: bool) -> int:
        """Copy records[start : start + count] at the replica's end; return how many."""
        nonlocal position
        chunk = records[start : start + count]
        batch_runs: list[list[int]] = []
        for upstream in chunk:
            history.log[position] = upstream
            last = batch_runs[-1] if batch_runs else None
            if last is not None and last[0] + last[2] == upstream:
                last[2] += 1
            else:
                batch_runs.append([upstream, position, 1])
            position += 1
        if recorded:
            for run in batch_runs:
                history.runs.append((run[0], run[1], run[2]))
                history.epoch_runs.append((run[0], run[1], run[2]))
        return len(chunk)

    def new_epoch() -> tuple[int, int]:
        cursor = draw(st.integers(0, len(records) - 1))
        history.epoch_runs = []
        history.epoch_first_record = records[cursor]
        copied = write(cursor, draw(st.integers(1, 8)), recorded=True)
        return cursor + copied, cursor + copied

    def rewind_target() -> int:
        return draw(st.integers(records.index(history.epoch_first_record), recorded_end))

    cursor, recorded_end = new_epoch()  # indexes in records: next to copy, end of recorded copies
    for action in draw(
        st.lists(
            st.sampled_from(
                [
                    "batch",
                    "batch",
                    "batch",
                    "stop_recorded",
                    "stop_unrecorded",
                    "rewind",
                    "marker",
                    "truncate",
                ]
            ),
            max_size=12,
        )
    ):
        history.actions.append(action)
        if action == "batch":
            cursor += write(cursor, draw(st.integers(1, 8)), recorded=True)
            recorded_end = max(recorded_end, cursor)
        elif action == "stop_recorded":
            cursor += write(cursor, draw(st.integers(1, 4)), recorded=True)
            recorded_end = max(recorded_end, cursor)
            cursor = rewind_target()
        elif action == "stop_unrecorded":
            write(cursor, draw(st.integers(1, 4)), recorded=False)
            cursor = rewind_target()
        elif action == "rewind":
            cursor = rewind_target()
        elif action == "marker":
            position += draw(st.integers(1, 3))
        elif action == "truncate":
            last_end = history.epoch_runs[-1][1] + history.epoch_runs[-1][2]
            position = draw(st.integers(0, last_end - 1))
            history.log = {p: u for p, u in history.log.items() if p < position}
            cursor, recorded_end = new_epoch()
    return history


def copies_of(epoch: Sequence[Run]) -> list[tuple[int, int]]:
    """(replica position, upstream offset) of every copy the runs record."""
    return [
        (run.downstream_offset + k, run.upstream_offset + k)
        for run in epoch
        for k in range(run.length)
    ]


def without_rewind(epoch: Sequence[Run]) -> bool:
    return all(b.upstream_offset >= a.upstream_end for a, b in pairwise(epoch))


@settings(max_examples=400, deadline=None)
@given(histories())
def test_property_simulated_history(history: History) -> None:
    runs = history.runs
    epoch = current_epoch(runs)
    # The rule finds exactly the runs written since the last truncation.
    assert epoch == [Run(*r) for r in history.epoch_runs]
    copies = copies_of(epoch)
    for position, upstream in copies:  # the model's replica holds what the runs say
        assert history.log[position] == upstream
    latest_copy: dict[int, int] = {}
    for position, upstream in copies:
        latest_copy[upstream] = max(position, latest_copy.get(upstream, position))
    copy_at = dict(copies)
    first_d = epoch[0].downstream_offset
    epoch_end = epoch[-1].downstream_end
    exact = without_rewind(epoch)

    for x in range(0, history.records[-1] + 3):
        f = forward(runs, x)
        if all(run.upstream_offset > x for run in epoch):
            assert f is None
            continue
        assert f is not None
        assert first_d <= f <= epoch_end  # records copied later land at or after epoch_end
        # Safety: from f on, the consumer meets a copy of every record >= x the epoch holds.
        for upstream, position in latest_copy.items():
            if upstream >= x:
                assert position >= f, (x, f, upstream)
        if exact:  # and without a rewind it re-reads nothing
            assert all(upstream >= x for position, upstream in copies if position >= f), (x, f)

    existing = set(history.records)
    for c in range(max(0, first_d - 2), epoch_end + 3):
        g = reverse(runs, c)
        if c < first_d:
            assert g is None
            continue
        assert g is not None
        read = {upstream for position, upstream in copies if position < c}
        # Safety: every record of the epoch below g was read (nothing is skipped on failback).
        for upstream in range(history.epoch_first_record, g):
            if upstream in existing:
                assert upstream in read, (c, g, upstream)
        # Precision: g is one past the highest record read, or the record at c when higher.
        expected = max(read) + 1 if read else 0
        if c in copy_at:
            expected = max(expected, copy_at[c])
        assert g == expected, (c, g)


def test_simulated_histories_cover_every_disaster() -> None:
    """The generator does produce rewinds, unrecorded copies, gaps and new epochs."""
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None)
    @given(histories())
    def collect(history: History) -> None:
        epoch = current_epoch(history.runs)
        seen.update(history.actions)
        if not without_rewind(epoch):
            seen.add("duplicate copies")
        if epoch_starts(history.runs).count(True) > 1:
            seen.add("new epoch")
        if any(b - a > 1 for a, b in pairwise(history.records)):
            seen.add("upstream gap")

    collect()
    assert {
        "duplicate copies",
        "new epoch",
        "upstream gap",
        "stop_recorded",
        "stop_unrecorded",
        "marker",
        "rewind",
    } <= seen
