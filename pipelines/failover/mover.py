"""Failover and failback of groups: the library behind the ``failover`` and ``failback`` verbs
(``pipelines.failover.job``) and ``--spark-checkpoint`` (``pipelines.failover.spark_query``).

Sequence (seconds, not MM2's 2 x (emit + sync intervals))::

    consumers of G stop
      -> X answers (else: error; a lost X is declared with --disaster, never inferred)
      -> G has no active members on X and Y              (GroupActiveError otherwise)
      -> [--cutoff] producers stopped, G read everything on X
      -> wait until the runs cover G's committed offsets  (--catch-up replicates until then;
         --cutoff: the end offsets); the rest keeps replicating and G reads it on Y
      -> checkpoint G now: forward and reverse translations, recorded in the ledger
      -> write G's offsets on Y (never rewinding), recorded as resume points
      -> record one operation per group, all with the same ledger versions
      -> print the topics to subscribe to on Y and the offsets G resumes from

``--spark-checkpoint PATH`` moves a Structured Streaming query instead, its checkpoint standing
in for G's commits (:mod:`pipelines.failover.spark_query`).

Invariants:
    * Nothing is written to Kafka or the ledger with ``--dry-run`` or when any check fails.
    * An untranslatable partition is reported, never replaced by a guessed offset: the
      operation fails (exit 4) unless ``--allow-untranslatable`` is given, and even then no
      offset is written for that partition.
    * Disaster mode only with ``--disaster``: X is not contacted and the last commits recorded
      in the ledger are used. An unreachable X, a failed authentication or a bad configuration
      without it is an error (exit 2), never a disaster.
    * Under IdentityReplicationPolicy (one-way, prefixless) failback is refused: replication
      must be reconfigured in the reverse direction first.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger import clock, records
from ledger.config import Config, FlowConfig
from ledger.engine import LedgerEngine
from ledger.errors import OffsetLedgerError
from ledger.records import CheckpointRecord, Operation
from ledger.schemas import CHECKPOINTS, GROUP_OFFSETS, OFFSET_SYNCS, OPERATIONS, RESUME_POINTS
from ledger.store import OffsetSyncStore
from ledger.tables import Ledger
from pipelines.acls import check as acl_check
from pipelines.checkpoint.compute import GroupCommit, OffsetWrite
from pipelines.checkpoint.coverage import CommitCoverage, Need, log_start_keys, needs_for
from pipelines.checkpoint.engine import (
    Checkpointer,
    CheckpointPlan,
    CheckpointResult,
    resume_point,
)
from pipelines.checkpoint.mapping import FORWARD, TopicMapping, subscribe_topics
from pipelines.checkpoint.readiness import CoverageCheck, empty_before_runs, replication_lag
from pipelines.checkpoint.report import render, translation_rows
from pipelines.edge import kafka_admin, kafka_offsets, preflight
from pipelines.failover import cutoff as cutoffs
from pipelines.failover import evidence
from pipelines.failover.result import OperationResult


class ReplicationLagError(OffsetLedgerError):
    exit_code = 3


class UntranslatableError(OffsetLedgerError):
    exit_code = 4


class SourceUnreachableError(OffsetLedgerError):
    """The source did not answer and no disaster was declared."""


@dataclass(frozen=True)
class MoveOptions:
    """How to move: the command line's switches, frozen."""

    timeout: float = 120.0
    catch_up: bool = False
    cutoff: bool = False
    disaster: bool = False
    dry_run: bool = False
    allow_untranslatable: bool = False
    quiet_s: float = 5.0
    require_acls: bool = False      # a gap in the ACL check refuses the move (pipelines.acls)


