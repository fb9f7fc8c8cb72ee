"""Replication side by side: a plain confluent-kafka loop, offset-ledger, real MirrorMaker 2.

``python -m bench.replication [--records 1000000] [--partitions 6] [--size 100] [--rounds 2]``

One run starts a pair of embedded KRaft clusters (or uses ``--config``'s running P and B) and,
per round, fills one fresh source topic per system, then launches each system as its own
process tree, in alternating order (round 1: plain, offset-ledger, MM2; round 2 reversed):

* **plain loop**: ``python -m bench.replication --plain ...``: one consumer -> producer loop
  (read_committed, key/value/headers/timestamp, one flush); it records nothing.
* **offset-ledger**: ``offset-ledger replicate --flow 'P->B' --once`` (a new process: Spark
  start, planning, executor copy, Delta ledger writes), then the same command again with nothing
  to do (the "--once with nothing to do" time). The ledger is created once before the first
  round (``offset-ledger ledger init``), as a deployment has it; ``--fresh-ledger`` gives each
  run a new one and counts its table creation.
* **MirrorMaker 2**: dedicated mode from ``jars/mm2`` (fetched with Maven from the peer's
  pom.xml, see ``bench/README.md``), ``tasks.max=2``, producer tuned with
  ``../shared/peers/mm2/mm2-tuned.properties``; stopped with SIGTERM once all records arrived.

Measured per system: launch to all records on the target (launch-to-done rec/s), first record
to all (steady rec/s), launch to first record, CPU seconds of the process tree (utime + stime
of the reaped tree from ``getrusage(RUSAGE_CHILDREN)``, or of ``/proc`` samples every 0.1 s,
whichever is larger), and for offset-ledger the
ledger share (time on the critical path writing the ledger / the run's wall time, as printed by
the job). Progress is watched through the replica's end offsets.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.common import (
    RESULTS_DIR,
    ROOT,
    cpu_seconds,
    embedded_config,
    flow_config,
    init_ledger,
    mm2_command,
    offset_ledger_bin,
    state_env,
    tree,
)
from ledger.config import ClusterConfig, Config, load_config
from pipelines.edge import kafka_admin


def fill(cluster: ClusterConfig, topic: str, records: int, partitions: int, size: int) -> None:
    producer = Producer(cluster.client_config(**{
        "linger.ms": 50, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
        "enable.idempotence": True}))
    value = os.urandom(size)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0, "could not fill the source topic"


def plain_loop(source: ClusterConfig, target: ClusterConfig, topic: str, replica: str,
               records: int, partitions: int) -> None:
    """The baseline copier (run in its own process by ``--plain``)."""
    consumer = Consumer(source.client_config(**{
        "group.id": f"bench-plain-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "isolation.level": "read_committed", "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 10_485_760}))
    producer = Producer(target.client_config(**{
        "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
        "enable.idempotence": True, "acks": "all"}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    copied = 0
    while copied < records:
        for msg in consumer.consume(10_000, timeout=1.0):
            if msg.error():
                continue
            while True:
                try:
                    producer.produce(replica, value=msg.value(), key=msg.key(),
                                     headers=msg.headers(), timestamp=msg.timestamp()[1],
                                     partition=msg.partition())
                    break
                except BufferError:
                    producer.poll(0.05)
            copied += 1
        producer.poll(0)
    assert producer.flush(120) == 0, "plain loop: deliveries outstanding"
    consumer.close()


# --- measuring a process tree ------------------------------------------------------------------


class Watch:
    """Samples a process tree's CPU and a replica's record count until told to stop."""

    def __init__(self, pid: int, target: ClusterConfig, replica: str, partitions: int,
                 records: int) -> None:
        self.pid, self.target, self.replica = pid, target, replica
        self.parts = [(replica, p) for p in range(partitions)]
        self.records = records
        self.started = time.perf_counter()
        self.first: float | None = None
        self.done: float | None = None
        self.cpu: dict[int, float] = {}
        # Reaped descendants' CPU (a process tree's exited JVMs and workers) from rusage.
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._rusage0 = usage.ru_utime + usage.ru_stime
        # One consumer for the whole watch: a new client per sample is too slow to sample at 10 Hz.
        self._consumer = Consumer(target.client_config(**{
            "group.id": f"bench-watch-{uuid.uuid4().hex[:8]}", "log_level": 0}))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in tree(self.pid):
                value = cpu_seconds(pid)
                if value is not None:
                    self.cpu[pid] = value
            if self.done is None:
                try:
                    n = sum(self._consumer.get_watermark_offsets(
                        TopicPartition(t, p), timeout=5, cached=False)[1] for t, p in self.parts)
                except Exception:
                    n = 0
                now = time.perf_counter()
                if n > 0 and self.first is None:
                    self.first = now
                if n >= self.records:
                    self.done = now
            self._stop.wait(0.1)

    def wait_done(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.done is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.replica}: not all records arrived")
            time.sleep(0.1)

    def stop(self) -> dict:
        """Call after the process tree exited and was reaped."""
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()
        assert self.first is not None and self.done is not None
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        reaped = usage.ru_utime + usage.ru_stime - self._rusage0
        return {"launch_to_done_s": round(self.done - self.started, 2),
                "launch_to_done_rps": round(self.records / (self.done - self.started)),
                "steady_rps": round(self.records / max(1e-6, self.done - self.first)),
                "launch_to_first_s": round(self.first - self.started, 2),
                "cpu_s": round(max(reaped, sum(self.cpu.values())), 1)}


# --- the three systems -------------------------------------------------------------------------


def run_plain(cfg_path: str, base: Config, topic: str, args: argparse.Namespace) -> dict:
    replica = f"plain.{topic}"
    kafka_admin.create_topic(base.cluster("B"), replica, args.partitions)
    proc = subprocess.Popen([sys.executable, "-m", "bench.replication", "--plain", "--config",
                             cfg_path, "--topic", topic, "--records", str(args.records),
                             "--partitions", str(args.partitions)], cwd=ROOT)
    watch = Watch(proc.pid, base.cluster("B"), replica, args.partitions, args.records)
    assert proc.wait(600) == 0
    watch.wait_done(60)
    return watch.stop()


def _replicate_command(cfg_path: str, topic: str, workdir: Path, args: argparse.Namespace,
                       *options: str) -> tuple[list[str], dict[str, str]]:
    """``offset-ledger replicate`` of flow P->B for ``topic`` alone, and its environment."""
    cfg = flow_config(cfg_path, [topic], _ledger_location(workdir, topic, args),
                      workdir / f"ol-{topic}.yaml")
    command = [offset_ledger_bin(), "replicate", "--flow", "P->B", *options, "--executor",
               args.executor, "--config", str(cfg)]
    return command, state_env(workdir)


def run_offset_ledger(cfg_path: str, base: Config, topic: str, workdir: Path,
                      args: argparse.Namespace) -> dict:
    command, env = _replicate_command(cfg_path, topic, workdir, args, "--once")
    proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, text=True)
    watch = Watch(proc.pid, base.cluster("B"), f"P.{topic}", args.partitions, args.records)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    watch.wait_done(60)
    result = watch.stop()
    match = re.search(r"recorded in ([\d.]+)s \(copy ([\d.]+)s, ledger ([\d.]+)s\)", out)
    if match:
        wall, _, ledger = (float(x) for x in match.groups())
        result["ledger_s"] = ledger
        result["ledger_share"] = round(ledger / wall, 3) if wall else None
    started = time.perf_counter()
    again = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    result["once_nothing_to_do_s"] = round(time.perf_counter() - started, 2)
    return result


def run_continuous(cfg_path: str, base: Config, workdir: Path, args: argparse.Namespace) -> dict:
    """A continuous ``replicate`` (10 s interval) while the source is filled, until every record
    is on the target; then SIGTERM (the job records its batch and prints its ledger share)."""
    topic = f"bench-continuous-{uuid.uuid4().hex[:6]}"
    kafka_admin.create_topic(base.cluster("P"), topic, args.partitions)
    command, env = _replicate_command(cfg_path, topic, workdir, args)
    proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, text=True)
    watch = Watch(proc.pid, base.cluster("B"), f"P.{topic}", args.partitions, args.records)
    filled = time.perf_counter()
    fill(base.cluster("P"), topic, args.records, args.partitions, args.size)
    filled = time.perf_counter() - filled
    try:
        watch.wait_done(1800)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
    result = watch.stop()
    result["fill_s"] = round(filled, 1)
    match = re.search(r"(\d+) batch\(es\).*in ([\d.]+)s \(copy ([\d.]+)s, ledger ([\d.]+)s",
                      out)
    assert match, out
    batches, wall, copy, ledger = match.groups()
    result.update(batches=int(batches), wall_s=float(wall), copy_s=float(copy),
                  ledger_s=float(ledger),
                  # of the busy time: a continuous job waits for records between batches
                  ledger_share=round(float(ledger) / (float(copy) + float(ledger)), 4))
    return result


def _ledger_location(workdir: Path, topic: str, args: argparse.Namespace) -> Path:
    return workdir / (f"ledger-{topic}" if args.fresh_ledger else "ledger")


def run_mm2(base: Config, topic: str, workdir: Path, args: argparse.Namespace) -> dict:
    command, env = mm2_command(base.cluster("P"), base.cluster("B"), topic,
                               workdir / f"mm2-{topic}", tasks=2, variant="tuned")
    proc = subprocess.Popen(command, env=env)
    watch = Watch(proc.pid, base.cluster("B"), f"P.{topic}", args.partitions, args.records)
    try:
        watch.wait_done(600)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    return watch.stop()


def one_round(cfg_path: str, base: Config, workdir: Path, args: argparse.Namespace,
              n: int) -> dict:
    order = [s for s in ("plain", "offset-ledger", "mm2") if s in args.systems]
    if n % 2 == 0:
        order.reverse()
    out: dict = {"round": n, "order": order}
    for system in order:
        topic = f"bench-{system}-{uuid.uuid4().hex[:6]}"
        kafka_admin.create_topic(base.cluster("P"), topic, args.partitions)
        fill(base.cluster("P"), topic, args.records, args.partitions, args.size)
        print(f"round {n}: {system} ...", flush=True)
        if system == "plain":
            out[system] = run_plain(cfg_path, base, topic, args)
        elif system == "offset-ledger":
            out[system] = run_offset_ledger(cfg_path, base, topic, workdir, args)
        else:
            out[system] = run_mm2(base, topic, workdir, args)
        print(f"  {out[system]}", flush=True)
    return out


def run(args: argparse.Namespace) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="bench-replication-"))
    clusters = None
    if args.config:
        base, cfg_path = load_config(args.config), args.config
    else:
        from pipelines.devtools.clusters import EmbeddedClusters

        base = embedded_config(workdir)
        cfg_path = str(base.path)
        clusters = EmbeddedClusters(base)
        clusters.up()
    try:
        if ("offset-ledger" in args.systems or args.continuous) and not args.fresh_ledger:
            init_ledger(cfg_path, workdir)
        if args.continuous:
            return {"records": args.records, "size_bytes": args.size,
                    "partitions": args.partitions, "cores": os.cpu_count(),
                    "continuous": run_continuous(cfg_path, base, workdir, args)}
        rounds = [one_round(cfg_path, base, workdir, args, n) for n in range(1, args.rounds + 1)]
        return {"records": args.records, "size_bytes": args.size,
                "ledger": "fresh per round" if args.fresh_ledger else "existing",
                "partitions": args.partitions, "cores": os.cpu_count(), "rounds": rounds}
    finally:
        if clusters is not None:
            clusters.down()


def table(result: dict) -> str:
    lines = ["| round | system | launch to done (rec/s) | steady (rec/s) | CPU s | launch to "
             "first record (s) | ledger share | --once, nothing to do (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rounds"]:
        for system in r["order"]:
            m = r[system]
            lines.append(f"| {r['round']} | {system} | {m['launch_to_done_rps']:,} | "
                         f"{m['steady_rps']:,} | {m['cpu_s']} | {m['launch_to_first_s']} | "
                         f"{m.get('ledger_share', '-')} | {m.get('once_nothing_to_do_s', '-')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replication", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--config", help="use the running clusters P and B of this config")
    parser.add_argument("--systems", default="plain,offset-ledger,mm2",
                        type=lambda v: [s.strip() for s in v.split(",") if s.strip()],
                        help="comma-separated subset of plain,offset-ledger,mm2 (default all)")
    parser.add_argument("--fresh-ledger", action="store_true",
                        help="a new ledger per offset-ledger run (its table creation counted); "
                             "default: one ledger created before the first round, as deployed")
    parser.add_argument("--executor", choices=("auto", "spark", "local"), default="auto",
                        help="offset-ledger's --executor (spark: copy tasks as a Spark job, "
                             "as on a cluster)")
    parser.add_argument("--continuous", action="store_true",
                        help="offset-ledger only: a continuous replicate while the source is "
                             "filled; reports its ledger share (e.g. --records 10000000)")
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.plain:  # the baseline's own process
        base = load_config(args.config)
        plain_loop(base.cluster("P"), base.cluster("B"), args.topic, f"plain.{args.topic}",
                   args.records, args.partitions)
        return 0
    result = run(args)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"replication-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2))
    print(table(result) if "rounds" in result else json.dumps(result["continuous"]))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
