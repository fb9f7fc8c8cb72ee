"""Run the dbt project in ``dbt/`` in this process, on this process's SparkSession.

Invariants:
    * dbt runs in-process (``dbt.cli.main.dbtRunner``) with the ``local`` target of
      ``dbt/profiles.yml`` (dbt-spark ``session`` method), so it uses the active SparkSession
      and its Delta configuration; nothing here builds a session or reads config at import.
    * A path-based ledger is registered in the session catalog (schema ``offset_ledger`` by
      default) as external Delta tables pointing at the ledger's paths; registering drops
      only catalog entries, never data. A catalog-schema ledger is used where it is.
    * ``--as-of-version N`` means "the ledger when ``operations`` was at version N": every
      table is read at its latest version committed at or before that commit's timestamp.
      ``--as-of-timestamp T`` reads every table at its latest version at or before T.
    * dbt's target and log folders, and the Delta tables of ``marts/audits``, go to a fresh
      temporary directory per invocation, so concurrent runs from one checkout (or from
      processes sharing a warehouse directory) never share files.
    * The dbt project is the package data ``offset_ledger_dbt`` of the installed wheel (found
      with ``importlib.resources``, also inside a zip such as ``--py-files``), or ``dbt/`` of a
      source checkout (editable installs). It is copied into that temporary directory before
      dbt runs, so an installed, read-only or zipped package works.
    * An unchanged audit reuses its marts: :func:`build_marts` skips dbt when the session's
      last build was a ``dbt run`` of the same ledger at the same table versions, with the
      same point in time, selection and vars, and its marts are still there. Anything that
      moves with the clock (``time_travel_days``) and ``dbt build`` (its tests) always run.
"""

from __future__ import annotations

import datetime as dt
import importlib.resources
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ledger import settings
from ledger.schemas import DERIVED, OPERATIONS, TABLES
from ledger.tables import Ledger, LedgerError

log = logging.getLogger(__name__)

DBT_PACKAGE = "offset_ledger_dbt"
# A source checkout (editable install): dbt/ beside pipelines/ (no package of that name there).
CHECKOUT_DBT_DIR = Path(__file__).resolve().parents[2] / "dbt"
WORK_PREFIX = "offset-ledger-dbt-"
MARTS = ("forward_translations", "reverse_translations", "resume_audit",
         "failback_duplicates_avoided")
# Models materialized as Delta tables (marts/audits, intermediate/operation_versions).
TABLE_MODELS = ("resume_audit", "failback_duplicates_avoided", "int_operation_runs",
                "int_operation_checkpoints", "int_operation_resume_points")


class DbtRunError(LedgerError):
    """dbt failed: a model did not build or a data/unit test failed."""


@dataclass(frozen=True)
class DbtResult:
    """What one dbt invocation did: node name -> status, and failure messages."""

    success: bool
    statuses: dict[str, str]
    failures: list[str]


dbt_schema = settings.dbt_schema


def register_ledger(spark: SparkSession, ledger: Ledger) -> str:
    """Make the ledger tables visible to dbt's sources; return the schema they are in."""
    ledger.require()
    if not ledger.path_based:
        return ledger.location
    schema = settings.source_schema()
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    for name in TABLES:
        if name in DERIVED and not ledger.exists(name):
            continue  # a ledger from before the derived table: no model reads it
        path = ledger.table_path(name).replace("'", "\\'")
        spark.sql(f"DROP TABLE IF EXISTS {schema}.{name}")  # external: the data stays
        spark.sql(f"CREATE TABLE {schema}.{name} USING DELTA LOCATION '{path}'")
    return schema


def _history(ledger: Ledger, name: str) -> list[tuple[int, dt.datetime]]:
    rows = ledger.spark.sql(f"DESCRIBE HISTORY {ledger.identifier(name)}").select(
        "version", "timestamp").collect()
    return sorted((int(r["version"]), r["timestamp"]) for r in rows)


