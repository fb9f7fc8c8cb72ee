"""Kafka admin work through confluent-kafka: topics, end offsets, consumer groups.

Invariants:
    * Clients are built from a cluster's native librdkafka properties, never renamed; errors
      name the cluster alias, never its properties (which may hold secrets).
    * Group offsets are "next offset to consume". ``alter_group_offsets`` refuses a group with
      active members (Kafka itself refuses too; we check first for a clear message).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from ledger.config import ClusterConfig
from ledger.errors import OffsetLedgerError

TIMEOUT_S = 15.0
# Longer than any request timeout: a future must finish before its client may be destroyed.
RESULT_TIMEOUT_S = TIMEOUT_S * 2 + 5
# Topic configs a replica inherits from its source (MM2's default ConfigPropertyFilter keeps
# most; these are the ones that change a topic's behaviour for consumers).
REPLICATED_TOPIC_CONFIGS = (
    "cleanup.policy", "retention.ms", "retention.bytes", "compression.type",
    "max.message.bytes", "message.timestamp.type", "min.compaction.lag.ms",
    "max.compaction.lag.ms", "delete.retention.ms", "segment.ms", "segment.bytes",
    "min.cleanable.dirty.ratio", "message.timestamp.difference.max.ms",
)


class KafkaAdminError(OffsetLedgerError):
    """A cluster is unreachable or refused an admin request."""


class GroupActiveError(OffsetLedgerError):
    """A group has active members where offsets were to be written."""


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str
    members: int


def admin(cluster: ClusterConfig) -> AdminClient:
    return AdminClient(cluster.client_config(**{"log_level": 0}))


def _wait(cluster: ClusterConfig, what: str, future):
    try:
        return future.result(timeout=RESULT_TIMEOUT_S)
    except KafkaException as exc:
        raise KafkaAdminError(f"cluster {cluster.alias}: {what} failed: "
                              f"{exc.args[0].str() if exc.args else exc}") from None
    except Exception as exc:
        raise KafkaAdminError(f"cluster {cluster.alias}: {what} failed: {exc}") from None


def check_reachable(cluster: ClusterConfig, timeout: float = 10.0) -> None:
    try:
        metadata = admin(cluster).list_topics(timeout=timeout)
    except Exception as exc:
        raise KafkaAdminError(
            f"cluster {cluster.alias} is unreachable at {cluster.bootstrap_servers}: {exc}"
        ) from None
    if not metadata.brokers:
        raise KafkaAdminError(f"cluster {cluster.alias} is unreachable at "
                              f"{cluster.bootstrap_servers}: no brokers answered")


def list_topics(cluster: ClusterConfig) -> dict[str, int]:
    """``{topic: partition count}`` (internal topics included; callers filter)."""
    try:
        metadata = admin(cluster).list_topics(timeout=TIMEOUT_S)
    except Exception as exc:
        raise KafkaAdminError(f"cluster {cluster.alias} is unreachable at "
                              f"{cluster.bootstrap_servers}: {exc}") from None
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def create_topic(cluster: ClusterConfig, topic: str, partitions: int,
                 config: Mapping[str, str] | None = None, replication_factor: int = -1) -> bool:
    """Create ``topic``; False if it already existed."""
    new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                   config=dict(config or {}))
    client = admin(cluster)  # must outlive the future: a destroyed client fails it
    future = client.create_topics([new], operation_timeout=TIMEOUT_S)[topic]
    try:
        future.result(timeout=RESULT_TIMEOUT_S)
        return True
    except KafkaException as exc:
        if exc.args and exc.args[0].name() == "TOPIC_ALREADY_EXISTS":
            return False
        raise KafkaAdminError(f"cluster {cluster.alias}: creating topic {topic} failed: "
                              f"{exc.args[0].str() if exc.args else exc}") from None


def alter_topic_configs(cluster: ClusterConfig, topic: str, configs: Mapping[str, str]) -> None:
    if not configs:
        return
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    client = admin(cluster)
    futures = client.incremental_alter_configs([resource])
    _wait(cluster, f"updating configs of {topic}", futures[resource])


def _offset_consumer(cluster: ClusterConfig) -> Consumer:
    return Consumer(cluster.client_config(**{
        "group.id": f"offset-ledger-probe-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "log_level": 0}))


def watermarks(cluster: ClusterConfig, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """``{partition: (low, high)}``: the first and next offsets of each partition."""
    consumer = _offset_consumer(cluster)
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S,
                                                  cached=False)
                for p in range(partitions)}
    except KafkaException as exc:
        raise KafkaAdminError(f"cluster {cluster.alias}: reading end offsets of {topic} "
                              f"failed: {exc}") from None
    finally:
        consumer.close()


def _group_missing(exc: KafkaException) -> bool:
    """A group that never existed (or expired) is not an error: it has no members, no offsets."""
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() in (KafkaError.GROUP_ID_NOT_FOUND,)


def _describe(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else None
    return f"{err.name()}: {err.str()}" if hasattr(err, "name") else str(exc)


def list_groups(cluster: ClusterConfig) -> list[GroupInfo]:
    client = admin(cluster)
    result = _wait(cluster, "listing groups",
                   client.list_consumer_groups(request_timeout=TIMEOUT_S))
    return [GroupInfo(g.group_id, str(g.state.name if g.state else "UNKNOWN"), -1)
            for g in result.valid]


def describe_group(cluster: ClusterConfig, group: str) -> GroupInfo:
    client = admin(cluster)
    futures = client.describe_consumer_groups([group], request_timeout=TIMEOUT_S)
    try:
        desc = futures[group].result(timeout=RESULT_TIMEOUT_S)
    except KafkaException as exc:
        if _group_missing(exc):
            return GroupInfo(group, "DEAD", 0)
        # Kafka 4 answers ConsumerGroupDescribe for KIP-848 groups only; some classic groups
        # come back as an error there. ListGroups still knows every group's state.
        listed = {g.group_id: g for g in list_groups(cluster)}
        if group not in listed:
            return GroupInfo(group, "DEAD", 0)
        state = listed[group].state
        if state.upper() in ("EMPTY", "DEAD"):
            return GroupInfo(group, state, 0)
        raise KafkaAdminError(f"cluster {cluster.alias}: describing group {group} (state "
                              f"{state}) failed: {_describe(exc)}") from None
    return GroupInfo(group, str(desc.state.name if desc.state else "UNKNOWN"),
                     len(desc.members or []))


def group_offsets(cluster: ClusterConfig, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets ``{(topic, partition): offset}`` (uncommitted omitted)."""
    client = admin(cluster)
    futures = client.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_S)
    try:
        result = futures[group].result(timeout=RESULT_TIMEOUT_S)
    except KafkaException as exc:
        if _group_missing(exc):
            return {}
        raise KafkaAdminError(f"cluster {cluster.alias}: reading offsets of group {group} "
                              f"failed: {exc.args[0].str() if exc.args else exc}") from None
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or []
            if tp.offset is not None and tp.offset >= 0 and tp.error is None}


