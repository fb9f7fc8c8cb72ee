"""Kafka admin work through confluent-kafka: the command's admin clients, topics, groups.

Invariants:
    * Clients are built from a cluster's native librdkafka properties, never renamed; errors
      name the cluster alias, never its properties (which may hold secrets).
    * Group offsets are "next offset to consume". ``alter_group_offsets`` refuses a group with
      active members (Kafka itself refuses too; we check first for a clear message).
    * One admin client per cluster per command: inside :func:`clients` (each job's ``main``
      opens it) :func:`admin` hands out the command's client for the cluster, built once and
      dropped when the command ends, as MirrorMaker 2 builds its admin clients once per task
      and closes them at stop. Outside it (a thread the command started, a test) each call
      builds its own client, dropped with the call.
    * Offsets (earliest, latest, committed, by time) are read by ``pipelines.edge.kafka_offsets``.
    * Every failure is a :class:`KafkaAdminError` classified by ``pipelines.edge.kafka_errors``
      (authentication, TLS, a missing ACL naming the operation and resource, unreachable,
      unknown topic): each client carries an ``ErrorWatch`` whose cause explains a vague
      transport error. A topic is looked up by name (:func:`describe_topics`) before it is
      taken for gone: a topic one may not describe is "not authorized", never "removed".
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

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
from pipelines.edge import kafka_errors
from pipelines.edge.kafka_errors import KafkaAccessError

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


# A cluster is unreachable or refused an admin request; ``kind`` says why (kafka_errors).
KafkaAdminError = KafkaAccessError


class GroupActiveError(OffsetLedgerError):
    """A group has active members where offsets were to be written."""


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str
    members: int


def _new_admin(cluster: ClusterConfig) -> AdminClient:
    config, watch = kafka_errors.watched(cluster.client_config(**{"log_level": 0}))
    client = AdminClient(config)
    client.watch = watch
    return client


class AdminClients:
    """The admin clients of one command: one per cluster (alias and properties), built at
    first use and dropped by :meth:`close` (confluent-kafka destroys a client, closing its
    connections, when the last reference goes). Thread-safe: a librdkafka client may be shared.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[tuple, AdminClient] = {}
        self.closed = False

    @staticmethod
    def _key(cluster: ClusterConfig) -> tuple:
        return cluster.alias, tuple(sorted((k, repr(v)) for k, v in cluster.properties.items()))

    def get(self, cluster: ClusterConfig, lane: int = 0) -> AdminClient:
        """``cluster``'s client; ``lane`` > 0: another client of its own (:func:`lanes`)."""
        key = self._key(cluster), lane
        with self._lock:
            if self.closed:
                raise RuntimeError("the command's admin clients are closed")
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = _new_admin(cluster)
            return client

    def renew(self, cluster: ClusterConfig) -> None:
        """Forget ``cluster``'s client: the next :meth:`get` builds one with fresh metadata.

        A client keeps the leader epochs it learnt; after a broker restart its requests can be
        fenced (``FENCED_LEADER_EPOCH``) until its metadata refresh, minutes later.
        """
        with self._lock:
            for key in [k for k in self._clients if k[0] == self._key(cluster)]:
                del self._clients[key]

    def __len__(self) -> int:
        return len(self._clients)

    def close(self) -> None:
        with self._lock:
            clients, self._clients, self.closed = list(self._clients.values()), {}, True
        for client in clients:
            kafka_errors.serve(client, 0)  # deliver pending callbacks before it goes


_COMMAND_CLIENTS: ContextVar[AdminClients | None] = ContextVar("offset_ledger_admin_clients",
                                                               default=None)


@contextlib.contextmanager
def clients(fresh: bool = False) -> Iterator[AdminClients]:
    """The command's admin clients, closed when the outermost ``with`` ends (a command that
    calls another reuses its clients); ``fresh``: clients of their own for the block (a pass
    of a long-running job), the command's again after it."""
    current = _COMMAND_CLIENTS.get()
    if current is not None and not current.closed and not fresh:
        yield current
        return
    cache = AdminClients()
    token = _COMMAND_CLIENTS.set(cache)
    try:
        yield cache
    finally:
        _COMMAND_CLIENTS.reset(token)
        cache.close()


