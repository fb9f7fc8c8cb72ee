"""Replication latency side by side: offset-ledger streaming (at-least-once, exactly-once) and
real MirrorMaker 2 (defaults, tuned, exactly-once), then 1,000 partitions at light load.

``python -m bench.latency [--rounds 2] [--seconds 60] [--rates 2000,50000]``

One run starts a pair of embedded KRaft clusters (or uses ``--config``'s running P and B) and
runs, per round and rate, each system on a fresh 6-partition source topic, in alternating
order (round 1: ol-alo, ol-eos, mm2-default, mm2-tuned, mm2-eos; round 2 reversed):

* **ol-alo**: ``offset-ledger replicate --flow 'P->B'`` continuous (with ``--commit-interval``
  where the CLI has it), one ledger initialised before the first run, as deployed.
* **ol-eos**: the same with ``--exactly-once``; skipped, with a line saying so, where the CLI
  has no such option.
* **mm2-default**: the peer's ``mm2.sh`` (dedicated mode), ``tasks.max=1``, Connect defaults.
* **mm2-tuned**: the same with the peer's ``mm2-tuned.properties`` (``--mm2-tuned-tasks``).
* **mm2-eos**: the same with the peer's ``mm2-eos.properties``: MirrorMaker 2's own
  exactly-once (KIP-618, one transaction per poll), the peer of ``ol-eos``
  (``--mm2-tuned-tasks`` tasks).

Before round 1 the brokers carry 30 s of unmeasured load (``--warm-brokers``) and every system
runs one short unmeasured case (``--warm-up-seconds``), so no system pays for the brokers'
first use of its paths. Per case: warm-up records (one per partition) are written before the
system starts; once a ``read_committed`` consumer on the replica has them all, a paced
producer writes one sync record per partition, waits until the replica has those too, then
writes ``rate`` records/s for ``--seconds`` (``bench.latency_clients``).
Measured: latency from send (CreateTime) to readable on the replica (p50/p95/p99/max),
every record arrived (a missing one is reported loudly), replica lag in records (source end
offsets minus the replica's last stable offsets, sampled every 0.5 s), the CPU cores and RSS of
the system's process tree from the first send until every record arrived (a loop of batches
copies the last ones after the last send), and for offset-ledger the ledger lag (arrival on the
replica to the Delta commit of the run covering it: ``bench.latency_ledger``).

The scale case (``--scale-systems``, ``none`` to skip; ``--scale-rounds`` rounds, alternating
order): 200 topics x 5 partitions, 5 warm-up records of 1 KiB per partition written before the
system starts (time until all are readable on the replica; the brokers write each partition's
first index entry before the clock), then ``--scale-rate`` records/s for ``--seconds``: CPU,
RSS, latency, and for
offset-ledger the ledger's rows and files added per hour (extrapolated from the window) and
its files before and after ``offset-ledger ledger maintain``.

Targets are printed as ratios from the same run and round. Results: a markdown table on stdout
and ``bench/results/latency-<time>.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import yaml
from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

from bench import latency_report
from bench.common import (
    RESULTS_DIR,
    ROOT,
    Processes,
    embedded_config,
    flow_config,
    init_ledger,
    mm2_command,
    offset_ledger_bin,
    require_mm2_jars,
    state_env,
    tree_usage,
)
from bench.latency_clients import WARMUP_SEQ, percentiles, value_of
from bench.latency_ledger import RunCommits, table_sizes, version
from ledger.config import ClusterConfig, Config, load_config
from ledger.schemas import OFFSET_SYNCS
from pipelines.edge import kafka_admin

SYSTEMS = ("ol-alo", "ol-eos", "mm2-default", "mm2-tuned", "mm2-eos")
SCALE_TOPICS, SCALE_PARTITIONS, SCALE_PREFILL = 200, 5, 5
# The prefill's value size at scale: 5 x 1 KiB passes the brokers' default index.interval.bytes
# (4,096), so every partition's first offset and time index entries (a first write to two
# memory-mapped index files each) are written on both brokers before the clock starts. With
# 100-byte values all 1,000 partitions crossed 4,096 bytes within the same second, about 20 s
# into the measured window, and the brokers' produce path stalled for 8 to 13 s (2026-12-07:
# the benchmark's own producer alone on P, no system running, p99 9 s; with
# index.interval.bytes raised on the topics, no stall): a harness artifact every system paid.
SCALE_PREFILL_BYTES = 1024
START_TIMEOUT_S = 300.0
SCALE_START_TIMEOUT_S = 1200.0  # 1,000 new partitions a side: minutes on a busy 2-core machine


# --- what the offset-ledger CLI on this checkout offers -----------------------------------------


def replicate_options() -> dict[str, argparse.Action]:
    """``offset-ledger replicate``'s options by dest, from the parser of this checkout."""
    from pipelines.replicate import job

    parser = argparse.ArgumentParser(add_help=False)
    job.add_arguments(parser)
    return {a.dest: a for a in parser._actions}


