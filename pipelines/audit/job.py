"""``offset-ledger audit``: the resume points and the ledger behind them, from the dbt marts.

Invariants:
    * Reads only: the ledger is never written (see :mod:`pipelines.audit.audit`).
    * ``--as-of-version N`` is a version of the ``operations`` table (every other table is read
      as of that commit's time); ``--as-of-timestamp T`` applies to every table.
    * ``--format table`` (default, 120 columns: a summary per operation and its resume points;
      ``--wide`` every mart) and ``json`` (the marts, for tools) print to stdout; ``html`` writes
      a self-contained report (``--output``, default ``offset-ledger-audit.html``).
    * An operation whose recorded ledger versions time travel no longer reaches is audited
      from the evidence it recorded (``--evidence``: every operation), and says so.
    * ``--operation X`` (a table, an HTML card or JSON) answers from the operation's recorded
      evidence without dbt or a JVM on a path ledger (:mod:`pipelines.audit.operation`: the
      marts' verdict, audited from recorded evidence). Its JSON holds the operation's rows of
      ``resume_audit`` and ``failback_duplicates_avoided`` (the marts' columns), the verdict
      and the checkpoints of its pass; the group's translation marts
      (``forward_translations``, ``reverse_translations``: its latest commits translated now)
      come with ``--marts``. ``--marts``, ``--group``, ``--as-of-*``, ``--build``, ``--wide``
      or an operation without evidence build the dbt marts.
    * A missing ledger or a failing dbt model exits 2 with ``error: ...``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.config import Config
from pipelines.args import require_extra

if TYPE_CHECKING:
    from ledger.records import CheckpointRecord
    from pipelines.audit.summary import OperationSummary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", help="only this consumer group")
    parser.add_argument("--operation", help="only this failover/failback operation id")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--as-of-version", type=int, metavar="N",
                      help="the ledger when the operations table was at Delta version N")
    when.add_argument("--as-of-timestamp", metavar="T",
                      help="the ledger as of a timestamp (e.g. '2026-01-01 12:00:00')")
    parser.add_argument("--format", choices=["table", "json", "html"], default="table")
    parser.add_argument("--output", default="offset-ledger-audit.html",
                        help="with --format html: the report file")
    parser.add_argument("--wide", action="store_true",
                        help="with --format table: every mart with its main columns")
    parser.add_argument("--evidence", action="store_true",
                        help="audit every operation from the evidence it recorded, without "
                             "time travel (by default only operations whose ledger versions "
                             "time travel no longer reaches)")
    parser.add_argument("--build", action="store_true",
                        help="dbt build instead of dbt run: also run the data and unit tests")
    parser.add_argument("--marts", action="store_true",
                        help="with --operation: build the dbt marts (time travel at the "
                             "operation's versions; with --format json also the group's "
                             "translation marts) instead of answering from the evidence it "
                             "recorded")


def _quick(args: argparse.Namespace) -> bool:
    """``--operation X``: answered from its recorded evidence, no dbt."""
    return bool(getattr(args, "operation", None)) and not any(
        getattr(args, name, None) for name in ("marts", "group", "as_of_version",
                                               "as_of_timestamp", "build", "wide"))


def quick_json(summary: OperationSummary, marts: dict[str, list[dict]],
               checkpoints: list[CheckpointRecord]) -> dict:
    """``audit --operation X --format json`` from recorded evidence: the verdict, the
    operation's mart rows and the checkpoints of its pass (JSON-ready)."""
    from pipelines.audit.audit import jsonable

    verdict = {
        "operation_id": summary.operation_id, "kind": summary.kind,
        "group_id": summary.group_id, "from_cluster": summary.from_cluster,
        "to_cluster": summary.to_cluster, "started_at": summary.started_at,
        "ready_at": summary.ready_at, "seconds_to_ready": summary.seconds_to_ready,
        "audit_source": summary.audit_source, "verdict": summary.verdict,
        "all_match": summary.all_match, "resume_points_translated": summary.translated,
        "resume_points_matched": summary.matched, "log_starts": summary.log_starts,
        "duplicates_without_reverse_checkpointing": summary.duplicates_without,
        "duplicates_with_reverse_checkpointing": summary.duplicates_with,
        "duplicates_avoided": summary.saved,
        "untouched": [dataclasses.asdict(u) for u in summary.untouched],
    }
    return jsonable({"operation": verdict, **marts,
                     "checkpoints": [c.to_row() for c in checkpoints]})


def run_quick(args: argparse.Namespace, config: Config) -> int | None:
    """:func:`run` for one operation from its evidence; ``None``: it has none (build marts)."""
    from pipelines.audit.operation import EVIDENCE, audit_operation
    from pipelines.audit.report import format_tables, render_html
    from pipelines.audit.summary import summarize
    from pipelines.spark import ledger_engine

    engine = ledger_engine(config.ledger_location, "offset-ledger-audit")
    engine.require()
    found = audit_operation(engine, args.operation)
    if found is None:
        return None
    operation, marts, checkpoints, runs = found
    summaries = summarize([operation], marts, checkpoints)
    for summary in summaries:  # also when it wrote no resume point (the rows name the source)
        summary.audit_source = EVIDENCE
    if getattr(args, "format", "table") == "json":
        print(json.dumps(quick_json(summaries[0], marts, checkpoints), indent=2))
    elif getattr(args, "format", "table") == "html":
        output = Path(getattr(args, "output", "offset-ledger-audit.html"))
        output.write_text(render_html(summaries, runs,
                                      scope=f", operation {args.operation}"))
        print(f"wrote {output}")
    else:
        print(format_tables(summaries))
    return 0


def run(args: argparse.Namespace, config: Config) -> int:
    if _quick(args):
        code = run_quick(args, config)
        if code is not None:
            return code
    require_extra("audit", "audit")  # dbt and the report (the quick path above needs neither)
    from pipelines.audit.audit import jsonable, load_operations, load_runs, run_audit
    from pipelines.audit.report import format_tables, format_wide, render_html
    from pipelines.audit.summary import summarize
    from pipelines.spark import get_spark

    spark = get_spark("offset-ledger-audit")
    when = {"as_of_version": getattr(args, "as_of_version", None),
            "as_of_timestamp": getattr(args, "as_of_timestamp", None)}
    which = {"group": getattr(args, "group", None),
             "operation": getattr(args, "operation", None)}
    marts = run_audit(spark, config, build=getattr(args, "build", False),
                      evidence=getattr(args, "evidence", False), **which, **when)
    fmt = getattr(args, "format", "table")
    if fmt == "json":
        print(json.dumps(jsonable(marts), indent=2))
        return 0
    if fmt == "table" and getattr(args, "wide", False):
        print(format_wide(marts))
        return 0
    operations, checkpoints = load_operations(spark, config, **which, **when)
    summaries = summarize(operations, marts, checkpoints)
    if fmt == "html":
        output = Path(getattr(args, "output", "offset-ledger-audit.html"))
        scope = "".join(f", {k} {v}" for k, v in which.items() if v)
        scope += "".join(f", as of {k.removeprefix('as_of_')} {v}" for k, v in when.items()
                         if v is not None)
        output.write_text(render_html(summaries, load_runs(spark, config, **when),
                                      scope=scope))
        print(f"wrote {output}")
    else:
        print(format_tables(summaries))
    return 0


def main(argv: list[str] | None = None) -> int:
    from pipelines.cli import job_main  # at call time: the CLI imports the verbs

    return job_main("audit", argv)


if __name__ == "__main__":
    sys.exit(main())
