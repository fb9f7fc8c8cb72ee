"""Heartbeats in MM2's format, where MM2 writes them, replicated as ``P.heartbeats``."""

from __future__ import annotations

import pytest

from ledger.config import config_from_mapping
from pipelines.mm2 import formats, heartbeats
from pipelines.mm2.ingest import Source, read_topic
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def latest(config, alias, topic, source, target):
    records, _ = read_topic(Source(config.cluster(alias), topic), None)
    beats = [formats.decode_heartbeat(r.key, r.value) for r in records]
    return max((b.timestamp_ms for b in beats if (b.source, b.target) == (source, target)),
               default=None)


def _config(flows):
    return config_from_mapping({"clusters": {a: {"bootstrap.servers": "127.0.0.1:1"}
                                             for a in ("P", "B")}, "flows": flows})


@pytest.mark.unit
def test_one_way_flow_heartbeats_like_mm2_dedicated_mode():
    one_way = _config({"P->B": True, "B->P": False})
    assert heartbeats.heartbeats_for(one_way, one_way.flow("P->B"), 7) == [
        ("B", formats.Heartbeat("P", "B", 7)), ("P", formats.Heartbeat("B", "P", 7))]
    both = _config({"P->B": True, "B->P": True})
    assert heartbeats.heartbeats_for(both, both.flow("P->B"), 7) == [
        ("B", formats.Heartbeat("P", "B", 7))]


@pytest.mark.e2e
def test_heartbeats_are_written_and_replicated(spark, make_config):
    config = make_config(flows={"P->B": {"topics": ["heartbeats"]}, "B->P": False})
    now = 1_800_000_000_000 + 123
    assert heartbeats.emit(config, "P->B", now_ms=now) == 2
    assert latest(config, "B", "heartbeats", "P", "B") == now
    assert latest(config, "P", "heartbeats", "B", "P") == now
    replicate_once(spark, config, "P->B")
    # The upstream hop's heartbeat arrives on B under P's prefix, still MM2's format.
    assert latest(config, "B", "P.heartbeats", "B", "P") == now


def test_each_replication_pass_writes_the_flows_heartbeats(spark, make_config):
    import time

    config = make_config(flows={"P->B": {"topics": ["heartbeats"]}, "B->P": False})
    before = int(time.time() * 1000)
    replicate_once(spark, config, "P->B")
    # The pass wrote (P, B) on B and, as MM2's heartbeat-only connector of the disabled
    # reverse pair, (B, P) on P, then replicated P's heartbeats into B's P.heartbeats.
    assert latest(config, "B", "heartbeats", "P", "B") >= before
    assert latest(config, "P", "heartbeats", "B", "P") >= before
    assert latest(config, "B", "P.heartbeats", "B", "P") >= before
