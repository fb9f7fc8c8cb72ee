"""``offset-ledger translate --group G --from X --to Y``: print translations, write nothing.

Consumers in any language can use the ledger through this command's JSON output.
"""

from __future__ import annotations

import argparse

from ledger.config import Config
from pipelines.checkpoint.engine import Checkpointer
from pipelines.checkpoint.report import render, translation_rows
from pipelines.spark import get_spark


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", required=True)
    parser.add_argument("--from", dest="source", required=True, help="cluster alias")
    parser.add_argument("--to", dest="target", required=True, help="cluster alias")
    parser.add_argument("--format", choices=["table", "json"], default="table")


def run(args: argparse.Namespace, config: Config) -> int:
    checkpointer = Checkpointer(get_spark("offset-ledger-translate"), config)
    result = checkpointer.run(f"{args.source}->{args.target}", groups=[args.group], sync=False,
                              allow_unreachable_source=True, dry_run=True)
    print(render(translation_rows(result.checkpoints), args.format))
    return 0
