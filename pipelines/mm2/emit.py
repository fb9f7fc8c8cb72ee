"""Write offset-ledger's checkpoints in MM2's format, for ``RemoteClusterUtils.translateOffsets``.

With ``emit.mm2.checkpoints.enabled: true``, each checkpoint pass of a flow ``S->T`` also writes
its translated checkpoints to ``<S>.checkpoints.internal`` on T, the topic MirrorMaker 2's
checkpoint connector writes and ``RemoteClusterUtils.translateOffsets(T's properties, "S",
group)`` reads (last record per (group, topic, partition) wins). Java consumers that translate
with MM2's client library then get offset-ledger's exact translations.

Invariants:
    * Only translated (or held) checkpoints are written: an untranslatable partition writes
      nothing, so a Java consumer keeps what it had rather than a made-up offset.
    * The record's topic is the name on T (``P.Payments`` forward, ``Payments`` for a reverse
      checkpoint of ``T.Payments``), its upstream offset the group's commit on S.
    * The topic is created like MM2 creates it (one partition, compacted) when missing.
    * Do not let MM2's checkpoint connector write the same topic for the same groups
      (``emit.checkpoints.enabled = false`` in MM2, or disjoint group filters): the last writer
      would win.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Producer

from ledger.config import Config
from ledger.errors import OffsetLedgerError
from pipelines.edge import kafka_admin
from pipelines.mm2 import formats


def mm2_checkpoints(rows: Iterable[Mapping[str, Any] | Any]) -> list[formats.Checkpoint]:
    """MM2 checkpoint records for the checkpoint rows (dicts or ``CheckpointRecord``s) that
    carry a target offset."""
    out = []
    for row in rows:
        r = row.to_row() if hasattr(row, "to_row") else row
        if r.get("target_offset") is None:
            continue
        out.append(formats.Checkpoint(r["group_id"], r["target_topic"], int(r["partition"]),
                                      int(r["source_offset"]), int(r["target_offset"]),
                                      "offset-ledger"))
    return out


def ensure_topic(config: Config, target: str, topic: str) -> None:
    kafka_admin.create_topic(config.cluster(target), topic, 1, {"cleanup.policy": "compact"},
                             replication_factor=config.replication_factor)


def write_checkpoints(config: Config, source: str, target: str,
                      rows: Iterable[Mapping[str, Any] | Any]) -> int:
    """Write a pass's checkpoints (``checkpoints`` rows of flow source->target); return count."""
    records = mm2_checkpoints(rows)
    if not records:
        return 0
    topic = formats.checkpoints_topic(source, config.replication_policy_separator)
    ensure_topic(config, target, topic)
    producer = Producer(config.cluster(target).client_config(**{
        "enable.idempotence": True, "acks": "all", "log_level": 0}))
    errors: list[str] = []
    for cp in records:
        key, value = formats.encode_checkpoint(cp)
        producer.produce(topic, key=key, value=value, partition=0,
                         on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
    if producer.flush(30) or errors:
        raise OffsetLedgerError(f"cluster {target}: writing MM2 checkpoints to {topic} failed: "
                                f"{errors[:3] or 'timed out'}")
    return len(records)
