"""kill -9 at random points under load, SIGTERM, then new topics and partitions: next pass runs.

Each kill lands while a streaming ``offset-ledger replicate`` subprocess copies a topic that a
producer keeps writing to. Afterwards a new topic is created and the topic grows; the next
``--once`` pass must succeed, lose nothing and keep every run exact. At-least-once: the replica
holds at most one commit interval's worth of unrecorded duplicates per kill. Exactly-once: a
``read_committed`` reader of the replica sees every source record exactly once, and the runs
map every upstream offset exactly once (aborted copies are never runs), as a crash-free run's.
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
from pipelines.devtools import settings as dev_settings
from pipelines.replicate import topics
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

pytestmark = [pytest.mark.kafka, pytest.mark.e2e]

CLI = str(Path(sys.executable).with_name("offset-ledger"))
# A job on a path ledger starts no JVM; should one fall back to Spark, the C1 compiler only and
# the serial collector start its driver JVM faster on a small machine (tuning only).
JOB_ENV = {"SPARK_SUBMIT_OPTS": " ".join(filter(None, (
    os.environ.get("SPARK_SUBMIT_OPTS"), f"{dev_settings.LEAN_JVM_OPTIONS} -Xshare:auto")))}
COMMIT_S = 1.0
PER_TICK, TICK_S = 15, 0.2  # the load: at most 75 records/s
# Three kills per mode in the suite (OFFSET_LEDGER_TEST_KILLS changes it; the torture soak,
# `python -m bench.torture`, kills far more): each costs a job start and a commit.


def _newest_append(location: str) -> int:
    """The newest Delta version of offset_syncs above 0 (version 0 creates the table)."""
    log = Path(location) / OFFSET_SYNCS / "_delta_log"
    versions = [int(p.stem) for p in log.glob("*.json")] if log.is_dir() else []
    return max([0, *versions])


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_kill_9_repeatedly_under_load_then_topic_changes(make_config, unique, tmp_path,
                                                        exactly_once):
    kills = dev_settings.test_kills()
    topic = unique("load")
    config = make_config(flows={"P->B": {"topics": [f"{topic}.*"]}},
                         exactly={"once": {"enabled": exactly_once}})
    p, b = config.cluster("P"), config.cluster("B")
    create_replication_tables(config.ledger_location)  # no JVM in the jobs
    create(p, topic, 3)
    produce(p, topic, sample(3, 50, "s"))
    env = {**os.environ, **JOB_ENV, "OFFSET_LEDGER_STATE_DIR": str(tmp_path / ".state")}
    command = [CLI, "replicate", "--flow", "P->B", "--config", config.path]
    stop = threading.Event()

    def load() -> None:
        i = 0
        while not stop.is_set():
            produce(p, topic, sample(3, PER_TICK // 3, f"l{i}"))
            i += 1
            stop.wait(TICK_S)

    writer = threading.Thread(target=load, daemon=True)
    writer.start()
    rng = random.Random(11)
    log = (tmp_path / "job.log").open("w")
    job = None
    try:
        for k in range(kills + 1):
            before = _newest_append(config.ledger_location)
            job = subprocess.Popen([*command, "--interval", "0.5", "--commit-interval",
                                    str(COMMIT_S)], cwd=tmp_path, env=env,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + 180
            # This job recorded runs of its own copies (its first commit may be a catch-up).
            while _newest_append(config.ledger_location) < before + 2:
                assert job.poll() is None, (tmp_path / "job.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "no runs recorded in time"
                time.sleep(0.2)
            time.sleep(rng.uniform(0, 1.5))  # a random point: copying, reporting, committing
            last = k == kills
            os.killpg(job.pid, signal.SIGTERM if last else signal.SIGKILL)
            assert job.wait(90) == (0 if last else -signal.SIGKILL)
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
    rerun = subprocess.run([*command, "--once"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]

    for name, partitions in ((topic, 5), (other, 2)):
        source = read_all(p, name, partitions)
        replica = read_all(b, f"P.{name}", partitions)
        runs = runs_of(config, name)
        assert_runs_exact(runs, source, replica)  # no run is wrong
        assert_runs_cover(runs, source)  # nothing lost
        extra = sum(len(replica[q]) for q in replica) - sum(len(source[q]) for q in source)
        if exactly_once:  # a read_committed reader sees each record once; runs never overlap
            unmapped = {q: sorted(set(replica[q]) - {d + k for part, _, d, n in runs
                                                     if part == q for k in range(n)})
                        for q in replica}
            assert extra == 0, (extra, name, {q: v for q, v in unmapped.items() if v},
                                [r for r in runs if unmapped[r[0]]])
            for q in source:
                mapped = [u + k for part, u, _, n in runs if part == q for k in range(n)]
                assert len(mapped) == len(set(mapped)), f"partition {q}: an offset mapped twice"
        else:
            assert 0 <= extra <= kills * PER_TICK / TICK_S * COMMIT_S, extra
