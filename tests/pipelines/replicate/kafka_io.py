"""Test helpers: produce records with explicit shape, read whole topics back, check the ledger."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from ledger import direct
from ledger.config import ClusterConfig, Config
from ledger.schemas import OFFSET_SYNCS
from ledger.tables import Ledger
from pipelines.edge import kafka_admin

DEADLINE_S = 60.0


@dataclass(frozen=True)
class Rec:
    """What must survive replication (the offset is where it sits, not part of the record)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def create(cluster: ClusterConfig, topic: str, partitions: int, **configs: str) -> None:
    assert kafka_admin.create_topic(cluster, topic, partitions, configs)


def delete(cluster: ClusterConfig, topic: str) -> None:
    """Delete ``topic`` and wait until the cluster lists it no more."""
    client = kafka_admin.admin(cluster)  # must outlive the future
    client.delete_topics([topic], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 60
    while topic in kafka_admin.list_topics(cluster):
        assert time.monotonic() < deadline, f"{topic} still listed"
        time.sleep(0.2)


def recreate(cluster: ClusterConfig, topic: str, partitions: int) -> None:
    """Create a topic just deleted (the controller may still be removing the old one)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if kafka_admin.create_topic(cluster, topic, partitions):
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        assert time.monotonic() < deadline, f"{topic} not recreated"
        time.sleep(0.5)


def produce(cluster: ClusterConfig, topic: str, records: Iterable[tuple[int, Rec]]) -> None:
    """Produce ``(partition, Rec)`` pairs in order and wait until all are acknowledged."""
    producer = Producer(cluster.client_config(**{"enable.idempotence": True, "linger.ms": 5}))
    for partition, rec in records:
        producer.produce(topic, partition=partition, key=rec.key, value=rec.value,
                         headers=list(rec.headers) or None, timestamp=rec.timestamp)
    assert producer.flush(30) == 0


def sample(partitions: int, per_partition: int, seed: str = "") -> list[tuple[int, Rec]]:
    """Keys (some null), null values (tombstones), headers (some with null values), timestamps."""
    # Recent timestamps: records older than the topic's retention would be deleted under us.
    base = int(time.time() * 1000) - 3_600_000
    out = []
    for i in range(per_partition):
        for p in range(partitions):
            key = None if i % 7 == 3 else f"k{seed}-{p}-{i % 5}".encode()
            value = None if i % 5 == 2 else f"v{seed}-{p}-{i}".encode() * (1 + i % 3)
            headers = () if i % 4 == 0 else (("h", f"{i}".encode()), ("null", None), ("h", b""))
            out.append((p, Rec(key, value, headers, base + p * 1000 + i)))
    return out


def read_all(cluster: ClusterConfig, topic: str, partitions: int) -> dict[int, dict[int, Rec]]:
    """``{partition: {offset: Rec}}`` of everything committed in the topic now."""
    consumer = Consumer(cluster.client_config(**{
        "group.id": f"test-reader-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "isolation.level": "read_committed", "enable.partition.eof": True, "log_level": 0}))
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)}
    out: dict[int, dict[int, Rec]] = {p: {} for p in range(partitions)}
    todo = {p for p, end in ends.items() if end > 0}
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
    deadline = time.monotonic() + DEADLINE_S
    try:
        while todo:
            assert time.monotonic() < deadline, f"reading {topic}: partitions {todo} not done"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                # End of partition: done once the position has passed the end offset we saw.
                if msg.error().code() == -191 and msg.offset() >= ends[msg.partition()]:
                    todo.discard(msg.partition())
                continue
            headers = tuple((k, v) for k, v in (msg.headers() or []))
            out[msg.partition()][msg.offset()] = Rec(msg.key(), msg.value(), headers,
                                                     msg.timestamp()[1])
            if msg.offset() + 1 >= ends[msg.partition()]:
                todo.discard(msg.partition())
    finally:
        consumer.close()
    return out


def ledger_runs(spark, config: Config, flow: str, topic: str,
                run_id: str | None = None) -> list[tuple[int, int, int, int]]:
    """``(partition, u, d, n)`` of the flow's runs for ``topic`` (of one job run, if given),
    in write order."""
    where = f"flow = '{flow}' AND topic = '{topic}'"
    if run_id is not None:
        where += f" AND run_id = '{run_id}'"
    rows = (Ledger(spark, config.ledger_location).read(OFFSET_SYNCS)
            .where(where)
            .orderBy("partition", "written_at", "batch_id", "downstream_offset").collect())
    return [(r["partition"], r["upstream_offset"], r["downstream_offset"], r["length"])
            for r in rows]


def assert_runs_exact(runs, source: dict[int, dict[int, Rec]],
                      replica: dict[int, dict[int, Rec]]) -> None:
    """Every run maps each upstream record to the identical record at its downstream offset."""
    assert runs, "no runs recorded"
    for partition, u, d, n in runs:
        for k in range(n):
            assert (u + k) in source[partition], f"run ({u},{d},{n}) maps missing {u + k}"
            assert replica[partition].get(d + k) == source[partition][u + k], (
                f"partition {partition}: upstream {u + k} is not at downstream {d + k}")


def assert_runs_cover(runs, source: dict[int, dict[int, Rec]]) -> None:
    """Every source record is mapped by some run."""
    for partition, records in source.items():
        mapped = {u + k for p, u, _, n in runs if p == partition for k in range(n)}
        missing = sorted(set(records) - mapped)
        assert not missing, f"partition {partition}: upstream offsets {missing[:10]} unmapped"


def runs_of(config, topic: str) -> list[tuple[int, int, int, int]]:
    """``(partition, u, d, n)`` of the flow P->B's runs for ``topic`` (delta-rs: no JVM)."""
    rows = direct.query(config.ledger_location, {"s": OFFSET_SYNCS},
                        f"SELECT \"partition\", upstream_offset, downstream_offset, length "
                        f"FROM s WHERE flow = 'P->B' AND topic = '{topic}' "
                        f"ORDER BY \"partition\", written_at, batch_id, downstream_offset")
    if rows in (direct.ABSENT, direct.UNAVAILABLE):
        return []
    return [(r["partition"], r["upstream_offset"], r["downstream_offset"], r["length"])
            for r in rows]


def create_replication_tables(location: str) -> None:
    """Create ``offset_syncs`` and ``replication_progress`` with delta-rs: a replicate job on
    this ledger then starts no JVM (on a fresh ledger Spark creates them)."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from pyspark.sql import types as T

    from ledger.schemas import (
        OFFSET_SYNCS_SCHEMA,
        REPLICATION_PROGRESS,
        REPLICATION_PROGRESS_SCHEMA,
    )

    kinds = {T.StringType: pa.string(), T.IntegerType: pa.int32(), T.LongType: pa.int64(),
             T.TimestampType: pa.timestamp("us", tz="UTC")}
    for name, schema in ((OFFSET_SYNCS, OFFSET_SYNCS_SCHEMA),
                         (REPLICATION_PROGRESS, REPLICATION_PROGRESS_SCHEMA)):
        arrow = pa.schema([pa.field(f.name, kinds[type(f.dataType)], f.nullable)
                           for f in schema.fields])
        write_deltalake(f"{location}/{name}", arrow.empty_table(), mode="overwrite")
