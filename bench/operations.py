"""What the person on call waits for: each operator verb, timed as they run it.

``python -m bench.operations [--sizes 0,10000000] [--repeats 5] [--keep DIR]
[--prebuilt /work/ledger-scale/runs-9999996/ledger]``

Two embedded clusters (the project's own, started here), a flow each way, and per ledger size:

* ``0``: a young ledger: only what this bench writes (a topic ``Ops-0`` of 3 partitions, 3,000
  records replicated, a group ``ops-g-0`` that read half of it; ``-N`` for the size N).
* ``N`` (e.g. ``10000000``): the same, written into the synthetic N-run ledger of
  :mod:`bench.ledger_scale` (``offset_syncs`` of N runs, 50 groups checkpointed every minute
  over the whole period, a span snapshot and its one-hour tail, past operations), built first
  with Spark, or, with ``--prebuilt PATH``, copied from a ledger ``bench.ledger_scale`` built
  (``PATH`` is its ``runs-N/ledger`` folder, ``built.json`` beside it says it is complete;
  the copy is ``cp -r --reflink=auto``: the prebuilt ledger itself is never written).

Each verb runs as the operator runs it: ``offset-ledger ...`` in a new process (Python start,
the CLI, the verb; a JVM only if the verb needs one), wall seconds, the median of
``--repeats`` runs. The project's modules are compiled once first (into the work folder's
``pycache``, ``PYTHONPYCACHEPREFIX``), as a pip install compiles them: a shell with
``PYTHONDONTWRITEBYTECODE`` set would otherwise compile them again in every process::

    translate --group ops-g --from P --to B --format json
    status --flow P->B --group ops-g --format json
    checkpoint --flow P->B --once --group ops-g
    failover --group ops-g --from P --to B --dry-run
    failover  (consumers stopped -> offsets written and recorded: the process's wall time;
    failback   "ready" in the JSON is the verb's own seconds_to_ready)
    audit --operation <the last failover>

Between two moves the group reads a few records on the side it moved to, and replication
(``replicate --once``, not timed) covers them, as in the reference scenario. Targets (2
cores): failover and failback ready < 2 s, translate and status < 1 s, checkpoint --once < 2 s,
audit --operation < 5 s, each within 1.5x between the young and the N-run ledger.
The machine may be shared: the numbers are indicative; ``bench/README.md`` says how to read
them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS, RECORDS = 3, 3000
TARGETS = {"translate": 1.0, "status": 1.0, "checkpoint --once": 2.0,
           "failover --dry-run": 2.0, "failover": 2.0, "failback": 2.0,
           "audit --operation": 5.0}
RATIO = 1.5


def names(size: int) -> tuple[str, str]:
    """The topic and the group of one ledger size (the clusters serve every size)."""
    return f"Ops-{size}", f"ops-g-{size}"


def write_config(workdir: Path, location: Path, bootstraps: dict[str, str], size: int) -> Path:
    topic, _ = names(size)
    raw = {
        "clusters": {a: {"bootstrap.servers": b} for a, b in bootstraps.items()},
        # B->P by pattern: the topic exists only once producers move to B (never, here)
        "flows": {"P->B": {"topics": [topic]},
                  "B->P": {"topics": [f"{topic}.*"],
                           "reverse.checkpointed.topics": [f"P.{topic}"]}},
        "ledger": {"location": str(location)},
        "embedded": {"data.dir": str(workdir / "clusters")},
    }
    path = workdir / f"offset-ledger-{location.parent.name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


PYCACHE: Path | None = None
"""Where the project's compiled modules are kept (set by :func:`compile_modules`)."""


def compile_modules(workdir: Path) -> None:
    """Compile the project's modules once, as an install does (see the module docstring)."""
    global PYCACHE
    PYCACHE = workdir / "pycache"
    subprocess.run([sys.executable, "-m", "compileall", "-q", "ledger", "pipelines"],
                   cwd=ROOT, check=True, env={**_env_without_bytecode_flag(),
                                              "PYTHONPYCACHEPREFIX": str(PYCACHE)})


