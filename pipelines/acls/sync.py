"""ACL sync of a flow ``S->T`` (MirrorMaker 2's ``sync.topic.acls``; group ACLs opt-in): the
Kafka and ledger I/O around :mod:`pipelines.acls.rules`.

One pass::

    describe every ACL on S       (DESCRIBE on CLUSTER on S)
      -> the replica bindings they imply (rules.desired: topics the flow replicates, groups)
    describe every ACL on T       (DESCRIBE on CLUSTER on T)
      -> the bindings this flow added and has not removed (the ledger's acl_syncs)
      -> create what T lacks, delete what the flow added that S no longer implies
                                  (ALTER on CLUSTER on T)
      -> one acl_syncs row per binding created or deleted

Invariants:
    * Nothing on T is touched but the bindings the pass creates and the ones this flow
      created earlier (recorded in ``acl_syncs``); a binding T already had is never recorded,
      so never removed.
    * A binding is recorded only after Kafka confirmed its creation or deletion.
    * A pass never raises into replication: a missing ACL of the replicator is one line naming
      the ACL to add (``missing ACL: ...``), a cluster without an authorizer is skipped with an
      info line; replication goes on either way.
    * ``run_due`` runs at most every ``sync.topic.acls.interval.seconds`` per syncer (the
      streaming job's refresh); a ``--once`` run builds a new syncer, so it always runs.
    * No cluster property (secrets) reaches a log line or a row: messages come from
      ``kafka_errors.classify``.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ledger import clock
from ledger.config import Config, FlowConfig
from ledger.errors import first_line
from ledger.schemas import ACL_SYNCS
from pipelines.acls import rules
from pipelines.acls.admin import (
    FAILED,
    NO_AUTHORIZER,
    AclsUnavailable,
    create,
    delete,
    describe,
)
from pipelines.acls.rules import ADDED, REMOVED, Binding
from pipelines.edge import kafka_admin

log = logging.getLogger(__name__)


# --- one pass ----------------------------------------------------------------------------------


@dataclass
class SyncReport:
    """What one pass did: bindings added and removed (recorded), or why it could not."""

    flow: str
    added: list[Binding] = field(default_factory=list)
    removed: list[Binding] = field(default_factory=list)
    problem: str | None = None
    kind: str | None = None      # of the problem: no_authorizer, missing_acl, failed

    @property
    def failed(self) -> bool:
        return self.problem is not None and self.kind != NO_AUTHORIZER


def rows(report: SyncReport, flow: FlowConfig, origins: dict[Binding, Binding],
         now: dt.datetime) -> list[dict[str, Any]]:
    """The ``acl_syncs`` rows of a pass (column order of :mod:`ledger.schemas`)."""
    sync_id = f"acl-sync-{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    out = []
    for action, bindings in ((ADDED, report.added), (REMOVED, report.removed)):
        for b in bindings:
            origin = origins.get(b) if action == ADDED else None
            out.append({"sync_id": sync_id, "flow": flow.name, "source_cluster": flow.source,
                        "target_cluster": flow.target, "action": action,
                        "resource_type": b.resource_type, "resource_name": b.name,
                        "pattern_type": b.pattern_type, "principal": b.principal,
                        "host": b.host, "operation": b.operation,
                        "permission_type": b.permission,
                        "source_resource_name": origin.name if origin else None,
                        "synced_at": now})
    return out


def _engine(config: Config, session: Callable[[], Any] | None) -> Any:
    from ledger import commits
    from ledger.engine import LedgerEngine

    engine = LedgerEngine(config.ledger_location, session)
    if not engine.exists(ACL_SYNCS):  # a ledger made before the table existed
        if engine.direct and commits.create_missing_tables(config.ledger_location) \
                is not commits.UNAVAILABLE:
            return engine
        engine.ledger.init()
    return engine


def owned_bindings(engine: Any, flow: FlowConfig) -> set[Binding]:
    history = engine.query("SELECT * FROM {a} WHERE flow = '" + flow.name.replace("'", "''")
                           + "'", a=ACL_SYNCS)
    return rules.owned(history)


def checkpointed_groups(config: Config, flow: FlowConfig) -> list[str]:
    """The groups on the source the flow's group allowlist selects (what ``checkpoint`` does)."""
    return sorted(g.group_id for g in kafka_admin.list_groups(config.cluster(flow.source))
                  if flow.group_allowed(g.group_id))


