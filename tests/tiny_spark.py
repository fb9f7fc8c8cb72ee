"""Spark settings for the suite's tiny tables, shared by the session's SparkSession
(``tests/conftest.py``) and the ``spark-submit`` applications of ``tests/deploy``.

The suite's tables hold a few rows: Spark spends more time generating and compiling Java code
for each query than running it. Interpreted expressions, no whole-stage code and no adaptive
re-planning cut a dbt build of the reference ledger from about 24 s to 16 s. The results are
the same by Spark's contract (its own suite runs both modes); the jobs, the demo and the
benchmarks keep Spark's defaults.
"""

import contextlib
from collections.abc import Iterator

TINY_DATA_CONF = {
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}
SPARK_DEFAULTS = {
    "spark.sql.codegen.factoryMode": "FALLBACK",
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.adaptive.enabled": "true",
}
"""Spark's own values of :data:`TINY_DATA_CONF`'s keys."""


@contextlib.contextmanager
def spark_defaults(spark) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Spark's own settings for :data:`TINY_DATA_CONF`'s keys while a test's data is not tiny
    (``bench.ledger_year``'s 100,000 runs: compiled queries take 20 % less there), then the
    session's settings again. All three are runtime SQL settings."""
    previous = {key: spark.conf.get(key, None) for key in TINY_DATA_CONF}
    for key, value in SPARK_DEFAULTS.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
