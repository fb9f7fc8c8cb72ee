"""Spark settings for the suite's tiny tables, shared by the session's SparkSession
(``tests/conftest.py``) and the ``spark-submit`` applications of ``tests/deploy``.

The suite's tables hold a few rows: Spark spends more time generating and compiling Java code
for each query than running it. Interpreted expressions, no whole-stage code and no adaptive
re-planning cut a dbt build of the reference ledger from about 24 s to 16 s. The results are
the same by Spark's contract (its own suite runs both modes); the jobs, the demo and the
benchmarks keep Spark's defaults.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

TINY_DATA_CONF = {
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}

# The session's own local[2] SparkSession (not the deploy tests' cluster, whose executors
# must each get work): one task per shuffle, parallelize and Delta log replay, where the
# product's default of four split a few rows into four tasks each scheduled and written
# apart. make check's tier: 240 s -> 206 s. A test that counts the files a write leaves
# (file skipping) writes them under :func:`product_partitions`.
ONE_TASK_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
}

# The session SparkSession's JVM (tests/conftest.py): all of the JVM's compiler tiers (its
# default, spelled out so that a test can see the session's driver got its options).
SESSION_JVM_OPTIONS = "-XX:TieredStopAtLevel=4"


@contextlib.contextmanager
def product_partitions(spark) -> Iterator[None]:
    """The product's own task counts for the writes in the block (``ledger.settings``' shuffle
    partitions, ``pipelines.spark``'s parallelism for the driver's rows), instead of the
    session's one: what a test that counts the files a write leaves needs."""
    import pytest
    from pyspark import SparkContext

    from ledger import settings
    from pipelines.spark import DEFAULT_PARALLELISM

    key = "spark.sql.shuffle.partitions"
    saved = spark.conf.get(key)
    spark.conf.set(key, str(settings.shuffle_partitions()))
    with pytest.MonkeyPatch.context() as patch:
        # a static setting of the running context: PySpark's parallelize reads it here
        patch.setattr(SparkContext, "defaultParallelism",
                      property(lambda _: DEFAULT_PARALLELISM))
        try:
            yield
        finally:
            spark.conf.set(key, saved)