class OffsetLedgerCli:
    """How the benchmark runs offset-ledger's continuous mode with what main has today."""

    def __init__(self, commit_interval: float | None, extra: list[str]) -> None:
        options = replicate_options()
        self.streaming = "commit_interval" in options
        self.exactly_once = "exactly_once" in options
        self.extra = extra
        # Today's continuous mode (a loop of batches) records one batch per --interval.
        self.interval_flag = "--commit-interval" if self.streaming else "--interval"
        default = options["commit_interval" if self.streaming else "interval"].default
        self.interval_s = float(commit_interval if commit_interval is not None else default)
        self.pass_interval = commit_interval is not None

    def command(self, cfg: Path, exactly_once: bool) -> list[str]:
        command = [offset_ledger_bin(), "replicate", "--flow", "P->B", "--config", str(cfg)]
        if self.pass_interval:
            command += [self.interval_flag, f"{self.interval_s:g}"]
        if exactly_once:
            command.append("--exactly-once")
        return command + self.extra

    def describe(self) -> str:
        mode = ("streaming (--commit-interval)" if self.streaming else
                "a loop of batches (no --commit-interval on this checkout: --interval)")
        return (f"offset-ledger replicate: {mode}, commit interval {self.interval_s:g} s, "
                f"exactly-once {'available' if self.exactly_once else 'NOT AVAILABLE'}")


# --- sampling the system under test ------------------------------------------------------------


def end_sum(admin, tps: list[TopicPartition], committed: bool) -> int | None:
    """Sum of the partitions' end offsets (``committed``: last stable offsets), None unless
    every partition answered (a topic not created yet, or whose partitions a broker is still
    creating: 1,000 new partitions take minutes on a busy 2-core machine)."""
    try:
        futures = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in tps}, request_timeout=5,
            isolation_level=(IsolationLevel.READ_COMMITTED if committed
                             else IsolationLevel.READ_UNCOMMITTED))
        return sum(int(f.result(timeout=10).offset) for f in futures.values())
    except Exception:
        return None


class Monitor:
    """Samples a process tree's CPU and RSS and the replica lag in records every ``period``."""

    def __init__(self, pid: int, source: ClusterConfig, target: ClusterConfig,
                 source_tps: list[tuple[str, int]], replica_tps: list[tuple[str, int]],
                 period: float = 0.5) -> None:
        self.pid, self.period = pid, period
        self.source, self.target = kafka_admin.admin(source), kafka_admin.admin(target)
        self.source_tps = [TopicPartition(t, p) for t, p in source_tps]
        self.replica_tps = [TopicPartition(t, p) for t, p in replica_tps]
        self.samples: list[tuple[float, float, int, int | None]] = []  # wall, cpu, rss, lag
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            cpu, rss = tree_usage(self.pid)
            source = end_sum(self.source, self.source_tps, committed=False)
            replica = end_sum(self.target, self.replica_tps, committed=True)
            lag = source - replica if source is not None and replica is not None else None
            self.samples.append((time.time(), cpu, rss, lag))
            self._stop.wait(self.period)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def window(self, start: float, end: float) -> dict:
        inside = [s for s in self.samples if start <= s[0] <= end]
        out: dict = {"samples": len(inside), "cores": None, "rss_mb_peak": None,
                     "rss_mb_mean": None, "lag_records": percentiles(np.array([], dtype=np.int64))}
        if len(inside) >= 2:
            (t0, c0, *_), (t1, c1, *_) = inside[0], inside[-1]
            out["cores"] = round((c1 - c0) / (t1 - t0), 3) if t1 > t0 else None
        if inside:
            rss = [s[2] for s in inside]
            out["rss_mb_peak"] = round(max(rss) / 2**20)
            out["rss_mb_mean"] = round(sum(rss) / len(rss) / 2**20)
            lags = np.array([max(0, s[3]) for s in inside if s[3] is not None], dtype=np.int64)
            out["lag_records"] = percentiles(lags)
        return out


