"""Producers and consumers of a history: plain confluent-kafka, every record carries its id.

Invariants:
    * A record's id (``<topic>:<cluster>:<n>``, value and header ``id``) is unique in a history;
      ``n`` grows with every record a topic's producer writes, on whichever cluster, so within a
      partition a later record always has a larger ``n``.
    * A group counts a record as *processed* only if its session committed an offset past it
      (read back from the broker after the session closed): what a group re-reads after a stop
      without a commit is a normal at-least-once re-read, not a duplicate.
    * Only one session per group runs at a time, so a group never rebalances between members
      (it may rebalance alone, when a subscribed topic gains partitions: the records it then
      reads again from its committed offset count once per session).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.torture.history import GroupSpec, TopicSpec
from pipelines.devtools.workload import end_transaction


def record_n(record_id: str) -> int:
    return int(record_id.rsplit(":", 1)[1])


class TopicProducer(threading.Thread):
    """One topic's producer; ``move_to(alias)`` points it at a cluster, ``move_to(None)``
    pauses it (returns once everything it wrote is acknowledged)."""

    def __init__(self, spec: TopicSpec, bootstraps: dict[str, str], seed: int) -> None:
        super().__init__(daemon=True, name=f"produce-{spec.name}")
        self.spec, self.bootstraps = spec, bootstraps
        self.rng = random.Random(seed)
        self.produced = 0
        self.aborted = 0
        self.errors: list[str] = []
        self.failed: str | None = None
        self._want: str | None = None
        self._have: str | None = None
        self._producer: Producer | None = None
        self._cond = threading.Condition()
        self._halt = threading.Event()
        self._n = 0
        self._generation = 0

    def move_to(self, alias: str | None, timeout: float = 120.0) -> None:
        with self._cond:
            self._want = alias
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._have == alias or self.failed is not None,
                                timeout)
        if self.failed is not None:
            raise RuntimeError(self.failed)

    def stop(self) -> None:
        self.move_to(None)
        self._halt.set()
        with self._cond:
            self._cond.notify_all()
        self.join(60)

    # --- the thread ----------------------------------------------------------------------

    def _open(self, alias: str) -> None:
        conf = {"bootstrap.servers": self.bootstraps[alias], "enable.idempotence": True,
                "linger.ms": 5, "message.timeout.ms": 300000, "log_level": 0,
                "topic.metadata.refresh.interval.ms": 5000}  # added partitions seen soon
        if self.spec.producer == "transactional":
            self._generation += 1
            conf["transactional.id"] = f"{self.spec.name}-{alias}-{self._generation}"
            conf["transaction.timeout.ms"] = 300000  # >= message.timeout.ms (librdkafka)
        self._producer = Producer(conf)
        if self.spec.producer == "transactional":
            self._producer.init_transactions(60)

    def _close(self) -> None:
        if self._producer is not None:
            left = self._producer.flush(120)
            if left:
                self.errors.append(f"{left} record(s) not delivered at a producer's close")
            self._producer = None

    def _on_delivery(self, err, _msg) -> None:
        if err is not None:
            self.errors.append(str(err))

    def _next(self) -> tuple[str, bytes | None, int | None]:
        self._n += 1
        rid = f"{self.spec.name}:{self._have}:{self._n}"
        if self.spec.producer == "keyed":
            stretch_len = max(1, int(self.spec.rate * 4))
            hot = self.spec.hot[(self._n // stretch_len) % len(self.spec.hot)]
            key = f"k{self.rng.randrange(16)}"
            return rid, key.encode(), hot[zlib.crc32(key.encode()) % len(hot)]
        return rid, None, None

    def _send(self, count: int) -> None:
        assert self._producer is not None
        for _ in range(count):
            rid, key, partition = self._next()
            args = {"key": key, "value": rid.encode(), "headers": [("id", rid.encode())],
                    "on_delivery": self._on_delivery}
            if partition is not None:
                args["partition"] = partition
            self._producer.produce(self.spec.name, **args)
        self._producer.poll(0)

    def _transaction(self, count: int) -> None:
        assert self._producer is not None
        self._producer.begin_transaction()
        self._send(count)
        commit = self.rng.random() >= 0.25
        end_transaction(self._producer, commit)  # flushed first: an abort leaves them in the log
        if commit:
            self.produced += count
        else:
            self.aborted += count

    def run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # the harness's own failure: reported, and nobody waits
            self.failed = f"producer of {self.spec.name}: {type(exc).__name__}: {exc}"
            with self._cond:
                self._have = self._want = None
                self._cond.notify_all()

    def _loop(self) -> None:
        while not self._halt.is_set():
            with self._cond:
                if self._want != self._have:
                    self._close()
                    self._have = self._want
                    if self._have is not None:
                        self._open(self._have)
                    self._cond.notify_all()
                if self._have is None:
                    self._cond.wait(0.5)
                    continue
            try:
                if self.spec.producer == "transactional":
                    count = self.rng.randint(1, 20)
                    self._transaction(count)
                else:
                    count = self.rng.randint(1, 5)
                    self._send(count)
                    self.produced += count
            except KafkaException as exc:
                self.errors.append(str(exc))
                with contextlib.suppress(KafkaException):
                    self._producer.abort_transaction(30)  # type: ignore[union-attr]
            self._halt.wait(count / self.spec.rate)
        with self._cond:
            self._close()


@dataclass
class Read:
    """A record a session read: where, and which id."""

    cluster: str
    topic: str
    partition: int
    offset: int
    rid: str


@dataclass
class SessionResult:
    group: str
    cluster: str
    reads: list[Read] = field(default_factory=list)  # every record read, in order
    processed: list[Read] = field(default_factory=list)  # read and committed past
    commits: int = 0
    zero_commits: int = 0  # commits of a partition's start (nothing read there)
    errors: list[str] = field(default_factory=list)


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, read by an admin client of our own."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                               request_timeout=30)[group]
    result = future.result(60)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
            if tp.offset >= 0}


class GroupSession(threading.Thread):
    """A group's consumer on one cluster until ``stop()`` (or ``done()`` returns True)."""

    def __init__(self, spec: GroupSpec, cluster: str, bootstrap: str, topics: list[str],
                 rng: random.Random, done: Callable[[SessionResult], bool] | None = None,
                 final_commit: bool = True) -> None:
        super().__init__(daemon=True, name=f"consume-{spec.name}")
        self.spec, self.bootstrap, self.topics, self.rng = spec, bootstrap, topics, rng
        self.done, self.final_commit = done, final_commit
        self.result = SessionResult(spec.name, cluster)
        self._halt = threading.Event()
        self._pending = 0

    def stop(self) -> SessionResult:
        self._halt.set()
        self.join(180)
        return self.result

    def _commit(self, consumer: Consumer, last: dict[tuple[str, int], int],
                start: dict[tuple[str, int], int]) -> None:
        offsets = []
        for tp in consumer.assignment():
            key = (tp.topic, tp.partition)
            if key in last:
                offsets.append(TopicPartition(tp.topic, tp.partition, last[key]))
            elif key in start and self.rng.random() < 0.5:
                offsets.append(TopicPartition(tp.topic, tp.partition, start[key]))
                self.result.zero_commits += 1
        if self.spec.commit_log_end:
            positions = consumer.position([TopicPartition(o.topic, o.partition)
                                           for o in offsets])
            offsets = [p if p.offset >= o.offset else o for p, o in zip(positions, offsets,
                                                                       strict=True)]
        if offsets:
            consumer.commit(offsets=offsets, asynchronous=False)
            self.result.commits += 1
        self._pending = 0

    def run(self) -> None:
        conf = {"bootstrap.servers": self.bootstrap, "group.id": self.spec.name,
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "isolation.level": "read_committed", "log_level": 0,
                "topic.metadata.refresh.interval.ms": 5000}
        if self.spec.protocol == "consumer":
            conf["group.protocol"] = "consumer"
        consumer = Consumer(conf)
        last: dict[tuple[str, int], int] = {}
        start: dict[tuple[str, int], int] = {}
        try:
            meta = consumer.list_topics(timeout=30).topics
            parts = [TopicPartition(t, p) for t in self.topics if t in meta
                     for p in meta[t].partitions]
            for tp in consumer.committed(parts, timeout=30):
                if tp.offset >= 0:
                    start[(tp.topic, tp.partition)] = tp.offset
                else:
                    start[(tp.topic, tp.partition)] = _log_start(consumer, tp)
            consumer.subscribe(self.topics)
            while not self._halt.is_set():
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    rid = msg.value().decode()
                    read = Read(self.result.cluster, msg.topic(), msg.partition(),
                                msg.offset(), rid)
                    self.result.reads.append(read)
                    last[(msg.topic(), msg.partition())] = msg.offset() + 1
                    self._pending += 1
                    if self._pending >= self.rng.randint(1, 2 * self.spec.commit_every):
                        self._commit(consumer, last, start)
                elif self.done is not None:
                    self._commit(consumer, last, start)
                    self._mark_processed()
                    if self.done(self.result):
                        break
            if self.final_commit:
                self._commit(consumer, last, start)
        except KafkaException as exc:
            self.result.errors.append(str(exc))
        finally:
            with contextlib.suppress(Exception):
                consumer.close()
        self._mark_processed()

    def _mark_processed(self) -> None:
        """The reads below the group's committed offsets, read back from the broker."""
        try:
            committed = committed_offsets(self.bootstrap, self.spec.name)
        except Exception as exc:  # the broker may be away for a moment: retried later
            self.result.errors.append(f"committed offsets: {exc}")
            time.sleep(1)
            committed = committed_offsets(self.bootstrap, self.spec.name)
        # A position read twice in one session (the consumer re-fetched from the committed
        # offset after a rebalance, e.g. when partitions were added) is one record processed.
        once = {(r.topic, r.partition, r.offset): r for r in self.result.reads}
        self.result.processed = [r for r in once.values()
                                 if r.offset < committed.get((r.topic, r.partition), -1)]


def _log_start(consumer: Consumer, tp: TopicPartition, bound_s: float = 60) -> int:
    """The partition's log start, asked again while a leader moves (a broker restarted or
    stopped by a fault answers ``NOT_LEADER_FOR_PARTITION`` for a while): a session that gave
    up here read and committed nothing, and the move after it found no group (seed 41006)."""
    deadline = time.monotonic() + bound_s
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=30)[0]
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            retriable = getattr(error, "retriable", lambda: False)() or getattr(
                error, "code", lambda: None)() in _LEADER_MOVES
            if not retriable or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


_LEADER_MOVES = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                 KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT}
