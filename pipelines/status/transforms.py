"""Pure DataFrame transforms of ``status`` (no I/O, no session): bounded ledger views.

Invariants:
    * Every view is filtered first on the columns the ledger is laid out and Z-ordered by
      (``flow``; ``group_id`` with the clusters), so Delta skips files, and aggregated to a
      handful of rows per partition before anything reaches the driver.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def progress_view(progress: DataFrame, flows: Iterable[str]) -> DataFrame:
    """``replication_progress`` rows of ``flows`` (one per partition, read as
    ``ProgressRecord``s): where each partition got, and when."""
    return progress.where(F.col("flow").isin(sorted(set(flows))))


def newest_checkpoints(checkpoints: DataFrame, groups: Iterable[str],
                       pairs: Iterable[tuple[str, str]]) -> DataFrame:
    """Per group and (source cluster, target cluster): newest checkpoint time, partitions.

    ``pairs`` are the moves asked about; a checkpoint of a move ``S -> T`` has
    ``source_cluster = S`` and ``target_cluster = T`` whatever runs translated it.
    """
    pairs = sorted(set(pairs))
    wanted = F.lit(False)
    for source, target in pairs:
        wanted = wanted | ((F.col("source_cluster") == source)
                           & (F.col("target_cluster") == target))
    return (checkpoints.where(F.col("group_id").isin(sorted(set(groups))) & wanted)
            .groupBy("group_id", "source_cluster", "target_cluster")
            .agg(F.max("checkpointed_at").alias("newest"),
                 F.countDistinct("source_topic", "partition").alias("partitions")))


def last_operations(operations: DataFrame, groups: Iterable[str]) -> DataFrame:
    """Per group: the clusters of its newest completed failover/failback."""
    return (operations.where(F.col("group_id").isin(sorted(set(groups)))
                             & (F.col("status") == "completed"))
            .groupBy("group_id")
            .agg(F.max_by(F.struct("from_cluster", "to_cluster"), "started_at").alias("last")))
