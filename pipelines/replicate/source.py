"""The reading edge: librdkafka consumer settings and offset look-ups on a flow's source.

The cluster is configured with librdkafka property names, which go to confluent-kafka
verbatim; this module only adds what exact copying needs and forbids what would break it.

Invariants:
    * The consumer reads ``read_committed`` (aborted records are never copied; transaction
      markers and aborted records show up as upstream gaps, which split runs), is positioned by
      ``assign`` + explicit offsets only, never joins a group and never commits offsets.
    * End offsets are read with ``READ_COMMITTED`` isolation (the last stable offset): a range
      planned up to it can always be consumed to its end, even while a transaction is open.
    * The settings hold secrets: they are handed to clients only, never logged or put in errors.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from ledger.config import ClusterConfig

CONSUMER_DEFAULTS: dict[str, Any] = {
    # Large fetches: one task streams whole partitions.
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 10_485_760,
    "fetch.wait.max.ms": 50,
    "queued.min.messages": 200_000,
    "log_level": 3,
}
# Never overridable: exactness depends on them.
CONSUMER_REQUIRED: dict[str, Any] = {
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    # A planned start below the log start (retention deleted records) reads from the log start.
    "auto.offset.reset": "earliest",
    # librdkafka wants a group.id for a consumer; assign() never joins the group and nothing is
    # committed, so the name is never seen by the brokers' group coordinator.
    "group.id": "offset-ledger-replicate",
}


RETRY_S = 30.0
RETRIABLE = frozenset({"NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_FOR_PARTITION",
                       "LEADER_NOT_AVAILABLE", "OFFSET_NOT_AVAILABLE", "UNKNOWN_LEADER_EPOCH",
                       "FENCED_LEADER_EPOCH", "REQUEST_TIMED_OUT", "_TRANSPORT", "_TIMED_OUT"})


def consumer_config(source_properties: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka settings for the range consumer (secrets included: never log)."""
    return {**CONSUMER_DEFAULTS, **source_properties, **CONSUMER_REQUIRED}


def list_offsets(cluster: ClusterConfig, partitions: Iterable[tuple[str, int]],
                 which: str) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` for ``which`` in ``earliest`` or ``latest``.

    ``latest`` is the last stable offset (read_committed). One request for all partitions.
    A partition the cluster does not know (yet) is left out; a retriable error (a leader
    not elected yet) is retried for up to ``RETRY_S``.
    """
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    from pipelines import kafka_admin

    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
    out: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + RETRY_S
    while True:
        client = kafka_admin.admin(cluster)
        futures = client.list_offsets({TopicPartition(t, p): spec for t, p in wanted},
                                      isolation_level=IsolationLevel.READ_COMMITTED,
                                      request_timeout=kafka_admin.TIMEOUT_S)
        retry = []
        for tp, future in futures.items():
            try:
                info = future.result(timeout=kafka_admin.RESULT_TIMEOUT_S)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if err is not None and err.name() in ("UNKNOWN_TOPIC_OR_PART",
                                                      "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC"):
                    continue
                if err is not None and (err.retriable() or err.name() in RETRIABLE) and \
                        time.monotonic() < deadline:
                    # A partition just created (its leader not elected yet), a leader moving.
                    retry.append((tp.topic, tp.partition))
                    continue
                raise kafka_admin.KafkaAdminError(
                    f"cluster {cluster.alias}: reading {which} offsets of {tp.topic} failed: "
                    f"{err.str() if err is not None else exc}") from None
            out[(tp.topic, tp.partition)] = int(info.offset)
        if not retry:
            return out
        wanted = retry
        time.sleep(0.2)
