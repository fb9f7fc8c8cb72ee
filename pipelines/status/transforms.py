"""The bounded ledger reads of ``status``, as SQL both ledger engines run (``ledger.engine``).

Invariants:
    * Every query is filtered first on the columns the ledger is laid out and Z-ordered by
      (``group_id`` with the clusters, the time column), so Delta skips files, and aggregated
      to a handful of rows per group before anything reaches the driver.
    * Pure text: no session, no I/O; the tables are ``{c}`` (checkpoints) and ``{o}``
      (operations) for :meth:`ledger.engine.LedgerEngine.query`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from ledger.engine import literal, literals, timestamp


def newest_checkpoints(groups: Iterable[str], pairs: Iterable[tuple[str, str]],
                       since: dt.datetime) -> str:
    """Per group and (source cluster, target cluster): newest checkpoint time (``newest``) and
    the number of partitions checkpointed (``partitions``), among checkpoints since ``since``.

    ``pairs`` are the moves asked about; a checkpoint of a move ``S -> T`` has
    ``source_cluster = S`` and ``target_cluster = T`` whatever runs translated it.
    """
    wanted = " OR ".join(f"(source_cluster = {literal(s)} AND target_cluster = {literal(t)})"
                         for s, t in sorted(set(pairs))) or "FALSE"
    return f"""
        SELECT group_id, source_cluster, target_cluster, max(newest) AS newest,
               count(*) AS partitions
        FROM (SELECT group_id, source_cluster, target_cluster, source_topic, {{partition}},
                     max(checkpointed_at) AS newest
              FROM {{c}}
              WHERE checkpointed_at >= {timestamp(since)} AND group_id IN {literals(groups)}
                AND ({wanted})
              GROUP BY group_id, source_cluster, target_cluster, source_topic, {{partition}})
             AS per_partition
        GROUP BY group_id, source_cluster, target_cluster"""


def last_operations(groups: Iterable[str]) -> str:
    """Per group: ``from_cluster`` and ``to_cluster`` of its newest completed operation."""
    return f"""
        SELECT group_id, from_cluster, to_cluster
        FROM (SELECT group_id, from_cluster, to_cluster,
                     ROW_NUMBER() OVER (PARTITION BY group_id
                                        ORDER BY started_at DESC NULLS LAST) AS newest
              FROM {{o}}
              WHERE group_id IN {literals(groups)} AND status = 'completed') AS ranked
        WHERE newest = 1"""
