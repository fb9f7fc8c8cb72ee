"""Spark settings for the suite's tiny tables, shared by the session's SparkSession
(``tests/conftest.py``) and the ``spark-submit`` applications of ``tests/deploy``.

The suite's tables hold a few rows: Spark spends more time generating and compiling Java code
for each query than running it. Interpreted expressions, no whole-stage code and no adaptive
re-planning cut a dbt build of the reference ledger from about 24 s to 16 s. The results are
the same by Spark's contract (its own suite runs both modes); the jobs, the demo and the
benchmarks keep Spark's defaults.
"""

TINY_DATA_CONF = {
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}

# The session SparkSession's JVM (tests/conftest.py): all of the JVM's compiler tiers (its
# default, spelled out so that a test can see the session's driver got its options).
SESSION_JVM_OPTIONS = "-XX:TieredStopAtLevel=4"
