"""MM2 wire formats: byte layouts checked against hand-built Kafka-protocol bytes, round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.mm2 import formats as f

pytestmark = pytest.mark.unit

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=40)
offsets = st.integers(0, 2**63 - 1)
partitions = st.integers(0, 2**31 - 1)


def test_offset_sync_bytes_are_kafka_protocol():
    key, value = f.encode_offset_sync(f.OffsetSync("Payments", 3, 100, 7))
    assert key == b"\x00\x08Payments" + b"\x00\x00\x00\x03"
    assert value == struct.pack(">qq", 100, 7)
    assert f.decode_offset_sync(key, value) == f.OffsetSync("Payments", 3, 100, 7)


def test_checkpoint_bytes_are_kafka_protocol():
    key, value = f.encode_checkpoint(f.Checkpoint("G", "P.Payments", 1, 42, 40, "m"))
    assert key == b"\x00\x01G" + b"\x00\x0aP.Payments" + b"\x00\x00\x00\x01"
    assert value == b"\x00\x00" + struct.pack(">qq", 42, 40) + b"\x00\x01m"


def test_heartbeat_bytes_are_kafka_protocol():
    key, value = f.encode_heartbeat(f.Heartbeat("P", "B", 1_700_000_000_123))
    assert key == b"\x00\x01P\x00\x01B"
    assert value == b"\x00\x00" + struct.pack(">q", 1_700_000_000_123)


@given(names, partitions, offsets, offsets)
def test_offset_sync_round_trip(topic, partition, u, d):
    sync = f.OffsetSync(topic, partition, u, d)
    assert f.decode_offset_sync(*f.encode_offset_sync(sync)) == sync


@given(names, names, partitions, offsets, offsets, names)
def test_checkpoint_round_trip(group, topic, partition, u, d, meta):
    cp = f.Checkpoint(group, topic, partition, u, d, meta)
    assert f.decode_checkpoint(*f.encode_checkpoint(cp)) == cp


@given(names, names, offsets)
def test_heartbeat_round_trip(source, target, ts):
    hb = f.Heartbeat(source, target, ts)
    assert f.decode_heartbeat(*f.encode_heartbeat(hb)) == hb


@pytest.mark.parametrize("key, value, message", [
    (b"\x00\x08Paym", struct.pack(">qq", 1, 2), "bad string length"),
    (b"\x00\x01T\x00\x00\x00\x00", struct.pack(">q", 1), "truncated"),
    (b"\x00\x01T\x00\x00\x00\x00", struct.pack(">qq", 1, 2) + b"x", "trailing"),
    (b"\x00\x01T\xff\xff\xff\xff", struct.pack(">qq", 1, 2), "negative partition"),
    (b"\x00\x01T\x00\x00\x00\x00", struct.pack(">qq", -1, 2), "negative upstream"),
    (b"\x00\x01T\x00\x00\x00\x00", None, "tombstone"),
])
def test_malformed_offset_syncs_are_refused(key, value, message):
    with pytest.raises(f.FormatError, match=message):
        f.decode_offset_sync(key, value)


def test_unknown_checkpoint_version_is_refused():
    key, value = f.encode_checkpoint(f.Checkpoint("G", "T", 0, 1, 1))
    with pytest.raises(f.FormatError, match="unknown version 1"):
        f.decode_checkpoint(key, b"\x00\x01" + value[2:])


def test_encode_refuses_negative_offsets():
    with pytest.raises(f.FormatError, match="downstream offset"):
        f.encode_checkpoint(f.Checkpoint("G", "T", 0, 1, -1))


def test_internal_topic_names_follow_the_separator():
    assert f.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert f.checkpoints_topic("P") == "P.checkpoints.internal"
    assert f.offset_syncs_topic("B", "_") == "mm2-offset-syncs_B_internal"
    assert f.checkpoints_topic("P", "_") == "P_checkpoints_internal"
