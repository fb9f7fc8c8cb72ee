"""Helpers the verbs' argument parsers and run functions share with the CLI.

Below every verb module and :mod:`pipelines.cli` (which wires the verbs up): a verb imports
these, never the CLI itself (only its ``main`` reaches ``pipelines.cli``, at call time).

Invariants:
    * No imports from the rest of ``pipelines``: a helper never pulls a verb in.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
from collections.abc import Callable
from typing import Any

from ledger.errors import OffsetLedgerError

# The optional extras of pyproject.toml and the top-level packages each brings. A bare
# `pip install offset-ledger` copies records (replicate with local workers on a path ledger,
# through delta-rs); a verb that needs a missing extra says which to install, never an
# ImportError traceback.
EXTRAS: dict[str, tuple[str, ...]] = {
    "local": ("pyspark", "delta"),            # Spark and Delta outside a Spark runtime
    "audit": ("dbt", "matplotlib", "jinja2"),  # dbt-core + dbt-spark, the report's charts
    "validate": ("great_expectations",),
}


def extra_for(exc: ImportError) -> str | None:
    """The extra that brings the module ``exc`` failed to import, if an extra brings it."""
    top = (exc.name or "").split(".")[0]
    return next((extra for extra, tops in EXTRAS.items() if top in tops), None)


def install_message(verb: str, extra: str, missing: str) -> str:
    return (f"offset-ledger {verb} needs {missing}, which this installation lacks: "
            f"pip install 'offset-ledger[{extra}]'")


class MissingExtraError(OffsetLedgerError):
    """A verb needs an optional extra this installation lacks (exit 2)."""


def require_extra(verb: str, extra: str) -> None:
    """Raise :class:`MissingExtraError` unless every package ``extra`` brings is installed.

    A verb calls it where it starts to need the extra (Spark, which a Spark runtime brings
    without the ``local`` extra, is checked where a session is built: ``pipelines.spark``).
    """
    absent = [top for top in EXTRAS[extra] if importlib.util.find_spec(top) is None]
    if absent:
        raise MissingExtraError(install_message(verb, extra, ", ".join(absent)))


def add_flow_arguments(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--flow 'S->T'`` and its equivalent ``--source S --target T`` (resolved in main)."""
    parser.add_argument("--flow", default=None, help=f"{help_text}, quoted: 'P->B'")
    parser.add_argument("--source", default=None, help="the flow's source alias (with --target)")
    parser.add_argument("--target", default=None, help="the flow's target alias (with --source)")


def add_startup_wait(parser: argparse.ArgumentParser, default: float) -> None:
    """``--startup-wait S``: how long a continuous job waits for a restarting cluster."""
    parser.add_argument(
        "--startup-wait", type=float, default=default, metavar="S",
        help="without --once: seconds to wait for a cluster that does not answer at the start "
             f"(a broker restarting while a supervisor restarts this job; default {default:g}); "
             "credentials, TLS and ACL errors fail at once")


def indented_json(value: Any, default: Any = None, depth: int = 0) -> str:
    """``value`` as indented JSON, with each object or list of plain values on one line (a
    partition, a commit, a translation). ``json.dumps(indent=2)`` runs Python's encoder over
    every value: for hundreds of groups a large part of a verb's time; here the C encoder
    writes the rows. ``default`` as ``json.dumps``'s."""
    line = _line_encoder(default)
    if _flat(value):
        return line(value)
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {indented_json(v, default, depth + 1)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    # The rows of a list (thousands in a status of hundreds of groups) are checked and encoded
    # here, without a call per row.
    items = [inner + (line(v) if _flat(v) else indented_json(v, default, depth + 1))
             for v in value]
    return "[\n" + ",\n".join(items) + f"\n{pad}]"


def _flat(value: Any) -> bool:
    """Not an object or list holding an object or list (one JSON line)."""
    if type(value) is dict:
        return _NESTED.isdisjoint(map(type, value.values()))
    if type(value) is list:
        return _NESTED.isdisjoint(map(type, value))
    if isinstance(value, dict | list):  # a subclass: the same, one value at a time
        values = value.values() if isinstance(value, dict) else value
        return not any(isinstance(v, dict | list) for v in values)
    return True


@functools.cache
def _line_encoder(default: Any) -> Callable[[Any], str]:
    """``json.dumps(value, default=default)`` of one row. ``JSONEncoder.encode`` builds a
    C encoder per call; one per row is a third of the rows' time: this one is built once."""
    encoder = json.JSONEncoder(default=default)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # not CPython's accelerated module: the encoder as it is
        return encoder.encode
    c_encode = make(None, encoder.default, json.encoder.encode_basestring_ascii, None,
                    encoder.key_separator, encoder.item_separator, False, False, True)

    def line(value: Any) -> str:
        return "".join(c_encode(value, 0))

    return line


_NESTED = frozenset({dict, list})


