"""DESIGN.md's reference scenario on the embedded clusters, driven through the CLI verbs.

Real producers and consumers; every record is counted by value (values are unique), so a lost
record or a record read twice cannot hide.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml

from expectations import validate_ledger
from ledger.schemas import OPERATIONS, RESUME_POINTS
from ledger.tables import Ledger
from pipelines import cli
from pipelines.audit.audit import run_audit
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]
PARTITIONS = 3


def cli_json(capsys, *argv) -> dict:
    capsys.readouterr()
    assert cli.main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def scenario_config(make_config):
    return make_config(flows={
        "P->B": {"topics": ["Payments.*"]},
        "B->P": {"topics": ["Payments.*"], "reverse.checkpointed.topics": ["P.Payments.*"]},
    }, **{"sync.group.offsets.enabled": False})


def test_failover_and_failback_lose_nothing_and_read_nothing_twice(spark, scenario_config,
                                                                  capsys):
    config = scenario_config
    run = uuid.uuid4().hex[:6]
    topic = f"Payments{run}"
    group, control = f"G{run}", f"C{run}"
    path = config.path
    for alias in ("P", "B"):
        kafka_admin.create_topic(config.cluster(alias), topic, PARTITIONS)
    primary, backup = config.cluster("P"), config.cluster("B")

    # 1. producers write to P; G (and the control group C, in step) consume part of it on P.
    p_values = [f"P-{i}" for i in range(900)]
    produce(primary, topic, p_values, PARTITIONS)
    read = {g: consume(primary, g, [topic], limit=500) for g in (group, control)}
    for flow in ("P->B", "B->P"):
        replicate_once(spark, config, flow)

    # 2. failover: G stopped; checkpoint now, write G's offsets on B, say what to subscribe to.
    over = cli_json(capsys, "failover", "--group", group, "--from", "P", "--to", "B",
                    "--config", path)
    assert over["subscribe"] == [f"P.{topic}", topic]
    assert {t["status"] for t in over["translations"]} == {"translated"}
    cli_json(capsys, "failover", "--group", control, "--from", "P", "--to", "B", "--config", path)
    for g in (group, control):
        read[g] += consume(backup, g, over["subscribe"])

    # 3. producers move to B; G consumes part of it there.
    b_values = [f"B-{i}" for i in range(600)]
    produce(backup, topic, b_values, PARTITIONS)
    for g in (group, control):
        read[g] += consume(backup, g, over["subscribe"], limit=250)
    for flow in ("P->B", "B->P"):
        replicate_once(spark, config, flow)

    # 4. failback: reverse-checkpoint P.<topic> into P's <topic>, forward B's <topic>.
    back = cli_json(capsys, "failback", "--group", group, "--from", "B", "--to", "P",
                    "--config", path)
    assert back["subscribe"] == [f"B.{topic}", topic]
    directions = {(t["topic"], t["direction"]) for t in back["translations"]}
    assert directions == {(f"P.{topic}", "reverse"), (topic, "forward")}
    # The control group fails back without reverse checkpointing.
    raw = yaml.safe_load(Path(path).read_text())
    raw["flows"]["B->P"]["reverse.checkpointed.topics"] = []
    no_reverse = str(Path(path).with_name("no-reverse.yaml"))
    Path(no_reverse).write_text(yaml.safe_dump(raw))
    cli_json(capsys, "failback", "--group", control, "--from", "B", "--to", "P",
             "--config", no_reverse)
    for g in (group, control):
        read[g] += consume(primary, g, back["subscribe"])

    produced = set(p_values) | set(b_values)
    counts = {g: Counter(v for _, v in read[g]) for g in (group, control)}
    assert produced - set(counts[group]) == set(), "records lost"
    assert {v: c for v, c in counts[group].items() if c > 1} == {}, "records read twice"
    # Without reverse checkpointing the control group re-reads what it consumed of the
    # primary's records on B (everything after its failover position).
    control_twice = sum(c - 1 for c in counts[control].values() if c > 1)
    assert produced - set(counts[control]) == set()
    assert control_twice == len(p_values) - 500

    ledger = Ledger(spark, config.ledger_location)
    ops = {r["operation_id"]: r for r in ledger.read(OPERATIONS).collect()}
    assert ops[back["operation_id"]]["reverse_checkpointing"] is True
    assert ops[back["operation_id"]]["subscribe_topics"] == back["subscribe"]
    points = ledger.read(RESUME_POINTS).where(
        f"operation_id = '{back['operation_id']}'").collect()
    assert {(r["topic"], r["direction"]) for r in points} == {(topic, "reverse"),
                                                            (f"B.{topic}", "forward")}
    assert all(r["checkpoints_version"] is not None for r in points)

    # CI validates the ledger this scenario produced, and the audit marts must tell the same
    # story as the consumers did.
    report = validate_ledger(spark, config)
    assert report.success, report.summary()
    marts = run_audit(spark, config, group=group)
    avoided = [r for r in marts["failback_duplicates_avoided"]
               if r["operation_id"] == back["operation_id"]]
    assert sum(r["duplicates_without_reverse_checkpointing"] for r in avoided) == control_twice
    assert sum(r["duplicates_with_reverse_checkpointing"] for r in avoided) == 0
    audited = {(r["topic"], r["partition_id"]): r["resume_offset"]
               for r in marts["resume_audit"] if r["operation_id"] == back["operation_id"]}
    assert audited == {(r["topic"], r["partition"]): r["offset"] for r in points}
