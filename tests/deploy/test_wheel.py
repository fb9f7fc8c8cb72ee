"""The wheel works on its own, installed into a fresh virtualenv outside the checkout, in the
two combinations docs/deployment.md documents, run from a directory that is not the checkout:

    bare    `pip install offset-ledger`: ``--help``; ``replicate`` copies with worker processes
            that import the installed package and commits with delta-rs (no pyspark, dbt, Great
            Expectations or matplotlib installed); ``audit``, ``validate`` and ``ledger init``
            each say which extra to install (exit 2, one line, no traceback)
    full    the same venv plus ``[local,audit,validate]``: ``ledger init`` and ``audit`` (the dbt
            project coming from the wheel's package data)

One venv per module: the bare tests run first, then the extras are added to it.

The only thing taken from the checkout at run time is the local jars folder, through the
documented ``OFFSET_LEDGER_JARS_DIR`` (no Spark runtime provides Delta in a plain venv).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from pipelines.devtools.settings import LEAN_JVM_OPTIONS
from tests.pipelines.replicate.kafka_io import (
    assert_runs_cover,
    assert_runs_exact,
    create,
    produce,
    read_all,
    runs_of,
    sample,
)

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.deploy, pytest.mark.spark, pytest.mark.dbt]


def test_wheel_ships_the_dbt_project_and_runtime_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    sql = {n for n in names if n.startswith("offset_ledger_dbt/") and n.endswith(".sql")}
    expected = {f"offset_ledger_dbt/{p.relative_to(ROOT / 'dbt')}"
                for p in (ROOT / "dbt").rglob("*.sql") if "target" not in p.parts}
    assert expected and sql == expected
    assert {"offset_ledger_dbt/__init__.py", "offset_ledger_dbt/dbt_project.yml",
            "offset_ledger_dbt/profiles.yml", "pipelines/log4j2-spark.properties"} <= names
    assert not any(n.startswith("dbt/") for n in names), "a top-level dbt package shadows dbt-core"
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "Requires-Python: <3.13,>=3.11" in metadata
    by_extra: dict[str | None, set[str]] = {}
    for line in metadata.splitlines():
        if line.startswith("Requires-Dist:"):
            requirement = line.split(":", 1)[1].strip()
            extra = re.search(r'extra == "([\w-]+)"', requirement)
            name = re.split(r"[\s<>=!;\[(]", requirement, maxsplit=1)[0].lower()
            by_extra.setdefault(extra and extra.group(1), set()).add(name)
    # The base install copies records: no Spark (a Spark runtime provides its own), no dbt, no
    # Great Expectations, no matplotlib; each extra brings exactly its own.
    assert not by_extra[None] & {"pyspark", "delta-spark", "dbt-core", "dbt-spark",
                                 "great-expectations", "matplotlib"}, by_extra[None]
    assert {"confluent-kafka", "deltalake", "pyarrow"} <= by_extra[None]
    assert by_extra["local"] == {"pyspark", "delta-spark"}
    assert by_extra["audit"] == {"dbt-core", "dbt-spark", "jinja2", "matplotlib"}
    assert by_extra["validate"] == {"great-expectations"}


EXTRAS = "local,audit,validate"  # every extra but dev: what the full phase adds
OPTIONAL = ("pyspark", "delta", "dbt", "great_expectations", "matplotlib")


def _install(env_dir: Path, requirement: str) -> None:
    """``pip install requirement`` into ``env_dir``, pinned to this environment's versions so
    pip's cache serves every download (nothing is fetched twice).

    This environment's pip installs into it (``pip --python``), so the venv needs no pip of its
    own, and ``--no-compile`` skips byte-compiling every installed module up front (the tests
    import a small part of them; Python compiles those on first import as usual)."""
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
                            check=True, capture_output=True, text=True).stdout
    constraints = env_dir.parent / "constraints.txt"
    constraints.write_text("\n".join(line for line in freeze.splitlines()
                                     if "==" in line and not line.startswith("offset-ledger")))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"),
                    "install", "-q", "--no-compile", "-c", str(constraints), requirement],
                   check=True, cwd=env_dir.parent, capture_output=True, text=True)


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv (no system site-packages) with the bare ``offset-ledger`` wheel."""
    env_dir = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    _install(env_dir, str(wheel))
    return env_dir


@pytest.fixture(scope="module")
def full_venv(venv: Path, wheel: Path) -> Path:
    """The same virtualenv with every extra added (after the bare tests ran)."""
    _install(venv, f"{wheel}[{EXTRAS}]")
    return venv


def _installed(venv: Path) -> list[str]:
    """Which optional packages the venv can import."""
    code = ("import importlib.util as u; "
            f"print(' '.join(m for m in {OPTIONAL!r} if u.find_spec(m)))")
    found = _run(venv, venv.parent, str(venv / "bin" / "python"), "-c", code)
    assert found.returncode == 0, found.stderr
    return found.stdout.split()


