"""The project's error hierarchy: what the CLI turns into ``error: ...`` and a non-zero exit.

Invariants:
    * Every expected failure (bad input, missing ledger, unreachable cluster, an offset that
      cannot be translated) is an :class:`OffsetLedgerError`; anything else is a bug and keeps
      its traceback.
    * Messages never contain secret values (see :func:`ledger.config.redact`).
"""

from __future__ import annotations


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (a JVM's or a library's run on for pages),
    cut at ``limit`` characters; the exception's type if it has no message."""
    text = str(exc).strip().splitlines()
    return text[0][:limit] if text else type(exc).__name__


class OffsetLedgerError(Exception):
    """An expected failure with a message meant for the user."""

    exit_code = 2