@dataclass(frozen=True)
class MoveRecord:
    """One move of groups ``source -> target`` as :meth:`Mover.record_operations` records it.

    ``groups`` are group ids, or ``spark:<name>`` labels of Spark queries; each has its
    ``operation_ids`` and ``subscribe`` entry, and may have its own ``messages`` line.
    """

    kind: str                       # 'failover' | 'failback'
    groups: tuple[str, ...]
    source: str
    target: str
    operation_ids: Mapping[str, str]
    subscribe: Mapping[str, list[str]]
    started: dt.datetime
    seconds: float                  # from the start to ready
    live: bool                      # False: the source was declared lost (--disaster)
    mode: str                       # 'continuous' | 'cutoff' | 'disaster'
    messages: Mapping[str, str] = field(default_factory=dict)
    acls: Mapping[str, str] = field(default_factory=dict)   # the ACL check's summary per group

    def message(self, group: str) -> str | None:
        return "; ".join(m for m in (self._message(group), self.acls.get(group)) if m) or None

    def _message(self, group: str) -> str | None:
        if self.messages.get(group):
            return self.messages[group]
        if not self.live:
            return f"{self.source} declared lost (--disaster): recorded commits used"
        return "cutoff" if self.mode == "cutoff" else None

def _progress(message: str) -> None:
    print(f"\r{message}", end="", file=sys.stderr, flush=True)


def check_flow(config: Config, kind: str, source: str, target: str):
    """The enabled flow ``source->target`` a failover or failback moves groups along."""
    if kind == "failback" and config.prefixless:
        raise OffsetLedgerError(
            f"failback {source} -> {target} is not possible under "
            "IdentityReplicationPolicy: replicas keep their topics' names, so what "
            f"producers wrote on {source} cannot be told from what was replicated there, and "
            f"nothing replicates {source} -> {target}. Reconfigure the replication in the "
            f"reverse direction first (disable {target}->{source}, enable "
            f"{source}->{target}, `offset-ledger replicate --flow '{source}->{target}'` "
            f"until caught up), then `offset-ledger failover --from {source} --to {target} "
            "--cutoff`")
    return config.flow(source, target)


