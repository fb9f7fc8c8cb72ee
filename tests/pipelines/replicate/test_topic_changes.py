"""Topic changes while replicating: timestamps, partition growth, configs, a broken topic,
topics removed and recreated while the job was stopped."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from ledger.store import OffsetSyncStore
from ledger.tables import Ledger
from pipelines.edge import kafka_admin
from pipelines.replicate import topics
from pipelines.replicate.job import replicate_continuously, replicate_once
from pipelines.replicate.replicator import FlowReplicator
from tests.pipelines.replicate.kafka_io import (
    assert_runs_cover,
    assert_runs_exact,
    create,
    delete,
    ledger_runs,
    produce,
    read_all,
    recreate,
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

    # Streaming: a new topic and grown partitions picked up at the next refresh.
    other = f"{grow}-new"
    stop = threading.Event()
    job = threading.Thread(target=replicate_continuously, args=(spark, config, "P->B"),
                           kwargs={"interval_s": 0.5, "refresh_s": 2.0, "stop": stop,
                                   "commit_interval_s": 1.0})
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


def test_removed_and_recreated_topics_after_a_stop(spark, make_config, unique):
    gone, again, longer, stays = (unique(n) for n in ("gone", "again", "longer", "stays"))
    config = make_config(flows={"P->B": {"topics": [gone, again, longer, f"{stays}.*"]}})
    p, b = config.cluster("P"), config.cluster("B")
    for topic in (gone, again, longer, stays):
        create(p, topic, 2)
        produce(p, topic, sample(2, 10, topic[-4:]))
    first = replicate_once(spark, config, "P->B")
    assert first.errors == {} and first.records_copied == 80

    # While no job runs: one topic removed, two recreated (one shorter than what was copied,
    # one longer: offsets alone cannot tell), one added, more records in the one that stays.
    delete(p, gone)
    for topic, per_partition in ((again, 3), (longer, 15)):
        delete(p, topic)
        recreate(p, topic, 2)
        produce(p, topic, sample(2, per_partition, "re"))
    added = f"{stays}-new"
    create(p, added, 1)
    produce(p, added, sample(1, 4, "new"))
    produce(p, stays, sample(2, 5, "more"))

    second = replicate_once(spark, config, "P->B")

    # The removed topic is simply no longer replicated; the recreated ones are refused with
    # what to do (resuming at offset 10 would skip records and mix two topics' runs).
    assert sorted(second.errors) == sorted([again, longer]) and not second.caught_up
    assert "ends at offset 3, below offset 10" in second.errors[again]
    assert "holds another record at offset 9 than the one copied" in second.errors[longer]
    for topic in (again, longer):
        assert "deleted and recreated" in second.errors[topic]
        assert f"delete the replica topic P.{topic} on B" in second.errors[topic]
        assert all(len(records) == 10 for records in read_all(b, f"P.{topic}", 2).values())
    assert second.records_copied == 10 + 4
    _check_exact(spark, config, p, b, stays, 2)
    _check_exact(spark, config, p, b, added, 1)

    # Doing what the error says: the replicas go, the next pass starts a new epoch for each.
    for topic in (again, longer):
        delete(b, f"P.{topic}")
    third = replicate_once(spark, config, "P->B")
    assert third.errors == {} and third.caught_up and third.records_copied == 6 + 30
    ledger = Ledger(spark, config.ledger_location)
    store = OffsetSyncStore.load(ledger, "P->B", topics={again, longer})
    for topic, per_partition in ((again, 3), (longer, 15)):
        source, replica = read_all(p, topic, 2), read_all(b, f"P.{topic}", 2)
        for partition in range(2):
            assert list(replica[partition].values()) == list(source[partition].values())
        runs = ledger_runs(spark, config, "P->B", topic, run_id=third.run_id)
        assert_runs_exact(runs, source, replica)
        assert_runs_cover(runs, source)
        # Only the new epoch translates: the old topic's runs (10 records) no longer count.
        for partition in range(2):
            assert store.forward(topic, partition, 3).offset == 3
            assert store.reverse(topic, partition, per_partition).offset == per_partition


def test_a_topic_recreated_under_a_running_job_is_refused_before_its_next_copy(
        spark, make_config, unique):
    topic = unique("under")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, topic, 1)
    produce(p, topic, sample(1, 10, "old"))
    # The batches of a running job, driven one by one (no refresh between them).
    replicator = FlowReplicator(spark, config, "P->B")
    try:
        replicator.refresh()
        ends = replicator.end_offsets()
        assert replicator.run_batch(ends, ends) == 1 and replicator.positions[(topic, 0)] == 10
        # Recreated between two batches, longer than what was copied: offsets cannot tell.
        delete(p, topic)
        recreate(p, topic, 1)
        produce(p, topic, sample(1, 15, "new"))
        ends = replicator.end_offsets()
        assert ends[(topic, 0)] == 15
        assert replicator.run_batch(ends, ends) == 0  # nothing copied
    finally:
        replicator.close()
    message = replicator.result.errors[topic]
    assert "holds another record at offset 9" in message and "delete the replica topic" in message
    assert len(read_all(b, f"P.{topic}", 1)[0]) == 10
