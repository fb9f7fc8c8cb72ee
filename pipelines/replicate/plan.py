"""Batch planning: where each partition resumes, and the bounded ranges of the next batch.

Pure Python, no I/O: the driver gives it what the ledger recorded, the source's offsets and the
replica's end offsets, and gets back :class:`~pipelines.replicate.copy_task.CopyRange` lists.

Invariants:
    * A partition resumes where the recorded runs of its current epoch end (``u + n`` of its
      newest run). If the replica's end offset is below the newest run's downstream end, the
      replica was truncated or recreated: a new epoch starts and the partition resumes at the
      source's log start. A partition with no run resumes at the log start. A resume offset
      below the log start (retention deleted records) moves up to it.
    * A source partition that ends below where its recorded copy reached was deleted and
      recreated (or lost records): its runs no longer describe it and nothing is planned for
      it (:func:`sources_behind`; the replicator reports the topic). Offsets alone miss a
      recreated topic that already holds more records than were copied before.
    * A range never goes past the target offset given for its partition (the end offsets
      measured at the start of a ``--once`` pass, or the source's current last stable offset),
      and holds at most the per-partition record bound.
    * Ranges of one batch name distinct partitions, so one producer session per partition and
      batch keeps each partition's records in upstream order.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from pipelines.replicate.copy_task import CopyRange

TP = tuple[str, int]

DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
DEFAULT_MAX_BYTES_PER_PARTITION = 256 * 1024 * 1024


@dataclass(frozen=True)
class RecordedTail:
    """The newest recorded run of a partition: where upstream and downstream copying ended."""

    upstream_end: int
    downstream_end: int


def resume_offsets(partitions: list[TP], recorded: Mapping[TP, RecordedTail],
                   replica_ends: Mapping[TP, int], log_starts: Mapping[TP, int],
                   ) -> tuple[dict[TP, int], list[TP]]:
    """``({partition: next upstream offset}, [partitions whose replica starts a new epoch])``."""
    out: dict[TP, int] = {}
    new_epoch: list[TP] = []
    for tp in partitions:
        low = log_starts.get(tp, 0)
        tail = recorded.get(tp)
        if tail is None:
            out[tp] = low
        elif replica_ends.get(tp, 0) < tail.downstream_end:
            new_epoch.append(tp)
            out[tp] = low
        else:
            out[tp] = max(tail.upstream_end, low)
    return out, new_epoch


def sources_behind(positions: Mapping[TP, int], ends: Mapping[TP, int]) -> list[TP]:
    """Partitions whose source ends below the next offset to copy (recreated or truncated).

    ``positions`` never pass the end offsets measured before they were reached (ranges stop
    at their targets), and a partition's last stable offset never goes back; so an end below
    the position means the log itself went back. A partition without an end is not judged.
    """
    return sorted(tp for tp, position in positions.items()
                  if tp in ends and ends[tp] < position)


def per_partition_bound(max_records_per_batch: int | None, partitions: int) -> int:
    """Records per partition and batch: a share of the batch bound, or the default bound."""
    if not max_records_per_batch:
        return DEFAULT_MAX_RECORDS_PER_PARTITION
    return max(1, max_records_per_batch // max(1, partitions))


def plan_batch(positions: Mapping[TP, int], targets: Mapping[TP, int],
               replicas: Mapping[str, str], max_records_per_batch: int | None,
               ) -> list[CopyRange]:
    """The next batch: one range per partition still below its target, bounded."""
    behind = sorted(tp for tp, target in targets.items()
                    if tp in positions and positions[tp] < target)
    bound = per_partition_bound(max_records_per_batch, len(behind))
    return [CopyRange(t, replicas[t], p, positions[(t, p)],
                      min(targets[(t, p)], positions[(t, p)] + bound))
            for t, p in behind]


def group_for_tasks(ranges: list[CopyRange], tasks: int) -> list[list[CopyRange]]:
    """Split ranges into at most ``tasks`` groups of similar record counts (largest first)."""
    groups: list[list[CopyRange]] = [[] for _ in range(max(1, min(tasks, len(ranges))))]
    sizes = [0] * len(groups)
    for r in sorted(ranges, key=lambda r: r.end - r.start, reverse=True):
        i = sizes.index(min(sizes))
        groups[i].append(r)
        sizes[i] += r.end - r.start
    return [g for g in groups if g]


# A streaming task's fixed costs (its consumer's fetches, its producer's requests, exactly-once:
# a transaction per linger) do not grow with its partitions, and one task copies far more than
# a flow's usual rate (its copy loop: about 1.4 us a record), so a streaming flow starts one
# task per this many partitions; bulk copies (--once, a batch) use every slot instead.
STREAM_PARTITIONS_PER_TASK = 500


def task_count(partitions: int, slots: int, tasks_max: int | None, *,
               streaming: bool) -> int:
    """How many copy tasks share ``partitions``: ``tasks.max`` when set, else one per
    STREAM_PARTITIONS_PER_TASK (streaming) or one per slot (bulk); never more than the slots
    or the partitions, never fewer than one."""
    if tasks_max is not None:
        wanted = tasks_max
    elif streaming:
        wanted = -(-partitions // STREAM_PARTITIONS_PER_TASK)
    else:
        wanted = slots
    return max(1, min(wanted, slots, partitions))


def task_slots(master: str, default_parallelism: int) -> int:
    """How many copy tasks run at once: one group of ranges per slot, one wave per batch."""
    if master.startswith("local"):
        # local, local[N], local[*], local[N,F]: spark.default.parallelism may be set higher
        # (for shuffles), but only N tasks run at once.
        inner = master[len("local["):-1] if master.startswith("local[") else "1"
        n = inner.split(",")[0]
        return (os.cpu_count() or 1) if n == "*" else max(1, int(n))
    return max(1, default_parallelism)
