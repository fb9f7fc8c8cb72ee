"""Streaming replication (``replicate`` without ``--once``): exact runs within a commit interval,
topic changes while streaming, a lost worker, the channel catch-up, the lease."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.replicate import channel, topics
from pipelines.replicate.job import LeaseError, replicate_continuously
from tests.pipelines.replicate.kafka_io import (
    assert_runs_cover,
    assert_runs_exact,
    create,
    create_replication_tables,
    delete,
    produce,
    read_all,
    runs_of,
    sample,
)

pytestmark = [pytest.mark.kafka, pytest.mark.e2e]

COMMIT_S = 1.0


@pytest.fixture
def make_config(make_config):
    """The shared fixture, with the replication tables created through delta-rs: the streaming
    driver then needs no JVM at all (Spark would create them on a first run)."""
    def build(**overrides):
        config = make_config(**overrides)
        create_replication_tables(config.ledger_location)
        return config

    return build


def covered(config, topic: str, counts: dict[int, int]) -> bool:
    mapped: dict[int, int] = {}
    for p, _, _, n in runs_of(config, topic):
        mapped[p] = mapped.get(p, 0) + n
    return all(mapped.get(p, 0) >= n for p, n in counts.items())


class Job:
    """``replicate_continuously`` in a thread, with its result and stop."""

    def __init__(self, config, spark=None, executor: str = "local", **kwargs) -> None:
        self.stop = threading.Event()
        self.result = None
        self.error: BaseException | None = None
        self.commits: list[channel.RecordedCommit] = []
        kwargs.setdefault("commit_interval_s", COMMIT_S)
        kwargs.setdefault("interval_s", 0.5)

        def run() -> None:
            try:
                self.result = replicate_continuously(spark, config, "P->B", stop=self.stop,
                                                     executor=executor,
                                                     on_commit=self.commits.append, **kwargs)
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def wait_for(self, condition, what: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.error is None, f"job failed: {self.error!r}"
            assert self.thread.is_alive(), "job ended"
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.2)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(120)
        assert not self.thread.is_alive(), "job did not stop"
        if self.error is not None:
            raise self.error


def check_exact(config, topic: str, partitions: int) -> dict[int, dict]:
    p, b = config.cluster("P"), config.cluster("B")
    source = read_all(p, topic, partitions)
    replica = read_all(b, f"P.{topic}", partitions)
    runs = runs_of(config, topic)
    assert_runs_exact(runs, source, replica)
    assert_runs_cover(runs, source)
    return replica


def test_streams_records_and_records_exact_runs_each_commit(make_config, unique):
    topic = unique("stream")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    p = config.cluster("P")
    create(p, topic, 3)
    produce(p, topic, sample(3, 40, "a"))
    job = Job(config)
    try:
        job.wait_for(lambda: covered(config, topic, {q: 40 for q in range(3)}), "first runs")
        produce(p, topic, sample(3, 25, "b"))  # while streaming
        job.wait_for(lambda: covered(config, topic, {q: 65 for q in range(3)}), "new runs")
    finally:
        job.finish()
    replica = check_exact(config, topic, 3)
    assert sum(len(r) for r in replica.values()) == 3 * 65  # no duplicate without a crash
    # The metrics hook saw every delivered record, with its latency and bytes.
    parts = [d for c in job.commits for d in c.parts if d.topic == topic]
    assert sum(d.records for d in parts) == 3 * 65
    assert all(d.latency_max_ms >= 0 and d.latency_sum_ms >= 0 and d.bytes > 0 for d in parts)
    assert [c.batch_id for c in job.commits] == sorted({c.batch_id for c in job.commits})
    assert job.result.records_copied == 3 * 65 and job.result.errors == {}
    # Three partitions stream in one task (plan.task_count: its costs are per task).
    assert len({d.task for d in parts}) == 1


def test_a_stop_records_every_copy_its_tasks_made_whatever_the_linger(make_config,
                                                                      kafka_clusters, unique):
    """F24 (torture seed 7000 alo): a task asked to stop flushed its copies, queued the report
    of what that flush delivered, and exited without sending it; the next run copied those
    records again, duplicates without a crash. A target ``linger.ms`` of a second (a
    throughput setting) holds the report past the task's exit at every stop under load."""
    topic = unique("linger")
    clusters = {a: {"bootstrap.servers": kafka_clusters.bootstrap(a)} for a in ("P", "B")}
    clusters["B"]["linger.ms"] = 1000
    config = make_config(clusters=clusters, flows={"P->B": {"topics": [topic]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, topic, 2)
    writing = threading.Event()
    writing.set()

    def write() -> None:  # copies are always in flight when the stop comes
        n = 0
        while writing.is_set():
            produce(p, topic, sample(2, 5, f"w{n}"))
            n += 1
            time.sleep(0.05)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        job = Job(config)
        try:
            job.wait_for(lambda: covered(config, topic, {0: 30, 1: 30}), "first runs")
        finally:
            job.finish()
    finally:
        writing.clear()
        writer.join(30)
    replica = _ends(b, f"P.{topic}", 2)
    recorded = {q: max(d + n for q2, _, d, n in runs_of(config, topic) if q2 == q)
                for q in range(2)}
    assert recorded == replica, "every copy on the target is in a recorded run"
    job = Job(config)  # resumes where the recorded runs end: nothing is copied twice
    try:
        job.wait_for(lambda: covered(config, topic, _ends(p, topic, 2)), "the rest")
    finally:
        job.finish()
    check_exact(config, topic, 2)
    source = read_all(p, topic, 2)
    assert {q: len(r) for q, r in read_all(b, f"P.{topic}", 2).items()} == \
        {q: len(r) for q, r in source.items()}


def test_topics_created_grown_and_removed_while_streaming(make_config, unique):
    grow, gone = unique("grow"), unique("gone")
    config = make_config(flows={"P->B": {"topics": [f"{grow}.*", f"{gone}.*"]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, grow, 2)
    create(p, gone, 1)
    produce(p, grow, sample(2, 10, "a"))
    produce(p, gone, sample(1, 10, "a"))
    job = Job(config, refresh_s=1.5)
    new = f"{grow}-new"
    try:
        job.wait_for(lambda: covered(config, grow, {0: 10, 1: 10})
                     and covered(config, gone, {0: 10}), "first runs")
        topics.grow_partitions(p, grow, 4)
        create(p, new, 2)
        produce(p, grow, sample(4, 10, "b"))
        produce(p, new, sample(2, 10, "b"))
        delete(p, gone)
        job.wait_for(lambda: covered(config, grow, {0: 20, 1: 20, 2: 10, 3: 10})
                     and covered(config, new, {0: 10, 1: 10}), "changes replicated")
        assert kafka_admin.list_topics(b)[f"P.{grow}"] == 4
        produce(p, grow, sample(4, 5, "c"))  # the others still stream
        job.wait_for(lambda: covered(config, grow, {q: 25 if q < 2 else 15
                                                    for q in range(4)}), "more runs")
    finally:
        job.finish()
    check_exact(config, grow, 4)
    check_exact(config, new, 2)


def test_a_lost_worker_is_replaced_and_nothing_is_lost(make_config, unique):
    topic = unique("lost")
    config = make_config(flows={"P->B": {"topics": [topic], "tasks.max": 2}})
    p = config.cluster("P")
    create(p, topic, 2)
    produce(p, topic, sample(2, 30, "a"))
    job = Job(config)
    try:
        job.wait_for(lambda: covered(config, topic, {0: 30, 1: 30}), "first runs")
        streamer_children = _children(os.getpid())
        assert len(streamer_children) == 2, "tasks.max 2: a worker per partition"
        os.kill(streamer_children[0], signal.SIGKILL)
        produce(p, topic, sample(2, 30, "b"))
        job.wait_for(lambda: covered(config, topic, {0: 60, 1: 60}), "runs after the loss")
    finally:
        job.finish()
    check_exact(config, topic, 2)
    # The surviving task went on: only the lost one was replaced.
    tasks = {d.task for c in job.commits for d in c.parts}
    assert len(tasks) == 3, tasks


@pytest.mark.spark
def test_streams_with_long_running_spark_tasks(spark, make_config, unique):
    topic = unique("spark")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    p = config.cluster("P")
    create(p, topic, 2)
    produce(p, topic, sample(2, 30, "a"))
    job = Job(config, spark, executor="spark")
    try:
        job.wait_for(lambda: covered(config, topic, {0: 30, 1: 30}), "first runs", timeout=240)
        produce(p, topic, sample(2, 20, "b"))  # the same Spark tasks copy these
        job.wait_for(lambda: covered(config, topic, {0: 50, 1: 50}), "new runs", timeout=120)
    finally:
        job.finish()
    replica = check_exact(config, topic, 2)
    assert sum(len(r) for r in replica.values()) == 100


@pytest.mark.spark
def test_spark_tasks_leave_a_slot_for_the_ledgers_spark_commits(spark, make_config, unique):
    """Copy tasks hold their slots for good; with a ledger committed by Spark (a catalog
    ledger's case, forced here) the commits run in the slot they leave free (local[2]: one
    copy task), so runs keep being recorded."""
    from pipelines.replicate.stream_workers import SparkStreams

    assert SparkStreams(spark, spark_ledger=True).slots == 1
    topic = unique("sparkled")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    p = config.cluster("P")
    create(p, topic, 2)
    produce(p, topic, sample(2, 20, "a"))
    job = Job(config, spark, executor="spark", ledger_writes="spark")
    try:
        job.wait_for(lambda: covered(config, topic, {0: 20, 1: 20}), "first runs", timeout=240)
        produce(p, topic, sample(2, 10, "b"))
        job.wait_for(lambda: covered(config, topic, {0: 30, 1: 30}), "new runs", timeout=120)
    finally:
        job.finish()
    check_exact(config, topic, 2)
    assert len(job.commits) >= 2


def test_a_second_driver_of_a_flow_takes_over_and_the_first_stops(make_config, unique):
    topic = unique("lease")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    create(config.cluster("P"), topic, 1)
    job = Job(config)
    try:
        job.wait_for(lambda: _children(os.getpid()), "the first job's task")
        # The same group instance: the newcomer fences the first job, which stops.
        second = Job(config)
        second.wait_for(lambda: job.error is not None or not job.thread.is_alive(),
                        "the first job to stop")
        assert isinstance(job.error, LeaseError)
        second.finish()
    finally:
        job.stop.set()
        job.thread.join(60)


def _ends(cluster, topic: str, partitions: int) -> dict[int, int]:
    """``{partition: end offset}`` of ``topic`` now."""
    return {q: hi for q, (_, hi) in kafka_offsets.watermarks(cluster, topic, partitions).items()}


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"spawn_main" in f.read():
                    out.append(int(entry))
    return sorted(out)
