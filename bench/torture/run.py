"""Run one history on a fresh pair of embedded clusters and hand the evidence to the checker.

Invariants:
    * Each history has its own brokers (fresh data), ledger (a copy of an empty one), config
      and names, so histories never see each other's topics, groups, runs channel or lease.
    * Everything started here is stopped in ``finally``: sessions, producers, jobs (their whole
      process groups), brokers; even when the history fails half way.
    * A move is attempted only after every fault of its phase is healed and its groups have no
      active member; its outcome (and ``status``'s verdict before it) is evidence, never an
      exception: the history goes on from wherever the groups are.
"""

from __future__ import annotations

import json
import random
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from bench.torture import checker, faults, ops
from bench.torture.history import History
from bench.torture.moves import Moves
from bench.torture.prepare import config_file, groups_empty, wait_topics
from bench.torture.readers import end_offsets
from bench.torture.workload import GroupSession, Read, TopicProducer, committed_offsets
from ledger.config import config_from_mapping
from pipelines.devtools.clusters import EmbeddedClusters

CATCH_UP_BOUND_S = 120  # replication caught up after producers and faults stopped


@dataclass
class Outcome:
    history: History
    report: checker.Report
    operations: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    read: int = 0
    seconds: float = 0.0
    harness_errors: list[str] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=dict)


