"""What ``status`` concludes from the numbers it gathered: lag, caught up, ready to move a group.

Pure data and rules (no Spark, no Kafka), so every verdict can be unit-tested.

Invariants:
    * Offsets are "next offset to consume". A flow partition's *replicated-to* offset is where
      the ledger's runs of the current epoch end (or the source's log start when no run exists
      yet); its lag is ``source end - replicated-to`` in offsets.
    * A partition has caught up when its lag is 0, or when nothing committed lies in
      ``[replicated-to, end)`` (only transaction markers and aborted records, which are never
      copied). "Cannot tell" (an open transaction) is never caught up.
    * A group is ready to move ``S -> T`` when the runs cover every committed offset it has on S
      that the move translates: the one rule of :mod:`pipelines.checkpoint.coverage` (DESIGN.md,
      "Readiness for a move"), decided by ``pipelines.checkpoint.readiness.assess`` for
      ``status``, ``failover``, ``failback`` and the metric alike. The records after ``c`` may
      still be replicating: the group reads them on T.
    * An unreachable cluster is reported, never taken as caught up or ready.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from pipelines.checkpoint.coverage import CommitCoverage

__all__ = ["EXIT_CAUGHT_UP", "EXIT_NOT_CAUGHT_UP", "Checkpoint", "CommitCoverage", "CommitLag",
           "FlowStatus", "GroupStatus", "PartitionLag", "exit_code"]

EXIT_CAUGHT_UP = 0
EXIT_NOT_CAUGHT_UP = 3


@dataclass
class PartitionLag:
    """Replication of one source partition of a flow."""

    topic: str
    replica_topic: str
    partition: int
    end: int
    replicated_to: int
    has_runs: bool
    # committed_records_between over [replicated_to, end): False = nothing left to copy,
    # None = cannot tell, True = committed records left (or not asked: lag 0).
    committed_left: bool | None = True
    newest_record: dt.datetime | None = None
    last_run: dt.datetime | None = None

    @property
    def lag(self) -> int:
        return max(0, self.end - self.replicated_to)

    @property
    def caught_up(self) -> bool:
        return self.lag == 0 or self.committed_left is False


@dataclass
class FlowStatus:
    flow: str
    source: str
    target: str
    partitions: list[PartitionLag] = field(default_factory=list)
    error: str | None = None            # a cluster unreachable, nothing measured
    last_run: dt.datetime | None = None
    heartbeat: dt.datetime | None = None  # timestamp of the newest replicated heartbeat

    @property
    def caught_up(self) -> bool:
        return self.error is None and all(p.caught_up for p in self.partitions)

    @property
    def lag(self) -> int:
        """Offsets left to copy in partitions that have not caught up."""
        return sum(p.lag for p in self.partitions if not p.caught_up)

    def partition(self, topic: str, partition: int) -> PartitionLag | None:
        for p in self.partitions:
            if (p.topic, p.partition) == (topic, partition):
                return p
        return None


@dataclass
class CommitLag:
    """A group's committed offset on one cluster, with the partition's end offset."""

    cluster: str
    topic: str
    partition: int
    offset: int
    end: int | None

    @property
    def lag(self) -> int | None:
        return None if self.end is None else max(0, self.end - self.offset)


@dataclass
class Checkpoint:
    newest: dt.datetime
    partitions: int


@dataclass
class GroupStatus:
    """One group and one flow ``S->T``: the possible move of the group from S to T."""

    group: str
    flow: str
    source: str
    target: str
    commits: dict[str, list[CommitLag]] = field(default_factory=dict)   # cluster -> commits
    errors: dict[str, str] = field(default_factory=dict)             # cluster -> why unread
    coverage: list[CommitCoverage] = field(default_factory=list)
    checkpoint: Checkpoint | None = None
    flow_caught_up: bool = False     # every partition of the group's topics caught up
    last_move: tuple[str, str] | None = None  # (from, to) of its newest recorded operation
    acl_check: dict | None = None  # the move's ACL check on T (pipelines.acls.check)

    @property
    def kind(self) -> str:
        """``failback`` when the group's newest operation moved it T -> S (it goes back), or,
        with no operation recorded, when it reads only replicas of T's topics on S."""
        if self.last_move is not None:
            return "failback" if self.last_move == (self.target, self.source) else "failover"
        reverse = self.coverage and all(c.direction == "reverse" for c in self.coverage)
        return "failback" if reverse else "failover"

    @property
    def applicable(self) -> bool:
        """The group has something to move: committed offsets on S that the flow translates."""
        return self.source not in self.errors and bool(self.coverage)

    @property
    def ready(self) -> bool:
        return self.applicable and all(c.covered for c in self.coverage)

    @property
    def missing(self) -> int:
        return sum(c.missing for c in self.coverage if not c.covered)

    @property
    def source_lag(self) -> int:
        mapped = {(c.topic, c.partition) for c in self.coverage}
        return sum(c.lag or 0 for c in self.commits.get(self.source, [])
                   if (c.topic, c.partition) in mapped)

    @property
    def verdict(self) -> str:
        verb = "fail back" if self.kind == "failback" else "fail over"
        if self.source in self.errors:
            # Never a hint to fail over on disaster: the error may be credentials or network
            # on this side (DESIGN.md: disaster mode is explicit, never inferred from an error).
            return f"cannot tell: {self.errors[self.source]}"
        if not self.coverage:
            if not self.commits.get(self.source):
                return f"nothing to move: no committed offsets on {self.source}"
            return f"nothing to move: no topic it committed on {self.source} is in {self.flow}"
        if self.ready:
            return f"ready to {verb} {self.source} -> {self.target}"
        unknown = [c for c in self.coverage if not c.covered and c.committed_left is None]
        text = f"wait: {self.missing:,} records not yet replicated"
        if unknown:
            text += f" ({len(unknown)} partition(s) with an open transaction)"
        return text

    @property
    def cutoff_ready(self) -> bool:
        return self.ready and self.source_lag == 0 and self.flow_caught_up

    @property
    def cutoff_verdict(self) -> str:
        if not self.applicable:
            return "-"
        if self.cutoff_ready:
            return (f"cutoff: ready once producers to {self.source} have stopped "
                    "(group read everything, replication caught up)")
        reasons = []
        if self.source_lag:
            reasons.append(f"group has {self.source_lag:,} records to read on {self.source}")
        if not self.flow_caught_up:
            reasons.append("replication has not caught up")
        if not self.ready:
            reasons.append(f"{self.missing:,} committed records not yet replicated")
        return "cutoff: wait: " + ", ".join(reasons)


def exit_code(flows: list[FlowStatus], groups: list[GroupStatus],
              groups_only: bool = False) -> int:
    """0 when every shown flow caught up and every shown group is ready, else 3.

    A group is ready when it has at least one possible move and every possible move is ready;
    a group with nothing to move anywhere (no commits, a typo) is not ready. ``groups_only``
    ignores the flows' own lag (continuous failover: producers keep writing).
    """
    if not groups_only and not all(f.caught_up for f in flows):
        return EXIT_NOT_CAUGHT_UP
    if groups_only and not groups:
        return EXIT_NOT_CAUGHT_UP
    by_group: dict[str, list[GroupStatus]] = {}
    for g in groups:
        by_group.setdefault(g.group, []).append(g)
    for statuses in by_group.values():
        if any(s.source in s.errors for s in statuses):
            return EXIT_NOT_CAUGHT_UP
        moves = [s for s in statuses if s.applicable]
        if not moves or not all(s.ready for s in moves):
            return EXIT_NOT_CAUGHT_UP
    return EXIT_CAUGHT_UP
