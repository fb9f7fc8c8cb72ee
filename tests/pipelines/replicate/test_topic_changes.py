"""Topic changes while replicating: timestamps, partition growth, configs, a broken topic."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from pipelines import kafka_admin
from pipelines.replicate import topics
from pipelines.replicate.job import replicate_continuously, replicate_once
from tests.pipelines.replicate.kafka_io import (
    assert_runs_cover,
    assert_runs_exact,
    create,
    ledger_runs,
    produce,
    read_all,
    sample,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.e2e]


def _check_exact(spark, config, p, b, topic, partitions):
    source, replica = read_all(p, topic, partitions), read_all(b, f"P.{topic}", partitions)
    for partition in range(partitions):
        assert list(replica[partition].values()) == list(source[partition].values())
    runs = ledger_runs(spark, config, "P->B", topic)
    assert_runs_exact(runs, source, replica)
    assert_runs_cover(runs, source)
    return source


def test_create_time_zero_kept_and_log_append_time_source_gives_source_timestamps(
        spark, make_config, unique):
    zero, appended = unique("zero"), unique("append")
    config = make_config(flows={"P->B": {"topics": [zero, appended]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, zero, 1, **{"retention.ms": "-1"})
    create(p, appended, 1, **{"message.timestamp.type": "LogAppendTime"})
    # librdkafka would turn timestamp 0 into "now" on the source too: kafka-python writes it.
    from kafka import KafkaProducer

    zero_producer = KafkaProducer(bootstrap_servers=p.bootstrap_servers, acks="all")
    for key, value, headers, ts in ((b"a", b"1", None, 5), (b"b", b"2", [("h", b"x")], 0),
                                    (b"c", None, None, 0), (None, b"4", None, 7)):
        zero_producer.send(zero, value=value, key=key, headers=headers, partition=0,
                           timestamp_ms=ts).get(timeout=30)
    zero_producer.close()
    produce(p, appended, sample(1, 10, "l"))

    result = replicate_once(spark, config, "P->B")

    assert result.errors == {} and result.records_copied == 14
    source = _check_exact(spark, config, p, b, zero, 1)
    assert [r.timestamp for r in source[0].values()] == [5, 0, 0, 7]
    # The replica of a LogAppendTime topic is CreateTime (MM2 never copies the type) and
    # holds the source's append times.
    assert "message.timestamp.type" not in kafka_admin.explicit_topic_configs(
        b, f"P.{appended}")
    _check_exact(spark, config, p, b, appended, 1)


def test_partition_increase_once_then_continuous(spark, make_config, unique):
    grow = unique("grow")
    config = make_config(flows={"P->B": {"topics": [f"{grow}.*"]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, grow, 3)
    produce(p, grow, sample(3, 20, "a"))
    assert replicate_once(spark, config, "P->B").records_copied == 60

    topics.grow_partitions(p, grow, 5)
    produce(p, grow, sample(5, 10, "b"))
    second = replicate_once(spark, config, "P->B")
    assert second.errors == {} and second.records_copied == 50
    assert second.topic_sync.grown == {f"P.{grow}": (3, 5)}
    assert kafka_admin.list_topics(b)[f"P.{grow}"] == 5
    _check_exact(spark, config, p, b, grow, 5)

    # Continuous: a new topic and grown partitions picked up at the next refresh.
    other = f"{grow}-new"
    stop = threading.Event()
    job = threading.Thread(target=replicate_continuously, args=(spark, config, "P->B"),
                           kwargs={"interval_s": 0.5, "refresh_s": 2.0, "stop": stop})
    job.start()
    try:
        topics.grow_partitions(p, grow, 7)
        create(p, other, 2)
        produce(p, grow, sample(7, 5, "c"))
        produce(p, other, sample(2, 5, "d"))
        deadline = time.monotonic() + 120
        while True:
            done = kafka_admin.list_topics(b).get(f"P.{grow}") == 7 and all(
                len(ledger_runs(spark, config, "P->B", t)) > 0 for t in (other,)) and \
                {r[0] for r in ledger_runs(spark, config, "P->B", grow)} >= {5, 6}
            if done:
                break
            assert job.is_alive() and time.monotonic() < deadline, "changes not replicated"
            time.sleep(1)
    finally:
        stop.set()
        job.join(60)
    _check_exact(spark, config, p, b, grow, 7)
    _check_exact(spark, config, p, b, other, 2)


def test_a_broken_topic_beside_a_healthy_one(spark, make_config, unique):
    healthy = unique("ok")
    # The replica name "P." + 248 characters is longer than Kafka's 249: it cannot exist.
    broken = ("b" + unique("x").replace("-", "")).ljust(248, "x")
    config = make_config(flows={"P->B": {"topics": [healthy, broken]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, healthy, 2)
    create(p, broken, 1)
    produce(p, healthy, sample(2, 15, "h"))
    producer = Producer(p.client_config())
    producer.produce(broken, b"v", partition=0)
    assert producer.flush(30) == 0

    result = replicate_once(spark, config, "P->B")

    assert list(result.errors) == [broken]  # reported; the healthy topic went on
    assert result.records_copied == 30 and not result.caught_up
    _check_exact(spark, config, p, b, healthy, 2)
    assert ledger_runs(spark, config, "P->B", broken) == []


def test_excluded_configs_never_reach_the_replica(spark, make_config, unique):
    topic = unique("cfg")
    config = make_config(flows={"P->B": {"topics": [topic]}},
                         config={"properties": {"exclude": "retention\\.ms,min\\.insync.*"}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, topic, 1, **{"retention.ms": "86400000", "min.insync.replicas": "1",
                           "cleanup.policy": "delete",
                           "message.timestamp.type": "LogAppendTime"})
    replicate_once(spark, config, "P->B")
    # A replaced exclude list: message.timestamp.type is copied now, retention.ms is not.
    assert kafka_admin.explicit_topic_configs(b, f"P.{topic}") == {
        "cleanup.policy": "delete", "message.timestamp.type": "LogAppendTime"}
