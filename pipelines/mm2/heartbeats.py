"""Heartbeats as MirrorMaker 2 writes them, so MM2 tooling and ``status`` see live flows.

MM2 (checked in its source, ``MirrorMakerConfig.clusterPairs`` and the heartbeat connector):
the heartbeat connector of a flow ``S->T`` runs against T and writes ``(S, T, now)`` to T's
``heartbeats`` topic. In dedicated mode MM2 also runs the heartbeat connector of every pair
whose replication is disabled (``emit.heartbeats.enabled`` defaults to true), so with only
``P->B`` enabled, ``B->P``'s connector writes ``(B, P, now)`` to P's ``heartbeats``; the
``P->B`` source connector always replicates ``heartbeats`` topics (whatever the allowlist) and B
holds ``P.heartbeats``: each hop upstream is one more prefix. :func:`emit` does the same.

Invariants:
    * Records are MM2's: key (source alias, target alias), value (version 0, timestamp ms).
    * ``heartbeats`` is created like MM2 creates it (one partition, compacted) when missing.
"""

from __future__ import annotations

import time

from confluent_kafka import Producer

from ledger.config import Config, FlowConfig
from ledger.errors import OffsetLedgerError
from pipelines.edge import kafka_admin
from pipelines.mm2 import formats


def heartbeats_for(config: Config, flow: FlowConfig,
                   now_ms: int) -> list[tuple[str, formats.Heartbeat]]:
    """``[(cluster alias, heartbeat)]`` a pass of ``flow`` writes, as MM2 dedicated mode."""
    out = [(flow.target, formats.Heartbeat(flow.source, flow.target, now_ms))]
    reverse_enabled = any((f.source, f.target) == (flow.target, flow.source)
                          for f in config.enabled_flows())
    if not reverse_enabled:  # MM2's heartbeat-only connector of the disabled reverse pair
        out.append((flow.source, formats.Heartbeat(flow.target, flow.source, now_ms)))
    return out


def emit(config: Config, flow: str | FlowConfig, now_ms: int | None = None) -> int:
    """Write the flow's heartbeats now; return how many were written."""
    flow = config.flow(flow) if isinstance(flow, str) else flow
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    written = 0
    for alias, hb in heartbeats_for(config, flow, now_ms):
        cluster = config.cluster(alias)
        kafka_admin.create_topic(cluster, formats.HEARTBEATS_TOPIC, 1,
                                 {"cleanup.policy": "compact"},
                                 replication_factor=config.replication_factor)
        producer = Producer(cluster.client_config(**{"acks": "all", "log_level": 0}))
        errors: list[str] = []
        key, value = formats.encode_heartbeat(hb)
        producer.produce(formats.HEARTBEATS_TOPIC, key=key, value=value, partition=0,
                         on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        if producer.flush(30) or errors:
            raise OffsetLedgerError(f"cluster {alias}: writing a heartbeat failed: "
                                    f"{errors[:1] or 'timed out'}")
        written += 1
    return written
