"""The jobs on a real Spark standalone cluster, launched with ``spark-submit`` as the README's
"Run with spark-submit" section documents.

A master and one worker (pyspark's own ``spark-class``, loopback, free ports; the worker offers two
cores, so each application gets one two-core executor) run for this module only and are stopped at
its end. replicate, checkpoint, failover and audit each run as a
``spark-submit --master spark://...`` application with the wheel in ``--py-files``, the Delta
(and connector) jars in ``--jars`` and an event log; the test then checks, for every application,
that the master lists it, that the event log says ``spark.master=spark://...`` (not
``local[*]``), and that its tasks ran on the worker's executors, never on the driver. The
results are checked too: the replica's records, G's offsets on B, the audit's resume point.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest

from pipelines import jvm_archive
from pipelines.devtools.clusters import free_port
from pipelines.devtools.settings import LEAN_JVM_OPTIONS
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.spark import jars_dir
from tests.tiny_spark import TINY_DATA_CONF

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent

pytestmark = [pytest.mark.deploy, pytest.mark.kafka, pytest.mark.e2e]


@dataclass
class Standalone:
    url: str
    webui: str
    processes: list[subprocess.Popen[bytes]]

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.webui}/json/", timeout=5) as response:
            return json.load(response)


def _await(condition, what: str, timeout: float = 120.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


# Short-lived JVMs on a small test machine: the C1 compiler only and the serial collector start
# faster and leave the other core to the other JVMs; the drivers (pyspark's class path, as the
# local session's) map the local session's class-data archive when it matches (`make setup`);
# the executors' class path differs, so they skip it (-Xshare:auto). Tuning only: nothing
# checked depends on it.
TEST_JVM_OPTS = " ".join([LEAN_JVM_OPTIONS,
                          *(jvm_archive.archive_options("spark", jars_dir("spark"))
                            or ["-Xshare:auto"])])


def _daemon_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOG_DIR": str(tmp / "logs"),
                "SPARK_CONF_DIR": str(tmp / "conf"), "SPARK_DAEMON_JAVA_OPTS": TEST_JVM_OPTS,
                "SPARK_LAUNCHER_OPTS": TEST_JVM_OPTS})
    return env


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    tmp = tmp_path_factory.mktemp("standalone")
    (tmp / "conf").mkdir()
    port, webui = free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    env = _daemon_env(tmp)
    processes: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], log: str) -> None:
        with open(tmp / log, "wb") as out:
            processes.append(subprocess.Popen([spark_class, *args], env=env, stdout=out,
                                              stderr=subprocess.STDOUT, start_new_session=True))

    cluster = Standalone(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{webui}", processes)
    try:
        start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
               "--port", str(port), "--webui-port", str(webui)], "master.log")
        _await(cluster.state, "the master's web UI")
        # One worker: each application's executor is a separate JVM the worker launches, which
        # is what the test needs to see; a second worker would only add one more JVM per job.
        work = tmp / "worker"
        work.mkdir()
        start(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
               "--cores", "2", "--memory", "1g", "--webui-port", str(free_port()),
               "--work-dir", str(work), cluster.url], "worker.log")
        _await(lambda: sum(w["state"] == "ALIVE" for w in cluster.state()["workers"]) == 1,
               "an ALIVE worker")
        yield cluster
    finally:
        for process in processes:  # only what this fixture started, by process group
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


# Test-size tuning on top of the README's command line, as a deployment tunes its cluster: the
# few rows of a test need a handful of shuffle and Delta snapshot partitions, not the defaults
# (200 and 50 tasks per stage on two executor cores), and the JVMs start cheaper (above).
TEST_TUNING = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    # No application web UI (the test asks the master's UI, never the driver's).
    "spark.ui.enabled": "false",
    "spark.driver.extraJavaOptions": TEST_JVM_OPTS,
    "spark.executor.extraJavaOptions": TEST_JVM_OPTS,
    # Interpreted queries, as the suite's own session runs them (tests/tiny_spark.py).
    **TINY_DATA_CONF,
}


def submit_command(master: str, wheel: Path, event_dir: Path, job: str, *args: str) -> list[str]:
    """The README's command line (section "Run with spark-submit"), plus :data:`TEST_TUNING`."""
    jars = ",".join(sorted(glob.glob(str(ROOT / "jars" / "spark" / "*.jar"))))
    tuning = [arg for key, value in TEST_TUNING.items() for arg in ("--conf", f"{key}={value}")]
    return [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master,
            "--driver-memory", "1g", "--executor-memory", "512m", "--total-executor-cores", "2",
            "--jars", jars, "--py-files", str(wheel),
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={event_dir}",
            "--conf", "spark.eventLog.compress=false",
            "--conf", "spark.eventLog.rolling.enabled=false", *tuning,
            str(ROOT / "pipelines" / job / "job.py"), *args]


