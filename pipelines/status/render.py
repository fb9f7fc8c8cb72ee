"""``status`` as a table for people or JSON for tools (no Spark, no Kafka).

Invariants:
    * Both formats carry the same facts; JSON keys are stable (documented in the README) and
      times are ISO-8601 UTC, ages in seconds.
    * Record counts in sentences use thousands separators ("1,204"); table cells do not.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

from ledger import clock
from pipelines.args import indented_json
from pipelines.status.readiness import FlowStatus, GroupStatus


@dataclass
class Report:
    at: dt.datetime
    flows: list[FlowStatus] = field(default_factory=list)
    groups: list[GroupStatus] = field(default_factory=list)
    exit_code: int = 3
    # Why a cluster could not be read (unreachable, credentials), by alias; None when it could.
    cluster_errors: dict[str, str | None] = field(default_factory=dict)


def _iso(t: dt.datetime | None) -> str | None:
    return None if t is None else clock.aware(t).isoformat(timespec="milliseconds")


def _age(at: dt.datetime, t: dt.datetime | None) -> float | None:
    return None if t is None else round(max(0.0, (at - clock.aware(t)).total_seconds()), 3)


def as_dict(report: Report) -> dict:
    at = report.at
    return {
        "at": _iso(at), "caught_up": report.exit_code == 0, "exit_code": report.exit_code,
        "flows": [{
            "flow": f.flow, "source": f.source, "target": f.target, "error": f.error,
            "caught_up": f.caught_up, "lag": f.lag, "last_run": _iso(f.last_run),
            "last_run_age_seconds": _age(at, f.last_run),
            "heartbeat_latency_seconds": _age(at, f.heartbeat),
            "partitions": [{
                "topic": p.topic, "replica_topic": p.replica_topic, "partition": p.partition,
                "source_end_offset": p.end, "replicated_to": p.replicated_to,
                "has_runs": p.has_runs, "lag": p.lag, "caught_up": p.caught_up,
                "only_markers_left": p.lag > 0 and p.committed_left is False,
                "newest_record_timestamp": _iso(p.newest_record),
                "newest_record_age_seconds": _age(at, p.newest_record),
                "last_run": _iso(p.last_run)} for p in f.partitions],
        } for f in report.flows],
        "groups": [{
            "group": g.group, "flow": g.flow, "operation": g.kind, "from": g.source,
            "to": g.target, "applicable": g.applicable, "ready": g.ready, "verdict": g.verdict,
            "records_not_replicated": g.missing, "cutoff_ready": g.cutoff_ready,
            "cutoff_verdict": g.cutoff_verdict, "errors": g.errors,
            "committed": {alias: [{"topic": c.topic, "partition": c.partition,
                                   "offset": c.offset, "end": c.end, "lag": c.lag}
                                  for c in commits] for alias, commits in g.commits.items()},
            "coverage": [{"direction": c.direction, "topic": c.topic, "partition": c.partition,
                          "committed": c.committed, "replicated_to": c.replicated_to,
                          "covered": c.covered} for c in g.coverage],
            "acl_check": g.acl_check,
            "newest_checkpoint": None if g.checkpoint is None else {
                "checkpointed_at": _iso(g.checkpoint.newest),
                "age_seconds": _age(at, g.checkpoint.newest),
                "partitions": g.checkpoint.partitions},
        } for g in report.groups],
    }


def to_json(report: Report, one_line: bool = False) -> str:
    """One document; indented, with each object or list of plain values on one line (a
    partition, a commit): ``json.dumps(indent=2)`` runs Python's encoder over every value, a
    large part of ``status``'s time for hundreds of groups; the C encoder writes the rows."""
    return json.dumps(as_dict(report)) if one_line else indented_json(as_dict(report))


def _table(header: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    return [(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))).rstrip()
            for r in [header, *rows]]


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}s" if value < 120 else f"{value / 60:.1f}min"


def _when(at: dt.datetime, t: dt.datetime | None) -> str:
    if t is None:
        return "never"
    return f"{clock.aware(t):%Y-%m-%d %H:%M:%S} UTC ({_seconds(_age(at, t))} ago)"


def _flow_lines(at: dt.datetime, f: FlowStatus) -> list[str]:
    if f.error is not None and not f.partitions:
        return [f"flow {f.flow}: unknown: {f.error}"]
    behind = [p for p in f.partitions if not p.caught_up]
    head = (f"flow {f.flow}: caught up" if f.caught_up else
            f"flow {f.flow}: not caught up ({f.lag:,} records behind in {len(behind)} of "
            f"{len(f.partitions)} partition(s))")
    head += f"; last run {_when(at, f.last_run)}"
    if f.heartbeat is not None:
        head += f"; end-to-end latency {_seconds(_age(at, f.heartbeat))} (newest heartbeat)"
    lines = [head]
    if f.error is not None:
        lines.append(f"  error: {f.error}")
    rows = [[p.topic, str(p.partition), str(p.end),
             str(p.replicated_to) if p.has_runs else f"- (start {p.replicated_to})",
             str(p.lag), _seconds(_age(at, p.newest_record)),
             "yes" + (" (only markers/aborted left)" if p.lag else "") if p.caught_up else "no"]
            for p in f.partitions]
    if rows:
        lines += _table(["topic", "partition", "end", "replicated to", "lag", "newest record age",
                         "caught up"], rows)
    return lines


def _group_lines(at: dt.datetime, g: GroupStatus) -> list[str]:
    lines = [f"group {g.group}, flow {g.flow}: {g.verdict}"]
    if g.applicable:
        lines.append(f"  {g.cutoff_verdict}")
    for alias, error in g.errors.items():
        if alias != g.source:
            lines.append(f"  {alias}: {error}")
    covered = {(c.topic, c.partition): c for c in g.coverage}
    rows = []
    for alias in (g.source, g.target):
        for c in g.commits.get(alias, []):
            cov = covered.get((c.topic, c.partition)) if alias == g.source else None
            rows.append([alias, c.topic, str(c.partition), str(c.offset),
                         "-" if c.end is None else str(c.end),
                         "-" if c.lag is None else str(c.lag),
                         "" if cov is None else str(cov.replicated_to),
                         "" if cov is None else ("yes" if cov.covered else "no")])
    if rows:
        lines += _table(["cluster", "topic", "partition", "committed", "end", "lag",
                         "replicated to", "covered"], rows)
    if g.checkpoint is None:
        lines.append(f"  newest checkpoint {g.source} -> {g.target}: none")
    else:
        lines.append(f"  newest checkpoint {g.source} -> {g.target}: "
                     f"{_when(at, g.checkpoint.newest)}, {g.checkpoint.partitions} partition(s)")
    return lines


def to_table(report: Report) -> str:
    at = report.at
    state = "caught up" if report.exit_code == 0 else "not caught up"
    lines = [f"status at {at:%Y-%m-%d %H:%M:%S} UTC: {state}"]
    for f in report.flows:
        lines += _flow_lines(at, f)
    for g in report.groups:
        lines += _group_lines(at, g)
    return "\n".join(lines)
