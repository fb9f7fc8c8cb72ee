"""Failover with a cutoff (seed procedure "controlled failover with a cutoff").

The move happens at a quiet point: producers of the groups' topics have stopped, each group has
read everything, and replication covers the end offsets::

    producers stop  ->  end offsets still for --quiet seconds   (refused while they move)
    group drains    ->  committed == end, or only markers/aborted records in between
    consumers stop  ->  runs cover the end offsets              (readiness, like continuous)
    move            ->  translated offsets; under IdentityReplicationPolicy the latest ones

Invariants:
    * Reads only; the caller writes after every check passed.
    * "Lag 0" ignores transaction markers and aborted records (never consumable), and an
      uncommitted partition that holds committed records is lag, never skipped.
"""

from __future__ import annotations

import time

from ledger.config import ClusterConfig
from ledger.errors import OffsetLedgerError
from pipelines.edge import kafka_admin, kafka_offsets


class ProducersActiveError(OffsetLedgerError):
    """The groups' topics still receive records: a cutoff needs producers stopped."""


class GroupLagError(OffsetLedgerError):
    exit_code = 3


def partitions_of(cluster: ClusterConfig, topics: set[str]) -> list[tuple[str, int]]:
    existing = kafka_admin.list_topics(cluster)
    return [(t, p) for t in sorted(topics) if t in existing for p in range(existing[t])]


def check_producers_stopped(cluster: ClusterConfig, partitions: list[tuple[str, int]],
                            quiet_s: float) -> dict[tuple[str, int], int]:
    """End offsets that did not move for ``quiet_s`` seconds; raise if any moved."""
    before = kafka_offsets.list_offsets(cluster, "latest", partitions)
    time.sleep(quiet_s)  # the observation window itself: end offsets must stay still over it
    after = kafka_offsets.list_offsets(cluster, "latest", partitions)
    moved = {tp: after[tp] - before[tp] for tp in after if after[tp] != before.get(tp)}
    if moved:
        topics = sorted({t for t, _ in moved})
        raise ProducersActiveError(
            f"producers still write to {cluster.alias} ({', '.join(topics)}: "
            f"{sum(moved.values())} record(s) in {quiet_s:g}s); a cutoff failover needs them "
            "stopped first, or fail over without --cutoff (continuous: producers move later)")
    return after


def group_lag(cluster: ClusterConfig, group: str,
              ends: dict[tuple[str, int], int]) -> dict[tuple[str, int], tuple[int, int]]:
    """``{(topic, p): (committed, end)}`` for partitions where ``group`` has unread records."""
    committed = kafka_offsets.list_offsets(cluster, "committed", group=group)
    lows = kafka_offsets.list_offsets(cluster, "earliest", ends)
    spans = {tp: (committed.get(tp, lows.get(tp, 0)), end) for tp, end in ends.items()}
    found = kafka_admin.committed_records_between(cluster, spans)
    return {tp: spans[tp] for tp, has in found.items() if has is not False}


def wait_for_groups_to_drain(cluster: ClusterConfig, groups: list[str],
                             ends: dict[tuple[str, int], int], timeout: float) -> None:
    """Block until every group has read everything up to ``ends``; GroupLagError after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        lagging = {g: lag for g in groups if (lag := group_lag(cluster, g, ends))}
        if not lagging:
            return
        if time.monotonic() > deadline:
            detail = "; ".join(
                f"{g}: " + ", ".join(f"{t}[{p}] at {c}/{e}" for (t, p), (c, e) in
                                     sorted(lag.items())[:4])
                for g, lag in sorted(lagging.items()))
            raise GroupLagError(
                f"a cutoff needs every group to have read everything on {cluster.alias}; "
                f"within {timeout:.0f}s not yet: {detail}. Let the consumers finish, or fail "
                "over without --cutoff")
        time.sleep(0.5)  # polling the groups' commits for a condition, with a deadline