def submit_env() -> dict[str, str]:
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=sys.executable, SPARK_LAUNCHER_OPTS=TEST_JVM_OPTS)
    for key in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(key, None)
    return env


def run_submit(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=submit_env(), capture_output=True, text=True,
                          timeout=600)


def event_log(event_dir: Path, before: set[Path]) -> list[dict]:
    new = [p for p in event_dir.iterdir() if p not in before]
    assert len(new) == 1, new
    assert new[0].is_file() and not new[0].name.endswith(".inprogress"), new[0]
    return [json.loads(line) for line in new[0].read_text().splitlines() if line.strip()]


def test_jobs_run_on_the_cluster_executors(standalone: Standalone, wheel: Path, make_config,
                                           unique, tmp_path: Path) -> None:
    config = make_config(flows={"P->B": {"topics": ["ss-.*"]}, "B->P": {"topics": ["ss-.*"]}})
    topic, group = unique("ss-topic"), unique("ss-group")
    kafka_admin.create_topic(config.cluster("P"), topic, 2)
    produce(config.cluster("P"), topic, [f"v{i}" for i in range(40)], 2)
    consume(config.cluster("P"), group, [topic], limit=15)
    committed = kafka_offsets.list_offsets(config.cluster("P"), "committed", group=group)
    events = tmp_path / "events"
    events.mkdir()
    work = tmp_path / "cwd"  # not the checkout: nothing may be read from it at run time
    work.mkdir()

    steps = [
        ("replicate", "--flow", "P->B", "--once"),
        ("checkpoint", "--flow", "P->B", "--once"),
        ("failover", "failover", "--group", group, "--from", "P", "--to", "B",
         "--format", "json"),
        ("audit", "--group", group, "--format", "json"),
    ]
    outputs: dict[str, str] = {}
    for job, *args in steps:
        before = set(events.iterdir())
        cmd = submit_command(standalone.url, wheel, events, job, *args, "--config", config.path)
        started = time.monotonic()
        done = run_submit(cmd, work)
        print(f"{job}: {time.monotonic() - started:.1f} s")
        assert done.returncode == 0, f"{job}: {done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        outputs[job] = done.stdout
        log = event_log(events, before)
        start = next(e for e in log if e["Event"] == "SparkListenerApplicationStart")
        env = next(e for e in log if e["Event"] == "SparkListenerEnvironmentUpdate")
        assert env["Spark Properties"]["spark.master"] == standalone.url, job
        executors = {e["Executor ID"]: e["Executor Info"]["Host"] for e in log
                     if e["Event"] == "SparkListenerExecutorAdded"}
        assert executors and "driver" not in executors, job
        tasks = [e["Task Info"] for e in log if e["Event"] == "SparkListenerTaskEnd"]
        assert tasks, f"{job}: no task ran"
        assert {t["Executor ID"] for t in tasks} <= set(executors), job
        listed = {a["id"]: a for a in standalone.state()["completedapps"]}
        assert start["App ID"] in listed, f"{job}: the master does not list {start['App ID']}"
        assert listed[start["App ID"]]["name"].startswith("offset-ledger"), job

    replica = kafka_offsets.list_offsets(config.cluster("B"), "latest",
                                         [(f"P.{topic}", p) for p in (0, 1)])
    assert sum(replica.values()) == 40
    on_b = kafka_offsets.list_offsets(config.cluster("B"), "committed", group=group)
    # Committed partitions are translated; a partition the group never committed on P (the
    # consumer may have read only one of the two) starts at the replica's log start, 0.
    expected = {(f"P.{topic}", p): committed.get((topic, p), 0) for p in (0, 1)}
    assert {(t, p): o for (t, p), o in on_b.items() if t == f"P.{topic}"} == expected
    audit = json.loads(outputs["audit"])
    assert {(r["group_id"], r["topic"]) for r in audit["resume_audit"]} >= {(group, f"P.{topic}")}