def _env_without_bytecode_flag() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def cli(config: Path, *argv: str, check: bool = True) -> tuple[float, str]:
    """``offset-ledger ARGV`` in a new process: (wall seconds, stdout)."""
    env = {**_env_without_bytecode_flag(), "PYTHONPATH": str(ROOT)}
    if PYCACHE is not None:
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", *argv, "--config",
                           str(config)], capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - started
    if check and done.returncode != 0:
        raise RuntimeError(f"offset-ledger {' '.join(argv)} exited {done.returncode}: "
                           f"{done.stderr[-2000:]}")
    return seconds, done.stdout


def prebuilt_ledger(path: Path, size: int) -> Path:
    """``path``, a ledger ``bench.ledger_scale`` finished building for ``size`` runs."""
    from bench.ledger_scale import Shape

    marker = path.parent / "built.json"
    if not marker.exists():
        raise SystemExit(f"--prebuilt {path}: no {marker} (the build is not finished)")
    built = json.loads(marker.read_text())
    runs = built.get("counts", {}).get("offset_syncs")
    if runs != Shape(size).runs:
        print(f"warning: --prebuilt {path} holds {runs} runs, not the {Shape(size).runs:,} of "
              f"size {size:,}: its results are labelled {size:,}", flush=True)
    return path


def copy_ledger(source: Path, location: Path) -> None:
    """A copy of ``source`` at ``location`` (a reflink where the filesystem has them): the
    bench writes into its copy only."""
    location.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-r", "--reflink=auto", str(source), str(location)], check=True)


