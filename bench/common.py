"""What the side-by-side benchmarks share: embedded clusters, the systems' launch commands,
measuring process trees, and stopping everything a benchmark started.

Used by ``bench.replication`` (throughput) and ``bench.latency`` (latency, CPU, memory).

Invariants:
    * Brokers are started only through the project's own ``EmbeddedClusters``, MirrorMaker 2
      only through the peer's ``mm2.sh`` (``../shared/peers/mm2``), offset-ledger only through
      its console script: each benchmark measures what a user runs.
    * A process tree's CPU counts its exited members too: ``tree_usage`` adds each live
      process's reaped children (``cutime + cstime``), so a worker that exits between two
      samples is still counted, once, in its parent.
    * :class:`Processes` starts each command in its own session (process group) and
      ``stop_all`` ends every group it started, first with SIGTERM to the leader (the systems'
      own clean stop), then with SIGKILL to the whole group: nothing outlives the benchmark.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ledger import settings
from ledger.config import ClusterConfig, Config, config_from_mapping
from pipelines.devtools import settings as dev_settings

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
T = TypeVar("T")


def in_folder(keep: str | None, prefix: str, run: Callable[[Path], T]) -> T:
    """``run(folder)`` in ``keep`` (left there) or in a temporary folder removed after it."""
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix=prefix))
    try:
        return run(work)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def save_results(stem: str, results: Any) -> Path:
    """``results`` as JSON in ``bench/results/<stem>-<time>.json``; returns the path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"{stem}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2))
    return out


def _main_checkout() -> Path:
    """The main checkout of this repository (``ROOT`` itself unless ROOT is a git worktree)."""
    try:
        common = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-common-dir"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ROOT
    return (ROOT / common).resolve().parent if common else ROOT


def mm2_dir() -> Path:
    """The MirrorMaker 2 peer (``$OFFSET_LEDGER_MM2_PEER``, else ``shared/peers/mm2``)."""
    return dev_settings.mm2_peer() or _main_checkout().parent / "shared/peers/mm2"


def mm2_jars() -> Path:
    """The peer's jars: ``mm2/`` of ``$OFFSET_LEDGER_JARS_DIR`` (else ``jars/``)."""
    return (settings.jars_dir() or ROOT / "jars") / "mm2"


CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# --- process trees -----------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def children() -> dict[int, list[int]]:
    """``{parent pid: [child pids]}`` of every process now."""
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            kids.setdefault(int(fields[1]), []).append(int(entry.name))
    return kids


def tree(pid: int) -> list[int]:
    """``pid`` and all its live descendants."""
    kids, out, todo = children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cpu_seconds(pid: int, reaped: bool = False) -> float | None:
    """utime + stime of ``pid`` (``reaped``: plus its waited-for children's), None if gone."""
    fields = _stat(pid)
    if fields is None:
        return None
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])  # cutime + cstime
    return ticks / CLK_TCK


def rss_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def tree_usage(pid: int) -> tuple[float, int]:
    """(CPU seconds, RSS bytes) of ``pid``'s tree: its live processes and every child they
    reaped (an exited worker's CPU stays in its parent's ``cutime``)."""
    cpu, rss = 0.0, 0
    for p in tree(pid):
        cpu += cpu_seconds(p, reaped=True) or 0.0
        rss += rss_bytes(p)
    return cpu, rss


class Processes:
    """Every process a benchmark starts, each in its own process group, stopped for sure."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen] = []

    def start(self, command: Sequence[str], **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(list(command), start_new_session=True, **kwargs)
        self.started.append(proc)
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen, timeout: float = 60.0) -> int:
        """SIGTERM to the leader (its own clean stop), then SIGKILL to its whole group."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                print(f"  pid {proc.pid} still running {timeout:g} s after SIGTERM: SIGKILL",
                      file=sys.stderr)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group (workers, JVM children)
        except (ProcessLookupError, PermissionError):
            pass
        return proc.wait(30)

    def stop_all(self, timeout: float = 20.0) -> None:
        for proc in reversed(self.started):
            self.stop(proc, timeout)
        self.started.clear()


# --- clusters and the systems' commands --------------------------------------------------------


def embedded_config(workdir: Path) -> Config:
    """A config for a fresh pair of embedded clusters P and B with data under ``workdir``."""
    from pipelines.devtools.clusters import free_port

    raw = {
        "clusters": {a: {"bootstrap.servers": f"127.0.0.1:{free_port()}"} for a in ("P", "B")},
        "flows": {"P->B": True},
        "embedded": {"data.dir": str(workdir / "clusters")},
    }
    path = workdir / "offset-ledger.yaml"
    path.write_text(yaml.safe_dump(raw))
    return config_from_mapping(raw, path=str(path))


def offset_ledger_bin() -> str:
    return str(Path(sys.executable).with_name("offset-ledger"))


def state_env(workdir: Path) -> dict[str, str]:
    return {**os.environ, "OFFSET_LEDGER_STATE_DIR": str(workdir / ".state")}


