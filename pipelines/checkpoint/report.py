"""Printing checkpoint and translation results as a table or JSON (no Spark, no Kafka)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pipelines.args import indented_json

if TYPE_CHECKING:  # annotations only: rendering needs no pyspark import
    from ledger.records import CheckpointRecord


def translation_rows(checkpoints: Iterable[CheckpointRecord]) -> list[dict]:
    """The user-facing view of checkpoints; ``offset`` is None when untranslatable."""
    return [{
        "group": cp.group_id, "direction": cp.direction,
        "from_cluster": cp.source_cluster, "topic": cp.source_topic,
        "partition": cp.partition, "committed_offset": cp.source_offset,
        "to_cluster": cp.target_cluster, "target_topic": cp.target_topic,
        "offset": cp.target_offset, "status": cp.status, "reason": cp.reason,
    } for cp in checkpoints]


def render(rows: list[dict], fmt: str = "table") -> str:
    if fmt == "json":
        return indented_json(rows, default=str)  # one row a line, by the C encoder
    if not rows:
        return "(nothing to translate)"
    header = ["group", "topic", "partition", "committed", "->", "target_topic", "offset",
              "status"]
    body = [[r["group"], f"{r['from_cluster']}:{r['topic']}", str(r["partition"]),
             str(r["committed_offset"]), r["direction"], f"{r['to_cluster']}:{r['target_topic']}",
             "-" if r["offset"] is None else str(r["offset"]),
             r["status"] + (f" ({r['reason']})" if r["reason"] else "")] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(line.rstrip() for line in lines)
