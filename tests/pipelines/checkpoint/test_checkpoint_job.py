"""``offset-ledger checkpoint`` on real clusters: forward and reverse checkpoints, sync rules."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from ledger.schemas import CHECKPOINTS, GROUP_OFFSETS, OFFSET_SYNCS, RESUME_POINTS
from ledger.span_snapshots import SpanSnapshot
from ledger.tables import Ledger
from pipelines import cli
from pipelines import spark as spark_module
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]
CLI = str(Path(sys.executable).with_name("offset-ledger"))


def no_jvm(*args, **kwargs):
    raise AssertionError("a checkpoint or translate on a path ledger started Spark")


def test_checkpoint_pass_records_translates_and_syncs_under_mm2_rules(spark, make_config,
                                                                       unique, monkeypatch,
                                                                       capsys):
    config = make_config(
        flows={"P->B": {"topics": ["cp-.*"], "groups": ["cpg-.*"]},
               "B->P": {"topics": ["cp-.*"], "groups": ["cpg-.*"],
                        "reverse.checkpointed.topics": ["P.cp-.*"]}},
        **{"ledger.spans.refresh.commits": 1000, "ledger.spans.refresh.runs": 1})
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
    # the pass refreshed the flow's span snapshot (a tail of one run is enough here; the
    # commits bound is far)
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


def _checkpointed_groups(location: str) -> set[str]:
    path = Path(location) / CHECKPOINTS
    if not (path / "_delta_log").is_dir():
        return set()
    return set(DeltaTable(str(path)).to_pyarrow_table(columns=["group_id"])
               .column("group_id").to_pylist())


def test_continuous_checkpoint_picks_up_a_group_added_to_the_allowlist(spark, make_config,
                                                                       unique, tmp_path):
    first, added = unique("cpa-g"), unique("cpb-g")
    config = make_config(flows={"P->B": {"topics": ["cpa-.*"], "groups": ["cpa-.*"]},
                                "B->P": True},
                         emit={"checkpoints": {"interval": {"seconds": 1}}})
    primary, topic = config.cluster("P"), unique("cpa-t")
    kafka_admin.create_topic(primary, topic, 1)
    produce(primary, topic, [f"v{i}" for i in range(10)], 1)
    Ledger(spark, config.ledger_location).init()  # the job then runs on delta-rs, no JVM
    consume(primary, first, [topic], limit=4)
    consume(primary, added, [topic], limit=6)
    job = subprocess.Popen([CLI, "checkpoint", "--flow", "P->B", "--config", config.path],
                           env={**os.environ, "OFFSET_LEDGER_STATE_DIR": str(tmp_path / "st")},
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def wait_for(group: str) -> set[str]:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and job.poll() is None:
                seen = _checkpointed_groups(config.ledger_location)
                if group in seen:
                    return seen
                time.sleep(0.5)  # polling a condition (the job's ledger), not a fixed wait
            raise AssertionError(f"no checkpoint of {group}; job: {job.poll()}")

        assert added not in wait_for(first)  # outside the allowlist while it is not added
        assert cli.main(["groups", "--source", "P", "--target", "B", "--add", "cpb-.*",
                         "--config", config.path]) == 0
        wait_for(added)  # the running job re-read the file: no restart
        assert job.poll() is None
    finally:
        job.send_signal(signal.SIGTERM)
        _, err = job.communicate(timeout=60)
    assert "Traceback" not in err, err
