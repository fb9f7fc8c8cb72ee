"""The ``offset-ledger`` command line: one verb per module.

Each command module exposes ``add_arguments(parser[, verb])`` and ``run(args, config) -> int``;
this file only wires them up, loads the one :class:`~ledger.config.Config` from ``--config``
(default ``./offset-ledger.yaml`` or ``$OFFSET_LEDGER_CONFIG``) and turns expected errors into
``error: ...`` on stderr with a non-zero exit.
"""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import importlib
import importlib.util
import io
import logging
import signal
import sys
from collections.abc import Collection, Sequence

from ledger import settings
from ledger.config import load_config, resolve_location
from ledger.errors import OffsetLedgerError
from pipelines import stops
from pipelines.args import (  # noqa: F401  (re-exported: the CLI's helpers, one import away)
    EXTRAS,
    MissingExtraError,
    add_flow_arguments,
    extra_for,
    install_message,
    require_extra,
)

# verb -> (module, help). Importing a module starts no JVM: sessions are built in run(). A
# command imports only its own verb's module (main): pyspark, dbt or Great Expectations are
# imported by the verbs that use them, not by `translate` or `failover` on a delta-rs ledger.
COMMANDS: dict[str, tuple[str, str]] = {
    "clusters": ("pipelines.devtools.clusters",
                 "start, inspect or stop the embedded Kafka clusters"),
    "ledger": ("pipelines.ledger_admin", "create or inspect the ledger's Delta tables"),
    "replicate": ("pipelines.replicate.job", "replicate a flow's topics and record offset-syncs"),
    "checkpoint": ("pipelines.checkpoint.job",
                   "record group offsets and forward/reverse checkpoints; sync group offsets"),
    "translate": ("pipelines.checkpoint.translate",
                  "print translated offsets: of groups, or given as JSON (a Spark query's)"),
    "topics": ("pipelines.allowlists", "edit a flow's topic allowlist"),
    "groups": ("pipelines.allowlists", "edit a flow's group allowlist"),
    "reverse-checkpointed-topics": ("pipelines.allowlists",
                                    "edit a flow's reverse-checkpointed topics"),
    "failover": ("pipelines.failover.job",
                 "move a group or a Spark streaming query from the primary to the backup"),
    "failback": ("pipelines.failover.job",
                 "move a group or a Spark streaming query back to the primary"),
    "status": ("pipelines.status.job",
               "replication lag per flow and whether groups are ready to move"),
    "audit": ("pipelines.audit.job", "show resume points and the ledger behind them"),
    "validate": ("pipelines.validate.job", "run the Great Expectations suites on the ledger"),
    "ingest": ("pipelines.mm2.ingest", "ingest MirrorMaker 2's offset-syncs and checkpoints"),
    "demo": ("pipelines.devtools.demo", "run the reference failover/failback scenario"),
}


# verb -> examples shown at the end of its --help (with the exit codes).
EXAMPLES: dict[str, str] = {
    "clusters": "offset-ledger clusters up",
    "ledger": "offset-ledger ledger init",
    "replicate": "offset-ledger replicate --flow 'P->B' --once",
    "checkpoint": "offset-ledger checkpoint --source P --target B --once --group G",
    "translate": "offset-ledger translate --group G --from P --to B --format json\n"
                 "  offset-ledger translate --from P --to B --offsets offsets.json  "
                 "(Spark's startingOffsets JSON; - reads stdin)",
    "topics": "offset-ledger topics --source P --target B --add 'Payments'",
    "groups": "offset-ledger groups --source P --target B --add 'G'",
    "reverse-checkpointed-topics": "offset-ledger reverse-checkpointed-topics --source B "
                                   "--target P --add P.Payments",
    "failover": "offset-ledger failover --group G --from P --to B --catch-up\n"
                "  offset-ledger failover --group-regex 'orders-.*' --from P --to B --cutoff\n"
                "  offset-ledger failover --group G --from P --to B --disaster\n"
                "  offset-ledger failover --spark-checkpoint /data/chk/payments --from P --to B "
                "--catch-up",
    "failback": "offset-ledger failback --group G --from B --to P --catch-up\n"
                "  offset-ledger failback --spark-checkpoint /data/chk/payments-on-B-20261125T0315"
                "00 --from B --to P",
    "status": "offset-ledger status --flow 'P->B' --group G",
    "audit": "offset-ledger audit --group G --format html --output audit.html",
    "validate": "offset-ledger validate --format json",
    "ingest": "offset-ledger ingest mm2 --flow 'P->B' --once",
    "demo": "offset-ledger demo",
}

EXIT_CODES = """exit codes:
  0  success
  1  validate found failures, demo counted a lost or twice-read record, a topic was not
     replicated
  2  a clear error: bad configuration or arguments, unknown alias or flow, active group,
     missing or damaged ledger, unreachable cluster
  3  replication (with failover --cutoff: a group) did not catch up within --timeout
  4  an offset cannot be translated (nothing is written)"""

FLOW_VERBS = ("replicate", "checkpoint", "ingest")
"""Verbs that name a flow: ``--flow 'S->T'`` or, equivalently, ``--source S --target T``."""


