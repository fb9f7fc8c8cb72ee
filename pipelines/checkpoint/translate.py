"""``offset-ledger translate``: print translations, write nothing.

Three inputs, one rule (:mod:`ledger.translation`)::

    --group G [--group H] | --group-regex RE    committed offsets of groups on --from
    --offsets FILE|-                            offsets kept outside Kafka (a Spark query's
                                                checkpoint), in Spark's startingOffsets JSON

With ``--offsets`` the answer is the same JSON shape on the other cluster
(:mod:`pipelines.checkpoint.offsets`), or exit 4 naming every partition that cannot be
translated. Consumers in any language can use the ledger through this command's JSON output.

On a path ledger no JVM starts (``ledger.engine``); bad input (an unknown or disabled flow, a
group outside its allowlist, an unreachable --to) is refused before anything is read
(``pipelines.edge.preflight``). An unreachable --from is not an error: the groups' last commits
recorded in the ledger are translated instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ledger.config import Config
from ledger.errors import OffsetLedgerError
from pipelines.checkpoint import offsets as offsets_json
from pipelines.checkpoint.engine import Checkpointer
from pipelines.checkpoint.report import render, translation_rows
from pipelines.edge import preflight
from pipelines.spark import ledger_engine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", action="append", default=[], metavar="G",
                        help="a consumer group on --from (repeat for several)")
    parser.add_argument("--group-regex", metavar="RE",
                        help="also every group on --from whose id matches RE entirely and that "
                             "the flow's group allowlist allows")
    parser.add_argument("--offsets", metavar="FILE",
                        help="offsets kept outside Kafka, as Spark's startingOffsets JSON "
                             '({"Payments": {"0": 1000}}), from FILE or - for stdin; prints '
                             "the same shape on --to")
    parser.add_argument("--from", dest="source", required=True, help="cluster alias")
    parser.add_argument("--to", dest="target", required=True, help="cluster alias")
    parser.add_argument("--format", choices=["table", "json"], default=None,
                        help="groups: table (default) or json rows; --offsets: json (default, "
                             "the startingOffsets shape) or table")


def read_offsets(source: str) -> offsets_json.Offsets:
    """``--offsets FILE`` or ``-`` (stdin), parsed."""
    if source == "-":
        return offsets_json.parse(sys.stdin.read(), "--offsets -")
    try:
        text = Path(source).read_text()
    except OSError as exc:
        raise OffsetLedgerError(f"--offsets {source}: {exc.strerror or exc}") from None
    return offsets_json.parse(text, f"--offsets {source}")


def run(args: argparse.Namespace, config: Config) -> int:
    if args.offsets is not None and (args.group or args.group_regex):
        args._parser.error("give --offsets or --group/--group-regex, not both")
    if args.offsets is None and not (args.group or args.group_regex):
        args._parser.error("give --group G (repeatable), --group-regex RE or --offsets FILE|-")
    # Before anything is read: the flow, the groups, and --to for a group's commits there.
    preflight.check(config, args.source, args.target, args.group,
                    contact=[] if args.offsets is not None else [args.target])
    engine = ledger_engine(config.ledger_location, "offset-ledger-translate")
    checkpointer = Checkpointer(engine, config)
    if args.offsets is not None:
        offsets = read_offsets(args.offsets)
        checkpointer.engine.require()
        checkpoints, _ = offsets_json.translate(checkpointer, args.source, args.target, offsets,
                                             label="(offsets)")
        if args.format == "table":
            print(render(translation_rows(checkpoints), "table"))
        else:
            print(offsets_json.dumps(offsets_json.translated(checkpoints)))
        return 0
    groups = args.group
    if args.group_regex:
        from pipelines.edge import kafka_admin

        try:
            kafka_admin.check_reachable(config.cluster(args.source), timeout=5.0)
            live = True
        except kafka_admin.KafkaAdminError:
            live = False  # as for --group: the commits recorded in the ledger answer
        groups = checkpointer.resolve_groups(groups, args.group_regex, args.source, live,
                                             config.flow(f"{args.source}->{args.target}"))
    checkpointer.engine.require()
    # Translation only: T's commits decide offset writes, and translate writes nothing.
    plan = checkpointer.plan(f"{args.source}->{args.target}", groups=groups,
                             allow_unreachable_source=True, complete=True, target=False)
    print(render(translation_rows(plan.result.checkpoints), args.format or "table"))
    return 0
