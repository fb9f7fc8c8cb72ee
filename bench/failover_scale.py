"""Failover at scale: every group of a cluster moved at once, timed as the operator runs it.

``python -m bench.failover_scale [--topics 200] [--partitions 5] [--groups 200]
[--topics-per-group 5] [--repeats 5] [--rate 200] [--sizes 0[,N] [--prebuilt PATH]]
[--profile [py-spy]] [--budget-minutes M] [--keep DIR]``  (smoke run: ``--topics 10 --groups 10
--repeats 1``)

Per ledger size (``0``: a young ledger made by ``offset-ledger ledger init``; ``N``: the
synthetic N-run ledger of :mod:`bench.ledger_scale`, built or copied as
:mod:`bench.operations` does), a fresh pair of the project's embedded clusters and:

* ``--topics`` topics ``fs-tNNN`` of ``--partitions`` partitions on P (1,000 partitions at the
  defaults), the same topics on B (where producers write between failover and failback), flows
  ``P->B`` and ``B->P``, each reverse-checkpointing the other's replicas, as the reference
  scenario and ``bench.torture`` configure them;
* ``--groups`` groups, half classic (``fs-cNNN``) and half KIP-848 (``fs-kNNN``,
  ``group.protocol=consumer``); each subscribes to ``--topics-per-group`` topics and commits
  on about 80 % of their partitions (a subset), as a member of its group (subscribed, assigned,
  then ``commit``; the group is of that protocol on the broker), then leaves: consumers are
  stopped at every move;
* one Spark Structured Streaming query (Spark's Kafka source, ``Trigger.AvailableNow``) on
  ``fs-t000``, moved with ``--spark-checkpoint`` (a move takes groups or one query, not both:
  its own rows);
* a producer thread writing ``--rate`` records/s over every partition of the cluster that is
  active (P, then B after a failover, P again after a failback).

Each cycle (``--repeats``, the median reported), as the person on call runs it::

    groups read on P (commits advance)   replicate --flow 'P->B' streams
    status --flow P->B --group ... (all)            timed (wall)
    translate --group-regex '.*' --from P --to B    timed (wall)
    failover --group-regex '.*' --from P --to B --catch-up --format json   timed (wall,
        and the verb's own seconds_to_ready: consumers stopped -> offsets written)
    read back every group's offsets on B (AdminClient), compared with the JSON and translate
    failover --spark-checkpoint ... --catch-up       timed; the query then runs on B
    producers move to B; groups read on B (P.fs-tNNN and fs-tNNN);
        replicate --flow 'B->P' streams instead
    status / translate B->P, failback --group-regex '.*' --from B --to P --catch-up, read
        back on P, failback of the query; producers move back to P; replicate 'P->B' again

Before each timed verb the bench waits (untimed, ``status --groups-only`` polled) until the
streaming replicate covered what the groups committed: the figure is the move itself, not
the replication's commit interval.

One replicate job streams at a time, the flow of the next move. ``--group-regex '.*'`` matches
offset-ledger's own groups on the move's source too: the lease group of the other flow's job
(``offset-ledger-replicate.B-P`` lives on P). While that job runs, its member makes the move
refuse (exit 2, "active member"); once it stops, its static member stays for the job's
session timeout (10 s), which the bench waits out (untimed), and the move then records an
operation for that empty group with nothing written: reported as a finding, not a failure.

Invariants:
    * Every verb runs as ``offset-ledger ...`` (the console script) in a new process; the
      project's modules are compiled once first (``bench.operations.compile_modules``).
    * Nothing passes unverified: after each move every group's committed offsets are read back
      on the target with our own AdminClient; an offset the verb said it wrote but the broker
      does not hold, a translated offset the group does not hold, or a group the move missed is
      a failure of the bench (exit 1), never a figure.
    * No live members at move time (the simulated consumers left their groups).
    * Everything started here (brokers, replicate jobs, producers, Spark) is stopped in
      ``finally`` blocks.

``--profile`` adds one cycle (not counted) with every verb under cProfile and prints, per
verb, the calls and cumulative seconds of the functions that talk to Kafka and the ledger:
where a verb's time goes when a target is missed. cProfile slows Python about 2x and does not
see a wait as a wait; ``--profile py-spy`` samples each verb from outside instead (wall clock,
waits included: ``calls/NNN-<verb>.spy``, py-spy's raw stacks, one line per stack), and prints
the main thread's seconds in the same functions.

Results: a table with the targets (2 cores: failover and failback ready < 5 s, ``status`` of
all groups < 2 s, ``translate --group-regex '.*'`` < 2 s; the same on an N-run ledger within
1.5x), and a JSON line appended to ``bench/results/failover_scale.jsonl``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from bench import operations
from bench.common import RESULTS_DIR, Processes, offset_ledger_bin

TARGETS = {"failover": 5.0, "failback": 5.0, "status": 2.0, "translate": 2.0}
RATIO = 1.5
QUERY_TOPIC_INDEX = 0
COMMITTED_SHARE = 0.8     # the subset of a group's partitions it commits on
PREFILL = 20              # records per partition before the first cycle
READY_BOUND_S = 240.0     # the untimed wait for replication to cover the commits
OWN_GROUPS = ("offset-ledger-",)  # the replicate jobs' lease groups and probes


# --- names and configuration ----------------------------------------------------------------


def topic_names(n: int) -> list[str]:
    return [f"fs-t{i:03d}" for i in range(n)]


def group_plans(groups: int, topics: list[str], per_group: int) -> dict[str, dict]:
    """``{group: {"protocol", "topics"}}``: the first half classic, the second KIP-848; each on
    ``per_group`` consecutive topics, so every topic is read by about the same number."""
    plans = {}
    for i in range(groups):
        protocol = "classic" if i < groups // 2 else "consumer"
        name = f"fs-{'c' if protocol == 'classic' else 'k'}{i:03d}"
        chosen = [topics[(i * per_group + j) % len(topics)] for j in range(per_group)]
        plans[name] = {"protocol": protocol, "topics": list(dict.fromkeys(chosen))}
    return plans


def write_config(workdir: Path, bootstraps: dict[str, str], ledger: Path) -> Path:
    """Both flows, each reverse-checkpointing the other's replicas (failback and a second
    failover translate both ways, as ``bench.torture.prepare`` sets it up)."""
    raw = {
        "clusters": {a: {"bootstrap.servers": b} for a, b in bootstraps.items()},
        "flows": {f"{s}->{t}": {"topics": ["fs-t.*"],
                                "reverse.checkpointed.topics": [f"{t}.fs-t.*"]}
                  for s, t in (("P", "B"), ("B", "P"))},
        "ledger": {"location": str(ledger)},
        "embedded": {"data.dir": str(workdir / "clusters")},
    }
    path = workdir / f"offset-ledger-{ledger.parent.name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# --- the CLI, as the operator runs it -------------------------------------------------------


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if operations.PYCACHE is not None:
        env["PYTHONPYCACHEPREFIX"] = str(operations.PYCACHE)
    return env


CALLS = [0]
"""How many verbs ran (each one's output is kept as ``calls/NNN-<verb>.out|.err``)."""
PROFILING = [""]
"""The profiler of the ``--profile`` cycle (``cprofile``: ``calls/NNN-<verb>.prof``; ``py-spy``:
wall-clock samples, waits included, ``calls/NNN-<verb>.spy``), empty otherwise."""
SPY_RATE = 200  # py-spy samples per second


def cli(config: Path, *argv: str, ok: tuple[int, ...] = (0,)) -> tuple[float, str, int]:
    """``offset-ledger ARGV --config CONFIG`` in a new process: (wall s, stdout, exit code)."""
    CALLS[0] += 1
    kept = config.parent / "calls" / f"{CALLS[0]:03d}-{argv[0]}"
    command = [offset_ledger_bin()]
    if PROFILING[0] == "cprofile":  # the console script's own code, under the profiler
        command = [sys.executable, "-m", "cProfile", "-o", str(kept.with_suffix(".prof")),
                   "-m", "pipelines.cli"]
    elif PROFILING[0] == "py-spy":  # sampled from outside: the waits count too
        command = [str(Path(sys.executable).with_name("py-spy")), "record", "--idle",
                   "--nonblocking", "-r", str(SPY_RATE), "-f", "raw", "-o",
                   str(kept.with_suffix(".spy")), "--", *command]
    started = time.perf_counter()
    done = subprocess.run([*command, *argv, "--config", str(config)],
                          capture_output=True, text=True, env=cli_env(), cwd=config.parent)
    seconds = time.perf_counter() - started
    if PROFILING[0] == "py-spy":  # its own lines share the verb's stdout
        done.stdout = "".join(line for line in done.stdout.splitlines(keepends=True)
                              if not line.startswith("py-spy> "))
    kept.parent.mkdir(exist_ok=True)
    kept.with_suffix(".out").write_text(done.stdout)
    kept.with_suffix(".err").write_text(f"{' '.join(argv)}\n{seconds:.3f}s exit "
                                        f"{done.returncode}\n{done.stderr}")
    if done.returncode not in ok or (PROFILING[0] and not done.stdout.strip()):
        # (cProfile's runner exits 0 whatever the verb returned: an empty stdout is a failure)
        raise RuntimeError(f"offset-ledger {' '.join(argv)[:300]} exited {done.returncode}: "
                           f"{done.stderr[-3000:]}")
    return seconds, done.stdout, done.returncode


# --- Kafka: topics, producers, groups -------------------------------------------------------


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    """All topics in one CreateTopics request (one per topic would take minutes at 200)."""
    client = admin(bootstrap)
    futures = client.create_topics([NewTopic(t, partitions, 1) for t in names],
                                   operation_timeout=60)
    for future in futures.values():
        future.result(120)


def watermarks(bootstrap: str, keys: list[tuple[str, int]]) -> dict[tuple[str, int], tuple]:
    """``{(topic, partition): (low, high)}`` in two batched ListOffsets calls."""
    client = admin(bootstrap)
    out = {}
    for spec, slot in ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 1)):
        futures = client.list_offsets({TopicPartition(t, p): spec for t, p in keys},
                                      request_timeout=60)
        for tp, future in futures.items():
            out.setdefault((tp.topic, tp.partition), [0, 0])[slot] = future.result(60).offset
    return {k: tuple(v) for k, v in out.items()}


