"""MirrorMaker 2's internal topics: names and wire formats, encode and decode (pure, no I/O).

Kafka protocol types, big-endian; a STRING is an INT16 length then that many UTF-8 bytes.

    topic                                      key                        value
    mm2-offset-syncs.<alias>.internal          topic STRING, part INT32   upstream INT64,
                                                                          downstream INT64
    <source>.checkpoints.internal (target)     group STRING, topic        version INT16 (0),
                                               STRING, partition INT32    upstream INT64,
                                                                          downstream INT64,
                                                                          metadata STRING
    heartbeats                                 source STRING,             version INT16 (0),
                                               target STRING              timestamp INT64 (ms)

Invariants:
    * ``decode_*(encode_*(x)) == x`` for every valid value; anything malformed (short, trailing
      bytes, unknown version, negative offset or partition) raises :class:`FormatError`, never
      a made-up value.
    * A checkpoint's topic is the name on the cluster that holds the checkpoint topic (the
      target of the flow), e.g. ``P.Payments``: what ``RemoteClusterUtils.translateOffsets``
      returns. An offset-sync's topic is the upstream (source cluster) name.
    * Topic names follow MM2's ``DefaultReplicationPolicy`` with the configured separator
      (``replication.policy.internal.topic.separator.enabled`` left at its default, true).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ledger.errors import OffsetLedgerError

HEARTBEATS_TOPIC = "heartbeats"
VERSION = 0


class FormatError(OffsetLedgerError):
    """A record of an MM2 internal topic that does not decode."""


def offset_syncs_topic(alias: str, separator: str = ".") -> str:
    """``mm2-offset-syncs.<alias>.internal`` (alias: the target, or the source with
    ``offset-syncs.topic.location=target``)."""
    return f"mm2-offset-syncs{separator}{alias}{separator}internal"


def checkpoints_topic(source: str, separator: str = ".") -> str:
    """``<source>.checkpoints.internal``, on the flow's target cluster."""
    return f"{source}{separator}checkpoints{separator}internal"


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """MM2's point sync: upstream ``upstream_offset`` was written at ``downstream_offset``."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A group's committed ``upstream_offset`` and its translation on the target's ``topic``."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    source: str
    target: str
    timestamp_ms: int


class _Reader:
    def __init__(self, data: bytes | None, what: str):
        if data is None:
            raise FormatError(f"{what}: no bytes (a tombstone?)")
        self.data, self.pos, self.what = bytes(data), 0, what

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise FormatError(f"{self.what}: truncated at byte {self.pos} of {len(self.data)}")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def string(self) -> str:
        length = self.take(">h")
        if length < 0 or self.pos + length > len(self.data):
            raise FormatError(f"{self.what}: bad string length {length} at byte {self.pos - 2}")
        raw = self.data[self.pos:self.pos + length]
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"{self.what}: string is not UTF-8: {exc}") from None

    def offset(self, name: str) -> int:
        value = self.take(">q")
        if value < 0:
            raise FormatError(f"{self.what}: negative {name} {value}")
        return value

    def partition(self) -> int:
        value = self.take(">i")
        if value < 0:
            raise FormatError(f"{self.what}: negative partition {value}")
        return value

    def version(self) -> int:
        value = self.take(">h")
        if value != VERSION:
            raise FormatError(f"{self.what}: unknown version {value} (only {VERSION} exists)")
        return value

    def done(self) -> None:
        if self.pos != len(self.data):
            raise FormatError(f"{self.what}: {len(self.data) - self.pos} trailing byte(s)")


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise FormatError(f"string of {len(raw)} bytes does not fit an INT16 length")
    return struct.pack(">h", len(raw)) + raw


def _check(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FormatError(f"{name} must be a non-negative int, got {value!r}")
    return value


# --- offset-syncs --------------------------------------------------------------------------

def encode_offset_sync(sync: OffsetSync) -> tuple[bytes, bytes]:
    """``(key, value)`` bytes of an offset-sync record."""
    key = _string(sync.topic) + struct.pack(">i", _check("partition", sync.partition))
    value = struct.pack(">qq", _check("upstream offset", sync.upstream_offset),
                        _check("downstream offset", sync.downstream_offset))
    return key, value


def decode_offset_sync(key: bytes | None, value: bytes | None) -> OffsetSync:
    k = _Reader(key, "offset-sync key")
    topic, partition = k.string(), k.partition()
    k.done()
    v = _Reader(value, "offset-sync value")
    upstream, downstream = v.offset("upstream offset"), v.offset("downstream offset")
    v.done()
    return OffsetSync(topic, partition, upstream, downstream)


# --- checkpoints ---------------------------------------------------------------------------

def encode_checkpoint(cp: Checkpoint) -> tuple[bytes, bytes]:
    """``(key, value)`` bytes of a checkpoint record."""
    key = (_string(cp.group) + _string(cp.topic)
           + struct.pack(">i", _check("partition", cp.partition)))
    value = (struct.pack(">hqq", VERSION, _check("upstream offset", cp.upstream_offset),
                         _check("downstream offset", cp.downstream_offset))
             + _string(cp.metadata))
    return key, value


def decode_checkpoint(key: bytes | None, value: bytes | None) -> Checkpoint:
    k = _Reader(key, "checkpoint key")
    group, topic, partition = k.string(), k.string(), k.partition()
    k.done()
    v = _Reader(value, "checkpoint value")
    v.version()
    upstream, downstream = v.offset("upstream offset"), v.offset("downstream offset")
    metadata = v.string()
    v.done()
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)


# --- heartbeats ----------------------------------------------------------------------------

def encode_heartbeat(hb: Heartbeat) -> tuple[bytes, bytes]:
    key = _string(hb.source) + _string(hb.target)
    value = struct.pack(">hq", VERSION, _check("timestamp", hb.timestamp_ms))
    return key, value


def decode_heartbeat(key: bytes | None, value: bytes | None) -> Heartbeat:
    k = _Reader(key, "heartbeat key")
    source, target = k.string(), k.string()
    k.done()
    v = _Reader(value, "heartbeat value")
    v.version()
    timestamp = v.offset("timestamp")
    v.done()
    return Heartbeat(source, target, timestamp)
