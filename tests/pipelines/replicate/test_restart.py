"""kill -9 of a running replication job, then a restart: nothing lost, the ledger still exact."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.schemas import OFFSET_SYNCS
from pipelines.devtools.settings import LEAN_JVM_OPTIONS
from pipelines.edge import kafka_offsets
from tests.pipelines.replicate.kafka_io import (
    assert_runs_cover,
    assert_runs_exact,
    create,
    create_replication_tables,
    produce,
    read_all,
    runs_of,
    sample,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.e2e]

CLI = str(Path(sys.executable).with_name("offset-ledger"))
# The job's JVM starts once per kill: the C1 compiler only and the serial collector start it
# faster on a small machine (passed to the driver JVM that pyspark launches; tuning only).
JOB_ENV = {"SPARK_SUBMIT_OPTS": " ".join(filter(None, (
    os.environ.get("SPARK_SUBMIT_OPTS"), f"{LEAN_JVM_OPTIONS} -Xshare:auto")))}
BATCH = 40


def _first_batch_landed(location: str) -> bool:
    # Version 0 of offset_syncs creates the table; version 1 is the job's first append. Reading
    # the Delta log directly keeps the poll cheap on a busy machine.
    return (Path(location) / OFFSET_SYNCS / "_delta_log" / f"{1:020d}.json").exists()


def test_kill_9_then_restart_loses_nothing_and_keeps_runs_exact(make_config, unique, tmp_path):
    topic = unique("crash")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, topic, 2)
    produce(p, topic, sample(2, 500, "first"))  # 25 batches: the kill comes mid-pass
    env = {**os.environ, **JOB_ENV, "OFFSET_LEDGER_STATE_DIR": str(tmp_path / ".state")}
    # A --once pass of bounded batches killed after its first batch (streaming has its own
    # kill loop: test_kill_loop).
    command = [CLI, "replicate", "--flow", "P->B", "--config", config.path, "--once",
               "--max-records-per-batch", str(BATCH)]
    log = (tmp_path / "job.log").open("w")
    job = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log,
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 420
        while not _first_batch_landed(config.ledger_location):
            assert job.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no batch reached the ledger in time"
            time.sleep(0.1)
        assert runs_of(config, topic), "the first batch's runs are not readable"
        produce(p, topic, sample(2, 30, "second"))  # more arrives while the job runs
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the job and its JVM, mid-flight
        job.wait(30)
    assert job.returncode == -signal.SIGKILL

    rerun = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=420)
    assert rerun.returncode == 0, rerun.stderr[-3000:]

    source = read_all(p, topic, 2)
    replica = read_all(b, f"P.{topic}", 2)
    runs = runs_of(config, topic)  # read with delta-rs: this file never starts the session's Spark
    assert_runs_exact(runs, source, replica)  # no run is wrong
    assert_runs_cover(runs, source)  # every source record is in the replica, at a known place
    for partition in range(2):
        copies = list(replica[partition].values())
        assert all(rec in copies for rec in source[partition].values())
    # Only the batch in flight at the kill can have been copied twice.
    extra = sum(len(replica[q]) for q in range(2)) - sum(len(source[q]) for q in range(2))
    assert 0 <= extra <= BATCH


def test_sigterm_stops_a_streaming_job_after_recording_what_it_copied(make_config, unique,
                                                                      tmp_path):
    topic = unique("term")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    create_replication_tables(config.ledger_location)  # no JVM in the job
    p = config.cluster("P")
    create(p, topic, 2)
    produce(p, topic, sample(2, 50, "term"))
    env = {**os.environ, **JOB_ENV, "OFFSET_LEDGER_STATE_DIR": str(tmp_path / ".state")}
    # What the job copied after its last commit is recorded by the stop.
    job = subprocess.Popen([CLI, "replicate", "--flow", "P->B", "--config", config.path,
                            "--commit-interval", "3", "--interval", "1"], cwd=tmp_path,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 420
        while not _first_batch_landed(config.ledger_location):
            assert job.poll() is None, job.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "no runs reached the ledger in time"
            time.sleep(0.5)
        produce(p, topic, sample(2, 25, "more"))  # copied, not yet recorded
        deadline = time.monotonic() + 60
        while sum(kafka_offsets.watermarks(config.cluster("B"), f"P.{topic}", 2)[q][1]
                  for q in range(2)) < 150:
            assert time.monotonic() < deadline, "records not copied in time"
            time.sleep(0.2)
        job.send_signal(signal.SIGTERM)  # the driver only, as a scheduler stops a job
        out, _ = job.communicate(timeout=180)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)
    assert job.returncode == 0, out[-3000:]
    assert "stopping, the copy tasks flush and their runs are recorded" in out
    assert re.search(r"stopped after streaming [\d.]+s, 150 record\(s\) copied, \d+ run\(s\) "
                     r"recorded in \d+ commit\(s\)", out), out[-3000:]
    runs = runs_of(config, topic)
    source = read_all(p, topic, 2)
    assert_runs_cover(runs, source)
    assert_runs_exact(runs, source, read_all(config.cluster("B"), f"P.{topic}", 2))