# --- one case: a system, a rate, its own topics ------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, base: Config, cfg_path: str,
                 workdir: Path) -> None:
        self.args, self.base, self.cfg_path, self.workdir = args, base, cfg_path, workdir
        self.source, self.target = base.cluster("P"), base.cluster("B")
        self.ol = OffsetLedgerCli(args.commit_interval, args.ol_args.split())
        self.ledger = workdir / "ledger"
        self.ledger_ready = False

    def _wait(self, what: str, check, timeout: float, proc=None, log: Path | None = None):
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if proc is not None and proc.poll() is not None:
                tail = log.read_text()[-3000:] if log and log.exists() else ""
                raise RuntimeError(f"{what}: the system exited with {proc.returncode}\n{tail}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout:g} s")
            time.sleep(0.2)

    def _warm_up(self, topics: list[str], partitions: int, per_partition: int,
                  size: int | None = None) -> None:
        producer = Producer(self.source.client_config(**{
            "enable.idempotence": True, "linger.ms": 5, "log_level": 3}))
        value = value_of(WARMUP_SEQ, self.args.size if size is None else size)
        for topic in topics:
            for p in range(partitions):
                for _ in range(per_partition):
                    producer.produce(topic, value=value, partition=p)
            producer.poll(0)
        if producer.flush(60):
            raise RuntimeError("warm-up records not delivered to the source")

    def _start_system(self, system: str, topics: list[str], name: str, procs: Processes,
                      log: Path):
        if system.startswith("ol-") and not self.ledger_ready:
            init_ledger(self.cfg_path, self.workdir, self.ledger)  # once, as deployed
            self.ledger_ready = True
        launched = time.time()
        if system.startswith("ol-"):
            cfg = flow_config(self.cfg_path, topics, self.ledger, self.workdir / f"{name}.yaml",
                              **dict(self.args.ol_flow))
            with log.open("w") as out:
                proc = procs.start(self.ol.command(cfg, system == "ol-eos"), cwd=self.workdir,
                                   env=state_env(self.workdir), stdout=out, stderr=out)
            return proc, launched
        regex = "|".join(topics) if len(topics) < 10 else f"{name}-.*"
        tasks = 1 if system == "mm2-default" else self.args.mm2_tuned_tasks
        command, env = mm2_command(self.source, self.target, regex, self.workdir / name,
                                   tasks=tasks, variant=system.removeprefix("mm2-"))
        with log.open("w") as out:
            proc = procs.start(command, env=env, stdout=out, stderr=out)
        return proc, launched

    def _clients(self, role: str, topics: list[str], partitions: int, out: Path,
                 *options: str) -> list[str]:
        return [sys.executable, "-m", "bench.latency_clients", role, "--config", self.cfg_path,
                "--cluster", "P" if role == "produce" else "B", "--topics", ",".join(topics),
                "--partitions", str(partitions), "--out", str(out), *options]

    def case(self, system: str, rate: float, round_no: int, scale: bool = False,
             seconds: float | None = None) -> dict:
        """One system at ``rate`` for ``seconds`` (default ``--seconds``)."""
        args = self.args
        seconds = args.seconds if seconds is None else seconds
        n_topics, partitions, warmup = ((SCALE_TOPICS, SCALE_PARTITIONS, SCALE_PREFILL) if scale
                                        else (1, args.partitions, 1))
        name = f"lat{'s' if scale else ''}-{uuid.uuid4().hex[:6]}"
        topics = ([f"{name}-t{i:03d}" for i in range(n_topics)] if scale else [name])
        replicas = [f"P.{t}" for t in topics]  # both systems' default replication policy
        result: dict = {"round": round_no, "rate": rate, "system": system,
                        "partitions": n_topics * partitions}
        if system == "ol-eos" and not self.ol.exactly_once:
            result["skipped"] = ("`offset-ledger replicate` on this checkout has no "
                                 "--exactly-once option")
            return result
        ol = system.startswith("ol-")
        for topic in topics:
            kafka_admin.create_topic(self.source, topic, partitions)
        timeout = SCALE_START_TIMEOUT_S if scale else START_TIMEOUT_S
        source_admin = kafka_admin.admin(self.source)
        self._wait("source partitions ready", lambda: end_sum(source_admin, [
            TopicPartition(t, p) for t in topics for p in range(partitions)], False) is not None,
            timeout)
        self._warm_up(topics, partitions, warmup, SCALE_PREFILL_BYTES if scale else None)
        files = {k: self.workdir / f"{name}.{k}" for k in
                 ("produced.json", "consumed.json", "ready", "synced", "seen", "offsets.npz",
                  "log")}
        runs = RunCommits(self.ledger, version(self.ledger / OFFSET_SYNCS)) if ol else None
        procs, monitor = Processes(), None
        try:
            proc, launched = self._start_system(system, topics, name, procs, files["log"])
            tps = [(t, p) for t in topics for p in range(partitions)]
            monitor = Monitor(proc.pid, self.source, self.target, tps,
                              [(f"P.{t}", p) for t, p in tps])
            self._wait(f"{system}: replica topics", lambda: self._replicas_exist(
                replicas, partitions), timeout, proc, files["log"])
            total = round(rate * seconds)
            consumer = procs.start(self._clients(
                "consume", replicas, partitions, files["consumed.json"], "--expect", str(total),
                "--warmup", str(warmup), "--ready", str(files["ready"]),
                "--synced", str(files["synced"]), "--seen",
                str(files["seen"]), *(["--offsets", str(files["offsets.npz"])] if ol else [])),
                cwd=ROOT)
            ready = float(self._wait(f"{system}: warm-up records on the replica",
                                     lambda: files["ready"].exists() and
                                     files["ready"].read_text(), timeout, proc,
                                     files["log"]))
            # From the launch: the replica's last stable offsets reach the source's end offsets
            # (sampled), and the consumer read every warm-up record (it starts once the replica
            # topics exist, so its own start may add a second).
            synced = next((t for t, _, _, lag in list(monitor.samples)
                           if t >= launched and lag == 0), None)
            result["to_replicated_s"] = round(synced - launched, 2) if synced else None
            result["to_readable_s"] = round(ready - launched, 2)
            sizes_before = table_sizes(self.ledger) if ol and scale else None
            sizes_after, sizes_at = None, 0.0
            producer = procs.start(self._clients(
                "produce", topics, partitions, files["produced.json"], "--rate", str(rate),
                "--seconds", str(seconds), "--size", str(args.size),
                "--wait-synced", str(files["synced"])), cwd=ROOT)
            if producer.wait(seconds * 3 + 120) != 0:
                raise RuntimeError(f"{system}: the producer failed")
            produced = json.loads(files["produced.json"].read_text())
            try:
                consumer.wait(args.drain)
            except subprocess.TimeoutExpired:
                pass
            if consumer.poll() is None:  # the deadline: what has not arrived is missing
                Processes.stop(consumer, 30)
            consumed = json.loads(files["consumed.json"].read_text())
            if ol:
                arrivals = dict(np.load(files["offsets.npz"]))
                deadline = time.monotonic() + 2 * self.ol.interval_s + 30
                while True:
                    runs.refresh()
                    lags, unrecorded = runs.lags(arrivals)
                    if not unrecorded or time.monotonic() > deadline or proc.poll() is not None:
                        break
                    time.sleep(0.5)
            # The ledger's growth from the first send until it recorded every record, before
            # the stop (whose last commit is not steady state).
            if ol and scale:
                sizes_after, sizes_at = table_sizes(self.ledger), time.time()
            Processes.stop(proc, 120)
            result["exit_code"] = proc.returncode
        finally:
            if monitor is not None:
                monitor.stop()
            procs.stop_all()
        (self.workdir / f"{name}.samples.json").write_text(json.dumps(monitor.samples))
        # CPU and memory from the first send until every record arrived: the work of
        # replicating the window's records (a loop of batches copies them after the last send).
        window = monitor.window(produced["start_wall"],
                                max(produced["end_wall"], consumed["all_at"] or 0))
        seen = np.frombuffer(files["seen"].read_bytes(), dtype=np.uint8)
        failed = set(produced["failed_seqs"])
        missing = [int(i) for i in np.flatnonzero(seen == 0) if int(i) not in failed]
        result.update(
            records=produced["records"], sent_rate=round(produced["rate"] or 0),
            delivery_failures=produced["failed"], distinct=consumed["distinct"],
            duplicates=consumed["duplicates"], missing=len(missing),
            missing_first=missing[:20], consumer_errors=consumed["errors"],
            latency_ms=consumed["latency_ms"], **window)
        if ol:
            runs.refresh()
            lags, unrecorded = runs.lags(arrivals)
            result.update(ledger_lag_ms=percentiles(lags), unrecorded=unrecorded,
                          commit_interval_s=self.ol.interval_s)
        if sizes_before is not None:
            hours = (sizes_at - produced["start_wall"]) / 3600
            result["ledger_per_hour"] = {
                t: {k: round((sizes_after[t][k] - sizes_before.get(t, {}).get(k, 0)) / hours)
                    for k in ("rows", "files")} for t in sizes_after}
            if not args.skip_maintain:
                result["maintain"] = self._maintain(name)
        if missing or consumed["distinct"] < produced["records"] - produced["failed"]:
            print(f"\n!!! MISSING RECORDS: {system} at {rate:g} rec/s, round {round_no}: "
                  f"{len(missing)} of {produced['records']} never arrived on the replica "
                  f"(first: {missing[:10]}) !!!\n", flush=True)
        self._drop(topics + replicas)
        return result

    def _replicas_exist(self, replicas: list[str], partitions: int) -> bool:
        try:
            have = kafka_admin.list_topics(self.target)
        except Exception:
            return False
        return all(have.get(r, 0) >= partitions for r in replicas)

    def _maintain(self, name: str) -> dict:
        """``offset-ledger ledger maintain`` once, after the scale run: files before/after."""
        before = table_sizes(self.ledger)
        started = time.perf_counter()
        cfg = flow_config(self.cfg_path, [".*"], self.ledger, self.workdir / f"{name}-m.yaml")
        done = Processes()
        try:
            proc = done.start([offset_ledger_bin(), "ledger", "maintain", "--config", str(cfg)],
                              cwd=self.workdir, env=state_env(self.workdir),
                              stdout=(self.workdir / f"{name}.maintain.log").open("w"),
                              stderr=(self.workdir / f"{name}.maintain.log").open("a"))
            code = proc.wait(1800)
        finally:
            done.stop_all()
        after = table_sizes(self.ledger)
        return {"exit_code": code, "seconds": round(time.perf_counter() - started, 1),
                "files_before": sum(v["files"] for v in before.values()),
                "files_after": sum(v["files"] for v in after.values()),
                "rows": sum(v["rows"] for v in after.values())}

    def warm_brokers(self, seconds: float) -> None:
        """Run both brokers' produce and fetch paths for ``seconds`` before the first case.

        A fresh broker JVM interprets and compiles its hot paths for its first tens of seconds;
        without this the first system of round 1 alone pays for it (seen as p99 several times
        its round-2 value). Unmeasured; the scratch topics are deleted afterwards.
        """
        from confluent_kafka import Consumer

        topic = f"warm-{uuid.uuid4().hex[:6]}"
        pairs = []
        for cluster in (self.source, self.target):
            kafka_admin.create_topic(cluster, topic, self.args.partitions)
            producer = Producer(cluster.client_config(**{
                "enable.idempotence": True, "linger.ms": 1, "log_level": 3}))
            consumer = Consumer(cluster.client_config(**{
                "group.id": f"bench-warm-{topic}", "enable.auto.commit": False,
                "isolation.level": "read_committed", "log_level": 3}))
            consumer.assign([TopicPartition(topic, p, 0) for p in range(self.args.partitions)])
            pairs.append((producer, consumer))
        value, sent, deadline = value_of(WARMUP_SEQ, self.args.size), 0, time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                for producer, consumer in pairs:
                    for _ in range(200):
                        producer.produce(topic, value=value, partition=sent % self.args.partitions)
                        sent += 1
                    producer.poll(0)
                    consumer.consume(1000, 0.001)
                time.sleep(0.002)  # a rate in the tens of thousands, not a flood of the disk
        finally:
            for producer, consumer in pairs:
                producer.flush(30)
                consumer.close()
        self._drop([topic])

    def _drop(self, topics: list[str]) -> None:
        """Free the brokers' disks between cases (a 50k rec/s minute is ~300 MB a side)."""
        for cluster in (self.source, self.target):
            try:
                client = kafka_admin.admin(cluster)
                have = set(kafka_admin.list_topics(cluster))
                futures = client.delete_topics([t for t in topics if t in have],
                                               operation_timeout=30)
                for future in futures.values():
                    future.result(60)
            except Exception as exc:  # a leftover topic costs disk, not correctness
                print(f"  (could not delete benchmark topics on {cluster.alias}: {exc})")