class Mover:
    """Failover and failback of one or several groups, through one ledger engine.

    ``engine`` is a :class:`~ledger.engine.LedgerEngine` (``ledger.engine`` decides delta-rs or
    Spark), or a SparkSession (the ledger read and written with Spark).
    """

    def __init__(self, engine: LedgerEngine | Any, config: Config):
        if not isinstance(engine, LedgerEngine):
            engine = LedgerEngine.of(Ledger(engine, config.ledger_location))
        self.engine = engine
        self.config = config
        self.checkpointer = Checkpointer(engine, config)
        self.coverage = CoverageCheck(config, engine)

    # --- checks ----------------------------------------------------------------------------

    def check_flow(self, kind: str, source: str, target: str):
        return check_flow(self.config, kind, source, target)

    def check_source(self, source: str, options: MoveOptions) -> bool:
        """Whether the source is to be contacted; an unreachable one is an error."""
        if options.disaster:
            if options.cutoff:
                raise OffsetLedgerError("--cutoff needs the source cluster; --disaster declares "
                                        "it lost: give one of them")
            print(f"disaster mode (--disaster): {source} is not contacted; groups resume from "
                  "the last commits recorded in the ledger", file=sys.stderr)
            return False
        try:
            preflight.check_reachable(self.config.cluster(source))
        except kafka_admin.KafkaAdminError as exc:
            if exc.kind != "unreachable":  # credentials, TLS, ACLs: fixed in the configuration
                raise exc.__class__(f"{exc}; nothing was written", exc.kind) from None
            raise SourceUnreachableError(
                f"{exc}; nothing was written. If {source} is lost, fail over from the last "
                "commits recorded in the ledger with --disaster; an authentication or "
                "configuration error is fixed in the configuration") from None
        return True

    def resolve_groups(self, groups: list[str], regex: str | None, source: str,
                       live: bool, flow: FlowConfig | None = None) -> list[str]:
        return self.checkpointer.resolve_groups(groups, regex, source, live, flow)

    def wait_for_replication(self, source: str, needs: list[Need], options: MoveOptions,
                             mappings: Mapping[str, TopicMapping],
                             ) -> tuple[list[CommitCoverage], Mapping[str, OffsetSyncStore]]:
        """Block until the runs cover ``needs``; with --catch-up, replicate until they do.

        Returns the final coverage (``pipelines.checkpoint.readiness.assess``, the rule of
        ``status`` too), whose ``from_log_start`` commits resume at the target's log start, and
        the stores it was found with (``mappings``' flows at one version): the plan's.
        """
        deadline = time.monotonic() + options.timeout
        while True:
            coverage, stores = self.coverage.for_move(
                source, needs, lambda: self.checkpointer.load_stores(mappings))
            gaps = [c for c in coverage if not c.covered]
            if not gaps:
                if sys.stderr.isatty():
                    _progress("replication covers the groups' offsets".ljust(70) + "\n")
                return coverage, stores
            _progress(f"waiting for replication: {len(gaps)} partition(s), "
                      f"{sum(g.missing for g in gaps)} record(s) to cover")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                print(file=sys.stderr)
                detail = ", ".join(g.describe(g.need.sync_flow if g.need else None)
                                   for g in gaps[:5])
                raise ReplicationLagError(
                    f"replication has not caught up within {options.timeout:.0f}s ({detail}); "
                    "run `offset-ledger replicate --flow ...`, pass --catch-up, or raise "
                    "--timeout")
            if options.catch_up and not options.dry_run:
                self.catch_up(gaps, remaining)
            else:
                time.sleep(0.5)  # polling the ledger for a condition, with a deadline

    def catch_up(self, gaps: list[CommitCoverage], timeout: float) -> None:
        from pipelines.replicate.job import replicate_once
        from pipelines.replicate.streaming import streamed

        forward: dict[str, dict[tuple[str, int], int]] = {}
        whole: set[str] = set()
        # A flow a streaming job replicates is recorded every commit interval: wait for it.
        needs = [g.need for g in gaps if g.need is not None]
        live = {f for f in {n.sync_flow for n in needs} if streamed(self.config, f)}
        if live:
            time.sleep(0.5)  # polling the ledger for a condition, with a deadline
        for n in needs:
            if n.sync_flow in live:
                continue
            if n.direction == FORWARD:
                forward.setdefault(n.sync_flow, {})[(n.topic, n.partition)] = n.offset
            else:  # a replica offset: replicate that flow as far as its source holds now
                whole.add(n.sync_flow)
        # The engine's session if Spark is open; else replicate starts one only if it must.
        spark = self.engine.spark if self.engine.started else None
        results = [replicate_once(spark, self.config, flow) for flow in sorted(whole)]
        results += [replicate_once(spark, self.config, flow, until=until,
                                   until_timeout_s=max(1.0, timeout))
                    for flow, until in sorted(forward.items())]
        # A topic the catch-up cannot copy (e.g. its source was recreated) will not catch up
        # by waiting: say why now rather than at the deadline.
        needed = {n.topic for n in needs}
        refused = {t: m for r in results for t, m in r.errors.items() if t in needed}
        if refused:
            why = "; ".join(f"topic {t}: {m}" for t, m in sorted(refused.items()))
            raise ReplicationLagError(f"cannot catch up: {why}")

    # --- the move --------------------------------------------------------------------------

    def move(self, kind: str, group: str, source: str, target: str, *,
             timeout: float = 120.0, catch_up: bool = False, dry_run: bool = False,
             allow_untranslatable: bool = False, cutoff: bool = False,
             disaster: bool = False) -> OperationResult:
        """One group: :meth:`move_groups` with a single group."""
        options = MoveOptions(timeout=timeout, catch_up=catch_up, cutoff=cutoff,
                              disaster=disaster, dry_run=dry_run,
                              allow_untranslatable=allow_untranslatable)
        return self.move_groups(kind, [group], source, target, options)[0]

    def move_groups(self, kind: str, groups: list[str], source: str, target: str,
                    options: MoveOptions, group_regex: str | None = None,
                    ) -> list[OperationResult]:
        started_mono, started = time.monotonic(), clock.now()
        flow = self.check_flow(kind, source, target)
        live = self.check_source(source, options)
        groups = self.resolve_groups(groups, group_regex, source, live, flow)
        self.engine.require() if options.dry_run else self.engine.init()
        source_cluster, target_cluster = self.config.cluster(source), self.config.cluster(target)
        kafka_admin.ensure_all_inactive(target_cluster, groups)
        ends = None
        if live:
            # Continuous: the groups must be stopped now. Cutoff: they may still be draining
            # to the ends; they must be stopped once they have.
            observed = self.checkpointer.observe(source, groups, inactive=not options.cutoff)
            commits = observed[0]
            mappings = self.checkpointer.mappings(flow, {c.topic for c in commits})
            if options.cutoff:
                parts = cutoffs.partitions_of(source_cluster, set(mappings))
                ends = cutoffs.check_producers_stopped(source_cluster, parts, options.quiet_s)
                cutoffs.wait_for_groups_to_drain(source_cluster, groups, ends, options.timeout)
                observed = self.checkpointer.observe(source, groups, inactive=True)
                commits = observed[0]
            needs = needs_for(commits, mappings, ends)
            coverage, stores = self.wait_for_replication(source, needs, options, mappings)
            log_starts = log_start_keys(coverage)
        else:
            needs, log_starts, stores, observed = [], set(), {}, None
        # Over the commits just read (the groups are inactive) and the stores they were found
        # covered with: one read of each.
        plan = self.checkpointer.plan(flow.name, groups=groups, recorded_commits=not live,
                                      complete=True, stores=stores, observed=observed)
        lag = replication_lag(self.config, self.engine, needs, stores=plan.stores)
        if not live:  # S is not asked: only an offset 0 has nothing before it, surely
            log_starts = {(cp.direction, cp.source_topic, cp.partition)
                          for cp in plan.result.checkpoints
                          if not cp.translated and cp.source_offset == 0}
        # Partition -> where its groups start on Y: the log start (None), or the first run's
        # copy when only aborted records and markers lie between the commit and that run.
        first_copies = (empty_before_runs(self.config, source, plan.result.checkpoints,
                                          plan.stores) if live else {})
        at_start = {(cp.group_id, cp.target_topic, cp.partition):
                    first_copies.get((cp.direction, cp.source_topic, cp.partition))
                    for cp in plan.result.checkpoints if not cp.translated
                    and ((cp.direction, cp.source_topic, cp.partition) in log_starts
                         or (cp.direction, cp.source_topic, cp.partition) in first_copies)}
        self.check_plan(plan, groups, source, live, options, at_start)
        latest = options.cutoff and self.config.prefixless
        operation_ids = {g: f"{kind}-{started:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
                         for g in groups}
        committed = _by_group(plan.result.source_commits)
        subscribe = {g: subscribe_topics(self.config, flow,
                                         {t for t, _ in committed.get(g, {})}) for g in groups}
        mode = "disaster" if not live else "cutoff" if options.cutoff else "continuous"
        acls = acl_check.for_move(self.config, source, target, subscribe, live,
                                  options.require_acls)
        if options.dry_run:  # what the last branch would write
            result = plan.result
            starts = self.start_offsets(groups, target, subscribe,
                                        written_keys(plan.writes, plan.skipped) - set(at_start),
                                        at_start, committed=_by_group(plan.target_commits))
        elif latest:
            result = self.checkpointer.commit(plan, sync=False, operation_id=operation_ids,
                                              reason=kind, strict=True)
            self.write_latest(plan, result, operation_ids, kind)
            starts = self.start_offsets(groups, target, subscribe,
                                        written_keys(result.writes, result.skipped)
                                        - set(at_start), at_start)
            self.write_starts(starts, operation_ids, kind, target)
        else:
            # Strict: every planned write is made or the move fails, so the log starts are
            # known before the commit and go out in the same requests (one wave per move).
            starts = self.start_offsets(groups, target, subscribe,
                                        written_keys(plan.writes, plan.skipped) - set(at_start),
                                        at_start, committed=_by_group(plan.target_commits))
            result = self.checkpointer.commit(plan, sync=True, operation_id=operation_ids,
                                              reason=kind, strict=True, starts=starts)
        # Ready: the offsets are on the target (and their checkpoints in the ledger), the groups
        # can resume there. What follows records the operation's audit evidence and row.
        seconds = time.monotonic() - started_mono
        if not options.dry_run:
            evidence.record(self.engine, self.config, result.checkpoints, operation_ids,
                            plan.stores, result.versions[CHECKPOINTS], plan.now)
            self.record_operations(MoveRecord(kind, tuple(groups), source, target,
                                              operation_ids, subscribe, started, seconds,
                                              live, mode, acls={g: c.summary() for g, c in
                                                                acls.items()}), result)
        return [OperationResult(operation_ids[g], kind, g, source, target, subscribe[g], result,
                                [w for w in starts if w.group_id == g], seconds,
                                options.dry_run, mode, lag, acls[g].as_dict()) for g in groups]

    def check_plan(self, plan: CheckpointPlan, groups: list[str], source: str, live: bool,
                   options: MoveOptions,
                   at_start: Mapping[tuple[str, str, int], int | None] | None = None) -> None:
        """Refuse groups without commits and partitions without a translation.

        ``at_start`` (``{(group, target topic, partition): offset or None}``): partitions with
        nothing before the commit to copy (``CommitCoverage.from_log_start``, or only aborted
        records before the first run); they resume at that offset or the log start.
        """
        committed = {c.group_id for c in plan.result.source_commits}
        missing = [g for g in groups if g not in committed]
        if missing:
            raise OffsetLedgerError(
                f"group(s) {', '.join(missing)} have no committed offsets on {source}"
                + ("" if live else " recorded in the ledger"))
        untranslatable = [cp for cp in plan.result.checkpoints if not cp.translated
                          and (cp.group_id, cp.target_topic, cp.partition) not in (at_start or {})]
        if untranslatable and not options.allow_untranslatable:
            raise UntranslatableError(
                f"{len(untranslatable)} partition(s) of group(s) "
                f"{', '.join(sorted({cp.group_id for cp in untranslatable}))} cannot be "
                "translated; nothing was written:\n"
                + render(translation_rows(untranslatable)))

    def write_latest(self, plan: CheckpointPlan, result: CheckpointResult,
                     operation_ids: dict[str, str], kind: str) -> None:
        """Cutoff under IdentityReplicationPolicy: each group to the latest offsets on Y.

        The seed procedure's reset; after a cutoff it is where the translation lands too,
        unless the replica holds duplicates of a killed copy, which it then skips.
        """
        target = plan.flow.target
        cluster = self.config.cluster(target)
        translated = [cp for cp in result.checkpoints if cp.translated]
        ends = kafka_offsets.list_offsets(cluster, "latest", {(cp.target_topic, cp.partition)
                                                 for cp in translated})
        existing = {(c.group_id, c.topic, c.partition): c.offset for c in plan.target_commits}
        writes = []
        for cp in translated:
            key = (cp.group_id, cp.target_topic, cp.partition)
            end = ends[key[1:]]
            if existing.get(key, -1) < end:
                # Not a translation: no checkpoint stands behind this resume point.
                writes.append(OffsetWrite(*key, end, existing.get(key), None))
        writes.sort(key=lambda w: (w.group_id, w.topic, w.partition))
        kafka_admin.alter_groups_offsets(cluster, _by_group(writes))
        result.writes.extend(writes)
        now = clock.now()
        points = [resume_point(w, operation_id=operation_ids[w.group_id],
                               reason=kind, cluster=target,
                               checkpoints_version=result.versions[CHECKPOINTS], now=now)
                  for w in result.writes]
        self.engine.append(RESUME_POINTS, records.rows(points))
        result.versions[RESUME_POINTS] = self.engine.version(RESUME_POINTS)

    def start_offsets(self, groups: list[str], target: str, subscribe: dict[str, list[str]],
                      written: set[tuple[str, str, int]],
                      at_start: Mapping[tuple[str, str, int], int | None] | None = None,
                      committed: Mapping[str, Mapping[tuple[str, int], int]] | None = None,
                      ) -> list[OffsetWrite]:
        """Offsets at the log start for subscribed partitions where a group has nothing on Y.

        Such a partition holds only what producers wrote on the target cluster itself (or
        replicated records the group never consumed on X): it starts at the beginning, whatever
        its ``auto.offset.reset``, so nothing is skipped. ``at_start`` partitions (the group
        committed on X where nothing before its commit is left to copy) start there too, or at
        the offset given (the first run's copy), even when not subscribed by name (never
        rewinding an offset the group has on Y). ``committed``: the groups' offsets on Y,
        when the caller observed them already (read from Y otherwise).
        """
        at_start = at_start or {}
        cluster = self.config.cluster(target)
        topics = kafka_admin.list_topics(cluster)
        named = {t for names in subscribe.values() for t in names} | {t for _, t, _ in at_start}
        lows = kafka_offsets.list_offsets(cluster, "earliest", [
            (topic, p) for topic in named if topic in topics for p in range(topics[topic])])
        writes = []
        if committed is None:
            committed = kafka_offsets.committed_of(cluster, groups)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), low in sorted(lows.items()):
            by_topic.setdefault(topic, []).append((partition, low))
        starting: dict[str, set[str]] = {}
        for group, topic, _ in at_start:
            starting.setdefault(group, set()).add(topic)
        for group in groups:
            existing = committed.get(group, {})
            topics = sorted(set(subscribe[group]) | starting.get(group, set()))
            for topic in topics:
                for partition, low in by_topic.get(topic, ()):
                    key = (group, topic, partition)
                    wanted = topic in subscribe[group] or key in at_start
                    if wanted and (topic, partition) not in existing and key not in written:
                        offset = at_start.get(key)
                        writes.append(OffsetWrite(group, topic, partition,
                                                  low if offset is None else max(low, offset),
                                                  None, None))
        return writes

    def write_starts(self, starts: list[OffsetWrite], operation_ids: dict[str, str], kind: str,
                     target: str) -> None:
        kafka_admin.alter_groups_offsets(self.config.cluster(target), _by_group(starts))
        if starts:
            now = clock.now()
            points = [resume_point(w, operation_id=operation_ids[w.group_id], reason=kind,
                                   cluster=target, checkpoints_version=None, now=now)
                      for w in starts]
            self.engine.append(RESUME_POINTS, records.rows(points))

    def record_operations(self, move: MoveRecord, result: CheckpointResult) -> None:
        """One row per group of ``move``, every row with the same ledger versions."""
        resume_version = self.engine.version(RESUME_POINTS)
        ready = clock.now()
        reverse = {cp.group_id for cp in result.checkpoints if cp.direction == "reverse"}
        operations = [Operation(
            operation_id=move.operation_ids[g], kind=move.kind, group_id=g,
            from_cluster=move.source, to_cluster=move.target, status="completed",
            subscribe_topics=tuple(move.subscribe[g]),
            offset_syncs_version=result.versions.get(OFFSET_SYNCS),
            checkpoints_version=result.versions.get(CHECKPOINTS),
            group_offsets_version=result.versions.get(GROUP_OFFSETS),
            resume_points_version=resume_version,
            reverse_checkpointing=g in reverse,
            started_at=move.started, ready_at=ready, seconds_to_ready=move.seconds,
            message=move.message(g),
        ) for g in move.groups]
        self.engine.append(OPERATIONS, records.rows(operations))
        result.versions[OPERATIONS] = self.engine.version(OPERATIONS)


def written_keys(writes: Iterable[OffsetWrite],
                 skipped: Iterable[tuple[CheckpointRecord, str]]) -> set[tuple[str, str, int]]:
    """``(group, target topic, partition)`` a pass wrote or decided not to write."""
    return {(w.group_id, w.topic, w.partition) for w in writes} | {
        (cp.group_id, cp.target_topic, cp.partition) for cp, _ in skipped}


def _by_group(writes: Iterable[OffsetWrite | GroupCommit]
              ) -> dict[str, dict[tuple[str, int], int]]:
    """``{group: {(topic, partition): offset}}`` of ``writes`` (for one call for all groups)
    or of observed commits."""
    out: dict[str, dict[tuple[str, int], int]] = {}
    for w in writes:
        out.setdefault(w.group_id, {})[(w.topic, w.partition)] = w.offset
    return out
