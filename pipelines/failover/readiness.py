"""Readiness for a move: do the recorded runs cover what the groups have committed?

DESIGN.md "Readiness for a move": a continuous failover or failback (producers still writing)
waits only until the runs cover the groups' committed offsets; what comes after keeps
replicating and the group reads it on the replica. A cutoff move waits until the runs cover
the end offsets. Per committed offset ``c`` of a group partition::

    forward  (G read the original on S)   covered when the runs' upstream end >= c
                                           or [upstream end, c) holds no committed record
    reverse  (G read a replica on S)      covered when the runs' downstream end >= c
                                           (G read no copy the ledger has not recorded)

        upstream   ... 1439 1440 1441 | 1442 (txn marker) 1443 (aborted) | 1444 = c
        runs end here ---------------^   nothing committed in [1442, 1444): covered

Invariants:
    * Reads only: the ledger (``replication_progress``, then the runs of the partitions still
      in doubt) and Kafka (read_committed probes); nothing is written.
    * A gap that cannot be told (an open transaction holds the last stable offset) is not
      covered: waiting is always safe, a wrong "ready" is not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import functions as F

from ledger.config import Config
from ledger.records import ProgressRecord
from ledger.schemas import REPLICATION_PROGRESS
from ledger.store import OffsetSyncStore
from ledger.tables import Ledger
from pipelines import kafka_admin
from pipelines.checkpoint.compute import Commit
from pipelines.checkpoint.mapping import FORWARD, TopicMapping


@dataclass(frozen=True)
class Need:
    """An offset the runs of ``sync_flow`` must cover for a move to be exact."""

    sync_flow: str
    topic: str          # the original topic, as the runs are keyed
    partition: int
    offset: int         # upstream offset (forward) or offset on the replica (reverse)
    direction: str

    @property
    def key(self) -> tuple[str, str, int]:
        return self.sync_flow, self.topic, self.partition


@dataclass(frozen=True)
class Gap:
    """A need the runs do not cover yet; ``replicated_to`` is where they end (None: no runs)."""

    need: Need
    replicated_to: int | None

    @property
    def records(self) -> int:
        return self.need.offset - (self.replicated_to or 0)

    def describe(self) -> str:
        n = self.need
        side = "" if n.direction == FORWARD else " (replica)"
        return (f"{n.sync_flow} {n.topic}[{n.partition}]{side} runs end at "
                f"{self.replicated_to if self.replicated_to is not None else 'nothing'}, "
                f"group committed {n.offset}")


def needs_for(commits: Iterable[Commit], mappings: dict[str, TopicMapping],
              ends: dict[tuple[str, int], int] | None = None) -> list[Need]:
    """What the runs must cover for ``commits``; with ``ends`` (a cutoff) the end offsets too.

    Several groups committing the same partition need only the highest offset.
    """
    best: dict[tuple[str, str, int, str], int] = {}
    for c in commits:
        m = mappings.get(c.topic)
        if m is None:
            continue
        offset = c.offset
        if ends is not None and m.direction == FORWARD:
            offset = max(offset, ends.get((c.topic, c.partition), offset))
        key = (m.sync_flow, m.sync_topic, c.partition, m.direction)
        best[key] = max(best.get(key, offset), offset)
    return [Need(f, t, p, o, d) for (f, t, p, d), o in sorted(best.items())]


class Coverage:
    """Answers "which needs are not covered yet?" against one ledger and the clusters."""

    def __init__(self, config: Config, ledger: Ledger):
        self.config = config
        self.ledger = ledger

    def gaps(self, needs: list[Need]) -> list[Gap]:
        if not needs:
            return []
        progress = self._progress({n.sync_flow for n in needs if n.direction == FORWARD})
        doubtful = [n for n in needs
                    if n.direction != FORWARD or progress.get(n.key, -1) < n.offset]
        stores = self._stores(doubtful)
        gaps: list[Gap] = []
        for n in doubtful:
            store = stores[n.sync_flow]
            if n.direction == FORWARD:
                ends = [e for e in (store.upstream_end(n.topic, n.partition),
                                    progress.get(n.key)) if e is not None]
            else:
                ends = [e for e in [store.downstream_end(n.topic, n.partition)] if e is not None]
            got = max(ends) if ends else None
            if got is None or got < n.offset:
                gaps.append(Gap(n, got))
        return self._drop_marker_tails(gaps)

    def _progress(self, flows: set[str]) -> dict[tuple[str, str, int], int]:
        """``replication_progress``: one small row per partition, answers most needs."""
        if not flows or not self.ledger.exists(REPLICATION_PROGRESS):
            return {}
        progress = ProgressRecord.from_rows(self.ledger.read(REPLICATION_PROGRESS)
                                            .where(F.col("flow").isin(sorted(flows))).collect())
        return {(p.flow, p.topic, p.partition): p.next_upstream_offset
                for p in progress if p.next_upstream_offset is not None}

    def _stores(self, needs: list[Need]) -> dict[str, OffsetSyncStore]:
        """Each flow's spans, of the needed partitions only."""
        wanted: dict[str, set[tuple[str, int]]] = {}
        for n in needs:
            wanted.setdefault(n.sync_flow, set()).add((n.topic, n.partition))
        return {flow: OffsetSyncStore.load(self.ledger, flow,
                                           topics={t for t, _ in keys}, partitions=keys)
                for flow, keys in wanted.items()}

    def _drop_marker_tails(self, gaps: list[Gap]) -> list[Gap]:
        """Forward gaps of only transaction markers and aborted records are covered."""
        by_flow: dict[str, dict[tuple[str, int], tuple[int, int]]] = {}
        for g in gaps:
            n = g.need
            if n.direction == FORWARD and g.replicated_to is not None:
                by_flow.setdefault(n.sync_flow, {})[(n.topic, n.partition)] = (
                    g.replicated_to, n.offset)
        empty: set[tuple[str, str, int]] = set()
        for flow, ranges in by_flow.items():
            source = self.config.cluster(self.config.flow(flow).source)
            found = kafka_admin.committed_records_between(source, ranges)
            empty |= {(flow, t, p) for (t, p), has in found.items() if has is False}
        return [g for g in gaps
                if not (g.need.direction == FORWARD and g.need.key in empty)]


def replication_lag(config: Config, ledger: Ledger, needs: list[Need]) -> int:
    """Records the sources hold beyond the runs, for the forward partitions of ``needs``.

    Informational: a continuous move does not wait for them (they keep replicating).
    """
    forward = [n for n in needs if n.direction == FORWARD]
    if not forward:
        return 0
    by_source: dict[str, list[Need]] = {}
    for n in forward:
        by_source.setdefault(config.flow(n.sync_flow).source, []).append(n)
    stores = Coverage(config, ledger)._stores(forward)
    lag = 0
    for alias, group in by_source.items():
        ends = kafka_admin.end_offsets(config.cluster(alias), [(n.topic, n.partition)
                                                              for n in group])
        for n in group:
            got = stores[n.sync_flow].upstream_end(n.topic, n.partition) or 0
            lag += max(0, ends[(n.topic, n.partition)] - got)
    return lag
