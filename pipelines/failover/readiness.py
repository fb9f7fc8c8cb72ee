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

One rule for ``failover``, ``failback`` and ``status``: where the recorded runs of a flow
partition end is :func:`recorded_ends` (the highest end of the current epoch's runs, or
``replication_progress``'s next upstream offset when higher), never "the newest run's end"::

    runs in write order   (u=0, d=0, n=100)  then a rewind  (u=50, d=100, n=10)
    newest run's end      60        <- a wrong "wait" for a group at 80
    highest epoch end     100       <- records 0..99 all have copies: a group at 80 is covered

Invariants:
    * Reads only: the ledger (``replication_progress``, then the runs of the partitions still
      in doubt) and Kafka (read_committed probes); nothing is written.
    * :func:`recorded_ends` is the only place the ends are decided; :class:`CoverageCheck` (a move)
      and ``pipelines.status.gather`` (status) both ask it.
    * A gap that cannot be told (an open transaction holds the last stable offset) is not
      covered: waiting is always safe, a wrong "ready" is not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ledger.config import Config
from ledger.engine import LedgerEngine, literals
from ledger.records import ProgressRecord
from ledger.schemas import REPLICATION_PROGRESS
from ledger.tables import Ledger
from pipelines import kafka_admin, kafka_offsets
from pipelines.checkpoint.compute import GroupCommit
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


def needs_for(commits: Iterable[GroupCommit], mappings: dict[str, TopicMapping],
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


Key = tuple[str, str, int]  # (flow, original topic, partition)


@dataclass(frozen=True)
class RecordedEnd:
    """Where the ledger's runs of one flow partition end (None: no runs recorded).

    ``upstream``: one past the highest original record the current epoch's runs hold, or
    ``replication_progress``'s next upstream offset when higher (MM2's Connect offsets);
    ``downstream``: one past the highest replica offset they hold.
    """

    upstream: int | None
    downstream: int | None

    def replicated_to(self, direction: str) -> int | None:
        """The end a committed offset of ``direction`` is compared with."""
        return self.upstream if direction == FORWARD else self.downstream


def progress_ends(engine: LedgerEngine, flows: set[str]) -> dict[Key, ProgressRecord]:
    """``replication_progress`` of ``flows``: one small row per partition."""
    if not flows or not engine.exists(REPLICATION_PROGRESS):
        return {}
    rows = engine.query(f"SELECT * FROM {{p}} WHERE flow IN {literals(flows)}",
                        p=REPLICATION_PROGRESS)
    return {(p.flow, p.topic, p.partition): p for p in ProgressRecord.from_rows(rows)}


def recorded_ends(engine: LedgerEngine | Ledger, keys: Iterable[Key],
                  enough: dict[Key, int] | None = None,
                  progress: dict[Key, ProgressRecord] | None = None) -> dict[Key, RecordedEnd]:
    """The one readiness rule's ends (see the module docstring) of each flow partition.

    ``enough`` (``{key: offset}``): a forward key whose progress row already reaches the offset
    needs no run read (the common case: one small table answers); its ends are the progress
    row's. Every other key's current-epoch spans are loaded (bounded, ``ledger.store``).
    ``progress`` may pass rows read already.
    """
    engine = LedgerEngine.of(engine)
    keys = sorted(set(keys))
    if progress is None:
        progress = progress_ends(engine, {k[0] for k in keys})
    enough = enough or {}
    ahead = {k: p.next_upstream_offset for k, p in progress.items()
             if p.next_upstream_offset is not None}
    doubtful = [k for k in keys if k not in enough or ahead.get(k, -1) < enough[k]]
    wanted: dict[str, set[tuple[str, int]]] = {}
    for flow, topic, partition in doubtful:
        wanted.setdefault(flow, set()).add((topic, partition))
    stores = {flow: engine.load_store(flow, topics={t for t, _ in parts}, partitions=parts)
              for flow, parts in sorted(wanted.items())}
    out = {}
    for key in keys:
        flow, topic, partition = key
        store = stores.get(flow)
        upstream = [e for e in (ahead.get(key), store and store.upstream_end(topic, partition))
                    if e is not None]
        downstream = store.downstream_end(topic, partition) if store is not None else None
        out[key] = RecordedEnd(max(upstream) if upstream else None, downstream)
    return out


class CoverageCheck:
    """Answers "which needs are not covered yet?" against one ledger and the clusters."""

    def __init__(self, config: Config, ledger: LedgerEngine | Ledger):
        self.config = config
        self.engine = LedgerEngine.of(ledger)

    def gaps(self, needs: list[Need]) -> list[Gap]:
        if not needs:
            return []
        enough = {n.key: n.offset for n in needs if n.direction == FORWARD}
        ends = recorded_ends(self.engine, {n.key for n in needs}, enough)
        gaps = [Gap(n, ends[n.key].replicated_to(n.direction)) for n in needs]
        gaps = [g for g in gaps if g.replicated_to is None or g.replicated_to < g.need.offset]
        return self._drop_marker_tails(gaps)

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


def replication_lag(config: Config, ledger: LedgerEngine | Ledger, needs: list[Need]) -> int:
    """Records the sources hold beyond the runs, for the forward partitions of ``needs``.

    Informational: a continuous move does not wait for them (they keep replicating).
    """
    forward = [n for n in needs if n.direction == FORWARD]
    if not forward:
        return 0
    by_source: dict[str, list[Need]] = {}
    for n in forward:
        by_source.setdefault(config.flow(n.sync_flow).source, []).append(n)
    recorded = recorded_ends(ledger, {n.key for n in forward})
    lag = 0
    for alias, group in by_source.items():
        ends = kafka_offsets.list_offsets(config.cluster(alias), "latest", [(n.topic, n.partition)
                                                              for n in group])
        for n in group:
            got = recorded[n.key].upstream or 0
            lag += max(0, ends[(n.topic, n.partition)] - got)
    return lag