def ensure_inactive(cluster: ClusterConfig, group: str) -> GroupInfo:
    info = describe_group(cluster, group)
    if info.members > 0 or info.state.upper() in ("STABLE", "PREPARING_REBALANCE",
                                                  "COMPLETING_REBALANCE", "ASSIGNING",
                                                  "RECONCILING"):
        raise GroupActiveError(
            f"group {group} has {info.members} active member(s) on cluster {cluster.alias} "
            f"(state {info.state}); stop its consumers first")
    return info


def alter_group_offsets(cluster: ClusterConfig, group: str,
                        offsets: Mapping[tuple[str, int], int]) -> None:
    """Write ``offsets`` into ``group``; the group must have no active members."""
    if not offsets:
        return
    ensure_inactive(cluster, group)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, int(o))
                                                   for (t, p), o in sorted(offsets.items())])
    client = admin(cluster)
    futures = client.alter_consumer_group_offsets([request], request_timeout=TIMEOUT_S)
    result = _wait(cluster, f"writing offsets of group {group}", futures[group])
    failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
    if failed:
        raise KafkaAdminError(f"cluster {cluster.alias}: writing offsets of group {group} "
                              f"failed for {[(tp.topic, tp.partition) for tp in failed]}")


# --- added for replication (pipelines/replicate) ---------------------------------------------


