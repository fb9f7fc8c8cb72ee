"""ACL rules as plain data: MirrorMaker 2's mapping of topic ACLs to replicas, the diff against
what a flow created, and Kafka's own authorization evaluation.

A :class:`Binding` is an ACL binding with the enum *names* confluent-kafka uses
(``ResourceType.TOPIC`` -> ``"TOPIC"``, ``AclOperation.READ`` -> ``"READ"``, ...); nothing here
imports confluent-kafka, so every rule is unit-tested with plain values.

Sync rules (MM2's ``MirrorSourceConnector``, plus PREFIXED patterns and group ACLs):
    * Only TOPIC bindings whose pattern covers a topic the flow replicates are copied: a
      LITERAL ``T`` to the LITERAL replica name, a PREFIXED ``Pay`` to the PREFIXED replica
      prefix (``P.Pay``), the LITERAL wildcard ``*`` to the PREFIXED replica prefix ``P.``
      (every replica; under the prefixless policy the wildcard is not copied: it would cover
      the target's own topics).
    * ALLOW ALL becomes ALLOW READ; ALLOW WRITE is never copied (replicas are written by the
      replicator only); DENY bindings are copied as they are, so a sync never widens access.
    * Group bindings (opt-in): LITERAL and PREFIXED GROUP bindings that cover a group the flow
      checkpoints, ALLOW READ/DESCRIBE (ALLOW ALL as ALLOW READ) and every DENY, same name.
    * The diff adds what the target lacks and removes only bindings the flow itself added
      (the ledger's ``acl_syncs``) that the source no longer implies; a binding that already
      existed on the target is never recorded as the flow's, so it is never removed.

Evaluation (Kafka's ``StandardAuthorizer``): a binding matches a resource when its type is the
resource's, and its pattern is LITERAL with the same name or ``*``, or PREFIXED with a prefix of
the name; it matches a principal when it names it or ``User:*``. Any matching DENY for the
operation (or ALL) denies; else any matching ALLOW for it (or ALL, or, for DESCRIBE, READ,
WRITE, DELETE or ALTER; for DESCRIBE_CONFIGS, ALTER_CONFIGS) allows; else denied. The client's
host is unknown here: an ALLOW for one host does not count, a DENY for one host does.
Super users and ``allow.everyone.if.no.acl.found`` are not visible through ACLs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

TOPIC, GROUP, CLUSTER = "TOPIC", "GROUP", "BROKER"
LITERAL, PREFIXED = "LITERAL", "PREFIXED"
ALLOW, DENY = "ALLOW", "DENY"
READ, WRITE, ALL, DESCRIBE = "READ", "WRITE", "ALL", "DESCRIBE"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ADDED, REMOVED = "added", "removed"

# Operations an ALLOW of another implies (Kafka's AclEntry.supportedOperations rules).
_IMPLIED_BY = {"DESCRIBE": ("READ", "WRITE", "DELETE", "ALTER"),
               "DESCRIBE_CONFIGS": ("ALTER_CONFIGS",)}


@dataclass(frozen=True, order=True)
class Binding:
    """One ACL binding (the fields of confluent-kafka's ``AclBinding``, enum names as text)."""

    resource_type: str
    name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

    def matches(self, resource_type: str, name: str) -> bool:
        """Whether the binding's pattern covers the resource ``resource_type name``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == LITERAL:
            return self.name in (name, WILDCARD)
        return self.pattern_type == PREFIXED and name.startswith(self.name)

    def describe(self) -> str:
        """``ALLOW User:app READ topic P.Payments (prefixed)``: for logs and output."""
        kind = "cluster" if self.resource_type == CLUSTER else self.resource_type.lower()
        pattern = " (prefixed)" if self.pattern_type == PREFIXED else ""
        host = "" if self.host == WILDCARD else f" from {self.host}"
        return (f"{self.permission} {self.principal}{host} {self.operation} {kind} "
                f"{self.name}{pattern}")

    def acl_arguments(self) -> str:
        """The binding as ``kafka-acls --add`` arguments."""
        who = "--allow-principal" if self.permission == ALLOW else "--deny-principal"
        resource = ("--cluster" if self.resource_type == CLUSTER else
                    f"--{self.resource_type.lower().replace('_', '-')} {self.name}")
        pattern = " --resource-pattern-type prefixed" if self.pattern_type == PREFIXED else ""
        host = ("" if self.host == WILDCARD
                else f" --{self.permission.lower()}-host {self.host}")
        return (f"{who} {self.principal}{host} --operation {operation_flag(self.operation)} "
                f"{resource}{pattern}")


def operation_flag(operation: str) -> str:
    """``DESCRIBE_CONFIGS`` -> ``DescribeConfigs`` (how ``kafka-acls --operation`` spells it)."""
    return "".join(part.title() for part in operation.split("_"))


@dataclass(frozen=True)
class Naming:
    """How a flow names replicas: ``source`` alias, separator, prefixless (identity) policy."""

    source: str
    separator: str = "."
    prefixless: bool = False

    def replica(self, name: str) -> str:
        return name if self.prefixless else f"{self.source}{self.separator}{name}"


def _permission(binding: Binding) -> tuple[str, str] | None:
    """MM2's entry rule: (operation, permission) on the target, or None (not copied)."""
    if binding.permission == ALLOW and binding.operation == WRITE:
        return None  # replicas are written by the replicator only
    if binding.permission == ALLOW and binding.operation == ALL:
        return READ, ALLOW
    return binding.operation, binding.permission


def target_topic_binding(binding: Binding, naming: Naming,
                         replicated: Iterable[str]) -> Binding | None:
    """The replica binding a source TOPIC binding maps to, or None when it is not copied."""
    if binding.resource_type != TOPIC:
        return None
    entry = _permission(binding)
    if entry is None:
        return None
    topics = set(replicated)
    if binding.pattern_type == LITERAL and binding.name == WILDCARD:
        if naming.prefixless or not topics:
            return None
        name, pattern = naming.replica(""), PREFIXED
    elif binding.pattern_type == LITERAL:
        if binding.name not in topics:
            return None
        name, pattern = naming.replica(binding.name), LITERAL
    elif binding.pattern_type == PREFIXED:
        if not any(t.startswith(binding.name) for t in topics):
            return None
        name, pattern = naming.replica(binding.name), PREFIXED
    else:
        return None
    return Binding(TOPIC, name, pattern, binding.principal, binding.host, *entry)


def target_group_binding(binding: Binding, groups: Iterable[str]) -> Binding | None:
    """The target binding of a source GROUP binding (same name), or None when not copied."""
    if binding.resource_type != GROUP or binding.pattern_type not in (LITERAL, PREFIXED):
        return None
    if not any(binding.matches(GROUP, g) for g in groups):
        return None
    if binding.permission == ALLOW:
        if binding.operation not in (READ, DESCRIBE, ALL):
            return None
        operation = READ if binding.operation == ALL else binding.operation
    else:
        operation = binding.operation
    return Binding(GROUP, binding.name, binding.pattern_type, binding.principal, binding.host,
                   operation, binding.permission)


def desired(source: Iterable[Binding], naming: Naming, replicated: Iterable[str],
            groups: Iterable[str] = ()) -> dict[Binding, Binding]:
    """Every target binding the source's bindings imply, each with the source binding it came
    from (the first, in sorted order)."""
    topics, group_ids = set(replicated), set(groups)
    out: dict[Binding, Binding] = {}
    for binding in sorted(set(source)):
        target = target_topic_binding(binding, naming, topics)
        if target is None and group_ids:
            target = target_group_binding(binding, group_ids)
        if target is not None:
            out.setdefault(target, binding)
    return out


@dataclass(frozen=True)
class Diff:
    add: tuple[Binding, ...]
    remove: tuple[Binding, ...]


def diff(wanted: Iterable[Binding], owned: Iterable[Binding],
         existing: Iterable[Binding]) -> Diff:
    """What to create and delete on the target: the wanted bindings it lacks; the bindings the
    flow added (``owned``) that are no longer wanted. Nothing else is touched."""
    wanted_set, owned_set, existing_set = set(wanted), set(owned), set(existing)
    return Diff(tuple(sorted(wanted_set - existing_set)), tuple(sorted(owned_set - wanted_set)))


def owned(history: Iterable[Mapping[str, object]]) -> set[Binding]:
    """The bindings a flow added and has not removed, from its ``acl_syncs`` rows (any order:
    the newest ``synced_at``, then ``added`` before ``removed`` at the same instant, wins)."""
    latest: dict[Binding, tuple[object, int, str]] = {}
    for row in history:
        binding = Binding(*(str(row[k]) for k in ("resource_type", "resource_name",
                                                  "pattern_type", "principal", "host",
                                                  "operation", "permission_type")))
        action = str(row["action"])
        rank = (row["synced_at"], 1 if action == REMOVED else 0, action)
        if binding not in latest or rank[:2] > latest[binding][:2]:  # type: ignore[operator]
            latest[binding] = rank
    return {b for b, (_, _, action) in latest.items() if action == ADDED}


# --- evaluation ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    allowed: bool
    denied_by: Binding | None = None   # the DENY that refused it, if one did

    @property
    def reason(self) -> str:
        if self.allowed:
            return "allowed"
        return f"denied by {self.denied_by.describe()}" if self.denied_by else "no ALLOW"


def authorize(bindings: Iterable[Binding], principal: str, resource_type: str, name: str,
              operation: str) -> Decision:
    """Kafka's decision for ``principal`` doing ``operation`` on ``resource_type name``."""
    applicable = [b for b in bindings if b.matches(resource_type, name)
                  and b.principal in (principal, WILDCARD_PRINCIPAL)]
    for b in sorted(applicable):
        if b.permission == DENY and b.operation in (operation, ALL):
            return Decision(False, b)
    granting = (operation, ALL, *_IMPLIED_BY.get(operation, ()))
    allowed = any(b.permission == ALLOW and b.host == WILDCARD and b.operation in granting
                  for b in applicable)
    return Decision(allowed)


def principals_allowed(bindings: Iterable[Binding], resource_type: str, name: str,
                       operation: str) -> list[str]:
    """The principals some ALLOW names for ``operation`` on the resource whom no DENY refuses
    (``User:*`` included as itself)."""
    pool = list(bindings)
    candidates = {b.principal for b in pool if b.permission == ALLOW
                  and b.matches(resource_type, name) and b.operation in (operation, ALL)}
    return sorted(p for p in candidates
                  if authorize(pool, p, resource_type, name, operation).allowed)