def partitions_of(bootstrap: str, topics: list[str]) -> list[tuple[str, int]]:
    meta = admin(bootstrap).list_topics(timeout=60).topics
    return [(t, p) for t in topics if t in meta for p in sorted(meta[t].partitions)]


def committed_offsets(bootstrap: str, groups: list[str]) -> dict[str, dict]:
    """Every group's committed offsets, read back with our own AdminClient (all requests in
    flight at once: one OffsetFetch per group is what the client supports)."""
    client = admin(bootstrap)
    futures = {g: client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)],
                                                     request_timeout=60)[g] for g in groups}
    out = {}
    for group, future in futures.items():
        result = future.result(120)
        out[group] = {(tp.topic, tp.partition): tp.offset
                      for tp in result.topic_partitions if tp.offset >= 0}
    return out


class Producers(threading.Thread):
    """Writes ``rate`` records/s round-robin over the partitions of the active cluster."""

    def __init__(self, bootstraps: dict[str, str], parts: list[tuple[str, int]], rate: float):
        super().__init__(daemon=True, name="producers")
        self.parts, self.rate = parts, rate
        self.producers = {a: Producer({"bootstrap.servers": b, "linger.ms": 20,
                                       "enable.idempotence": True, "log_level": 0})
                          for a, b in bootstraps.items()}
        self.active: str | None = None
        self.sent = dict.fromkeys(bootstraps, 0)
        self.errors: list[str] = []
        self._halt = threading.Event()

    def move_to(self, alias: str | None) -> None:
        if self.active is not None:
            self.producers[self.active].flush(30)
        self.active = alias

    def fill(self, alias: str, per_partition: int) -> None:
        producer = self.producers[alias]
        for i in range(per_partition):
            for t, p in self.parts:
                producer.produce(t, value=f"{alias}-fill-{i}".encode(), partition=p,
                                 on_delivery=self._delivered)
            producer.poll(0)
        if producer.flush(120):
            raise RuntimeError(f"prefill of {alias} not delivered")

    def _delivered(self, err, _msg) -> None:
        if err is not None:
            self.errors.append(str(err))

    def run(self) -> None:
        step, i = 0.05, 0
        per_step = max(1, round(self.rate * step))
        while not self._halt.wait(step):
            alias = self.active
            if alias is None:
                continue
            producer = self.producers[alias]
            for _ in range(per_step):
                t, p = self.parts[i % len(self.parts)]
                producer.produce(t, value=f"{alias}-{i}".encode(), partition=p,
                                 on_delivery=self._delivered)
                i += 1
            self.sent[alias] += per_step
            producer.poll(0)

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        for producer in self.producers.values():
            producer.flush(30)