def _resolve_flow(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    source, target = getattr(args, "source", None), getattr(args, "target", None)
    if args.flow is not None and (source or target):
        parser.error("give either --flow 'S->T' or --source S --target T, not both")
    if args.flow is None:
        if not (source and target):
            parser.error("the flow is required: --flow 'S->T' (quoted) or --source S --target T")
        args.flow = f"{source}->{target}"


def _check_names(args: argparse.Namespace, config: object) -> None:
    """Aliases and flows named on the command line exist: checked before any JVM starts."""
    if getattr(args, "flow", None) is not None:
        config.flow(args.flow)  # type: ignore[attr-defined]
        return
    for alias in (getattr(args, "source", None), getattr(args, "target", None)):
        if isinstance(alias, str):
            config.cluster(alias)  # type: ignore[attr-defined]


TOP_OPTIONS_WITH_VALUE = ("--config", "--ledger-location")


def chosen_verb(argv: Sequence[str]) -> str | None:
    """The verb ``argv`` names (its first word that is not a top-level option), or ``None``."""
    words = iter(argv)
    for word in words:
        if word in TOP_OPTIONS_WITH_VALUE:
            next(words, None)
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(verbs: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every verb; only ``verbs`` (default: all) get their module's arguments.

    Every verb is listed with its help either way; a verb whose module is not imported has no
    arguments of its own (``main`` builds only the chosen verb's, so one command imports one
    verb module).
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS,
                        help="configuration file (default: ./offset-ledger.yaml or "
                             "$OFFSET_LEDGER_CONFIG)")
    common.add_argument("--ledger-location", default=argparse.SUPPRESS,
                        help="override ledger.location: schema or catalog.schema (identifiers) "
                        "is a catalog schema, anything else a path (relative to the "
                        "working directory)")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(prog="offset-ledger", parents=[common],
                                     description="Kafka replication with an exact offset "
                                                 "ledger in Delta Lake.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for verb, (module, help_text) in COMMANDS.items():
        epilog = f"example:\n  {EXAMPLES[verb]}\n\n{EXIT_CODES}" if verb in EXAMPLES else None
        p = sub.add_parser(verb, parents=[common], help=help_text, description=help_text,
                           epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(_module=module, _verb=verb, _parser=p)
        if verbs is not None and verb not in verbs:
            continue
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:  # an optional extra this installation lacks
            extra = extra_for(exc)
            if extra is None:
                raise
            missing = install_message(verb, extra, str(exc.name).split(".")[0])
            p.description = f"{help_text} ({missing})"
            p.set_defaults(_missing=missing)
            continue
        if hasattr(mod, "add_arguments"):
            try:
                mod.add_arguments(p, verb)
            except TypeError:
                mod.add_arguments(p)
    return parser


def _enable_faulthandler() -> None:
    """A native crash (librdkafka, the JVM bridge) prints where each Python thread was, so an
    rc -11 in a log says more than its number; skipped where stderr is no file (a notebook,
    a test's capture)."""
    try:
        faulthandler.enable(file=sys.stderr.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        pass


def main(argv: list[str] | None = None) -> int:
    stops.hold()  # a stop signal while the command starts is handed on, never lost
    try:
        _release_stop_signals()
        return _main(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:  # Ctrl-C in a verb without a handler of its own
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        stops.release()


def _release_stop_signals() -> None:
    """Deliver the SIGINT a supervised child held pending while it started
    (``pipelines.passes``): here, inside ``main``'s guard, it ends it without a traceback."""
    if settings.supervised_child():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _main(argv: list[str]) -> int:
    verb = chosen_verb(argv)
    parser = build_parser(() if verb is None else (verb,))
    args, extra = parser.parse_known_args(argv)
    verb_parser = getattr(args, "_parser", parser)
    missing = getattr(args, "_missing", None)
    if missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    if extra:  # reported with the subcommand's usage, not the top-level one
        verb_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "_verb", None) in FLOW_VERBS:
        _resolve_flow(args, verb_parser)
    args._argv = argv  # what a supervised job's child runs again (pipelines.passes)
    if getattr(args, "once", None) is not False:  # one-shot: its signals act as by default
        early = stops.release()
        if early is not None:
            print("interrupted", file=sys.stderr)
            return 128 + early
    _enable_faulthandler()
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = None
    try:
        config = load_config(getattr(args, "config", None))
        if getattr(args, "ledger_location", None):
            config = dataclasses.replace(
                config, ledger_location=resolve_location(args.ledger_location))
        _check_names(args, config)
        module = importlib.import_module(args._module)
        from pipelines.edge import kafka_admin

        with kafka_admin.clients():  # one admin client per cluster for the command, closed
            return int(module.run(args, config) or 0)
    except OffsetLedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ImportError as exc:  # a verb reached for an extra this installation lacks
        extra = extra_for(exc)
        if extra is None:
            raise
        print(f"error: {install_message(args._verb, extra, str(exc.name).split('.')[0])}",
              file=sys.stderr)
        return 2
    except Exception as exc:
        damage = _ledger_damage(exc, config)
        if damage is None:
            raise
        print(f"error: {damage}", file=sys.stderr)
        return damage.exit_code


def _ledger_damage(exc: BaseException, config: object) -> OffsetLedgerError | None:
    """A damaged-ledger error for a Spark failure that names a ledger table, else ``None``."""
    location = getattr(config, "ledger_location", None)
    if location is None:
        return None
    from ledger.tables import damage_from  # imports pyspark: only once a verb failed

    return damage_from(exc, location)


def job_main(verb: str, argv: list[str] | None = None) -> int:
    """What each job's ``main(argv=None)`` calls: the same verb as ``offset-ledger VERB``.

    ``argv`` defaults to ``sys.argv[1:]``, so one function serves the console script, the
    ``spark-submit pipelines/<job>/job.py ...`` file and a Databricks ``python_wheel_task``.
    """
    return main([verb, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
