"""What a checkpoint pass records, and the reads of "the latest per key" that stay cheap.

A checkpoint job runs every minute for months. Appending every group partition on every pass
would make ``checkpoints`` and ``group_offsets`` grow with time even when nothing moves, and
every read of "the latest checkpoint" would scan that history. Instead::

    time ------------------------------------------------------------------------->
    key k   x(10) . . . . . . x(12) . . . . . . . . . . . . x(12) . . . x(15)
            ^ changed          ^ changed                    ^ refresh  ^ changed
                                                 |<-- window: refresh + slack -->| now

Invariants:
    * A pass appends a checkpoint (group commit) only when it differs from the latest record of
      its key, or that record is older than ``ledger.history.refresh.hours``, or the pass is part
      of a failover/failback (``complete``): an operation's evidence is never partial.
    * So while a checkpoint job runs, the latest record of every key it observes is younger than
      the refresh, and "the latest per key" reads only the window ``[now - refresh - slack,
      now]``: a filter on the time column that Delta's data skipping turns into the few newest
      files (``ledger maintain`` clusters these two tables by time).
    * A key with no record inside the window (the job was stopped longer than the refresh) has
      no previous record: the pass records it again. The "never backwards" hold of
      :mod:`pipelines.checkpoint.compute` then does not apply once: a checkpoint may go lower
      (a re-read), never higher than the rule allows (never a skip).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter, itemgetter
from typing import Any, TypeVar

from ledger import clock

SLACK = dt.timedelta(hours=1)
"""Margin on top of the refresh: a pass may run late; a record at the window's edge still counts."""

CHECKPOINT_KEY = ("group_id", "direction", "source_topic", "partition")
CHECKPOINT_VALUE = ("source_offset", "target_offset", "status", "target_topic")
COMMIT_KEY = ("cluster", "group_id", "topic", "partition")
COMMIT_VALUE = ("committed_offset", "group_state")

# Checkpoints are ``CheckpointRecord``s, observed commits ``group_offsets`` rows (dicts).
checkpoint_key, checkpoint_value = attrgetter(*CHECKPOINT_KEY), attrgetter(*CHECKPOINT_VALUE)
checkpoint_at = attrgetter("checkpointed_at")
commit_key, commit_value = itemgetter(*COMMIT_KEY), itemgetter(*COMMIT_VALUE)
commit_at = itemgetter("observed_at")

T = TypeVar("T")


def window_start(now: dt.datetime, refresh_hours: int) -> dt.datetime:
    """The oldest time a "latest per key" read looks at."""
    return now - dt.timedelta(hours=refresh_hours) - SLACK


def latest_sql(table: str, key: Sequence[str], at: str, since: dt.datetime | None,
               where: str, columns: Sequence[str] = ()) -> str:
    """SQL (for ``ledger.engine.LedgerEngine.query``, the table as ``{table}``) of the newest
    row per ``key`` among the rows matching ``where`` at or after ``since`` (all when None):
    every column, or only ``columns``."""
    from ledger.engine import timestamp

    if since is not None:
        where = f"({where}) AND {at} >= {timestamp(since)}"

    def names(cols: Sequence[str]) -> str:
        return ", ".join("{partition}" if k == "partition" else k for k in cols)

    keys = names(key)
    picked = names(columns) if columns else "*"
    return (f"SELECT * FROM (SELECT {picked}, ROW_NUMBER() OVER (PARTITION BY {keys} "
            f"ORDER BY {at} DESC NULLS LAST) AS _rank FROM {{{table}}} WHERE {where}) AS newest "
            "WHERE _rank = 1")


def rows_of(found: Iterable[dict]) -> list[dict]:
    """The rows of a :func:`latest_sql` answer without its rank column."""
    return [{k: v for k, v in r.items() if k != "_rank"} for r in found]


def to_record(rows: Iterable[T], latest_rows: Mapping[tuple, T], *, key: Callable[[T], Any],
              value: Callable[[T], Any], at: Callable[[T], dt.datetime | None],
              now: dt.datetime, refresh_hours: int, complete: bool) -> list[T]:
    """The rows a pass appends: changed, due for a refresh, or all of them when ``complete``.

    Args:
        rows: what the pass observed or computed.
        latest_rows: the latest recorded row per ``key`` (inside the window).
        key, value: a row's key, and the part of it whose change is recorded.
        at: the time a recorded row was recorded (a naive one is local time, as a Spark row's:
            ``ledger.clock.aware``).
        now: the pass's time.
        refresh_hours: a key is recorded again once its latest record is this old.
        complete: record every row (a failover or failback pass).
    """
    rows = list(rows)
    if complete:
        return rows
    refresh = dt.timedelta(hours=refresh_hours)
    now = clock.aware(now)
    out = []
    for row in rows:
        before = latest_rows.get(key(row))
        if (before is None or value(row) != value(before)
                or at(before) is None or now - clock.aware(at(before)) >= refresh):
            out.append(row)
    return out


def by_key(rows: Iterable[T], key: Callable[[T], Any]) -> dict[Any, T]:
    return {key(r): r for r in rows}