def commit_as_member(bootstrap: str, group: str, protocol: str, topics: list[str],
                     offsets: dict[tuple[str, int], int], bound_s: float = 120.0) -> None:
    """Join ``group`` with ``protocol`` (subscribe), wait for the assignment, commit
    ``offsets`` (what the simulated application processed), leave the group."""
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "log_level": 0}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    consumer = Consumer(conf)
    try:
        consumer.subscribe(topics)
        deadline = time.monotonic() + bound_s
        while not set(offsets) <= {(tp.topic, tp.partition) for tp in consumer.assignment()}:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group} ({protocol}) not assigned {len(offsets)} "
                                   f"partition(s) of {topics} within {bound_s:g}s")
            consumer.poll(0.1)
        if offsets:
            consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                            asynchronous=False)
    finally:
        consumer.close()


def advance_groups(bootstrap: str, plans: dict[str, dict], topics_on: dict[str, list[str]],
                   previous: dict[str, dict], rng: random.Random,
                   parallel: int = 16) -> dict[str, dict]:
    """Each group reads on: commits about half-way to nine-tenths of what each of its
    partitions holds now, never below what it committed before. Returns the commits."""
    keys = partitions_of(bootstrap, sorted({t for ts in topics_on.values() for t in ts}))
    marks = watermarks(bootstrap, keys)
    by_topic: dict[str, list[tuple[str, int]]] = {}
    for t, p in keys:
        by_topic.setdefault(t, []).append((t, p))
    wanted: dict[str, dict] = {}
    for group in plans:
        before = previous.get(group, {})
        offsets = {}
        for topic in topics_on[group]:
            for key in by_topic.get(topic, []):
                low, high = marks[key]
                if key not in before and rng.random() > COMMITTED_SHARE:
                    continue  # the subset: this group never commits this partition
                target = low + int((high - low) * rng.uniform(0.5, 0.9))
                offsets[key] = max(target, before.get(key, 0))
        wanted[group] = offsets
    with ThreadPoolExecutor(parallel) as pool:
        futures = [pool.submit(commit_as_member, bootstrap, g, plans[g]["protocol"],
                               [t for t in topics_on[g] if t in by_topic], wanted[g])
                   for g in plans]
        for future in futures:
            future.result()
    return wanted


