"""The I/O edge of ``status``: read the clusters and the ledger, build :mod:`readiness` objects.

Invariants:
    * Reads only: nothing is written to Kafka (no group joins, no commits: probes use random
      group ids and never commit) or to the ledger.
    * Ledger reads are bounded: ``replication_progress`` for the shown flows, the current
      epoch's spans of the partitions progress does not answer (the one readiness rule,
      ``pipelines.checkpoint.readiness``, which ``failover``, ``failback`` and the metric use
      too), and aggregates of ``checkpoints`` and ``operations`` filtered by group and clusters;
      through the verb's ledger engine (``ledger.engine``: no JVM on a path ledger).
    * A cluster that does not answer (or refuses the credentials) is reported as text in the
      result (``FlowStatus.error``, ``GroupStatus.errors``); it never raises out of a round.
    * One :class:`Gatherer` per round: its caches (reachability, topic lists) are one round's.
    * Overlap without sharing: the Kafka reads of the groups' commits run beside the round
      (:meth:`Gatherer.read_commits_ahead`), in the command's context (its admin clients).
      One thread reads the ledger at a time: the round's first ledger reads may run ahead on
      the pool (:meth:`Gatherer.read_ledger_ahead`) while the clusters are asked, and every
      other ledger read waits for them first (:attr:`Gatherer.engine`).
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager

from confluent_kafka import Consumer, TopicPartition

from ledger import clock
from ledger.config import Config, FlowConfig
from ledger.engine import LedgerEngine
from ledger.errors import OffsetLedgerError
from ledger.policy import ReplicationPolicy
from ledger.schemas import CHECKPOINTS, OPERATIONS
from ledger.store import OffsetSyncStore
from ledger.tables import Ledger
from pipelines.checkpoint import history
from pipelines.checkpoint.compute import GroupCommit
from pipelines.checkpoint.coverage import needs_for
from pipelines.checkpoint.mapping import FORWARD, map_topics
from pipelines.checkpoint.readiness import assess, progress_ends, recorded_ends
from pipelines.edge import kafka_admin, kafka_offsets, preflight
from pipelines.mm2 import formats
from pipelines.replicate.topics import look_up_unseen, select_topics
from pipelines.status.readiness import (
    Checkpoint,
    CommitLag,
    FlowStatus,
    GroupStatus,
    PartitionLag,
)
from pipelines.status.transforms import last_operations, newest_checkpoints

log = logging.getLogger(__name__)

TP = tuple[str, int]


@contextmanager
def _timed(what: str) -> Iterator[None]:
    """Log how long a step took (``-v``): where a slow status spends its time."""
    started = time.perf_counter()
    try:
        yield
    finally:
        log.info("status: %s took %.2fs", what, time.perf_counter() - started)


def newest_heartbeat(cluster, topic: str, timeout: float = 5.0) -> dt.datetime | None:
    """The timestamp carried by the last heartbeat record of ``topic`` (partition 0)."""
    consumer = Consumer(cluster.client_config(**{
        "group.id": f"offset-ledger-probe-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "log_level": 0}))
    try:
        low, high = kafka_offsets.watermarks(cluster, topic, 1)[0]
        if high <= low:
            return None
        consumer.assign([TopicPartition(topic, 0, high - 1)])
        msg = consumer.poll(timeout)
        if msg is None or msg.error():
            return None
        hb = formats.decode_heartbeat(msg.key(), msg.value())
        return clock.from_ms(hb.timestamp_ms)
    except Exception as exc:  # a heartbeat is extra evidence, never a reason to fail status
        log.info("heartbeats %s on %s not read: %s", topic, cluster.alias, exc)
        return None
    finally:
        consumer.close()


class Gatherer:
    """One round of status: the shown flows and groups, each cluster asked once."""

    def __init__(self, config: Config, ledger: LedgerEngine | Ledger, many_groups: bool = False):
        self.config = config
        self._engine = LedgerEngine.of(ledger)
        self._ledger_ahead: Future | None = None
        self.policy = ReplicationPolicy.from_config(config)
        self._errors: dict[str, str | None] = {}
        self._topics: dict[str, dict[str, int]] = {}
        self._progress_rows: dict[str, dict] = {}
        self._commit_reads: dict[tuple[str, tuple[str, ...]], Future] = {}
        # Many groups: one whole load of a flow's runs per report, not one per group; one
        # group: only its partitions' runs, as failover reads them (the operator path).
        self._stores: dict[str, OffsetSyncStore] | None = {} if many_groups else None

    @property
    def engine(self) -> LedgerEngine:
        """The ledger, once the reads started by :meth:`read_ledger_ahead` are done (their
        error, if any, raised here): one thread reads it at a time."""
        ahead, self._ledger_ahead = self._ledger_ahead, None
        if ahead is not None:
            ahead.result()
        return self._engine

    def read_ledger_ahead(self, pool: Executor, flows: Iterable[FlowConfig]) -> None:
        """Start the round's first ledger reads on ``pool``: each flow's
        ``replication_progress`` then, with many groups, the flow's whole store (what
        :meth:`flow_status` reads once the source's ends are known). They run while the
        clusters are asked for their topics and ends: on a live flow those are a second of
        waits on a loaded machine, and so are these reads."""
        flows = list(flows)
        engine = self.engine

        def read() -> None:
            for flow in flows:
                self._progress_rows.setdefault(
                    flow.name, progress_ends(engine, self._progress_flows(flow)))
                if self._stores is not None and flow.name not in self._stores:
                    self._stores[flow.name] = engine.load_store(flow.name)

        if flows:
            self._ledger_ahead = pool.submit(contextvars.copy_context().run, read)

    def check_clusters(self, pool: Executor, aliases: Iterable[str]) -> None:
        """:meth:`cluster_error` of each of ``aliases`` at once (the first on this thread):
        a round waits for the slowest cluster's answer, not their sum."""
        todo = [a for a in dict.fromkeys(aliases) if a not in self._errors]
        others = [pool.submit(contextvars.copy_context().run, self.cluster_error, a)
                  for a in todo[1:]]  # (a copy of the command's context each: its clients)
        for alias in todo[:1]:
            self.cluster_error(alias)
        for future in others:
            future.result()

    def cluster_error(self, alias: str) -> str | None:
        """Why ``alias`` cannot be read (unreachable, credentials), or None."""
        if alias not in self._errors:
            cluster = self.config.cluster(alias)
            try:
                with _timed(f"cluster {alias}"):
                    # A stopped cluster is told in milliseconds (the probe's early failure),
                    # not after the metadata request's whole timeout.
                    preflight.check_reachable(cluster)
                    self._topics[alias] = kafka_admin.list_topics(cluster, timeout=5.0)
                self._errors[alias] = None
            except OffsetLedgerError as exc:
                self._errors[alias] = str(exc)
        return self._errors[alias]

    # --- flows -----------------------------------------------------------------------------

    def flow_status(self, flow: FlowConfig) -> FlowStatus:
        status = FlowStatus(flow.name, flow.source, flow.target)
        source_error = self.cluster_error(flow.source)
        if source_error is not None:
            status.error = source_error
            return status
        source = self.config.cluster(flow.source)
        topics = self._topics[flow.source]
        # A selected or replicated topic the source's metadata does not show is looked up by
        # name: one that cannot be read keeps the flow from being called caught up.
        unreadable: dict[str, str] = {}
        if self.cluster_error(flow.target) is None:
            try:
                unseen = look_up_unseen(self.config, flow, topics, self._topics[flow.target])
            except OffsetLedgerError as exc:
                status.error = str(exc)
                return status
            topics = {**topics, **unseen.visible}
            unreadable = unseen.unreadable
        selected = select_topics(flow, self.policy, list(topics))
        tps = [(t, p) for t in selected for p in range(topics[t])]
        try:
            ends = kafka_offsets.list_offsets(source, "latest", tps)
        except OffsetLedgerError as exc:
            status.error = str(exc)
            return status
        with _timed(f"{flow.name} progress"):
            rows = self._progress(flow)
        progress = {(t, p): row for (f, t, p), row in rows.items() if f == flow.name}
        with _timed(f"{flow.name} runs"):
            # The one readiness rule: where the current epoch's runs end (or progress, higher).
            # Many groups: the flow's whole store, once, for the groups' coverage too.
            ends_of = recorded_ends(self.engine, [(flow.name, t, p) for t, p in tps],
                                    enough={(flow.name, t, p): ends[(t, p)] for t, p in tps},
                                    progress=rows, cache=self._stores)
        recorded = {(t, p): e.upstream for (_, t, p), e in ends_of.items()
                    if e.upstream is not None}
        updated = [clock.aware(r.updated_at) for r in progress.values() if r.updated_at is not None]
        status.last_run = max(updated, default=None)
        lows = kafka_offsets.list_offsets(source, "earliest",
                                          [tp for tp in tps if tp not in recorded])
        for tp in tps:
            row = progress.get(tp)
            status.partitions.append(PartitionLag(
                topic=tp[0], replica_topic=self.policy.remote_topic(flow.source, tp[0]),
                partition=tp[1], end=ends[tp], replicated_to=recorded.get(tp, lows.get(tp, 0)),
                has_runs=tp in recorded,
                newest_record=clock.aware(row.newest_record_timestamp) if row else None,
                last_run=clock.aware(row.updated_at) if row else None))
        behind = {(p.topic, p.partition): (p.replicated_to, p.end)
                  for p in status.partitions if p.lag > 0}
        if behind:
            with _timed(f"{flow.name} committed records in {len(behind)} tail(s)"):
                left = kafka_admin.committed_records_between(source, behind)
            for p in status.partitions:
                if (p.topic, p.partition) in left:
                    p.committed_left = left[(p.topic, p.partition)]
        target_error = self.cluster_error(flow.target)
        if unreadable:
            status.error = "; ".join(f"topic {t} is not replicated: {why}"
                                     for t, why in sorted(unreadable.items()))
        if target_error is not None:
            status.error = target_error
        elif not self.config.prefixless:
            replica = self.policy.remote_topic(flow.source, formats.HEARTBEATS_TOPIC)
            if replica in self._topics[flow.target]:
                with _timed(f"{flow.name} heartbeat"):
                    status.heartbeat = newest_heartbeat(self.config.cluster(flow.target),
                                                        replica)
        return status

    def _progress(self, flow: FlowConfig) -> dict:
        """``replication_progress`` of the flow and of its reverse (read once per round)."""
        engine = self.engine  # the reads ahead first: they may have read it
        if flow.name not in self._progress_rows:
            self._progress_rows[flow.name] = progress_ends(engine, self._progress_flows(flow))
        return self._progress_rows[flow.name]

    def _progress_flows(self, flow: FlowConfig) -> set[str]:
        return {flow.name} | {f.name for f in self.config.enabled_flows()
                              if (f.source, f.target) == (flow.target, flow.source)}

    # --- groups ----------------------------------------------------------------------------

    def read_commits_ahead(self, pool: Executor, aliases: Iterable[str],
                           groups: list[str]) -> None:
        """Start reading ``groups``' commits on each cluster on ``pool``: they wait on Kafka
        while the flows are gathered, and :meth:`groups_status` takes them when it gets there."""
        if not groups:
            return
        for alias in dict.fromkeys(aliases):
            self.cluster_error(alias)  # here: the pool only reads the filled cache
            context = contextvars.copy_context()  # the command's clients, one copy per task
            self._commit_reads[(alias, tuple(groups))] = pool.submit(
                context.run, self._read_commits, alias, groups)

    def _commits(self, alias: str, groups: list[str]) -> dict[str, list[CommitLag]] | str:
        """:meth:`_read_commits`, once per cluster and round (read ahead or now)."""
        key = (alias, tuple(groups))
        if key not in self._commit_reads:
            done: Future = Future()
            done.set_result(self._read_commits(alias, groups))
            self._commit_reads[key] = done
        return self._commit_reads[key].result()

    def _read_commits(self, alias: str, groups: list[str]) -> dict[str, list[CommitLag]] | str:
        """Every group's commits on ``alias`` with the partitions' ends: concurrent offset
        fetches and one end-offset request for all groups, not round trips per group."""
        error = self.cluster_error(alias)
        if error is not None:
            return error
        cluster = self.config.cluster(alias)
        try:
            offsets = kafka_offsets.committed_of(cluster, groups)
            ends = kafka_offsets.list_offsets(cluster, "latest",
                                              {tp for o in offsets.values() for tp in o})
        except OffsetLedgerError as exc:
            return str(exc)
        return {g: [CommitLag(alias, t, p, o, ends.get((t, p)))
                    for (t, p), o in sorted(offsets[g].items())] for g in groups}

    def groups_status(self, groups: list[str], flow: FlowConfig, flow_status: FlowStatus,
                      checkpoints: dict[tuple[str, str, str], Checkpoint],
                      last_moves: dict[str, tuple[str, str]] | None = None,
                      ) -> list[GroupStatus]:
        """The possible move ``S -> T`` of each group, in the order given.

        Each cluster is asked once for all groups, and coverage is assessed once for all of
        their commits (the one readiness rule, as ``failover``, ``failback`` and the metric
        ask it: one probe per partition, whatever the groups).
        """
        out = [GroupStatus(g, flow.name, flow.source, flow.target,
                           checkpoint=checkpoints.get((g, flow.source, flow.target)),
                           last_move=(last_moves or {}).get(g)) for g in groups]
        for alias in (flow.source, flow.target):
            commits = self._commits(alias, groups)
            for status in out:
                if isinstance(commits, str):
                    status.errors[alias] = commits
                else:
                    status.commits[alias] = commits[status.group]
        live = [st for st in out if flow.source not in st.errors]
        if not live:
            return out
        mappings = map_topics(self.config, flow, {c.topic for st in live
                                                  for c in st.commits[flow.source]})
        needs = {st.group: needs_for([GroupCommit(flow.source, st.group, c.topic, c.partition,
                                                  c.offset) for c in st.commits[flow.source]],
                                     mappings) for st in live}
        coverage = iter(assess(self.config, self.engine, flow.source,
                               [n for st in live for n in needs[st.group]],
                               progress=self._progress(flow), cache=self._stores))
        lagging = {p.topic for p in flow_status.partitions if not p.caught_up} & {
            t for t, m in mappings.items() if m.direction == FORWARD}
        for st in live:
            st.coverage = [next(coverage) for _ in needs[st.group]]
            st.flow_caught_up = flow_status.error is None and not (
                lagging & {c.topic for c in st.commits[flow.source]})
        return out

    def checkpoints(self, groups: list[str],
                    flows: list[FlowConfig]) -> dict[tuple[str, str, str], Checkpoint]:
        """``{(group, source, target): newest checkpoint}`` in one bounded aggregate."""
        if not groups:
            return {}
        # A running checkpoint job records every key at least once per refresh: the window
        # holds the newest checkpoint of every group it checkpoints (pipelines.checkpoint.history).
        since = history.window_start(clock.now(),
                                     self.config.history_refresh_hours)
        with _timed("checkpoints"):
            rows = self.engine.query(newest_checkpoints(
                groups, [(f.source, f.target) for f in flows], since), c=CHECKPOINTS)
        return {(r["group_id"], r["source_cluster"], r["target_cluster"]):
                Checkpoint(clock.aware(r["newest"]), int(r["partitions"])) for r in rows}

    def last_moves(self, groups: list[str]) -> dict[str, tuple[str, str]]:
        """``{group: (from, to)}`` of each group's newest completed operation."""
        if not groups:
            return {}
        with _timed("operations"):
            rows = self.engine.query(last_operations(groups), o=OPERATIONS)
        return {r["group_id"]: (r["from_cluster"], r["to_cluster"]) for r in rows}
