"""Every environment variable offset-ledger reads, one function each.

Invariants:
    * A variable is read when its function is called, never at import: a test, a bench run or a
      job that sets it before the call gets what it set.
    * An unset or empty variable means its default; a value that is not of the setting's type
      is a :class:`SettingError` naming the variable, never a silent default.
    * :data:`VARIABLES` lists every ``OFFSET_LEDGER_*`` variable (those only dbt or the bundle
      read included), :data:`RUNTIME_VARIABLES` the other tools' variables read here; every one
      is documented in docs/configuration.md (``tests/test_docs.py`` checks both that, and that no
      ``OFFSET_LEDGER_*`` name is used anywhere else without being listed here).
    * Cluster properties written ``${env:NAME}`` in the YAML name their own variables: they are
      resolved by ``ledger.config`` with the file, not here.
"""

from __future__ import annotations

import os
from pathlib import Path

from ledger.errors import OffsetLedgerError

CONFIG = "OFFSET_LEDGER_CONFIG"
JARS_DIR = "OFFSET_LEDGER_JARS_DIR"
SPARK_MASTER = "OFFSET_LEDGER_SPARK_MASTER"
DRIVER_MEMORY = "OFFSET_LEDGER_DRIVER_MEMORY"
SHUFFLE = "OFFSET_LEDGER_SHUFFLE"
SPARK_UI = "OFFSET_LEDGER_SPARK_UI"
SPARK_LOG_LEVEL = "OFFSET_LEDGER_SPARK_LOG_LEVEL"
STATE_DIR = "OFFSET_LEDGER_STATE_DIR"
AUDIT_DIR = "OFFSET_LEDGER_AUDIT_DIR"
SOURCE_SCHEMA = "OFFSET_LEDGER_SOURCE_SCHEMA"
DBT_SCHEMA = "OFFSET_LEDGER_DBT_SCHEMA"
BROKER_HEAP = "OFFSET_LEDGER_BROKER_HEAP"
BROKER_START_TIMEOUT = "OFFSET_LEDGER_BROKER_START_TIMEOUT"
MM2_PEER = "OFFSET_LEDGER_MM2_PEER"
TEST_KILLS = "OFFSET_LEDGER_TEST_KILLS"
SUPERVISED_CHILD = "OFFSET_LEDGER_SUPERVISED_CHILD"
# Set by the audit for dbt, read by the dbt project only (dbt/profiles.yml, the models).
DBT_LOCATION_ROOT = "OFFSET_LEDGER_DBT_LOCATION_ROOT"
DBT_TARGET = "OFFSET_LEDGER_DBT_TARGET"
DBT_THREADS = "OFFSET_LEDGER_DBT_THREADS"
# The Databricks bundle's per-alias credentials (OFFSET_LEDGER_P_SASL_USERNAME ...), which the
# YAML references as ${env:...}.
ALIAS_SECRETS = ("OFFSET_LEDGER_<ALIAS>_SASL_USERNAME", "OFFSET_LEDGER_<ALIAS>_SASL_PASSWORD")

VARIABLES = (CONFIG, JARS_DIR, SPARK_MASTER, DRIVER_MEMORY, SHUFFLE, SPARK_UI, SPARK_LOG_LEVEL,
             STATE_DIR, AUDIT_DIR, SOURCE_SCHEMA, DBT_SCHEMA, DBT_LOCATION_ROOT, DBT_TARGET,
             DBT_THREADS, BROKER_HEAP, BROKER_START_TIMEOUT, MM2_PEER, TEST_KILLS,
             SUPERVISED_CHILD)

# Other tools' variables: read to know where we run, never set by offset-ledger's users for it.
PYSPARK_GATEWAY_PORT = "PYSPARK_GATEWAY_PORT"
DATABRICKS_RUNTIME_VERSION = "DATABRICKS_RUNTIME_VERSION"
HADOOP_CONF_DIR = "HADOOP_CONF_DIR"
YARN_CONF_DIR = "YARN_CONF_DIR"
JAVA_HOME = "JAVA_HOME"
PYSPARK_PYTHON = "PYSPARK_PYTHON"
RUNTIME_VARIABLES = (PYSPARK_GATEWAY_PORT, DATABRICKS_RUNTIME_VERSION, HADOOP_CONF_DIR,
                     YARN_CONF_DIR, JAVA_HOME, PYSPARK_PYTHON)


class SettingError(OffsetLedgerError):
    """An environment variable holds a value of the wrong type."""