# --- the Spark query ------------------------------------------------------------------------


def spark_session():
    from pipelines.spark import get_spark, jars_dir, spark_jars

    consumer_jars = sorted(str(p) for p in jars_dir("spark-kafka").glob("*.jar"))
    return get_spark("offset-ledger-bench-failover-scale", master="local[2]", ui=False,
                     extra_conf={"spark.jars": ",".join(spark_jars() + consumer_jars)})


def run_query(spark, bootstrap: str, subscribe: str, starting: str, checkpoint: Path) -> None:
    """One run of the user's query: reads what is there (``AvailableNow``), then stops."""
    query = (spark.readStream.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", subscribe)
             .option("startingOffsets", starting)
             .load()
             .writeStream.format("noop")
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the Spark query failed: {query.exception()}")


# --- one size -------------------------------------------------------------------------------


class Scenario:
    """One ledger size: clusters, topics, groups, the query, the jobs; the timed cycles."""

    def __init__(self, args: argparse.Namespace, workdir: Path, size: int, spark,
                 processes: Processes) -> None:
        self.args, self.workdir, self.size, self.spark = args, workdir, size, spark
        self.processes = processes
        self.rng = random.Random(size + 37)
        self.topics = topic_names(args.topics)
        self.plans = group_plans(args.groups, self.topics, args.topics_per_group)
        self.groups = list(self.plans)
        self.times: dict[str, list[float]] = {}
        self.failures: list[str] = []
        self.findings: set[str] = set()
        self.cycles = 0
        self.checks = {"offsets verified": 0, "groups verified": 0,
                       "resumed at the log start": 0}
        self.replicate: subprocess.Popen | None = None
        self.query_checkpoint = workdir / "queries" / "fs-query"

    def record(self, name: str, seconds: float) -> None:
        self.times.setdefault(name, []).append(seconds)

    # setup

    def prepare(self, bootstraps: dict[str, str], ledger: Path, prebuilt: Path | None) -> None:
        self.bootstraps = bootstraps
        self.config = write_config(self.workdir, bootstraps, ledger)
        if self.size and prebuilt is not None:
            operations.copy_ledger(prebuilt, ledger)
        elif self.size:
            from bench.ledger_scale import Shape, build_ledger

            build_ledger(self.spark, ledger, Shape(self.size))
        else:
            cli(self.config, "ledger", "init")
        for alias in ("P", "B"):
            create_topics(bootstraps[alias], self.topics, self.args.partitions)
        self.parts = partitions_of(bootstraps["P"], self.topics)
        self.producers = Producers(bootstraps, self.parts, self.args.rate)
        self.producers.fill("P", PREFILL)
        self.producers.start()
        self.producers.move_to("P")
        self.start_replicate("P->B")
        started = time.perf_counter()
        self.commits = advance_groups(bootstraps["P"], self.plans,
                                      {g: p["topics"] for g, p in self.plans.items()}, {},
                                      self.rng)
        print(f"  {len(self.groups)} groups committed on "
              f"{sum(map(len, self.commits.values())):,} partitions in "
              f"{time.perf_counter() - started:.1f}s", flush=True)
        self.query_checkpoint.parent.mkdir(parents=True, exist_ok=True)
        run_query(self.spark, bootstraps["P"], self.topics[QUERY_TOPIC_INDEX], "earliest",
                  self.query_checkpoint)

    def start_replicate(self, flow: str) -> None:
        self.stop_replicate()
        log = (self.workdir / f"replicate-{flow.replace('->', '-')}.log").open("a")
        self.replicate = self.processes.start(
            [offset_ledger_bin(), "replicate", "--flow", flow, "--config", str(self.config)],
            stdout=log, stderr=subprocess.STDOUT, env=cli_env(), cwd=self.workdir)

    def stop_replicate(self) -> None:
        if self.replicate is not None:
            Processes.stop(self.replicate)
            self.processes.started.remove(self.replicate)
            self.replicate = None

    # the cycle

    def await_ready(self, flow: str) -> None:
        """Untimed: until ``status --groups-only`` says every group can move (replication
        covers its commits), so the timed move measures the move."""
        self.await_own_groups_empty(flow.split("->")[0])
        named = [a for g in self.groups for a in ("--group", g)]
        deadline = time.monotonic() + READY_BOUND_S
        while True:
            _, _, code = cli(self.config, "status", "-v", "--flow", flow, *named, "--groups-only",
                             "--format", "json", ok=(0, 3))
            if code == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"groups not ready to move along {flow} within "
                                   f"{READY_BOUND_S:g}s")
            time.sleep(1)

    def await_own_groups_empty(self, alias: str, bound_s: float = 60.0) -> None:
        """Untimed: until the lease group of the replicate job stopped before this move (a
        static member, gone after the job's session timeout) has no member on ``alias``:
        ``--group-regex '.*'`` matches it, and a group with a member refuses the move. The
        groups' states come from ListGroups (describing a classic group can fail on Kafka 4)."""
        client = admin(self.bootstraps[alias])
        deadline = time.monotonic() + bound_s
        while True:
            busy = [g.group_id for g in client.list_consumer_groups(
                request_timeout=30).result(60).valid if g.group_id.startswith(OWN_GROUPS)
                and g.state is not None and g.state.name not in ("EMPTY", "DEAD")]
            if not busy:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"offset-ledger's own groups {busy} on {alias} still have "
                                   f"members {bound_s:g} s after their job stopped")
            time.sleep(0.5)

    def move(self, kind: str, source: str, target: str) -> None:
        flow = f"{source}->{target}"
        self.await_ready(flow)
        named = [a for g in self.groups for a in ("--group", g)]
        seconds, _, _ = cli(self.config, "status", "--flow", flow, *named, "--format", "json",
                            ok=(0, 3))
        self.record(f"status {flow} ({len(self.groups)} groups)", seconds)
        seconds, out, _ = cli(self.config, "translate", "--group-regex", ".*", "--from",
                              source, "--to", target, "--format", "json")
        self.record(f"translate --group-regex '.*' {flow}", seconds)
        translated = json.loads(out)
        seconds, out, _ = cli(self.config, kind, "--group-regex", ".*", "--from", source,
                              "--to", target, "--catch-up", "--format", "json")
        doc = json.loads(out)
        results = doc.get("operations", [doc])
        self.record(f"{kind} --group-regex '.*' --catch-up", seconds)
        self.record(f"{kind} (seconds_to_ready)", max(r["seconds_to_ready"] for r in results))
        started = time.perf_counter()
        self.commits = self.verify(kind, target, results, translated)
        self.record(f"read back {len(self.groups)} groups on the target (bench)",
                    time.perf_counter() - started)
        self.move_query(kind, source, target)

    def verify(self, kind: str, target: str, results: list[dict],
               translated: list[dict]) -> dict[str, dict]:
        """Every group's offsets on ``target`` against what the move and translate said."""
        moved = {r["group"] for r in results}
        missing = sorted(set(self.groups) - moved)
        if missing:
            self.failures.append(f"{kind}: {len(missing)} group(s) not moved: {missing[:5]}")
        extra = sorted(moved - set(self.groups))
        # '.*' also matches offset-ledger's own groups on the source (the lease group of a
        # replicate job whose target it is): a finding to report, not an offset mismatch.
        own = [g for g in extra if g.startswith(OWN_GROUPS)]
        if own:
            self.findings.add(f"{kind} --group-regex '.*' also moved offset-ledger's own "
                              f"group(s) {', '.join(own)}")
        if set(extra) - set(own):
            self.failures.append(f"{kind}: moved groups this bench did not make: {extra[:5]}")
        held = committed_offsets(self.bootstraps[target], self.groups)
        for r in results:
            have = held.get(r["group"], {})
            for w in r["offsets_written"]:
                key = (w["topic"], w["partition"])
                self.checks["offsets verified"] += 1
                if have.get(key) != w["offset"]:
                    self.failures.append(f"{kind}: {r['group']} {target}:{key} holds "
                                         f"{have.get(key)}, the verb wrote {w['offset']}")
        for row in translated:
            if row["offset"] is None or row["group"] not in held:
                continue
            key = (row["target_topic"], row["partition"])
            self.checks["offsets verified"] += 1
            if held[row["group"]].get(key) != row["offset"]:
                self.failures.append(f"{kind}: {row['group']} {target}:{key} holds "
                                     f"{held[row['group']].get(key)}, translate said "
                                     f"{row['offset']}")
        # "Cannot translate" with nothing the group read before its commit (an empty
        # partition, DESIGN.md "Readiness for a move"): the move resumes the group at the
        # target's log start, read back above. Only an untranslated partition the move wrote
        # nothing for is a failure.
        written = {(r["group"], w["topic"], w["partition"])
                   for r in results for w in r["offsets_written"]}
        untranslated = [r for r in translated if r["offset"] is None]
        left = [r for r in untranslated
                if (r["group"], r["target_topic"], r["partition"]) not in written]
        self.checks["resumed at the log start"] += len(untranslated) - len(left)
        if left:
            self.failures.append(f"{kind}: translate left {len(left)} partition(s) "
                                 f"untranslated and the move wrote nothing there: {left[:2]}")
        self.checks["groups verified"] += len(held)
        return held

    def move_query(self, kind: str, source: str, target: str) -> None:
        seconds, out, _ = cli(self.config, kind, "--spark-checkpoint",
                              str(self.query_checkpoint), "--from", source, "--to", target,
                              "--catch-up", "--quiet-seconds", str(self.args.query_quiet_s),
                              "--format", "json")
        doc = json.loads(out)
        self.record(f"{kind} --spark-checkpoint (1 query)", seconds)
        self.record(f"{kind} --spark-checkpoint (seconds_to_ready)", doc["seconds_to_ready"])
        self.query_checkpoint = Path(doc["checkpointLocation"])
        run_query(self.spark, self.bootstraps[target], doc["subscribe"],
                  doc["startingOffsets"], self.query_checkpoint)

    def read_on(self, alias: str) -> None:
        """The groups read on ``alias`` (untimed): P's originals; on B the replicas too."""
        prefix = "P." if alias == "B" else ""
        topics_on = {g: ([f"{prefix}{t}" for t in p["topics"]] if prefix else [])
                     + list(p["topics"]) for g, p in self.plans.items()}
        advance_groups(self.bootstraps[alias], self.plans, topics_on, self.commits, self.rng)

    def cycle(self, n: int) -> None:
        started = time.perf_counter()
        if n:
            self.read_on("P")
        self.move("failover", "P", "B")
        self.producers.move_to("B")
        self.start_replicate("B->P")
        self.read_on("B")
        self.move("failback", "B", "P")
        self.producers.move_to("P")
        self.start_replicate("P->B")
        print(f"  cycle {n + 1}: {time.perf_counter() - started:.0f}s, "
              + ", ".join(f"{k} {v[-1]:.2f}" for k, v in self.times.items()
                          if not k.startswith("read back")), flush=True)

    def profile_cycle(self, n: int, profiler: str) -> None:
        """One more cycle, every verb under ``profiler`` (its times not counted): where a
        verb's time goes, by the functions that talk to Kafka and the ledger."""
        counted, self.times = self.times, {}
        PROFILING[0] = profiler
        try:
            self.cycle(n)
        finally:
            PROFILING[0] = ""
            self.profiled, self.times = self.times, counted
        summary, suffix = ((profile_summary, "prof") if profiler == "cprofile"
                           else (spy_summary, "spy"))
        self.profile = {path.stem: summary(path)
                        for path in sorted((self.workdir / "calls").glob(f"*.{suffix}"))}

    def stop(self) -> None:
        self.stop_replicate()
        if getattr(self, "producers", None) is not None:
            self.producers.stop()
            if self.producers.errors:
                self.failures.append(f"producers: {self.producers.errors[:3]}")


