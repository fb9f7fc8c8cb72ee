"""status on the embedded clusters: lag before and after replication, markers, group verdicts."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from ledger.tables import Ledger
from pipelines import cli
from pipelines.devtools.workload import end_transaction, produce
from pipelines.edge import kafka_admin
from pipelines.mm2 import heartbeats
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]
def status(config, *argv: str, capsys) -> tuple[int, dict]:
    capsys.readouterr()
    code = cli.main(["status", *argv, "--format", "json", "--config", config.path])
    return code, json.loads(capsys.readouterr().out)


def partitions(report: dict, flow: str = "P->B") -> dict[tuple[str, int], dict]:
    [found] = [f for f in report["flows"] if f["flow"] == flow]
    return {(p["topic"], p["partition"]): p for p in found["partitions"]}


@pytest.fixture
def flow(spark, make_config, unique):
    """A topic on P (2 partitions, 15 records each) in a one-way flow P->B, ledger ready."""
    topic = unique("st-topic")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    Ledger(spark, config.ledger_location).init()
    kafka_admin.create_topic(config.cluster("P"), topic, 2)
    produce(config.cluster("P"), topic, [f"v{i}" for i in range(30)], 2)
    return config, topic


def test_status_before_and_after_replication(spark, flow, capsys):
    config, topic = flow
    code, report = status(config, "--flow", "P->B", capsys=capsys)
    assert code == 3 and report["exit_code"] == 3 and report["caught_up"] is False
    [f] = report["flows"]
    assert (f["flow"], f["source"], f["target"], f["error"]) == ("P->B", "P", "B", None)
    assert f["caught_up"] is False and f["lag"] == 30 and f["last_run"] is None
    before = partitions(report)
    assert {k: (p["source_end_offset"], p["replicated_to"], p["has_runs"], p["lag"],
                p["caught_up"]) for k, p in before.items()} == {
        (topic, 0): (15, 0, False, 15, False), (topic, 1): (15, 0, False, 15, False)}

    replicate_once(spark, config, "P->B")

    code, report = status(config, "--source", "P", "--target", "B", capsys=capsys)
    assert code == 0 and report["caught_up"] is True
    [f] = report["flows"]
    assert f["caught_up"] is True and f["lag"] == 0 and f["last_run"] is not None
    after = partitions(report)
    assert {k: (p["replica_topic"], p["replicated_to"], p["lag"], p["caught_up"])
            for k, p in after.items()} == {
        (topic, 0): (f"P.{topic}", 15, 0, True), (topic, 1): (f"P.{topic}", 15, 0, True)}
    assert all(p["newest_record_age_seconds"] is not None and p["last_run"] is not None
               for p in after.values())
    assert report["groups"] == []

    # A record written after the pass is lag again, exactly.
    produce(config.cluster("P"), topic, ["late"], 2)
    code, report = status(config, capsys=capsys)
    assert code == 3 and partitions(report)[(topic, 0)]["lag"] == 1
    assert partitions(report)[(topic, 1)]["lag"] == 0

    capsys.readouterr()
    assert cli.main(["status", "--flow", "P->B", "--config", config.path]) == 3
    text = capsys.readouterr().out
    assert "flow P->B: not caught up (1 records behind in 1 of 2 partition(s))" in text


def test_a_tail_of_markers_and_aborted_records_counts_as_caught_up(spark, make_config, unique,
                                                                   capsys):
    topic, group = unique("st-txn"), unique("st-txn-group")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    primary = config.cluster("P")
    kafka_admin.create_topic(primary, topic, 1)
    producer = Producer(primary.client_config(**{"transactional.id": unique("tx")}))
    producer.init_transactions(30)
    for i, commit in enumerate([True, True, False]):  # the last transaction is aborted
        producer.begin_transaction()
        for j in range(4):
            producer.produce(topic, partition=0, value=f"{i}-{j}".encode())
        end_transaction(producer, commit, timeout=30)
    # A read_committed consumer that read the 8 committed records ends past the last marker.
    kafka_admin.alter_group_offsets(primary, group, {(topic, 0): 15})
    replicate_once(spark, config, "P->B")

    code, report = status(config, "--flow", "P->B", "--group", group, capsys=capsys)
    [p] = partitions(report).values()
    # 8 records + 2 commit markers copied as 8 records (runs end at 9, after the last one);
    # 4 aborted records and their abort marker are never copied.
    assert (p["source_end_offset"], p["replicated_to"]) == (15, 9)
    assert p["lag"] == 6 and p["caught_up"] is True and p["only_markers_left"] is True
    [g] = report["groups"]
    assert g["committed"]["P"] == [{"topic": topic, "partition": 0, "offset": 15, "end": 15,
                                    "lag": 0}]
    assert g["ready"] is True and g["verdict"] == "ready to fail over P -> B"
    assert code == 0


def test_group_verdict_waits_then_is_ready(spark, flow, unique, capsys):
    config, topic = flow
    group = unique("st-group")
    replicate_once(spark, config, "P->B")
    produce(config.cluster("P"), topic, [f"w{i}" for i in range(20)], 2)  # 10 per partition
    # The group read 22 records per partition: 7 past where the runs end (15).
    kafka_admin.alter_group_offsets(config.cluster("P"), group, {(topic, 0): 22, (topic, 1): 22})

    code, report = status(config, "--group", group, capsys=capsys)
    assert code == 3
    [g] = report["groups"]
    assert (g["flow"], g["operation"], g["from"], g["to"]) == ("P->B", "failover", "P", "B")
    assert g["ready"] is False and g["verdict"] == "wait: 14 records not yet replicated"
    assert sorted((c["partition"], c["offset"], c["end"], c["lag"])
                  for c in g["committed"]["P"]) == [(0, 22, 25, 3), (1, 22, 25, 3)]
    assert g["committed"]["B"] == [] and g["newest_checkpoint"] is None
    assert {(c["partition"], c["committed"], c["replicated_to"], c["covered"])
            for c in g["coverage"]} == {(0, 22, 15, False), (1, 22, 15, False)}
    assert g["cutoff_ready"] is False

    replicate_once(spark, config, "P->B")
    assert cli.main(["checkpoint", "--flow", "P->B", "--once", "--group", group,
                     "--config", config.path]) == 0
    # Producers keep writing: the flow falls behind, the group stays ready to move.
    produce(config.cluster("P"), topic, [f"x{i}" for i in range(4)], 2)
    code, report = status(config, "--group", group, capsys=capsys)
    [g] = report["groups"]
    assert g["ready"] is True and g["verdict"] == "ready to fail over P -> B"
    assert g["newest_checkpoint"]["partitions"] == 2
    assert g["cutoff_ready"] is False  # the group has 5 records per partition left to read
    assert code == 3  # the flow has not caught up with the 4 new records
    code, _ = status(config, "--group", group, "--groups-only", capsys=capsys)
    assert code == 0

    capsys.readouterr()
    cli.main(["status", "--group", group, "--config", config.path])
    text = capsys.readouterr().out
    assert f"group {group}, flow P->B: ready to fail over P -> B" in text
    assert "newest checkpoint P -> B: " in text and "2 partition(s)" in text


def test_unreachable_cluster_is_reported_not_raised(spark, flow, capsys):
    config, _ = flow
    import yaml

    raw = yaml.safe_load(open(config.path))
    raw["clusters"]["P"]["bootstrap.servers"] = "127.0.0.1:1"
    open(config.path, "w").write(yaml.safe_dump(raw))
    code, report = status(config, "--group", "G", capsys=capsys)
    assert code == 3
    [f] = report["flows"]
    assert "cluster P is unreachable" in f["error"] and f["partitions"] == []
    [g] = report["groups"]
    assert g["verdict"].startswith("cannot tell: cluster P is unreachable")
    # The ACL check names the cluster away too (told by the probe, not after timeouts).
    assert g["acl_check"]["status"] == "unknown"
    assert "cluster P is unreachable" in g["acl_check"]["note"]


def test_end_to_end_latency_from_the_newest_replicated_heartbeat(spark, make_config, unique,
                                                                  capsys):
    topic = unique("st-hb")
    config = make_config(flows={"P->B": {"topics": [topic, "heartbeats"]}})
    kafka_admin.create_topic(config.cluster("P"), topic, 1)
    produce(config.cluster("P"), topic, ["a", "b"], 1)
    heartbeats.emit(config, "P->B")  # (B, P) on P's heartbeats, as MM2's one-way pair does
    replicate_once(spark, config, "P->B")  # copies it to B's P.heartbeats
    _, report = status(config, "--flow", "P->B", capsys=capsys)
    [f] = report["flows"]
    assert f["heartbeat_latency_seconds"] is not None
    assert 0 <= f["heartbeat_latency_seconds"] < 600
    assert partitions(report)[(topic, 0)]["caught_up"] is True
    capsys.readouterr()
    cli.main(["status", "--flow", "P->B", "--config", config.path])
    assert "end-to-end latency" in capsys.readouterr().out


def test_failback_verdict_follows_the_reverse_flows_runs(spark, make_config, unique, capsys):
    topic, group = unique("st-back"), unique("st-back-group")
    config = make_config(flows={
        "P->B": {"topics": [topic]},
        "B->P": {"topics": [topic], "reverse.checkpointed.topics": [f"P.{topic}"]}})
    primary, backup = config.cluster("P"), config.cluster("B")
    kafka_admin.create_topic(primary, topic, 1)
    produce(primary, topic, [f"v{i}" for i in range(10)], 1)
    replicate_once(spark, config, "P->B")
    # G consumed on B after a failover, and its offset is ahead of what the runs record (a
    # copy the ledger has not recorded yet): failing back must wait for the runs.
    kafka_admin.alter_group_offsets(backup, group, {(f"P.{topic}", 0): 12})

    code, report = status(config, "--flow", "B->P", "--group", group, capsys=capsys)
    [g] = report["groups"]
    assert (g["operation"], g["from"], g["to"]) == ("failback", "B", "P")
    assert g["coverage"] == [{"direction": "reverse", "topic": f"P.{topic}", "partition": 0,
                              "committed": 12, "replicated_to": 10, "covered": False}]
    assert g["verdict"] == "wait: 2 records not yet replicated" and code == 3
    # The move's ACL check, reported as what it is on clusters without an authorizer.
    assert g["acl_check"]["status"] == "no_authorizer" and g["acl_check"]["cluster"] == "P"

    produce(primary, topic, [f"w{i}" for i in range(5)], 1)
    replicate_once(spark, config, "P->B")
    code, report = status(config, "--flow", "B->P", "--group", group, capsys=capsys)
    [g] = report["groups"]
    assert g["verdict"] == "ready to fail back B -> P" and g["coverage"][0]["replicated_to"] == 15
    assert code == 0
