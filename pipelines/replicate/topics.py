"""Which topics a flow replicates, and their replica topics on the target cluster.

Invariants:
    * A topic is selected when the flow's allowlist admits it (``FlowConfig.topic_allowed``:
      full-match regexes, denylist wins) **and** the policy allows copying it to the target
      (``ReplicationPolicy.replicable``): internal topics and topics that came from the target
      (``P.Payments`` on B for the flow ``B->P``) are never selected, whatever the allowlist says.
    * A topic is never taken as removed without proof. Under an authorizer the source's
      metadata shows only the topics the principal may describe, so a topic the flow names
      literally, or whose replica exists on the target (it was replicated: regex allowlists
      too), and that the metadata does not show, is described by name
      (``kafka_admin.describe_topics``): only "does not exist" makes it removed (a warning; its
      replica stays); "not authorized" (or any other failure) makes it a topic that is not
      replicated, with the ACL to add (:attr:`TopicPlan.error`), in every pass and in
      ``status``.
    * An allowlist entry that is a plain topic name (letters, digits, ``.``, ``_``, ``-``)
      that does not exist and was never replicated is an error: a typo must not silently
      replicate nothing. It refuses the whole flow before any topic is created or altered.
      Everything else is per topic: a topic whose replica cannot
      be created, grown or configured (authorization, an invalid name, ...) is reported in
      :attr:`TopicSyncReport.errors` and left out of the pass, and every other topic goes on.
    * A replica has at least its source's partition count: a replica with fewer partitions is
      grown (``create_partitions``), as MirrorMaker 2 does, so partitions added to a source
      are replicated from the next topic refresh on.
    * A replica carries the source's topic-level configs (those set on the topic, not broker
      defaults) except the excluded ones (``config.properties.exclude``, MirrorMaker 2's
      DefaultConfigPropertyFilter list by default: ``message.timestamp.type`` and the rest);
      excluded configs are neither set nor reset on the replica. Each refresh re-applies them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ledger.config import ClusterConfig, Config, FlowConfig
from ledger.errors import OffsetLedgerError, first_line
from ledger.policy import ReplicationPolicy
from pipelines.edge import kafka_admin, kafka_errors

log = logging.getLogger(__name__)

_LITERAL_TOPIC = re.compile(r"[A-Za-z0-9._-]+")


class MissingSourceTopicError(OffsetLedgerError):
    """A topic named literally in a flow's allowlist does not exist on the source cluster."""


class ReplicaPartitionMismatchError(OffsetLedgerError):
    """A replica topic exists with fewer partitions than its source and cannot be grown."""


@dataclass(frozen=True)
class TopicPlan:
    """One selected source topic and its replica on the target."""

    topic: str
    replica_topic: str
    partitions: int
    replica_exists: bool = False
    replica_partitions: int | None = None
    # Why the topic cannot be read (e.g. a missing ACL): it is not replicated in this pass.
    error: str | None = None


@dataclass
class TopicSyncReport:
    created: list[str] = field(default_factory=list)
    grown: dict[str, tuple[int, int]] = field(default_factory=dict)
    configs_set: dict[str, dict[str, str]] = field(default_factory=dict)
    configs_reset: dict[str, list[str]] = field(default_factory=dict)
    # Source topic -> why it is not replicated in this pass.
    errors: dict[str, str] = field(default_factory=dict)


def select_topics(flow: FlowConfig, policy: ReplicationPolicy,
                  source_topics: Sequence[str]) -> list[str]:
    """The source topics the flow copies, sorted."""
    return sorted(t for t in source_topics
                  if flow.topic_allowed(t) and policy.replicable(t, flow.target))


def missing_literal_topics(flow: FlowConfig, source_topics: Sequence[str]) -> list[str]:
    """Allowlist entries that name one topic literally and match nothing on the source."""
    return [p for p in flow.topics if _LITERAL_TOPIC.fullmatch(p)
            and not any(re.fullmatch(p, t) for t in source_topics)]


