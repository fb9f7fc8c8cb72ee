"""The audit as a Python API: build the dbt marts over the ledger and return their rows.

Invariants:
    * ``run_audit`` never writes to the ledger: it registers the ledger tables in the session
      catalog, runs the dbt project (``dbt run``, or ``dbt build`` with ``build=True`` so the
      data and unit tests run too) and reads the marts.
    * ``as_of_version`` / ``as_of_timestamp`` read the ledger as it was then (Delta time travel,
      see :func:`pipelines.audit.dbt_runner.resolve_as_of`); resume_audit always reads each
      operation's own recorded versions.
    * ``group`` / ``operation`` select the operations audited (dbt var ``audit_operations``):
      the operation marts read those operations' versions only, so auditing one operation
      costs the same whatever the number of operations in the ledger.
    * An operation whose recorded versions time travel no longer reaches
      (:mod:`pipelines.audit.horizon`), or every operation with ``evidence=True``, is audited
      from the evidence it recorded (var ``evidence_operations``); ``resume_audit``'s
      ``audit_source`` says which was used.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ledger.config import Config
from ledger.records import CheckpointRecord, Operation
from ledger.schemas import CHECKPOINTS, OFFSET_SYNCS, OPERATIONS
from ledger.tables import Ledger
from pipelines.audit.dbt_runner import MARTS, build_marts, read_mart, resolve_as_of
from pipelines.audit.horizon import past_horizon


def run_audit(spark: SparkSession, config: Config, *, group: str | None = None,
              operation: str | None = None, as_of_version: int | None = None,
              as_of_timestamp: str | None = None, build: bool = False,
              evidence: bool = False,
              variables: dict[str, Any] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Build the marts and return ``{mart: rows}`` for the four marts of :data:`MARTS`.

    Args:
        evidence: audit every selected operation from its recorded evidence, without time
            travel (by default only those past the time-travel horizon are).
        variables: further dbt vars (e.g. ``time_travel_days``, see dbt_project.yml).
    """
    ledger = Ledger(spark, config.ledger_location)
    ledger.require()
    as_of = resolve_as_of(ledger, as_of_version, as_of_timestamp)
    operations = audited_operations(ledger, as_of, group=group, operation=operation)
    past = ([o.operation_id for o in operations] if evidence
            else past_horizon(ledger, operations))
    variables = {**(variables or {}), "evidence_operations": past}
    if group or operation:
        variables["audit_operations"] = sorted(o.operation_id for o in operations)
    build_marts(spark, ledger, as_of=as_of, command="build" if build else "run",
                variables=variables)
    marts = {mart: read_mart(spark, mart) for mart in MARTS}
    groups = {group} if group else None
    if operation:
        op_groups = {o.group_id for o in operations}
        groups = op_groups if groups is None else groups & op_groups
    return {m: sorted(rows, key=_sort_key)
            for m, rows in select_rows(marts, operation, groups).items()}


def select_rows(marts: dict[str, list[dict[str, Any]]], operation: str | None,
                groups: set[str] | None) -> dict[str, list[dict[str, Any]]]:
    """The marts' rows of ``operation`` (rows without an operation id are kept) and of
    ``groups`` (``None``: every operation, every group)."""
    if operation:
        marts = {m: [r for r in rows if r.get("operation_id", operation) == operation]
                 for m, rows in marts.items()}
    if groups is not None:
        marts = {m: [r for r in rows if r.get("group_id") in groups] for m, rows in marts.items()}
    return marts


def audited_operations(ledger: Ledger, as_of: dict[str, int], *, group: str | None = None,
                       operation: str | None = None) -> list[Operation]:
    """The operations an audit covers (the ``operations`` table is one row per operation,
    small next to the history it audits)."""
    frame = ledger.read(OPERATIONS, version=as_of.get(OPERATIONS))
    if group:
        frame = frame.where(F.col("group_id") == group)
    if operation:
        frame = frame.where(F.col("operation_id") == operation)
    return Operation.from_rows(frame.collect())


def load_runs(spark: SparkSession, config: Config, *, as_of_version: int | None = None,
              as_of_timestamp: str | None = None) -> list[dict[str, Any]]:
    """The offset_syncs rows (as of the same point as the audit), for the report's plots."""
    ledger = Ledger(spark, config.ledger_location)
    as_of = resolve_as_of(ledger, as_of_version, as_of_timestamp)
    frame = ledger.read(OFFSET_SYNCS, version=as_of.get(OFFSET_SYNCS))
    return [r.asDict() for r in frame.orderBy("written_at", "batch_id").collect()]


def load_operations(spark: SparkSession, config: Config, *, group: str | None = None,
                    operation: str | None = None, as_of_version: int | None = None,
                    as_of_timestamp: str | None = None,
                    ) -> tuple[list[Operation], list[CheckpointRecord]]:
    """The operations (filtered like the marts) and the checkpoints of their own passes.

    The checkpoints are read for the operations' groups and time windows only (pushed down to
    Delta), so a report of one operation does not read the checkpoint history.
    """
    ledger = Ledger(spark, config.ledger_location)
    as_of = resolve_as_of(ledger, as_of_version, as_of_timestamp)
    operations = audited_operations(ledger, as_of, group=group, operation=operation)
    windows = [(o.group_id, o.started_at, o.ready_at) for o in operations
               if o.started_at is not None and o.ready_at is not None]
    if not windows:
        return operations, []
    condition = None
    for g, start, end in windows:
        term = ((F.col("group_id") == g) & (F.col("checkpointed_at") >= start)
                & (F.col("checkpointed_at") <= end))
        condition = term if condition is None else condition | term
    checkpoints = ledger.read(CHECKPOINTS, version=as_of.get(CHECKPOINTS)).where(condition)
    return operations, CheckpointRecord.from_rows(checkpoints.collect())


def _sort_key(row: dict[str, Any]) -> tuple:
    keys = ("operation_id", "flow", "group_id", "topic", "source_topic", "partition_id",
            "resume_point_id")
    return tuple(("" if row.get(k) is None else str(row.get(k)).zfill(12)
                  if isinstance(row.get(k), int) else str(row.get(k))) for k in keys)


def jsonable(value: Any) -> Any:
    """Rows with timestamps as ISO strings, for JSON output."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return value
