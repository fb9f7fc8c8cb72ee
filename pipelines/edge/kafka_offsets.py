"""Every offset read from Kafka goes through :func:`list_offsets`: earliest, latest, a group's
committed offsets, and the offsets by time.

    log      [ 0 .. deleted .. | 40 41 42 ... 97 | 98 99 (open txn) ] 100
                                 ^ earliest = 40         ^ latest, read_committed = 98 (LSO)
                                                                       latest = 100 (high mark)
    by time  t  -> the first offset whose timestamp is >= t (latest when none is)
    committed   -> the group's next offset to consume, partitions it never committed left out

Invariants:
    * Offsets are "next offset to consume" positions; a partition the answer cannot place is
      left out of the answer, never given a guessed offset.
    * ``latest`` is the high watermark, or the last stable offset with ``read_committed``
      (what a ``read_committed`` consumer can read up to, even while a transaction is open).
    * A retriable error (a replica just created whose leader is not elected yet, a leader
      moving, a timed-out request) is retried for up to ``RETRY_S``; every other failure is a
      ``KafkaAdminError`` classified by ``pipelines.edge.kafka_errors`` (authentication, TLS,
      a missing ACL naming the topic or group, unreachable, unknown topic).
    * Requests go through the command's admin client for the cluster (``kafka_admin.admin``):
      one request for all partitions asked for.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Literal

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec

from ledger.config import ClusterConfig
from pipelines.edge import kafka_admin

TP = tuple[str, int]
Which = Literal["earliest", "latest", "committed"] | int

RETRY_S = 30.0
RETRY_PAUSE_S = 0.2
# Errors that pass: a leader not elected yet on a replica just created, a leader moving.
RETRIABLE = frozenset({"NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION",
                       "LEADER_NOT_AVAILABLE", "OFFSET_NOT_AVAILABLE", "UNKNOWN_LEADER_EPOCH",
                       "FENCED_LEADER_EPOCH", "REQUEST_TIMED_OUT", "_TRANSPORT", "_TIMED_OUT"})
# Of those, the ones a client's stale metadata keeps failing (a broker restarted): retried
# with a new client, which learns the current leaders and epochs.
STALE_METADATA = frozenset({"NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION",
                            "UNKNOWN_LEADER_EPOCH", "FENCED_LEADER_EPOCH"})
UNKNOWN = frozenset({"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC"})


def list_offsets(cluster: ClusterConfig, which: Which, partitions: Iterable[TP] | None = None,
                 *, group: str | None = None, read_committed: bool = False,
                 omit_unknown: bool = False) -> dict[TP, int]:
    """``{(topic, partition): offset}`` of ``partitions`` on ``cluster``.

    Args:
        cluster: the cluster asked.
        which: ``"earliest"`` (log start), ``"latest"`` (end), ``"committed"`` (``group``'s
            committed offsets) or an ``int``: a timestamp in ms (the first offset at or after
            it; the end offset when no record is that new).
        partitions: the partitions asked for; for ``"committed"``, ``None`` means every
            partition the group has committed.
        group: the consumer group, for ``"committed"`` only.
        read_committed: ``latest`` is the last stable offset rather than the high watermark.
        omit_unknown: a partition the cluster does not know (yet) is left out instead of
            failing the call (a replica not created yet).

    Raises:
        KafkaAdminError: classified (``pipelines.edge.kafka_errors``), naming the topic or group.
    """
    if which == "committed":
        if group is None:
            raise ValueError("list_offsets(..., 'committed') needs the group")
        return _committed(cluster, group, partitions)
    if group is not None:
        raise ValueError(f"list_offsets(..., {which!r}) reads no group's offsets")
    wanted = sorted(set(partitions or ()))
    if not wanted:
        return {}
    out = _by_spec(cluster, wanted, which, read_committed, omit_unknown)
    if isinstance(which, int) and not isinstance(which, bool):
        # Kafka answers -1 for a partition with no record at or after the time: its end.
        past = [tp for tp, offset in out.items() if offset < 0]
        out.update(_by_spec(cluster, past, "latest", read_committed, omit_unknown))
    return out


def watermarks(cluster: ClusterConfig, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """``{partition: (earliest, latest)}`` of partitions ``0..partitions-1`` of ``topic``."""
    tps = [(topic, p) for p in range(partitions)]
    low, high = list_offsets(cluster, "earliest", tps), list_offsets(cluster, "latest", tps)
    return {p: (low[(topic, p)], high[(topic, p)]) for p in range(partitions)}


def _spec(which: Which) -> OffsetSpec:
    if which == "earliest":
        return OffsetSpec.earliest()
    if which == "latest":
        return OffsetSpec.latest()
    if isinstance(which, int) and not isinstance(which, bool):
        return OffsetSpec.for_timestamp(which)
    raise ValueError(f"list_offsets: which must be earliest, latest, committed or a timestamp "
                     f"in ms, not {which!r}")


def _by_spec(cluster: ClusterConfig, wanted: list[TP], which: Which, read_committed: bool,
             omit_unknown: bool) -> dict[TP, int]:
    spec = _spec(which)
    isolation = (IsolationLevel.READ_COMMITTED if read_committed
                 else IsolationLevel.READ_UNCOMMITTED)
    what = which if isinstance(which, str) else f"at time {which}"
    out: dict[TP, int] = {}
    deadline = time.monotonic() + RETRY_S
    while wanted:
        client = kafka_admin.admin(cluster)
        futures = client.list_offsets({TopicPartition(t, p): spec for t, p in wanted},
                                      isolation_level=isolation,
                                      request_timeout=kafka_admin.TIMEOUT_S)
        retry: list[TP] = []
        stale = False
        for tp, future in futures.items():
            try:
                info = future.result(timeout=kafka_admin.RESULT_TIMEOUT_S)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                name = err.name() if isinstance(err, KafkaError) else ""
                if omit_unknown and name in UNKNOWN:
                    continue
                if isinstance(err, KafkaError) and (err.retriable() or name in RETRIABLE) \
                        and time.monotonic() < deadline:
                    retry.append((tp.topic, tp.partition))
                    stale = stale or name in STALE_METADATA
                    continue
                raise kafka_admin.failure(cluster, exc, client, "DESCRIBE",
                                          f"topic {tp.topic} ({what} offsets)") from None
            except Exception as exc:
                raise kafka_admin.failure(cluster, exc, client, "DESCRIBE",
                                          f"topic {tp.topic} ({what} offsets)") from None
            if int(info.offset) < 0 and which in ("earliest", "latest"):
                # No position in the answer (-1001, OFFSET_INVALID: a broker restarting): ask
                # again; never hand it on as an offset.
                if time.monotonic() < deadline:
                    retry.append((tp.topic, tp.partition))
                    stale = True
                    continue
                raise kafka_admin.KafkaAdminError(
                    f"cluster {cluster.alias}: DESCRIBE topic {tp.topic} ({what} offsets): "
                    f"partition {tp.partition} has no {what} offset yet (answer "
                    f"{info.offset}); the broker may be restarting")
            out[(tp.topic, tp.partition)] = int(info.offset)
        wanted = retry
        if stale:
            kafka_admin.renew(cluster)
        if wanted:
            time.sleep(RETRY_PAUSE_S)
    return out


def _committed(cluster: ClusterConfig, group: str,
               partitions: Iterable[TP] | None) -> dict[TP, int]:
    return committed_of(cluster, [group], partitions)[group]


def committed_of(cluster: ClusterConfig, groups: Iterable[str],
                 partitions: Iterable[TP] | None = None) -> dict[str, dict[TP, int]]:
    """``{group: {(topic, partition): committed offset}}`` of every group asked.

    Kafka takes one group per OffsetFetch request here: all are sent before any answer is
    awaited (concurrent, not one round trip per group), spread over
    :func:`kafka_admin.lanes`. A group that does not exist has no offsets; a failure
    raises for the first group (in the order given) that failed.
    """
    groups = list(dict.fromkeys(groups))
    wanted = None if partitions is None else [TopicPartition(t, p)
                                              for t, p in sorted(set(partitions))]
    if not groups or wanted == []:
        return {g: {} for g in groups}
    clients = kafka_admin.lanes(cluster, len(groups))  # one connection answers one at a time
    futures = {}
    for i, g in enumerate(groups):
        client = clients[i % len(clients)]
        futures[g] = client, client.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(g, wanted)], request_timeout=kafka_admin.TIMEOUT_S)[g]
    out, errors = {}, []
    for group, (client, future) in futures.items():  # every answer awaited before raising
        try:
            result = future.result(timeout=kafka_admin.RESULT_TIMEOUT_S)
        except Exception as exc:
            if isinstance(exc, KafkaException) and kafka_admin.group_missing(exc):
                out[group] = {}
            else:
                errors.append(kafka_admin.failure(cluster, exc, client, "DESCRIBE",
                                                  f"group {group}"))
            continue
        out[group] = {(tp.topic, tp.partition): tp.offset
                      for tp in result.topic_partitions or []
                      if tp.offset is not None and tp.offset >= 0 and tp.error is None}
    if errors:
        raise errors[0]
    return out
