"""Text tables and a self-contained HTML report of the audit marts.

Invariants:
    * The HTML report needs no network and no plotting library: one hand-written inline SVG per
      flow partition (upstream and downstream run ends over time, failover/failback marked,
      resume points drawn), then every mart as a plain HTML table.
    * Every value is HTML-escaped.
"""

from __future__ import annotations

import datetime as dt
import html
from collections import defaultdict
from typing import Any

TABLE_COLUMNS = {
    "forward_translations": ["flow", "group_id", "source_topic", "partition_id",
                             "source_offset", "target_topic", "target_offset", "status",
                             "reason", "candidate_kind"],
    "reverse_translations": ["flow", "group_id", "source_topic", "partition_id",
                             "source_offset", "target_topic", "target_offset", "status",
                             "reason", "candidate_kind"],
    "resume_audit": ["operation_id", "operation_kind", "group_id", "cluster", "topic",
                     "partition_id", "resume_offset", "previous_offset", "direction",
                     "source_topic", "source_offset", "checkpoint_id", "checkpoint_status",
                     "retranslated_offset", "matches_retranslation", "run_upstream_offset",
                     "run_downstream_offset", "run_length", "offset_syncs_version",
                     "checkpoints_version"],
    "failback_duplicates_avoided": ["operation_id", "group_id", "topic", "partition_id",
                                    "replica_offset", "offset_without_reverse_checkpointing",
                                    "offset_with_reverse_checkpointing",
                                    "duplicates_without_reverse_checkpointing",
                                    "duplicates_with_reverse_checkpointing",
                                    "duplicates_avoided"],
}


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    return str(value)


def format_tables(marts: dict[str, list[dict[str, Any]]]) -> str:
    """Each mart as an aligned text table (its main columns)."""
    out: list[str] = []
    for mart, rows in marts.items():
        out.append(f"== {mart} ({len(rows)} rows)")
        if not rows:
            continue
        columns = [c for c in TABLE_COLUMNS.get(mart, list(rows[0])) if c in rows[0]]
        cells = [[_text(r.get(c)) for c in columns] for r in rows]
        widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
        out.append("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
        out += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(out)


def _svg(title: str, runs: list[dict[str, Any]], operations: list[dict[str, Any]],
         points: list[dict[str, Any]]) -> str:
    width, height, pad = 720, 260, 48
    times = [r["written_at"] for r in runs] + [o["started_at"] for o in operations]
    times += [p["written_at"] for p in points]
    offsets = [r["upstream_offset"] + r["length"] for r in runs]
    offsets += [r["downstream_offset"] + r["length"] for r in runs]
    offsets += [p["offset"] for p in points] + [0]
    t0, t1 = min(times), max(times)
    span = max((t1 - t0).total_seconds(), 1.0)
    top = max(max(offsets), 1)

    def x(t: dt.datetime) -> float:
        return pad + (width - 2 * pad) * (t - t0).total_seconds() / span

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * v / top

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img"><title>{html.escape(title)}</title>',
             f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff" '
             'stroke="#ccc"/>',
             f'<text x="{pad}" y="18" font-size="13">{html.escape(title)}</text>',
             f'<text x="4" y="{y(top) + 4:.1f}" font-size="10">{top}</text>',
             f'<text x="4" y="{y(0) + 4:.1f}" font-size="10">0</text>',
             f'<line x1="{pad}" y1="{y(0):.1f}" x2="{width - pad}" y2="{y(0):.1f}" '
             'stroke="#999"/>']
    for key, color, label in (("upstream", "#1f77b4", "upstream end u+n"),
                              ("downstream", "#ff7f0e", "downstream end d+n")):
        pts = " ".join(f"{x(r['written_at']):.1f},{y(r[key + '_offset'] + r['length']):.1f}"
                       for r in runs)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" '
                     'stroke-width="2"/>')
        parts += [f'<circle cx="{x(r["written_at"]):.1f}" '
                  f'cy="{y(r[key + "_offset"] + r["length"]):.1f}" r="2.5" fill="{color}"/>'
                  for r in runs]
        legend_y = 34 if key == "upstream" else 48
        parts.append(f'<text x="{width - 200}" y="{legend_y}" font-size="11" '
                     f'fill="{color}">{label}</text>')
    for op in operations:
        color = "#d62728" if op["kind"] == "failover" else "#2ca02c"
        xo = x(op["started_at"])
        parts.append(f'<line x1="{xo:.1f}" y1="{pad - 10}" x2="{xo:.1f}" y2="{y(0):.1f}" '
                     f'stroke="{color}" stroke-dasharray="4,3"/>')
        parts.append(f'<text x="{xo + 3:.1f}" y="{pad - 12}" font-size="11" fill="{color}">'
                     f'{html.escape(op["kind"])} {html.escape(str(op["operation_id"]))}</text>')
    for p in points:
        parts.append(f'<rect x="{x(p["written_at"]) - 4:.1f}" y="{y(p["offset"]) - 4:.1f}" '
                     'width="8" height="8" fill="#9467bd"><title>'
                     f'resume point {html.escape(str(p["label"]))}</title></rect>')
    parts.append(f'<text x="{width - 200}" y="62" font-size="10" fill="#9467bd">'
                 '&#9632; resume points</text></svg>')
    return "".join(parts)


def render_html(marts: dict[str, list[dict[str, Any]]], runs: list[dict[str, Any]],
                title: str = "offset-ledger audit") -> str:
    """A standalone HTML report: plots per flow partition, then every mart as a table."""
    audit = marts.get("resume_audit", [])
    operations = {r["operation_id"]: {"operation_id": r["operation_id"],
                                      "kind": r["operation_kind"],
                                      "started_at": r["started_at"]}
                  for r in audit if r.get("started_at") is not None}
    by_partition: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_partition[(run["flow"], run["topic"], run["replica_topic"],
                      run["partition"])].append(run)
    body = [f"<h1>{html.escape(title)}</h1>",
            "<p>Blue: upstream end of each run (u+n) on the original topic; orange: downstream "
            "end (d+n) on the replica; dashed lines: failover (red) and failback (green); "
            "squares: offsets written into groups (resume points) on either topic.</p>"]
    for (flow, topic, replica, partition), part_runs in sorted(by_partition.items()):
        points = [{"written_at": r["written_at"], "offset": r["resume_offset"],
                   "label": f"{r['group_id']} {r['cluster']}:{r['topic']} = "
                            f"{r['resume_offset']}"}
                  for r in audit if r.get("partition_id") == partition
                  and r.get("topic") in (topic, replica) and r.get("written_at") is not None]
        body.append(_svg(f"{flow} {topic} -> {replica} partition {partition}", part_runs,
                         list(operations.values()), points))
    for mart, rows in marts.items():
        body.append(f"<h2>{html.escape(mart)} ({len(rows)} rows)</h2>")
        if not rows:
            continue
        columns = list(rows[0])
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        cells = "".join("<tr>" + "".join(f"<td>{html.escape(_text(r.get(c)))}</td>"
                                         for c in columns) + "</tr>" for r in rows)
        body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>")
    style = ("body{font-family:sans-serif;margin:1em}svg{display:block;margin:1em 0}"
             "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;"
             "padding:2px 6px}")
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body>{''.join(body)}</body></html>")
