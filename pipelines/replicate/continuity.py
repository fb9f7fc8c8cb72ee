"""Does the source still hold what was copied? The last recorded copy, compared on both sides.

Offsets alone cannot tell a recreated source topic that has grown past the recorded runs from
the topic that was copied: both have an offset ``u``. So, where a job resumes a partition, the
last record its runs map (upstream ``u_end - 1`` -> downstream ``d_end - 1``) is read from the
source and from the replica and compared: a different record means the source topic was
deleted and recreated (or rewritten), and resuming would mix two topics' records in one epoch.

::

    source   ... 97  98  99 | 100 (resume)        newest run (u=90, d=490, n=10)
    replica  ... 497 498 499 | 500 ...             compare source[99] with replica[499]

Invariants:
    * Reads only; one consumer per cluster reads one record per partition (read_committed on
      the source, as the copy reads it). Nothing is committed, no group is joined.
    * Key, value and headers are compared always; the timestamp when the source record has
      one (``>= 0``): a record without a timestamp was given its produce time on the replica.
    * A record that cannot be read on either side (compacted, deleted by retention, not
      fetched in time) is not judged: the answer is "unknown", never "differs".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from ledger.config import ClusterConfig
from pipelines.replicate.plan import TP, RecordedTail

READ_TIMEOUT_S = 10.0


def differing(source: ClusterConfig, target: ClusterConfig, tails: Mapping[TP, RecordedTail],
              replicas: Mapping[str, str]) -> dict[TP, tuple[int, int]]:
    """``{(topic, partition): (upstream, downstream)}`` where the last copied record (the one
    before each tail's ends) differs between the source and the replica ``replicas[topic]``."""
    if not tails:
        return {}
    last = {tp: (t.upstream_end - 1, t.downstream_end - 1) for tp, t in tails.items()}
    upstream = read_one_each(source, {tp: u for tp, (u, _) in last.items()})
    downstream = read_one_each(target, {(replicas[tp[0]], tp[1]): d
                                        for tp, (_, d) in last.items()})
    out = {}
    for tp, (u, d) in last.items():
        original, copy = upstream.get(tp), downstream.get((replicas[tp[0]], tp[1]))
        if original is not None and copy is not None and not same_record(original, copy):
            out[tp] = (u, d)
    return out


def same_record(original: tuple[Any, ...], copy: tuple[Any, ...]) -> bool:
    """Whether ``copy`` (key, value, headers, timestamp) is a copy of ``original``."""
    key, value, headers, timestamp = original
    if (key, value, headers) != copy[:3]:
        return False
    return timestamp < 0 or timestamp == copy[3]


def read_one_each(cluster: ClusterConfig, offsets: Mapping[TP, int],
                  ) -> dict[TP, tuple[Any, ...]]:
    """``{tp: (key, value, headers, timestamp)}`` of the record at each offset, where it
    exists and arrives within ``READ_TIMEOUT_S``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(cluster.client_config(**{
        "group.id": f"offset-ledger-continuity-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "isolation.level": "read_committed", "enable.partition.eof": True,
        "auto.offset.reset": "latest", "log_level": 0}))
    out: dict[TP, tuple[Any, ...]] = {}
    try:
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        pending = set(offsets)
        deadline = time.monotonic() + READ_TIMEOUT_S
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.2)  # (consume() would wait for a full batch)
            if msg is None:
                continue
            tp = (msg.topic(), msg.partition())
            if tp not in pending:
                continue
            pending.discard(tp)  # one answer per partition: a record, EOF or an error
            consumer.pause([TopicPartition(*tp)])
            if msg.error() is None and msg.offset() == offsets[tp]:
                out[tp] = (msg.key(), msg.value(), tuple(msg.headers() or ()),
                           msg.timestamp()[1])
    finally:
        consumer.close()
    return out
