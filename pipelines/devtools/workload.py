"""Plain Kafka producers and consumers for the reference scenario (demo, tests, benchmarks).

They behave like ordinary applications: the consumer starts from its group's committed offsets
(earliest when it has none), reads to the end of the partitions or a record limit, commits what
it processed, and leaves no active member behind.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ledger.config import ClusterConfig
from pipelines.edge import kafka_admin, kafka_offsets

RETRIABLE = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
             KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError._TIMED_OUT)


def produce(cluster: ClusterConfig, topic: str, values: list[str], partitions: int) -> None:
    """Write ``values`` round-robin over ``partitions`` with an idempotent producer."""
    producer = Producer(cluster.client_config(**{"enable.idempotence": True, "linger.ms": 5,
                                                 "log_level": 0}))
    errors: list[str] = []
    for i, value in enumerate(values):
        producer.produce(topic, key=f"key-{i % 17}", value=value, partition=i % partitions,
                         on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        if i % 5000 == 0:
            producer.poll(0)
    if producer.flush(60) or errors:
        raise RuntimeError(f"producing to {cluster.alias}:{topic} failed: {errors[:3]}")


def end_transaction(producer: Producer, commit: bool, timeout: float = 60.0) -> None:
    """Commit or abort ``producer``'s open transaction once its records are on the broker.

    The flush comes first because an abort would otherwise purge the records still unsent (a
    history that means "aborted records in the log" would have none), and because an abort
    racing its own produce requests once ended in a fatal ``INVALID_TXN_STATE``
    (librdkafka #4849, still open).

    Raises:
        KafkaException: records still unsent after ``timeout`` (``_TIMED_OUT``), or the
            broker's refusal to end the transaction.
    """
    left = producer.flush(timeout)
    if left:  # a KafkaException, as a commit that timed out would raise
        raise KafkaException(KafkaError(
            KafkaError._TIMED_OUT, f"{left} records of a transaction not delivered in {timeout} s"))
    (producer.commit_transaction if commit else producer.abort_transaction)(timeout)


def _committed(consumer: Consumer, parts: list[TopicPartition],
               timeout: float) -> list[TopicPartition]:
    """``Consumer.committed``, retried while the group coordinator is still loading."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.committed(parts, timeout=10)
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args else None
            if code not in RETRIABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def consume(cluster: ClusterConfig, group: str, topics: list[str], limit: int | None = None,
            timeout: float = 60.0) -> list[tuple[str, str]]:
    """Consume as ``group`` to the end (or ``limit`` records); commit; return (topic, value)."""
    existing = kafka_admin.list_topics(cluster)
    parts = [TopicPartition(t, p) for t in topics if t in existing for p in range(existing[t])]
    if not parts:
        return []
    ends, lows = {}, {}
    for topic in {tp.topic for tp in parts}:
        for p, (low, high) in kafka_offsets.watermarks(cluster, topic, existing[topic]).items():
            ends[(topic, p)], lows[(topic, p)] = high, low
    consumer = Consumer(cluster.client_config(**{
        "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "log_level": 0}))
    out: list[tuple[str, str]] = []
    last: dict[tuple[str, int], int] = {}
    try:
        # Start explicitly from the committed offsets (log start when none), as a subscribed
        # consumer would; being explicit keeps the start independent of fetch timing.
        committed = _committed(consumer, parts, timeout)
        start = {(tp.topic, tp.partition): tp.offset if tp.offset >= 0
                 else lows[(tp.topic, tp.partition)] for tp in committed}
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in start.items()])
        position = dict(start)
        deadline = time.monotonic() + timeout
        while limit is None or len(out) < limit:
            if all(position[k] >= end for k, end in ends.items()):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group} did not reach the end of {topics} on "
                                   f"{cluster.alias} (at {position}, ends {ends})")
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.topic(), msg.value().decode() if msg.value() is not None else ""))
            key = (msg.topic(), msg.partition())
            last[key] = position[key] = msg.offset() + 1
        if last:
            consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in last.items()],
                            asynchronous=False)
    finally:
        consumer.close()
    return out
