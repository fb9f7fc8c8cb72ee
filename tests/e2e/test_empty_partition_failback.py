"""Issue 35's first finding: failback of a group whose topic kept a partition empty between
failover and failback.

The history (a new user's, not one we chose)::

    P: Payments[0..2] 300 records           replicate P->B --once
    G reads 200 on P, commits               checkpoint P->B --once
    failover G P -> B --catch-up            (writes B:Payments[0..2] at 0: log start)
    B: 100 records to Payments[0] and [1] only: Payments[2] stays empty (keyed producers)
    G reads them on B (P.Payments, Payments), commits
    replicate B->P --once
    status --groups-only                    ready (Payments[2]: nothing before 0 to copy)
    failback G B -> P --catch-up            must be ready too, and G on P loses nothing

Before the fix ``status`` said ready and ``failback`` waited for runs of B->P Payments[2] that
can never exist ("runs end at nothing, group committed 0") until its timeout: exit 3.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from pipelines import cli
from pipelines.checkpoint.engine import Checkpointer
from pipelines.checkpoint.readiness import pass_readiness
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_offsets
from pipelines.spark import ledger_engine

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]


def produce_to(cluster, topic: str, partitions: list[int], count: int, prefix: str) -> None:
    """``count`` records spread over the listed partitions only (the others stay empty)."""
    producer = Producer(cluster.client_config(**{"enable.idempotence": True, "log_level": 0}))
    for i in range(count):
        producer.produce(topic, value=f"{prefix}{i}", partition=partitions[i % len(partitions)])
    assert producer.flush(60) == 0


def test_failback_with_a_partition_left_empty_on_the_target(spark, payments, capsys):
    topic, group, config = payments.topic, payments.group, payments.config
    primary, backup = payments.primary, payments.backup
    produce(primary, topic, [f"p{i}" for i in range(300)], 3)
    base = ["--config", config.path]
    assert cli.main(["replicate", "--flow", "P->B", "--once", *base]) == 0
    read_on_p = consume(primary, group, [topic], limit=200)
    assert cli.main(["checkpoint", "--flow", "P->B", "--once", *base]) == 0
    assert cli.main(["failover", "--group", group, "--from", "P", "--to", "B", "--catch-up",
                     "--timeout", "60", *base]) == 0
    committed_b = kafka_offsets.list_offsets(backup, "committed", group=group)
    assert committed_b[(topic, 2)] == 0  # the log start of B's own, empty, Payments[2]

    produce_to(backup, topic, [0, 1], 100, "b")
    read_on_b = consume(backup, group, [f"P.{topic}", topic])
    assert cli.main(["replicate", "--flow", "B->P", "--once", *base]) == 0
    capsys.readouterr()
    status = cli.main(["status", "--flow", "B->P", "--group", group, "--groups-only",
                       "--format", "json", *base])
    report = json.loads(capsys.readouterr().out)
    assert status == 0, report
    [g] = report["groups"]
    assert g["ready"] and {"direction": "forward", "topic": topic, "partition": 2,
                           "committed": 0, "replicated_to": None, "covered": True} in g["coverage"]
    # The group_ready metric answers by the same rule, over a checkpoint pass's commits.
    engine = ledger_engine(config.ledger_location)
    result = Checkpointer(engine, config).run("B->P", groups=[group], sync=False, dry_run=True)
    assert pass_readiness(config, engine, config.flow("B->P"), result) == {group: (True, 0)}
    assert cli.main(["failback", "--group", group, "--from", "B", "--to", "P", "--catch-up",
                     "--timeout", "30", "--format", "json", *base]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert out["group"] == group
    # Payments[2] had nothing to translate: G starts B.<topic>[2] on P at its log start.
    assert kafka_offsets.list_offsets(primary, "committed", group=group)[(f"B.{topic}", 2)] == 0

    # G resumes on P: every record of P's Payments and of B's (as B.<topic>) exactly once.
    read_back = consume(primary, group, [topic, f"B.{topic}"])
    values = [v for _, v in read_on_p + read_on_b + read_back]
    assert len(values) == len(set(values)), "a record was read twice"
    assert set(values) == {f"p{i}" for i in range(300)} | {f"b{i}" for i in range(100)}
