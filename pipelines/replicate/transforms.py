"""Pure DataFrame transforms of the replication job (no I/O, no session, no side effects).

Invariants:
    * :func:`kafka_records` keeps the Kafka source's partitioning and row order: it is a
      projection only, so each Spark partition still holds one topic-partition's records in
      offset order, which is what the sink relies on to produce in source order.
    * Timestamps are converted to epoch milliseconds exactly (Kafka timestamps are
      milliseconds; Spark keeps microseconds), so a copied record carries the same timestamp.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.replicate.sink import RECORD_COLUMNS


def kafka_records(source: DataFrame) -> DataFrame:
    """Kafka source rows -> the columns the sink produces, in :data:`RECORD_COLUMNS` order."""
    out = source.select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("key"),
        F.col("value"),
        F.col("headers"),
        F.unix_millis(F.col("timestamp")).alias("timestamp_ms"),
    )
    assert tuple(out.columns) == RECORD_COLUMNS
    return out


def runs_per_partition(syncs: DataFrame) -> DataFrame:
    """``offset_syncs`` rows -> records and runs per (flow, topic, partition), for reports."""
    return (syncs.groupBy("flow", "topic", "replica_topic", "partition")
            .agg(F.sum("length").alias("records"), F.count("*").alias("runs"),
                 F.max(F.col("upstream_offset") + F.col("length")).alias("next_upstream_offset")))
