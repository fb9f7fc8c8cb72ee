"""Pure DataFrame transforms of the replication job (no I/O, no session, no side effects).

Invariants:
    * :func:`kafka_records` keeps the Kafka source's partitioning and row order: it is a
      projection only, so each Spark partition still holds one topic-partition's records in
      offset order, which is what the sink relies on to produce in source order.
    * Timestamps are converted to epoch milliseconds exactly (Kafka timestamps are
      milliseconds; Spark keeps microseconds), so a copied record carries the same timestamp.
    * Headers travel as one JSON string per record (``null`` when a record has none), decoded
      by ``sink.decode_headers`` back to the same ordered ``(key, value)`` pairs: binary values
      are base64, a ``null`` value is an absent field. Spark's Arrow writer converts the
      connector's ``array<struct<key, value>>`` column three times slower than the rest of the
      record together, even when every array is empty; a string column costs almost nothing.

          headers  [{key: "h", value: 0xFF00}, {key: "n", value: null}]
          -> JSON  [{"key":"h","value":"/wA="},{"key":"n"}]
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
        # size() is -1 for null and 0 for empty: neither needs a JSON document.
        F.when(F.size("headers") > 0, F.to_json("headers")).alias("headers_json"),
        F.unix_millis(F.col("timestamp")).alias("timestamp_ms"),
    )
    assert tuple(out.columns) == RECORD_COLUMNS
    return out


def runs_per_partition(syncs: DataFrame) -> DataFrame:
    """``offset_syncs`` rows -> records and runs per (flow, topic, partition), for reports."""
    return (syncs.groupBy("flow", "topic", "replica_topic", "partition")
            .agg(F.sum("length").alias("records"), F.count("*").alias("runs"),
                 F.max(F.col("upstream_offset") + F.col("length")).alias("next_upstream_offset")))
