"""Delivery latency of a sparse load spread over many partitions, by producers sharing them.

``python -m bench.produce_spread --bootstrap 127.0.0.1:29092 --topic spread --partitions 1000
--rate 1000 --seconds 30 --producers 1,4``

The question it answers (bench/README.md, "Against MirrorMaker 2's own exactly-once"): does one
librdkafka producer with the replicator's settings (idempotent, so at most 5 requests in flight
per connection, and one partition per produce request: librdkafka issue #1700) keep up with a
load of about one record per partition per request, or would splitting a task's partitions over
several producers (each its own connections) lower the latency? Each producer count writes
``--rate`` records/s round-robin (stride 7919) over the topic's partitions, partition ``p`` by
producer ``p % K``, and reports the send-to-delivery-report latency. The topic must exist with
``--partitions`` partitions; run it twice to see a warm broker (the first pass over fresh
partitions pays for their first writes).
"""

from __future__ import annotations

import argparse
import json
import time

from pipelines.replicate.sink import PRODUCER_DEFAULTS, PRODUCER_REQUIRED


def measure(bootstrap: str, topic: str, partitions: int, rate: int, seconds: float,
            producers: int) -> dict[str, float]:
    """One pass: ``producers`` producers, ``rate`` records/s for ``seconds``."""
    from confluent_kafka import Producer

    conf = {**PRODUCER_DEFAULTS, "bootstrap.servers": bootstrap, **PRODUCER_REQUIRED}
    clients = [Producer(conf) for _ in range(producers)]
    latencies: list[float] = []

    def delivered(sent: float):
        return lambda err, _msg: None if err else latencies.append(time.monotonic() - sent)

    for client in clients:  # connected and holding a producer id before the clock starts
        client.produce(topic, b"x", partition=0)
        client.flush(30)
    total, start, n = int(rate * seconds), time.monotonic(), 0
    while n < total:
        wait = start + n / rate - time.monotonic()
        if wait > 0:
            for client in clients:
                client.poll(0)
            time.sleep(min(0.001, wait))
            continue
        partition = (n * 7919) % partitions
        client = clients[partition % producers]
        client.produce(topic, b"v" * 100, partition=partition,
                       on_delivery=delivered(time.monotonic()))
        client.poll(0)
        n += 1
    for client in clients:
        client.flush(60)
    return {"producers": producers, "delivered": len(latencies), **quantiles_ms(latencies)}


def quantiles_ms(latencies: list[float]) -> dict[str, float]:
    """p50, p99 and max of ``latencies`` (seconds), in ms rounded to 0.1 (sorts them)."""
    latencies.sort()

    def q(f: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(f * len(latencies)))] * 1000, 1)

    return {"p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": q(1.0)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--producers", default="1,4", help="comma-separated producer counts")
    args = parser.parse_args(argv)
    for k in (int(x) for x in args.producers.split(",")):
        print(json.dumps(measure(args.bootstrap, args.topic, args.partitions, args.rate,
                                 args.seconds, k)), flush=True)


if __name__ == "__main__":
    main()