def admin(cluster: ClusterConfig, lane: int = 0) -> AdminClient:
    """The command's admin client for ``cluster`` (a new one outside :func:`clients`); its
    ``watch`` (``kafka_errors.ErrorWatch``) explains its failures. ``lane``: see :func:`lanes`."""
    cache = _COMMAND_CLIENTS.get()
    if cache is None or cache.closed:
        return _new_admin(cluster)
    return cache.get(cluster, lane)


GROUPS_PER_LANE = 25
MAX_LANES = 8


def lanes(cluster: ClusterConfig, requests: int) -> list[AdminClient]:
    """Admin clients to spread ``requests`` one-group requests over, the command's own first.

    A broker handles one connection's requests one at a time (it reads the next only once it
    has answered the last), and Kafka takes one group per OffsetCommit or OffsetFetch request
    here: on one client, 200 groups' requests queue behind each other on the coordinator's
    connection, however early they are sent. Each lane is a client with connections of its
    own, so the broker works on several at once (200 groups' offset writes on the embedded
    broker: 1.4 s on one connection, 0.4 s on four, 0.23 s on eight). One lane per
    ``GROUPS_PER_LANE`` requests, at most ``MAX_LANES``: a few groups keep one client.
    """
    count = max(1, min(MAX_LANES, -(-requests // GROUPS_PER_LANE)))
    return [admin(cluster, lane) for lane in range(count)]


def renew(cluster: ClusterConfig) -> None:
    """Drop the command's admin client for ``cluster`` (stale metadata after a restart)."""
    cache = _COMMAND_CLIENTS.get()
    if cache is not None and not cache.closed:
        cache.renew(cluster)


def failure(cluster: ClusterConfig, exc: BaseException, client: Any = None,
            operation: str | None = None, resource: str | None = None) -> KafkaAdminError:
    """The classified error for ``exc`` from a call of ``client`` on ``cluster``."""
    if isinstance(exc, KafkaAccessError):
        return exc
    watch = getattr(client, "watch", None)
    if client is not None:
        kafka_errors.serve(client)
    return KafkaAdminError.of(kafka_errors.classify(
        exc, cluster.alias, cluster.properties, operation=operation, resource=resource,
        watch=watch))


def _wait(cluster: ClusterConfig, what: str, future, client: Any = None,
          operation: str | None = None, resource: str | None = None):
    try:
        return future.result(timeout=RESULT_TIMEOUT_S)
    except Exception as exc:
        raise failure(cluster, exc, client, operation, resource or what) from None


def _metadata(cluster: ClusterConfig, timeout: float) -> Any:
    client = admin(cluster)
    try:
        metadata = client.list_topics(timeout=timeout)
    except Exception as exc:
        raise failure(cluster, exc, client) from None
    if not metadata.brokers:
        raise KafkaAdminError(f"cluster {cluster.alias} is unreachable at "
                              f"{cluster.bootstrap_servers}: no brokers answered",
                              kafka_errors.UNREACHABLE)
    return metadata


def check_reachable(cluster: ClusterConfig, timeout: float = 10.0) -> None:
    """Raise a classified :class:`KafkaAdminError` unless a metadata request succeeds."""
    _metadata(cluster, timeout)


def list_topics(cluster: ClusterConfig, timeout: float = TIMEOUT_S) -> dict[str, int]:
    """``{topic: partition count}`` of the topics the principal may describe (internal
    included; callers filter). Under an authorizer a topic missing here may exist: see
    :func:`describe_topics`. Raises as :func:`check_reachable` (one metadata request)."""
    metadata = _metadata(cluster, timeout)
    return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}


def describe_topics(cluster: ClusterConfig, names: Iterable[str],
                    operation: str = "DESCRIBE") -> dict[str, int | KafkaAdminError]:
    """Each topic by name: its partition count, or why it cannot be described
    (``kind`` ``unknown_topic``: it does not exist; ``authorization``: the principal may not
    describe it, whether it exists or not, as Kafka answers both alike). ``operation``: the
    ACL operation a refusal names (READ implies DESCRIBE)."""
    from confluent_kafka import TopicCollection

    names = sorted(set(names))
    if not names:
        return {}
    client = admin(cluster)
    futures = client.describe_topics(TopicCollection(names), request_timeout=TIMEOUT_S)
    out: dict[str, int | KafkaAdminError] = {}
    for name in names:
        try:
            out[name] = len(futures[name].result(timeout=RESULT_TIMEOUT_S).partitions)
        except Exception as exc:
            error = failure(cluster, exc, client, operation, f"topic {name}")
            if error.cluster_wide:
                raise error from None
            out[name] = error
    return out


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
        raise failure(cluster, exc, client, "CREATE", f"topic {topic}") from None


def alter_topic_configs(cluster: ClusterConfig, topic: str, configs: Mapping[str, str]) -> None:
    if not configs:
        return
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    client = admin(cluster)
    futures = client.incremental_alter_configs([resource])
    _wait(cluster, f"updating configs of {topic}", futures[resource], client, "ALTER_CONFIGS",
          f"topic {topic}")


def group_missing(exc: KafkaException) -> bool:
    """A group that never existed (or expired) is not an error: it has no members, no offsets."""
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() in (KafkaError.GROUP_ID_NOT_FOUND,)


LIST_GROUPS_RETRY_S = 30.0


def list_groups(cluster: ClusterConfig, retry_s: float | None = None) -> list[GroupInfo]:
    """The groups the principal may describe (Kafka leaves the others out silently).

    A broker that did not answer the ListGroups request (a coordinator still loading, a
    timeout under load) leaves its groups out of the answer, with an error beside it: such
    an answer is asked again for up to ``retry_s`` seconds (default ``LIST_GROUPS_RETRY_S``),
    then raised, never taken as the whole list (torture history 24001 eos: ``--group-regex``
    matched no group).
    """
    deadline = time.monotonic() + (LIST_GROUPS_RETRY_S if retry_s is None else retry_s)
    while True:
        client = admin(cluster)
        result = _wait(cluster, "listing groups",
                       client.list_consumer_groups(request_timeout=TIMEOUT_S), client,
                       "DESCRIBE", "cluster")
        if not result.errors:
            return [GroupInfo(g.group_id, str(g.state.name if g.state else "UNKNOWN"), -1)
                    for g in result.valid]
        first = result.errors[0]  # a KafkaException per broker that did not answer
        error = failure(cluster, first if isinstance(first, BaseException)
                        else KafkaException(first), client, "DESCRIBE", "cluster")
        if error.kind not in kafka_errors.TRANSIENT or time.monotonic() >= deadline:
            raise KafkaAdminError(f"cluster {cluster.alias}: listing groups: "
                                  f"{len(result.errors)} broker(s) did not answer: {error}",
                                  error.kind) from None
        time.sleep(0.5)  # asked again: a coordinator loading answers within seconds


def describe_group(cluster: ClusterConfig, group: str) -> GroupInfo:
    return describe_groups(cluster, [group])[group]


LIST_FIRST_GROUPS = 10
"""From this many groups, :func:`describe_groups` lists the cluster's groups first."""
IDLE_STATES = frozenset({"EMPTY", "DEAD"})


def describe_groups(cluster: ClusterConfig, groups: Iterable[str]) -> dict[str, GroupInfo]:
    """``{group: GroupInfo}`` in the order asked; a group that does not exist is ``DEAD`` with
    no members.

    Every group is asked in one call, not one round trip per group. For many groups (a
    ``--group-regex`` move, ``status``), ListGroups (one request per broker) answers first:
    a listed group in state ``EMPTY`` or ``DEAD`` has no members and is not described. Only
    the others are: a group with members (how many), and a group not listed (one that does
    not exist, or one the principal may not describe: ListGroups leaves it out silently,
    where DescribeGroups names the missing ACL). A describe of hundreds of groups takes
    seconds on a busy 2-core cluster (librdkafka asks ConsumerGroupDescribe, then
    DescribeGroups for the classic groups); the list takes milliseconds.
    """
    groups = list(dict.fromkeys(groups))
    if not groups:
        return {}
    out: dict[str, GroupInfo] = {}
    listed: dict[str, GroupInfo] | None = None
    if len(groups) >= LIST_FIRST_GROUPS:
        try:
            listed = {g.group_id: g for g in list_groups(cluster, retry_s=0)}
        except KafkaAdminError:  # some broker does not answer: describe each group instead
            listed = None
        for group in groups:
            info = (listed or {}).get(group)
            if info is not None and info.state.upper() in IDLE_STATES:
                out[group] = GroupInfo(group, info.state, 0)
    rest = [g for g in groups if g not in out]
    if rest:
        out.update(_describe(cluster, rest, listed))
    return {g: out[g] for g in groups}


def _describe(cluster: ClusterConfig, groups: list[str],
              listed: dict[str, GroupInfo] | None) -> dict[str, GroupInfo]:
    client = admin(cluster)
    futures = client.describe_consumer_groups(groups, request_timeout=TIMEOUT_S)
    out = {}
    for group in groups:
        try:
            desc = futures[group].result(timeout=RESULT_TIMEOUT_S)
        except KafkaException as exc:
            if group_missing(exc):
                out[group] = GroupInfo(group, "DEAD", 0)
                continue
            error = failure(cluster, exc, client, "DESCRIBE", f"group {group}")
            if error.kind != kafka_errors.OTHER:
                raise error from None
            # Kafka 4 answers ConsumerGroupDescribe for KIP-848 groups only; some classic
            # groups come back as an error there. ListGroups still knows every group's state.
            if listed is None:
                listed = {g.group_id: g for g in list_groups(cluster)}
            state = listed[group].state if group in listed else "DEAD"
            if state.upper() not in IDLE_STATES:
                raise KafkaAdminError(f"cluster {cluster.alias}: describing group {group} "
                                      f"(state {state}) failed: {error}") from None
            out[group] = GroupInfo(group, state, 0)
            continue
        out[group] = GroupInfo(group, str(desc.state.name if desc.state else "UNKNOWN"),
                               len(desc.members or []))
    return out


ACTIVE_STATES = frozenset({"STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE",
                           "ASSIGNING", "RECONCILING"})


def _active(cluster: ClusterConfig, info: GroupInfo) -> GroupActiveError | None:
    if info.members > 0 or info.state.upper() in ACTIVE_STATES:
        return GroupActiveError(
            f"group {info.group_id} has {info.members} active member(s) on cluster "
            f"{cluster.alias} (state {info.state}); stop its consumers first")
    return None


def ensure_all_inactive(cluster: ClusterConfig, groups: Iterable[str]) -> dict[str, GroupInfo]:
    """Every group's :class:`GroupInfo` (one describe call); the first group, in the order
    given, that has active members raises :class:`GroupActiveError`."""
    infos = describe_groups(cluster, groups)
    for info in infos.values():
        active = _active(cluster, info)
        if active is not None:
            raise active
    return infos


def alter_group_offsets(cluster: ClusterConfig, group: str,
                        offsets: Mapping[tuple[str, int], int]) -> None:
    """Write ``offsets`` into ``group``; the group must have no active members."""
    alter_groups_offsets(cluster, {group: offsets})


def alter_groups_offsets(cluster: ClusterConfig,
                         offsets: Mapping[str, Mapping[tuple[str, int], int]], *,
                         skip_active: bool = False) -> dict[str, GroupActiveError]:
    """Write each group's offsets; the groups must have no active members.

    Kafka takes one group per OffsetCommit request: the requests of all groups are sent
    before any answer is awaited (concurrent, not one round trip after another). A group
    with active members raises :class:`GroupActiveError` before anything is written, or,
    with ``skip_active``, is left unwritten and returned (``{group: error}``). Any other
    failure raises, naming the first group (in sorted order) that failed; the other groups'
    writes may have been applied.
    """
    offsets = {g: o for g, o in offsets.items() if o}
    if not offsets:
        return {}
    skipped: dict[str, GroupActiveError] = {}
    for group, info in describe_groups(cluster, sorted(offsets)).items():
        active = _active(cluster, info)
        if active is not None and not skip_active:
            raise active
        if active is not None:
            skipped[group] = active
    writing = sorted(set(offsets) - set(skipped))
    clients = lanes(cluster, len(writing))
    futures = {}
    for i, group in enumerate(writing):
        request = ConsumerGroupTopicPartitions(group, [
            TopicPartition(t, p, int(o)) for (t, p), o in sorted(offsets[group].items())])
        client = clients[i % len(clients)]
        futures[group] = client, client.alter_consumer_group_offsets(
            [request], request_timeout=TIMEOUT_S)[group]
    errors = []
    for group, (client, future) in futures.items():  # every answer awaited before raising
        try:
            result = future.result(timeout=RESULT_TIMEOUT_S)
        except Exception as exc:
            errors.append(failure(cluster, exc, client, "READ", f"group {group}"))
            continue
        failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            first = failed[0]
            why = failure(cluster, KafkaException(first.error), client, "READ",
                          f"topic {first.topic}")
            errors.append(KafkaAdminError(
                f"cluster {cluster.alias}: writing offsets of group {group} failed for "
                f"{[(tp.topic, tp.partition) for tp in failed]}: {why}", why.kind))
    if errors:
        raise errors[0]
    return skipped


# --- added for replication (pipelines/replicate) ---------------------------------------------


def explicit_topic_configs(cluster: ClusterConfig, topic: str,
                           keys: Iterable[str] = REPLICATED_TOPIC_CONFIGS) -> dict[str, str]:
    """The configs set on the topic itself (not inherited from broker settings) among ``keys``."""
    from confluent_kafka.admin import ConfigSource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    client = admin(cluster)
    futures = client.describe_configs([resource])
    entries = _wait(cluster, f"describing {topic}", futures[resource], client,
                    "DESCRIBE_CONFIGS", f"topic {topic}")
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
    _wait(cluster, f"resetting configs of {topic}", futures[resource], client, "ALTER_CONFIGS",
          f"topic {topic}")


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
    first = first_committed(cluster, ranges, timeout)
    return {key: None if first[key] is None else first[key] < end
            for key, (_, end) in ranges.items()}


def first_committed(cluster: ClusterConfig, ranges: Mapping[tuple[str, int], tuple[int, int]],
                    timeout: float = 10.0) -> dict[tuple[str, int], int | None]:
    """Per partition, where the first committed record at or after ``start`` is (read_committed),
    looked for up to ``end``: its offset, or an offset at or past ``end`` (or where the log
    ends, when it ends below ``end``) when none is; ``None`` when it cannot be told within
    ``timeout`` (an open transaction holds the last stable offset). Nothing committed lies in
    ``[start, c)`` exactly when the answer is at least ``c``: one probe answers every commit
    of a partition below ``end``, whatever the groups::

        offsets  302 303 ... 311 | 312 (committed) ... 320 = end
                 aborted/markers   ^ first_committed = 312: commits <= 312 have nothing to copy
    """
    out: dict[tuple[str, int], int | None] = {
        key: start for key, (start, end) in ranges.items() if start >= end}
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
                raise failure(cluster, KafkaException(error), None, "READ", f"topic {key[0]}")
            if error is not None and msg.offset() < end:
                _, high = consumer.get_watermark_offsets(TopicPartition(*key), cached=True)
                if high is None or high < 0 or msg.offset() < high:
                    continue  # the last stable offset is below end: an open transaction, wait
                # The log ends below ``end`` (a commit beyond it): those records are yet to come.
            out[key] = msg.offset()
            del pending[key]
            consumer.incremental_unassign([TopicPartition(*key)])
    finally:
        consumer.close()
    out.update({key: None for key in pending})
    return out
