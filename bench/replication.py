"""Replication throughput: offset-ledger's Spark job next to a plain confluent-kafka loop.

``python -m bench.replication [--records N] [--partitions 6] [--size 100]``

Both run in the same process run, on the same pair of embedded KRaft clusters (started here on
free loopback ports unless ``--config`` names running ones), copying the same source topic:

* **plain loop**: one confluent-kafka consumer -> producer loop (``consume`` in batches,
  ``produce`` to the same partition with key, value, headers and timestamp, one final flush),
  the simplest correct copier; it records nothing about where records went.
* **offset-ledger**: ``replicate_once`` (availableNow), which also collects every record's
  downstream offset from its delivery report and writes the runs to the Delta ledger.

Reported per round (a new topic each, in one Spark session; round 1 is cold, later rounds
warm): records/s for each, the share of the offset-ledger wall time spent on the critical path
writing the ledger (the ``offset_syncs`` append, and waiting for the ``replication_progress``
MERGE), and, as the ceiling, how fast Spark's Kafka connector alone hands the same topic to
Python (``connector_read``). The Spark session start and the creation of empty ledger tables
are setup, not timed; the query start, topic checks, replica creation, copying and ledger
writes are timed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from ledger.config import ClusterConfig, Config, config_from_mapping, load_config
from ledger.schemas import OFFSET_SYNCS
from ledger.tables import Ledger
from pipelines import kafka_admin

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def fill(cluster: ClusterConfig, topic: str, records: int, partitions: int, size: int) -> float:
    """Produce ``records`` values of ``size`` bytes round-robin over the partitions; seconds."""
    producer = Producer(cluster.client_config(**{
        "linger.ms": 50, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
        "enable.idempotence": True}))
    value = os.urandom(size)
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0, "could not fill the source topic"
    return time.perf_counter() - started


def plain_loop(source: ClusterConfig, target: ClusterConfig, topic: str, replica: str,
               records: int, partitions: int) -> float:
    """Copy ``topic`` to ``replica`` with one consumer and one producer; seconds taken."""
    started = time.perf_counter()
    consumer = Consumer(source.client_config(**{
        "group.id": f"bench-plain-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "isolation.level": "read_committed", "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 10_485_760}))
    producer = Producer(target.client_config(**{
        "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
        "enable.idempotence": True, "acks": "all"}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    copied = 0
    while copied < records:
        for msg in consumer.consume(10_000, timeout=1.0):
            if msg.error():
                continue
            while True:
                try:
                    producer.produce(replica, value=msg.value(), key=msg.key(),
                                     headers=msg.headers(), timestamp=msg.timestamp()[1],
                                     partition=msg.partition())
                    break
                except BufferError:
                    producer.poll(0.05)
            copied += 1
        producer.poll(0)
    assert producer.flush(120) == 0, "plain loop: deliveries outstanding"
    consumer.close()
    return time.perf_counter() - started


def _embedded_config(workdir: Path) -> Config:
    from pipelines.clusters import free_port

    raw = {
        "clusters": {a: {"bootstrap.servers": f"127.0.0.1:{free_port()}"} for a in ("P", "B")},
        "flows": {"P->B": True},
        "embedded": {"data.dir": str(workdir / "clusters")},
    }
    return config_from_mapping(raw, path=str(workdir / "offset-ledger.yaml"))


def connector_read(spark, source: ClusterConfig, topic: str) -> float:
    """Seconds for Spark's Kafka connector alone to hand ``topic`` to Python as Arrow batches.

    The same source options and columns as the replication job, into a sink that only counts
    rows: no producing, no ledger. It bounds what any Spark-connector-based copier can reach
    on this machine.
    """
    import pyarrow as pa

    from pipelines.replicate.source import source_options
    from pipelines.replicate.transforms import kafka_records

    def count(batches):
        yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})

    reader = spark.read.format("kafka").options(**source_options(source, [topic]))
    started = time.perf_counter()
    rows = kafka_records(reader.load()).mapInArrow(count, "n long").collect()
    seconds = time.perf_counter() - started
    assert sum(r[0] for r in rows) > 0, "the connector read nothing"
    return seconds


def one_round(spark, base: Config, workdir: Path, args: argparse.Namespace, n: int) -> dict:
    """Fill a new topic, copy it with the plain loop, then with ``replicate_once``."""
    from pipelines.replicate.job import replicate_once

    p, b = base.cluster("P"), base.cluster("B")
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    kafka_admin.create_topic(p, topic, args.partitions)
    plain_replica = f"plain.{topic}"
    kafka_admin.create_topic(b, plain_replica, args.partitions)
    print(f"round {n}: filling {topic}: {args.records:,} records of {args.size} bytes over "
          f"{args.partitions} partitions ...", flush=True)
    fill_s = fill(p, topic, args.records, args.partitions, args.size)

    print(f"round {n}: plain confluent-kafka consume->produce loop ...", flush=True)
    plain_s = plain_loop(p, b, topic, plain_replica, args.records, args.partitions)

    config = config_from_mapping({
        "clusters": {a: dict(base.cluster(a).properties) for a in ("P", "B")},
        "flows": {"P->B": {"topics": [topic]}},
        "ledger": {"location": str(workdir / f"ledger-{n}"),
                   "streaming.checkpoint.location": str(workdir / f"streaming-{n}")},
    }, path=str(workdir / "offset-ledger.yaml"))
    ledger = Ledger(spark, config.ledger_location)
    ledger.init()  # setup: a deployment creates its tables once
    print(f"round {n}: offset-ledger replicate_once ...", flush=True)
    result = replicate_once(spark, config, "P->B",
                            max_records_per_batch=args.max_records_per_batch)

    replica_end = sum(hi for _, hi in kafka_admin.watermarks(
        b, f"P.{topic}", args.partitions).values())
    recorded = ledger.read(OFFSET_SYNCS).agg({"length": "sum"}).first()[0]
    assert result.records_copied == args.records == replica_end == recorded, (
        result.records_copied, replica_end, recorded)
    print(f"round {n}: Spark Kafka connector read alone ...", flush=True)
    read_s = connector_read(spark, p, topic)
    return {
        "round": n, "fill_records_per_s": round(args.records / fill_s),
        "plain_loop_seconds": round(plain_s, 2),
        "plain_loop_records_per_s": round(args.records / plain_s),
        "offset_ledger_seconds": round(result.wall_seconds, 2),
        "offset_ledger_records_per_s": round(args.records / result.wall_seconds),
        "ratio": round(plain_s / result.wall_seconds, 3),
        "copy_seconds": round(result.copy_seconds, 2),
        "batches": result.batches, "runs_written": result.runs_written,
        "ledger_write_seconds": round(result.ledger_seconds, 2),
        "ledger_share": round(result.ledger_seconds / result.wall_seconds, 4),
        "connector_read_seconds": round(read_s, 2),
        "connector_read_records_per_s": round(args.records / read_s),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def run(args: argparse.Namespace) -> dict:
    from pipelines.spark import get_spark

    workdir = Path(tempfile.mkdtemp(prefix="bench-replication-"))
    clusters = None
    if args.config:
        base = load_config(args.config)
    else:
        from pipelines.clusters import EmbeddedClusters

        base = _embedded_config(workdir)
        clusters = EmbeddedClusters(base)
        clusters.up()
    try:
        spark = get_spark("offset-ledger-bench")
        rounds = [one_round(spark, base, workdir, args, n) for n in range(1, args.rounds + 1)]
        spark.stop()
        last = rounds[-1]  # warm when there are 2 or more rounds
        return {"records": args.records, "size_bytes": args.size,
                "partitions": args.partitions, "cores": os.cpu_count(),
                "summary_round": last["round"],
                **{k: last[k] for k in ("plain_loop_records_per_s",
                                        "offset_ledger_records_per_s", "ratio",
                                        "ledger_share", "connector_read_records_per_s")},
                "rounds": rounds}
    finally:
        if clusters is not None:
            clusters.down()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replication", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--max-records-per-batch", type=int, default=None,
                        help="split the Spark run into micro-batches of at most this many")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds on new topics in one Spark session: the first is cold "
                             "(Python workers, JIT), the later ones warm (default 2)")
    parser.add_argument("--config", help="use the running clusters P and B of this config "
                                         "instead of starting embedded ones")
    args = parser.parse_args(argv)
    report = run(args)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"replication-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    for r in report["rounds"]:
        print(f"round {r['round']} ({'cold' if r['round'] == 1 else 'warm'} session, "
              f"load {r['load_average_1m']}): plain loop {r['plain_loop_records_per_s']:,} "
              f"rec/s ({r['plain_loop_seconds']} s); offset-ledger "
              f"{r['offset_ledger_records_per_s']:,} rec/s ({r['offset_ledger_seconds']} s: copy "
              f"{r['copy_seconds']} s, ledger {r['ledger_write_seconds']} s); ratio "
              f"{r['ratio']:.2f}x; ledger share {r['ledger_share']:.1%}; connector read alone "
              f"{r['connector_read_records_per_s']:,} rec/s ({r['connector_read_seconds']} s)")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
