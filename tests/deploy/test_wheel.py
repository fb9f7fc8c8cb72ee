"""The wheel works on its own: installed into a fresh virtualenv outside the checkout (with the
``local`` extra), ``offset-ledger --help``, ``ledger init`` and ``audit`` run from a directory
that is not the checkout, the dbt project coming from the wheel's package data; ``replicate``
copies with worker processes that import the installed package.

The only thing taken from the checkout at run time is the local jars folder, through the
documented ``OFFSET_LEDGER_JARS_DIR`` (no Spark runtime provides Delta in a plain venv).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.pipelines.replicate.kafka_io import (
    assert_runs_cover,
    assert_runs_exact,
    create,
    ledger_runs,
    produce,
    read_all,
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
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    # Nothing in the base install may bring a Spark: a Spark runtime provides its own.
    spark_reqs = [r for r in requires
                  if "pyspark" in r or "delta-spark" in r or "[session]" in r]
    assert len(spark_reqs) == 3 and all('extra == "local"' in r for r in spark_reqs), spark_reqs


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv (no system site-packages) with ``offset-ledger[local]`` from the wheel,
    pinned to this environment's versions so pip's cache serves every download.

    This environment's pip installs into it (``pip --python``), so the venv needs no pip of its
    own, and ``--no-compile`` skips byte-compiling every installed module up front (the tests
    import a small part of them; Python compiles those on first import as usual)."""
    home = tmp_path_factory.mktemp("venv")
    env_dir = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
                            check=True, capture_output=True, text=True).stdout
    constraints = home / "constraints.txt"
    constraints.write_text("\n".join(line for line in freeze.splitlines()
                                     if "==" in line and not line.startswith("offset-ledger")))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"),
                    "install", "-q", "--no-compile", "-c", str(constraints), f"{wheel}[local]"],
                   check=True, cwd=home, capture_output=True, text=True)
    return env_dir


def _run(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK"))}
    env.update({"OFFSET_LEDGER_JARS_DIR": str(ROOT / "jars"),
                # Each step is a short-lived driver JVM: C1 only and the serial collector start
                # it faster on a small machine (tuning only, added to the driver's options).
                "SPARK_SUBMIT_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto",
                "OFFSET_LEDGER_DRIVER_MEMORY": os.environ.get("OFFSET_LEDGER_DRIVER_MEMORY", "1g"),
                "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}"})
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_installed_wheel_runs_help_init_and_audit(venv: Path, tmp_path: Path) -> None:
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



@pytest.mark.kafka
def test_installed_wheel_replicates_with_local_copy_workers(venv: Path, tmp_path: Path, spark,
                                                             make_config, unique) -> None:
    topic = unique("wheel")
    config = make_config(flows={"P->B": {"topics": [topic]}})
    p, b = config.cluster("P"), config.cluster("B")
    create(p, topic, 2)
    produce(p, topic, sample(2, 25, "w"))
    work = tmp_path / "elsewhere"
    work.mkdir()

    # --executor local: the copy tasks run in spawned workers of the venv's interpreter, which
    # must find the copy task in the installed package (nothing of the checkout is importable).
    run = _run(venv, work, str(venv / "bin" / "offset-ledger"), "replicate", "--flow", "P->B",
               "--once", "--executor", "local", "--config", config.path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "50 record(s) copied" in run.stdout

    source, replica = read_all(p, topic, 2), read_all(b, f"P.{topic}", 2)
    runs = ledger_runs(spark, config, "P->B", topic)
    assert_runs_exact(runs, source, replica)
    assert_runs_cover(runs, source)