def resolve_as_of(ledger: Ledger, as_of_version: int | None = None,
                  as_of_timestamp: str | None = None) -> dict[str, int]:
    """The Delta version of every ledger table at the requested point (empty: current)."""
    if as_of_version is None and as_of_timestamp is None:
        return {}
    if as_of_version is not None and as_of_timestamp is not None:
        raise LedgerError("give --as-of-version or --as-of-timestamp, not both")
    if as_of_version is not None:
        history = dict(_history(ledger, OPERATIONS))
        if int(as_of_version) not in history:
            raise LedgerError(f"operations has no version {as_of_version} "
                              f"(versions {min(history)}..{max(history)})")
        point = history[int(as_of_version)]
    else:
        row = ledger.spark.sql("SELECT CAST(:t AS TIMESTAMP) AS t",
                               args={"t": str(as_of_timestamp)}).first()
        if row is None or row["t"] is None:
            raise LedgerError(f"--as-of-timestamp {as_of_timestamp!r} is not a timestamp")
        point = row["t"]
    versions: dict[str, int] = {}
    for name in [n for n in TABLES if n not in DERIVED]:  # a cache no audit reads
        before = [v for v, ts in _history(ledger, name) if ts <= point]
        if not before:
            raise LedgerError(f"ledger table {name} did not exist at {point}")
        versions[name] = max(before)
    if as_of_version is not None:
        versions[OPERATIONS] = int(as_of_version)
    return versions


def dbt_project() -> Traversable:
    """The dbt project: the installed package data, else the checkout's ``dbt/``."""
    project: Traversable
    try:
        project = importlib.resources.files(DBT_PACKAGE)
    except (ModuleNotFoundError, NotADirectoryError):
        # An editable install maps the package onto dbt/ as a namespace without __init__.py,
        # which importlib.resources cannot open: use the checkout's folder directly.
        project = CHECKOUT_DBT_DIR
    if not project.joinpath("dbt_project.yml").is_file():
        raise LedgerError(f"the dbt project is missing: no dbt_project.yml in {project} "
                          f"(reinstall offset-ledger; the wheel ships it as {DBT_PACKAGE})")
    return project


