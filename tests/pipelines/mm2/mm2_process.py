"""Real Apache Kafka MirrorMaker 2 (dedicated mode) for the embedded clusters, from jars/mm2.

The same setup as a deployment's ``connect-mirror-maker.sh mm2.properties``: flow P->B enabled,
B->P disabled (MM2 still runs B->P's heartbeat connector), single-broker replication factors,
intervals lowered so the tests wait seconds, not minutes. Stopped with SIGTERM, always.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pipelines.devtools.settings import LEAN_JVM_OPTIONS
from pipelines.spark import jars_dir

LOG4J = """status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.mirror.name = org.apache.kafka.connect.mirror
logger.mirror.level = INFO
"""


def mm2_properties(p: str, b: str, *, topics: str, groups: str, run_id: str,
                   extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    props = {
        "clusters": "P, B",
        "P.bootstrap.servers": p,
        "B.bootstrap.servers": b,
        "P->B.enabled": "true",
        "B->P.enabled": "false",
        "P->B.topics": topics,
        "P->B.groups": groups,
        "tasks.max": "1",
        "emit.checkpoints.enabled": "true",
        "emit.checkpoints.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "refresh.groups.interval.seconds": "1",
        "refresh.topics.interval.seconds": "1",
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "offset.storage.topic": f"mm2-offsets.P.{run_id}.internal",
        "config.storage.topic": f"mm2-configs.P.{run_id}.internal",
        "status.storage.topic": f"mm2-status.P.{run_id}.internal",
        # Connect commits MirrorSourceConnector's source offsets every 60 s by default. It is a
        # worker setting, which MM2 takes from the target cluster's properties (B.*) and not from
        # the top level (only offset.storage.*, task.*, worker.* and a few more are passed on).
        "B.offset.flush.interval.ms": "1000",
        # Consumers start from the log start, as a deployment that predates the topics.
        "P.consumer.auto.offset.reset": "earliest",
    }
    props.update({k: str(v) for k, v in (extra or {}).items()})
    return props


class MirrorMaker2:
    """One MirrorMaker 2 JVM; ``stop()`` sends SIGTERM and waits."""

    def __init__(self, workdir: Path, props: Mapping[str, str]):
        self.workdir = workdir
        self.props = dict(props)
        self.proc: subprocess.Popen | None = None

    @property
    def connect_offsets_topic(self) -> str:
        return self.props["offset.storage.topic"]

    @property
    def log(self) -> Path:
        return self.workdir / "mm2.log"

    def start(self) -> MirrorMaker2:
        jars = jars_dir("mm2")
        if not (jars / f"connect-mirror-{_kafka_version()}.jar").exists():
            raise RuntimeError(f"MirrorMaker 2 jars missing in {jars}: run `make setup`")
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "mm2.properties").write_text(
            "".join(f"{k} = {v}\n" for k, v in self.props.items()))
        (self.workdir / "log4j2.properties").write_text(LOG4J)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                # C1 only: a short-lived JVM starts sooner and leaves the cores to the rest.
                ["java", "-Xms128m", "-Xmx512m", *LEAN_JVM_OPTIONS.split(),
                 "-Djava.awt.headless=true",
                 f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                 "-cp", f"{jars}/*", "org.apache.kafka.connect.mirror.MirrorMaker",
                 str(self.workdir / "mm2.properties")],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            tail = self.log.read_text()[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"MirrorMaker 2 exited: {tail}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def _kafka_version() -> str:
    import re

    pom = Path(__file__).resolve().parents[3] / "jvm" / "mm2" / "pom.xml"
    return re.search(r"<kafka.version>([^<]+)<", pom.read_text()).group(1)


def await_condition(what: str, check: Callable[[], Any], timeout: float = 300.0,
                    mm2: MirrorMaker2 | None = None) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` at the deadline.

    MirrorMaker 2's own group offset sync once did not finish within 120 s on a loaded 2-core
    machine with both test workers busy (it passed alone in 161 s for the module): the deadline
    is generous, and a passing run never waits for it.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if mm2 is not None:
            mm2.check_alive()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)  # polling a condition with a deadline


def new_run_id() -> str:
    return uuid.uuid4().hex[:8]


# --- what MM2 has done, read from the clusters (by any user allowed to read them) ------------


def ends(cluster: Any, topic: str) -> dict[int, int]:
    """End offset of every partition of ``topic``."""
    from pipelines.edge import kafka_admin, kafka_offsets

    partitions = kafka_admin.list_topics(cluster)[topic]
    return {p: hw for p, (_, hw) in kafka_offsets.watermarks(cluster, topic, partitions).items()}


def replicated(config: Any, topic: str) -> bool:
    """MM2 has copied every record of ``topic`` to ``P.<topic>`` on B."""
    from pipelines.edge import kafka_admin

    if f"P.{topic}" not in kafka_admin.list_topics(config.cluster("B")):
        return False
    return ends(config.cluster("B"), f"P.{topic}") == ends(config.cluster("P"), topic)


def mm2_checkpoints(config: Any, group: str) -> dict[int, Any]:
    """MM2's latest checkpoint per partition of ``group`` in P.checkpoints.internal on B."""
    from pipelines.mm2 import formats
    from pipelines.mm2.ingest import Source, read_topic

    records, _ = read_topic(Source(config.cluster("B"), "P.checkpoints.internal"), None)
    latest = {}
    for r in records:
        cp = formats.decode_checkpoint(r.key, r.value)
        if cp.group == group:
            latest[cp.partition] = cp
    return latest


