"""Spans: contiguous runs coalesced so that translation reads bounded data.

The raw runs of ``offset_syncs`` stay the audit record (one row per batch and upstream gap). A
**span** is a run ``(u, d, n)`` standing for a chain of runs consecutive in write order and
contiguous on both sides; :func:`coalesce` turns runs into spans such that
:func:`ledger.translation.forward` and :func:`ledger.translation.reverse` give the same answer
on the spans as on the runs, for every offset. ``ledger.store`` computes the same spans in Spark
(of the current epoch only) and collects them instead of the whole history.

The merge rule (one flow partition, runs in write order, ``e = u + n`` the upstream end)::

    a run B merges into the span S ending with run A when
        B directly follows A in write order,
        B.u == A.u + A.n  and  B.d == A.d + A.n          (contiguous both sides)
        and no other run of A's epoch ends upstream in (A.u, A.u + A.n]   (safety)
    the span becomes (S.u, S.d, S.n + B.n)

    upstream   10 11 12 | 13 14 | 15 16 17        runs (10,500,3) (13,503,2) (15,505,3)
    replica   500 ... 502 503 504 505 ... 507     -> one span (10, 500, 8)

    a rewind: the replicator copied 10..12, restarted from 11 and copied 11..17 again
    runs   R=(10,500,3)  A=(11,503,2)  B=(13,505,3)
    R ends upstream at 13, inside (A.u, A.e] = (11, 13]: A and B stay two spans
    (merged into (11,503,5), B's start 13 would vanish and forward(15) would become R's end
    503 instead of 507: records 11..14 read again; the rule keeps answers exactly equal)

Invariants (checked by tests/ledger/test_spans.py):
    * ``reverse(spans, c) == reverse(runs, c)`` and ``forward(spans, x) == forward(runs, x)``
      for every ``c`` and ``x``; ``current_epoch(spans)`` covers exactly the copies of
      ``current_epoch(runs)``, with the same highest upstream and downstream ends.
    * Why: ``reverse`` and the ``FIRST_RECORD`` candidates of ``forward`` are unchanged by any
      merge of contiguous runs (the span's record ``u + k`` still sits at ``d + k``), and so is
      "some run has ``u <= x``". A merge removes the interior starts ``r2.u .. rk.u`` of a chain
      ``r1 .. rk``; that changes a ``RUN_END`` candidate only when another run of the epoch ends
      in ``(r1.u, rk.u]`` (a rewind), which the safety condition excludes pair by pair.
    * Epochs are preserved: a run that starts an epoch has ``d`` below the previous end, so it
      is never contiguous with it; spans are in write order and every span ends where its last
      run ends, so the epoch rule finds the same epoch starts on the spans.
    * Every epoch is coalesced (the store only ever asks for the current one). Without a rewind
      (every run starts at or after the previous run's upstream end) the safety condition always
      holds and a contiguous history becomes a single span.
    * ``O(n log n)``: one sort of each epoch's upstream ends, one binary search per run.

Extending persisted spans (:func:`extend`, what ``ledger.span_snapshots`` does in Spark): the
current-epoch spans ``S`` of the runs ``R`` written up to some version, followed by the runs
``Z`` written after it, translate like ``R`` then ``Z`` when no run of ``Z`` starts upstream
below ``S``'s highest upstream end ``m`` (no rewind into the covered history)::

    reverse   a max over runs: decomposes, and S == R on it
    forward   x <  min u of Z:  Z adds FIRST_RECORD candidates only; starts of Z are all > x,
                                so none removes an end candidate of S or R: same minimum
              x >= min u of Z:  every run of S and R ends at or below m <= min u <= x, and that
                                start lies in [end, x]: no end candidate of S or R survives;
                                Z's end candidates are removed by starts in [end, x], and every
                                start of S or R is below m < any end of Z: the same for both
    epochs    S ends where R's last run ends, so Z's first run starts an epoch for both or
              for neither; a new epoch in Z drops S and R alike

A ``Z`` that rewinds below ``m`` gives ``None``: the caller recomputes from the raw runs.

Windows (:func:`window_start`, what a snapshot keeps of a partition whose spans never coalesce:
an exactly-once flow's runs are split by the transaction markers, MirrorMaker 2's syncs are
points): the spans from a **cut** ``k`` on answer exactly like the whole epoch for every offset
at or above the cut's floors, ``U = min u`` and ``D = d`` of the spans from ``k`` on::

    a cut at k is valid when  max(e of the spans before k)  <=  min(u of the spans from k on)

    upstream   ..prefix..| U .................       every prefix run ends at or below U
    replica    ..prefix..| D .................       (one epoch: ends increase downstream)

    forward(x), x >= U   a prefix run holds no record >= x (its end <= U <= x), and its end
                         is no candidate: the suffix run starting at U lies in [end, x];
                         prefix starts are below every suffix end: no suffix candidate changes
    reverse(c), c >= D   a prefix candidate is at most its end <= U <= the cut span's own
                         candidate u_k + min(c - D, n_k): the maximum is the suffix's
    ends                 the highest upstream and downstream ends are the suffix's

The cut stays valid when runs are appended without a rewind into the spans (what
:func:`extend` requires anyway), so a window extended with a tail keeps its floors. Below the
floors, a reader must read the partition's raw runs: ``ledger.store`` does, for that
partition only.

Seek floors (:func:`seek_floors`, what a snapshot keeps beside a window so that a read below
it costs the distance to the offset, not the age of the epoch): the floors of the lowest cut
``R`` of the left-out spans such that ``R`` is valid and the spans from ``R`` to the window
are **rewind-free** (each starts upstream at or above every end before it)::

    spans    ..before R..| R  r1  r2 ... | window ...        rewind-free:  u(next) >= e(prev)
    every position j in [R, window] is then a valid cut:
        ends before R   <= min u from R on  <= u_j           (R valid)
        ends in [R, j)  <= u_j <= every later u              (rewind-free: u and e increase)
        window's u      >= every left-out end                (the window's cut is valid)

So the runs written from any ``j`` in ``[R, window)`` on, prepended to the window, answer
exactly every offset at or above ``(u_j, d_j)``: a reader reads the partition's runs written
after some time, older and older, until the first run it holds lies at or below the offset
(``ledger.store``), never the whole epoch. A rewind (or a new epoch's start) among the left-out
spans moves ``R`` above it; below ``R`` the reader reads the whole epoch, as below a window
without seek floors. Carried from one refresh to the next (the left-out spans only grow at the
front of the window): the newly left-out spans keep the old ``R`` when they are rewind-free
themselves, since the old window's cut bounds every earlier end by their starts.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence

from ledger.translation import Run, RunLike, current_epoch, epoch_starts

__all__ = ["coalesce", "extend", "mergeable", "seek_floors", "window_start"]


def mergeable(runs: Iterable[RunLike]) -> list[bool]:
    """For each run, in write order, whether the next run may merge into it.

    ``True`` when the next run is contiguous with it on both sides and no other run of its epoch
    ends upstream in ``(u, u + n]``. The last run gives ``False``.

    Raises:
        TypeError, ValueError: a run is malformed (see :class:`ledger.translation.Run`).
    """
    items = [Run.of(r) for r in runs]
    flags = [False] * len(items)
    starts = [*epoch_starts(items), True]
    begin = 0
    for i in range(1, len(items) + 1):
        if not starts[i]:
            continue
        epoch = items[begin:i]
        ends = sorted(run.upstream_end for run in epoch)
        for k in range(len(epoch) - 1):
            a, b = epoch[k], epoch[k + 1]
            contiguous = (b.upstream_offset == a.upstream_end
                          and b.downstream_offset == a.downstream_end)
            if contiguous:  # a's own end is the one expected in (a.u, a.e]
                inside = (bisect_right(ends, a.upstream_end)
                          - bisect_right(ends, a.upstream_offset))
                flags[begin + k] = inside == 1
        begin = i
    return flags


def coalesce(runs: Iterable[RunLike]) -> list[Run]:
    """The spans of ``runs`` (write order in, write order out), see the module docstring.

    Args:
        runs: one flow partition's runs in the order they were written (every epoch).

    Returns:
        The spans, in write order; ``[]`` for no runs.

    Raises:
        TypeError, ValueError: a run is malformed (see :class:`ledger.translation.Run`).
    """
    items = [Run.of(r) for r in runs]
    spans: list[Run] = []
    merge_next = False
    for run, flag in zip(items, mergeable(items), strict=True):
        if merge_next:
            last = spans[-1]
            spans[-1] = Run(last.upstream_offset, last.downstream_offset,
                            last.length + run.length)
        else:
            spans.append(run)
        merge_next = flag
    return spans


def extend(spans: Iterable[RunLike], tail: Iterable[RunLike]) -> list[Run] | None:
    """The current-epoch spans of the runs ``spans`` stand for followed by ``tail``.

    Args:
        spans: the current-epoch spans of a flow partition's runs up to some point (write order).
        tail: the runs written after that point, in write order.

    Returns:
        The spans of the current epoch of the whole history, or ``None`` when a run of ``tail``
        starts upstream below the highest upstream end of ``spans`` (a rewind into what the
        spans cover: recompute from the raw runs). See the module docstring for why.
    """
    items, more = [Run.of(s) for s in spans], [Run.of(r) for r in tail]
    if items and more and (min(r.upstream_offset for r in more)
                           < max(s.upstream_end for s in items)):
        return None
    return coalesce(current_epoch(items + more))


def window_start(spans: Sequence[RunLike], keep: int) -> int:
    """Where a window of ``spans`` (one epoch, write order) may start: a valid cut, or 0.

    A partition holding at most ``2 * keep`` spans is kept whole (0): cutting each time a few
    spans arrive would rewrite the window at every refresh. Beyond, the newest valid cut (see
    the module docstring) that leaves at least ``keep`` spans; 0 when none is valid (a rewind
    spanning the whole history, which no window may hide).

    Args:
        spans: the current-epoch spans of one flow partition, in write order.
        keep: the fewest spans a window holds (``ledger.spans.window``).

    Returns:
        The index of the window's first span; ``0`` keeps them all.

    Raises:
        ValueError: ``keep`` is below 1.
    """
    if keep < 1:
        raise ValueError(f"a window keeps at least one span, got {keep}")
    items = [Run.of(s) for s in spans]
    if len(items) <= 2 * keep:
        return 0
    lowest = _lowest_starts(items)
    highest = 0  # max e of items[:k]
    best = 0
    for k in range(1, len(items) - keep + 1):
        highest = max(highest, items[k - 1].upstream_end)
        if highest <= lowest[k]:
            best = k
    return best


def seek_floors(spans: Sequence[RunLike], cut: int,
                carried: tuple[int, int] | None) -> tuple[int, int] | None:
    """The seek floors ``(U_R, D_R)`` of a window cut at ``cut`` (see the module docstring).

    Args:
        spans: one partition's current-epoch spans held before the cut (write order): the
            whole epoch, or a previous window extended with its tail.
        cut: where the new window starts (:func:`window_start`); ``spans[:cut]`` are left out.
        carried: the previous window's seek floors when ``spans`` starts at a previous window
            (``None``: that window had none, or ``spans`` is the whole epoch).

    Returns:
        The floors of the lowest valid cut ``R <= cut`` of ``spans`` from which the left-out
        spans are rewind-free, or ``carried`` when all of ``spans[:cut]`` are (the earlier
        ``R`` stands); ``None`` when no left-out span is seekable.
    """
    items = [Run.of(s) for s in spans]
    if cut == 0:
        return carried
    first = cut - 1  # spans[first:cut] rewind-free: each starts at or above the previous end
    while first > 0 and items[first].upstream_offset >= items[first - 1].upstream_end:
        first -= 1
    if first == 0 and carried is not None:
        return carried
    lowest = _lowest_starts(items)
    highest = max((s.upstream_end for s in items[:first]), default=0)
    for j in range(first, cut):
        if highest <= lowest[j]:
            return lowest[j], items[j].downstream_offset
        highest = max(highest, items[j].upstream_end)
    return None


def _lowest_starts(items: Sequence[Run]) -> list[int]:
    """``lowest[k]``: the lowest upstream start of ``items[k:]`` (one past the end: above all)."""
    lowest = [0] * (len(items) + 1)
    lowest[len(items)] = 1 << 62
    for k in range(len(items) - 1, -1, -1):
        lowest[k] = min(items[k].upstream_offset, lowest[k + 1])
    return lowest
