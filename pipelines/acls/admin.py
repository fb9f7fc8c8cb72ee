"""The ACL calls of confluent-kafka's AdminClient (describe, create, delete) over
:class:`pipelines.acls.rules.Binding`, with every failure classified.

Invariants:
    * A cluster without an authorizer (``SECURITY_DISABLED``) is :data:`NO_AUTHORIZER`, never a
      failure; a refused call is :data:`MISSING_ACL` with the ACL to add (``missing ACL:
      cluster B: User:replicator is not authorized to ALTER cluster: add ACL ...``), never
      "unreachable"; anything else is classified by ``kafka_errors`` (:data:`FAILED`).
    * ``create``/``delete`` return what Kafka confirmed; on a failure the confirmed part is on
      the raised error's ``done``.
    * Messages come from ``kafka_errors.classify``: no cluster property (secret) in them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ledger.config import ClusterConfig
from pipelines.acls.rules import Binding
from pipelines.edge import kafka_admin, kafka_errors

RESULT_TIMEOUT_S = 30.0
NO_AUTHORIZER = "no_authorizer"
MISSING_ACL = "missing_acl"
FAILED = "failed"


class AclsUnavailable(Exception):
    """ACLs could not be read or changed: ``kind`` is no_authorizer, missing_acl or failed."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


# --- confluent-kafka edge ----------------------------------------------------------------------


def from_kafka(acl: Any) -> Binding:
    """A :class:`Binding` from confluent-kafka's ``AclBinding``."""
    return Binding(acl.restype.name, acl.name, acl.resource_pattern_type.name, acl.principal,
                   acl.host, acl.operation.name, acl.permission_type.name)


def to_kafka(binding: Binding) -> Any:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(ResourceType[binding.resource_type], binding.name,
                      ResourcePatternType[binding.pattern_type], binding.principal,
                      binding.host, AclOperation[binding.operation],
                      AclPermissionType[binding.permission])


def exact_filter(binding: Binding) -> Any:
    """An ``AclBindingFilter`` matching ``binding`` only (for ``delete_acls``)."""
    from confluent_kafka.admin import AclBindingFilter

    b = to_kafka(binding)
    return AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                            b.operation, b.permission_type)


NO_AUTHORIZER_TEXT = ("cluster {alias} has no authorizer (no ACLs to read or write: every "
                      "principal may do everything)")


def authorizer(cluster: ClusterConfig) -> str | None:
    """The brokers' ``authorizer.class.name`` ("" when none), or None when it cannot be read.

    librdkafka answers DescribeAcls on a cluster without an authorizer with an empty list (the
    broker's SECURITY_DISABLED is dropped): that cluster would look like one with no ACLs, and
    a move's check would pass where nothing was checked.
    """
    from confluent_kafka.admin import ConfigResource

    client = kafka_admin.admin(cluster)
    try:
        brokers = client.list_topics(timeout=10).brokers
        resource = ConfigResource(ConfigResource.Type.BROKER, str(min(brokers)))
        entries = client.describe_configs([resource], request_timeout=15)[resource].result(
            timeout=RESULT_TIMEOUT_S)
    except Exception:  # DESCRIBE_CONFIGS refused or no answer: the ACL calls say more
        return None
    entry = entries.get("authorizer.class.name")
    return None if entry is None else (entry.value or "")


def _unavailable(cluster: ClusterConfig, exc: BaseException, client: Any,
                 operation: str) -> AclsUnavailable:
    code = getattr(exc.args[0], "name", lambda: "")() if exc.args else ""
    if code == "SECURITY_DISABLED" or "No Authorizer is configured" in str(exc):
        return AclsUnavailable(NO_AUTHORIZER_TEXT.format(alias=cluster.alias), NO_AUTHORIZER)
    error = kafka_admin.failure(cluster, exc, client, operation, "cluster")
    if error.kind == kafka_errors.AUTHORIZATION:
        return AclsUnavailable(f"missing ACL: {error}", MISSING_ACL)
    return AclsUnavailable(str(error), FAILED)


def describe(cluster: ClusterConfig) -> list[Binding]:
    """Every ACL binding of ``cluster`` (DESCRIBE on its CLUSTER resource)."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    client = kafka_admin.admin(cluster)
    if authorizer(cluster) == "":
        raise AclsUnavailable(NO_AUTHORIZER_TEXT.format(alias=cluster.alias), NO_AUTHORIZER)
    anything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    try:
        found = client.describe_acls(anything, request_timeout=15).result(
            timeout=RESULT_TIMEOUT_S)
    except Exception as exc:
        raise _unavailable(cluster, exc, client, "DESCRIBE") from None
    return sorted(from_kafka(a) for a in found)


def create(cluster: ClusterConfig, bindings: Iterable[Binding]) -> list[Binding]:
    """Create ``bindings`` (ALTER on CLUSTER); the ones created, or the first failure raised."""
    return _alter(cluster, list(bindings), "create_acls", to_kafka)


def delete(cluster: ClusterConfig, bindings: Iterable[Binding]) -> list[Binding]:
    """Delete exactly ``bindings`` (ALTER on CLUSTER); the ones asked for whose deletion Kafka
    confirmed (an already absent one counts: it is gone), or the first failure raised."""
    return _alter(cluster, list(bindings), "delete_acls", exact_filter)


def _alter(cluster: ClusterConfig, wanted: list[Binding], call: str,
           request: Callable[[Binding], Any]) -> list[Binding]:
    """One ``create_acls``/``delete_acls`` call for ``wanted``; the failure raised carries the
    bindings Kafka did confirm (``done``), so that they are recorded all the same."""
    if not wanted:
        return []
    client = kafka_admin.admin(cluster)
    futures = getattr(client, call)([request(b) for b in wanted], request_timeout=15)
    done, failure = [], None
    for binding, future in zip(wanted, futures.values(), strict=True):
        try:
            future.result(timeout=RESULT_TIMEOUT_S)
            done.append(binding)
        except Exception as exc:
            failure = failure or _unavailable(cluster, exc, client, "ALTER")
    if failure is not None:
        failure.done = done  # type: ignore[attr-defined]
        raise failure
    return done