def _copy_tree(source: Traversable, target: Path) -> None:
    """Copy a (possibly zipped) resource tree, skipping dbt's own output folders."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if entry.name in ("target", "logs", "dbt_packages", "__pycache__", "__init__.py"):
            continue
        if entry.is_dir():
            _copy_tree(entry, target / entry.name)
        else:
            (target / entry.name).write_bytes(entry.read_bytes())


def invoke_dbt(command: str, *, select: str | None = None,
               variables: dict[str, Any] | None = None,
               extra_args: list[str] | None = None) -> DbtResult:
    """Run ``dbt <command>`` on the project in-process; never raises on test failures.

    dbt works in a temporary folder: its copy of the project, ``target/`` and ``logs/`` are
    removed when it returns; ``tables/`` (the Delta files of the table models, unless
    ``$OFFSET_LEDGER_AUDIT_DIR`` puts them on shared storage) stays while the marts are
    registered, and goes when the next build replaces them (:func:`build_marts`).
    """
    from dbt.cli.main import dbtRunner

    work = Path(tempfile.mkdtemp(prefix=WORK_PREFIX))
    project_dir = work / "project"  # dbt wants a writable project folder: copy it
    _copy_tree(dbt_project(), project_dir)
    args = [command, "--project-dir", str(project_dir),
            "--profiles-dir", str(project_dir), "--target", "local",
            "--target-path", str(work / "target"), "--log-path", str(work / "logs"),
            "--vars", json.dumps(variables or {}), "--quiet"]
    if select:
        args += ["--select", select]
    args += extra_args or []
    # dbt reads its settings from the environment (dbt/profiles.yml, the models' configs).
    os.environ[settings.DBT_SCHEMA] = settings.dbt_schema()
    os.environ.setdefault("DO_NOT_TRACK", "1")  # no usage events: CI and clusters are offline
    shared = settings.audit_dir()
    os.environ[settings.DBT_LOCATION_ROOT] = (f"{shared.rstrip('/')}/{work.name}/tables"
                                              if shared else str(work / "tables"))
    try:
        result = dbtRunner().invoke(args)
    finally:
        for used in ("project", "target", "logs"):
            shutil.rmtree(work / used, ignore_errors=True)
        if not any(work.iterdir()):
            work.rmdir()
    statuses: dict[str, str] = {}
    failures: list[str] = []
    if result.exception is not None:
        failures.append(f"dbt {command}: {result.exception}")
    for node in getattr(result.result, "results", None) or []:
        name = getattr(node.node, "name", str(node.node))
        status = str(node.status)
        statuses[name] = status
        if status in ("error", "fail"):
            failures.append(f"{name}: {status}: {(node.message or '').strip()[:500]}")
    return DbtResult(bool(result.success), statuses, failures)


def build_marts(spark: SparkSession, ledger: Ledger, *, as_of: dict[str, int] | None = None,
                command: str = "run", select: str | None = None,
                variables: dict[str, Any] | None = None) -> DbtResult:
    """Register the ledger and ``dbt run`` (or ``build``) the project; raise on failure.

    ``variables`` are further dbt vars (``audit_operations``, ``evidence_operations``). The
    session's last ``dbt run`` is reused when nothing it read has changed (module invariants).
    """
    key = _build_key(ledger, as_of, command, select, variables)
    last = _LAST_BUILD.get(spark.sparkContext.applicationId)
    if key is not None and last is not None and last[0] == key and _marts_present(spark):
        log.info("the ledger and the audit are unchanged since the last build: marts reused")
        return last[1]
    _LAST_BUILD.pop(spark.sparkContext.applicationId, None)
    schema = register_ledger(spark, ledger)
    _drop_table_models(spark)
    result = invoke_dbt(command, select=select,
                        variables={**(variables or {}), "ledger_schema": schema,
                                   "as_of_versions": as_of or {}})
    if not result.success:
        raise DbtRunError("dbt " + command + " failed:\n  " + "\n  ".join(
            result.failures or ["(no details)"]))
    if key is not None:
        _LAST_BUILD[spark.sparkContext.applicationId] = (key, result)
    return result


# Per Spark application: (what the last dbt run read and was asked, its result).
_LAST_BUILD: dict[str, tuple[tuple[Any, ...], DbtResult]] = {}


def _build_key(ledger: Ledger, as_of: dict[str, int] | None,
               command: str, select: str | None,
               variables: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """Everything a ``dbt run``'s marts depend on, or None when they must be rebuilt."""
    if command != "run" or (variables or {}).get("time_travel_days") is not None:
        return None
    versions = []
    for name in TABLES:
        try:
            versions.append((name, ledger.version(name)))
        except Exception:  # absent (a derived table not made yet): its absence is the state
            versions.append((name, None))
    return (ledger.location, tuple(versions), tuple(sorted((as_of or {}).items())), select,
            json.dumps(variables or {}, sort_keys=True, default=str), dbt_schema(),
            settings.source_schema(), settings.audit_dir(), str(dbt_project()))


def _marts_present(spark: SparkSession) -> bool:
    return all(spark.catalog.tableExists(f"{dbt_schema()}.{name}")
               for name in (*MARTS, *TABLE_MODELS))


def _drop_table_models(spark: SparkSession) -> None:
    """Drop the table models (each build writes them under a fresh location root) and remove
    the temporary folders of the build they came from."""
    replaced: set[Path] = set()
    for model in TABLE_MODELS:
        name = f"{dbt_schema()}.{model}"
        try:
            location = spark.sql(f"DESCRIBE DETAIL {name}").first()["location"]
        except Exception:  # no such table (first build), or not a Delta table
            location = None
        spark.sql(f"DROP TABLE IF EXISTS {name}")
        folder = _work_folder(location)
        if folder is not None:
            replaced.add(folder)
    for folder in replaced:
        shutil.rmtree(folder, ignore_errors=True)


def _work_folder(location: str | None) -> Path | None:
    """The local temporary folder of the dbt run that wrote a table at ``location``
    (``<tmp>/offset-ledger-dbt-XXXX/tables/<model>``; never in ``$OFFSET_LEDGER_AUDIT_DIR``)."""
    if not location or not location.startswith(("file:/", "/")):
        return None
    path = Path(location.removeprefix("file:"))
    work = path.parent.parent
    if (path.parent.name == "tables" and work.name.startswith(WORK_PREFIX)
            and work.parent.resolve() == Path(tempfile.gettempdir()).resolve()):
        return work
    return None


def read_mart(spark: SparkSession, mart: str) -> list[dict[str, Any]]:
    """A built mart's rows as plain dicts."""
    return [row.asDict(recursive=True)
            for row in spark.sql(f"SELECT * FROM {dbt_schema()}.{mart}").collect()]
