"""The product's one clock and its one rule for the times it reads back.

Invariants:
    * Every time the product creates or compares is an aware UTC datetime: "now" is
      :func:`now`, a Kafka or heartbeat timestamp in milliseconds is :func:`from_ms`.
      No naive UTC datetime is ever made (``datetime.utcnow()``, ``now(UTC).replace(tzinfo=None)``):
      Spark's ``createDataFrame``, delta-rs commits (``ledger.commits``) and the SQL literals
      (``ledger.sql.timestamp``) all read a naive datetime as local time, so a naive UTC time
      is off by the machine's UTC offset wherever that is not zero.
    * A naive datetime is local time: what PySpark's ``collect()`` returns for a ``TIMESTAMP``
      (and ``ledger.engine.LedgerEngine.query`` returns, as Spark does). A row's time is made
      aware with :func:`aware` where the product computes with it (an age, a window, a
      comparison with :func:`now`); :func:`local_naive` is the opposite, for the engine that
      answers as Spark does.
    * No imports from the rest of the project: every layer uses it.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import overload

__all__ = ["aware", "from_ms", "local_naive", "local_naive_converter", "now"]


def now() -> dt.datetime:
    """The current time, aware, in UTC."""
    return dt.datetime.now(dt.UTC)


@overload
def aware(value: dt.datetime) -> dt.datetime: ...
@overload
def aware(value: None) -> None: ...
def aware(value: dt.datetime | None) -> dt.datetime | None:
    """``value`` as an aware UTC datetime (None stays None). A naive ``value`` is local time,
    as PySpark's ``collect()`` and ``createDataFrame`` read it; an aware one keeps its
    instant."""
    return None if value is None else value.astimezone(dt.UTC)


def local_naive(value: dt.datetime) -> dt.datetime:
    """``value`` as the naive local time PySpark's ``collect()`` would give for its instant
    (a naive ``value`` is already local time and is returned as is)."""
    return value if value.tzinfo is None else value.astimezone().replace(tzinfo=None)


def _utc_naive(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is None else value.astimezone(dt.UTC).replace(tzinfo=None)


def local_naive_converter() -> Callable[[dt.datetime], dt.datetime]:
    """:func:`local_naive` for many values at once, taken when they are converted (the zone
    can change, ``time.tzset``): where local time is UTC all year (servers, Databricks), a
    function without the per-value zone lookup of ``astimezone()`` (half its cost)."""
    return _utc_naive if time.timezone == 0 and not time.daylight else local_naive


def from_ms(ms: int | float) -> dt.datetime:
    """A Unix time in milliseconds (a Kafka record's or heartbeat's timestamp) as an aware
    UTC datetime."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
