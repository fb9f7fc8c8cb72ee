"""One checkpoint pass for a flow ``S->T``: observe groups, translate, record, sync offsets.

Kafka and Delta I/O live here; the decisions are in :mod:`pipelines.checkpoint.compute`.

Invariants:
    * Order of a pass: observe commits on S and T -> append ``group_offsets`` -> translate with
      stores loaded at one ``offset_syncs`` version -> append ``checkpoints`` -> write offsets on
      T -> append ``resume_points``. A resume point is recorded only for an offset that Kafka
      accepted, and always names the checkpoint and ledger versions it came from.
    * The offset writes are decided once, by :meth:`Checkpointer.plan` (MM2's sync rules over
      the commits observed on T); :meth:`Checkpointer.commit` writes exactly those (a group
      found active is skipped whole, never re-decided), so what a dry run shows is what a
      pass writes.
    * Offsets are written only into groups with no active members on T; in periodic mode an
      active group is skipped (and reported), in failover/failback mode it is an error.
    * When S is unreachable (a disaster) and the caller allows it, the group's last commits
      recorded in ``group_offsets`` stand in for the live ones.
    * A periodic pass records only what changed (or is due for a refresh), a failover/failback
      pass everything; "the latest per key" is read from a time window
      (:mod:`pipelines.checkpoint.history`).
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import re
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ledger import clock, records
from ledger.config import Config, FlowConfig
from ledger.engine import LedgerEngine, literal, literals
from ledger.errors import OffsetLedgerError
from ledger.records import CheckpointRecord, ResumePoint
from ledger.schemas import CHECKPOINTS, GROUP_OFFSETS, OFFSET_SYNCS, RESUME_POINTS
from ledger.store import OffsetSyncStore
from ledger.tables import Ledger
from pipelines.checkpoint import history
from pipelines.checkpoint.compute import (
    GroupCommit,
    OffsetWrite,
    Previous,
    compute_checkpoints,
    decide_offset_writes,
)
from pipelines.checkpoint.mapping import TopicMapping, map_topics
from pipelines.edge import kafka_admin, kafka_offsets

log = logging.getLogger(__name__)

PREFETCH_GROUPS = 20
"""From this many groups a plan reads its flow's whole stores while S is asked for the groups'
commits (:meth:`Checkpointer.prefetch_stores`); fewer read only the topics they committed on."""


def _previous(latest: Mapping[tuple, CheckpointRecord]) -> dict[tuple, Previous]:
    """What the "never backwards" rule needs of the latest checkpoints."""
    return {k: Previous(cp.source_offset, cp.target_offset) for k, cp in latest.items()}


@dataclass
class CheckpointResult:
    checkpoint_id: str
    flow: str
    checkpoints: list[CheckpointRecord] = field(default_factory=list)
    writes: list[OffsetWrite] = field(default_factory=list)
    skipped: list[tuple[CheckpointRecord, str]] = field(default_factory=list)
    resume_points: list[ResumePoint] = field(default_factory=list)
    # Offsets written beside the checkpoints' with no translation behind them (a move's log
    # starts, ``commit(..., starts=...)``): in the same requests, reported apart from ``writes``.
    starts: list[OffsetWrite] = field(default_factory=list)
    source_commits: list[GroupCommit] = field(default_factory=list)
    source_live: bool = True
    versions: dict[str, int] = field(default_factory=dict)
    # The stores translated over, by sync flow (the metrics' group readiness reads their ends).
    stores: dict[str, OffsetSyncStore] = field(default_factory=dict, repr=False)
    _groups: tuple[tuple[int, int], dict] | None = field(default=None, init=False,
                                                         repr=False, compare=False)

    def of_group(self, group: str) -> tuple[list[CheckpointRecord], list[OffsetWrite]]:
        """``group``'s checkpoints and writes (indexed once for all of a move's groups, and
        again only if the lists grew since)."""
        size = (len(self.checkpoints), len(self.writes))
        if self._groups is None or self._groups[0] != size:
            index: dict[str, tuple[list, list]] = {}
            for cp in self.checkpoints:
                index.setdefault(cp.group_id, ([], []))[0].append(cp)
            for w in self.writes:
                index.setdefault(w.group_id, ([], []))[1].append(w)
            self._groups = (size, index)
        return self._groups[1].get(group, ([], []))


@dataclass
class CheckpointPlan:
    """What a pass observed and decided, before anything is written."""

    flow: FlowConfig
    result: CheckpointResult
    target_commits: list[GroupCommit]
    states: dict[tuple[str, str], str]
    now: dt.datetime
    latest_checkpoints: dict[tuple, CheckpointRecord] = field(default_factory=dict)
    latest_commits: dict[tuple, dict] = field(default_factory=dict)  # group_offsets rows
    # The snapshots the checkpoints were translated over (an operation records their spans).
    stores: dict[str, OffsetSyncStore] = field(default_factory=dict)
    # The offset writes decided over ``result.checkpoints`` and ``target_commits`` (the only
    # place they are decided), and the checkpoints not written, with why.
    writes: list[OffsetWrite] = field(default_factory=list)
    skipped: list[tuple[CheckpointRecord, str]] = field(default_factory=list)


class Checkpointer:
    """Runs checkpoint passes against one ledger, through one engine (``ledger.engine``).

    ``engine`` is a :class:`~ledger.engine.LedgerEngine`, or a SparkSession (then the ledger is
    read and written with Spark, through ``ledger`` when given).
    """

    def __init__(self, engine: LedgerEngine | Any, config: Config, ledger: Ledger | None = None):
        if not isinstance(engine, LedgerEngine):
            engine = LedgerEngine.of(ledger or Ledger(engine, config.ledger_location))
        self.engine = engine
        self.config = config

    # --- observation ---------------------------------------------------------------------

    def groups_on(self, flow: FlowConfig, cluster_alias: str) -> list[str]:
        cluster = self.config.cluster(cluster_alias)
        return sorted(g.group_id for g in kafka_admin.list_groups(cluster)
                      if flow.group_allowed(g.group_id))

    def observe(self, cluster_alias: str, groups: Iterable[str], *,
                inactive: bool = False) -> tuple[list[GroupCommit], dict]:
        """Every group's commits and state on a cluster: one describe call and concurrent
        offset fetches for all groups (``pipelines.edge``), not round trips per group.
        ``inactive``: a group with members raises ``GroupActiveError`` (from the same
        describe: ``kafka_admin.ensure_all_inactive``) before any offset is read."""
        cluster = self.config.cluster(cluster_alias)
        groups = list(dict.fromkeys(groups))
        describe = kafka_admin.ensure_all_inactive if inactive else kafka_admin.describe_groups
        states = {g: info.state for g, info in describe(cluster, groups).items()}
        committed = kafka_offsets.committed_of(cluster, groups)
        commits = [GroupCommit(cluster_alias, group, topic, partition, offset)
                   for group in groups
                   for (topic, partition), offset in committed[group].items()]
        return commits, states

    def resolve_groups(self, groups: list[str], regex: str | None, source: str,
                       live: bool, flow: FlowConfig | None = None) -> list[str]:
        """``groups``, then every group on ``source`` whose id matches ``regex`` entirely (the
        groups the ledger recorded there when ``source`` is not ``live``) and that ``flow``'s
        group allowlist allows: a regex never reaches a group the flow excludes (offset-ledger's
        own ``offset-ledger-*`` groups, Connect's, MM2's defaults), as ``--group`` would not."""
        out = list(dict.fromkeys(groups))
        if regex:
            try:
                pattern = re.compile(regex)
            except re.error as exc:
                raise OffsetLedgerError(f"--group-regex {regex!r}: {exc}") from None
            if live:
                known = [g.group_id for g in kafka_admin.list_groups(self.config.cluster(source))]
            else:
                known = self.recorded_groups(source)
            out += sorted(g for g in known if pattern.fullmatch(g) and g not in out
                          and (flow is None or flow.group_allowed(g)))
        if not out:
            raise OffsetLedgerError("no group to move: give --group G (repeatable) or a "
                                    "--group-regex that matches groups on " + source
                                    + ("" if flow is None else
                                       f" allowed by flow {flow.name}'s group allowlist"))
        return out

    def recorded_groups(self, source: str) -> list[str]:
        """Groups whose commits on ``source`` the ledger recorded (a lost source's groups)."""
        rows = self.engine.query(f"SELECT DISTINCT group_id FROM {{g}} "
                                 f"WHERE cluster = {literal(source)}", g=GROUP_OFFSETS)
        return sorted(r["group_id"] for r in rows)

    def _since(self, now: dt.datetime) -> dt.datetime:
        return history.window_start(now, self.config.history_refresh_hours)

    def latest_commits(self, clusters: Iterable[str], groups: Iterable[str],
                       since: dt.datetime | None) -> dict[tuple, dict]:
        """The latest recorded commit per (cluster, group, topic, partition) since ``since``."""
        where = f"cluster IN {literals(clusters)} AND group_id IN {literals(groups)}"
        rows = self.engine.query(history.latest_sql("g", history.COMMIT_KEY, "observed_at",
                                                    since, where), g=GROUP_OFFSETS)
        return history.by_key(history.rows_of(rows), history.commit_key)

    def recorded_commits(self, cluster_alias: str, groups: Iterable[str]) -> list[GroupCommit]:
        """The latest commits ``group_offsets`` holds (for a source that cannot be reached).

        The refresh window first; only groups it does not hold (a checkpoint job stopped long
        before the disaster) are looked up in the whole history.
        """
        groups = sorted(groups)
        latest = self.latest_commits([cluster_alias], groups, self._since(clock.now()))
        missing = sorted(set(groups) - {k[1] for k in latest})
        if missing:
            latest.update(self.latest_commits([cluster_alias], missing, None))
        return [GroupCommit(cluster_alias, r["group_id"], r["topic"], r["partition"],
                       r["committed_offset"]) for _, r in sorted(latest.items())]

    def record_observations(self, commits: list[GroupCommit], states: dict[tuple[str, str], str],
                            now: dt.datetime, latest: Mapping[tuple, dict] | None = None,
                            complete: bool = True) -> None:
        observation = uuid.uuid4().hex
        rows = [{"observation_id": observation, "cluster": c.cluster, "group_id": c.group_id,
                 "topic": c.topic, "partition": c.partition, "committed_offset": c.offset,
                 "group_state": states.get((c.cluster, c.group_id)), "observed_at": now}
                for c in commits]
        rows = history.to_record(rows, latest or {}, key=history.commit_key,
                                 value=history.commit_value, at=history.commit_at, now=now,
                                 refresh_hours=self.config.history_refresh_hours,
                                 complete=complete)
        self.engine.append(GROUP_OFFSETS, rows)

    def latest_checkpoints(self, source_cluster: str, groups: Iterable[str],
                           now: dt.datetime) -> dict[tuple, CheckpointRecord]:
        """The latest checkpoint per (group, direction, source topic, partition), in the window."""
        where = f"source_cluster = {literal(source_cluster)} AND group_id IN {literals(groups)}"
        rows = self.engine.query(history.latest_sql("c", history.CHECKPOINT_KEY,
                                                    "checkpointed_at", self._since(now), where),
                                 c=CHECKPOINTS)
        return history.by_key(CheckpointRecord.from_rows(history.rows_of(rows)),
                              history.checkpoint_key)

    def previous_checkpoints(self, source_cluster: str, groups: Iterable[str],
                             now: dt.datetime | None = None) -> dict[tuple, Previous]:
        """What the "never backwards" rule needs of the latest checkpoints (two offsets per
        key, not whole records: a move of hundreds of groups reads thousands)."""
        where = f"source_cluster = {literal(source_cluster)} AND group_id IN {literals(groups)}"
        rows = self.engine.query(history.latest_sql(
            "c", history.CHECKPOINT_KEY, "checkpointed_at", self._since(now or clock.now()),
            where, (*history.CHECKPOINT_KEY, "source_offset", "target_offset")), c=CHECKPOINTS)
        return {tuple(r[k] for k in history.CHECKPOINT_KEY):
                Previous(r["source_offset"], r["target_offset"]) for r in rows}

    def _checkpoints_before(self, source_cluster: str, groups: list[str], now: dt.datetime,
                            complete: bool) -> tuple[dict[tuple, CheckpointRecord],
                                                     dict[tuple, Previous]]:
        """A plan's latest checkpoints (what a pass records depends on them) and what the
        "never backwards" hold needs of them; a ``complete`` plan reads only the latter."""
        if complete:
            return {}, self.previous_checkpoints(source_cluster, groups, now)
        latest = self.latest_checkpoints(source_cluster, groups, now)
        return latest, _previous(latest)

    # --- the pass ------------------------------------------------------------------------

    def mappings(self, flow: FlowConfig, topics: Iterable[str]) -> dict[str, TopicMapping]:
        return map_topics(self.config, flow, topics)

    def load_stores(self, mappings: Mapping[str, TopicMapping],
                    held: Mapping[str, OffsetSyncStore] | None = None,
                    ) -> dict[str, OffsetSyncStore]:
        """The stores translating ``mappings``, every flow at one ``offset_syncs`` version.

        ``held`` (a move's coverage check loaded them): kept where they hold the topics, and
        their version read for any other flow; else the latest version.
        """
        held = held or {}
        version = (next(iter(held.values())).version if held
                   else self.engine.version(OFFSET_SYNCS))
        by_flow: dict[str, set[str]] = {}
        for m in mappings.values():
            by_flow.setdefault(m.sync_flow, set()).add(m.sync_topic)
        return {flow: held[flow] if flow in held and held[flow].holds(topics)
                else self.engine.load_store(flow, version, topics)
                for flow, topics in sorted(by_flow.items())}

    def prefetch_stores(self, flow: FlowConfig) -> dict[str, OffsetSyncStore] | None:
        """The whole stores that may translate ``flow``'s groups (its own runs; the reverse
        flow's too when it reverse-checkpoints), at one ``offset_syncs`` version, read with
        delta-rs; None where a store is not read that way (too large to coalesce in process,
        or unreadable: :meth:`load_stores` then reads what the plan needs, as without this)."""
        try:
            version = self.engine.version(OFFSET_SYNCS)
            names = [flow.name] + ([f"{flow.target}->{flow.source}"]
                                   if flow.reverse_checkpointed_topics else [])
            stores = {name: OffsetSyncStore.load_direct(self.engine, name, version)
                      for name in names}
        except Exception as exc:  # the plan's own reads name the problem, on its thread
            log.debug("stores of %s not read ahead: %s", flow.name, exc)
            return None
        if any(store is None for store in stores.values()):
            return None
        return stores  # type: ignore[return-value]

    def plan(self, flow_name: str, *, groups: list[str] | None = None,
             allow_unreachable_source: bool = False,
             recorded_commits: bool = False, complete: bool = False,
             stores: Mapping[str, OffsetSyncStore] | None = None,
             observed: tuple[list[GroupCommit], dict] | None = None,
             target: bool = True) -> CheckpointPlan:
        """Observe and translate; decide the offset writes; write nothing anywhere.

        ``recorded_commits`` (a disaster declared with ``--disaster``): S is not contacted and
        ``groups`` resume from the last commits ``group_offsets`` recorded.
        ``complete``: the plan is recorded whole (an operation) or not at all (a dry run), so
        the latest recorded commits and checkpoints, which decide what a pass records
        (``history.to_record``), are not read (``plan.latest_*`` stay empty): the "never
        backwards" hold reads the two offsets per key it needs (:meth:`previous_checkpoints`).
        ``stores``: loaded already at one version (a move's, by the coverage check that found
        the commits covered): the plan translates over them, at that version.
        ``observed``: the source's commits and states of ``groups``, read by the caller with
        the groups inactive (a move's :meth:`observe`): not read again.
        ``target``: read T's commits and decide the offset writes. ``False`` (``translate``,
        which writes nothing and prints no write): T is not asked, ``plan.writes`` and
        ``plan.skipped`` stay empty.
        """
        held = stores
        flow = self.config.flow(flow_name)
        now = clock.now()
        result = CheckpointResult(uuid.uuid4().hex, flow.name)
        source_cluster = self.config.cluster(flow.source)
        with ThreadPoolExecutor(max_workers=2) as pool:
            # Named groups: T's commits are read while S and the ledger are (Kafka waits, in
            # the command's context: its admin clients).
            ahead = None if groups is None or not target else pool.submit(
                contextvars.copy_context().run, self.observe, flow.target, groups)
            # Many named groups (``translate --group-regex``) read most of a flow's topics: its
            # whole stores are read while S is asked for their commits (a Kafka wait), not
            # after. Nothing else reads the ledger until they are in (``prefetched()``).
            prefetch = pool.submit(self.prefetch_stores, flow) if (
                held is None and not recorded_commits and self.engine.direct
                and groups is not None and len(groups) >= PREFETCH_GROUPS) else None

            def prefetched() -> Mapping[str, OffsetSyncStore] | None:
                return held if prefetch is None else prefetch.result()

            try:
                if recorded_commits:
                    raise kafka_admin.KafkaAdminError(f"cluster {flow.source} declared lost",
                                                      "unreachable")
                if observed is not None and groups is not None:
                    group_ids = groups
                    commits, states = observed
                else:
                    kafka_admin.check_reachable(source_cluster, timeout=5.0)
                    group_ids = (groups if groups is not None
                                 else self.groups_on(flow, flow.source))
                    commits, states = self.observe(flow.source, group_ids)
            except kafka_admin.KafkaAdminError as exc:
                # Only a source that does not answer is left for the recorded commits; refused
                # credentials or a missing ACL are errors to fix (pipelines.edge.kafka_errors).
                if not (allow_unreachable_source or recorded_commits) or groups is None \
                        or exc.kind != "unreachable":
                    raise
                log.warning("cluster %s unreachable: using the last recorded commits",
                            flow.source)
                result.source_live = False
                group_ids = groups
                held = prefetched()
                commits, states = self.recorded_commits(flow.source, group_ids), {}
            result.source_commits = commits
            mappings = self.mappings(flow, {c.topic for c in commits})
            held = prefetched()
            if self.engine.direct:  # in-process reads of a few files: one after the other
                stores = self.load_stores(mappings, held)
                latest_commits = {} if complete else self.latest_commits(
                    (flow.source, flow.target), group_ids, self._since(now))
                latest, previous = self._checkpoints_before(flow.source, group_ids, now,
                                                            complete)
            else:  # independent Spark reads: overlap their driver-side latency
                with ThreadPoolExecutor(max_workers=2) as reads:
                    stores_f = reads.submit(self.load_stores, mappings, held)
                    commits_f = None if complete else reads.submit(
                        self.latest_commits, (flow.source, flow.target), group_ids,
                        self._since(now))
                    latest, previous = self._checkpoints_before(flow.source, group_ids, now,
                                                                complete)
                    stores = stores_f.result()
                    latest_commits = {} if commits_f is None else commits_f.result()
            target_commits, target_states = (
                ahead.result() if ahead is not None
                else self.observe(flow.target, group_ids) if target else ([], {}))
        result.checkpoints = compute_checkpoints(
            commits, mappings, stores, previous, checkpoint_id=result.checkpoint_id,
            target_cluster=flow.target, now=now)
        if target:
            existing = {(c.group_id, c.topic, c.partition): c.offset for c in target_commits}
            result.writes, result.skipped = decide_offset_writes(result.checkpoints, existing)
        result.stores = stores
        result.versions = {OFFSET_SYNCS: next(iter(stores.values())).version if stores
                           else self.engine.version(OFFSET_SYNCS)}
        states_by_cluster = {**{(flow.source, g): st for g, st in states.items()},
                             **{(flow.target, g): st for g, st in target_states.items()}}
        return CheckpointPlan(flow, result, target_commits, states_by_cluster, now, latest,
                              latest_commits, stores, list(result.writes),
                              list(result.skipped))

    def commit(self, plan: CheckpointPlan, *, sync: bool,
               operation_id: str | Mapping[str, str] | None = None,
               reason: str = "group_offset_sync", strict: bool = False,
               starts: Iterable[OffsetWrite] = ()) -> CheckpointResult:
        """Record a plan in the ledger and, with ``sync``, write its offsets on the target.

        The offsets written are the plan's (``plan.writes``), never decided again here, and
        ``starts`` (offsets with no checkpoint behind them: a move's log starts), which go out
        in the same per-group requests and the same ``resume_points`` commit, and come back in
        ``result.starts``.

        ``operation_id`` may map each group to its own operation (several groups, one pass).
        """
        result, flow = plan.result, plan.flow
        observed = (result.source_commits if result.source_live else []) + plan.target_commits
        complete = operation_id is not None  # an operation's evidence is never partial
        checkpoints = history.to_record(
            result.checkpoints, plan.latest_checkpoints, key=history.checkpoint_key,
            value=history.checkpoint_value, at=history.checkpoint_at, now=plan.now,
            refresh_hours=self.config.history_refresh_hours, complete=complete)
        if self.engine.direct:
            self.record_observations(observed, plan.states, plan.now, plan.latest_commits,
                                     complete)
            self.engine.append(CHECKPOINTS, records.rows(checkpoints))
        else:  # two tables, two independent Spark commits: run them side by side
            with ThreadPoolExecutor(max_workers=1) as pool:
                observations = pool.submit(self.record_observations, observed, plan.states,
                                           plan.now, plan.latest_commits, complete)
                self.engine.append(CHECKPOINTS, records.rows(checkpoints))
                observations.result()
        if self.config.emit_mm2_checkpoints and result.checkpoints:
            from pipelines.mm2 import emit as mm2_emit

            mm2_emit.write_checkpoints(self.config, flow.source, flow.target, result.checkpoints)
        result.versions.update({CHECKPOINTS: self.engine.version(CHECKPOINTS),
                                GROUP_OFFSETS: self.engine.version(GROUP_OFFSETS)})
        result.writes, result.skipped = [], []
        if sync:
            result.skipped.extend(plan.skipped)
            self._sync(flow, result, plan.writes, operation_id, reason, strict, plan.now,
                       list(starts))
        result.versions[RESUME_POINTS] = self.engine.version(RESUME_POINTS)
        return result

    def run(self, flow_name: str, *, groups: list[str] | None = None, sync: bool | None = None,
            operation_id: str | None = None, reason: str = "group_offset_sync",
            strict: bool = False, allow_unreachable_source: bool = False,
            dry_run: bool = False) -> CheckpointResult:
        """One pass: :meth:`plan`, then (unless ``dry_run``) :meth:`commit`.

        Args:
            flow_name: ``S->T``: groups committed on S get checkpoints toward T.
            groups: only these groups (default: every allowlisted group on S).
            sync: write translated offsets into the groups on T (default: config).
            operation_id: the failover/failback this pass belongs to.
            reason: recorded with each resume point.
            strict: an active group on T is an error instead of being skipped.
            allow_unreachable_source: with ``groups``, use recorded commits if S is down.
            dry_run: compute and decide, but write nothing to the ledger or Kafka.
        """
        if dry_run:
            self.engine.require()
        else:
            self.engine.init()
        plan = self.plan(flow_name, groups=groups,
                         allow_unreachable_source=allow_unreachable_source,
                         complete=dry_run or operation_id is not None)
        if dry_run:
            return plan.result
        sync = self.config.sync_group_offsets_enabled if sync is None else sync
        return self.commit(plan, sync=sync, operation_id=operation_id, reason=reason,
                           strict=strict)

    def _sync(self, flow: FlowConfig, result: CheckpointResult, writes: list[OffsetWrite],
              operation_id: str | Mapping[str, str] | None, reason: str, strict: bool,
              now: dt.datetime, starts: list[OffsetWrite] | None = None) -> None:
        """Write the planned ``writes`` and ``starts`` on the target (one request per group, all
        groups' requests in flight at once); record what took in one ``resume_points`` commit."""
        target = self.config.cluster(flow.target)
        by_group: dict[str, list[OffsetWrite]] = {}
        for w in [*writes, *(starts or ())]:  # a start after a write of its key: it wins
            by_group.setdefault(w.group_id, []).append(w)
        active = kafka_admin.alter_groups_offsets(
            target, {g: {(w.topic, w.partition): w.offset for w in ws}
                     for g, ws in by_group.items()}, skip_active=not strict)
        for group, group_writes in sorted(by_group.items()):
            if group in active:
                log.warning("%s; not syncing its offsets this pass", active[group])
                result.skipped.extend((w.checkpoint, str(active[group])) for w in group_writes
                                      if w.checkpoint is not None)
                continue
            result.writes.extend(w for w in group_writes if w.checkpoint is not None)
            result.starts.extend(w for w in group_writes if w.checkpoint is None)
        result.resume_points = [
            resume_point(w, operation_id=operation_id.get(w.group_id)
                         if isinstance(operation_id, Mapping) else operation_id,
                         reason=reason, cluster=flow.target,
                         checkpoints_version=result.versions[CHECKPOINTS], now=now)
            for w in [*result.writes, *result.starts]]
        self.engine.append(RESUME_POINTS, records.rows(result.resume_points))


def resume_point(write: OffsetWrite, *, operation_id: str | None, reason: str, cluster: str,
                 checkpoints_version: int | None, now: dt.datetime) -> ResumePoint:
    """The resume point of a write Kafka accepted, naming the checkpoint it came from if any."""
    cp = write.checkpoint
    return ResumePoint(
        resume_point_id=uuid.uuid4().hex, operation_id=operation_id, reason=reason,
        cluster=cluster, group_id=write.group_id, topic=write.topic, partition=write.partition,
        offset=write.offset, previous_offset=write.previous_offset,
        checkpoint_id=None if cp is None else cp.checkpoint_id,
        direction=None if cp is None else cp.direction,
        source_cluster=None if cp is None else cp.source_cluster,
        source_topic=None if cp is None else cp.source_topic,
        source_offset=None if cp is None else cp.source_offset,
        offset_syncs_version=None if cp is None else cp.offset_syncs_version,
        checkpoints_version=None if cp is None else checkpoints_version, written_at=now)
