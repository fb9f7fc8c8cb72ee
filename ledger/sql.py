"""SQL literals both ledger engines (delta-rs's DataFusion and Spark) read alike.

Invariants:
    * Every value put into a ledger query goes through one of these: strings quoted and
      escaped, braces escaped for the ``str.format`` templates of ``LedgerEngine.query``,
      timestamps with an explicit zone (no session time zone changes them).
    * No imports from the rest of the project but ``ledger.clock``: the engine, the store and
      the verbs all use it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from ledger.clock import aware

__all__ = ["literal", "literals", "quoted", "timestamp"]


def quoted(value: str) -> str:
    """A SQL string literal (quotes doubled), for SQL that is not a ``str.format`` template."""
    return "'" + str(value).replace("'", "''") + "'"


def literal(value: str) -> str:
    """A SQL string literal both engines read alike, for :meth:`LedgerEngine.query` (whose
    SQL is a ``str.format`` template: braces in the value are escaped)."""
    return quoted(value).replace("{", "{{").replace("}", "}}")


def literals(values: Iterable[str]) -> str:
    """``('a', 'b')`` for ``IN``; ``(NULL)`` (matches nothing) when empty."""
    items = sorted(set(values))
    return "(" + (", ".join(literal(v) for v in items) if items else "NULL") + ")"


def timestamp(value: dt.datetime) -> str:
    """A timestamp literal with an explicit zone: no session time zone changes it. A naive
    datetime is local time, as Spark reads a Python datetime (``ledger.clock``)."""
    utc = aware(value)
    return f"TIMESTAMP '{utc:%Y-%m-%d %H:%M:%S.%f}Z'"
