"""The permission check of a move (``failover``/``failback``, ``status --group``): will the
group's consumers be authorized on the cluster they move to?

For a group G moved ``S -> T`` with the printed subscription: the principals that hold READ
on group G on S (Kafka's evaluation over S's ACLs: an ALLOW for them, no DENY) are checked on
T for READ on every subscribed topic that exists on T (one created later gets its ACLs with
its creation: listed as ``not_on_target``) and READ on group G (:func:`rules.authorize`: DENY over
ALLOW, LITERAL and PREFIXED patterns, the wildcard principal ``User:*``). A gap is printed as
the exact ``kafka-acls`` arguments to add (or the DENY to remove).

Invariants:
    * The check reads ACLs only (DESCRIBE on CLUSTER on both clusters); it writes nothing.
    * Its status is ``ok``, ``gaps``, ``no_authorizer`` (T has no authorizer: everyone may do
      everything; reported as such, never as a pass), or ``unknown`` (ACLs could not be read,
      or S was not contacted under ``--disaster``: the principals are not known).
    * ``--require-acls`` refuses a move whose check is ``gaps`` or ``unknown`` (exit 2,
      before anything is written); without it the gaps are warnings and the move goes on.
    * Super users and ``allow.everyone.if.no.acl.found`` are invisible through ACLs: a principal
      that is a super user on T shows as a gap (add the ACL, or move without
      ``--require-acls``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger.config import Config, FlowConfig
from ledger.errors import OffsetLedgerError, first_line
from pipelines.acls import rules
from pipelines.acls.admin import NO_AUTHORIZER, AclsUnavailable, describe
from pipelines.acls.rules import ALLOW, GROUP, READ, TOPIC, WILDCARD, Binding
from pipelines.edge import kafka_admin

OK, GAPS, UNKNOWN = "ok", "gaps", "unknown"


class AclCheckError(OffsetLedgerError):
    """``--require-acls`` and the check did not pass: nothing was written (exit 2)."""


@dataclass
class AclCheck:
    """What the check of one group found on ``cluster`` (the target)."""

    group: str
    cluster: str
    status: str
    principals: list[str] = field(default_factory=list)
    checked: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)   # `kafka-acls` lines to run
    note: str | None = None
    absent: list[str] = field(default_factory=list)    # subscribed, not on the target yet

    @property
    def passed(self) -> bool:
        return self.status in (OK, NO_AUTHORIZER)

    def as_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "status": self.status, "principals": self.principals,
                "checked": self.checked, "missing": self.missing, "note": self.note,
                "not_on_target": self.absent}

    def summary(self) -> str:
        """One line for the operation's ledger row (``operations.message``)."""
        if self.status == OK:
            return (f"acls on {self.cluster}: ok, {len(self.checked)} checked for "
                    f"{', '.join(self.principals) or 'no principal'}")
        if self.status == GAPS:
            return (f"acls on {self.cluster}: {len(self.missing)} missing of "
                    f"{len(self.checked)} checked: " + "; ".join(self.missing))
        return f"acls on {self.cluster}: {self.status}: {self.note}"

    def lines(self) -> list[str]:
        """What to print (stderr) when the check did not pass."""
        if self.status == GAPS:
            return [f"warning: group {self.group}: {line}" for line in self.missing]
        if self.status not in (OK, NO_AUTHORIZER):
            return [f"warning: group {self.group}: ACLs on {self.cluster} not checked: "
                    f"{self.note}"]
        return []


def evaluate(source: Iterable[Binding], target: Iterable[Binding], group: str,
             topics: Iterable[str], cluster: str) -> AclCheck:
    """The check of ``group`` moving with subscription ``topics`` onto ``cluster`` (pure)."""
    on_target = list(target)
    principals = rules.principals_allowed(source, GROUP, group, READ)
    check = AclCheck(group, cluster, OK, principals)
    if not principals:
        check.note = (f"no principal holds READ on group {group} through an ACL on the source "
                      "(super users are not visible): nothing to check")
        return check
    needs = [(TOPIC, t) for t in sorted(set(topics))] + [(GROUP, group)]
    for principal in principals:
        for resource_type, name in needs:
            decision = rules.authorize(on_target, principal, resource_type, name, READ)
            check.checked.append({"principal": principal, "resource_type": resource_type,
                                  "name": name, "operation": READ,
                                  "allowed": decision.allowed, "reason": decision.reason})
            if decision.allowed:
                continue
            if decision.denied_by is not None:
                check.missing.append(
                    f"{principal} is denied READ on {resource_type.lower()} {name} on "
                    f"cluster {cluster} by {decision.denied_by.describe()}: remove ACL "
                    f"{decision.denied_by.acl_arguments()} on cluster {cluster}")
            else:
                needed = Binding(resource_type, name, rules.LITERAL, principal, WILDCARD, READ,
                                 ALLOW)
                check.missing.append(
                    f"{principal} may not READ {resource_type.lower()} {name} on cluster "
                    f"{cluster}: add ACL {needed.acl_arguments()} on cluster {cluster}")
    if check.missing:
        check.status = GAPS
    return check


