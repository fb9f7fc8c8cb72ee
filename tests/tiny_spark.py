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

from pipelines.spark import LONG_LIVED_LEAN_JVM

TINY_DATA_CONF = {
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}

# The session's own local[2] SparkSession (not the deploy tests' cluster, whose executors
# must each get work): one task per shuffle, parallelize and Delta log replay, where the
# product's default of four split a few rows into four tasks each scheduled and written
# apart. make check's tier: 240 s -> 206 s. A test that counts the files a write leaves
# (file skipping) writes them under :func:`product_settings`.
ONE_TASK_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
}

# The session's reads and writes of its tiny tables, also the session's only:
# * No Delta data skipping: no PrepareDeltaScan, which plans each scan with a query over the
#   table's file statistics (a quarter of the session driver's CPU in a JFR profile), though
#   most of its file listing then happens at scan time. The scan's own filter keeps the same
#   rows, by Delta's contract. A test that counts the files a read skips reads under
#   :func:`product_settings`.
# * Hadoop's raw local file system: the checksummed one writes a ``.crc`` twin beside every
#   data and log file and, with no native Hadoop library, forks ``chmod`` for each file it
#   creates and ``readlink`` for each rename of a log commit; the raw one writes the same
#   files without the twins (half the forks). Delta's commit is the same check-then-rename.
# The whole suite, same machine and hour: 1,243.6 s and 1,944 CPU-s without these settings,
# 1,074.8 to 1,181.0 s and 1,515 to 1,737 CPU-s with them (docs/internals.md, Tests).
TINY_TABLE_CONF = {
    "spark.databricks.delta.stats.skipping": "false",
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
}

# The session SparkSession's JVM (tests/conftest.py): the C1 compiler only, with the code cache
# that the JVM's default tiers would reserve, and the serial collector.
# * C1 with 240 MB of code cache: C1 alone shrinks the cache to 48 MB, and a driver that runs
#   every Spark test of its worker fills it; its sweeper then flushes compiled code that is
#   interpreted and compiled again (63 CPU-s in the sweeper, 418 s for five Spark-heavy files).
#   With the cache C2 would have had, the same files took 289 s and 341 CPU-s, against 257 s and
#   373 CPU-s with all tiers, whose C2 compiler is a third of the driver's CPU: on 2 cores that
#   the whole suite keeps busy, CPU is what counts. The suite: 1,133.7 s and 2,123 CPU-s with all
#   tiers, 917.9 s and 1,614 CPU-s with this (same code, same hour; docs/internals.md, Tests).
# * The serial collector: on 2 cores shared by two such drivers, G1's concurrent threads and
#   write barriers cost more than the serial collector's pauses on a 2 GB heap: dbt, the
#   evidence audits and the span snapshots in one process (20 tests, the driver's threads read
#   from /proc) took 170 to 176 s and 219 to 232 driver CPU-s with G1 (13.8 to 24 of them G1's
#   own threads), 148 to 150 s and 181 CPU-s with the serial collector (7 in its pauses).
SESSION_JVM_OPTIONS = LONG_LIVED_LEAN_JVM


@contextlib.contextmanager
def product_settings(spark) -> Iterator[None]:
    """The product's own settings in the block, where the session's differ: ``ledger.settings``'
    shuffle partitions and ``pipelines.spark``'s parallelism for the driver's rows (a test that
    counts the files a write leaves), and Delta's data skipping (one that counts the files a
    read skips)."""
    import pytest
    from pyspark import SparkContext

    from ledger import settings
    from pipelines.spark import DEFAULT_PARALLELISM

    product = {"spark.sql.shuffle.partitions": str(settings.shuffle_partitions()),
               "spark.databricks.delta.stats.skipping": "true"}
    with _session_conf(spark, product), pytest.MonkeyPatch.context() as patch:
        # a static setting of the running context: PySpark's parallelize reads it here
        patch.setattr(SparkContext, "defaultParallelism",
                      property(lambda _: DEFAULT_PARALLELISM))
        yield


@contextlib.contextmanager
def compiled_queries(spark) -> Iterator[None]:
    """Spark's own query compilation in the block (whole-stage code and compiled expressions,
    :data:`TINY_DATA_CONF` turns them off): for a test whose tables hold a hundred thousand rows,
    where generated code pays for its compiling."""
    with _session_conf(spark, {"spark.sql.codegen.factoryMode": "FALLBACK",
                               "spark.sql.codegen.wholeStage": "true"}):
        yield


@contextlib.contextmanager
def _session_conf(spark, values: dict[str, str]) -> Iterator[None]:
    """The session's runtime SQL settings ``values`` in the block, the previous ones after."""
    saved = {key: spark.conf.get(key) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)
