"""One readiness rule for failover, failback and status, and the checks before anything starts.

The rewind case: the runs of a partition end at 100, then the replicator rewinds and records
(u=50, d=100, n=10). The newest run ends at 60, the highest run of the epoch at 100; a group at
80 is covered (every record below 100 has a copy). ``status`` and ``failover`` must agree.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.engine import LedgerEngine
from ledger.schemas import OFFSET_SYNCS, REPLICATION_PROGRESS
from pipelines import cli
from pipelines import spark as spark_module
from pipelines.checkpoint.coverage import Need
from pipelines.checkpoint.readiness import CoverageCheck, RecordedEnd, recorded_ends
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]
def no_jvm(*args, **kwargs):
    raise AssertionError("a verb on a path ledger started Spark")


ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("pyspark", "py4j", "delta", "dbt", "great_expectations", "matplotlib", "kafka",
         "pandas", "pyarrow", "numpy")
"""Packages an operator verb on a path ledger must not import (Spark, dbt, GX, charts,
kafka-python, and pyarrow's numpy/pandas: each costs a large part of the verb's second)."""

IMPORTS = """
import json, sys
from pipelines import cli
code = cli.main(sys.argv[1:])
heavy = sorted(m for m in HEAVY if m in sys.modules)
print("imported: " + json.dumps({"exit": code, "heavy": heavy}), file=sys.stderr)
"""


def imported(config_path: str, *argv: str) -> dict:
    """``offset-ledger ARGV`` as an operator runs it (a new process): its exit code and which
    of :data:`HEAVY` it imported."""
    code = IMPORTS.replace("HEAVY", repr(HEAVY))
    done = subprocess.run([sys.executable, "-c", code, *argv, "--config", config_path],
                          capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.startswith("imported: ")]
    assert lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("imported: "):])


def test_status_and_failover_agree_after_a_rewind(spark, make_config, unique, monkeypatch,
                                                   capsys):
    topic, group = unique("rw-topic"), unique("rw-group")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    primary = config.cluster("P")
    kafka_admin.create_topic(primary, topic, 1)
    produce(primary, topic, [f"v{i}" for i in range(100)], 1)
    consume(primary, group, [topic], limit=80)
    replicate_once(spark, config, "P->B")
    engine = LedgerEngine(config.ledger_location, lambda: spark)
    [run] = engine.query("SELECT * FROM {s}", s=OFFSET_SYNCS)
    assert (run["upstream_offset"], run["downstream_offset"], run["length"]) == (0, 0, 100)
    # The rewind, as a replicator restarted from 50 records it (and its progress).
    later = run["written_at"] + dt.timedelta(seconds=1)
    engine.append(OFFSET_SYNCS, [{**run, "upstream_offset": 50, "downstream_offset": 100,
                                  "length": 10, "batch_id": run["batch_id"] + 1,
                                  "written_at": later}])
    [progress] = engine.query("SELECT * FROM {p}", p=REPLICATION_PROGRESS)
    engine.merge(REPLICATION_PROGRESS, [{**progress, "next_upstream_offset": 60,
                                         "updated_at": later}])

    key = ("P->B", topic, 0)
    assert recorded_ends(engine, [key]) == {key: RecordedEnd(100, 110)}
    assert CoverageCheck(config, engine).gaps("P", [Need(*key, 80, "forward", topic)]) == []

    monkeypatch.setattr(spark_module, "get_spark", no_jvm)
    capsys.readouterr()
    assert cli.main(["status", "--flow", "P->B", "--group", group, "--format", "json",
                     "--config", config.path]) == 0
    report = json.loads(capsys.readouterr().out)
    [partition] = report["flows"][0]["partitions"]
    assert (partition["replicated_to"], partition["lag"]) == (100, 0)
    [moves] = report["groups"]
    assert moves["verdict"] == "ready to fail over P -> B", moves
    assert cli.main(["failover", "--group", group, "--from", "P", "--to", "B", "--dry-run",
                     "--timeout", "1", "--format", "json", "--config", config.path]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(t["partition"], t["offset"]) for t in out["translations"]] == [(0, 80)]

    # As the operator runs them (a new process each): no Spark, dbt, GX, pyarrow or pandas.
    for argv in (["translate", "--group", group, "--from", "P", "--to", "B"],
                 ["status", "--flow", "P->B", "--group", group],
                 ["failover", "--group", group, "--from", "P", "--to", "B", "--dry-run"]):
        assert imported(config.path, *argv) == {"exit": 0, "heavy": []}, argv


@pytest.mark.parametrize("verb", ["translate", "failover", "failback"])
def test_bad_input_is_refused_before_anything_starts(make_config, kafka_clusters, unique,
                                                     monkeypatch, capsys, verb):
    monkeypatch.setattr(spark_module, "get_spark", no_jvm)
    source, target = ("B", "P") if verb == "failback" else ("P", "B")
    group = unique("ok-g")

    def refused(config, *argv: str) -> str:
        capsys.readouterr()
        code = cli.main([verb, *argv, "--config", config.path])
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
        return errors[0]

    flows = {f"{source}->{target}": {"groups": ["ok-.*"]}, f"{target}->{source}": True}
    config = make_config(flows=flows)
    assert f"outside the group allowlist of flow {source}->{target}" in refused(
        config, "--group", "not-allowed", "--from", source, "--to", target)
    config = make_config(flows={**flows, f"{source}->{target}": {"enabled": False}})
    assert f"flow {source}->{target} is disabled" in refused(
        config, "--group", group, "--from", source, "--to", target)
    # The cluster the verb needs first does not answer (nothing listens on port 1).
    down = source if verb == "failover" else target
    config = make_config(flows=flows, clusters={
        alias: {"bootstrap.servers": "127.0.0.1:1" if alias == down
                else kafka_clusters.bootstrap(alias)} for alias in ("P", "B")})
    error = refused(config, "--group", group, "--from", source, "--to", target)
    assert f"cluster {down} is unreachable at 127.0.0.1:1" in error  # (bench: how fast)
