"""``offset-ledger ledger init|status|history|maintain``: create, inspect and keep up the ledger.

``init`` creates missing tables and applies each table's retention to it
(``ledger.audit.retention.days``, ``ledger.streamed.retention.days``: :class:`ledger.maintenance.
Retention`; also to existing tables, adding no version where it is already set); ``maintain``
compacts and Z-orders, checkpoints the Delta logs and VACUUMs within that retention
(:mod:`ledger.maintenance`).
"""

from __future__ import annotations

import argparse

from ledger import maintenance
from ledger.config import Config
from ledger.schemas import DERIVED, TABLES
from ledger.tables import Ledger
from pipelines.spark import get_spark


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["init", "status", "history", "maintain"])
    parser.add_argument("--table", choices=sorted(TABLES), action="append",
                        help="with history or maintain: only this table (repeatable)")
    parser.add_argument("--limit", type=int, default=20,
                        help="with history: the newest N versions per table (default 20)")
    parser.add_argument("--no-vacuum", action="store_true",
                        help="with maintain: compact and checkpoint, but remove no file")
    parser.add_argument("--rebuild-spans", action="store_true",
                        help="with maintain: rebuild offset_sync_spans from the raw runs, not "
                             "from the previous snapshot")


def run(args: argparse.Namespace, config: Config) -> int:
    ledger = Ledger(get_spark("offset-ledger-ledger"), config.ledger_location)
    if args.action == "init":
        created = ledger.init()
        horizons = maintenance.Retention.of(config)
        retention = maintenance.apply_retention(ledger, horizons)
        for name, new in created.items():
            days = horizons.days(name)
            note = f"  retention {days:g} days" if retention[name] else ""
            print(f"{'created' if new else 'exists '}  {ledger.identifier(name)}{note}")
        return 0
    if args.action == "maintain":
        reports = maintenance.maintain(
            ledger, maintenance.Retention.of(config), tuple(args.table or ()),
            vacuum=not args.no_vacuum,
            flows={f.name: (f.source, f.target) for f in config.flows},
            window=config.spans_window, rebuild_spans=args.rebuild_spans)
        print(maintenance.Retention.of(config).line())
        for report in reports:
            print(report.line())
        return 0
    if args.action == "status":
        ledger.require(verify=True)
        for name in [n for n in TABLES if n not in DERIVED or ledger.exists(n)]:
            rows = ledger.read(name).count()
            print(f"{name:22} version {ledger.version(name):>5}  rows {rows:>9}  "
                  f"{ledger.identifier(name)}")
        return 0
    names = args.table or list(TABLES)
    ledger.require(*names)
    for name in names:
        print(f"== {name}")
        history = ledger.spark.sql(
            f"DESCRIBE HISTORY {ledger.identifier(name)} LIMIT {max(1, args.limit)}")
        for row in history.select("version", "timestamp", "operation").collect():
            print(f"  v{row['version']:<5} {row['timestamp']}  {row['operation']}")
    return 0
