"""Replication on the embedded clusters: records copied exactly, every run exact, no loops."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from ledger.schemas import OFFSET_SYNCS, REPLICATION_PROGRESS
from ledger.tables import Ledger
from pipelines.devtools.workload import end_transaction
from pipelines.edge import kafka_admin
from pipelines.replicate import topics
from pipelines.replicate.job import replicate_once
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


def test_records_copied_exactly_and_every_run_exact(spark, make_config, unique):
    orders, events = unique("orders"), unique("events")
    config = make_config(flows={"P->B": {"topics": [orders, events]}, "B->P": True})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, orders, 3, **{"retention.ms": "86400000", "cleanup.policy": "delete"})
    create(p, events, 2)
    produce(p, orders, sample(3, 40, "a"))
    produce(p, events, sample(2, 25, "b"))

    first = replicate_once(spark, config, "P->B")

    assert sorted(t.topic for t in first.topics) == sorted([orders, events])
    assert first.records_copied == 3 * 40 + 2 * 25
    assert set(first.topic_sync.created) == {f"P.{orders}", f"P.{events}"}
    replicas = kafka_admin.list_topics(b)
    assert replicas[f"P.{orders}"] == 3 and replicas[f"P.{events}"] == 2
    assert kafka_admin.explicit_topic_configs(b, f"P.{orders}") == {
        "retention.ms": "86400000", "cleanup.policy": "delete"}

    # A config change on the source and more records: both reach the replica on the next run.
    kafka_admin.alter_topic_configs(p, orders, {"retention.ms": "172800000",
                                                "compression.type": "lz4"})
    produce(p, orders, sample(3, 10, "c"))
    second = replicate_once(spark, config, "P->B")
    assert second.records_copied == 30
    assert kafka_admin.explicit_topic_configs(b, f"P.{orders}")["retention.ms"] == "172800000"
    assert kafka_admin.explicit_topic_configs(b, f"P.{orders}")["compression.type"] == "lz4"

    for topic, partitions in ((orders, 3), (events, 2)):
        source = read_all(p, topic, partitions)
        replica = read_all(b, f"P.{topic}", partitions)
        # Record by record: same partition, order, key, value (nulls), headers and timestamp.
        for partition in range(partitions):
            assert list(replica[partition].values()) == list(source[partition].values())
        assert any(r.value is None for part in replica.values() for r in part.values())
        runs = ledger_runs(spark, config, "P->B", topic)
        assert_runs_exact(runs, source, replica)
        assert_runs_cover(runs, source)
        # One dense run per partition and batch: nothing to split in a plain topic.
        assert len(runs) == partitions * (2 if topic == orders else 1)

    ledger = Ledger(spark, config.ledger_location)
    syncs = ledger.read(OFFSET_SYNCS).collect()
    batches = sorted({(r["written_at"], r["run_id"], r["batch_id"]) for r in syncs})
    assert len(batches) == 2 and batches[0][0] < batches[1][0]
    assert {r["replica_topic"] for r in syncs} == {f"P.{orders}", f"P.{events}"}
    progress = {(r["topic"], r["partition"]): r
                for r in ledger.read(REPLICATION_PROGRESS).collect()}
    assert len(progress) == 5
    row = progress[(orders, 1)]
    assert (row["last_upstream_offset"], row["next_upstream_offset"]) == (49, 50)
    assert (row["source_end_offset"], row["lag"]) == (50, 0)
    assert row["record_age_ms"] > 0
    assert second.progress[(orders, 1)].lag == 0


def test_bidirectional_flows_do_not_loop(spark, make_config, unique):
    pay = unique("pay")
    config = make_config(flows={"P->B": {"topics": [f"{pay}.*", f"B\\.{pay}.*"]},
                                "B->P": {"topics": [f"{pay}.*", f"P\\.{pay}.*"]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, f"{pay}-p", 1)
    create(b, f"{pay}-b", 1)
    produce(p, f"{pay}-p", sample(1, 5, "p"))
    produce(b, f"{pay}-b", sample(1, 5, "b"))

    there = replicate_once(spark, config, "P->B")
    back = replicate_once(spark, config, "B->P")

    assert [t.topic for t in there.topics] == [f"{pay}-p"]
    # B->P sees P.<pay>-p on B (allowlisted!) but it came from P: never copied back.
    assert [t.topic for t in back.topics] == [f"{pay}-b"]
    on_p, on_b = kafka_admin.list_topics(p), kafka_admin.list_topics(b)
    assert f"B.{pay}-b" in on_p and f"P.{pay}-p" in on_b
    # Nor does P->B now pick up B.<pay>-b on P (allowlisted too): it came from B.
    assert [t.topic for t in topics.plan_topics(config, config.flow("P->B"))] == [f"{pay}-p"]
    assert not [t for t in on_p if t.startswith(f"B.P.{pay}") or t.startswith(f"P.B.{pay}")]
    assert not [t for t in on_b if t.startswith(f"P.B.{pay}") or t.startswith(f"B.P.{pay}")]
    assert read_all(b, f"P.{pay}-p", 1) == read_all(p, f"{pay}-p", 1)


def test_transactional_source_splits_runs_that_stay_exact(spark, make_config, unique):
    txn = unique("txn")
    config = make_config(flows={"P->B": {"topics": [txn]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, txn, 2)
    producer = Producer(p.client_config(**{"transactional.id": unique("tx")}))
    producer.init_transactions(30)
    for i in range(6):
        producer.begin_transaction()
        for part in range(2):
            for j in range(3):
                producer.produce(txn, partition=part, key=f"{i}-{j}".encode(),
                                 value=f"{'aborted' if i % 2 else 'kept'}-{i}-{j}".encode(),
                                 timestamp=int(time.time() * 1000) - 60_000 + i)
        end_transaction(producer, commit=not i % 2, timeout=30)

    result = replicate_once(spark, config, "P->B")

    source = read_all(p, txn, 2)
    replica = read_all(b, f"P.{txn}", 2)
    assert all(r.value.startswith(b"kept") for part in source.values() for r in part.values())
    for part in range(2):
        assert list(replica[part].values()) == list(source[part].values())
    runs = ledger_runs(spark, config, "P->B", txn)
    assert_runs_exact(runs, source, replica)
    assert_runs_cover(runs, source)
    assert len([r for r in runs if r[0] == 0]) == 3  # three committed transactions, split

    # Commit markers (one per transaction) and aborted records leave upstream gaps.
    assert result.records_copied == 18


@pytest.mark.parametrize("ledger_writes", ["auto", "spark"])  # delta-rs commits, Spark's
def test_several_batches_record_every_run_and_final_progress(spark, make_config, unique,
                                                             ledger_writes):
    # Batch k's progress MERGE runs in the background while batch k+1 copies: after the run,
    # progress must show the last batch, and offset_syncs every batch's runs.
    many = unique("many")
    config = make_config(flows={"P->B": {"topics": [many]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, many, 2)
    produce(p, many, sample(2, 60, "m"))

    result = replicate_once(spark, config, "P->B", max_records_per_batch=40,
                            ledger_writes=ledger_writes)

    assert result.batches >= 3 and result.records_copied == 120
    source, replica = read_all(p, many, 2), read_all(b, f"P.{many}", 2)
    runs = ledger_runs(spark, config, "P->B", many)
    assert_runs_exact(runs, source, replica)
    assert_runs_cover(runs, source)
    ledger = Ledger(spark, config.ledger_location)
    batch_ids = {r["batch_id"] for r in ledger.read(OFFSET_SYNCS).collect()}
    progress = {r["partition"]: r for r in ledger.read(REPLICATION_PROGRESS).collect()}
    assert progress[0]["batch_id"] == progress[1]["batch_id"] == max(batch_ids)
    assert [(progress[i]["next_upstream_offset"], progress[i]["lag"]) for i in (0, 1)] == \
        [(60, 0), (60, 0)]


def test_a_pass_with_nothing_to_do_starts_no_jvm(spark, make_config, unique, monkeypatch,
                                                 capsys):
    from pipelines import cli
    from pipelines import spark as spark_module

    topic = unique("idle")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    create(config.cluster("P"), topic, 2)
    produce(config.cluster("P"), topic, sample(2, 5, "idle"))
    assert replicate_once(spark, config, "P->B").records_copied == 10

    def no_jvm(*args, **kwargs):
        raise AssertionError("a pass with nothing to copy started Spark")

    monkeypatch.setattr(spark_module, "get_spark", no_jvm)
    capsys.readouterr()
    assert cli.main(["replicate", "--flow", "P->B", "--once", "--config", config.path]) == 0
    assert "0 record(s) copied" in capsys.readouterr().out

    # New records: with Spark's copy tasks the pass needs a JVM, and asks for it.
    produce(config.cluster("P"), topic, sample(2, 1, "more"))
    with pytest.raises(AssertionError, match="started Spark"):
        cli.main(["replicate", "--flow", "P->B", "--once", "--executor", "spark", "--config",
                  config.path])
    # Local copy workers and delta-rs commits need none.
    assert cli.main(["replicate", "--flow", "P->B", "--once", "--config", config.path]) == 0
    assert "2 record(s) copied, 2 run(s) recorded" in capsys.readouterr().out
    assert ledger_runs(spark, config, "P->B", topic) == [(0, 0, 0, 5), (0, 5, 5, 1),
                                                         (1, 0, 0, 5), (1, 5, 5, 1)]
