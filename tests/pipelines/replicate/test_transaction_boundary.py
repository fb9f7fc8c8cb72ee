"""``transaction.boundary.interval.ms`` reaches the exactly-once copy tasks of a flow.

A record spaced 100 ms from the previous one shares its transaction only when the boundary is
longer than the gap: with the default 30 ms each would commit alone, its marker taking a replica
offset between them, and the partition would get one run per record. With a 4 s boundary set
on the flow, five records copied within half a second are one transaction: one run each.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pipelines.replicate.kafka_io import (
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
BOUNDARY_MS = 4000


def _await_runs_to(config, topic: str, end: int, job: subprocess.Popen, log: Path) -> None:
    """Until both partitions' recorded runs reach upstream offset ``end``."""
    deadline = time.monotonic() + 120
    while True:
        ends = {p: 0 for p in (0, 1)}
        for p, u, _, n in runs_of(config, topic):
            ends[p] = max(ends[p], u + n)
        if all(e >= end for e in ends.values()):
            return
        assert job.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"runs reach {ends}, not {end}"
        time.sleep(0.2)


def test_records_within_the_boundary_share_one_transaction(make_config, unique, tmp_path):
    topic = unique("boundary")
    config = make_config(flows={"P->B": {
        "topics": [topic], "exactly.once.enabled": True,
        "transaction.boundary.interval.ms": BOUNDARY_MS}})
    assert config.transaction_boundary_s(config.flow("P->B")) == BOUNDARY_MS / 1000
    p, b = config.cluster("P"), config.cluster("B")
    create_replication_tables(config.ledger_location)  # no JVM in the job
    create(p, topic, 2)
    produce(p, topic, sample(2, 1, "w"))  # upstream offset 0 of each partition
    log = tmp_path / "job.log"
    with log.open("w") as out:
        job = subprocess.Popen(
            [CLI, "replicate", "--flow", "P->B", "--config", config.path,
             "--commit-interval", "1"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            _await_runs_to(config, topic, 1, job, log)  # the warm-up's transaction is closed
            for i in range(5):  # upstream 1..5, 100 ms apart: within one boundary
                produce(p, topic, sample(2, 1, f"r{i}"))
                time.sleep(0.1)
            _await_runs_to(config, topic, 6, job, log)
        finally:
            os.killpg(job.pid, signal.SIGTERM)
            assert job.wait(90) == 0, log.read_text()[-3000:]

    runs = runs_of(config, topic)
    assert_runs_exact(runs, read_all(p, topic, 2), read_all(b, f"P.{topic}", 2))
    for partition in (0, 1):
        after_warm_up = [(u, n) for q, u, _, n in runs if q == partition and u >= 1]
        assert after_warm_up == [(1, 5)], (partition, runs)
