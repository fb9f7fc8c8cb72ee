"""Audits that survive time: an operation past the time-travel horizon is audited from the
evidence it recorded (operation_runs, operation_checkpoints), and says so.

Real clusters, a real failover and failback, then the versions they recorded are expired the
way production expires them: a tiny ``ledger.streamed.retention.days`` (the history of the
tables an operation records versions of; the evidence keeps ``ledger.audit.retention.days``)
and ``ledger maintain`` (OPTIMIZE removes the small files, VACUUM deletes them once the
retention has passed).
"""

from __future__ import annotations

import json
import time

import pytest
import yaml

from ledger import maintenance
from ledger.records import Operation
from ledger.schemas import OFFSET_SYNCS, OPERATION_CHECKPOINTS, OPERATION_RUNS, OPERATIONS
from ledger.tables import Ledger
from pipelines import cli
from pipelines.audit.horizon import past_horizon
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.e2e, pytest.mark.dbt, pytest.mark.kafka, pytest.mark.spark]
RETENTION_DAYS = 3 / 86400  # three seconds


def audit_output(config_path: str, capsys, *args: str) -> str:
    capsys.readouterr()
    assert cli.main(["audit", "--config", config_path, *args]) == 0
    return capsys.readouterr().out


def audit_json(config_path: str, capsys, *args: str) -> list[dict]:
    return json.loads(audit_output(config_path, capsys, "--format", "json", *args)
                      )["resume_audit"]


def comparable(rows: list[dict]) -> list[tuple]:
    return sorted((r["resume_point_id"], r["resume_offset"], r["retranslated_offset"],
                   r["matches_retranslation"], r["checkpoint_source_offset"],
                   r["checkpoint_target_offset"]) for r in rows)


def test_operation_past_the_horizon_is_audited_from_its_recorded_evidence(
        spark, make_config, unique, capsys):
    config = make_config(flows={
        "P->B": {"topics": ["ev-.*"]},
        "B->P": {"topics": ["ev-.*"], "reverse.checkpointed.topics": ["P.ev-.*"]},
    }, **{"sync.group.offsets.enabled": False})
    topic, group = unique("ev-topic"), unique("ev-group")
    primary, backup = config.cluster("P"), config.cluster("B")
    kafka_admin.create_topic(primary, topic, 2)
    produce(primary, topic, [f"v{i}" for i in range(40)], 2)
    consume(primary, group, [topic], limit=14)
    replicate_once(spark, config, "P->B")
    assert cli.main(["failover", "--group", group, "--from", "P", "--to", "B",
                     "--config", config.path]) == 0
    consume(backup, group, [f"P.{topic}"], limit=6)
    assert cli.main(["failback", "--group", group, "--from", "B", "--to", "P",
                     "--config", config.path]) == 0

    ledger = Ledger(spark, config.ledger_location)
    operations = {o.kind: o for o in Operation.from_rows(ledger.read(OPERATIONS).collect())}
    failback = operations["failback"]
    op_id = failback.operation_id
    # The evidence is written with the operation, at the versions the operation records.
    evidence = ledger.read(OPERATION_CHECKPOINTS).where(f"operation_id = '{op_id}'").collect()
    assert {r["checkpoints_version"] for r in evidence} == {failback.checkpoints_version}
    assert {r["direction"] for r in evidence} == {"reverse"}
    spans = ledger.read(OPERATION_RUNS).where(f"operation_id = '{op_id}'").collect()
    assert {(r["topic"], r["partition"]) for r in spans} == {(topic, 0), (topic, 1)}
    assert {r["offset_syncs_version"] for r in spans} == {failback.offset_syncs_version}

    # Inside the horizon: time travel; --evidence gives the same answers from the evidence.
    # --marts: the dbt marts (time travel at the operation's versions), not the quick answer
    # from the evidence that `audit --operation X` gives by default.
    travelled = audit_json(config.path, capsys, "--operation", op_id, "--marts")
    assert {r["audit_source"] for r in travelled} == {"time_travel"}
    assert len(travelled) == 2 and all(r["matches_retranslation"] for r in travelled)
    from_evidence = audit_json(config.path, capsys, "--operation", op_id, "--marts",
                               "--evidence")
    assert {r["audit_source"] for r in from_evidence} == {"recorded_evidence"}
    assert comparable(from_evidence) == comparable(travelled)

    # Expire: a three-second streamed retention, maintain (OPTIMIZE removes every small
    # file), wait for the retention to pass, maintain again (VACUUM deletes the removed files).
    raw = yaml.safe_load(open(config.path))
    raw["ledger"]["streamed.retention.days"] = RETENTION_DAYS
    with open(config.path, "w") as handle:
        yaml.safe_dump(raw, handle)
    # `ledger init` applies each table's retention: the streamed tables three seconds, the
    # operations and their evidence the audit retention (400 days)
    assert cli.main(["ledger", "init", "--config", config.path]) == 0
    for name in (OPERATIONS, OPERATION_RUNS, OPERATION_CHECKPOINTS, OFFSET_SYNCS):
        expected = "interval 3 seconds" if name == OFFSET_SYNCS else "interval 400 days"
        assert maintenance.table_properties(ledger, name)[
            "delta.deletedFileRetentionDuration"] == expected, name
    replicate_once(spark, config, "P->B")  # the ledger moves on after the operations
    # The three tables whose versions the failback recorded (maintaining all takes longer).
    maintain = ["ledger", "maintain", "--config", config.path, "--table", "offset_syncs",
                "--table", "checkpoints", "--table", "resume_points"]
    assert cli.main(maintain) == 0
    time.sleep(RETENTION_DAYS * 86400 + 1)  # a clock condition: the tombstones must age
    assert cli.main(maintain) == 0
    # The premise: time travel to the failback's offset_syncs version no longer works.
    with pytest.raises(Exception, match=r"(?i)not found|does not exist|no such file"):
        ledger.read(OFFSET_SYNCS, version=failback.offset_syncs_version).collect()
    assert past_horizon(ledger, [failback]) == [op_id]

    # One dbt audit past the horizon gives both the resume audit and the failback mart.
    marts = json.loads(audit_output(config.path, capsys, "--operation", op_id, "--marts",
                                    "--format", "json"))
    expired = marts["resume_audit"]
    assert {r["audit_source"] for r in expired} == {"recorded_evidence"}
    assert comparable(expired) == comparable(travelled)
    # G read 6 records on B after the failover: without reverse checkpointing it would read
    # them again on P; the count comes from the recorded spans here.
    assert sum(r["duplicates_avoided"] for r in marts["failback_duplicates_avoided"]) == 6
    table = audit_output(config.path, capsys, "--operation", op_id)
    assert table.startswith("Everything matched: 2 of 2 resume points in 1 operation(s)")
    assert "1 operation(s) audited from their recorded evidence instead of time travel" in table
    assert "match re-translation over the recorded evidence" in table

