"""failover/failback modes on real clusters: continuous with producers running, cutoff,
transaction-marker tails, several groups, IdentityReplicationPolicy, credentials that fail."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from ledger.schemas import OPERATIONS
from ledger.tables import Ledger
from pipelines import cli
from pipelines.devtools.workload import consume, end_transaction, produce
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]
class LiveProducer:
    """Writes ``<prefix>-N`` records round-robin until stopped: producers that keep running."""

    def __init__(self, cluster, topic: str, partitions: int, prefix: str = "live"):
        self.cluster, self.topic, self.partitions = cluster, topic, partitions
        self.prefix = prefix
        self.values: list[str] = []
        self.stop = threading.Event()
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        producer = Producer(self.cluster.client_config(**{"enable.idempotence": True,
                                                          "linger.ms": 5, "log_level": 0}))
        i = 0
        while not self.stop.is_set():
            value = f"{self.prefix}-{i}"
            producer.produce(self.topic, value=value, partition=i % self.partitions)
            self.values.append(value)
            i += 1
            if i % 20 == 0:
                producer.flush(10)
                self.started.set()
                self.stop.wait(0.1)  # a steady trickle, ~200 records/s
        assert producer.flush(30) == 0

    def __enter__(self) -> LiveProducer:
        self.thread.start()
        assert self.started.wait(30)
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(60)


def failover(config, *args: str) -> list[str]:
    return ["failover", *args, "--from", "P", "--to", "B", "--config", config.path]


def test_continuous_failover_and_failback_with_producers_running_and_no_replicator(
        spark, make_config, unique, capsys):
    topic, group = unique("cf-topic"), unique("cf-group")
    config = make_config(flows={"P->B": {"topics": ["cf-.*"]},
                                "B->P": {"topics": ["cf-.*"],
                                         "reverse.checkpointed.topics": [f"P.{topic}"]}})
    primary, backup = config.cluster("P"), config.cluster("B")
    kafka_admin.create_topic(primary, topic, 3)
    first = [f"v{i}" for i in range(300)]
    produce(primary, topic, first, 3)
    with LiveProducer(primary, topic, 3, "on-p") as on_p:
        read = consume(primary, group, [topic], limit=450)  # beyond `first`: live records too
        capsys.readouterr()
        assert cli.main(failover(config, "--group", group, "--catch-up", "--format", "json",
                                 "--timeout", "60")) == 0
        over = json.loads(capsys.readouterr().out)
        assert over["mode"] == "continuous"
        # G moves while producers still write to P; it reads on B what was replicated.
        read += consume(backup, group, over["subscribe"])
    # Producers move to B and keep writing there; P's last records replicate meanwhile.
    kafka_admin.create_topic(backup, topic, 3)
    with LiveProducer(backup, topic, 3, "on-b") as on_b:
        replicate_once(spark, config, "P->B")
        read += consume(backup, group, over["subscribe"])
        assert cli.main(["failback", "--group", group, "--from", "B", "--to", "P",
                         "--catch-up", "--format", "json", "--timeout", "60",
                         "--config", config.path]) == 0
        back = json.loads(capsys.readouterr().out)
        assert back["subscribe"] == [f"B.{topic}", topic]
        read += consume(primary, group, back["subscribe"])
    replicate_once(spark, config, "B->P")
    read += consume(primary, group, back["subscribe"])
    counts = Counter(v for _, v in read)
    produced = first + on_p.values + on_b.values
    assert set(produced) == set(counts), "a record was lost"
    assert sum(counts.values()) == len(produced), "a record was read twice"


def test_failback_over_a_tail_of_transaction_markers_and_aborted_records(
        spark, make_config, unique, capsys):
    config = make_config(flows={"P->B": {"topics": ["tx-.*"]}, "B->P": {"topics": ["tx-.*"]}})
    primary, backup = config.cluster("P"), config.cluster("B")
    topic, group = unique("tx-topic"), unique("tx-group")
    kafka_admin.create_topic(backup, topic, 2)  # producers write on B after a failover
    producer = Producer(backup.client_config(**{"transactional.id": unique("tx"),
                                                "log_level": 0}))
    producer.init_transactions(30)
    for i in range(4):  # committed, aborted, committed, aborted: the tail is aborted + marker
        producer.begin_transaction()
        for j in range(10):
            producer.produce(topic, partition=j % 2, value=f"{i}-{j}".encode())
        end_transaction(producer, commit=not i % 2, timeout=30)
    replicate_once(spark, config, "B->P")
    # A Java consumer commits its position, past the markers: the high watermark.
    high = kafka_offsets.list_offsets(backup, "latest", [(topic, 0), (topic, 1)])
    kafka_admin.alter_group_offsets(backup, group, high)

    capsys.readouterr()
    assert cli.main(["failback", "--group", group, "--from", "B", "--to", "P", "--timeout", "20",
                     "--format", "json", "--config", config.path]) == 0, capsys.readouterr().err
    replica = kafka_offsets.list_offsets(primary, "latest", [(f"B.{topic}", 0), (f"B.{topic}", 1)])
    assert sum(replica.values()) == 20  # the committed records only
    assert kafka_offsets.list_offsets(primary, "committed", group=group) == replica


def test_an_authentication_failure_is_an_error_never_a_disaster(spark, make_config, unique,
                                                               kafka_clusters, capsys):
    config = make_config(clusters={
        "P": {"bootstrap.servers": kafka_clusters.bootstrap("P"),
              "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.username": "ops", "sasl.password": "not-the-secret-4711"},
        "B": {"bootstrap.servers": kafka_clusters.bootstrap("B")}})
    group = unique("auth-group")
    capsys.readouterr()
    assert cli.main(failover(config, "--group", group, "--timeout", "5")) == 2
    err = capsys.readouterr().err
    # A wrong secret is named as what it is, and never offered the disaster way out that an
    # unreachable (lost) primary gets (issue 25).
    assert "error: cluster P: authentication failed for user ops (PLAIN)" in err
    assert "--disaster" not in err and "disaster mode" not in err
    assert "not-the-secret-4711" not in err
    assert kafka_offsets.list_offsets(config.cluster("B"), "committed", group=group) == {}
    assert not Path(config.ledger_location, OPERATIONS).exists()


def test_cutoff_refuses_while_producers_write_then_moves(spark, make_config, unique, capsys):
    config = make_config(flows={"P->B": {"topics": ["co-.*"]}, "B->P": {"topics": ["co-.*"]}})
    primary, backup = config.cluster("P"), config.cluster("B")
    topic, group = unique("co-topic"), unique("co-group")
    kafka_admin.create_topic(primary, topic, 2)
    produce(primary, topic, [f"v{i}" for i in range(100)], 2)
    consume(primary, group, [topic])
    with LiveProducer(primary, topic, 2):
        capsys.readouterr()
        assert cli.main(failover(config, "--group", group, "--cutoff",
                                 "--quiet-seconds", "1")) == 2
        assert "producers still write to P" in capsys.readouterr().err
    assert kafka_offsets.list_offsets(backup, "committed", group=group) == {}
    # Producers stopped; the group has not read the newest records yet: lag is waited for.
    assert cli.main(failover(config, "--group", group, "--cutoff", "--quiet-seconds", "1",
                             "--timeout", "2")) == 3
    assert "a cutoff needs every group to have read everything" in capsys.readouterr().err
    read = consume(primary, group, [topic])
    assert read
    assert cli.main(failover(config, "--group", group, "--cutoff", "--catch-up",
                             "--quiet-seconds", "1", "--format", "json")) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "cutoff"
    replica = kafka_offsets.list_offsets(backup, "latest", [(f"P.{topic}", 0), (f"P.{topic}", 1)])
    assert kafka_offsets.list_offsets(backup, "committed", group=group) == replica


def test_several_groups_one_operation_each_with_the_same_ledger_versions(
        spark, make_config, unique, capsys):
    config = make_config(flows={"P->B": {"topics": ["mg-.*"]}, "B->P": {"topics": ["mg-.*"]}})
    primary, backup = config.cluster("P"), config.cluster("B")
    topic, prefix = unique("mg-topic"), unique("mg-group")
    groups = [f"{prefix}-{i}" for i in range(3)]
    kafka_admin.create_topic(primary, topic, 2)
    produce(primary, topic, [f"v{i}" for i in range(60)], 2)
    for i, group in enumerate(groups):
        consume(primary, group, [topic], limit=10 * (i + 1))
    capsys.readouterr()
    assert cli.main(failover(config, "--group", groups[0], "--group-regex",
                             f"{prefix}-[12]", "--catch-up", "--format", "json")) == 0
    ops = json.loads(capsys.readouterr().out)["operations"]
    assert [o["group"] for o in ops] == groups
    assert len({json.dumps(o["ledger_versions"], sort_keys=True) for o in ops}) == 1
    for group in groups:
        committed = kafka_offsets.list_offsets(primary, "committed", group=group)
        # A partition G never committed starts at the replica's log start.
        assert kafka_offsets.list_offsets(backup, "committed", group=group) == {
            (f"P.{topic}", p): committed.get((topic, p), 0) for p in (0, 1)}
    rows = Ledger(spark, config.ledger_location).read(OPERATIONS).collect()
    assert sorted(r["group_id"] for r in rows) == groups
    assert len({(r["offset_syncs_version"], r["checkpoints_version"]) for r in rows}) == 1


def test_identity_policy_failover_continuous_and_cutoff_and_refused_failback(
        spark, make_config, unique, capsys):
    config = make_config(**{"replication.policy.class": "IdentityReplicationPolicy",
                            "flows": {"P->B": {"topics": ["ip-.*"]}}})
    primary, backup = config.cluster("P"), config.cluster("B")
    topic, moving, drained = unique("ip-topic"), unique("ip-group"), unique("ip-drained")
    kafka_admin.create_topic(primary, topic, 2)
    values = [f"v{i}" for i in range(80)]
    produce(primary, topic, values, 2)
    read = consume(primary, moving, [topic], limit=30)
    consume(primary, drained, [topic])

    capsys.readouterr()
    assert cli.main(failover(config, "--group", moving, "--catch-up", "--format", "json")) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["subscribe"] == [topic]  # prefixless: the replica keeps the name
    # --catch-up copied only up to G's commits; the rest replicates on and G reads it on B.
    replicate_once(spark, config, "P->B")
    read += consume(backup, moving, [topic])
    assert Counter(v for _, v in read) == Counter(values)

    assert cli.main(failover(config, "--group", drained, "--cutoff",
                             "--quiet-seconds", "1")) == 0
    replica = kafka_offsets.list_offsets(backup, "latest", [(topic, 0), (topic, 1)])
    # the latest offsets
    assert kafka_offsets.list_offsets(backup, "committed", group=drained) == replica

    assert cli.main(["failback", "--group", moving, "--from", "B", "--to", "P",
                     "--config", config.path]) == 2
    err = capsys.readouterr().err
    assert "IdentityReplicationPolicy" in err and "reverse direction first" in err


def test_catch_up_that_cannot_copy_a_topic_says_why_at_once(spark, make_config, unique, capsys):
    # The replica name "P." + 248 characters is longer than Kafka's 249: it cannot exist.
    topic = ("cu" + unique("x").replace("-", "")).ljust(248, "x")
    group = unique("cu-group")
    config = make_config(flows={"P->B": {"topics": ["cu.*"]}, "B->P": {"topics": ["cu.*"]}})
    kafka_admin.create_topic(config.cluster("P"), topic, 1)
    produce(config.cluster("P"), topic, [f"v{i}" for i in range(20)], 1)
    consume(config.cluster("P"), group, [topic])
    capsys.readouterr()
    assert cli.main(failover(config, "--group", group, "--catch-up", "--timeout", "600")) == 3
    err = capsys.readouterr().err
    # Not the deadline's "has not caught up within 600s": the copy's own error, at once.
    assert f"cannot catch up: topic {topic}" in err and "within 600s" not in err
    assert kafka_offsets.list_offsets(config.cluster("B"), "committed", group=group) == {}