def _get(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _number(name: str, default: float, kind: type = float) -> float:
    value = _get(name)
    if value is None:
        return default
    try:
        number = kind(value)
    except ValueError:
        raise SettingError(f"${name} must be a {kind.__name__}, not {value!r}") from None
    if number <= 0:
        raise SettingError(f"${name} must be positive, not {value!r}")
    return number


# --- offset-ledger's own ---------------------------------------------------------------------


def config_path() -> str | None:
    """``$OFFSET_LEDGER_CONFIG``: the configuration file when ``--config`` is not given
    (``None``: ``./offset-ledger.yaml``)."""
    return _get(CONFIG)


def jars_dir() -> Path | None:
    """``$OFFSET_LEDGER_JARS_DIR``: folder with ``spark/`` (Delta jars), ``kafka/`` (embedded
    brokers) and, for ``bench``, ``mm2/`` (``None``: ``jars/`` of the source checkout)."""
    value = _get(JARS_DIR)
    return Path(value) if value else None


def spark_master() -> str:
    """``$OFFSET_LEDGER_SPARK_MASTER``: Spark master of a plain program; ``local[N]`` also sets
    the number of local copy workers. Default ``local[*]``."""
    return _get(SPARK_MASTER) or "local[*]"


def driver_memory() -> str:
    """``$OFFSET_LEDGER_DRIVER_MEMORY``: ``spark.driver.memory`` of a plain program. Default
    ``2g``."""
    return _get(DRIVER_MEMORY) or "2g"


def shuffle_partitions() -> int:
    """``$OFFSET_LEDGER_SHUFFLE``: ``spark.sql.shuffle.partitions`` of a plain program. Default
    4 (a small local machine: a handful beats Spark's 200)."""
    return int(_number(SHUFFLE, 4, int))


def spark_ui() -> bool:
    """``$OFFSET_LEDGER_SPARK_UI``: ``true`` turns a plain program's Spark UI on. Default off."""
    return (_get(SPARK_UI) or "false").lower() == "true"


def spark_log_level() -> str:
    """``$OFFSET_LEDGER_SPARK_LOG_LEVEL``: Spark's log level in a plain program. Default
    ``ERROR``."""
    return _get(SPARK_LOG_LEVEL) or "ERROR"


def state_dir() -> Path:
    """``$OFFSET_LEDGER_STATE_DIR``: folder of a plain program's Spark warehouse and Derby
    metastore. Default ``.state`` (of the working directory)."""
    return Path(_get(STATE_DIR) or ".state")


def audit_dir() -> str | None:
    """``$OFFSET_LEDGER_AUDIT_DIR``: shared folder for the audit's Delta marts, needed under
    spark-submit on a cluster (``None``: the driver's temporary folder)."""
    return _get(AUDIT_DIR)


def source_schema() -> str:
    """``$OFFSET_LEDGER_SOURCE_SCHEMA``: catalog schema a path ledger is registered under for
    dbt. Default ``offset_ledger``."""
    return _get(SOURCE_SCHEMA) or "offset_ledger"


def dbt_schema() -> str:
    """``$OFFSET_LEDGER_DBT_SCHEMA``: schema of the dbt marts. Default ``offset_ledger_dbt``
    (the same default as dbt/profiles.yml)."""
    return _get(DBT_SCHEMA) or "offset_ledger_dbt"


def broker_heap() -> str:
    """``$OFFSET_LEDGER_BROKER_HEAP``: heap of each embedded broker. Default ``512m``."""
    return _get(BROKER_HEAP) or "512m"


def broker_start_timeout() -> float:
    """``$OFFSET_LEDGER_BROKER_START_TIMEOUT``: seconds to wait for an embedded broker to
    answer. Default 90."""
    return _number(BROKER_START_TIMEOUT, 90.0)


def mm2_peer() -> Path | None:
    """``$OFFSET_LEDGER_MM2_PEER``: the MirrorMaker 2 installation ``bench`` compares against
    (``None``: ``shared/peers/mm2`` beside the checkout)."""
    value = _get(MM2_PEER)
    return Path(value) if value else None


def test_kills() -> int:
    """``$OFFSET_LEDGER_TEST_KILLS``: kills per mode of the replicator kill-loop test. Default
    3 (the torture soak, ``python -m bench.torture``, kills far more)."""
    return int(_number(TEST_KILLS, 3, int))


def supervised_child() -> bool:
    """``$OFFSET_LEDGER_SUPERVISED_CHILD``: set by a continuous pass job for the child process
    that runs its loop (``pipelines.passes.supervise``); never set by hand."""
    return (_get(SUPERVISED_CHILD) or "") == "1"


# Not a pytest test, whatever its name says.
test_kills.__test__ = False  # type: ignore[attr-defined]


# --- where we run (other tools' variables) ----------------------------------------------------


def on_databricks() -> bool:
    """``$DATABRICKS_RUNTIME_VERSION`` is set: a Databricks runtime (Delta built in, paths on
    DBFS)."""
    return _get(DATABRICKS_RUNTIME_VERSION) is not None


def under_launcher() -> bool:
    """Started by spark-submit (``$PYSPARK_GATEWAY_PORT``: its JVM is up) or on Databricks: the
    launcher's Spark configuration decides, never ours."""
    return _get(PYSPARK_GATEWAY_PORT) is not None or on_databricks()


def other_default_fs() -> bool:
    """A path without a scheme is resolved by Spark on another filesystem than the driver's disk
    (Databricks, or ``$HADOOP_CONF_DIR``/``$YARN_CONF_DIR`` pointing at a Hadoop cluster)."""
    return on_databricks() or any(_get(n) for n in (HADOOP_CONF_DIR, YARN_CONF_DIR))


def java_home() -> Path | None:
    """``$JAVA_HOME``: the JDK the embedded brokers run on (``None``: ``java`` on the PATH)."""
    value = _get(JAVA_HOME)
    return Path(value) if value else None


def pyspark_python() -> str | None:
    """``$PYSPARK_PYTHON``: the interpreter of Spark's Python workers, when set."""
    return _get(PYSPARK_PYTHON)
