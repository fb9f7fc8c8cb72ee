"""Which topics a flow replicates, and their replica topics on the target cluster.

Invariants:
    * A topic is selected when the flow's allowlist admits it (``FlowConfig.topic_allowed``:
      full-match regexes, denylist wins) **and** the policy allows copying it to the target
      (``ReplicationPolicy.replicable``): internal topics and topics that came from the target
      (``P.Payments`` on B for the flow ``B->P``) are never selected, whatever the allowlist says.
    * An allowlist entry that is a plain topic name (letters, digits, ``.``, ``_``, ``-``)
      matching no source topic is an error: a typo must not silently replicate nothing.
    * Every check (missing topics, replicas with fewer partitions than their source) runs before
      any topic is created or altered, so a refused flow changes nothing on either cluster.
    * A replica has its source's partition count and the source's topic-level configs among
      ``REPLICATED_TOPIC_CONFIGS``; each run re-applies them, so source config changes reach
      the replica on the next run.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ledger.config import Config, FlowConfig
from ledger.errors import OffsetLedgerError
from ledger.policy import ReplicationPolicy
from pipelines import kafka_admin

log = logging.getLogger(__name__)

_LITERAL_TOPIC = re.compile(r"[A-Za-z0-9._-]+")


class MissingSourceTopicError(OffsetLedgerError):
    """A topic named literally in a flow's allowlist does not exist on the source cluster."""


class ReplicaPartitionMismatchError(OffsetLedgerError):
    """A replica topic exists with fewer partitions than its source."""


@dataclass(frozen=True)
class TopicPlan:
    """One selected source topic and its replica on the target."""

    topic: str
    replica_topic: str
    partitions: int
    replica_exists: bool = False
    replica_partitions: int | None = None


@dataclass
class TopicSyncReport:
    created: list[str] = field(default_factory=list)
    configs_set: dict[str, dict[str, str]] = field(default_factory=dict)
    configs_reset: dict[str, list[str]] = field(default_factory=dict)


def select_topics(flow: FlowConfig, policy: ReplicationPolicy,
                  source_topics: Sequence[str]) -> list[str]:
    """The source topics the flow copies, sorted."""
    return sorted(t for t in source_topics
                  if flow.topic_allowed(t) and policy.replicable(t, flow.target))


def missing_literal_topics(flow: FlowConfig, source_topics: Sequence[str]) -> list[str]:
    """Allowlist entries that name one topic literally and match nothing on the source."""
    return [p for p in flow.topics if _LITERAL_TOPIC.fullmatch(p)
            and not any(re.fullmatch(p, t) for t in source_topics)]


def plan_topics(config: Config, flow: FlowConfig) -> list[TopicPlan]:
    """Select the flow's topics and check their replicas; raise before anything is changed."""
    source = config.cluster(flow.source)
    target = config.cluster(flow.target)
    source_topics = kafka_admin.list_topics(source)
    missing = missing_literal_topics(flow, list(source_topics))
    if missing:
        raise MissingSourceTopicError(
            f"flow {flow.name}: topic(s) {', '.join(missing)} named in the allowlist do not "
            f"exist on the source cluster {flow.source}")
    policy = ReplicationPolicy.from_config(config)
    target_topics = kafka_admin.list_topics(target)
    plans = []
    for topic in select_topics(flow, policy, list(source_topics)):
        replica = policy.remote_topic(flow.source, topic)
        plans.append(TopicPlan(topic, replica, source_topics[topic], replica in target_topics,
                               target_topics.get(replica)))
    short = [p for p in plans if p.replica_exists and (p.replica_partitions or 0) < p.partitions]
    if short:
        detail = "; ".join(
            f"replica topic {p.replica_topic} on {flow.target} has {p.replica_partitions} "
            f"partition(s) but source topic {p.topic} on {flow.source} has {p.partitions}"
            for p in short)
        raise ReplicaPartitionMismatchError(
            f"flow {flow.name}: {detail} (add partitions to the replica, or delete it so "
            "that it is recreated)")
    for p in plans:
        if p.replica_exists and (p.replica_partitions or 0) > p.partitions:
            log.warning("replica topic %s has %s partitions, more than the %s of %s; records "
                        "keep their partition number", p.replica_topic, p.replica_partitions,
                        p.partitions, p.topic)
    return plans


def config_changes(source_configs: Mapping[str, str],
                   replica_configs: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """What to set and what to reset on the replica so its topic configs equal the source's."""
    to_set = {k: v for k, v in source_configs.items() if replica_configs.get(k) != v}
    to_reset = sorted(k for k in replica_configs if k not in source_configs)
    return to_set, to_reset


def ensure_replicas(config: Config, flow: FlowConfig,
                    plans: Sequence[TopicPlan]) -> TopicSyncReport:
    """Create missing replicas and bring every replica's topic configs in line with its source."""
    source = config.cluster(flow.source)
    target = config.cluster(flow.target)
    report = TopicSyncReport()
    for plan in plans:
        wanted = kafka_admin.explicit_topic_configs(source, plan.topic)
        if not plan.replica_exists and kafka_admin.create_topic(
                target, plan.replica_topic, plan.partitions, wanted, config.replication_factor):
            report.created.append(plan.replica_topic)
            continue
        have = kafka_admin.explicit_topic_configs(target, plan.replica_topic)
        to_set, to_reset = config_changes(wanted, have)
        if to_set:
            kafka_admin.alter_topic_configs(target, plan.replica_topic, to_set)
            report.configs_set[plan.replica_topic] = to_set
        if to_reset:
            kafka_admin.delete_topic_configs(target, plan.replica_topic, to_reset)
            report.configs_reset[plan.replica_topic] = to_reset
    return report
