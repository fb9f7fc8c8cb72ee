"""The latency benchmark's clients, each its own process: a paced producer on the source and a
``read_committed`` consumer on the replica.

``python -m bench.latency_clients produce|consume ...`` (started by ``bench.latency``).

* **produce**: writes one sync record per partition (connections and producer id ready
  before the clock starts; sequence -2), with ``--wait-synced FILE`` waits until the consumer
  has them all on the replica, then writes ``round(rate * seconds)`` records at ``rate`` per second,
  round-robin over the topics' partitions; each value starts with its sequence number (8
  bytes, big-endian), so the consumer can tell every record apart. The timestamp is the
  CreateTime librdkafka stamps at ``produce()``: the send time.
  Idempotent, ``acks=all``, ``linger.ms=1``.
* **consume**: assigns every replica partition from its start, ``isolation.level =
  read_committed``. A record's latency is the wall time at which ``consume()`` handed it over
  (readable on the replica) minus its CreateTime, in ms. Warm-up records (sequence -1, written
  before a system starts) are not measured: once ``--warmup`` of them arrived on every
  partition the consumer writes ``--ready`` (the system replicates; the producer may start).
  Once the producer's sync record arrived on every partition it writes ``--synced``: every
  partition of both brokers has then taken the appends before the clock (the scale case's
  prefill makes the brokers write each partition's first index entry there, see
  ``bench.latency``), and the system has caught up.
  It stops when every sequence number arrived, or on SIGTERM (the benchmark's deadline).

Invariants:
    * A sequence number counts once (``distinct``); a copy arriving again is a ``duplicate``
      and has no latency sample. ``missing`` is computed by the benchmark from the ``seen``
      bitmap against the producer's successful deliveries: never inferred from counts alone.
    * With ``--offsets``, every arrival's (partition index, replica offset, readable ms) is
      kept, for the ledger lag (``bench.latency_ledger``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import struct
import sys
import time
import uuid
from array import array
from pathlib import Path

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from ledger.config import load_config

SEQ = struct.Struct(">q")
WARMUP_SEQ = -1  # written by the benchmark before the system starts
SYNC_SEQ = -2  # the producer's one per partition, off the clock
SYNC_TIMEOUT_S = 600.0


def percentiles(values: np.ndarray) -> dict[str, float | None]:
    """p50/p95/p99/max/mean of ``values`` (None each when empty)."""
    if not len(values):
        return {k: None for k in ("p50", "p95", "p99", "max", "mean")}
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {"p50": float(p50), "p95": float(p95), "p99": float(p99),
            "max": float(values.max()), "mean": float(values.mean())}


def _slots(topics: list[str], partitions: int) -> list[tuple[str, int]]:
    return [(t, p) for t in topics for p in range(partitions)]


def value_of(seq: int, size: int) -> bytes:
    return SEQ.pack(seq) + b"x" * max(0, size - SEQ.size)


def produce(args: argparse.Namespace) -> dict:
    cluster = load_config(args.config).cluster(args.cluster)
    failed: list[int] = []

    def report(err, msg) -> None:
        if err is not None:
            failed.append(SEQ.unpack_from(msg.value())[0])

    producer = Producer(cluster.client_config(**{
        "enable.idempotence": True, "acks": "all", "linger.ms": 1,
        "queue.buffering.max.messages": 2_000_000, "on_delivery": report}))
    slots = _slots(args.topics.split(","), args.partitions)
    total = round(args.rate * args.seconds)
    pad = b"x" * max(0, args.size - SEQ.size)
    # Connections, metadata and the idempotent producer id first, off the clock: otherwise the
    # first measured records wait for them (about 0.5 s), whatever system replicates them.
    for topic, partition in slots:
        producer.produce(topic, value=value_of(SYNC_SEQ, args.size), partition=partition)
    producer.flush(60)
    if args.wait_synced:
        deadline = time.monotonic() + SYNC_TIMEOUT_S
        while not Path(args.wait_synced).exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the sync records did not reach the replica within "
                                   f"{SYNC_TIMEOUT_S:g} s")
            time.sleep(0.05)
    started_wall, started = time.time(), time.perf_counter()
    sent = 0
    while sent < total:
        due = min(total, int((time.perf_counter() - started) * args.rate) + 1)
        while sent < due:
            topic, partition = slots[sent % len(slots)]
            try:
                producer.produce(topic, value=SEQ.pack(sent) + pad, partition=partition)
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
        ahead = sent / args.rate - (time.perf_counter() - started)
        if ahead > 0:
            time.sleep(min(ahead, 0.005))
    elapsed = time.perf_counter() - started
    ended_wall = time.time()
    left = producer.flush(120)
    return {"records": total, "failed": len(failed) + left, "failed_seqs": sorted(failed)[:100],
            "start_wall": started_wall, "end_wall": ended_wall, "seconds": elapsed,
            "rate": total / elapsed if elapsed else None}


def consume(args: argparse.Namespace) -> dict:
    cluster = load_config(args.config).cluster(args.cluster)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    consumer = Consumer(cluster.client_config(**{
        "group.id": f"bench-latency-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "isolation.level": "read_committed", "fetch.wait.max.ms": 100, "log_level": 3}))
    slots = _slots(args.topics.split(","), args.partitions)
    index = {slot: i for i, slot in enumerate(slots)}
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in slots])
    expect = args.expect
    seen = bytearray(expect)
    latencies = array("q")
    where, offsets, times = array("i"), array("q"), array("q")
    warm = [0] * len(slots)
    synced = bytearray(len(slots))
    not_synced = len(slots)
    not_warm = len(slots) if args.warmup else 0
    ready_at = None if not_warm else time.time()
    if ready_at is not None and args.ready:
        Path(args.ready).write_text(str(ready_at))
    distinct = duplicates = unknown = 0
    errors: dict[str, int] = {}
    all_at = None
    keep = args.offsets is not None
    while not stop and distinct < expect:
        # What is readable now, at once; else wait for the next record alone (consume() with a
        # timeout would hold records back until it has 10,000 or the timeout ends).
        batch = consumer.consume(10_000, timeout=0)
        if not batch:
            msg = consumer.poll(0.1)
            batch = [msg] if msg is not None else []
        now_s = time.time()
        now = int(now_s * 1000)
        for msg in batch:
            if msg.error():
                name = msg.error().str()
                errors[name] = errors.get(name, 0) + 1
                continue
            seq = SEQ.unpack_from(msg.value())[0]
            if seq == SYNC_SEQ:
                i = index[(msg.topic(), msg.partition())]
                if not synced[i]:
                    synced[i] = 1
                    not_synced -= 1
                    if not not_synced and args.synced:
                        Path(args.synced).write_text(str(now_s))
                continue
            if seq == WARMUP_SEQ:
                i = index[(msg.topic(), msg.partition())]
                warm[i] += 1
                if warm[i] == args.warmup:
                    not_warm -= 1
                    if not not_warm:
                        ready_at = now_s
                        if args.ready:
                            Path(args.ready).write_text(str(ready_at))
                continue
            if not 0 <= seq < expect:
                unknown += 1
                continue
            if seen[seq]:
                duplicates += 1
            else:
                seen[seq] = 1
                distinct += 1
                latencies.append(now - msg.timestamp()[1])
            if keep:
                where.append(index[(msg.topic(), msg.partition())])
                offsets.append(msg.offset())
                times.append(now)
        if distinct == expect:
            all_at = now_s
    consumer.close()
    Path(args.seen).write_bytes(bytes(seen))
    if keep:
        np.savez(args.offsets, where=np.frombuffer(where, dtype=np.int32),
                 offsets=np.frombuffer(offsets, dtype=np.int64),
                 times=np.frombuffer(times, dtype=np.int64),
                 latency_ms=np.frombuffer(latencies, dtype=np.int64), slots=np.array(
                     [f"{t}\t{p}" for t, p in slots]))
    return {"expected": expect, "distinct": distinct, "duplicates": duplicates,
            "unknown": unknown, "errors": errors, "ready_at": ready_at, "all_at": all_at,
            "latency_ms": percentiles(np.frombuffer(latencies, dtype=np.int64))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_clients", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=("produce", "consume"))
    parser.add_argument("--config", required=True, help="config naming the clusters")
    parser.add_argument("--cluster", required=True, help="alias: P (produce) or B (consume)")
    parser.add_argument("--topics", required=True, help="comma-separated topic names")
    parser.add_argument("--partitions", type=int, required=True, help="partitions per topic")
    parser.add_argument("--out", required=True, help="JSON result file")
    parser.add_argument("--rate", type=float, help="produce: records per second")
    parser.add_argument("--seconds", type=float, help="produce: for how long")
    parser.add_argument("--size", type=int, default=100, help="produce: value bytes")
    parser.add_argument("--expect", type=int, help="consume: records the producer writes")
    parser.add_argument("--warmup", type=int, default=0,
                        help="consume: warm-up records per partition before --ready")
    parser.add_argument("--ready", help="consume: file written once the warm-up arrived")
    parser.add_argument("--synced", help="consume: file written once every sync record arrived")
    parser.add_argument("--wait-synced", help="produce: start the clock once this file exists")
    parser.add_argument("--seen", help="consume: file for the bitmap of sequence numbers seen")
    parser.add_argument("--offsets", help="consume: .npz of every arrival's replica offset")
    args = parser.parse_args(argv)
    result = produce(args) if args.role == "produce" else consume(args)
    tmp = Path(f"{args.out}.tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, args.out)  # the benchmark reads a whole file or none
    return 0


if __name__ == "__main__":
    sys.exit(main())
