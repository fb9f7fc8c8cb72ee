"""Reading below a window by time: the runs a store needs for an offset under its window.

A windowed partition (:mod:`ledger.span_snapshots`) answers offsets at or above its window's
floors; below them a store used to read the partition's whole epoch, a scan of the flow's
history. Between the window and its **seek floors** (:func:`ledger.spans.seek_floors`: the
left-out spans from there on are rewind-free and every position among them is a valid cut)
:func:`seek` reads instead the partition's runs written in slices of time going back from the
snapshot, each slice ``SEEK_GROWTH`` times longer than the one before, until the oldest run
it holds lies at or below the offset asked::

    written_at   ....|<- slice 3 (16 min) ->|<- slice 2 ->|<- 1 ->| covered_until | tail
    runs         ... R ...... j .............................. | window ...
                             ^ the first run held at or below the offset: stop here
    the runs from j to the window, prepended to it, answer every offset >= (u_j, d_j)

Invariants:
    * Exact: the runs kept are the current epoch's from some position ``j`` at or above the
      seek floors' ``R`` up to the window, all of them (a slice holds every run written in it),
      so ``j`` is a valid cut and the window's cut theorem (:mod:`ledger.spans`) makes them
      answer every offset at or above ``(u_j, d_j)`` as the whole epoch does.
    * The epoch is the current one: a run whose replica offset is below the previous run's end
      starts an epoch (:func:`ledger.translation.epoch_starts`) and nothing before the last such
      start is kept; a slice that starts exactly at the epoch's first run holds no earlier one.
    * Bounded by the offset's age, not the flow's: the slices read add up to at most
      ``SEEK_GROWTH`` times the time between the offset's run and the snapshot (plus the first
      slice). An offset below the seek floors, or one the slices do not reach within
      ``SEEK_LIMIT``, is left to the caller, which reads the whole epoch as before.
    * No I/O here: ``read`` is the store's (delta-rs or Spark, at the store's version).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ledger.translation import Run, epoch_starts

__all__ = ["SEEK_FIRST_STEP", "SEEK_GROWTH", "SEEK_LIMIT", "Reader", "Target", "seek"]

Key = tuple[str, int]

SEEK_FIRST_STEP = dt.timedelta(minutes=1)
"""The first slice of time read back from the snapshot's ``covered_until``."""

SEEK_GROWTH = 4
"""Each slice is this many times as long as the one before (a geometric search: the slices
read add up to at most this many times the offset's age)."""

SEEK_LIMIT = dt.timedelta(days=3660)
"""A seek that has not reached the offset after going back this far gives up (the caller reads
the whole epoch): more than the ledger's retention ever keeps."""

Reader = Callable[[set[Key], dt.datetime, dt.datetime], Iterable[Mapping]]
"""``read(keys, after, until)``: the ``offset_syncs`` rows of those partitions with ``after <
written_at <= until`` (``topic``, ``partition``, ``upstream_offset``, ``downstream_offset``,
``length``, ``written_at``, ``batch_id``), at the store's version, in any order."""


@dataclass(frozen=True)
class Target:
    """What one partition's seek must reach.

    Attributes:
        upstream: the lowest upstream offset to answer (forward), or ``None``.
        downstream: the lowest replica offset to answer (reverse), or ``None``.
        floors: the partition's seek floors ``(U_R, D_R)``; the offsets are at or above them.
        window: the replica offset of the window's first run (every run kept is below it).
    """

    upstream: int | None
    downstream: int | None
    floors: tuple[int, int]
    window: int

    def reached(self, runs: list[Run]) -> bool:
        """Whether ``runs`` (kept, write order) answer the offsets: they start at or below."""
        if not runs:
            return False
        low_u = min(r.upstream_offset for r in runs)
        return ((self.upstream is None or self.upstream >= low_u)
                and (self.downstream is None or self.downstream >= runs[0].downstream_offset))


def kept(rows: list[Mapping], target: Target) -> list[Run]:
    """The runs of ``rows`` (one partition, write order) to prepend to its window: the current
    epoch's from the seek floors' ``R`` up to the window."""
    runs = [Run(r["upstream_offset"], r["downstream_offset"], r["length"]) for r in rows]
    start = max((i for i, first in enumerate(epoch_starts(runs)) if first), default=0)
    return [r for r in runs[start:]
            if target.floors[1] <= r.downstream_offset < target.window]


def seek(read: Reader, covered_until: dt.datetime, until: dt.datetime,
         targets: Mapping[Key, Target], first_step: dt.timedelta = SEEK_FIRST_STEP,
         ) -> dict[Key, list[Run]]:
    """The runs to prepend to each target partition's window (see the module docstring).

    Args:
        read: the store's reader of runs written in a slice of time.
        covered_until: the snapshot's ``covered_until``; slices go back from it.
        until: the newest ``written_at`` the snapshot covers (``tail_start``): the first
            slice's end.
        targets: per partition, what to reach.
        first_step: the first slice's length.

    Returns:
        Per partition reached, its runs from the first one at or below its offsets up to its
        window, in write order. A partition absent was not reached: read its whole epoch.
    """
    found: dict[Key, list[Run]] = {}
    rows: dict[Key, list[Mapping]] = {key: [] for key in targets}
    pending = set(targets)
    step, end = first_step, until
    while pending and step <= SEEK_LIMIT:
        start = covered_until - step
        fresh: dict[Key, list[Mapping]] = {}
        for row in read(set(pending), start, end):
            fresh.setdefault((row["topic"], row["partition"]), []).append(row)
        for key in sorted(pending):
            older = sorted(fresh.get(key, []), key=lambda r: (r["written_at"], r["batch_id"],
                                                              r["downstream_offset"]))
            rows[key] = older + rows[key]
            runs = kept(rows[key], targets[key])
            if targets[key].reached(runs):
                found[key] = runs
                pending.discard(key)
            elif runs and runs[0].downstream_offset == targets[key].floors[1]:
                pending.discard(key)  # at R and still above the offset: not seekable after all
        step, end = step * SEEK_GROWTH, start
    return found
