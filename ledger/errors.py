"""The project's error hierarchy: what the CLI turns into ``error: ...`` and a non-zero exit.

Invariants:
    * Every expected failure (bad input, missing ledger, unreachable cluster, an offset that
      cannot be translated) is an :class:`OffsetLedgerError`; anything else is a bug and keeps
      its traceback.
    * Messages never contain secret values (see :func:`ledger.config.redact`).
"""

from __future__ import annotations


class OffsetLedgerError(Exception):
    """An expected failure with a message meant for the user."""

    exit_code = 2