def check_groups(config: Config, source: str, target: str,
                 subscribe: Mapping[str, list[str]], live: bool) -> dict[str, AclCheck]:
    """The check of each group of ``subscribe`` (group -> topics on ``target``)."""
    if not live:
        note = (f"{source} was not contacted (--disaster): the principals holding READ on the "
                "group there are not known")
        return {g: AclCheck(g, target, UNKNOWN, note=note) for g in subscribe}
    try:
        on_target = describe(config.cluster(target))
    except AclsUnavailable as exc:
        status = NO_AUTHORIZER if exc.kind == NO_AUTHORIZER else UNKNOWN
        return {g: AclCheck(g, target, status, note=str(exc)) for g in subscribe}
    try:
        on_source = describe(config.cluster(source))
    except AclsUnavailable as exc:
        return {g: AclCheck(g, target, UNKNOWN, note=str(exc)) for g in subscribe}
    existing = kafka_admin.list_topics(config.cluster(target))
    checks = {}
    for group, topics in subscribe.items():
        checks[group] = evaluate(on_source, on_target, group,
                                 [t for t in topics if t in existing], target)
        checks[group].absent = sorted(t for t in topics if t not in existing)
    return checks


def for_move(config: Config, source: str, target: str, subscribe: Mapping[str, list[str]],
             live: bool, require: bool) -> dict[str, AclCheck]:
    """The checks of a move, printed when they do not pass; with ``require``, a check that
    did not pass (gaps or unknown; a cluster without an authorizer passes) refuses it."""
    checks = check_groups(config, source, target, subscribe, live)
    refused = [c for c in checks.values() if not c.passed]
    if require and refused:
        detail = "\n".join(line for c in refused for line in c.lines())
        raise AclCheckError("--require-acls: the group(s) would not be authorized on "
                            f"{target}; nothing was written:\n{detail}")
    for check in checks.values():
        for line in check.lines():
            print(line, file=sys.stderr)
        if check.status == NO_AUTHORIZER:
            print(f"note: group {check.group}: {check.note}", file=sys.stderr)
    return checks


def for_status(config: Config, flows: Iterable[FlowConfig], groups: Iterable[str],
               committed_topics: Mapping[tuple[str, str], set[str]] | None = None,
               cluster_errors: Mapping[str, str | None] | None = None,
               ) -> list[tuple[str, str, str, dict[str, Any]]]:
    """``status --group``'s checks: ``(flow, group, line, as_dict)`` for each group along each
    flow (its subscription after a move, from what it committed on the flow's source); a group
    with no commits there is left out. Status reports: a failed check is a line, never raised.

    ``committed_topics`` (``{(flow name, group): topics committed on its source}``): what the
    report read already; a flow missing a group there is read from its source again.
    ``cluster_errors`` (``{alias: why it cannot be read}``): clusters the report found away or
    refusing; a flow touching one is reported not checked, without asking it again.
    """
    from pipelines.checkpoint.mapping import subscribe_topics
    from pipelines.edge import kafka_offsets

    out: list[tuple[str, str, str, dict[str, Any]]] = []
    groups = list(dict.fromkeys(groups))
    if not groups:
        return out
    for flow in flows:
        try:  # every group's commits at once, then one check (one ACL read per cluster)
            away = [cluster_errors[a] for a in (flow.source, flow.target)
                    if (cluster_errors or {}).get(a)]
            if away:  # told already: not asked again, each request to its whole timeout
                raise OffsetLedgerError(away[0])
            known = committed_topics or {}
            if all((flow.name, g) in known for g in groups):
                topics = {g: known[(flow.name, g)] for g in groups}
            else:
                committed = kafka_offsets.committed_of(config.cluster(flow.source), groups)
                topics = {g: {t for t, _ in committed[g]} for g in groups}
            subscribe = {g: subscribe_topics(config, flow, topics[g])
                         for g in groups if topics[g]}
            if not subscribe:  # no group committed on the flow's source: nothing to check
                continue
            checks = check_groups(config, flow.source, flow.target, subscribe, True)
        except Exception as exc:  # status reports, it never fails on the check
            why = first_line(exc)
            out.extend((flow.name, group, f"group {group}, flow {flow.name}: ACLs on "
                        f"{flow.target} not checked: {why}",
                        {"cluster": flow.target, "status": "unknown", "note": why})
                       for group in groups)
            continue
        out.extend((flow.name, group, f"group {group}, flow {flow.name}: {check.summary()}",
                    check.as_dict()) for group, check in checks.items())
    return out