def run(args: argparse.Namespace) -> dict:
    if any(s.startswith("mm2") for s in args.systems + args.scale_systems):
        require_mm2_jars()
    workdir = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    clusters = None
    results: dict = {"args": {k: v for k, v in vars(args).items()}, "cases": [], "scale": []}
    try:
        if args.config:
            base, cfg_path = load_config(args.config), args.config
        else:
            from pipelines.devtools.clusters import EmbeddedClusters

            base = embedded_config(workdir)
            cfg_path = str(base.path)
            clusters = EmbeddedClusters(base, tied_to_parent=True)
            clusters.up()
        bench = Bench(args, base, cfg_path, workdir)
        described = bench.ol.describe() + "".join(
            f", flow key {key}={value}" for key, value in args.ol_flow)
        results["offset_ledger_cli"] = described  # the report's header line says it too
        results["commit_interval_s"] = bench.ol.interval_s
        print(described, flush=True)
        if "ol-eos" in args.systems + args.scale_systems and not bench.ol.exactly_once:
            print("offset-ledger exactly-once: SKIPPED: `offset-ledger replicate` on this "
                  "checkout has no --exactly-once option (issue 24 part 3 not on main yet)",
                  flush=True)
        if args.warm_brokers > 0:
            print(f"warming the brokers up for {args.warm_brokers:g} s (unmeasured) ...",
                  flush=True)
            bench.warm_brokers(args.warm_brokers)
        if args.warm_up_seconds > 0:
            _warm_up_cases(bench, args)
        for n in range(1, args.rounds + 1):
            order = list(args.systems) if n % 2 else list(reversed(args.systems))
            for rate in args.rates:
                for system in order:
                    results["cases"].append(_one(bench, system, rate, n))
        for n in range(1, args.scale_rounds + 1):
            order = args.scale_systems if n % 2 else list(reversed(args.scale_systems))
            for system in order:
                results["scale"].append(_one(bench, system, args.scale_rate, n, scale=True))
        return results
    finally:
        if clusters is not None:
            clusters.down()
        if args.keep:
            print(f"kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _warm_up_cases(bench: Bench, args: argparse.Namespace) -> None:
    """One short unmeasured case of every system before round 1 (results discarded).

    Each system drives its own broker paths (transactions, Connect's internal topics, read_committed
    fetches of a fresh replica): without this, whichever system runs first in round 1 pays for
    the brokers compiling them (a p99 several times its round-2 value).
    """
    for system in args.systems:
        print(f"warm-up: {system} at {args.rates[0]:g} rec/s for {args.warm_up_seconds:g} s "
              f"(unmeasured) ...", flush=True)
        try:
            bench.case(system, args.rates[0], 0, seconds=args.warm_up_seconds)
        except Exception as exc:  # the measured case of this system reports it
            print(f"  warm-up of {system} failed: {exc}", flush=True)


def _one(bench: Bench, system: str, rate: float, n: int, scale: bool = False) -> dict:
    what = f"{'scale: ' if scale else ''}round {n}: {system} at {rate:g} rec/s"
    print(f"{what} ...", flush=True)
    try:
        result = bench.case(system, rate, n, scale=scale)
    except Exception as exc:  # one broken case is reported; the others still run
        print(f"!!! {what}: FAILED: {exc}", flush=True)
        return {"round": n, "rate": rate, "system": system, "error": str(exc)[:2000]}
    print(f"  {latency_report.line(result)}", flush=True)
    return result


def _floats(value: str) -> list[float]:
    return [float(v) for v in value.split(",") if v.strip()]


def _flow_key(value: str) -> tuple[str, object]:
    key, sep, raw = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
    return key.strip(), yaml.safe_load(raw)


def _systems(value: str) -> list[str]:
    names = [] if value.strip() == "none" else [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown system(s) {unknown}: choose from "
                                         f"{', '.join(SYSTEMS)} (or none)")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="rounds, alternating order (2)")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="producer seconds per case, scale case too (60)")
    parser.add_argument("--rates", type=_floats, default=[2000.0, 50000.0],
                        help="comma-separated records/s (2000,50000)")
    parser.add_argument("--partitions", type=int, default=6, help="source partitions (6)")
    parser.add_argument("--size", type=int, default=100, help="value bytes (100)")
    parser.add_argument("--systems", type=_systems, default=list(SYSTEMS),
                        help=f"comma-separated subset of {','.join(SYSTEMS)} (all)")
    parser.add_argument("--scale-systems", type=_systems, default=list(SYSTEMS),
                        help="systems of the 1,000-partition case, or none (all)")
    parser.add_argument("--scale-rounds", type=int, default=2,
                        help="rounds of the scale case, alternating order (2)")
    parser.add_argument("--skip-maintain", action="store_true",
                        help="no `ledger maintain` after offset-ledger's scale cases")
    parser.add_argument("--scale-rate", type=float, default=1000.0,
                        help="records/s over the 1,000 partitions (1000)")
    parser.add_argument("--commit-interval", type=float, default=None,
                        help="offset-ledger's --commit-interval (where the CLI has none yet: "
                             "its --interval); default: the CLI's own default")
    parser.add_argument("--ol-args", default="",
                        help="more options for `offset-ledger replicate`, e.g. '--executor local'")
    parser.add_argument("--ol-flow", type=_flow_key, action="append", default=[],
                        metavar="KEY=VALUE",
                        help="a flow setting of offset-ledger's P->B (repeatable), e.g. "
                             "transaction.boundary.interval.ms=15")
    parser.add_argument("--mm2-tuned-tasks", type=int, default=1,
                        help="tasks.max of the tuned MirrorMaker 2 (1)")
    parser.add_argument("--drain", type=float, default=120.0,
                        help="seconds after the producer's end for the last records (120)")
    parser.add_argument("--warm-up-seconds", type=float, default=15.0,
                        help="an unmeasured case of each system before round 1, this long "
                             "(0: none)")
    parser.add_argument("--warm-brokers", type=float, default=30.0,
                        help="seconds of unmeasured load on both brokers before round 1 (30)")
    parser.add_argument("--config", help="use the running clusters P and B of this config")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = parser.parse_args(argv)
    started = time.strftime("%Y%m%dT%H%M%S")
    result = run(args)
    text = latency_report.markdown(result)
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"latency-{started}.json").write_text(json.dumps(result, indent=2))
    (RESULTS_DIR / f"latency-{started}.md").write_text(text)
    print(text)
    print(f"results: {RESULTS_DIR / f'latency-{started}.md'} (and .json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
