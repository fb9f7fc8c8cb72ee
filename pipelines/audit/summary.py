"""What an on-call engineer reads first: one summary per failover/failback operation.

Pure functions over rows (dicts) of the audit marts, the operations
(:class:`ledger.records.Operation`) and the checkpoints of each operation's own pass
(:class:`ledger.records.CheckpointRecord`); :mod:`pipelines.audit.report` renders them.

Invariants:
    * Operations come in time order (a failover before the failback that follows it).
    * The verdict counts only resume points that carry a translation (``source_offset`` set);
      offsets set to a log start (a topic the group never read there) are counted apart.
    * A partition the operation's pass checkpointed but did not write is "left untouched", with
      its reason: it cannot be translated, or the group already stood at or past the offset
      there (offsets are never rewound).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ledger import clock

if TYPE_CHECKING:  # annotations only: summaries need no pyspark import
    from ledger.records import CheckpointRecord, Operation

Row = dict[str, Any]


@dataclass(frozen=True)
class Untouched:
    topic: str
    partition: int
    reason: str


@dataclass
class OperationSummary:
    operation_id: str
    kind: str
    group_id: str
    from_cluster: str
    to_cluster: str
    started_at: dt.datetime | None
    ready_at: dt.datetime | None
    seconds_to_ready: float | None
    subscribe_topics: list[str]
    message: str | None
    resume_points: list[Row] = field(default_factory=list)
    translated: int = 0
    matched: int = 0
    log_starts: int = 0
    duplicates_without: int | None = None
    duplicates_with: int | None = None
    untouched: list[Untouched] = field(default_factory=list)
    audit_source: str = "time_travel"

    @property
    def all_match(self) -> bool:
        return self.matched == self.translated and self.audit_source != "unavailable"

    @property
    def source_text(self) -> str:
        """How the ledger as the operation saw it was read."""
        return {
            "time_travel": "at the recorded ledger versions",
            "recorded_evidence": "over the recorded evidence (instead of time travel)",
            "unavailable": "impossible: versions past the time-travel horizon, no evidence "
                           "recorded",
        }.get(self.audit_source, self.audit_source)

    @property
    def verdict(self) -> str:
        if self.audit_source == "unavailable":
            return f"re-translation {self.source_text}"
        text = (f"{self.matched} of {self.translated} resume point"
                f"{'' if self.translated == 1 else 's'} match re-translation {self.source_text}")
        if self.log_starts:
            text += f"; {self.log_starts} set to the log start (never read there)"
        return text

    @property
    def saved(self) -> int | None:
        if self.duplicates_without is None or self.duplicates_with is None:
            return None
        return self.duplicates_without - self.duplicates_with


def _order(value: dt.datetime | None) -> tuple:
    return (value is None, value or dt.datetime.min)


def summarize(operations: list[Operation], marts: dict[str, list[Row]],
              checkpoints: list[CheckpointRecord]) -> list[OperationSummary]:
    """One summary per operation, in time order.

    Args:
        operations: the operations (already filtered by group/operation).
        marts: the audit marts (``resume_audit``, ``failback_duplicates_avoided``).
        checkpoints: checkpoints of the operations' groups written during an operation
            (``checkpointed_at`` between its start and ready times).
    """
    audit = marts.get("resume_audit", [])
    avoided = marts.get("failback_duplicates_avoided", [])
    out = []
    for op in sorted(operations, key=lambda o: (_order(o.started_at), str(o.operation_id))):
        s = OperationSummary(
            operation_id=op.operation_id, kind=op.kind, group_id=op.group_id,
            from_cluster=op.from_cluster, to_cluster=op.to_cluster,
            started_at=op.started_at, ready_at=op.ready_at,
            seconds_to_ready=op.seconds_to_ready,
            subscribe_topics=list(op.subscribe_topics or []),
            message=op.message)
        s.resume_points = sorted(
            (r for r in audit if r["operation_id"] == s.operation_id),
            key=lambda r: (r["topic"], r["partition_id"]))
        s.audit_source = next((r["audit_source"] for r in s.resume_points
                               if r.get("audit_source")), s.audit_source)
        with_translation = [r for r in s.resume_points if r.get("source_offset") is not None]
        s.translated = len(with_translation)
        s.matched = sum(1 for r in with_translation if r.get("matches_retranslation"))
        s.log_starts = len(s.resume_points) - s.translated
        mine = [r for r in avoided if r["operation_id"] == s.operation_id]
        if mine:
            s.duplicates_without = sum(
                r.get("duplicates_without_reverse_checkpointing") or 0 for r in mine)
            s.duplicates_with = sum(r.get("duplicates_with_reverse_checkpointing") or 0
                                    for r in mine)
        s.untouched = untouched(s, checkpoints)
        out.append(s)
    return out


def untouched(summary: OperationSummary,
              checkpoints: list[CheckpointRecord]) -> list[Untouched]:
    """Partitions the operation's pass checkpointed but wrote nothing to, with the reason."""
    if summary.started_at is None or summary.ready_at is None:
        return []
    written = {(r["topic"], r["partition_id"]) for r in summary.resume_points}
    latest: dict[tuple[str, int], CheckpointRecord] = {}
    for c in checkpoints:
        at = c.checkpointed_at
        if (c.group_id != summary.group_id or at is None
                or not summary.started_at <= at <= summary.ready_at):
            continue
        key = (c.target_topic, c.partition)
        if key not in latest or at >= latest[key].checkpointed_at:
            latest[key] = c
    out = []
    for (topic, partition), c in sorted(latest.items()):
        if (topic, partition) in written:
            continue
        if c.target_offset is None:
            reason = f"cannot be translated: {c.reason or 'no runs'}"
        else:
            reason = (f"already at or past {c.target_offset:,} on {summary.to_cluster} "
                      "(offsets are never rewound)")
        out.append(Untouched(topic, partition, reason))
    return out


def human_seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def human_time(value: dt.datetime | None) -> str:
    # In UTC whatever the machine's zone (a Spark row's naive time is local: ledger.clock).
    return "-" if value is None else clock.aware(value).strftime("%Y-%m-%d %H:%M:%S")


def human_int(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"
