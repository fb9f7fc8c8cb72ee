"""Readiness for a move, decided once: :func:`assess` for ``status``, ``failover``,
``failback`` and the ``group_ready`` metric alike (the rule: :mod:`pipelines.checkpoint.coverage`).

DESIGN.md "Readiness for a move": a continuous failover or failback (producers still writing)
waits only until the runs cover the groups' committed offsets; what comes after keeps
replicating and the group reads it on the replica. A cutoff move waits until the runs cover
the end offsets.

Where the recorded runs of a flow partition end is :func:`recorded_ends` (the highest end of
the current epoch's runs, or ``replication_progress``'s next upstream offset when higher),
never "the newest run's end"::

    runs in write order   (u=0, d=0, n=100)  then a rewind  (u=50, d=100, n=10)
    newest run's end      60        <- a wrong "wait" for a group at 80
    highest epoch end     100       <- records 0..99 all have copies: a group at 80 is covered

Invariants:
    * Reads only: the ledger (``replication_progress``, then the runs of the partitions still
      in doubt, or for a move every run its plan translates with) and the move's source S (log
      starts of partitions without runs, read_committed probes of the gaps); nothing is
      written.
    * :func:`assess` is the only place coverage is decided and :func:`recorded_ends` the only
      place the ends are; every verb and the metric ask them.
    * A gap that cannot be told (an open transaction holds the last stable offset) is not
      covered: waiting is always safe, a wrong "ready" is not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ledger.config import Config, FlowConfig
from ledger.engine import LedgerEngine, literals
from ledger.records import CheckpointRecord, ProgressRecord
from ledger.schemas import REPLICATION_PROGRESS
from ledger.store import OffsetSyncStore
from ledger.tables import Ledger
from pipelines.checkpoint.coverage import CommitCoverage, Need, needs_for
from pipelines.checkpoint.engine import CheckpointResult
from pipelines.checkpoint.mapping import FORWARD, map_topics
from pipelines.edge import kafka_admin, kafka_offsets

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
                  progress: dict[Key, ProgressRecord] | None = None,
                  stores: Mapping[str, OffsetSyncStore] | None = None,
                  cache: dict[str, OffsetSyncStore] | None = None,
                  ) -> dict[Key, RecordedEnd]:
    """The one readiness rule's ends (see the module docstring) of each flow partition.

    ``enough`` (``{key: offset}``): a forward key whose progress row already reaches the offset
    needs no run read (the common case: one small table answers); its ends are the progress
    row's. Every other key's current-epoch spans are loaded (bounded, ``ledger.store``), unless
    ``stores`` holds the flow's already (a checkpoint pass's). ``progress`` may pass rows read
    already. ``cache`` (a caller asking for many groups, e.g. ``status``): a flow's store is
    loaded whole, once, into it and reused by the next calls, instead of one load per call.
    """
    engine = LedgerEngine.of(engine)
    keys = sorted(set(keys))
    if progress is None:
        progress = progress_ends(engine, {k[0] for k in keys})
    enough = enough or {}
    ahead = {k: p.next_upstream_offset for k, p in progress.items()
             if p.next_upstream_offset is not None}
    doubtful = {k for k in keys if k not in enough or ahead.get(k, -1) < enough[k]}
    wanted: dict[str, set[tuple[str, int]]] = {}
    for flow, topic, partition in doubtful:
        wanted.setdefault(flow, set()).add((topic, partition))
    loaded = dict(stores or {})
    for flow, parts in sorted(wanted.items()):
        if flow in loaded:
            continue
        if cache is None:
            loaded[flow] = engine.load_store(flow, topics={t for t, _ in parts}, partitions=parts)
            continue
        if flow not in cache:
            cache[flow] = engine.load_store(flow)
        loaded[flow] = cache[flow]
    out = {}
    for key in keys:
        flow, topic, partition = key
        store = loaded.get(flow) if key in doubtful or flow in (stores or {}) else None
        upstream = [e for e in (ahead.get(key), store and store.upstream_end(topic, partition))
                    if e is not None]
        downstream = store.downstream_end(topic, partition) if store is not None else None
        out[key] = RecordedEnd(max(upstream) if upstream else None, downstream)
    return out


def assess(config: Config, engine: LedgerEngine | Ledger, source: str, needs: list[Need], *,
           progress: dict[Key, ProgressRecord] | None = None,
           stores: Mapping[str, OffsetSyncStore] | None = None,
           cache: dict[str, OffsetSyncStore] | None = None) -> list[CommitCoverage]:
    """The coverage of each need of a move from ``source`` (the rule of ``coverage``).

    Asks S for the log starts of partitions without runs and probes (read_committed) the gaps
    between the runs' ends and the commits; one request of each kind, whatever the groups.
    """
    if not needs:
        return []
    enough = {n.key: n.offset for n in needs if n.direction == FORWARD}
    ends = recorded_ends(engine, {n.key for n in needs}, enough, progress, stores, cache)
    out = [CommitCoverage(n.direction, n.group_topic, n.partition, n.offset,
                          ends[n.key].replicated_to(n.direction), need=n) for n in needs]
    cluster = config.cluster(source)
    unrun = [c for c in out if c.replicated_to is None and c.committed > 0]
    if unrun:
        lows = kafka_offsets.list_offsets(cluster, "earliest",
                                          {(c.topic, c.partition) for c in unrun})
        for c in unrun:
            c.log_start = lows.get((c.topic, c.partition), 0)
    # One probe per partition, from the lowest base to the highest commit: where the first
    # committed record lies answers every commit of the partition (nothing committed in
    # [base, commit) exactly when it lies at or past the commit), whatever the groups.
    gaps: dict[tuple[str, int], tuple[int, int]] = {}
    for c in out:
        if c.missing:
            key = (c.topic, c.partition)
            low, high = gaps.get(key, (c.base, c.committed))
            gaps[key] = (min(low, c.base), max(high, c.committed))
    if gaps:
        first = kafka_admin.first_committed(cluster, gaps)
        for c in out:
            if c.missing:  # None: it cannot be told (an open transaction), never covered
                at = first[(c.topic, c.partition)]
                c.committed_left = None if at is None else at < c.committed
    return out


def empty_before_runs(config: Config, source: str, checkpoints: Iterable[CheckpointRecord],
                      stores: Mapping[str, OffsetSyncStore]) -> dict[tuple[str, str, int], int]:
    """Forward commits before the first run where nothing committed lies in between.

    ``{(direction, topic, partition): replica offset}``: the copy of the first run's first
    record, where the group resumes. Only commits at or above the partition's log start count
    (below it, records the group never read are gone: that stays "cannot translate")::

        upstream   0 1 2 3 4 (aborted) 5 (marker) | 6 7 8 ...    group committed 0
        runs                                       (u=6, d=0, n=3)    -> resumes at d = 0
    """
    first: dict[tuple[str, int], tuple[int, int, int]] = {}  # -> (lowest commit, u, d)
    for cp in checkpoints:
        if cp.translated or cp.direction != FORWARD or cp.flow not in stores:
            continue
        runs = stores[cp.flow].runs.get((cp.source_topic, cp.partition)) or []
        if not runs:
            continue
        run = min(runs, key=lambda r: r.upstream_offset)
        key = (cp.source_topic, cp.partition)
        if cp.source_offset < run.upstream_offset:
            low = min(cp.source_offset, first.get(key, (cp.source_offset,))[0])
            first[key] = (low, run.upstream_offset, run.downstream_offset)
    if not first:
        return {}
    cluster = config.cluster(source)
    starts = kafka_offsets.list_offsets(cluster, "earliest", set(first))
    ranges = {k: (c, u) for k, (c, u, _) in first.items() if c >= starts.get(k, c + 1)}
    left = kafka_admin.committed_records_between(cluster, ranges) if ranges else {}
    return {(FORWARD, t, p): first[(t, p)][2] for (t, p), has in left.items() if has is False}


class CoverageCheck:
    """Answers "which needs are not covered yet?" against one ledger and the clusters."""

    def __init__(self, config: Config, ledger: LedgerEngine | Ledger):
        self.config = config
        self.engine = LedgerEngine.of(ledger)

    def assess(self, source: str, needs: list[Need]) -> list[CommitCoverage]:
        return assess(self.config, self.engine, source, needs)

    def for_move(self, source: str, needs: list[Need],
                 load_stores: Callable[[], Mapping[str, OffsetSyncStore]],
                 ) -> tuple[list[CommitCoverage], Mapping[str, OffsetSyncStore]]:
        """:meth:`assess` for a move, and the stores its plan translates over.

        ``load_stores`` loads every flow the move translates with, at one ``offset_syncs``
        version; the same stores answer the coverage, so a move loads the runs once and
        translates at the version its commits were found covered at. They are loaded after
        ``replication_progress`` is read, so their runs reach at least as far as its rows.
        """
        progress = progress_ends(self.engine, {n.key[0] for n in needs})
        stores = load_stores()
        return assess(self.config, self.engine, source, needs, progress=progress,
                      stores=stores), stores

    def gaps(self, source: str, needs: list[Need]) -> list[CommitCoverage]:
        return [c for c in self.assess(source, needs) if not c.covered]


def replication_lag(config: Config, ledger: LedgerEngine | Ledger, needs: list[Need],
                    stores: Mapping[str, OffsetSyncStore] | None = None) -> int:
    """Records the sources hold beyond the runs, for the forward partitions of ``needs``.

    Informational: a continuous move does not wait for them (they keep replicating).
    ``stores`` (a move's plan's) answer for their flows instead of a new load.
    """
    forward = [n for n in needs if n.direction == FORWARD]
    if not forward:
        return 0
    by_source: dict[str, list[Need]] = {}
    for n in forward:
        by_source.setdefault(config.flow(n.sync_flow).source, []).append(n)
    recorded = recorded_ends(ledger, {n.key for n in forward}, stores=stores)
    lag = 0
    for alias, group in by_source.items():
        ends = kafka_offsets.list_offsets(config.cluster(alias), "latest", [(n.topic, n.partition)
                                                              for n in group])
        for n in group:
            got = recorded[n.key].upstream or 0
            lag += max(0, ends[(n.topic, n.partition)] - got)
    return lag


def pass_readiness(config: Config, engine: LedgerEngine | Ledger, flow: FlowConfig,
                   result: CheckpointResult) -> dict[str, tuple[bool, int]]:
    """Per group of a checkpoint pass: ``(ready to move S -> T, records not covered)``.

    The ``group_ready`` metric's answer, by :func:`assess` over the pass's commits (the ends
    from its stores and ``replication_progress``, as ``status`` and a move read them). A pass
    whose source was not read live says nothing about readiness: no group is reported.
    """
    if not result.source_live:
        return {}
    mappings = map_topics(config, flow, {c.topic for c in result.source_commits})
    by_group: dict[str, list] = {}
    for c in result.source_commits:
        if c.topic in mappings:
            by_group.setdefault(c.group_id, []).append(c)
    needs = {g: needs_for(commits, mappings) for g, commits in by_group.items()}
    flat = [n for group_needs in needs.values() for n in group_needs]
    coverage = iter(assess(config, engine, flow.source, flat, stores=result.stores))
    out = {}
    for group, group_needs in needs.items():
        cover = [next(coverage) for _ in group_needs]
        out[group] = (all(c.covered for c in cover), sum(c.missing for c in cover
                                                         if not c.covered))
    return out
