"""Long-running jobs of a history (``replicate``, ``checkpoint``) and the faults done to them
and to the brokers.

Invariants:
    * Every job runs in its own process group (``start_new_session``) with its output in its own
      log file; :meth:`Job.ensure_stopped` ends the whole group, so nothing outlives a history.
    * Each ending of a job is recorded as an :class:`Exit` with what caused it: ``None`` when the
      job ended on its own (a fatal error it took, or a crash), else the signal we sent. The
      checker judges exits; this module only records them.
    * Healing a fault always leaves the brokers answering and the job running again.
    * Topic faults never take a record from a group: partitions are only added, and a log
      start moves only below every group's commit and below what the runs cover.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from bench.torture.readers import read_runs
from bench.torture.workload import committed_offsets
from pipelines.devtools.clusters import EmbeddedClusters


@dataclass
class Exit:
    job: str
    returncode: int
    signal_sent: str | None  # None: the job ended by itself
    log: str  # its log file
    log_from: int  # byte offset of this incarnation's output in the log


class Job:
    """One long-running CLI job (restartable): ``replicate --flow`` or ``checkpoint``."""

    def __init__(self, name: str, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.name, self.argv, self.cwd, self.env = name, argv, cwd, env
        self.log = cwd / f"{name.replace('->', '-').replace(' ', '_')}.log"
        self.proc: subprocess.Popen | None = None
        self.exits: list[Exit] = []
        self.starts = 0
        self._from = 0

    def start(self) -> None:
        self._from = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, cwd=self.cwd, env=self.env, stdout=out,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        self.starts += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def reap(self) -> Exit | None:
        """Record the exit of a job that ended by itself (None if it runs or was reaped)."""
        if self.proc is not None and self.proc.poll() is not None:
            ended = Exit(self.name, self.proc.returncode, None, str(self.log), self._from)
            self.exits.append(ended)
            self.proc = None
            return ended
        return None

    def signal(self, sig: signal.Signals, group: bool = False, wait_s: float = 90.0) -> Exit:
        """Send ``sig`` (to the leader, or its whole group as a terminal's Ctrl-C) and wait."""
        assert self.proc is not None
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            rc = -999  # did not stop: recorded as such, then killed
        self.ensure_stopped()
        ended = Exit(self.name, rc, sig.name, str(self.log), self._from)
        self.exits.append(ended)
        self.proc = None
        return ended

    def pause(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)

    def ensure_stopped(self) -> None:
        """SIGKILL to the whole group: workers included (a no-op when none is left)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)


def broker_pause(clusters: EmbeddedClusters, alias: str, hold_s: float) -> None:
    """SIGSTOP the broker's JVM for ``hold_s`` seconds, then SIGCONT it."""
    pid = clusters.pid(alias)
    if pid is None:
        return
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(hold_s)  # the fault's duration: nothing to await
    finally:
        os.kill(pid, signal.SIGCONT)


def broker_restart(clusters: EmbeddedClusters, alias: str, hold_s: float) -> None:
    """kill -9 the broker, keep it down ``hold_s`` seconds, start it again (same data)."""
    clusters.stop(alias, hard=True)
    time.sleep(hold_s)  # the fault's duration
    clusters.up()


def apply(fault_kind: str, target: str, hold_s: float, jobs: dict[str, Job],
          clusters: EmbeddedClusters) -> Exit | None:
    """Do one fault and heal it; returns the exit it caused, if it stopped a job."""
    if fault_kind == "sigstop_broker":
        broker_pause(clusters, target, hold_s)
        return None
    if fault_kind == "broker_restart":
        broker_restart(clusters, target, hold_s)
        return None
    job = jobs["checkpoint" if "checkpoint" in fault_kind else f"replicate {target}"]
    if not job.alive():
        return None
    if fault_kind == "sigstop_replicate":
        job.pause()
        try:
            time.sleep(hold_s)
        finally:
            job.resume()
        return None
    sig = {"kill9": signal.SIGKILL, "sigterm": signal.SIGTERM,
           "sigint": signal.SIGINT}[fault_kind.split("_")[0]]
    ended = job.signal(sig, group=fault_kind.startswith("sigint"))
    time.sleep(hold_s)  # down this long before the restart
    job.start()
    return ended


def add_partitions(bootstrap: str, topic: str, added: int) -> None:
    """Partitions added to a topic while it is written, read and replicated."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    now = len(admin.list_topics(topic, timeout=30).topics[topic].partitions)
    admin.create_partitions([NewPartitions(topic, now + added)])[topic].result(60)


def delete_records(bootstrap: str, topic: str, flow: str, ledger: Path,
                   groups: list[str]) -> None:
    """Move the log start of an original topic's partitions (as retention would), only below
    what every group has committed there and what the flow's runs cover: nothing a group still
    has to read is deleted."""
    covered: dict[int, int] = {}
    for r in read_runs(ledger):
        if r.flow == flow and r.topic == topic:
            covered[r.partition] = max(covered.get(r.partition, 0), r.u + r.n)
    commits = [committed_offsets(bootstrap, g) for g in groups]
    cut = []
    for p, end in covered.items():
        safe = min([end, *(c.get((topic, p), 0) for c in commits)])
        if safe > 0:
            cut.append(TopicPartition(topic, p, safe))
    if cut:
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        for f in admin.delete_records(cut, request_timeout=30).values():
            f.result(60)