def _run(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK"))}
    env.update({"OFFSET_LEDGER_JARS_DIR": str(ROOT / "jars"),
                # Each step is a short-lived driver JVM: C1 only and the serial collector start
                # it faster on a small machine (tuning only, added to the driver's options).
                "SPARK_SUBMIT_OPTS": f"{LEAN_JVM_OPTIONS} -Xshare:auto",
                "OFFSET_LEDGER_DRIVER_MEMORY": os.environ.get("OFFSET_LEDGER_DRIVER_MEMORY", "1g"),
                "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}"})
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_bare_install_helps_and_names_the_extra_each_verb_needs(venv: Path,
                                                                 tmp_path: Path) -> None:
    assert _installed(venv) == [], "the bare phase runs before the extras are installed"
    config = tmp_path / "offset-ledger.yaml"
    config.write_text(textwrap.dedent(f"""\
        clusters:
          P: {{bootstrap.servers: "127.0.0.1:1"}}
          B: {{bootstrap.servers: "127.0.0.1:2"}}
        flows: {{"P->B": true}}
        ledger: {{location: "{tmp_path / 'ledger'}"}}
        """))
    cli = str(venv / "bin" / "offset-ledger")
    shown = _run(venv, tmp_path, cli, "--help")
    assert shown.returncode == 0, shown.stderr
    assert "replicate" in shown.stdout and "audit" in shown.stdout
    replicate = _run(venv, tmp_path, cli, "replicate", "--help")
    assert replicate.returncode == 0 and "--executor" in replicate.stdout, replicate.stderr
    for argv, extra in ((["audit", "--group", "G"], "audit"), (["validate"], "validate"),
                        (["ledger", "init"], "local")):
        out = _run(venv, tmp_path, cli, *argv, "--config", str(config))
        assert (out.returncode, out.stdout) == (2, ""), out.stderr
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
        assert f"pip install 'offset-ledger[{extra}]'" in out.stderr, out.stderr


@pytest.mark.kafka
def test_bare_install_replicates_with_local_copy_workers(venv: Path, tmp_path: Path,
                                                         make_config, unique) -> None:
    assert _installed(venv) == [], "the bare phase runs before the extras are installed"
    topic = unique("wheel")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, topic, 2)
    produce(p, topic, sample(2, 25, "w"))
    work = tmp_path / "elsewhere"
    work.mkdir()

    # --executor local: the copy tasks run in spawned workers of the venv's interpreter, which
    # must find the copy task in the installed package (nothing of the checkout is importable);
    # the ledger is committed with delta-rs (the venv has no Spark).
    run = _run(venv, work, str(venv / "bin" / "offset-ledger"), "replicate", "--flow", "P->B",
               "--once", "--executor", "local", "--config", config.path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "50 record(s) copied" in run.stdout

    source, replica = read_all(p, topic, 2), read_all(b, f"P.{topic}", 2)
    runs = runs_of(config, topic)  # read with delta-rs, as the job wrote them
    assert_runs_exact(runs, source, replica)
    assert_runs_cover(runs, source)


def test_installed_wheel_runs_help_init_and_audit(full_venv: Path, tmp_path: Path) -> None:
    venv = full_venv
    assert _installed(venv) == list(OPTIONAL)
    work = tmp_path / "elsewhere"
    work.mkdir()
    assert ROOT not in work.parents
    location = work / "ledger"
    config = work / "offset-ledger.yaml"
    config.write_text(textwrap.dedent(f"""\
        clusters:
          P: {{bootstrap.servers: "127.0.0.1:1"}}
          B: {{bootstrap.servers: "127.0.0.1:2"}}
        flows: {{"P->B": true, "B->P": true}}
        ledger: {{location: "{location}"}}
        """))
    python = str(venv / "bin" / "python")

    where = _run(venv, work, python, "-c",
                 "import pipelines, offset_ledger_dbt; print(pipelines.__file__); "
                 "print(offset_ledger_dbt.__file__)")
    assert where.returncode == 0, where.stderr
    assert all(str(venv) in line and str(ROOT) not in line for line in where.stdout.split())

    shown = _run(venv, work, str(venv / "bin" / "offset-ledger"), "--help")
    assert shown.returncode == 0, shown.stderr
    assert "audit" in shown.stdout and "replicate" in shown.stdout

    init = _run(venv, work, str(venv / "bin" / "offset-ledger"), "ledger", "init",
                "--config", str(config))
    assert init.returncode == 0, init.stdout + init.stderr
    assert (location / "offset_syncs" / "_delta_log").is_dir()

    # A small ledger: the reference scenario's rows (failover, then failback), written with
    # the installed package by the tests' row builder copied next to the ledger.
    shutil.copy(ROOT / "tests" / "dbt" / "ledger_rows.py", work / "ledger_rows.py")
    fill = _run(venv, work, python, "-c",
                "from ledger_rows import write_reference_ledger\n"
                "from pipelines.spark import get_spark\n"
                f"write_reference_ledger(get_spark(), {str(location)!r})\n")
    assert fill.returncode == 0, fill.stderr[-3000:]

    audit = _run(venv, work, str(venv / "bin" / "offset-ledger"), "audit", "--config",
                 str(config), "--operation", "op-failback", "--format", "json")
    assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-3000:]
    marts = json.loads(audit.stdout)
    assert {r["operation_id"] for r in marts["resume_audit"]} == {"op-failback"}
    assert sum(r["duplicates_avoided"] for r in marts["failback_duplicates_avoided"]) == 6
    assert not (work / "dbt").exists() and not (work / "target").exists()
