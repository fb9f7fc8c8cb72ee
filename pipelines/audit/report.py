"""The audit as text tables and as a self-contained HTML report.

Invariants:
    * ``--format table`` fits 120 columns: per operation a summary and its resume points;
      ``wide=True`` prints every mart with its main columns instead.
    * The HTML report is one file that opens offline: Jinja2 template (package data, found with
      :class:`jinja2.PackageLoader`), summary cards first, then per operation its resume points,
      then one inline-SVG chart per flow partition (:mod:`pipelines.audit.charts`). No script,
      no external URL. Every value is HTML-escaped by the template (autoescape).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from ledger import clock
from pipelines.audit import summary as sm
from pipelines.audit.summary import OperationSummary

WIDTH = 120  # --format table fits a standard terminal; --wide has every column

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
        return clock.aware(value).strftime("%Y-%m-%d %H:%M:%S")  # UTC, as the header says
    return str(value)


def format_wide(marts: dict[str, list[dict[str, Any]]]) -> str:
    """Each mart as an aligned text table (its main columns): ``audit --format table --wide``."""
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


def _overall(summaries: list[OperationSummary]) -> tuple[bool, str]:
    translated = sum(s.translated for s in summaries)
    matched = sum(s.matched for s in summaries)
    unavailable = sum(s.audit_source == "unavailable" for s in summaries)
    from_evidence = sum(s.audit_source == "recorded_evidence" for s in summaries)
    ok = matched == translated and not unavailable
    head = "Everything matched" if ok else "MISMATCH"
    text = (f"{head}: {matched} of {translated} resume points in {len(summaries)} "
            "operation(s) match re-translation"
            + ("" if from_evidence else " at the recorded ledger versions"))
    if from_evidence:
        text += (f"\n{from_evidence} operation(s) audited from their recorded evidence instead "
                 "of time travel")
    if unavailable:
        text += (f"\n{unavailable} operation(s) cannot be re-translated: versions past the "
                 "time-travel horizon, no evidence recorded")
    return ok, text


def format_tables(summaries: list[OperationSummary]) -> str:
    """Per operation, a summary and its resume points, in at most 120 columns."""
    if not summaries:
        return "no failover or failback operation in this ledger"
    out = [*_overall(summaries)[1].splitlines(), ""]
    for i, s in enumerate(summaries, 1):
        out.append(f"{i}. {s.kind} {s.group_id} {s.from_cluster} -> {s.to_cluster}  "
                   f"started {sm.human_time(s.started_at)}, ready in "
                   f"{sm.human_seconds(s.seconds_to_ready)}  [{s.operation_id}]")
        out.append(f"   {'OK' if s.all_match else 'MISMATCH'}: {s.verdict}")
        out.append(f"   subscribe on {s.to_cluster}: {', '.join(s.subscribe_topics) or '-'}")
        if s.saved is not None:
            out.append(f"   reverse checkpointing saved {sm.human_int(s.saved)} re-read "
                       f"record(s) ({sm.human_int(s.duplicates_with)} with it, "
                       f"{sm.human_int(s.duplicates_without)} without)")
        for u in s.untouched:
            out.append(f"   untouched {u.topic}[{u.partition}]: {u.reason}")
        if s.resume_points:
            header = (f"   {'cluster:topic[p]':<34} {'before':>10} {'written':>10} "
                      f"{'from (source offset)':<34} {'run (u,d,n)':<20} ok")
            out.append(header)
            for r in s.resume_points:
                where = f"{r['cluster']}:{r['topic']}[{r['partition_id']}]"
                if r.get("source_offset") is not None:
                    source = (f"{r['source_cluster']}:{r['source_topic']} "
                              f"{sm.human_int(r['source_offset'])}")
                    run = (f"{sm.human_int(r.get('run_upstream_offset'))},"
                           f"{sm.human_int(r.get('run_downstream_offset'))},"
                           f"{sm.human_int(r.get('run_length'))}")
                    ok = "yes" if r.get("matches_retranslation") else "NO"
                else:
                    source, run, ok = "log start (never read here)", "-", "-"
                out.append(f"   {where[:34]:<34} {sm.human_int(r.get('previous_offset')):>10} "
                           f"{sm.human_int(r['resume_offset']):>10} {source[:34]:<34} "
                           f"{run[:20]:<20} {ok}")
        out.append("")
    # Names (groups, topics, operation ids) are unbounded: clip rather than wrap.
    return "\n".join(line[:WIDTH] for line in out).rstrip()


def charts(summaries: list[OperationSummary], runs: list[dict[str, Any]]) -> list[str]:
    """One SVG per flow partition with runs, the operations, and its resume points."""
    from pipelines.audit.charts import partition_chart

    by_partition: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_partition[(run["flow"], run["topic"], run["replica_topic"],
                      run["partition"])].append(run)
    operations = [{"label": f"{i}. {s.kind} {s.group_id}", "kind": s.kind,
                   "started_at": s.started_at} for i, s in enumerate(summaries, 1)]
    out = []
    for (flow, topic, replica, partition), part_runs in sorted(by_partition.items()):
        flow_source, flow_target = flow.split("->")
        points = [{"written_at": r["written_at"], "offset": r["resume_offset"],
                   "label": f"{r['group_id']}: {r['resume_offset']:,}"}
                  for s in summaries for r in s.resume_points
                  if r.get("partition_id") == partition and r.get("written_at") is not None
                  and ((r["cluster"], r["topic"]) in ((flow_source, topic),
                                                       (flow_target, replica)))]
        out.append(partition_chart(f"{flow}: {topic}[{partition}] -> {replica}[{partition}]",
                                   part_runs, operations, points))
    return out


def render_html(summaries: list[OperationSummary], runs: list[dict[str, Any]],
                title: str = "offset-ledger audit", scope: str = "") -> str:
    """The self-contained HTML report."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("pipelines.audit", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    all_match, overall = _overall(summaries) if summaries else (False, "")
    generated = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return env.get_template("report.html.j2").render(
        title=title, subtitle=f"generated {generated}{scope}", summaries=summaries,
        all_match=all_match, overall=overall, scope=scope, charts=charts(summaries, runs),
        human_time=sm.human_time, human_seconds=sm.human_seconds, human_int=sm.human_int)