def prepare(spark, config_path: Path, size: int, prebuilt: Path | None = None) -> None:
    """The ledger (synthetic history when ``size``: built, or copied from ``prebuilt``), the
    topic, its replication, the group."""
    from ledger.config import load_config
    from ledger.tables import Ledger
    from pipelines.devtools.workload import consume, produce
    from pipelines.edge import kafka_admin
    from pipelines.replicate.job import replicate_once

    config = load_config(str(config_path))
    topic, group = names(size)
    location = Path(config.ledger_location)
    if size and prebuilt is not None:
        started = time.perf_counter()
        copy_ledger(prebuilt, location)
        print(f"  copied the prebuilt {size:,}-run ledger {prebuilt} in "
              f"{time.perf_counter() - started:.0f}s", flush=True)
    elif size:
        from bench.ledger_scale import Shape, build_ledger

        started = time.perf_counter()
        build_ledger(spark, location, Shape(size))
        print(f"  built the {size:,}-run ledger in {time.perf_counter() - started:.0f}s",
              flush=True)
    else:
        Ledger(spark, str(location)).init()
    primary = config.cluster("P")
    kafka_admin.create_topic(primary, topic, PARTITIONS)
    produce(primary, topic, [f"v{i}" for i in range(RECORDS)], PARTITIONS)
    consume(primary, group, [topic], limit=RECORDS // 2)
    for flow in ("P->B", "B->P"):
        replicate_once(None, config, flow)


def move_cycle(config_path: Path, size: int, times: dict[str, list[float]]) -> str:
    """failover P -> B, read on B, failback B -> P, read on P; returns the failover's id."""
    from ledger.config import load_config
    from pipelines.devtools.workload import consume

    config = load_config(str(config_path))
    topic, group = names(size)
    ids = {}
    for kind, source, target, read_on in (("failover", "P", "B", [f"P.{topic}", topic]),
                                          ("failback", "B", "P", [topic, f"B.{topic}"])):
        seconds, out = cli(config_path, kind, "--group", group, "--from", source, "--to",
                           target, "--format", "json")
        result = json.loads(out)
        times[kind].append(seconds)
        times[f"{kind} (seconds_to_ready)"].append(result["seconds_to_ready"])
        ids[kind] = result["operation_id"]
        consume(config.cluster(target), group, read_on, limit=20)
        cli(config_path, "replicate", "--flow", f"{source}->{target}", "--once")
        cli(config_path, "replicate", "--flow", f"{target}->{source}", "--once")
    return ids["failover"]


def measure(config_path: Path, size: int, repeats: int) -> dict[str, float]:
    _, group = names(size)
    times: dict[str, list[float]] = {k: [] for k in (
        "translate", "status", "checkpoint --once", "failover --dry-run", "failover",
        "failover (seconds_to_ready)", "failback", "failback (seconds_to_ready)",
        "audit --operation")}
    verbs = {
        "translate": ["translate", "--group", group, "--from", "P", "--to", "B", "--format",
                      "json"],
        "status": ["status", "--flow", "P->B", "--group", group, "--format", "json"],
        "checkpoint --once": ["checkpoint", "--flow", "P->B", "--once", "--group", group],
        "failover --dry-run": ["failover", "--group", group, "--from", "P", "--to", "B",
                               "--dry-run"],
    }
    for _ in range(repeats):
        for name, argv in verbs.items():
            seconds, _ = cli(config_path, *argv, check=name != "status")  # status: 0 or 3
            times[name].append(seconds)
    last = ""
    for _ in range(repeats):
        last = move_cycle(config_path, size, times)
    for _ in range(repeats):
        times["audit --operation"].append(cli(config_path, "audit", "--operation", last)[0])
    return {name: round(statistics.median(values), 2) for name, values in times.items()}


def work_folder(args: argparse.Namespace, prefix: str) -> tuple[Path, Path | None]:
    """The work folder (``--keep`` or a fresh one, the modules compiled into it) and the
    ``--prebuilt`` ledger for the one non-zero size of ``--sizes``, if given."""
    workdir = Path(args.keep or tempfile.mkdtemp(prefix=prefix))
    workdir.mkdir(parents=True, exist_ok=True)
    prebuilt = None
    if args.prebuilt:
        scaled = [s for s in args.sizes if s]
        if len(scaled) != 1:
            raise SystemExit("--prebuilt needs one non-zero size in --sizes (e.g. 0,10000000)")
        prebuilt = prebuilt_ledger(Path(args.prebuilt).resolve(), scaled[0])
    compile_modules(workdir)
    return workdir, prebuilt


def run(args: argparse.Namespace) -> dict:
    from ledger.config import config_from_mapping
    from pipelines.devtools.clusters import EmbeddedClusters, free_port
    from pipelines.spark import get_spark

    workdir, prebuilt = work_folder(args, "bench-operations-")
    base = config_from_mapping({
        "clusters": {a: {"bootstrap.servers": f"127.0.0.1:{free_port()}"} for a in ("P", "B")},
        "flows": {"P->B": True}, "embedded": {"data.dir": str(workdir / "clusters")}})
    clusters = EmbeddedClusters(base)
    bootstraps = clusters.up()
    spark = get_spark("offset-ledger-bench", master="local[2]", ui=False)
    result: dict = {"cores": os.cpu_count(), "repeats": args.repeats, "sizes": {}}
    try:
        for size in args.sizes:
            location = workdir / f"ledger-{size}" / "ledger"
            config_path = write_config(workdir, location, bootstraps, size)
            label = "young" if not size else f"{size:,} runs"
            print(f"{label}: preparing {location} ...", flush=True)
            prepare(spark, config_path, size, prebuilt)
            medians = measure(config_path, size, args.repeats)
            result["sizes"][str(size)] = medians
            for name, value in medians.items():
                print(f"  {name:32} {value:6.2f}s", flush=True)
    finally:
        spark.stop()
        clusters.down()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return result


def table(result: dict) -> str:
    sizes = list(result["sizes"])
    head = "| verb | target | " + " | ".join(
        "young" if s == "0" else f"{int(s):,} runs" for s in sizes) + " |"
    lines = [head, "|" + "---|" * (len(sizes) + 2)]
    first = result["sizes"][sizes[0]]
    for name in first:
        target = TARGETS.get(name.split(" (")[0])
        cells = [f"{result['sizes'][s][name]:.2f}" for s in sizes]
        lines.append(f"| {name} | {'< ' + str(target) + ' s' if target else ''} | "
                     + " | ".join(cells) + " |")
    if len(sizes) > 1:
        worst = max(result["sizes"][sizes[-1]][n] / max(first[n], 0.01) for n in first)
        lines.append(f"\nlargest ratio {sizes[-1]} / young: {worst:.2f} (target < {RATIO})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")],
                        default=[0, 10_000_000],
                        help="ledger sizes in runs, 0 = young (default 0,10000000)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep", help="work in this folder and keep it")
    parser.add_argument("--prebuilt", metavar="PATH",
                        help="copy this ledger (a finished bench.ledger_scale build, e.g. "
                             "/work/ledger-scale/runs-9999996/ledger) for the non-zero size of "
                             "--sizes instead of building it")
    args = parser.parse_args(argv)
    result = run(args)
    print()
    print(table(result))
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "operations.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
