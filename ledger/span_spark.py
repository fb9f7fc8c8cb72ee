"""The spans rule and a seek's read as Spark plans: what a Spark store load runs.

:func:`spans` is the Spark plan of :func:`ledger.spans.coalesce` over the current epoch, the
twin of :func:`ledger.span_sql.spans_sql` (the same steps as one DataFusion statement, for a
delta-rs load); :func:`recent` is :data:`ledger.span_seek.Reader` through Spark.

Invariants:
    * The same spans as :func:`ledger.spans.coalesce` over :func:`ledger.translation.
      current_epoch` of each partition's runs in write order (a property test compares them).
    * Only spans reach the driver: the runs stay in Spark.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from ledger.schemas import OFFSET_SYNCS
from ledger.span_snapshots import partition_filter

if TYPE_CHECKING:  # pyspark is imported where Spark reads: a delta-rs load never needs it
    from pyspark.sql import DataFrame

    from ledger.tables import Ledger

__all__ = ["recent", "spans"]


def recent(ledger: Ledger, flow: str, version: int, keys: set[tuple[str, int]],
            after: dt.datetime, until: dt.datetime) -> list[dict]:
    """A seek's read through Spark (:data:`ledger.span_seek.Reader`)."""
    from pyspark.sql import functions as F

    runs = ledger.read(OFFSET_SYNCS, version=version)
    return [r.asDict() for r in runs.where(
        (F.col("flow") == flow) & partition_filter(keys)
        & (F.col("written_at") > F.lit(after)) & (F.col("written_at") <= F.lit(until)))
        .select("topic", "partition", "upstream_offset", "downstream_offset", "length",
                "written_at", "batch_id").collect()]


def spans(runs: DataFrame) -> DataFrame:
    """The current epoch's spans of every (topic, partition) in ``runs`` (rows of offset_syncs).

    The same spans as :func:`ledger.spans.coalesce` on the current epoch, in Spark: the write
    order and the epoch starts (``LAG``), the last epoch kept; then for each run A the number of
    the epoch's upstream ends in ``(A.u, A.u + A.n]`` (a running count over the ends and the two
    bounds sorted together), and a gaps-and-islands: the next run continues A's span when it is
    contiguous on both sides and that count is 1 (A's own end: no rewind ends inside A). Columns:
    topic, partition, replica_topic, u, d, n and first_at (the span's first run's position
    among all of the partition's input rows: 1 when the epoch starts with the first row),
    ordered by topic, partition and write order.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    part = ("topic", "partition")
    order = Window.partitionBy(*part).orderBy("written_at", "batch_id", "d")
    upto = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    epoch = (runs.select(*part, "replica_topic", F.col("upstream_offset").alias("u"),
                         F.col("downstream_offset").alias("d"), F.col("length").alias("n"),
                         "written_at", "batch_id")
             .withColumn("at", F.row_number().over(order))
             .withColumn("start", F.coalesce(
                 (F.col("d") < F.lag(F.col("d") + F.col("n")).over(order)).cast("int"), F.lit(1)))
             .withColumn("epoch", F.sum("start").over(upto))
             .withColumn("last", F.max("epoch").over(Window.partitionBy(*part)))
             .where(F.col("epoch") == F.col("last"))
             .withColumn("rid", F.row_number().over(order))
             .drop("start", "epoch", "last", "written_at", "batch_id"))
    # kind 0: an upstream end, counted; kinds 1 and 2: the bounds A.u and A.e, which see every
    # end <= them (ends sort first at equal offsets). Every point carries its run, so the runs
    # come back by a group-by on the same partitioning: a single shuffle in all.
    end = F.col("u") + F.col("n")
    points = epoch.select("*", F.explode(F.array(*(
        F.struct(at.alias("at"), F.lit(kind).alias("kind"))
        for at, kind in ((end, 0), (F.col("u"), 1), (end, 2))))).alias("p"))
    ends_below = F.sum((F.col("p.kind") == 0).cast("long")).over(
        Window.partitionBy(*part).orderBy("p.at", "p.kind")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    inside = (points.withColumn("below", ends_below).where(F.col("p.kind") > 0)
              .groupBy(*part, "rid", "at", "u", "d", "n", "replica_topic")
              .agg(F.sum(F.when(F.col("p.kind") == 2, F.col("below"))
                         .otherwise(-F.col("below"))).alias("inside")))
    by_rid = Window.partitionBy(*part).orderBy("rid")
    continues = ((F.col("u") == F.lag(end).over(by_rid))
                 & (F.col("d") == F.lag(F.col("d") + F.col("n")).over(by_rid))
                 & (F.lag("inside").over(by_rid) == 1))
    islands = (inside
               .withColumn("new", F.when(F.coalesce(continues, F.lit(False)), 0).otherwise(1))
               .withColumn("span", F.sum("new").over(
                   by_rid.rowsBetween(Window.unboundedPreceding, Window.currentRow))))
    return (islands.groupBy(*part, "span")
            .agg(F.min("rid").alias("first"), F.min("at").alias("first_at"),
                 F.max_by("replica_topic", "rid").alias("replica_topic"),
                 F.min("u").alias("u"), F.min("d").alias("d"), F.sum("n").alias("n"))
            .orderBy(*part, "first")
            .select(*part, "replica_topic", "u", "d", "n", "first_at"))
