"""Which topic a group's committed offset maps to on the other cluster, and with which runs.

For a checkpoint flow ``S->T`` (group offsets move from cluster S to cluster T)::

    group commits on S          direction   runs used (flow, topic)     writes on T
    ------------------------    ---------   -------------------------   --------------
    Payments    (original)      forward     S->T, Payments              S.Payments
    T.Payments  (a replica)     reverse     T->S, Payments              Payments
                (only when listed in flows.S->T.reverse.checkpointed.topics)

Invariants:
    * Forward mapping only for topics the flow replicates (allowlist, not internal, no loop).
    * Reverse mapping only for reverse-checkpointed topics, which config validation guarantees
      are named ``<T><sep><topic>`` under the prefix policy with both flows enabled.
    * Anything else has no mapping (``None``) and is not checkpointed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ledger.config import Config, FlowConfig
from ledger.policy import ReplicationPolicy

FORWARD = "forward"
REVERSE = "reverse"


@dataclass(frozen=True)
class TopicMapping:
    """How a group's offsets on ``source_topic`` (cluster S) become offsets on T."""

    direction: str
    source_topic: str
    target_topic: str
    sync_flow: str      # whose offset_syncs translate it
    sync_topic: str     # the original topic those runs are keyed by
    sync_source: str    # the cluster that original lives on (for end offsets)


def map_topic(config: Config, flow: FlowConfig, topic: str,
              policy: ReplicationPolicy | None = None) -> TopicMapping | None:
    policy = policy or ReplicationPolicy.from_config(config)
    source, target = flow.source, flow.target
    if flow.reverse_checkpointed(topic):
        upstream = policy.upstream_topic(topic)
        if upstream is not None and policy.topic_source(topic) == target:
            return TopicMapping(REVERSE, topic, upstream, f"{target}->{source}", upstream, target)
    if flow.topic_allowed(topic) and policy.replicable(topic, target):
        return TopicMapping(FORWARD, topic, policy.remote_topic(source, topic),
                            f"{source}->{target}", topic, source)
    return None


def map_topics(config: Config, flow: FlowConfig, topics: Iterable[str]) -> dict[str, TopicMapping]:
    """``{topic: mapping}`` of the ``topics`` that have one (:func:`map_topic`)."""
    policy = ReplicationPolicy.from_config(config)
    mapped = {topic: map_topic(config, flow, topic, policy) for topic in set(topics)}
    return {topic: m for topic, m in mapped.items() if m is not None}


def subscribe_topics(config: Config, flow: FlowConfig, topics: set[str]) -> list[str]:
    """The topics a group should subscribe to on T after moving there.

    Each topic the group consumed on S appears on T under its translated name, and the
    *original* name on T carries what producers write there after the move (DESIGN.md step 2:
    ``Payments`` and ``P.Payments`` on B).
    """
    policy = ReplicationPolicy.from_config(config)
    out: set[str] = set()
    for topic in topics:
        mapping = map_topic(config, flow, topic, policy)
        if mapping is None:
            continue
        out.add(mapping.target_topic)
        out.add(policy.original_topic(topic))
    return sorted(out)
