"""``offset-ledger checkpoint --flow S->T [--once]``: checkpoints and group offset sync.

Also the ``spark-submit pipelines/checkpoint/job.py`` file and the Databricks entry point
``offset-ledger-checkpoint``. Periodic mode emits checkpoints every
``emit.checkpoints.interval.seconds`` and syncs group offsets (when
``sync.group.offsets.enabled``) every ``sync.group.offsets.interval.seconds``, like MM2.
Each pass after the first reads the configuration file again (``ledger.config.reload_config``,
as ``replicate`` does at its refresh): a group or topic added to the flow's allowlists is
checkpointed from the next pass, without a restart; the schedule stays as started.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from ledger.config import Config, reload_config
from ledger.errors import first_line
from ledger.span_refresh import refresh_if_behind
from pipelines import metrics
from pipelines.args import add_flow_arguments
from pipelines.checkpoint.engine import Checkpointer, CheckpointResult
from pipelines.checkpoint.readiness import pass_readiness
from pipelines.metrics.observe import CheckpointObserver
from pipelines.passes import run_passes, supervise, wants_supervisor
from pipelines.spark import ledger_engine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flow_arguments(parser, "S->T: groups on S checkpointed toward T")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument("--group", action="append", help="only this group (repeatable)")
    sync = parser.add_mutually_exclusive_group()
    sync.add_argument("--sync", dest="sync", action="store_true", default=None,
                      help="write translated offsets into groups on T (overrides config)")
    sync.add_argument("--no-sync", dest="sync", action="store_false",
                      help="only record checkpoints")
    parser.add_argument("--max-passes", type=int, default=None, help=argparse.SUPPRESS)
    metrics.add_arguments(parser)


def summary(result: CheckpointResult) -> str:
    counts: dict[str, int] = {}
    for cp in result.checkpoints:
        counts[cp.status] = counts.get(cp.status, 0) + 1
    status = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"
    return (f"checkpoint {result.checkpoint_id[:12]} flow {result.flow}: "
            f"{len(result.checkpoints)} checkpoints ({status}); "
            f"{len(result.writes)} group offsets written, {len(result.skipped)} not written; "
            f"ledger versions {result.versions}")


log = logging.getLogger(__name__)


def refresh_spans(checkpointer: Checkpointer, config: Config, flow: str) -> None:
    """Keep the tail a store load reads short: refresh the span snapshots of the flows this
    pass translates over (``flow`` and its reverse) once ``ledger.spans.refresh.commits``
    commits behind or ``ledger.spans.refresh.runs`` runs long. A failure here (e.g. a
    concurrent ``ledger maintain``) costs only speed: it is logged, and the pass stands."""
    flows = {f.name: (f.source, f.target) for f in config.flows}
    source, target = config.flow(flow).source, config.flow(flow).target
    wanted = [f for f in (f"{source}->{target}", f"{target}->{source}") if f in flows]
    try:
        for report in refresh_if_behind(checkpointer.engine, flows, wanted,
                                        config.spans_refresh_commits,
                                        config.spans_refresh_runs, config.spans_window):
            print(report.line().strip(), flush=True)
    except Exception as exc:
        log.warning("span snapshot refresh skipped: %s", first_line(exc))


def run(args: argparse.Namespace, config: Config) -> int:
    flow = config.flow(args.flow)
    if wants_supervisor(args):  # the passes run in a child, started again after a crash
        return supervise("checkpoint", args._argv)
    job_metrics = metrics.job_metrics("checkpoint", args, config, flow.source, flow.target,
                                      once=args.once)
    if job_metrics is None:
        return _run(args, config, None)
    with job_metrics:
        observer = CheckpointObserver(
            job_metrics.metrics, flow.source, flow.target,
            interval_s=None if args.once else max(1, config.emit_checkpoints_interval_seconds),
            on_update=job_metrics.exporter.publish)
        return _run(args, config, observer)


def _observe(observer: CheckpointObserver | None, checkpointer: Checkpointer, flow: str,
             result: CheckpointResult, seconds: float) -> None:
    if observer is None:
        return
    config = checkpointer.config
    try:
        readiness = pass_readiness(config, checkpointer.engine, config.flow(flow), result)
    except Exception as exc:  # a metric is never a reason to stop checkpointing
        log.warning("group readiness not measured: %s", first_line(exc))
        readiness = {}
    observer.pass_done(result, seconds, readiness)


def _run(args: argparse.Namespace, config: Config, observer: CheckpointObserver | None) -> int:
    """The passes; ``config`` is re-read before every pass but the first (allowlists)."""
    checkpointer = Checkpointer(ledger_engine(config.ledger_location,
                                              "offset-ledger-checkpoint"), config)
    emit_every = max(1, config.emit_checkpoints_interval_seconds)
    sync_every = max(1, config.sync_group_offsets_interval_seconds)
    want_sync = config.sync_group_offsets_enabled if args.sync is None else args.sync
    last_sync = float("-inf")

    def one_pass(n: int) -> None:
        nonlocal config, last_sync
        started = time.monotonic()
        if n:
            config = checkpointer.config = reload_config(config)
        do_sync = want_sync and (args.once or started - last_sync >= sync_every)
        result = checkpointer.run(args.flow, groups=args.group, sync=do_sync)
        if do_sync:
            last_sync = started
        _observe(observer, checkpointer, args.flow, result, time.monotonic() - started)
        print(summary(result), flush=True)
        refresh_spans(checkpointer, config, args.flow)

    return run_passes("checkpoint", one_pass, every_s=emit_every, once=args.once,
                      max_passes=args.max_passes)


def main(argv: list[str] | None = None) -> int:
    from pipelines.cli import job_main  # at call time: the CLI imports the verbs

    return job_main("checkpoint", argv)


if __name__ == "__main__":
    sys.exit(main())
