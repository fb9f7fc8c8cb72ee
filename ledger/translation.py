"""Offset translation over runs: ``forward`` (original -> replica), ``reverse`` (the way back).

This module is the reference implementation of the rule in DESIGN.md, "Translation rule (one
rule, both directions)". It is pure Python, has no state and no I/O; the dbt models that
translate over the ledger mirror it, and a property test compares the two.

Vocabulary (one flow partition):
    * A **run** ``(u, d, n)`` says that upstream records ``u .. u+n-1`` were written, in order, at
      downstream offsets ``d .. d+n-1``. MirrorMaker 2's offset-syncs are runs with ``n = 1``.
    * ``runs`` is the partition's sequence of runs **in the order they were written**.
    * Every offset is a "next offset to consume": a group at ``x`` has processed everything
      below ``x`` and nothing from ``x`` on.

Offset arithmetic (the example of DESIGN.md)::

    upstream   100 101 102 103 | gap | 110 111        run A = (u=100, d=500, n=4)
                |   |   |   |          |   |
    replica    500 501 502 503        504 505        run B = (u=110, d=504, n=2)

    record u+k of a run sits at d+k, for 0 <= k < n;  the run ends at u+n upstream, d+n downstream

    forward(102) = 502   first record >= 102 is 102, at 500 + (102 - 100)
    forward(105) = 504   records 104..109 do not exist; A ends at 504, B's first record is at 504
    forward(112) = 506   past the last run: B's end, where the next copy will land
    reverse(503) = 103   read 500..502 = records 100..102; 503 holds record 103
    reverse(504) = 110   read all of A; 504 holds record 110
    reverse(506) = 112   read all of A and B

Epochs:
    A run whose ``d`` is below the end ``d + n`` of an earlier run of the current epoch starts a
    new **downstream epoch**: the replica was truncated or recreated and every earlier run no
    longer counts. Within an epoch the runs never overlap downstream and their ends strictly
    increase, so the earlier run with the highest end is simply the previous run: a run starts
    an epoch exactly when ``d < previous.d + previous.n`` (in SQL, a ``LAG`` over the write
    order, and the epoch number is a running count of epoch starts). Only the current (last)
    epoch is used by ``forward`` and ``reverse``. Within it, the *upstream* offsets need not
    increase: a replication restart or rewind copies records again, further downstream.

The rule (on the runs of the current epoch):
    * ``reverse(c)``: over the runs with ``d <= c``, the largest ``u + min(c - d, n)``; ``None``
      when no run has ``d <= c``.
    * ``forward(x)``: ``None`` when no run has ``u <= x``. Otherwise the smallest candidate,
      where the candidates are, for every run holding a record ``>= x`` (``u + n > x``), the
      position of its first such record ``d + max(0, x - u)``; and for every run ending at or
      before ``x`` (``u + n <= x``) such that no run starts in ``[u + n, x]``, its end ``d + n``.

Invariants (checked by tests/ledger/test_translation.py):
    * Safety, forward: a consumer starting at ``forward(x)`` meets a copy of every record
      ``>= x`` that any run of the epoch holds, and ``forward(x)`` is at most the end of the
      epoch's last run, so records replicated later are met as well. Nothing is skipped, even
      after a rewind, a restart half way through a batch or an upstream gap. After a rewind the
      answer may be lower than needed (records are re-read, never skipped).
    * Safety, reverse: when the replicator copies in upstream order and only ever restarts from
      a record between the epoch's first copied record and the end of what the runs record (a
      committed offset), every existing upstream record from the epoch's first one up to
      ``reverse(c)`` has a copy below ``c``. ``reverse(c)`` is one past the highest record read
      below ``c``, or the record at ``c`` when that is higher: copies no run records (a batch
      that stopped before the ledger write) are not credited, so they are read again.
    * Exactness: without a rewind, everything from ``forward(x)`` on is ``>= x`` (no re-read)
      and ``reverse`` is exact. With point syncs (``n = 1``) in increasing order, ``forward`` is
      MirrorMaker 2's ``translateDownstream`` (exact match -> ``d``, otherwise the latest sync
      below ``x`` -> ``d + 1``) and ``reverse`` the reference reverse-checkpointing rule.
    * Both functions are monotonic (non-decreasing) in the offset for fixed runs.
    * "Cannot translate" is ``None``, never ``-1`` or any other offset.

Every function is ``O(len(runs) * log(len(runs)))`` per call at most: the end-candidate test of
``forward`` (a ``NOT EXISTS`` sub-query in SQL) is a binary search in the sorted run starts of
the epoch, so a year of history stays cheap. The candidates are exposed by
:func:`forward_candidates` and :func:`reverse_candidates`, so that the SQL models can be
compared with this module candidate by candidate.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

__all__ = [
    "Candidate",
    "CandidateKind",
    "Run",
    "RunLike",
    "current_epoch",
    "epoch_starts",
    "forward",
    "forward_candidates",
    "reverse",
    "reverse_candidates",
]


@dataclass(frozen=True, slots=True)
class Run:
    """Upstream records ``u .. u+n-1`` written, in order, at downstream ``d .. d+n-1``.

    Attributes:
        upstream_offset: ``u``, offset of the run's first record in the original topic.
        downstream_offset: ``d``, offset of its copy in the replica.
        length: ``n >= 1``, the number of records in the run.

    Raises:
        TypeError: a field is not an ``int`` (``bool`` is refused).
        ValueError: an offset is negative or the length is below 1.
    """

    upstream_offset: int
    downstream_offset: int
    length: int

    def __post_init__(self) -> None:
        for name in ("upstream_offset", "downstream_offset", "length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"run {name} must be an int, got {value!r}")
        if self.upstream_offset < 0:
            raise ValueError(f"run upstream_offset must be >= 0, got {self.upstream_offset}")
        if self.downstream_offset < 0:
            raise ValueError(f"run downstream_offset must be >= 0, got {self.downstream_offset}")
        if self.length < 1:
            raise ValueError(f"run length must be >= 1, got {self.length}")

    @property
    def upstream_end(self) -> int:
        """``u + n``: the upstream offset just past the run."""
        return self.upstream_offset + self.length

    @property
    def downstream_end(self) -> int:
        """``d + n``: the downstream offset just past the run, where the next copy lands."""
        return self.downstream_offset + self.length

    @classmethod
    def of(cls, run: RunLike) -> Run:
        """A :class:`Run` from a ``Run`` or a ``(upstream_offset, downstream_offset, length)``.

        Raises:
            TypeError: ``run`` is neither a ``Run`` nor a sequence of three ints.
            ValueError: as for :class:`Run`.
        """
        if isinstance(run, Run):
            return run
        if isinstance(run, str | bytes) or not isinstance(run, Sequence) or len(run) != 3:
            raise TypeError(
                "a run must be a Run or an (upstream_offset, downstream_offset, length) "
                f"triple, got {run!r}"
            )
        return cls(run[0], run[1], run[2])


RunLike: TypeAlias = Run | tuple[int, int, int]


class CandidateKind(StrEnum):
    """Where a candidate comes from (the ``kind`` column of the SQL models)."""

    FIRST_RECORD = "first_record"
    """forward: a run holding records ``>= x``; the position of its first such record."""
    RUN_END = "run_end"
    """forward: a run ending at or before ``x``, no run starting in ``[u + n, x]``; ``d + n``."""
    NEXT_UNREAD = "next_unread"
    """reverse: a run with ``d <= c``; the first of its records not read, ``u + min(c - d, n)``."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One run's candidate answer; the translation is the min (forward) or max (reverse).

    Attributes:
        kind: which clause of the rule produced it.
        offset: the candidate offset (downstream for forward, upstream for reverse).
        run: the run it comes from.
        run_index: the run's position in the ``runs`` argument (its write order), so that a
            translation can be traced back to the ledger rows behind it.
    """

    kind: CandidateKind
    offset: int
    run: Run
    run_index: int


def _check_offset(offset: int, what: str) -> None:
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"{what} must be an int, got {offset!r}")
    if offset < 0:
        raise ValueError(f"{what} must be >= 0, got {offset}")


def epoch_starts(runs: Iterable[RunLike]) -> list[bool]:
    """For each run, in write order, whether it starts a new downstream epoch.

    The first run starts the first epoch; any other run starts one when its downstream offset is
    below the end of the previous run (the highest end of the current epoch, see the module
    docstring). In SQL: ``COALESCE(d < LAG(d + n) OVER (ORDER BY write_order), TRUE)``.

    Args:
        runs: the partition's runs in the order they were written.

    Returns:
        One flag per run.

    Raises:
        TypeError, ValueError: a run is malformed (see :class:`Run`).
    """
    flags: list[bool] = []
    previous: Run | None = None
    for item in runs:
        run = Run.of(item)
        flags.append(previous is None or run.downstream_offset < previous.downstream_end)
        previous = run
    return flags


def _current_epoch_indexed(runs: Iterable[RunLike]) -> list[tuple[int, Run]]:
    epoch: list[tuple[int, Run]] = []
    for index, item in enumerate(runs):
        run = Run.of(item)
        if epoch and run.downstream_offset < epoch[-1][1].downstream_end:
            epoch = []
        epoch.append((index, run))
    return epoch


def current_epoch(runs: Iterable[RunLike]) -> list[Run]:
    """The runs of the current (last) downstream epoch, in write order.

    Args:
        runs: the partition's runs in the order they were written.

    Returns:
        The runs from the last epoch start on; empty when ``runs`` is empty.

    Raises:
        TypeError, ValueError: a run is malformed (see :class:`Run`).
    """
    return [run for _, run in _current_epoch_indexed(runs)]


def reverse_candidates(runs: Iterable[RunLike], offset: int) -> list[Candidate]:
    """The candidates of ``reverse(runs, offset)``: one per epoch run with ``d <= offset``.

    Each is ``u + min(offset - d, n)``: the first record of that run the group has not read a copy
    of from it (``u + n`` when it read the whole run).

    Args:
        runs: the partition's runs in the order they were written.
        offset: ``c``, the group's offset on the replica (next offset to consume).

    Returns:
        The candidates, in write order.

    Raises:
        TypeError, ValueError: ``offset`` is not a non-negative int, or a run is malformed.
    """
    _check_offset(offset, "downstream offset")
    return [
        Candidate(
            CandidateKind.NEXT_UNREAD,
            run.upstream_offset + min(offset - run.downstream_offset, run.length),
            run,
            index,
        )
        for index, run in _current_epoch_indexed(runs)
        if run.downstream_offset <= offset
    ]


def reverse(runs: Iterable[RunLike], offset: int) -> int | None:
    """Translate a group's offset on the replica back to the original topic.

    Args:
        runs: the partition's runs ``(upstream_offset, downstream_offset, length)`` in the order
            they were written.
        offset: ``c``, the group's next offset to consume on the replica.

    Returns:
        The first upstream record the group has not read a copy of: over the current epoch's
        runs with ``d <= c``, the largest ``u + min(c - d, n)``. ``None`` when no such run exists
        (no runs, or ``c`` is before the epoch's first run).

    Raises:
        TypeError, ValueError: ``offset`` is not a non-negative int, or a run is malformed.
    """
    candidates = reverse_candidates(runs, offset)
    return max((c.offset for c in candidates), default=None)


def forward_candidates(runs: Iterable[RunLike], offset: int) -> list[Candidate]:
    """The candidates of ``forward(runs, offset)``, before the "translatable" test.

    For every run of the current epoch:

    * ``FIRST_RECORD`` when it holds records ``>= x`` (``u + n > x``): ``d + max(0, x - u)``;
    * ``RUN_END`` when it ends at or before ``x`` (``u + n <= x``) and no run of the epoch starts
      in ``[u + n, x]``: ``d + n``. In SQL, ``NOT EXISTS (SELECT 1 FROM epoch r2 WHERE r2.u
      BETWEEN r1.u + r1.n AND x)``.

    The candidates are computed even when ``forward`` returns ``None`` (no run has ``u <= x``).

    Args:
        runs: the partition's runs in the order they were written.
        offset: ``x``, the group's offset on the original topic (next offset to consume).

    Returns:
        The candidates, in write order (a run yields exactly one or none).

    Raises:
        TypeError, ValueError: ``offset`` is not a non-negative int, or a run is malformed.
    """
    _check_offset(offset, "upstream offset")
    x = offset
    epoch = _current_epoch_indexed(runs)
    starts = sorted(run.upstream_offset for _, run in epoch)
    candidates: list[Candidate] = []
    for index, run in epoch:
        if run.upstream_end > x:
            first = run.downstream_offset + max(0, x - run.upstream_offset)
            candidates.append(Candidate(CandidateKind.FIRST_RECORD, first, run, index))
        elif not _starts_within(starts, run.upstream_end, x):
            end = run.downstream_end
            candidates.append(Candidate(CandidateKind.RUN_END, end, run, index))
    return candidates


def _starts_within(sorted_starts: list[int], low: int, high: int) -> bool:
    """Whether some run starts in ``[low, high]`` (binary search in the sorted starts)."""
    i = bisect_left(sorted_starts, low)
    return i < len(sorted_starts) and sorted_starts[i] <= high


def forward(runs: Iterable[RunLike], offset: int) -> int | None:
    """Translate a group's offset on the original topic to the replica (failover).

    Args:
        runs: the partition's runs ``(upstream_offset, downstream_offset, length)`` in the order
            they were written.
        offset: ``x``, the group's next offset to consume on the original topic.

    Returns:
        The highest replica position, given the runs, from which the group still meets a copy of
        every record ``>= x``: the smallest of :func:`forward_candidates`. ``None`` when no run
        of the current epoch has ``u <= x`` (no runs, or ``x`` is before the first replicated
        record, where records below the runs may exist that were never copied).

    Raises:
        TypeError, ValueError: ``offset`` is not a non-negative int, or a run is malformed.
    """
    epoch = current_epoch(runs)
    _check_offset(offset, "upstream offset")
    if not any(run.upstream_offset <= offset for run in epoch):
        return None
    candidates = forward_candidates(epoch, offset)
    # Never empty here: the run with the highest upstream end <= x (when no run holds a record
    # >= x) has no run starting in [its end, x], since such a run would end higher.
    return min(c.offset for c in candidates)
