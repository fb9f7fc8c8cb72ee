"""kill -9 at random points under load, SIGTERM, then new topics and partitions: next pass runs.

Each kill lands while a continuous ``offset-ledger replicate`` subprocess copies a topic that a
producer keeps writing to. Afterwards a new topic is created and the topic grows; the next
``--once`` pass must succeed, lose nothing, keep every run exact, and the replica may hold at
most one batch of unrecorded duplicates per kill.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ledger.schemas import OFFSET_SYNCS
from pipelines.replicate import topics
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

CLI = str(Path(sys.executable).with_name("offset-ledger"))
# A job on a path ledger starts no JVM; should one fall back to Spark, the C1 compiler only and
# the serial collector start its driver JVM faster on a small machine (tuning only).
JOB_ENV = {"SPARK_SUBMIT_OPTS": " ".join(filter(None, (
    os.environ.get("SPARK_SUBMIT_OPTS"), "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto")))}
BATCH = 60
# Ten kills, as the replication engine promises; each costs a job start (about a second, no
# JVM) and a batch: about a minute in all on 2 cores. OFFSET_LEDGER_TEST_KILLS changes it.
KILLS = int(os.environ.get("OFFSET_LEDGER_TEST_KILLS", "10"))


def _newest_append(location: str) -> int:
    """The newest Delta version of offset_syncs above 0 (version 0 creates the table)."""
    log = Path(location) / OFFSET_SYNCS / "_delta_log"
    versions = [int(p.stem) for p in log.glob("*.json")] if log.is_dir() else []
    return max([0, *versions])


def test_kill_9_repeatedly_under_load_then_topic_changes(spark, make_config, unique, tmp_path):
    topic = unique("load")
    config = make_config(flows={"P->B": {"topics": [f"{topic}.*"]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, topic, 3)
    produce(p, topic, sample(3, 50, "s"))
    env = {**os.environ, **JOB_ENV, "OFFSET_LEDGER_STATE_DIR": str(tmp_path / ".state")}
    command = [CLI, "replicate", "--flow", "P->B", "--config", config.path,
               "--max-records-per-batch", str(BATCH)]
    stop = threading.Event()

    def load() -> None:
        i = 0
        while not stop.is_set():
            produce(p, topic, sample(3, 5, f"l{i}"))
            i += 1
            stop.wait(0.2)

    writer = threading.Thread(target=load, daemon=True)
    writer.start()
    rng = random.Random(11)
    log = (tmp_path / "job.log").open("w")
    job = None
    try:
        for k in range(KILLS + 1):
            before = _newest_append(config.ledger_location)
            job = subprocess.Popen([*command, "--interval", "0.2"], cwd=tmp_path, env=env,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + 180
            while _newest_append(config.ledger_location) <= before:  # this job recorded a batch
                assert job.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "no batch recorded in time"
                time.sleep(0.2)
            time.sleep(rng.uniform(0, 1.5))  # a random point: copying, appending, merging
            last = k == KILLS
            os.killpg(job.pid, signal.SIGTERM if last else signal.SIGKILL)
            job.wait(60)
    finally:
        if job is not None and job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(60)
        stop.set()
        writer.join(30)
        log.close()

    # After the stop: a new topic, more partitions. The next pass must not trip over them.
    other = f"{topic}-new"
    create(p, other, 2)
    produce(p, other, sample(2, 10, "n"))
    topics.grow_partitions(p, topic, 5)
    produce(p, topic, sample(5, 10, "g"))
    # The catch-up pass takes the default batch bounds: it is not killed.
    rerun = subprocess.run([*command[:-2], "--once"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]

    for name, partitions in ((topic, 5), (other, 2)):
        source = read_all(p, name, partitions)
        replica = read_all(b, f"P.{name}", partitions)
        runs = ledger_runs(spark, config, "P->B", name)
        assert_runs_exact(runs, source, replica)  # no run is wrong
        assert_runs_cover(runs, source)  # nothing lost
        extra = sum(len(replica[q]) for q in replica) - sum(len(source[q]) for q in source)
        assert 0 <= extra <= KILLS * BATCH, extra
