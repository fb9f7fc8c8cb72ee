"""``offset-ledger status``: is replication caught up, and is a group ready to move?

Per flow (all enabled flows, or ``--flow``) and source partition: the lag in records (source
end offset minus where the ledger's runs end), the newest replicated record's age, the last run,
whether it caught up, and the end-to-end latency from the newest replicated MM2 heartbeat. Per
``--group`` and flow ``S->T``: its committed offsets and lag on S and T, the newest checkpoint,
and a verdict for moving it S -> T ("ready to fail over P -> B", "wait: 1,204 records not yet
replicated") and for a cutoff failover.

Invariants:
    * Reads only (see :mod:`pipelines.status.gather`); safe beside running jobs.
    * Exit 0 when every shown flow caught up and every shown group is ready, 3 when not (so a
      script can wait on it), 2 on bad input, checked before any JVM starts.
      ``--groups-only`` takes the exit status from the groups alone (continuous failover, with
      producers still writing). ``--watch S`` repeats every S seconds until interrupted and
      exits with the last round's status.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from ledger import clock
from ledger.config import Config, FlowConfig
from ledger.schemas import CHECKPOINTS, OFFSET_SYNCS, OPERATIONS, REPLICATION_PROGRESS
from pipelines.args import add_flow_arguments

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (f"{parser.description}. Exits 0 when every shown flow caught up and "
                          "every shown group is ready to move, 3 when not (scripts can wait "
                          "on it), 2 on bad input.")
    add_flow_arguments(parser, "only this flow (default: every enabled flow)")
    parser.add_argument("--group", action="append", default=[], metavar="G",
                        help="also show this consumer group and whether it can move "
                             "(repeatable)")
    parser.add_argument("--format", choices=["table", "json", "prometheus"], default="table",
                        help="table for people, json for tools, prometheus for a "
                             "node-exporter textfile (docs/metrics.md)")
    parser.add_argument("--watch", type=float, default=None, metavar="S",
                        help="print again every S seconds until interrupted")
    parser.add_argument("--groups-only", action="store_true",
                        help="exit status from the groups' verdicts only (continuous "
                             "failover: producers keep writing, so flows never catch up)")


def selected_flows(args: argparse.Namespace, config: Config) -> list[FlowConfig]:
    """The flows to show; bad input raises (exit 2) before anything connects."""
    flow, source, target = (getattr(args, k, None) for k in ("flow", "source", "target"))
    parser = getattr(args, "_parser", None)
    if flow is not None and (source or target):
        _usage_error(parser, "give either --flow 'S->T' or --source S --target T, not both")
    if flow is not None:
        return [config.flow(flow)]
    if source or target:
        if not (source and target):
            _usage_error(parser, "give both --source S and --target T (or --flow 'S->T')")
        return [config.flow(source, target)]
    return list(config.enabled_flows())


def _usage_error(parser: argparse.ArgumentParser | None, message: str) -> None:
    if parser is not None:
        parser.error(message)  # exits 2 with the verb's usage
    from ledger.config import ConfigError

    raise ConfigError(message)


def gather_report(config: Config, ledger, flows: list[FlowConfig], groups: list[str],
                  groups_only: bool = False):
    from pipelines.status.gather import Gatherer
    from pipelines.status.readiness import exit_code
    from pipelines.status.render import Report

    gatherer = Gatherer(config, ledger, many_groups=len(groups) * len(flows) > 1)
    report = Report(clock.now())
    with ThreadPoolExecutor(max_workers=3) as pool:
        # The flows' first ledger reads and the groups' commits on both clusters run while
        # the flows' ends are read here: a round costs about its longest part, not their sum.
        aliases = [a for f in flows for a in (f.source, f.target)]
        gatherer.read_ledger_ahead(pool, flows)
        gatherer.check_clusters(pool, aliases)
        gatherer.read_commits_ahead(pool, aliases, groups)
        by_flow = {f.name: gatherer.flow_status(f) for f in flows}
        report.flows = list(by_flow.values())
        checkpoints = gatherer.checkpoints(groups, flows)
        last_moves = gatherer.last_moves(groups)
        by_group = {(st.group, st.flow): st for f in flows
                    for st in gatherer.groups_status(groups, f, by_flow[f.name], checkpoints,
                                                     last_moves)}
    report.groups = [by_group[(g, f.name)] for g in dict.fromkeys(groups) for f in flows]
    report.exit_code = exit_code(report.flows, report.groups, groups_only)
    report.cluster_errors = {a: gatherer.cluster_error(a) for a in dict.fromkeys(aliases)}
    return report


def run(args: argparse.Namespace, config: Config) -> int:
    flows = selected_flows(args, config)
    watch = getattr(args, "watch", None)
    if watch is not None and watch <= 0:
        _usage_error(getattr(args, "_parser", None), "--watch needs a number of seconds > 0")
    groups = list(dict.fromkeys(getattr(args, "group", None) or []))
    fmt = getattr(args, "format", "table")
    groups_only = getattr(args, "groups_only", False)

    from pipelines.acls import check as acl_check
    from pipelines.spark import ledger_engine
    from pipelines.status.render import to_json, to_table

    # delta-rs on a path ledger (no JVM), Spark under spark-submit or where it must.
    ledger = ledger_engine(config.ledger_location, "offset-ledger-status")
    started = time.perf_counter()
    ledger.require(OFFSET_SYNCS, REPLICATION_PROGRESS, CHECKPOINTS, OPERATIONS)
    log.info("status: ledger check took %.2fs", time.perf_counter() - started)
    code: int | None = None
    try:
        while True:
            report = gather_report(config, ledger, flows, groups, groups_only)
            code = report.exit_code
            # Will the groups be authorized where they move? (never changes the exit code)
            read = {(g.flow, g.group): {c.topic for c in g.commits[g.source]}
                    for g in report.groups if g.source in g.commits}
            checks = (acl_check.for_status(config, flows, groups, read,
                                           report.cluster_errors)
                      if fmt != "prometheus" else [])
            for g in report.groups:
                g.acl_check = next((d for f, name, _, d in checks
                                    if (f, name) == (g.flow, g.group)), None)
            if fmt == "prometheus":  # prometheus_client imported for this format only
                from pipelines.metrics.status import to_prometheus

                print(to_prometheus(report), flush=True)
            else:
                print(to_json(report, one_line=watch is not None) if fmt == "json"
                      else to_table(report), flush=True)
            if checks and fmt == "table":
                print("\n".join(line for _, _, line, _ in checks), flush=True)
            if watch is None:
                return code
            if fmt == "table":
                print(flush=True)
            time.sleep(watch)  # the user's refresh interval, not synchronisation
    except KeyboardInterrupt:
        if code is None:
            raise
        return code


def main(argv: list[str] | None = None) -> int:
    from pipelines.cli import job_main  # at call time: the CLI imports the verbs

    return job_main("status", argv)


if __name__ == "__main__":
    sys.exit(main())