def unseen_topics(flow: FlowConfig, policy: ReplicationPolicy, source_topics: Sequence[str],
                  target_topics: Sequence[str]) -> list[str]:
    """Topics the flow names literally, or replicated (their replica is on the target), that
    the source's metadata does not show: each is described by name before anything is
    concluded (:func:`look_up_unseen`)."""
    seen = set(source_topics)
    out = set(missing_literal_topics(flow, list(source_topics)))
    if not policy.prefixless:  # a prefixless replica cannot be told from an original
        for replica in target_topics:
            topic = policy.upstream_topic(replica)
            if topic is not None and policy.topic_source(replica) == flow.source \
                    and topic not in seen and flow.topic_allowed(topic) \
                    and policy.replicable(topic, flow.target):
                out.add(topic)
    return sorted(out)


@dataclass(frozen=True)
class UnseenTopics:
    """What describing the unseen topics by name found."""

    visible: dict[str, int]     # described after all: partition counts
    removed: list[str]          # do not exist, and have a replica: replicated, then removed
    unknown: list[str]          # do not exist, never replicated: a literal name's typo
    unreadable: dict[str, str]  # cannot be described (not authorized...): why, with the fix


def look_up_unseen(config: Config, flow: FlowConfig, source_topics: Mapping[str, int],
                   target_topics: Mapping[str, int]) -> UnseenTopics:
    """Describe by name the topics of :func:`unseen_topics`: only a topic that does not
    exist counts as removed; a topic the principal may not describe is unreadable."""
    policy = ReplicationPolicy.from_config(config)
    unseen = unseen_topics(flow, policy, list(source_topics), list(target_topics))
    found = UnseenTopics({}, [], [], {})
    # Replication needs READ (which implies the DESCRIBE this look-up needs): name READ.
    described = kafka_admin.describe_topics(config.cluster(flow.source), unseen, "READ")
    for topic, result in described.items():
        if isinstance(result, int):
            found.visible[topic] = result
        elif result.kind == kafka_errors.UNKNOWN_TOPIC:
            replica = policy.remote_topic(flow.source, topic)
            (found.removed if replica in target_topics else found.unknown).append(topic)
        else:
            found.unreadable[topic] = str(result)
    return found


def plan_topics(config: Config, flow: FlowConfig) -> list[TopicPlan]:
    """Select the flow's topics and check their replicas; raise before anything is changed.

    Topics that cannot be read come back with :attr:`TopicPlan.error` set (not replicated).
    """
    source_topics = kafka_admin.list_topics(config.cluster(flow.source))
    policy = ReplicationPolicy.from_config(config)
    target_topics = kafka_admin.list_topics(config.cluster(flow.target))
    unseen = look_up_unseen(config, flow, source_topics, target_topics)
    source_topics = {**source_topics, **unseen.visible}
    # A topic whose replica exists was replicated and then removed from the source (proven:
    # the source says it does not exist): no longer replicated, its replica stays. A literal
    # name never seen is a mistake in the name.
    for topic in unseen.removed:
        log.warning("flow %s: topic %s was removed from %s (it does not exist there); its "
                    "replica %s stays", flow.name, topic, flow.source,
                    policy.remote_topic(flow.source, topic))
    if unseen.unknown:
        raise MissingSourceTopicError(
            f"flow {flow.name}: topic(s) {', '.join(unseen.unknown)} named in the allowlist do "
            f"not exist on the source cluster {flow.source}")
    plans = []
    for topic in select_topics(flow, policy, list(source_topics)):
        replica = policy.remote_topic(flow.source, topic)
        plans.append(TopicPlan(topic, replica, source_topics[topic], replica in target_topics,
                               target_topics.get(replica)))
    for topic, why in sorted(unseen.unreadable.items()):
        replica = policy.remote_topic(flow.source, topic)
        plans.append(TopicPlan(topic, replica, 0, replica in target_topics,
                               target_topics.get(replica), error=f"{topic}: {why}"))
    for p in plans:
        if p.replica_exists and (p.replica_partitions or 0) > p.partitions:
            log.warning("replica topic %s has %s partitions, more than the %s of %s; records "
                        "keep their partition number", p.replica_topic, p.replica_partitions,
                        p.partitions, p.topic)
    return plans


def replicated_configs(configs: Mapping[str, str], exclude: Sequence[str]) -> dict[str, str]:
    """The topic configs a replica takes from its source (MM2's ConfigPropertyFilter)."""
    return {k: v for k, v in configs.items() if not any(re.fullmatch(p, k) for p in exclude)}


