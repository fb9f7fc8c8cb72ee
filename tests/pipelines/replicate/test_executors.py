"""Where copy tasks run: the choice, and the local worker processes (no JVM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ledger.schemas import OFFSET_SYNCS
from ledger.tables import Ledger
from pipelines.replicate import executors
from pipelines.replicate.copy_task import CopyRange, RangeResult
from pipelines.replicate.job import replicate_once
from tests.pipelines.replicate.kafka_io import (
    assert_runs_cover,
    assert_runs_exact,
    create,
    ledger_runs,
    produce,
    read_all,
    sample,
)


@pytest.mark.unit
@pytest.mark.parametrize(("executor", "spark_given", "env", "local"), [
    ("auto", False, {}, True),                                   # a plain program: local[*]
    ("auto", False, {"OFFSET_LEDGER_SPARK_MASTER": "local[3]"}, True),
    ("auto", False, {"OFFSET_LEDGER_SPARK_MASTER": "spark://h:7077"}, False),
    ("auto", False, {"PYSPARK_GATEWAY_PORT": "4711"}, False),     # under spark-submit
    ("auto", False, {"DATABRICKS_RUNTIME_VERSION": "16.4"}, False),
    ("auto", True, {}, False),                                    # a session handed in
    ("spark", False, {}, False),
    ("local", True, {"PYSPARK_GATEWAY_PORT": "4711"}, True),      # asked for explicitly
])
def test_copies_run_locally_exactly_where_spark_would_be_local(monkeypatch, executor,
                                                               spark_given, env, local):
    for name in ("OFFSET_LEDGER_SPARK_MASTER", "PYSPARK_GATEWAY_PORT",
                 "DATABRICKS_RUNTIME_VERSION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    assert executors.use_local(executor, spark_given) is local


@pytest.mark.unit
def test_an_unknown_executor_is_refused():
    with pytest.raises(ValueError, match="auto, spark, local"):
        executors.use_local("threads", False)


@pytest.mark.unit
def test_local_slots_follow_the_local_master(monkeypatch):
    monkeypatch.setenv("OFFSET_LEDGER_SPARK_MASTER", "local[3]")
    assert executors.LocalCopies().slots == 3
    assert executors.LocalCopies("local[*]").slots == (os.cpu_count() or 1)


def _die_first(group, consumer_config, producer_config, max_bytes):
    """A task whose first attempt loses its worker process (as a killed executor would)."""
    marker = Path(consumer_config["marker"])
    if consumer_config.get("always") or not marker.exists():
        marker.touch()
        os._exit(9)
    return [RangeResult(r, None, r.end, 0, 0) for r in group]


@pytest.mark.unit
def test_a_lost_worker_is_replaced_and_its_group_runs_again(tmp_path):
    copies = executors.LocalCopies("local[2]", task=_die_first)
    ranges = [CopyRange("t", "P.t", 0, 0, 5), CopyRange("t", "P.t", 1, 3, 9)]
    try:
        results = copies.run([[ranges[0]], [ranges[1]]], {"marker": str(tmp_path / "m")}, {},
                             None, "test")
    finally:
        copies.close()

    assert sorted(((r.range, r.position, r.error) for r in results), key=str) == [
        (ranges[0], 5, None), (ranges[1], 9, None)]


@pytest.mark.unit
def test_a_group_lost_twice_fails_its_ranges_and_records_nothing(tmp_path):
    copies = executors.LocalCopies("local[1]", task=_die_first)
    ranges = [CopyRange("t", "P.t", 0, 0, 5), CopyRange("t", "P.t", 1, 3, 9)]
    try:
        results = copies.run([ranges], {"marker": str(tmp_path / "m"), "always": True}, {},
                             None, "test")
    finally:
        copies.close()

    assert [(r.range, r.summary, r.position) for r in results] == [
        (ranges[0], None, 0), (ranges[1], None, 3)]
    assert all(r.error == "the copy worker process was lost" for r in results)


@pytest.mark.spark
@pytest.mark.kafka
def test_a_local_pass_on_a_path_ledger_starts_no_jvm(spark, make_config, unique, monkeypatch):
    orders = unique("orders")
    config = make_config(flows={"P->B": {"topics": [orders]}})
    p, b = config.cluster("P"), config.cluster("B")
    Ledger(spark, config.ledger_location).init()  # as `ledger init` left it
    create(p, orders, 3)
    produce(p, orders, sample(3, 500, "local"))

    def no_jvm(*args, **kwargs):
        raise AssertionError("a local pass on a path ledger started Spark")

    monkeypatch.setattr("pipelines.spark.get_spark", no_jvm)
    result = replicate_once(None, config, "P->B", max_records_per_batch=600,
                            executor="local")

    assert result.records_copied == 1500 and result.batches == 3 and not result.errors
    source, replica = read_all(p, orders, 3), read_all(b, f"P.{orders}", 3)
    assert replica == source
    runs = ledger_runs(spark, config, "P->B", orders)  # what Spark reads of delta-rs's commits
    assert_runs_exact(runs, source, replica)
    assert_runs_cover(runs, source)
    ledger = Ledger(spark, config.ledger_location)
    assert sorted(r["batch_id"] for r in ledger.read(OFFSET_SYNCS)
                  .select("batch_id").distinct().collect()) == [0, 1, 2]
    progress = {(r["topic"], r["partition"]): r["next_upstream_offset"]
                for r in ledger.read("replication_progress").collect()}
    assert progress == {(orders, n): 500 for n in range(3)}


def _hang(group, consumer_config, producer_config, max_bytes):
    """A task that reports its worker's pid and then never ends (as a long copy would)."""
    Path(consumer_config["pid_file"]).write_text(str(os.getpid()))
    threading.Event().wait()


_DRIVER = """
import sys
from pipelines.replicate import executors
from pipelines.replicate.copy_task import CopyRange
from tests.pipelines.replicate.test_executors import _hang
copies = executors.LocalCopies("local[1]", task=_hang)
copies.run([[CopyRange("t", "P.t", 0, 0, 5)]], {"pid_file": sys.argv[1]}, {}, None, "test")
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.unit
def test_workers_end_with_a_killed_driver(tmp_path):
    pid_file = tmp_path / "worker.pid"
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(pid_file)],
                              cwd=Path(__file__).resolve().parents[3])
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert driver.poll() is None, "the driver ended before its worker started"
            assert time.monotonic() < deadline, "the worker never started its task"
            time.sleep(0.05)
        worker = int(pid_file.read_text())
        assert _alive(worker)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)

    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker), "a copy worker outlived its killed driver"


def _started_worker(parent: int) -> None:
    """A spawned worker's whole life: what every local worker runs first."""
    executors.watch_parent(parent)


@pytest.mark.unit
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_while_a_worker_starts_leaves_it_to_the_driver(stop):
    """A group's stop signal reaching a spawned worker while its interpreter still imports
    (before ``watch_parent`` ignores it) ended it with a ``KeyboardInterrupt`` traceback
    (torture seed 41001 eos, ``sigint_replicate_group``): it is held until the worker ignores
    the group's signals, and the worker ends as the driver tells it."""
    ctx = executors.multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_started_worker, args=(os.getpid(),), daemon=True)
    with executors.stop_signals_held():
        proc.start()
    os.kill(proc.pid, stop)  # at once: the child is still starting its interpreter
    proc.join(60)
    assert proc.exitcode == 0