def mm2_committed_all(config: Any, mm2: MirrorMaker2, topic: str) -> bool:
    """MM2's Connect offsets say every record of ``topic`` was acknowledged by B."""
    from pipelines.mm2.ingest import Source, connect_offsets, read_all_partitions

    records = read_all_partitions(Source(config.cluster("B"), mm2.connect_offsets_topic))
    latest = connect_offsets(config.flow("P->B"), records)
    end = ends(config.cluster("P"), topic)
    return all(latest.get((topic, p)) is not None and latest[(topic, p)].offset + 1 == end[p]
               for p in end)


def await_checkpointed(config: Any, mm2: MirrorMaker2, topic: str, group: str,
                       committed: Mapping[int, int]) -> dict[int, Any]:
    """Wait until MM2 has replicated every record of ``topic``, committed its source offsets
    and checkpointed ``group``'s commits (``{partition: offset}``) of it; MM2's checkpoints."""
    await_condition("MM2 to replicate the topic", lambda: replicated(config, topic), mm2=mm2)
    await_condition("MM2 to commit its source offsets",
                    lambda: mm2_committed_all(config, mm2, topic), mm2=mm2)

    def checkpointed() -> dict[int, Any] | None:
        latest = mm2_checkpoints(config, group)
        return latest if len(latest) == len(committed) and all(
            latest[p].upstream_offset == committed[p] for p in latest) else None

    return await_condition("MM2 checkpoints of the group", checkpointed, mm2=mm2)


def await_group_known(mm2: MirrorMaker2, group: str) -> None:
    """Wait until MM2's checkpoint task has restarted with ``group`` and started its stores.

    A checkpoint task restarts whenever its list of groups changes, and the offset-sync store it
    starts keeps only the newest sync per partition of what was written before it started: a
    commit older than that sync is never checkpointed. A test that commits first, waits here,
    then produces gets every sync into a running store, whatever the machine's speed.
    """
    def started() -> bool:
        lines = mm2.log.read_text(errors="replace").splitlines() if mm2.log.exists() else []
        known = [i for i, line in enumerate(lines)
                 if "consumer groups" in line and "checkpointing" in line and group in line]
        return bool(known) and any("starting checkpoint and offset sync stores" in line
                                   for line in lines[known[-1]:])

    await_condition(f"MM2's checkpoint task to start with group {group}", started, mm2=mm2)