class HistoryRun(Moves):
    def __init__(self, h: History, workdir: Path, template: Path) -> None:
        self.h, self.workdir = h, workdir
        self.rng = random.Random(h.seed * 7919 + 1)
        workdir.mkdir(parents=True, exist_ok=True)
        self.config, raw = config_file(h, workdir)
        self.clusters = EmbeddedClusters(config_from_mapping(raw, path=str(self.config)),
                                         tied_to_parent=True)
        self.bootstraps = {a: raw["clusters"][a]["bootstrap.servers"] for a in ("P", "B")}
        ops.copy_ledger(template, workdir / "ledger")
        self.calls: list[ops.Call] = []
        self.readiness: list[str] = []
        self.harness: list[str] = []  # the torture test's own failures, never anomalies
        self.stages: dict[str, float] = {}
        self._stage_at = time.monotonic()
        self.fault_log: list[tuple[str, str]] = []
        self.operations: dict[str, int] = {}
        self.faults: dict[str, int] = {}
        self.disasters: list[tuple[str, str, dict[tuple[str, int], int]]] = []
        self.sessions: dict[str, list[list[Read]]] = {g.name: [] for g in h.groups}
        self.processed: dict[str, list[Read]] = {g.name: [] for g in h.groups}
        self.producers: list[TopicProducer] = []
        base = [ops.CLI]
        tail = ["--config", str(self.config)]
        # a short refresh: partitions added during a history are replicated within it
        commit = ["--commit-interval", str(h.commit_interval_s), "--interval", "1",
                  "--refresh-interval", "10"]
        env = ops.job_env(workdir)
        self.jobs = {f"replicate {f}": faults.Job(f"replicate {f}",
                                                  [*base, "replicate", "--flow", f, *commit,
                                                   *tail], workdir, env)
                     for f in ("P->B", "B->P")}
        self.jobs["checkpoint"] = faults.Job("checkpoint", [*base, "checkpoint", "--flow",
                                                            "P->B", *tail], workdir, env)

    def count(self, what: dict[str, int], kind: str) -> None:
        what[kind] = what.get(kind, 0) + 1

    # --- groups --------------------------------------------------------------------------

    def topics_on(self, alias: str) -> list[str]:
        other = "B" if alias == "P" else "P"
        return [n for t in self.h.topics for n in (t.name, f"{other}.{t.name}")]

    def start_sessions(self, alias: str, done=None) -> list[GroupSession]:
        sessions = [GroupSession(g, alias, self.bootstraps[alias], self.topics_on(alias),
                                 random.Random(self.rng.random()), done=done)
                    for g in self.h.groups]
        for s in sessions:
            s.start()
        return sessions

    def stop_sessions(self, sessions: list[GroupSession]) -> None:
        """Each session's reads kept (and written to ``sessions.jsonl`` in the history's
        folder, to replay a judgement); a session still running is a harness error."""
        with (self.workdir / "sessions.jsonl").open("a") as out:
            for s in sessions:
                result = s.stop()
                if s.is_alive():
                    self.harness.append(f"a session of {result.group} on {result.cluster} "
                                        "still ran 180 s after its stop")
                self.sessions[result.group].append(result.reads)
                self.processed[result.group].extend(result.processed)
                out.write(json.dumps({
                    "group": result.group, "cluster": result.cluster, "at": time.time(),
                    "commits": result.commits, "errors": result.errors,
                    "processed": len(result.processed),
                    "reads": [[r.topic, r.partition, r.offset, r.rid] for r in result.reads],
                }) + "\n")

    # --- faults and jobs -----------------------------------------------------------------

    def heal(self) -> None:
        for job in self.jobs.values():
            job.resume()
            if job.reap() is not None or not job.alive():
                job.start()
        if any(s.pid is None for s in self.clusters.status()):
            self.clusters.up()

    def topic_fault(self, kind: str, target: str) -> None:
        """``add_partitions`` or ``delete_records`` on ``<cluster>/<topic index>[/<added>]``."""
        alias, index, *added = target.split("/")
        topic = self.h.topics[int(index) % len(self.h.topics)].name
        if kind == "add_partitions":
            faults.add_partitions(self.bootstraps[alias], topic, int(added[0]))
        else:
            faults.delete_records(self.bootstraps[alias], topic,
                                  f"{alias}->{'B' if alias == 'P' else 'P'}",
                                  self.workdir / "ledger", [g.name for g in self.h.groups])

    def faults_during(self, phase) -> None:
        started = time.monotonic()
        for f in phase.faults:
            time.sleep(f.delay_s)  # the history's timing: when the fault lands
            self.heal()
            self.fault_log.append((f.kind, f.target))
            self.count(self.faults, f.kind)
            if f.kind in ("add_partitions", "delete_records"):
                self.topic_fault(f.kind, f.target)
            else:
                faults.apply(f.kind, f.target, f.hold_s, self.jobs, self.clusters)
        time.sleep(max(0.0, phase.consume_s - (time.monotonic() - started)))
        self.heal()

    # --- moves ---------------------------------------------------------------------------

    def phase(self, phase, here: str) -> str:
        sessions = self.start_sessions(here)
        try:
            self.faults_during(phase)
        finally:
            self.stop_sessions(sessions)
        if phase.source != here:  # an earlier move failed (an anomaly already): not drawn
            self.count(self.operations, "skipped_after_a_failed_move")
            return here
        if phase.move == "disaster_failover":
            return self.disaster(phase)
        if phase.move.startswith("cutoff"):
            for p in self.producers:
                p.move_to(None)
            self.wait_caught_up()
            self.drain(here)
        if not groups_empty(self.bootstraps[here], [g.name for g in self.h.groups]):
            self.harness.append(f"a group kept active members on {here} before {phase.move}")
        moved = self.move(phase)
        there = phase.target if moved else here
        for p in self.producers:
            if phase.producers_follow or p._want is None:
                p.move_to(phase.target if phase.producers_follow else here)
        return there

    def wait_caught_up(self) -> bool:
        ok = True
        for flow in ("P->B", "B->P"):
            call = ops.wait_status(["--flow", flow, "--format", "json"], self.config,
                                   self.workdir, CATCH_UP_BOUND_S, self.calls)
            if call.returncode != 0:
                ok = False
                self.readiness.append(f"not_ready: replication {flow} not caught up within "
                                      f"{CATCH_UP_BOUND_S}s after faults and producers "
                                      f"stopped (status rc {call.returncode})")
        return ok

    def drain(self, here: str, expected: set[str] | None = None, bound_s: float = 60) -> None:
        """Each group reads on ``here`` until it processed ``expected`` (or its log ends)."""
        ends = end_offsets(self.bootstraps[here], self.topics_on(here))
        deadline = time.monotonic() + bound_s

        def done(result) -> bool:
            if time.monotonic() > deadline:
                return True
            if expected is not None:
                have = {r.rid for r in self.processed[result.group]} | \
                    {r.rid for r in result.processed}
                return expected <= have
            committed = committed_offsets(self.bootstraps[here], result.group)
            return all(committed.get(k, 0) >= end for k, end in ends.items() if end)

        sessions = self.start_sessions(here, done=done)
        for s in sessions:
            s.join(bound_s + 60)
        self.stop_sessions(sessions)

    # --- the whole history ---------------------------------------------------------------

    def run(self) -> Outcome:
        h = self.h
        started = time.monotonic()
        outcome_errors: list[str] = self.harness
        try:
            self.clusters.up()
            for alias in ("P", "B"):
                admin = AdminClient({"bootstrap.servers": self.bootstraps[alias],
                                     "log_level": 0})
                for f in admin.create_topics([NewTopic(t.name, t.partitions, 1)
                                              for t in h.topics]).values():
                    f.result(60)
            for job in self.jobs.values():
                job.start()
            for alias, other in (("P", "B"), ("B", "P")):
                wait_topics(self.bootstraps[other], [f"{alias}.{t.name}" for t in h.topics])
            self.producers = [TopicProducer(t, self.bootstraps, h.seed * 100 + i)
                              for i, t in enumerate(h.topics)]
            for p in self.producers:
                p.start()
                p.move_to("P")
            self.stage("setup")
            here = "P"
            for phase in h.phases:
                here = self.phase(phase, here)
            sessions = self.start_sessions(here)
            try:
                time.sleep(h.final_consume_s)  # the history's last stretch of reading
            finally:
                self.stop_sessions(sessions)
            self.stage("moves")
            for p in self.producers:
                p.stop()
            self.heal()
            self.wait_caught_up()
            self.stage("caught_up")
            expected = checker.committed_ids(self.bootstraps, [t.name for t in h.topics])
            self.drain(here, expected)
            self.stage("drain")
            for job in self.jobs.values():
                if job.reap() is None and job.alive():
                    job.signal(signal.SIGTERM)
            self.stage("stop")
            report = checker.check(self.evidence())
            self.stage("check")
            acked = sum(p.produced for p in self.producers)
            deleted = any(kind == "delete_records" for kind, _ in self.fault_log)
            aborted = sum(p.aborted for p in self.producers)
            if deleted:  # the sources no longer hold what the log starts moved past
                report.produced, report.aborted = acked, aborted
            elif acked != report.produced or aborted != report.aborted:
                outcome_errors.append(
                    f"the sources hold {report.produced} committed and {report.aborted} aborted "
                    f"records, the producers counted {acked} and "
                    f"{sum(p.aborted for p in self.producers)} (errors: "
                    f"{[e for p in self.producers for e in p.errors][:3]})")
        except Exception as exc:  # a harness failure: reported, never hidden
            where = traceback.extract_tb(exc.__traceback__)[-1]
            outcome_errors.append(f"{type(exc).__name__}: {exc} (at {Path(where.filename).name}"
                                  f":{where.lineno})")
            report = checker.Report()
        finally:
            for p in self.producers:
                p._halt.set()
            for job in self.jobs.values():
                job.resume()
                job.ensure_stopped()
            self.clusters.down()
        return Outcome(h, report, self.operations, self.faults,
                       sum(len(v) for v in self.processed.values()),
                       time.monotonic() - started, outcome_errors, self.stages)

    def stage(self, name: str) -> None:
        """Seconds since the previous stage ended (where a history's time goes)."""
        now = time.monotonic()
        self.stages[name] = round(now - self._stage_at, 1)
        self._stage_at = now

    def evidence(self) -> checker.Evidence:
        exits = [e for job in self.jobs.values() for e in job.exits]
        return checker.Evidence(
            [t.name for t in self.h.topics], self.bootstraps, self.workdir / "ledger",
            self.h.mode, self.h.commit_interval_s, sum(t.rate for t in self.h.topics),
            self.sessions, self.processed, self.fault_log, exits, self.calls, self.readiness,
            self.disasters)
