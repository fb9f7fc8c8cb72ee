"""A fake runs channel for ``lease.RunsChannel``: the surface of ``lease.Clients``, nothing more.

One :class:`FakeTopic` holds the channel's two partitions as lists (offset = index) and the
flow's group: who holds partition 0 and the committed hint. Consumers read partition 0 from the
hint once assigned; the test drives the group (assign, revoke, fence) by hand. Transactions and
timing are out of scope: what the fakes test is the driver's bookkeeping.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from pipelines.edge import kafka_errors
from pipelines.edge.kafka_errors import KafkaAccessError
from pipelines.replicate import channel


@dataclass
class FakeMessage:
    _partition: int
    _offset: int
    _value: bytes | None
    _error: Any = None

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> Any:
        return self._error


@dataclass
class FakeTopic:
    """The channel topic and the flow's group on the target."""

    partitions: dict[int, list[bytes]] = field(default_factory=lambda: {0: [], 1: []})
    committed: int | None = None  # the group's offset of partition 0 (the hint)
    held_by_other: bool = False  # another job's member holds partition 0
    unreachable: bool = False  # watermark reads fail (the target away)
    away: bool = False  # the target does not answer: no member gets partition 0
    back_on_wait: bool = True  # await_target finds the target back (else it stays away)
    away_flushes: int = 0  # the next flushes deliver nothing (the target away)
    coordinator_ready_at: float = 0.0  # monotonic time before which nobody is assigned
    close_blocks: threading.Event | None = None  # a member's close waits for this
    # A member's close serves its queue, as librdkafka's consumer_close does: its revoke, and
    # the fencing its successor's join caused (the same group.instance.id), reach its callbacks.
    close_reports: bool = False

    def append(self, partition: int, value: bytes) -> int:
        self.partitions[partition].append(value)
        return len(self.partitions[partition]) - 1


class FakeConsumer:
    """The driver's group member: partition 0 from the hint once assigned."""

    def __init__(self, topic: FakeTopic, on_assign: Any, on_revoke: Any, on_error: Any) -> None:
        self.topic, self.on_assign, self.on_revoke, self.on_error = (topic, on_assign,
                                                                     on_revoke, on_error)
        self.assigned = False
        self.position = 0
        self.closed = False
        self.fenced = False
        self.errors: list[Any] = []  # delivered by poll before any message
        self.commits: list[int] = []

    def assign_runs(self) -> None:
        """The group gives this member partition 0 (as a rebalance in ``poll`` would)."""
        self.assigned = True
        self.position = self.topic.committed or 0
        self.on_assign(self, [TopicPartition("t", channel.RUNS_PARTITION)])

    def revoke_runs(self) -> None:
        self.assigned = False
        self.on_revoke(self, [TopicPartition("t", channel.RUNS_PARTITION)])

    def fence(self) -> None:
        """Another member joined with this one's group.instance.id (or its own rejoin)."""
        self.fenced = True
        self.on_error(KafkaError(KafkaError.FENCED_INSTANCE_ID))

    def poll(self, timeout: float) -> FakeMessage | None:
        if self.closed:
            raise RuntimeError("poll on a closed consumer")
        if not (self.assigned or self.topic.held_by_other or self.topic.away or self.fenced
                or time.monotonic() < self.topic.coordinator_ready_at):
            self.assign_runs()
        if self.errors:
            return FakeMessage(channel.RUNS_PARTITION, -1, None, self.errors.pop(0))
        log = self.topic.partitions[channel.RUNS_PARTITION]
        if self.assigned and not self.fenced and self.position < len(log):
            self.position += 1
            return FakeMessage(channel.RUNS_PARTITION, self.position - 1, log[self.position - 1])
        time.sleep(min(timeout, 0.01))
        return None

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> None:
        if self.fenced:
            raise KafkaException(KafkaError(KafkaError.FENCED_INSTANCE_ID))
        self.topic.committed = offsets[0].offset
        self.commits.append(offsets[0].offset)

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float,
                              cached: bool) -> tuple[int, int]:
        if self.fenced or self.topic.unreachable:
            raise KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN,
                                            "1/1 brokers are down"))
        return 0, len(self.topic.partitions[tp.partition])

    def close(self) -> None:
        if self.topic.close_blocks is not None:  # librdkafka waiting on an absent coordinator
            self.topic.close_blocks.wait()
        if self.topic.close_reports:
            if self.assigned:
                self.revoke_runs()
            self.on_error(KafkaError(KafkaError.FENCED_INSTANCE_ID))
        self.closed = True


class FakeProbe(FakeConsumer):
    """A consumer outside the group: reads from where it is assigned."""

    def __init__(self, topic: FakeTopic) -> None:
        super().__init__(topic, None, None, None)

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigned, self.position = True, tps[0].offset

    def close(self) -> None:  # outside the group: nothing to wait for
        self.closed = True

    def poll(self, timeout: float) -> FakeMessage | None:
        log = self.topic.partitions[channel.RUNS_PARTITION]
        if self.position < len(log):
            self.position += 1
            return FakeMessage(channel.RUNS_PARTITION, self.position - 1, log[self.position - 1])
        time.sleep(min(timeout, 0.01))
        return None


class FakeProducer:
    """Delivers at ``flush``, unless the target is away (``FakeTopic.away_flushes``)."""

    def __init__(self, topic: FakeTopic) -> None:
        self.topic = topic
        self.queued: list[tuple[int, bytes, Any]] = []

    def produce(self, topic: str, value: bytes, partition: int, on_delivery: Any = None) -> None:
        self.queued.append((partition, value, on_delivery))

    def flush(self, timeout: float) -> int:
        if self.topic.away_flushes:
            self.topic.away_flushes -= 1
            return len(self.queued)
        for partition, value, on_delivery in self.queued:
            offset = self.topic.append(partition, value)
            if on_delivery is not None:
                on_delivery(None, FakeMessage(partition, offset, value))
        self.queued = []
        return 0


class FakeClients:
    """``lease.Clients`` on one :class:`FakeTopic`; keeps every consumer it made."""

    def __init__(self, topic: FakeTopic | None = None) -> None:
        self.topic = topic or FakeTopic()
        self.consumers: list[FakeConsumer] = []
        self.probes: list[FakeProbe] = []
        self.waits: list[float] = []

    def consumer(self, on_assign: Any, on_revoke: Any, on_error: Any) -> FakeConsumer:
        c = FakeConsumer(self.topic, on_assign, on_revoke, on_error)
        self.consumers.append(c)
        return c

    def probe(self) -> FakeProbe:
        p = FakeProbe(self.topic)
        self.probes.append(p)
        return p

    def producer(self) -> FakeProducer:
        return FakeProducer(self.topic)

    def lease_holder(self) -> str | None:
        return "client.id offset-ledger-replicate.run-other on /127.0.0.1" \
            if self.topic.held_by_other else None

    def await_target(self, wait_s: float) -> bool:
        """The target, if away, comes back (True) or stays away (the classified error)."""
        self.waits.append(wait_s)
        if not self.topic.away:
            return False
        if not self.topic.back_on_wait:
            raise KafkaAccessError("cluster B is unreachable at 127.0.0.1:1: Connection "
                                   "refused", kafka_errors.UNREACHABLE)
        self.topic.away = False
        return True

    @property
    def current(self) -> FakeConsumer:
        return self.consumers[-1]
