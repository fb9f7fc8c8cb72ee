"""JVM-free reads of a path ledger with delta-rs, for the driver's quick answers.

A ``replicate --once`` that finds nothing to do, and the plan of a pass's first batch, need a
few rows of ``offset_syncs`` and ``replication_progress``: reading them through Spark costs a
JVM start and the first queries' warm-up, more than the whole copy of a small batch. This module
reads the same Delta tables with the ``deltalake`` package (delta-rs and DataFusion, in process)
with the same predicates, so Delta's file statistics skip the same files.

Invariants:
    * Read-only: nothing here writes a table, a log entry or a checkpoint. The replication
      job's batch commits go through ``ledger.commits`` (delta-rs, same rules as Spark's);
      every other write stays with Spark (``ledger.tables.Ledger``).
    * Only a filesystem ledger (a local path, or ``file://``) is read here; a catalog schema,
      an object store, or a path without a scheme where Spark's default filesystem may be
      another one (Databricks, a Hadoop or YARN configuration) is :data:`UNAVAILABLE` and the
      caller reads with Spark, which has the runtime's filesystems, credentials and catalog.
    * Any failure (``deltalake`` not installed, a reader feature it lacks, a damaged log or data
      file, a table without the ledger schema's columns) is :data:`UNAVAILABLE`, never an empty
      answer: the caller then reads with Spark, whose errors name the damaged table
      (``ledger.tables.damaged``). Only a table whose folder
      does not exist at all reads as empty (:data:`ABSENT`): no ledger was written there yet.
    * A query sees one snapshot per table, the newest committed version when it runs (a table
      an earlier query of the same command opened is brought up to that version, not
      replayed again).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ledger import settings
from ledger.config import is_catalog_schema
from ledger.errors import first_line

log = logging.getLogger(__name__)


class Marker:
    """A named outcome that is not a result (``UNAVAILABLE``, ``ABSENT``, ``commits``' own)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


UNAVAILABLE = Marker("UNAVAILABLE")  # read it with Spark instead
ABSENT = Marker("ABSENT")  # the table's folder does not exist: nothing was recorded there


def local_path(location: str) -> Path | None:
    """The ledger's folder when it is on a filesystem this process reads as Spark does."""
    if location.startswith("file://"):
        return Path(location[len("file://"):])
    if "://" in location or location.startswith(("dbfs:", "s3:", "abfss:", "gs:")):
        return None
    if is_catalog_schema(location):
        return None
    if settings.other_default_fs():  # the same path on the driver's disk is not the ledger
        return None
    return Path(location)


def log_complete(table: Path) -> bool:
    """Whether a table's Delta log holds every commit a reader needs.

    delta-rs reads a log whose first commit is gone (or whose commits have a hole) without
    complaint, where Spark refuses it: every version from the last checkpoint (or from 0) to
    the newest must be there, so that both engines see the same table or this one sees none.
    """
    return complete_version(table) is not None


def _listing(log_dir: Path) -> list[str]:
    """The names in a log folder (one listing: a year's folder holds millions of files, so
    callers compare names, zero-padded versions ordering as numbers, and make no path object
    or parse per file; ``bench.log_growth``)."""
    try:
        return os.listdir(log_dir)
    except FileNotFoundError:
        return []


def _commit_names(names: list[str], floor: int = 0) -> list[str]:
    """The commit files among ``names`` of versions ``floor`` and above."""
    low = f"{floor:020d}.json"
    return [n for n in names
            if len(n) == 25 and n >= low and n.endswith(".json") and n[:20].isdigit()]


def newest_commit(log_dir: Path) -> int | None:
    """The version of a log folder's newest commit file; ``None`` without one."""
    found = _commit_names(_listing(log_dir))
    return int(max(found)[:20]) if found else None


def _pointer(log_dir: Path) -> dict[str, Any] | None:
    """A log folder's ``_last_checkpoint`` pointer (as Spark and delta-rs write it); ``None``
    without one. A damaged pointer raises."""
    pointer = log_dir / "_last_checkpoint"
    return json.loads(pointer.read_text()) if pointer.exists() else None


def last_checkpoint(table: Path) -> tuple[int, int] | None:
    """``(version, actions)`` of a table's last log checkpoint; ``None`` without one or when
    its pointer is unreadable."""
    try:
        pointer = _pointer(table / "_delta_log")
        return None if pointer is None else (int(pointer["version"]),
                                             int(pointer.get("size") or 0))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def complete_version(table: Path) -> int | None:
    """The newest version of a table whose log is complete (:func:`log_complete`), else
    ``None``. One listing of the log folder (:func:`_listing`)."""
    log_dir = table / "_delta_log"
    names = _listing(log_dir)
    start = 0
    pointer = _pointer(log_dir)
    if pointer is not None:
        start = int(pointer["version"])
        prefix = f"{start:020d}.checkpoint"
        if not any(n.startswith(prefix) and n.endswith(".parquet") for n in names):
            return None
        start += 1
    versions = {int(n[:20]) for n in _commit_names(names, start)}  # must all be there
    newest = max(max(versions, default=-1), start - 1)
    complete = len(versions) == newest + 1 - start and newest >= 0
    return newest if complete else None


Tables = dict[str, Any]
"""The tables one reader opened, at their newest version (path -> ``DeltaTable``)."""


def newest_version(path: Path, opened: Tables | None) -> int | None:
    """:func:`complete_version`, or for a table the caller already opened (its log found
    complete then), its version brought forward by the commits written since, probed by name:
    a command's later reads list no log folder again (a year's folder holds millions)."""
    table = (opened or {}).get(str(path))
    if table is None:
        return complete_version(path)
    log_dir = path / "_delta_log"
    known = table.version()
    if not (log_dir / f"{known:020d}.json").exists():  # cleaned up or recreated: list it
        return complete_version(path)
    while (log_dir / f"{known + 1:020d}.json").exists():
        known += 1
    return known


def open_table(path: Path, version: int | None, newest: int, opened: Tables | None) -> Any:
    """The table at ``version`` (default: ``newest``).

    With ``opened``, the table at its newest version is opened once and reused (brought up to
    ``newest`` by the commits after it) instead of replaying its log again: one log replay
    per table per command. An older version (time travel) is opened for this read only.
    """
    from deltalake import DeltaTable

    if (version is not None and version != newest) or opened is None:
        return DeltaTable(str(path), version=version)
    table = opened.get(str(path))
    if table is not None and table.version() > newest:  # the log went back: read it afresh
        table = None
    if table is None:
        table = opened[str(path)] = DeltaTable(str(path))
    if table.version() < newest:
        table.update_incremental()
    return table


def version(location: str, name: str) -> int | Marker:
    """The table's newest committed version, from its log's file names (no table read).

    :data:`ABSENT` when the table's folder does not exist, :data:`UNAVAILABLE` when this
    process cannot tell (not a local ledger, a log without commit files).
    """
    root = local_path(location)
    if root is None:
        return UNAVAILABLE
    if not (root / name).exists():
        return ABSENT
    newest = newest_commit(root / name / "_delta_log")
    return UNAVAILABLE if newest is None else newest


def columns(location: str, name: str, opened: Tables | None = None) -> set[str] | Marker:
    """The column names table ``name`` has at its newest version (:data:`ABSENT`,
    :data:`UNAVAILABLE` as :func:`version`, or when delta-rs cannot open it)."""
    found = version(location, name)
    if not isinstance(found, int):
        return found
    try:
        table = open_table(local_path(location) / name, None, found, opened)
        return {f.name for f in table.schema().fields}
    except Exception as exc:  # damaged or unsupported: the caller's Spark names it
        log.debug("%s not opened with delta-rs (%s)", name, first_line(exc, 200))
        return UNAVAILABLE


def _pylist(table: Any) -> list[dict[str, Any]]:
    """The rows of an Arrow table (arro3, as delta-rs returns it) as dicts, converted by arro3:
    no pyarrow, numpy or pandas import (each a large part of a verb's second on a small
    machine)."""
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [dict(zip(table.column_names, values, strict=True))
            for values in zip(*columns, strict=True)]


def query(location: str, tables: Mapping[str, str], sql: str,
          versions: Mapping[str, int] | None = None,
          opened: Tables | None = None) -> list[dict[str, Any]] | Marker:
    """Rows of ``sql`` over ledger tables registered as ``{sql_name: table_name}``.

    Each table must have at least the columns every release of it has (``ledger.schemas.
    required_columns``: a column added later may be missing from an older table).
    ``versions`` (``{sql_name: version}``) reads those tables as of a Delta version (time
    travel, as Spark's ``versionAsOf``). ``opened`` (a dict the caller keeps for one command)
    reuses the tables opened by its earlier queries (see :func:`open_table`).

    Returns :data:`ABSENT` when one of the tables' folders does not exist, :data:`UNAVAILABLE`
    when the ledger cannot be read here (see the module invariants), else the rows as dicts
    (timestamps are timezone-aware UTC datetimes).
    """
    root = local_path(location)
    if root is None:
        return UNAVAILABLE
    try:
        from deltalake import QueryBuilder
    except ImportError:
        return UNAVAILABLE
    paths = {alias: root / name for alias, name in tables.items()}
    if any(not path.exists() for path in paths.values()):
        return ABSENT
    try:
        from ledger.schemas import required_columns

        builder = QueryBuilder()
        for alias, path in paths.items():
            newest = newest_version(path, opened)
            if newest is None:
                raise ValueError(f"{tables[alias]}'s Delta log is incomplete")
            table = open_table(path, (versions or {}).get(alias), newest, opened)
            have = {f.name for f in table.schema().fields}
            missing = [c for c in required_columns(tables[alias]) if c not in have]
            if missing:
                raise ValueError(f"{tables[alias]} lacks columns {missing}")
            builder = builder.register(alias, table)
        return _pylist(builder.execute(sql).read_all())
    except Exception as exc:  # damaged or unsupported: Spark reads it and names the damage
        log.debug("ledger at %s not read with delta-rs (%s): reading with Spark", location,
                  first_line(exc, 200))
        return UNAVAILABLE
