"""The CLI verbs a history runs (``status``, ``failover``, ``failback``) and the ledger template.

Invariants:
    * Every verb is a real ``offset-ledger`` subprocess; each call is kept as a :class:`Call`
      (argv, exit code, output, seconds) for the checker, which looks at every output.
    * Nothing here decides whether the product was right: a call's outcome is recorded, and the
      history goes on (a failed move leaves the groups where they were).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pipelines.devtools.settings import LEAN_JVM_OPTIONS

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("offset-ledger"))
# Tuning only, in case a verb falls back to Spark: a quicker JVM start on a small machine.
JVM_OPTS = f"{LEAN_JVM_OPTIONS} -Xshare:auto"


def job_env(workdir: Path) -> dict[str, str]:
    """The jobs' environment: ours, with the history's own state folder."""
    env = {**os.environ, "OFFSET_LEDGER_STATE_DIR": str(workdir / ".state")}
    env["SPARK_SUBMIT_OPTS"] = " ".join(filter(None, (env.get("SPARK_SUBMIT_OPTS"), JVM_OPTS)))
    return env


@dataclass
class Call:
    verb: str
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def cli(argv: list[str], config: Path, workdir: Path, timeout: float = 240.0) -> Call:
    """Run ``offset-ledger ARGV --config CONFIG`` to its end."""
    full = [CLI, *argv, "--config", str(config)]
    started = time.monotonic()
    try:
        done = subprocess.run(full, cwd=workdir, env=job_env(workdir), capture_output=True,
                              text=True, timeout=timeout, start_new_session=True)
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        note = f"\n(harness: killed after {timeout:g}s)"
        rc, out, err = -999, _text(exc.stdout), _text(exc.stderr) + note
    return Call(argv[0], full, rc, out, err, time.monotonic() - started)


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def wait_status(argv: list[str], config: Path, workdir: Path, bound_s: float,
                calls: list[Call]) -> Call:
    """Run ``status ARGV`` until it exits 0, at most ``bound_s`` seconds; the last call."""
    deadline = time.monotonic() + bound_s
    while True:
        call = cli(["status", *argv], config, workdir, timeout=bound_s + 60)
        calls.append(call)
        if call.returncode != 3 or time.monotonic() > deadline:
            return call
        time.sleep(1.0)  # a poll interval, as a script's `until status; do sleep; done`


def ledger_template() -> Path:
    """An empty ledger made once by ``offset-ledger ledger init`` (Spark: half a minute), kept
    per version of the table definitions and copied for each history."""
    digest = hashlib.sha1((ROOT / "ledger" / "schemas.py").read_bytes()).hexdigest()[:12]
    template = Path(tempfile.gettempdir()) / f"offset-ledger-torture-ledger-{digest}"
    if (template / ".complete").exists():
        return template
    work = Path(tempfile.mkdtemp(prefix="offset-ledger-torture-init-"))
    config = work / "init.yaml"
    config.write_text("clusters: {P: {bootstrap.servers: '127.0.0.1:1'}, "
                      "B: {bootstrap.servers: '127.0.0.1:2'}}\nflows: {'P->B': true}\n"
                      f"ledger: {{location: '{work / 'ledger'}'}}\n")
    call = cli(["ledger", "init"], config, work, timeout=600)
    if call.returncode != 0:
        raise RuntimeError(f"ledger init failed: {call.stderr[-2000:]}")
    (work / "ledger" / ".complete").write_text("")
    try:
        os.rename(work / "ledger", template)
    except OSError:  # another run made it meanwhile
        pass
    shutil.rmtree(work, ignore_errors=True)
    return template


def copy_ledger(template: Path, location: Path) -> None:
    shutil.copytree(template, location, ignore=shutil.ignore_patterns(".complete"))
