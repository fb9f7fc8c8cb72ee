"""Pure DataFrame transforms of the replication job (no I/O, no session, no side effects).

Record bytes never become Spark rows (``copy`` moves them with librdkafka on the executors);
what is left here reads the ledger's runs for reports.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def runs_per_partition(syncs: DataFrame) -> DataFrame:
    """``offset_syncs`` rows -> records and runs per (flow, topic, partition), for reports."""
    return (syncs.groupBy("flow", "topic", "replica_topic", "partition")
            .agg(F.sum("length").alias("records"), F.count("*").alias("runs"),
                 F.max(F.col("upstream_offset") + F.col("length")).alias("next_upstream_offset")))