def explicit_topic_configs(cluster: ClusterConfig, topic: str,
                           keys: Iterable[str] = REPLICATED_TOPIC_CONFIGS) -> dict[str, str]:
    """The configs set on the topic itself (not inherited from broker settings) among ``keys``."""
    from confluent_kafka.admin import ConfigSource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = admin(cluster)
    futures = client.describe_configs([resource])
    entries = _wait(cluster, f"describing {topic}", futures[resource])
    wanted = set(keys)
    return {name: e.value for name, e in entries.items()
            if name in wanted and e.value is not None
            and e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def delete_topic_configs(cluster: ClusterConfig, topic: str, keys: Iterable[str]) -> None:
    """Reset topic-level configs to the broker's defaults."""
    keys = list(keys)
    if not keys:
        return
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in keys])
    client = admin(cluster)
    futures = client.incremental_alter_configs([resource])
    _wait(cluster, f"resetting configs of {topic}", futures[resource])


def end_offsets(cluster: ClusterConfig,
                partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """``{(topic, partition): end offset}`` in one request (the high watermark)."""
    from confluent_kafka.admin import OffsetSpec

    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    client = admin(cluster)
    futures = client.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in wanted},
                                  request_timeout=TIMEOUT_S)
    out = {}
    for tp, future in futures.items():
        info = _wait(cluster, f"reading end offsets of {tp.topic}", future)
        out[(tp.topic, tp.partition)] = int(info.offset)
    return out


def committed_records_between(cluster: ClusterConfig,
                              ranges: Mapping[tuple[str, int], tuple[int, int]],
                              timeout: float = 10.0) -> dict[tuple[str, int], bool | None]:
    """Whether a committed record lies in ``[start, end)`` of each partition (read_committed).

    The gap between where replication got and a partition's end (or a group's committed offset)
    may hold only transaction markers and aborted records, which are never copied: such a gap is
    ``False`` (nothing left to copy). ``None`` when it cannot be told within ``timeout``, e.g. an
    open transaction holds the last stable offset below ``end``: never take that as caught up.

        offsets  300   301   302 ....... 311   312 = end
                 rec   rec   aborted/markers
                             ^ replicated to 302: False (nothing committed in [302, 312))
    """
    out: dict[tuple[str, int], bool | None] = {
        key: False for key, (start, end) in ranges.items() if start >= end}
    pending = {key: span for key, span in ranges.items() if key not in out}
    if not pending:
        return out
    consumer = Consumer(cluster.client_config(**{
        "group.id": f"offset-ledger-probe-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "isolation.level": "read_committed", "enable.partition.eof": True, "log_level": 0}))
    try:
        consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in pending.items()])
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            key = (msg.topic(), msg.partition())
            if key not in pending:
                continue
            end = pending[key][1]
            error = msg.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise KafkaAdminError(f"cluster {cluster.alias}: reading {key[0]}[{key[1]}] "
                                      f"failed: {error.str()}")
            if error is not None and msg.offset() < end:
                continue  # the last stable offset is below end: an open transaction, wait
            out[key] = error is None and msg.offset() < end
            del pending[key]
            consumer.incremental_unassign([TopicPartition(*key)])
    finally:
        consumer.close()
    out.update({key: None for key in pending})
    return out