def config_changes(source_configs: Mapping[str, str], replica_configs: Mapping[str, str],
                   exclude: Sequence[str] = ()) -> tuple[dict[str, str], list[str]]:
    """What to set and reset on the replica so its non-excluded configs equal the source's."""
    wanted = replicated_configs(source_configs, exclude)
    have = replicated_configs(replica_configs, exclude)
    to_set = {k: v for k, v in wanted.items() if have.get(k) != v}
    to_reset = sorted(k for k in have if k not in wanted)
    return to_set, to_reset


def topic_configs(cluster: ClusterConfig, topic: str) -> dict[str, str]:
    """The configs set on the topic itself (dynamic topic configs), not broker defaults."""
    from confluent_kafka.admin import ConfigResource, ConfigSource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = kafka_admin.admin(cluster)  # must outlive the future
    futures = client.describe_configs([resource])
    entries = kafka_admin._wait(cluster, f"describing {topic}", futures[resource], client,
                                "DESCRIBE_CONFIGS", f"topic {topic}")
    return {name: e.value for name, e in entries.items()
            if e.value is not None and e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def grow_partitions(cluster: ClusterConfig, topic: str, partitions: int) -> None:
    """Add partitions to ``topic`` so that it has ``partitions``."""
    from confluent_kafka.admin import NewPartitions

    client = kafka_admin.admin(cluster)  # must outlive the future
    futures = client.create_partitions(
        [NewPartitions(topic, partitions)], operation_timeout=kafka_admin.TIMEOUT_S)
    kafka_admin._wait(cluster, f"adding partitions to {topic}", futures[topic], client,
                      "ALTER", f"topic {topic}")


def ensure_replicas(config: Config, flow: FlowConfig,
                    plans: Sequence[TopicPlan]) -> TopicSyncReport:
    """Create, grow and configure replicas; a topic that fails is reported, the others go on."""
    source = config.cluster(flow.source)
    target = config.cluster(flow.target)
    exclude = config.config_properties_exclude
    report = TopicSyncReport()
    for plan in plans:
        if plan.error is not None:
            report.errors[plan.topic] = plan.error
            log.error("flow %s: topic %s is not replicated: %s", flow.name, plan.topic,
                      plan.error)
            continue
        try:
            _ensure_replica(config, source, target, plan, exclude, report)
        except Exception as exc:  # per topic: KafkaAdminError, or a client error
            report.errors[plan.topic] = first_line(exc, 500)
            log.error("flow %s: topic %s is not replicated: %s", flow.name, plan.topic,
                      report.errors[plan.topic])
    return report


def _ensure_replica(config: Config, source: ClusterConfig, target: ClusterConfig,
                    plan: TopicPlan, exclude: Sequence[str], report: TopicSyncReport) -> None:
    wanted = replicated_configs(topic_configs(source, plan.topic), exclude)
    if not plan.replica_exists and kafka_admin.create_topic(
            target, plan.replica_topic, plan.partitions, wanted, config.replication_factor):
        report.created.append(plan.replica_topic)
        return
    have_partitions = kafka_admin.list_topics(target).get(plan.replica_topic)
    if have_partitions is None:
        raise ReplicaPartitionMismatchError(
            f"replica topic {plan.replica_topic} on {target.alias} cannot be read")
    if have_partitions < plan.partitions:
        grow_partitions(target, plan.replica_topic, plan.partitions)
        report.grown[plan.replica_topic] = (have_partitions, plan.partitions)
        log.warning("replica topic %s on %s grown from %s to %s partitions, as its source",
                    plan.replica_topic, target.alias, have_partitions, plan.partitions)
    have = topic_configs(target, plan.replica_topic)
    to_set, to_reset = config_changes(wanted, have, exclude)
    if to_set:
        kafka_admin.alter_topic_configs(target, plan.replica_topic, to_set)
        report.configs_set[plan.replica_topic] = to_set
    if to_reset:
        kafka_admin.delete_topic_configs(target, plan.replica_topic, to_reset)
        report.configs_reset[plan.replica_topic] = to_reset
    if have.get("message.timestamp.type") == "LogAppendTime":
        log.warning("replica topic %s has message.timestamp.type=LogAppendTime: its records "
                    "get the target's append time, not the source timestamps; set it to "
                    "CreateTime on %s", plan.replica_topic, target.alias)
