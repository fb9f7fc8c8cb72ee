"""``audit --operation X`` in seconds: one operation re-translated from its recorded evidence.

The dbt project is the full audit (every operation, every mart, time travel at each
operation's versions). One operation needs far less: the failover or failback recorded, with
its resume points, the checkpoints of its pass (``operation_checkpoints``) and the spans it
translated over (``operation_runs``, :mod:`pipelines.failover.evidence`). Re-translating each
resume point over those spans with :mod:`ledger.translation` (the rule the dbt macros mirror)
gives the verdict of the ``resume_audit`` and ``failback_duplicates_avoided`` marts audited
from recorded evidence (``audit --evidence``), row for row::

    operations           1 row      the operation
    resume_points        its rows   what it wrote (source_offset: the translation's input)
    operation_checkpoints its rows  the checkpoint behind each resume point
    operation_runs       its rows   per flow partition, the current epoch's spans it used

Invariants:
    * Reads only, through the verb's ledger engine (delta-rs on a path ledger: no JVM, no dbt).
    * The rows carry the mart's column names and ``audit_source = 'recorded_evidence'``; an
      operation without evidence (recorded before evidence existed) is ``None``: the caller
      builds the marts, which say it is unavailable.
    * "Cannot translate" stays distinct: ``retranslated_offset`` is None and
      ``retranslation_status`` says ``untranslatable``, never an offset.
"""

from __future__ import annotations

from typing import Any

from ledger import translation
from ledger.engine import LedgerEngine, literal
from ledger.errors import OffsetLedgerError
from ledger.records import CheckpointRecord, Operation
from ledger.schemas import OPERATION_CHECKPOINTS, OPERATION_RUNS, OPERATIONS, RESUME_POINTS

Row = dict[str, Any]
EVIDENCE = "recorded_evidence"


def _rows(engine: LedgerEngine, table: str, operation_id: str) -> list[Row]:
    return engine.query(f"SELECT * FROM {{t}} WHERE operation_id = {literal(operation_id)}",
                        t=table)


def _spans(runs: list[Row], **match: Any) -> list[translation.Run]:
    chosen = sorted((r for r in runs if all(r[k] == v for k, v in match.items())),
                    key=lambda r: (r["written_at"], r["batch_id"], r["downstream_offset"]))
    return [translation.Run(r["upstream_offset"], r["downstream_offset"], r["length"])
            for r in chosen]


def _retranslate(point: Row, runs: list[Row]) -> tuple[int | None, translation.Run | None]:
    """The resume point's translation over the evidence, and the run that decides it."""
    offset = point["source_offset"]
    if point["direction"] == "forward":
        spans = _spans(runs, source_cluster=point["source_cluster"],
                       target_cluster=point["cluster"], topic=point["source_topic"],
                       partition=point["partition"])
        result = translation.forward(spans, offset)
        candidates = translation.forward_candidates(spans, offset) if result is not None else []
    else:
        spans = _spans(runs, target_cluster=point["source_cluster"],
                       source_cluster=point["cluster"], replica_topic=point["source_topic"],
                       partition=point["partition"])
        result = translation.reverse(spans, offset)
        candidates = translation.reverse_candidates(spans, offset)
    run = next((c.run for c in candidates if c.offset == result), None)
    return result, run


def _audit_row(op: Operation, point: Row, checkpoint: Row | None, runs: list[Row]) -> Row:
    row: Row = {
        "operation_id": op.operation_id, "operation_kind": op.kind,
        "operation_status": op.status, "group_id": op.group_id,
        "from_cluster": op.from_cluster, "to_cluster": op.to_cluster,
        "reverse_checkpointing": op.reverse_checkpointing, "started_at": op.started_at,
        "ready_at": op.ready_at, "seconds_to_ready": op.seconds_to_ready,
        "offset_syncs_version": op.offset_syncs_version,
        "checkpoints_version": op.checkpoints_version,
        "group_offsets_version": op.group_offsets_version,
        "resume_points_version": op.resume_points_version, "audit_source": EVIDENCE,
        "resume_point_id": point["resume_point_id"], "reason": point["reason"],
        "cluster": point["cluster"], "topic": point["topic"],
        "partition_id": point["partition"], "resume_offset": point["offset"],
        "previous_offset": point["previous_offset"], "written_at": point["written_at"],
        "present_at_recorded_version": None, "direction": point["direction"],
        "source_cluster": point["source_cluster"], "source_topic": point["source_topic"],
        "source_offset": point["source_offset"], "checkpoint_id": point["checkpoint_id"],
        "checkpoint_found": checkpoint is not None,
    }
    for column, name in (("flow", "checkpoint_flow"), ("source_offset", "checkpoint_source_offset"),
                         ("target_offset", "checkpoint_target_offset"),
                         ("status", "checkpoint_status"), ("reason", "checkpoint_reason"),
                         ("group_rewound", "checkpoint_group_rewound"),
                         ("checkpointed_at", "checkpointed_at")):
        row[name] = None if checkpoint is None else checkpoint[column]
    result, run = (None, None)
    if point["source_offset"] is not None:
        result, run = _retranslate(point, runs)
    row.update({
        "retranslated_offset": result,
        "retranslation_status": None if point["source_offset"] is None
        else "translated" if result is not None else "untranslatable",
        "matches_retranslation": result is not None and result == point["offset"],
        "run_upstream_offset": run.upstream_offset if run else None,
        "run_downstream_offset": run.downstream_offset if run else None,
        "run_length": run.length if run else None,
    })
    return row


