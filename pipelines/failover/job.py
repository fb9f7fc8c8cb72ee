"""``offset-ledger failover|failback --group G [...] --from X --to Y``: the verbs.

The arguments and the thin entry point; the move itself is :mod:`pipelines.failover.mover`
(groups) and :mod:`pipelines.failover.spark_query` (Structured Streaming queries).
"""

from __future__ import annotations

import argparse
import sys

from ledger.config import Config
from pipelines.edge import preflight
from pipelines.failover.mover import MoveOptions, Mover, check_flow
from pipelines.failover.result import print_result
from pipelines.spark import ledger_engine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", action="append", default=[], metavar="G",
                        help="the consumer group to move (repeat for several)")
    parser.add_argument("--group-regex", metavar="RE",
                        help="also every group on --from whose id matches RE entirely and that "
                             "the flow's group allowlist allows")
    parser.add_argument("--from", dest="source", required=True, help="cluster alias")
    parser.add_argument("--to", dest="target", required=True, help="cluster alias")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds to wait for replication (and, with --cutoff, for the "
                             "groups to drain) (default 120)")
    parser.add_argument("--catch-up", action="store_true",
                        help="replicate the flows involved until the runs cover what the "
                             "groups committed (no separate replicate job needed)")
    parser.add_argument("--cutoff", action="store_true",
                        help="controlled failover with a cutoff: refuse while producers write, "
                             "wait until the groups read everything, cover the end offsets")
    parser.add_argument("--quiet-seconds", dest="quiet_s", type=float, default=5.0,
                        help="how long end offsets (--cutoff) or the query's checkpoint "
                             "(--spark-checkpoint) must stay unchanged (default 5)")
    parser.add_argument("--disaster", action="store_true",
                        help="the source is gone: do not contact it, resume from the last "
                             "commits recorded in the ledger")
    parser.add_argument("--dry-run", action="store_true", help="print, write nothing")
    parser.add_argument("--allow-untranslatable", action="store_true",
                        help="proceed when some partitions cannot be translated (none written)")
    parser.add_argument("--require-acls", action="store_true",
                        help="refuse the move (exit 2, nothing written) when the group's "
                             "principals lack READ on --to (or it cannot be checked), instead "
                             "of warning (docs/security.md)")
    parser.add_argument("--format", choices=["table", "json"], default="table")
    parser.add_argument("--spark-checkpoint", metavar="PATH",
                        help="move a Structured Streaming query instead of groups: its "
                             "checkpoint's newest committed batch is translated and a new "
                             "query's options are written beside PATH (docs/spark-queries.md)")
    parser.add_argument("--query-name", metavar="NAME",
                        help="with --spark-checkpoint: the query's name in the ledger "
                             "(spark:NAME; default: the checkpoint folder's name)")


def run(args: argparse.Namespace, config: Config) -> int:
    options = MoveOptions(timeout=args.timeout, catch_up=args.catch_up, cutoff=args.cutoff,
                          disaster=args.disaster, dry_run=args.dry_run,
                          allow_untranslatable=args.allow_untranslatable, quiet_s=args.quiet_s,
                          require_acls=args.require_acls)
    if args.spark_checkpoint:
        from pipelines.failover import spark_query

        return spark_query.run(args, Mover(ledger_engine(
            config.ledger_location, f"offset-ledger-{args._verb}"), config), options)
    if not args.group and not args.group_regex:
        args._parser.error("give --group G (repeatable), --group-regex RE or "
                           "--spark-checkpoint PATH")
    # Before anything starts: the flow, the groups named, the target (the source is probed
    # first thing in the move, which says what to do if it is lost).
    check_flow(config, args._verb, args.source, args.target)
    preflight.check(config, args.source, args.target, args.group, contact=[args.target])
    mover = Mover(ledger_engine(config.ledger_location, f"offset-ledger-{args._verb}"), config)
    results = mover.move_groups(args._verb, args.group, args.source, args.target, options,
                                group_regex=args.group_regex)
    print_result(results, args.format)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python pipelines/failover/job.py failover --group G --from P --to B``."""
    from pipelines.cli import main as cli_main

    return cli_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
