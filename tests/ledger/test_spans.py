"""ledger.spans: coalesced runs translate exactly like the raw runs (property and examples)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ledger.spans import coalesce, extend, mergeable, seek_floors, window_start
from ledger.translation import Run, current_epoch, epoch_starts, forward, reverse
from tests.ledger.test_translation import History, histories

pytestmark = pytest.mark.unit


def assert_same_answers(got: list[Run], runs: list[Run]) -> None:
    top_u = max((r.upstream_end for r in runs), default=0) + 3
    top_d = max((r.downstream_end for r in runs), default=0) + 3
    for x in range(top_u):
        assert forward(got, x) == forward(runs, x), (x, runs, got)
    for c in range(top_d):
        assert reverse(got, c) == reverse(runs, c), (c, runs, got)


def assert_equivalent(raw: list[tuple[int, int, int]]) -> list[Run]:
    runs = [Run(*r) for r in raw]
    spans = coalesce(raw)
    raw_epoch, span_epoch = current_epoch(runs), current_epoch(spans)
    assert len(spans) <= len(runs)
    assert epoch_starts(spans).count(True) == epoch_starts(runs).count(True)
    assert sum(r.length for r in spans) == sum(r.length for r in runs)
    if raw_epoch:
        for end in ("upstream_end", "downstream_end"):
            assert (max(getattr(r, end) for r in span_epoch)
                    == max(getattr(r, end) for r in raw_epoch))
        assert ({(r.downstream_offset + k, r.upstream_offset + k)
                 for r in span_epoch for k in range(r.length)}
                == {(r.downstream_offset + k, r.upstream_offset + k)
                    for r in raw_epoch for k in range(r.length)})
    else:
        assert span_epoch == []
    assert_same_answers(spans, runs)
    # Not a fixed point: a merge removes interior ends, which may make more merges safe.
    assert len(coalesce(spans)) <= len(spans)
    return spans


@st.composite
def replication_logs(draw: st.DrawFn) -> list[tuple[int, int, int]]:
    """Runs as a replicator writes them, adversarially: mostly contiguous batches, plus upstream
    gaps, downstream holes, rewinds and restarts half way through a batch (copies again, further
    downstream), restarts past what was copied, and truncations (a new epoch: d drops)."""
    u, d = draw(st.integers(0, 10)), draw(st.integers(0, 10))
    runs: list[tuple[int, int, int]] = []
    steps = st.sampled_from(["batch"] * 5 + ["gap", "hole", "rewind", "half", "skip",
                                              "truncate"])
    for step in draw(st.lists(steps, max_size=25)):
        n = draw(st.integers(1, 5))
        if step == "gap":
            u += draw(st.integers(1, 3))
        elif step == "hole":
            d += draw(st.integers(1, 3))
        elif step == "rewind" and runs:
            low = min(r[0] for r in runs)
            u = draw(st.integers(low, u))
        elif step == "half" and runs:  # restart inside the last batch
            last = runs[-1]
            u = last[0] + draw(st.integers(0, last[2] - 1))
        elif step == "skip":
            u += draw(st.integers(1, 5))
            d += draw(st.integers(0, 2))
        elif step == "truncate" and runs:
            d = draw(st.integers(0, max(0, d - 1)))
            u = draw(st.integers(0, u + 3))
        runs.append((u, d, n))
        u, d = u + n, d + n
    return runs


@settings(max_examples=300, deadline=None)
@given(replication_logs())
def test_property_spans_translate_like_runs(runs: list[tuple[int, int, int]]) -> None:
    assert_equivalent(runs)


@settings(max_examples=300, deadline=None)
@given(histories())
def test_property_spans_of_simulated_histories(history: History) -> None:
    assert_equivalent(history.runs)


arbitrary_runs = st.lists(
    st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(1, 4)), max_size=10
)


@settings(max_examples=400, deadline=None)
@given(arbitrary_runs)
def test_property_spans_of_arbitrary_runs(runs: list[tuple[int, int, int]]) -> None:
    assert_equivalent(runs)


def test_contiguous_history_is_one_span() -> None:
    runs = [(100 + 10 * i, 500 + 10 * i, 10) for i in range(1000)]
    assert assert_equivalent(runs[:50]) == [Run(100, 500, 500)]
    assert coalesce(runs) == [Run(100, 500, 10_000)]


def test_gaps_and_holes_split_spans() -> None:
    # An upstream gap (104..109 do not exist), then a downstream hole (a transaction marker).
    runs = [(100, 500, 2), (102, 502, 2), (110, 504, 2), (112, 506, 1), (113, 508, 3)]
    assert assert_equivalent(runs) == [Run(100, 500, 4), Run(110, 504, 3), Run(113, 508, 3)]


def test_a_rewind_keeps_the_boundaries_it_needs() -> None:
    # 10..12 copied, restart from 11: 11..17 copied again. R ends at 13, inside (A.u, A.e].
    runs = [(10, 500, 3), (11, 503, 2), (13, 505, 3), (16, 508, 4)]
    assert mergeable(runs) == [False, False, True, False]
    spans = assert_equivalent(runs)
    assert spans == [Run(10, 500, 3), Run(11, 503, 2), Run(13, 505, 7)]
    assert forward(spans, 15) == 507
    # Merging 11..12 with 13.. would hide the start 13 and translate 15 to R's end, 503.
    assert forward([(10, 500, 3), (11, 503, 5)], 15) == 503


def test_new_epoch_is_never_merged_into_the_previous_one() -> None:
    runs = [(0, 0, 5), (5, 5, 5), (10, 3, 4), (14, 7, 4)]  # the replica was truncated at 3
    assert assert_equivalent(runs) == [Run(0, 0, 10), Run(10, 3, 8)]
    assert current_epoch(coalesce(runs)) == [Run(10, 3, 8)]


def test_no_runs() -> None:
    assert coalesce([]) == []
    assert mergeable([]) == []


@settings(max_examples=400, deadline=None)
@given(replication_logs(), st.data())
def test_property_extended_spans_translate_like_runs(raw: list[tuple[int, int, int]],
                                                     data: st.DataObject) -> None:
    runs = [Run(*r) for r in raw]
    cut = data.draw(st.integers(0, len(runs)))
    covered = coalesce(current_epoch(runs[:cut]))
    extended = extend(covered, runs[cut:])
    high = max((s.upstream_end for s in covered), default=0)
    rewinds = bool(covered) and any(r.upstream_offset < high for r in runs[cut:])
    assert (extended is None) == rewinds
    assume(extended is not None)
    assert_same_answers(extended, runs)
    assert current_epoch(extended) == extended  # one epoch
    assert coalesce(current_epoch(runs[cut:])) == extend([], runs[cut:])


def test_extend_continues_the_last_span() -> None:
    covered = coalesce([(100 + 10 * i, 500 + 10 * i, 10) for i in range(5)])
    assert covered == [Run(100, 500, 50)]
    assert extend(covered, [(150, 550, 10), (160, 560, 5)]) == [Run(100, 500, 65)]
    # a new epoch in the tail (the replica was truncated): the covered spans no longer count
    assert extend(covered, [(150, 550, 10), (160, 3, 5)]) == [Run(160, 3, 5)]
    # a restart from 120, inside what the spans cover: recompute from the raw runs
    assert extend(covered, [(120, 550, 10)]) is None


def assert_window_answers(window: list[Run], runs: list[Run]) -> None:
    """The window answers like ``runs`` at and above its floors (U: its lowest start, D: its
    first span's d), and holds the same highest ends."""
    floor_u = min(r.upstream_offset for r in window)
    floor_d = window[0].downstream_offset
    top_u = max(r.upstream_end for r in runs) + 3
    top_d = max(r.downstream_end for r in runs) + 3
    for x in range(floor_u, top_u):
        assert forward(window, x) == forward(runs, x), (x, runs, window)
    for c in range(floor_d, top_d):
        assert reverse(window, c) == reverse(runs, c), (c, runs, window)
    epoch = current_epoch(runs)
    for end in ("upstream_end", "downstream_end"):
        assert max(getattr(r, end) for r in window) == max(getattr(r, end) for r in epoch)


@settings(max_examples=400, deadline=None)
@given(replication_logs(), st.integers(1, 4), st.data())
def test_property_a_window_answers_like_the_runs_above_its_floors(
        raw: list[tuple[int, int, int]], keep: int, data: st.DataObject) -> None:
    runs = [Run(*r) for r in raw]
    spans = coalesce(current_epoch(runs))
    start = window_start(spans, keep)
    if len(spans) <= 2 * keep:
        assert start == 0
    assert start == 0 or len(spans) - start >= keep
    assume(spans)
    assert_window_answers(spans[start:], runs)
    # A tail appended without a rewind into the spans keeps the window's answers exact.
    # (the tail: another log, moved past the spans' highest ends on both sides)
    more = data.draw(replication_logs())
    high = max(s.upstream_end for s in spans)
    tail = [Run(u + high, d + max(s.downstream_end for s in spans), n) for u, d, n in more]
    extended = extend(spans[start:], tail)
    assume(extended is not None and tail and not any(epoch_starts(spans[-1:] + tail)[1:]))
    assert_window_answers(extended, runs + tail)


def test_a_window_of_an_exactly_once_history_keeps_the_newest_spans() -> None:
    # one record per transaction, each followed by its commit marker: nothing coalesces
    runs = [(u, 2 * u, 1) for u in range(50)]
    spans = coalesce(runs)
    assert len(spans) == 50
    assert window_start(spans, 30) == 0          # at most twice the window: kept whole
    assert window_start(spans, 10) == 40         # the newest 10 from a valid cut
    assert_window_answers(spans[40:], [Run(*r) for r in runs])
    with pytest.raises(ValueError, match="at least one span"):
        window_start(spans, 0)


def test_a_rewind_over_the_whole_history_allows_no_cut() -> None:
    # the replicator restarted from 0 after 20 records: every later start lies below an
    # earlier end, so no cut leaves the earlier runs' ends out of every answer
    first = [(u, 2 * u, 1) for u in range(20)]
    again = [(u, 40 + 2 * u, 1) for u in range(20)]
    spans = coalesce(first + again)
    assert window_start(spans, 3) == 0


def assert_seekable(floors: tuple[int, int] | None, window: list[Run],
                    runs: list[Run]) -> None:
    """The seek guarantee, on the raw runs: from the run at the floors up to the window, the
    runs from any of them on answer like ``runs`` at and above that run's floors."""
    if floors is None:
        return
    epoch = current_epoch(runs)
    (start,) = [k for k, r in enumerate(epoch) if r.downstream_offset == floors[1]]
    assert floors[0] == min(r.upstream_offset for r in epoch[start:])
    assert epoch[start].downstream_offset < window[0].downstream_offset
    for j in range(start, len(epoch)):
        if epoch[j].downstream_offset >= window[0].downstream_offset:
            break
        assert_window_answers(epoch[j:], runs)


@settings(max_examples=400, deadline=None)
@given(replication_logs(), st.integers(1, 3))
def test_property_seek_floors_leave_only_valid_cuts_above_them(
        raw: list[tuple[int, int, int]], keep: int) -> None:
    runs = [Run(*r) for r in raw]
    spans = coalesce(current_epoch(runs))
    assume(spans)
    cut = window_start(spans, keep)
    floors = seek_floors(spans, cut, None)
    if cut == 0:
        assert floors is None
    assert_seekable(floors, spans[cut:], runs)
    # the lowest such position: one span lower is a rewind or an invalid cut
    if floors is not None:
        (start,) = [k for k, s in enumerate(spans) if s.downstream_offset == floors[1]]
        assert start < cut
        if start > 0:
            prev = start - 1
            rewind_free = spans[start].upstream_offset >= spans[prev].upstream_end
            valid = (max((s.upstream_end for s in spans[:prev]), default=0)
                     <= min(s.upstream_offset for s in spans[prev:]))
            assert not (rewind_free and valid)


@settings(max_examples=300, deadline=None)
@given(st.lists(replication_logs(), min_size=2, max_size=6), st.integers(1, 2))
def test_property_seek_floors_carried_over_refreshes_stay_exact(
        logs: list[list[tuple[int, int, int]]], keep: int) -> None:
    """Refresh after refresh, as ``ledger.span_refresh`` does: the window extended with the
    runs written since, cut again, its seek floors carried or computed afresh."""
    runs: list[Run] = []
    window: list[Run] = []
    carried: tuple[int, int] | None = None
    left_out = 0
    for log in logs:
        # each log continues past what is covered (a rewind into it is read raw, not extended)
        high_u = max((r.upstream_end for r in runs), default=0)
        high_d = max((r.downstream_end for r in runs), default=0)
        tail = [Run(u + high_u, d + high_d, n) for u, d, n in log]
        runs = runs + tail
        extended = extend(window, tail)
        if extended is None or any(epoch_starts(window[-1:] + tail)[1:]):
            window, carried, left_out = coalesce(current_epoch(runs)), None, 0  # read raw
        else:
            window = extended
        assume(window)
        cut = window_start(window, keep)
        carried = (seek_floors(window, cut, carried if left_out else None)
                   if left_out + cut else None)
        left_out += cut
        window = window[cut:]
        assert_window_answers(window, runs)
        assert_seekable(carried, window, runs)


def test_seek_floors_of_an_exactly_once_history_are_its_start() -> None:
    runs = [Run(u, 2 * u, 1) for u in range(50)]
    spans = coalesce(runs)
    assert seek_floors(spans, 40, None) == (0, 0)
    assert seek_floors(spans, 40, (7, 14)) == (7, 14)     # carried: still rewind-free
    assert seek_floors(spans, 0, (7, 14)) == (7, 14)      # nothing newly left out
    # a restart from 10 after 20 records: the floors move above the rewind's reach
    again = [Run(u, 40 + 2 * (u - 10), 1) for u in range(10, 60)]
    spans = coalesce([Run(u, 2 * u, 1) for u in range(20)] + again)
    floors = seek_floors(spans, 60, None)
    assert floors == (20, 60)  # the first start at or above every earlier end (20)
    assert seek_floors(spans, 60, (0, 0)) == (20, 60)     # the rewind drops the carried ones
