"""``offset-ledger ledger init|status|history``: create and inspect the ledger tables."""

from __future__ import annotations

import argparse

from ledger.config import Config
from ledger.schemas import SCHEMAS
from ledger.tables import Ledger
from pipelines.spark import get_spark


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["init", "status", "history"])
    parser.add_argument("--table", choices=sorted(SCHEMAS), help="with history: the table")


def run(args: argparse.Namespace, config: Config) -> int:
    ledger = Ledger(get_spark("offset-ledger-ledger"), config.ledger_location)
    if args.action == "init":
        created = ledger.init()
        for name, new in created.items():
            print(f"{'created' if new else 'exists '}  {ledger.identifier(name)}")
        return 0
    if args.action == "status":
        ledger.require(verify=True)
        for name in SCHEMAS:
            rows = ledger.read(name).count()
            print(f"{name:22} version {ledger.version(name):>5}  rows {rows:>9}  "
                  f"{ledger.identifier(name)}")
        return 0
    names = [args.table] if args.table else list(SCHEMAS)
    ledger.require(*names)
    for name in names:
        print(f"== {name}")
        history = ledger.spark.sql(f"DESCRIBE HISTORY {ledger.identifier(name)}")
        for row in history.select("version", "timestamp", "operation").collect():
            print(f"  v{row['version']:<5} {row['timestamp']}  {row['operation']}")
    return 0
