"""The one place a SparkSession is built.

Invariants:
    * When a session already exists (Databricks, ``spark-submit``, a test fixture) it is used
      as is: the runtime provides Delta and the Kafka connector there.
    * Otherwise a ``local[*]`` session is built with the Delta SQL extension and catalog and the
      jars that ``make setup`` fetched with Maven into ``jars/spark``: nothing is downloaded when
      a job starts.
    * Nothing here runs at import time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from ledger.errors import OffsetLedgerError

JARS_ENV_VAR = "OFFSET_LEDGER_JARS_DIR"
REPO_ROOT = Path(__file__).resolve().parents[1]


class SparkSetupError(OffsetLedgerError):
    """The local Spark session cannot be built (jars missing)."""


def jars_dir(kind: str) -> Path:
    """``jars/<kind>`` of the checkout, or ``$OFFSET_LEDGER_JARS_DIR/<kind>``."""
    base = Path(os.environ.get(JARS_ENV_VAR, REPO_ROOT / "jars"))
    return base / kind


def spark_jars() -> list[str]:
    folder = jars_dir("spark")
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    needed = ("delta-spark", "delta-storage", "spark-sql-kafka", "kafka-clients")
    missing = [n for n in needed if not any(Path(j).name.startswith(n) for j in jars)]
    if missing:
        raise SparkSetupError(
            f"Spark jars missing in {folder}: {', '.join(missing)} (run `make setup`, which "
            f"fetches them with Maven, or set ${JARS_ENV_VAR})")
    return jars


def get_spark(app_name: str = "offset-ledger", *, master: str | None = None,
              ui: bool | None = None, extra_conf: dict[str, str] | None = None) -> SparkSession:
    """The active SparkSession, or a new local one with Delta and the Kafka connector."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    master = master or os.environ.get("OFFSET_LEDGER_SPARK_MASTER", "local[*]")
    if ui is None:
        ui = os.environ.get("OFFSET_LEDGER_SPARK_UI", "false").lower() == "true"
    state = Path(os.environ.get("OFFSET_LEDGER_STATE_DIR", ".state")).resolve()
    # Loopback only: the machine's other interfaces are not ours to listen on.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Local Python workers must run this interpreter (it has confluent-kafka), not PATH's.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log4j = Path(__file__).with_name("log4j2-spark.properties")
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.jars", ",".join(spark_jars()))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog",
                "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.ui.enabled", str(ui).lower())
        .config("spark.ui.showConsoleProgress", "false")
        # Small local machines: a handful of shuffle partitions beats the default 200.
        .config("spark.sql.shuffle.partitions", os.environ.get("OFFSET_LEDGER_SHUFFLE", "4"))
        .config("spark.default.parallelism", "4")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.sql.warehouse.dir", str(state / "warehouse"))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions",
                f"-Dderby.system.home={state / 'derby'} -Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("OFFSET_LEDGER_DRIVER_MEMORY", "2g"))
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("OFFSET_LEDGER_SPARK_LOG_LEVEL", "ERROR"))
    return spark
