"""``offset-ledger validate``: run the ledger's Great Expectations suites.

Invariants:
    * Exit 0 when every expectation passes, 1 when any fails (the summary names the table, the
      check, the unexpected count and a few sample rows), 2 on errors such as a missing ledger
      (:class:`ledger.tables.LedgerError`, turned into ``error: ...`` by the CLI).
    * Secret values of the configuration are checked for but never printed.
    * Nothing runs at import time.
"""

from __future__ import annotations

import argparse
import json
import sys

from ledger.config import Config
from ledger.schemas import TABLES
from pipelines.args import require_extra


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", action="append", choices=sorted(TABLES),
                        help="validate only this table (repeatable; default: every table)")
    parser.add_argument("--format", choices=["text", "json"], default="text",
                        help="summary as text (default) or JSON")


def run(args: argparse.Namespace, config: Config) -> int:
    require_extra("validate", "validate")
    from expectations import validate_ledger
    from pipelines.spark import get_spark

    report = validate_ledger(get_spark("offset-ledger-validate"), config,
                             tables=getattr(args, "table", None))
    if getattr(args, "format", "text") == "json":
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(report.summary())
    return 0 if report.success else 1


def main(argv: list[str] | None = None) -> int:
    from pipelines.cli import job_main  # at call time: the CLI imports the verbs

    return job_main("validate", argv)


if __name__ == "__main__":
    sys.exit(main())
