"""``offset-ledger checkpoint`` on real clusters: forward and reverse checkpoints, sync rules."""

from __future__ import annotations

import json

import pytest

from ledger.schemas import CHECKPOINTS, GROUP_OFFSETS, OFFSET_SYNCS, RESUME_POINTS
from ledger.span_snapshots import SpanSnapshot
from ledger.tables import Ledger
from pipelines import cli, kafka_admin, kafka_offsets
from pipelines import spark as spark_module
from pipelines.replicate.job import replicate_once
from pipelines.workload import consume, produce

pytestmark = pytest.mark.e2e


def no_jvm(*args, **kwargs):
    raise AssertionError("a checkpoint or translate on a path ledger started Spark")


def test_checkpoint_pass_records_translates_and_syncs_under_mm2_rules(spark, make_config,
                                                                       unique, monkeypatch,
                                                                       capsys):
    config = make_config(
        flows={"P->B": {"topics": ["cp-.*"], "groups": ["cpg-.*"]},
               "B->P": {"topics": ["cp-.*"], "groups": ["cpg-.*"],
                        "reverse.checkpointed.topics": ["P.cp-.*"]}},
        **{"ledger.spans.refresh.commits": 1})
    primary, backup = config.cluster("P"), config.cluster("B")
    topic, group, other = unique("cp-t"), unique("cpg-g"), unique("cpg-h")
    replica = f"P.{topic}"
    kafka_admin.create_topic(primary, topic, 1)
    produce(primary, topic, [f"v{i}" for i in range(40)], 1)
    replicate_once(spark, config, "P->B")
    consume(primary, group, [topic], limit=25)
    consume(primary, other, [topic], limit=10)
    # `other` already sits further ahead on B: MM2 never rewinds it.
    kafka_admin.alter_group_offsets(backup, other, {(replica, 0): 30})
    ledger = Ledger(spark, config.ledger_location)
    # Every verb below reads and commits with delta-rs (ledger.engine): no JVM.
    monkeypatch.setattr(spark_module, "get_spark", no_jvm)

    assert cli.main(["translate", "--group", group, "--from", "P", "--to", "B", "--format",
                     "json", "--config", config.path]) == 0
    (translated,) = json.loads(capsys.readouterr().out)
    assert (translated["topic"], translated["offset"], translated["status"]) == (
        topic, 25, "translated")
    assert cli.main(["checkpoint", "--flow", "P->B", "--once", "--sync",
                     "--config", config.path]) == 0
    assert kafka_offsets.list_offsets(backup, "committed", group=group) == {(replica, 0): 25}
    assert kafka_offsets.list_offsets(backup, "committed", group=other) == {(replica, 0): 30}
    cps = {r["group_id"]: r for r in ledger.read(CHECKPOINTS).collect()}
    assert (cps[group]["direction"], cps[group]["source_offset"], cps[group]["target_offset"]) \
        == ("forward", 25, 25)
    points = ledger.read(RESUME_POINTS).collect()
    assert [(r["group_id"], r["offset"], r["reason"], r["checkpoint_id"]) for r in points] == [
        (group, 25, "group_offset_sync", cps[group]["checkpoint_id"])]
    observed = {(r["cluster"], r["group_id"]) for r in ledger.read(GROUP_OFFSETS).collect()}
    assert {("P", group), ("P", other), ("B", other)} <= observed
    # the pass refreshed the flow's span snapshot (one commit behind is enough here)
    snapshot = SpanSnapshot.read(ledger, "P->B", topics={topic})
    assert snapshot is not None and snapshot.version == ledger.version(OFFSET_SYNCS)
    assert [(r["upstream_offset"], r["downstream_offset"], r["length"])
            for r in snapshot.rows[(topic, 0)]] == [(0, 0, 40)]

    # The group rewinds on P: the next checkpoint follows it backwards, flagged as a rewind,
    # but the sync still never rewinds the group on B.
    kafka_admin.alter_group_offsets(primary, group, {(topic, 0): 5})
    assert cli.main(["checkpoint", "--flow", "P->B", "--once", "--sync",
                     "--config", config.path]) == 0
    latest = (ledger.read(CHECKPOINTS).where(f"group_id = '{group}'")
              .orderBy("checkpointed_at", ascending=False).first())
    assert (latest["target_offset"], latest["group_rewound"]) == (5, True)
    assert kafka_offsets.list_offsets(backup, "committed", group=group) == {(replica, 0): 25}

    # Reverse checkpoint: a group that read the replica on B maps back to the original on P.
    reader = unique("cpg-r")
    consume(backup, reader, [replica], limit=33)
    assert cli.main(["checkpoint", "--flow", "B->P", "--once", "--no-sync",
                     "--group", reader, "--config", config.path]) == 0
    rev = ledger.read(CHECKPOINTS).where(f"group_id = '{reader}'").collect()
    assert [(r["direction"], r["source_topic"], r["target_topic"], r["target_offset"])
            for r in rev] == [("reverse", replica, topic, 33)]
    assert kafka_offsets.list_offsets(primary, "committed", group=reader) == {}
