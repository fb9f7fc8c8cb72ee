"""The checker's own view of the clusters and of the ledger: its own librdkafka consumers and
its own reading of the ``offset_syncs`` Delta table (delta-rs -> pyarrow), never the project's
translation, store or status code.

Invariants:
    * A topic is read whole, from every partition's log start to its end (``read_uncommitted``:
      the high watermark; ``read_committed``: the last stable offset), with the offset of every
      record, so a run ``(u, d, n)`` can be checked record by record.
    * Runs are the ``offset_syncs`` rows as stored: nothing is merged, ordered by epoch or
      otherwise interpreted here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition


def read_topic(bootstrap: str, topic: str, committed: bool,
               timeout: float = 90.0) -> dict[int, dict[int, str]]:
    """``{partition: {offset: id}}`` of every record of ``topic`` (empty if it does not exist)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "torture-checker",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed" if committed
                         else "read_uncommitted", "log_level": 0})
    out: dict[int, dict[int, str]] = {}
    try:
        meta = consumer.list_topics(topic, timeout=30).topics.get(topic)
        if meta is None or meta.error is not None:
            return out
        parts = sorted(meta.partitions)
        out = {p: {} for p in parts}
        pending = set()
        assign = []
        for p in parts:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high > low:
                pending.add(p)
                assign.append(TopicPartition(topic, p, low))
        if not assign:
            return out
        consumer.assign(assign)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                continue
            out[msg.partition()][msg.offset()] = msg.value().decode()
        if pending:
            raise TimeoutError(f"reading {topic} did not reach the end of {sorted(pending)}")
    finally:
        consumer.close()
    return out


@dataclass(frozen=True)
class Run:
    flow: str
    topic: str
    partition: int
    u: int
    d: int
    n: int


def read_runs(ledger: Path) -> list[Run]:
    """Every row of ``offset_syncs``, read with delta-rs."""
    from deltalake import DeltaTable

    table = DeltaTable(str(ledger / "offset_syncs")).to_pyarrow_table(
        columns=["flow", "topic", "partition", "upstream_offset", "downstream_offset",
                 "length"])
    return [Run(r["flow"], r["topic"], r["partition"], r["upstream_offset"],
                r["downstream_offset"], r["length"]) for r in table.to_pylist()]


def read_resume_points(ledger: Path, operation_id: str) -> list[dict]:
    """The ``resume_points`` rows one operation wrote, read with delta-rs."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    table = DeltaTable(str(ledger / "resume_points")).to_pyarrow_table()
    return table.filter(pc.equal(table["operation_id"], operation_id)).to_pylist()


def groups_with_recorded_commits(ledger: Path, cluster: str) -> set[str]:
    """The groups ``group_offsets`` holds a commit of on ``cluster``, read with delta-rs."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    table = DeltaTable(str(ledger / "group_offsets")).to_pyarrow_table(
        columns=["cluster", "group_id"])
    return set(table.filter(pc.equal(table["cluster"], cluster))["group_id"].to_pylist())


def end_offsets(bootstrap: str, topics: list[str],
                low: bool = False) -> dict[tuple[str, int], int]:
    """``{(topic, partition): high watermark}`` (``low``: log start) of the topics that
    exist."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "torture-checker",
                         "log_level": 0})
    try:
        meta = consumer.list_topics(timeout=30).topics
        return {(t, p): consumer.get_watermark_offsets(TopicPartition(t, p),
                                                       timeout=30)[0 if low else 1]
                for t in topics if t in meta for p in meta[t].partitions}
    finally:
        consumer.close()