def _processes(marker: str) -> dict[int, str]:
    """Running processes whose command line holds ``marker``: pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            found[int(entry.name)] = cmdline
    return found


def test_streaming_replicate_on_the_executors_survives_a_lost_executor(
        standalone: Standalone, wheel: Path, make_config, unique, tmp_path: Path) -> None:
    """``replicate`` streaming as a spark-submit application: its copy tasks are long-running
    tasks on the worker's executor; ``kill -9`` of that executor JVM (a lost executor) loses
    nothing, the runs stay exact, and SIGTERM stops the application cleanly."""
    from tests.pipelines.replicate.kafka_io import (
        assert_runs_cover,
        assert_runs_exact,
        create_replication_tables,
        read_all,
        runs_of,
    )

    config = make_config(flows={"P->B": {"topics": ["sst-.*"]}})
    create_replication_tables(config.ledger_location)
    topic = unique("sst-topic")
    p, b = config.cluster("P"), config.cluster("B")
    kafka_admin.create_topic(p, topic, 2)
    produce(p, topic, [f"a{i}" for i in range(40)], 2)

    def recorded() -> int:
        return sum(n for _, _, _, n in runs_of(config, topic))

    events = tmp_path / "events"
    events.mkdir()
    work = tmp_path / "cwd"
    work.mkdir()
    cmd = submit_command(standalone.url, wheel, events, "replicate", "--flow", "P->B",
                         "--commit-interval", "1", "--interval", "1", "--config", config.path)
    log_path = tmp_path / "replicate.log"
    with open(log_path, "wb") as out:
        app = subprocess.Popen(cmd, cwd=work, env=submit_env(), stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _await(lambda: recorded() >= 40 or app.poll() is not None, "the first runs", 300)
        assert app.poll() is None, log_path.read_text()[-4000:]
        executors = _processes("CoarseGrainedExecutorBackend")
        assert len(executors) == 1, executors
        lost = next(iter(executors))
        os.kill(lost, signal.SIGKILL)
        produce(p, topic, [f"b{i}" for i in range(40)], 2)
        _await(lambda: recorded() >= 80 or app.poll() is not None, "runs after the loss", 300)
        assert app.poll() is None, log_path.read_text()[-4000:]
        assert set(_processes("CoarseGrainedExecutorBackend")) - {lost}, "no new executor"
        # The Python driver (spark-submit's child) stops on SIGTERM as `replicate` does.
        driver = next(pid for pid, c in _processes(str(ROOT / "pipelines" / "replicate" /
                                                       "job.py")).items()
                      if "java" not in c.split(" ")[0])
        os.kill(driver, signal.SIGTERM)
        assert app.wait(180) == 0, log_path.read_text()[-4000:]
    finally:
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
            app.wait()

    source, replica = read_all(p, topic, 2), read_all(b, f"P.{topic}", 2)
    runs = runs_of(config, topic)
    assert_runs_exact(runs, source, replica)
    assert_runs_cover(runs, source)
    assert sum(len(r) for r in replica.values()) >= 80  # at least once: duplicates unmapped
    log = event_log(events, set())
    added = [e for e in log if e["Event"] == "SparkListenerExecutorAdded"]
    removed = [e for e in log if e["Event"] == "SparkListenerExecutorRemoved"]
    assert len(added) >= 2 and removed, "the lost executor was not replaced"
    tasks = [e["Task Info"] for e in log if e["Event"] == "SparkListenerTaskEnd"]
    assert tasks and {t["Executor ID"] for t in tasks} <= {e["Executor ID"] for e in added}
