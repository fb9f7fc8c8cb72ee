"""The one readiness rule, as pure data: does what a group committed have copies behind it?

DESIGN.md "Readiness for a move". Every verdict on readiness (``status``, ``failover``,
``failback``, the ``group_ready`` metric) is a :class:`CommitCoverage` built by
:func:`pipelines.checkpoint.readiness.assess`; this module holds only the data and the rule, so
that the rule is unit-tested without a cluster.

One rule, both directions. A group committed ``c`` on its topic ``t[p]`` on the move's source S;
the runs of the flow that copied ``t`` (forward: ``t`` is the original; reverse: ``t`` is the
replica) end at ``e`` on ``t``'s side (``RecordedEnd``). With no run at all, ``e`` is ``t[p]``'s
log start on S: nothing before it can be copied any more::

    t[p] on S   log start ... e ........ c ........ end
                              [e, c): committed records there are ones the group read that
                                      have no recorded copy: wait until they do
    covered  <=>  c <= e,  or no committed record lies in [e, c)
                  (only transaction markers or aborted records, never copied: read_committed)

        forward   upstream ... 1439 1440 1441 | 1442 (txn marker) 1443 (aborted) | 1444 = c
                  runs end here -----------^   nothing committed in [1442, 1444): covered
        empty     a partition that received nothing: no run, log start 0, c = 0: covered

A covered commit with no run behind it (``from_log_start``) has nothing the group read that a
copy could stand for: the move resumes the group at the log start of the partition on the
target, never at a guessed offset (the translation itself stays "cannot translate").

Invariants:
    * "Cannot tell" (``committed_left`` None: an open transaction holds the last stable offset)
      is never covered: waiting is always safe, a wrong "ready" is not.
    * Several groups committing the same partition need only the highest offset
      (:func:`needs_for`); a covered highest offset covers every lower one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from pipelines.checkpoint.mapping import FORWARD


class Commit(Protocol):
    """A committed offset of a group on the move's source (``GroupCommit``)."""

    topic: str
    partition: int
    offset: int


class MappedTopic(Protocol):
    """How a topic of the source maps onto a flow's runs (``TopicMapping``)."""

    sync_flow: str
    sync_topic: str
    direction: str


@dataclass(frozen=True)
class Need:
    """An offset of ``source_topic`` (the group's topic on the move's source) that the runs of
    ``sync_flow`` for the original ``topic`` must cover for a move to be exact."""

    sync_flow: str
    topic: str          # the original topic, as the runs are keyed
    partition: int
    offset: int         # upstream offset (forward) or offset on the replica (reverse)
    direction: str
    source_topic: str = ""  # the topic the group committed on (the original, or the replica)

    @property
    def key(self) -> tuple[str, str, int]:
        return self.sync_flow, self.topic, self.partition

    @property
    def group_topic(self) -> str:
        return self.source_topic or self.topic


@dataclass
class CommitCoverage:
    """Whether the runs cover one committed offset the move translates (the rule above)."""

    direction: str          # 'forward' (original on S) | 'reverse' (replica on S)
    topic: str              # the group's topic on S
    partition: int
    committed: int
    replicated_to: int | None  # where the runs end on the topic's side (None: no run)
    committed_left: bool | None = True  # committed records in [base, committed)
    log_start: int | None = None  # the partition's log start on S (asked when no run)
    need: Need | None = None

    @property
    def base(self) -> int:
        """Where the recorded copies end: the runs' end, or the log start with no run."""
        if self.replicated_to is not None:
            return self.replicated_to
        return self.log_start or 0

    @property
    def missing(self) -> int:
        return max(0, self.committed - self.base)

    @property
    def covered(self) -> bool:
        return self.missing == 0 or self.committed_left is False

    @property
    def from_log_start(self) -> bool:
        """Covered with no run behind it: the move resumes at the target's log start."""
        return self.replicated_to is None and self.covered

    def describe(self, sync_flow: str | None = None) -> str:
        side = "" if self.direction == FORWARD else " (replica)"
        ends = self.replicated_to if self.replicated_to is not None else "nothing"
        start = "" if self.replicated_to is not None else f" (log start {self.base})"
        flow = f"{sync_flow} " if sync_flow else ""
        text = (f"{flow}{self.topic}[{self.partition}]{side} runs end at {ends}{start}, "
                f"group committed {self.committed}")
        if self.committed_left is None and not self.covered:
            text += " (an open transaction: cannot tell yet)"
        return text


def needs_for(commits: Iterable[Commit], mappings: Mapping[str, MappedTopic],
              ends: Mapping[tuple[str, int], int] | None = None) -> list[Need]:
    """What the runs must cover for ``commits``; with ``ends`` (a cutoff) the end offsets too.

    Several groups committing the same partition need only the highest offset.
    """
    best: dict[tuple[str, str, int, str, str], int] = {}
    for c in commits:
        m = mappings.get(c.topic)
        if m is None:
            continue
        offset = c.offset
        if ends is not None and m.direction == FORWARD:
            offset = max(offset, ends.get((c.topic, c.partition), offset))
        key = (m.sync_flow, m.sync_topic, c.partition, m.direction, c.topic)
        best[key] = max(best.get(key, offset), offset)
    return [Need(f, t, p, o, d, s) for (f, t, p, d, s), o in sorted(best.items())]


def log_start_keys(coverage: Iterable[CommitCoverage]) -> set[tuple[str, str, int]]:
    """``{(direction, group topic, partition)}`` the move resumes at the target's log start."""
    return {(c.direction, c.topic, c.partition) for c in coverage if c.from_log_start}