def sync_flow(config: Config, flow: FlowConfig, topics: Iterable[str],
              session: Callable[[], Any] | None = None) -> SyncReport:
    """One ACL sync pass of ``flow`` for the source ``topics`` it replicates."""
    report = SyncReport(flow.name)
    sync_topics = config.for_flow(flow, "sync_topic_acls_enabled")
    sync_groups = config.for_flow(flow, "sync_group_acls_enabled")
    if not (sync_topics or sync_groups):
        return report
    source, target = config.cluster(flow.source), config.cluster(flow.target)
    naming = rules.Naming(flow.source, config.replication_policy_separator, config.prefixless)
    origins: dict[Binding, Binding] = {}
    engine = None
    try:
        groups = checkpointed_groups(config, flow) if sync_groups else []
        wanted = rules.desired(describe(source), naming, topics if sync_topics else (), groups)
        existing = describe(target)
        engine = _engine(config, session)
        todo = rules.diff(wanted, owned_bindings(engine, flow), existing)
        origins = wanted
        try:
            report.added = create(target, todo.add)
        except AclsUnavailable as exc:
            report.added = getattr(exc, "done", [])
            raise
        try:
            report.removed = delete(target, todo.remove)
        except AclsUnavailable as exc:
            report.removed = getattr(exc, "done", [])
            raise
    except AclsUnavailable as exc:
        report.problem, report.kind = str(exc), exc.kind
    except Exception as exc:  # the sync never stops replication
        report.problem, report.kind = first_line(exc), FAILED
    if engine is not None and (report.added or report.removed):
        now = clock.now()
        try:
            engine.append(ACL_SYNCS, rows(report, flow, origins, now))
        except Exception as exc:
            report.problem = report.problem or f"ACL changes not recorded: {first_line(exc)}"
            report.kind = report.kind or FAILED
    return report


def log_report(report: SyncReport) -> None:
    """One line for a problem (warning; info when there is no authorizer), one for changes."""
    if report.added or report.removed:
        log.info("flow %s: ACL sync: %d binding(s) added, %d removed on the target",
                 report.flow, len(report.added), len(report.removed))
    if report.kind == NO_AUTHORIZER:
        log.info("flow %s: ACL sync skipped: %s", report.flow, report.problem)
    elif report.problem:
        log.warning("flow %s: ACL sync: %s; replication goes on", report.flow, report.problem)


def count(metrics: Any, report: SyncReport) -> None:
    """A pass's report on the metrics (``pipelines.metrics.Metrics``)."""
    source, target = report.flow.split("->")
    for action, bindings in ((ADDED, report.added), (REMOVED, report.removed)):
        if bindings:
            metrics.acl_bindings_synced.labels(source, target, action).inc(len(bindings))
    if report.failed:
        metrics.acl_sync_failures.labels(source, target).inc()


class AclSync:
    """A flow's ACL sync in a long-running job: :meth:`run_due` at every refresh runs a pass
    when ``sync.topic.acls.interval.seconds`` have passed since the last one (the first call
    always runs). ``on_report`` (metrics) sees every pass's report."""

    def __init__(self, session: Callable[[], Any] | None = None) -> None:
        self.session = session
        self.last: float | None = None
        self.on_report: Callable[[SyncReport], None] | None = None

    def run_due(self, config: Config, flow: FlowConfig, topics: Iterable[str]) -> None:
        interval = config.for_flow(flow, "sync_topic_acls_interval_seconds")
        now = time.monotonic()
        if self.last is not None and now - self.last < interval:
            return
        self.last = now
        try:
            report = sync_flow(config, flow, list(topics), self.session)
        except Exception as exc:  # never into replication
            report = SyncReport(flow.name, problem=first_line(exc), kind=FAILED)
        log_report(report)
        if self.on_report is not None:
            self.on_report(report)