def run_size(args: argparse.Namespace, workdir: Path, size: int, spark,
             prebuilt: Path | None) -> dict:
    from ledger.config import config_from_mapping
    from pipelines.devtools.clusters import EmbeddedClusters, free_port

    sized = workdir / f"size-{size}"
    sized.mkdir(parents=True, exist_ok=True)
    base = config_from_mapping({
        "clusters": {a: {"bootstrap.servers": f"127.0.0.1:{free_port()}"} for a in ("P", "B")},
        "flows": {"P->B": True}, "embedded": {"data.dir": str(sized / "clusters")}})
    clusters = EmbeddedClusters(base)
    processes = Processes()
    scenario = Scenario(args, sized, size, spark, processes)
    try:
        bootstraps = clusters.up()
        label = "young" if not size else f"{size:,} runs"
        print(f"{label}: preparing ...", flush=True)
        scenario.prepare(bootstraps, sized / "ledger" / "ledger", prebuilt)
        budget_end = time.monotonic() + 60 * args.budget_minutes if args.budget_minutes else None
        for n in range(args.repeats):
            started = time.monotonic()
            scenario.cycle(n)
            scenario.cycles = n + 1
            # --budget-minutes: no cycle is begun that would not end in time (the profiled one
            # included, which runs slower under the profiler)
            left = 1 + 1.5 * bool(args.profile)
            if budget_end and n + 1 < args.repeats \
                    and time.monotonic() + left * (time.monotonic() - started) > budget_end:
                print(f"  --budget-minutes {args.budget_minutes:g}: stopping after {n + 1} "
                      f"cycle(s)", flush=True)
                break
        if args.profile:
            scenario.profile_cycle(scenario.cycles, args.profile)
    finally:
        scenario.stop()
        processes.stop_all()
        clusters.down()
    medians = {k: round(statistics.median(v), 2) for k, v in scenario.times.items()}
    return {"medians": medians, "all": {k: [round(x, 3) for x in v]
                                        for k, v in scenario.times.items()},
            "checks": scenario.checks, "failures": scenario.failures[:50],
            "failure_count": len(scenario.failures), "findings": sorted(scenario.findings),
            "cycles": scenario.cycles, "records_produced": scenario.producers.sent,
            "profile": getattr(scenario, "profile", None),
            "profiled_times": getattr(scenario, "profiled", None)}


