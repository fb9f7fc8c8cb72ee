"""The ``offset-ledger`` command line: one verb per module.

Each command module exposes ``add_arguments(parser[, verb])`` and ``run(args, config) -> int``;
this file only wires them up, loads the one :class:`~ledger.config.Config` from ``--config``
(default ``./offset-ledger.yaml`` or ``$OFFSET_LEDGER_CONFIG``) and turns expected errors into
``error: ...`` on stderr with a non-zero exit.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import sys

from ledger.config import load_config
from ledger.errors import OffsetLedgerError

# verb -> (module, help). Importing a module starts no JVM: sessions are built in run().
COMMANDS: dict[str, tuple[str, str]] = {
    "clusters": ("pipelines.clusters", "start, inspect or stop the embedded Kafka clusters"),
    "ledger": ("pipelines.ledger_admin", "create or inspect the ledger's Delta tables"),
    "replicate": ("pipelines.replicate.job", "replicate a flow's topics and record offset-syncs"),
    "checkpoint": ("pipelines.checkpoint.job",
                   "record group offsets and forward/reverse checkpoints; sync group offsets"),
    "translate": ("pipelines.checkpoint.translate", "print a group's translated offsets"),
    "topics": ("pipelines.allowlists", "edit a flow's topic allowlist"),
    "groups": ("pipelines.allowlists", "edit a flow's group allowlist"),
    "reverse-checkpointed-topics": ("pipelines.allowlists",
                                    "edit a flow's reverse-checkpointed topics"),
    "failover": ("pipelines.failover.job", "move a group from the primary to the backup"),
    "failback": ("pipelines.failover.job", "move a group back to the primary"),
    "audit": ("pipelines.audit.job", "show resume points and the ledger behind them"),
    "validate": ("pipelines.validate.job", "run the Great Expectations suites on the ledger"),
    "demo": ("pipelines.demo", "run the reference failover/failback scenario"),
}


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS,
                        help="configuration file (default: ./offset-ledger.yaml or "
                             "$OFFSET_LEDGER_CONFIG)")
    common.add_argument("--ledger-location", default=argparse.SUPPRESS,
                        help="override ledger.location (a path or catalog.schema)")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(prog="offset-ledger", parents=[common],
                                     description="Kafka replication with an exact offset "
                                                 "ledger in Delta Lake.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for verb, (module, help_text) in COMMANDS.items():
        mod = importlib.import_module(module)
        p = sub.add_parser(verb, parents=[common], help=help_text, description=help_text)
        p.set_defaults(_module=module, _verb=verb)
        if hasattr(mod, "add_arguments"):
            try:
                mod.add_arguments(p, verb)
            except TypeError:
                mod.add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(getattr(args, "config", None))
        if getattr(args, "ledger_location", None):
            config = dataclasses.replace(config, ledger_location=args.ledger_location)
        module = importlib.import_module(args._module)
        return int(module.run(args, config) or 0)
    except OffsetLedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def job_main(verb: str, argv: list[str] | None = None) -> int:
    """What each job's ``main(argv=None)`` calls: the same verb as ``offset-ledger VERB``.

    ``argv`` defaults to ``sys.argv[1:]``, so one function serves the console script, the
    ``spark-submit pipelines/<job>/job.py ...`` file and a Databricks ``python_wheel_task``.
    """
    return main([verb, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
