"""The reading edge: librdkafka consumer settings of a flow's source (offsets are read by
``pipelines.edge.kafka_offsets``).

The cluster is configured with librdkafka property names, which go to confluent-kafka
verbatim; this module only adds what exact copying needs and forbids what would break it.

Invariants:
    * The consumer reads ``read_committed`` (aborted records are never copied; transaction
      markers and aborted records show up as upstream gaps, which split runs), is positioned by
      ``assign`` + explicit offsets only, never joins a group and never commits offsets.
    * End offsets are read ``read_committed`` (the last stable offset): a range planned up to
      it can always be consumed to its end, even while a transaction is open.
    * The settings hold secrets: they are handed to clients only, never logged or put in errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONSUMER_DEFAULTS: dict[str, Any] = {
    # Large fetches: one task streams whole partitions.
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 10_485_760,
    # A fetch waits up to 5 ms for 256 KiB: at a few thousand records/s a streaming task wakes
    # about 200 times a second instead of once per record, for at most 5 ms of latency; a bulk
    # copy's fetches fill long before the wait ends.
    "fetch.wait.max.ms": 5,
    "fetch.min.bytes": 262_144,
    "socket.nagle.disable": True,
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



# A fetch request costs the broker in proportion to the partitions it names, and an idle
# partition is named in every fetch: a streaming task holding many partitions fetches less
# often, one ms of wait per FETCH_PARTITIONS_PER_MS partitions, at most MAX_FETCH_WAIT_MS:
#
#   partitions held                    6    50   100   500   1,000+
#   fetch.wait.max.ms                  5     5    10    50     100
#   exactly-once                      10    10    10    50     100
#
# An exactly-once task waits at least TRANSACTIONAL_FETCH_WAIT_MS: its records are readable only
# when their transaction commits (about every 30 ms), so fetching twice as often mostly costs
# CPU (at 50,000 records/s 0.22-0.23 cores with 10 ms against 0.25-0.26 with 5 ms).
FETCH_PARTITIONS_PER_MS = 10
MAX_FETCH_WAIT_MS = 100
TRANSACTIONAL_FETCH_WAIT_MS = 10


def fetch_wait_ms(partitions: int, transactional: bool = False) -> int:
    """The fetch wait of a streaming task holding ``partitions``."""
    least = (TRANSACTIONAL_FETCH_WAIT_MS if transactional
             else CONSUMER_DEFAULTS["fetch.wait.max.ms"])
    return min(MAX_FETCH_WAIT_MS, max(least, -(-partitions // FETCH_PARTITIONS_PER_MS)))


def consumer_config(source_properties: Mapping[str, str], partitions: int | None = None, *,
                    transactional: bool = False) -> dict[str, Any]:
    """librdkafka settings for the range consumer (secrets included: never log).

    ``partitions``: how many a streaming task holds, ``transactional`` whether it copies
    exactly once (its fetch wait: :func:`fetch_wait_ms`); the cluster's own
    ``fetch.wait.max.ms`` wins over either.
    """
    defaults = (CONSUMER_DEFAULTS if partitions is None else
                {**CONSUMER_DEFAULTS,
                 "fetch.wait.max.ms": fetch_wait_ms(partitions, transactional)})
    return {**defaults, **source_properties, **CONSUMER_REQUIRED}