PROFILED = ("describe_groups", "ensure_all_inactive", "alter_groups_offsets", "committed_of",
            "list_offsets", "list_groups", "authorizer", "load_store", "query", "append",
            "observe", "plan", "commit", "_sync", "start_offsets", "write_starts",
            "wait_for_replication", "gather_report", "groups_status", "for_status",
            "for_move", "record", "record_operations")


def profile_summary(path: Path) -> dict:
    """``{module.function: [calls, cumulative s]}`` of the functions in ``PROFILED`` (the
    project's own), and the process's total."""
    import pstats

    stats = pstats.Stats(str(path))
    out: dict = {"total_s": round(stats.total_tt, 2)}
    for (file, _, name), (_, calls, _, cumulative, _) in stats.stats.items():
        if name in PROFILED and "/work/" in file and "/.venv/" not in file:
            out[f"{Path(file).parent.name}/{Path(file).stem}.{name}"] = [calls,
                                                                       round(cumulative, 2)]
    return out


def spy_summary(path: Path) -> dict:
    """``{function: [stacks, wall s]}`` of the functions in ``PROFILED`` on the verb's main
    thread (py-spy's raw samples, ``--idle``: a wait counts where it is waited for), and the
    main thread's total."""
    out: dict = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not frames or not frames[0].startswith("<module>"):
            continue  # another thread's
        total += int(count)
        seen = set()
        for frame in frames:
            name, _, where = frame.partition(" (")
            if (name.rpartition(".")[2] in PROFILED and "/.venv/" not in where
                    and "site-packages" not in where and name not in seen):
                seen.add(name)
                key = f"{Path(where.split(':')[0]).stem}.{name}"
                out.setdefault(key, [0, 0.0])
                out[key][0] += 1
                out[key][1] += int(count) / SPY_RATE
    return {"total_s": round(total / SPY_RATE, 2),
            **{k: [n, round(s, 2)] for k, (n, s) in out.items()}}