def _duplicates(audit: Row, runs: list[Row]) -> Row:
    """``failback_duplicates_avoided`` of a reverse resume point of a failback."""
    c, previous = audit["source_offset"], audit["previous_offset"]
    spans = _spans(runs, target_cluster=audit["source_cluster"], source_cluster=audit["cluster"],
                   replica_topic=audit["source_topic"], partition=audit["partition_id"])
    read = without = with_ = 0
    for s in translation.current_epoch(spans):
        if s.downstream_offset >= c:
            continue
        upto = s.upstream_offset + min(c - s.downstream_offset, s.length)
        read += min(c - s.downstream_offset, s.length)
        without += max(0, upto - max(s.upstream_offset, previous or 0))
        with_ += max(0, upto - max(s.upstream_offset, audit["resume_offset"]))
    return {
        "operation_id": audit["operation_id"], "group_id": audit["group_id"],
        "cluster": audit["cluster"], "topic": audit["topic"],
        "partition_id": audit["partition_id"], "replica_cluster": audit["source_cluster"],
        "replica_topic": audit["source_topic"], "replica_offset": c,
        "offset_with_reverse_checkpointing": audit["resume_offset"],
        "offset_without_reverse_checkpointing": previous or 0,
        "previous_offset_assumed_zero": previous is None, "records_read_on_replica": read,
        "duplicates_without_reverse_checkpointing": without,
        "duplicates_with_reverse_checkpointing": with_, "duplicates_avoided": without - with_,
        "offset_syncs_version": audit["offset_syncs_version"],
        "checkpoints_version": audit["checkpoints_version"],
    }


def audit_operation(ledger: LedgerEngine, operation_id: str
                    ) -> tuple[Operation, dict[str, list[Row]], list[CheckpointRecord],
                               list[Row]] | None:
    """The operation, its ``resume_audit`` and ``failback_duplicates_avoided`` rows, the
    checkpoints of its pass and the spans it used; ``None`` without recorded evidence.

    Raises:
        OffsetLedgerError: no operation ``operation_id`` in the ledger.
    """
    found = _rows(ledger, OPERATIONS, operation_id)
    if not found:
        raise OffsetLedgerError(f"no operation {operation_id!r} in the ledger at "
                                f"{ledger.location}")
    op = Operation.from_row(found[0])
    checkpoints = _rows(ledger, OPERATION_CHECKPOINTS, operation_id)
    if not checkpoints:
        return None
    runs = _rows(ledger, OPERATION_RUNS, operation_id)
    by_key = {(c["checkpoint_id"], c["group_id"], c["source_topic"], c["partition"]): c
              for c in checkpoints}
    audit = [_audit_row(op, p, by_key.get((p["checkpoint_id"], p["group_id"], p["source_topic"],
                                           p["partition"])), runs)
             for p in _rows(ledger, RESUME_POINTS, operation_id)]
    audit.sort(key=lambda r: (r["topic"], r["partition_id"], r["resume_point_id"]))
    avoided = [_duplicates(r, runs) for r in audit
               if op.kind == "failback" and r["direction"] == "reverse"
               and r["source_offset"] is not None]
    return (op, {"resume_audit": audit, "failback_duplicates_avoided": avoided},
            CheckpointRecord.from_rows(checkpoints), runs)