def flow_config(cfg_path: str, topics: Sequence[str], ledger: Path, out: Path,
                **flow_keys: object) -> Path:
    """``cfg_path`` with flow P->B limited to ``topics`` (regexes), the ledger at ``ledger``."""
    raw = yaml.safe_load(Path(cfg_path).read_text())
    raw["flows"] = {"P->B": {"topics": list(topics), **flow_keys}}
    raw["ledger"] = {"location": str(ledger)}
    out.write_text(yaml.safe_dump(raw))
    return out


def init_ledger(cfg_path: str, workdir: Path, ledger: Path | None = None) -> Path:
    """The ledger, created before the first run as a deployment creates it once."""
    ledger = ledger or workdir / "ledger"
    raw = yaml.safe_load(Path(cfg_path).read_text())
    raw["ledger"] = {"location": str(ledger)}
    cfg = workdir / "ol-init.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    subprocess.run([offset_ledger_bin(), "ledger", "init", "--config", str(cfg)], cwd=workdir,
                   check=True, capture_output=True, env=state_env(workdir))
    return ledger


def require_mm2_jars() -> None:
    if not mm2_jars().is_dir():
        raise SystemExit(f"MirrorMaker 2 jars missing in {mm2_jars()}: mvn -q -B -s "
                         f"jvm/settings.xml -f {mm2_dir()}/pom.xml dependency:copy-dependencies "
                         f"-DoutputDirectory={mm2_jars()}")


MM2_VARIANTS = ("default", "tuned", "eos")


def mm2_command(source: ClusterConfig, target: ClusterConfig, topics: str, workdir: Path,
                tasks: int, variant: str = "default") -> tuple[list[str], dict[str, str]]:
    """The peer's ``mm2.sh`` for flow P->B of ``topics`` (an MM2 regex list), its environment.

    Fresh Connect internal topics per call (``MM2_RUN_ID``). ``variant``: ``default``
    (Connect's defaults), ``tuned`` (the peer's ``mm2-tuned.properties``: producer batching
    and idempotence) or ``eos`` (the peer's ``mm2-eos.properties``: MirrorMaker 2's own
    exactly-once, KIP-618, with its KIP-710 REST listener moved to a free port so that runs
    never collide on the file's fixed one).
    """
    if variant not in MM2_VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(MM2_VARIANTS)}, not {variant!r}")
    require_mm2_jars()
    env = {**os.environ, "MM2_P": source.bootstrap_servers, "MM2_B": target.bootstrap_servers,
           "MM2_TOPICS": topics, "MM2_TASKS_MAX": str(tasks),
           "MM2_RUN_ID": uuid.uuid4().hex[:8]}
    env.pop("MM2_EXTRA_PROPS", None)
    if variant == "tuned":
        env["MM2_EXTRA_PROPS"] = str(mm2_dir() / "mm2-tuned.properties")
    elif variant == "eos":
        from pipelines.devtools.clusters import free_port

        props = re.sub(r"(?m)^listeners\s*=.*$", f"listeners = http://127.0.0.1:{free_port()}",
                       (mm2_dir() / "mm2-eos.properties").read_text())
        workdir.mkdir(parents=True, exist_ok=True)
        extra = workdir / "mm2-eos.properties"
        extra.write_text(props)
        env["MM2_EXTRA_PROPS"] = str(extra)
    return ["bash", str(mm2_dir() / "mm2.sh"), str(mm2_jars()), str(workdir)], env


def offline_checkpointer(spark, location: Path, flow: str) -> tuple:
    """``(config, ledger, checkpointer)`` for a synthetic ledger at ``location`` with one flow
    ``flow`` between clusters that are never contacted: the checkpointer observes no group on
    the target (the only Kafka read of a disaster dry run), so the ledger reads are all that
    the operator verbs' timings measure."""
    from ledger.tables import Ledger
    from pipelines.checkpoint.engine import Checkpointer

    source, target = flow.split("->")
    raw = {"clusters": {a: {"bootstrap.servers": f"127.0.0.1:{port}"}  # never contacted
                        for a, port in ((source, 1), (target, 2))},
           "flows": {flow: True}, "ledger": {"location": str(location)}}
    config = config_from_mapping(raw, path=str(location.parent / "offset-ledger.yaml"))
    ledger = Ledger(spark, str(location))

    class Offline(Checkpointer):
        def observe(self, cluster_alias, groups):
            return [], {}

    return config, ledger, Offline(spark, config, ledger)


def ledger_bench_session(name: str, keep: str | None) -> tuple:
    """``(spark, root, state)`` for a Kafka-free ledger benchmark: a fresh state folder (the JVM's
    metastore and warehouse), the ledgers under ``keep`` (kept) or a temporary folder, and a
    ``local[2]`` session without its UI, quiet but for errors. The disaster dry runs' warning
    that P is not contacted is expected there, and silenced."""
    import logging
    import tempfile

    from pipelines.spark import get_spark

    state = Path(tempfile.mkdtemp(prefix=f"{name}-state-"))
    os.environ["OFFSET_LEDGER_STATE_DIR"] = str(state)
    root = Path(keep).resolve() if keep else Path(tempfile.mkdtemp(prefix=f"{name}-"))
    spark = get_spark(f"offset-ledger-{name}", master="local[2]", ui=False)
    spark.sparkContext.setLogLevel("ERROR")
    logging.getLogger("pipelines.checkpoint.engine").setLevel(logging.ERROR)
    return spark, root, state