def target_of(name: str) -> float | None:
    verb = name.split(" ")[0]
    if "--spark-checkpoint" in name or name.startswith("read back"):
        return None
    return TARGETS.get(verb)


def table(result: dict) -> str:
    sizes = list(result["sizes"])
    head = "| step | target | " + " | ".join(
        "young" if s == "0" else f"{int(s):,} runs" for s in sizes) + " |"
    lines = [head, "|" + "---|" * (len(sizes) + 2)]
    first = result["sizes"][sizes[0]]["medians"]
    for name in first:
        target = target_of(name)
        cells = [f"{result['sizes'][s]['medians'].get(name, float('nan')):.2f}" for s in sizes]
        lines.append(f"| {name} | {'< ' + format(target, 'g') + ' s' if target else '-'} | "
                     + " | ".join(cells) + " |")
    if len(sizes) > 1:
        last = result["sizes"][sizes[-1]]["medians"]
        worst = max(last[n] / max(first[n], 0.01) for n in first if target_of(n))
        lines.append(f"\nlargest ratio {sizes[-1]} / young: {worst:.2f} (target < {RATIO})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict:
    workdir, prebuilt = operations.work_folder(args, "bench-failover-scale-")
    started = dt.datetime.now(dt.UTC)
    result: dict = {"started": f"{started:%Y-%m-%d %H:%M} UTC", "cores": os.cpu_count(),
                    "load_before": os.getloadavg()[0], "argv": sys.argv[1:],
                    "params": {k: v for k, v in vars(args).items() if k != "keep"},
                    "sizes": {}}
    spark = spark_session()
    try:
        for size in args.sizes:
            result["sizes"][str(size)] = run_size(args, workdir, size, spark, prebuilt)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result["seconds"] = round((dt.datetime.now(dt.UTC) - started).total_seconds())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=5, help="per topic (default 5)")
    parser.add_argument("--groups", type=int, default=200,
                        help="half classic, half KIP-848 (default 200)")
    parser.add_argument("--topics-per-group", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5, help="failover+failback cycles")
    parser.add_argument("--rate", type=float, default=200.0,
                        help="records/s the producers write during the cycles (default 200)")
    parser.add_argument("--query-quiet-seconds", dest="query_quiet_s", type=float, default=5.0,
                        help="--quiet-seconds of the query's moves (the verb's default 5)")
    parser.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], default=[0],
                        help="ledger sizes in runs, 0 = young (default 0; e.g. 0,10000000)")
    parser.add_argument("--prebuilt", metavar="PATH",
                        help="copy this finished bench.ledger_scale ledger for the non-zero "
                             "size (as bench.operations --prebuilt)")
    parser.add_argument("--keep", help="work in this folder and keep it")
    parser.add_argument("--budget-minutes", type=float, default=None,
                        help="per ledger size: begin no cycle that would not end within this "
                             "many minutes of the first (at least one runs; the number run is "
                             "in the results)")
    parser.add_argument("--profile", nargs="?", const="cprofile", default="",
                        choices=("cprofile", "py-spy"),
                        help="after the timed cycles, one more with every verb under cProfile "
                             "(not counted): the calls and seconds of the functions that talk "
                             "to Kafka and the ledger, in the JSON line; `--profile py-spy` "
                             "samples wall-clock time instead (waits included, no slowdown)")
    args = parser.parse_args(argv)
    result = run(args)
    print()
    print(table(result))
    failed = {s: r["failure_count"] for s, r in result["sizes"].items() if r["failure_count"]}
    for size, r in result["sizes"].items():
        print(f"size {size}: {r['cycles']} cycle(s); {r['checks']['offsets verified']:,} "
              f"offsets of "
              f"{r['checks']['groups verified']:,} group reads verified; "
              f"{r['failure_count']} failure(s)")
        for line in r["failures"][:10]:
            print(f"  FAILURE {line}")
        for line in r["findings"]:
            print(f"  finding: {line}")
        for call, summary in (r.get("profile") or {}).items():
            if call.split("-", 1)[1] in ("status", "translate", "failover", "failback"):
                top = sorted(((k, v) for k, v in summary.items() if k != "total_s"),
                             key=lambda kv: -kv[1][1])[:10]
                print(f"  profile {call} ({summary['total_s']:.1f}s profiled): "
                      + ", ".join(f"{k} {n}x {t:.2f}s" for k, (n, t) in top))
    RESULTS_DIR.mkdir(exist_ok=True)
    with (RESULTS_DIR / "failover_scale.jsonl").open("a") as out:
        out.write(json.dumps(result) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
