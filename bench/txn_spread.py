"""Transactions of a sparse load spread over many partitions: librdkafka against a client that
packs a broker's partitions into one produce request.

``python -m bench.txn_spread --bootstrap 127.0.0.1:29092 --topic spread --partitions 1000
--rate 1000 --seconds 30 --clients confluent,kafka-python,kafka-python,confluent
[--broker-pid PID]``

The question it answers (bench/README.md, "Scale: 1,000 partitions, without the harness's
stall"): at one record per partition per transaction, how much of an exactly-once copy's latency
and of the target broker's CPU is librdkafka sending one partition per produce request (its
issue #1700), and what would a second produce path that batches per broker (kafka-python's) buy?
(Measured: it does not pay; bench/README.md.) Each pass writes ``--rate`` records/s round-robin
(stride 7919) over the topic's partitions, in transactions of ``--interval-ms`` (begin, the
records due in it, commit), as a streaming copy task does. A record's latency is from the moment
it was due to the return of its transaction's commit (readable to ``read_committed`` consumers).
Reported per pass: p50, p99, max, transactions, the producer process's CPU (every thread:
librdkafka's and kafka-python's senders run in it) and, with ``--broker-pid``, the broker's CPU,
each over the measured window.

Before the clock every pass writes 5 records of 1 KiB to every partition, so that the broker
has written each partition's first index entries (otherwise all partitions cross
``index.interval.bytes`` within the same second and the broker stalls: bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid

from bench.common import cpu_seconds
from bench.latency import SCALE_PREFILL as PREFILL_RECORDS
from bench.latency import SCALE_PREFILL_BYTES as PREFILL_BYTES
from bench.produce_spread import quantiles_ms
from pipelines.replicate.sink import PRODUCER_DEFAULTS, PRODUCER_REQUIRED, TRANSACTIONAL_LINGER_MS

CLIENTS = ("confluent", "kafka-python")
STRIDE = 7919


class _Confluent:
    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({**PRODUCER_DEFAULTS, "linger.ms": TRANSACTIONAL_LINGER_MS,
                                  "bootstrap.servers": bootstrap, **PRODUCER_REQUIRED,
                                  "transactional.id": f"txn-spread-{uuid.uuid4().hex[:8]}"})
        self.producer.init_transactions(60)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, value: bytes, partition: int) -> None:
        self.producer.produce(topic, value, partition=partition)
        self.producer.poll(0)

    def commit(self) -> None:
        self.producer.commit_transaction(60)

    def close(self) -> None:
        self.producer.flush(30)


class _KafkaPython:
    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaProducer

        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
            linger_ms=TRANSACTIONAL_LINGER_MS,
            transactional_id=f"txn-spread-{uuid.uuid4().hex[:8]}")
        self.producer.init_transactions()

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, value: bytes, partition: int) -> None:
        self.producer.send(topic, value=value, partition=partition)

    def commit(self) -> None:
        self.producer.commit_transaction()

    def close(self) -> None:
        self.producer.close(30)


def prefill(bootstrap: str, topic: str, partitions: int) -> None:
    """``PREFILL_RECORDS`` records of ``PREFILL_BYTES`` to every partition, delivered."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **PRODUCER_REQUIRED})
    for partition in range(partitions):
        for _ in range(PREFILL_RECORDS):
            producer.produce(topic, b"p" * PREFILL_BYTES, partition=partition)
        producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"prefill of {topic} not delivered")


def measure(bootstrap: str, topic: str, partitions: int, rate: int, seconds: float,
            interval_ms: float, client: str, broker_pid: int | None = None) -> dict:
    """One pass of ``client`` (one of CLIENTS): ``rate`` records/s for ``seconds`` in
    transactions of ``interval_ms``."""
    if client not in CLIENTS:
        raise ValueError(f"unknown client {client!r}: choose from {', '.join(CLIENTS)}")
    prefill(bootstrap, topic, partitions)
    producer = _Confluent(bootstrap) if client == "confluent" else _KafkaPython(bootstrap)
    producer.begin()  # connected to every partition leader before the clock starts
    for partition in range(partitions):
        producer.send(topic, b"w", partition)
    producer.commit()
    latencies: list[float] = []
    total, n, transactions = int(rate * seconds), 0, 0
    me = os.getpid()
    cpu, broker_cpu = cpu_seconds(me), cpu_seconds(broker_pid) if broker_pid else None
    start = time.monotonic()
    while n < total:
        producer.begin()
        ends = time.monotonic() + interval_ms / 1000
        due: list[float] = []
        while n < total and time.monotonic() < ends:
            wait = start + n / rate - time.monotonic()
            if wait > 0:
                time.sleep(min(0.001, wait))
                continue
            producer.send(topic, b"v" * 100, (n * STRIDE) % partitions)
            due.append(start + n / rate)
            n += 1
        producer.commit()
        transactions += 1
        done = time.monotonic()
        latencies.extend(done - t for t in due)
    wall = time.monotonic() - start
    cpu = cpu_seconds(me) - cpu
    if broker_pid:
        broker_cpu = cpu_seconds(broker_pid) - broker_cpu
    producer.close()
    return {"client": client, "committed": len(latencies), "transactions": transactions,
            **quantiles_ms(latencies), "cores": round(cpu / wall, 3),
            "broker_cores": None if broker_cpu is None else round(broker_cpu / wall, 3)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True, help="an existing topic of --partitions")
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--interval-ms", type=float, default=50,
                        help="a transaction's length (50: a 500-partition task's fetch wait)")
    parser.add_argument("--clients", default="confluent,kafka-python,kafka-python,confluent",
                        help=f"comma-separated passes, each one of {', '.join(CLIENTS)}")
    parser.add_argument("--broker-pid", type=int, help="the broker's pid, for its CPU")
    args = parser.parse_args(argv)
    for client in args.clients.split(","):
        print(json.dumps(measure(args.bootstrap, args.topic, args.partitions, args.rate,
                                 args.seconds, args.interval_ms, client.strip(),
                                 args.broker_pid)), flush=True)


if __name__ == "__main__":
    main()
