"""Pure checkpoint and group-offset-sync decisions: no Spark, no Kafka, just records (a
store holding windows reads their history through its own ledger: ``OffsetSyncStore.deepen``).

Invariants:
    * A checkpoint (a :class:`ledger.records.CheckpointRecord`) is ``translated``
      (``target_offset`` set), ``untranslatable`` (``target_offset`` None, ``reason`` set) or
      ``held``.
    * Never backwards: when a translation would fall below the previous checkpoint of the same
      (group, direction, source topic, partition) while the group did not rewind (its committed
      offset did not decrease) and the replica was not truncated (the previous target is within
      the current epoch), the previous target offset is kept (``held``).
    * Group offset sync (MM2's rules): write only translated offsets, only for partitions the
      group committed on the source, and never below what the group already has on the target.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from ledger.records import CheckpointRecord
from ledger.store import OffsetSyncStore, Translated
from pipelines.checkpoint.mapping import FORWARD, TopicMapping


@dataclass(frozen=True)
class GroupCommit:
    """A committed offset observed in a group."""

    cluster: str
    group_id: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Previous:
    """The latest earlier checkpoint of a (group, direction, source topic, partition)."""

    source_offset: int
    target_offset: int | None


def compute_checkpoints(
    commits: list[GroupCommit],
    mappings: Mapping[str, TopicMapping],
    stores: Mapping[str, OffsetSyncStore],
    previous: Mapping[tuple[str, str, str, int], Previous],
    *,
    checkpoint_id: str,
    target_cluster: str,
    now: dt.datetime,
) -> list[CheckpointRecord]:
    """One checkpoint per commit on a mapped topic."""
    _read_below_windows(commits, mappings, stores)
    out = []
    for commit in sorted(commits, key=lambda c: (c.group_id, c.topic, c.partition)):
        mapping = mappings.get(commit.topic)
        if mapping is None:
            continue
        store = stores[mapping.sync_flow]
        translate = store.forward if mapping.direction == FORWARD else store.reverse
        result = translate(mapping.sync_topic, commit.partition, commit.offset)
        key = (commit.group_id, mapping.direction, commit.topic, commit.partition)
        prev = previous.get(key)
        rewound = prev is not None and commit.offset < prev.source_offset
        status, target, reason = result.status, result.offset, getattr(result, "reason", None)
        if (isinstance(result, Translated) and prev is not None and prev.target_offset is not None
                and result.offset < prev.target_offset and not rewound
                and prev.target_offset <= _epoch_end(store, mapping, commit.partition)):
            status, target = "held", prev.target_offset
            reason = (f"translation {result.offset} is below the previous checkpoint "
                      f"{prev.target_offset} and the group did not rewind")
        out.append(CheckpointRecord(
            checkpoint_id=checkpoint_id, flow=mapping.sync_flow, direction=mapping.direction,
            group_id=commit.group_id, source_cluster=commit.cluster, source_topic=commit.topic,
            partition=commit.partition, source_offset=commit.offset,
            target_cluster=target_cluster, target_topic=mapping.target_topic,
            target_offset=target, status=status, reason=reason, group_rewound=rewound,
            offset_syncs_version=store.version, checkpointed_at=now))
    return out


def _read_below_windows(commits: list[GroupCommit], mappings: Mapping[str, TopicMapping],
                        stores: Mapping[str, OffsetSyncStore]) -> None:
    """One history read per flow for every partition some commit lies below the window of
    (:meth:`ledger.store.OffsetSyncStore.deepen`, to the lowest such commit of each), not one
    per partition as translating would: hundreds of groups far behind on a thousand
    partitions is one read (or one seek, a slice of time at a time)."""
    below: dict[str, dict[tuple[str, int], tuple[int | None, int | None]]] = {}
    for commit in commits:
        mapping = mappings.get(commit.topic)
        if mapping is None:
            continue
        forward = mapping.direction == FORWARD
        side = "upstream" if forward else "downstream"
        if stores[mapping.sync_flow].below(mapping.sync_topic, commit.partition,
                                           **{side: commit.offset}):
            lowest = below.setdefault(mapping.sync_flow, {})
            key = (mapping.sync_topic, commit.partition)
            u, d = lowest.get(key, (None, None))
            lowest[key] = ((commit.offset if u is None else min(u, commit.offset), d) if forward
                           else (u, commit.offset if d is None else min(d, commit.offset)))
    for flow, lowest in below.items():
        stores[flow].deepen(lowest, lowest)


def _epoch_end(store: OffsetSyncStore, mapping: TopicMapping, partition: int) -> int:
    """The highest position of the current epoch on the side the checkpoint targets."""
    runs = store.runs.get((mapping.sync_topic, partition)) or []
    if mapping.direction == FORWARD:
        return max((r.downstream_end for r in runs), default=0)
    return max((r.upstream_end for r in runs), default=0)


@dataclass(frozen=True)
class OffsetWrite:
    """A decided write of ``offset`` into ``group_id`` on ``topic[partition]`` of the target.

    ``checkpoint`` is None when no translation stands behind the offset (a log start, or the
    latest offset of a cutoff under IdentityReplicationPolicy).
    """

    group_id: str
    topic: str
    partition: int
    offset: int
    previous_offset: int | None
    checkpoint: CheckpointRecord | None


def decide_offset_writes(
    checkpoints: list[CheckpointRecord],
    target_commits: Mapping[tuple[str, str, int], int],
) -> tuple[list[OffsetWrite], list[tuple[CheckpointRecord, str]]]:
    """MM2's sync rules over this pass's checkpoints.

    Args:
        checkpoints: from :func:`compute_checkpoints` (only committed partitions appear).
        target_commits: ``{(group, topic, partition): offset}`` the groups have on the target.

    Returns:
        The writes to make, and the skipped checkpoints with the reason.
    """
    writes, skipped = [], []
    for cp in checkpoints:
        if cp.target_offset is None:
            skipped.append((cp, f"untranslatable: {cp.reason}"))
            continue
        existing = target_commits.get((cp.group_id, cp.target_topic, cp.partition))
        if existing is not None and existing >= cp.target_offset:
            reason = ("already there" if existing == cp.target_offset
                      else f"never rewind: the group is at {existing} there")
            skipped.append((cp, reason))
            continue
        writes.append(OffsetWrite(cp.group_id, cp.target_topic, cp.partition,
                                  int(cp.target_offset), existing, cp))
    return writes, skipped
