"""Every environment variable offset-ledger reads, one function each.

Invariants:
    * A variable is read when its function is called, never at import: a test, a bench run or a
      job that sets it before the call gets what it set.
    * An unset or empty variable means its default; a value that is not of the setting's type
      is a :class:`SettingError` naming the variable, never a silent default.
    * :data:`VARIABLES` lists every ``OFFSET_LEDGER_*`` variable of the product (those only dbt
      or the bundle read included), :data:`RUNTIME_VARIABLES` the other tools' variables read
      here; the developer tools' knobs (embedded brokers, benchmarks, tests) live in
      ``pipelines.devtools.settings``. Every one is documented in docs/configuration.md
      (``tests/test_docs.py`` checks both that, and that no ``OFFSET_LEDGER_*`` name is used
      anywhere else without being listed in one of the two).
    * Cluster properties written ``${env:NAME}`` in the YAML name their own variables: they are
      resolved by ``ledger.config`` with the file, not here.
"""

from __future__ import annotations

import os
import re
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
SUPERVISED_CHILD = "OFFSET_LEDGER_SUPERVISED_CHILD"
JVM_ARCHIVES = "OFFSET_LEDGER_JVM_ARCHIVES"
JVM_OPTIONS = "OFFSET_LEDGER_JVM_OPTIONS"
# Set by the audit for dbt, read by the dbt project only (dbt/profiles.yml, the models).
DBT_LOCATION_ROOT = "OFFSET_LEDGER_DBT_LOCATION_ROOT"
DBT_TARGET = "OFFSET_LEDGER_DBT_TARGET"
DBT_THREADS = "OFFSET_LEDGER_DBT_THREADS"
# The Databricks bundle's per-alias credentials (OFFSET_LEDGER_P_SASL_USERNAME ...), which the
# YAML references as ${env:...}.
ALIAS_SECRETS = ("OFFSET_LEDGER_<ALIAS>_SASL_USERNAME", "OFFSET_LEDGER_<ALIAS>_SASL_PASSWORD")

VARIABLES = (CONFIG, JARS_DIR, SPARK_MASTER, DRIVER_MEMORY, SHUFFLE, SPARK_UI, SPARK_LOG_LEVEL,
             STATE_DIR, AUDIT_DIR, SOURCE_SCHEMA, DBT_SCHEMA, DBT_LOCATION_ROOT, DBT_TARGET,
             DBT_THREADS, SUPERVISED_CHILD, JVM_ARCHIVES, JVM_OPTIONS)

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


def get(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def number(name: str, default: float, kind: type = float) -> float:
    value = get(name)
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
    return get(CONFIG)


def jars_dir() -> Path | None:
    """``$OFFSET_LEDGER_JARS_DIR``: folder with ``spark/`` (Delta jars), ``kafka/`` (embedded
    brokers) and, for ``bench``, ``mm2/`` (``None``: ``jars/`` of the source checkout)."""
    value = get(JARS_DIR)
    return Path(value) if value else None


def spark_master() -> str:
    """``$OFFSET_LEDGER_SPARK_MASTER``: Spark master of a plain program; ``local[N]`` also sets
    the number of local copy workers. Default ``local[*]``."""
    return get(SPARK_MASTER) or "local[*]"


def driver_memory() -> str:
    """``$OFFSET_LEDGER_DRIVER_MEMORY``: ``spark.driver.memory`` of a plain program. Default
    ``2g``."""
    return get(DRIVER_MEMORY) or "2g"


def shuffle_partitions() -> int:
    """``$OFFSET_LEDGER_SHUFFLE``: ``spark.sql.shuffle.partitions`` of a plain program. Default
    4 (a small local machine: a handful beats Spark's 200)."""
    return int(number(SHUFFLE, 4, int))


def jvm_archives() -> bool:
    """``$OFFSET_LEDGER_JVM_ARCHIVES``: ``false`` starts the JVMs offset-ledger launches
    without their class-data archives (``pipelines.jvm_archive``). Default ``true``."""
    value = (get(JVM_ARCHIVES) or "true").lower()
    if value not in ("true", "false"):
        raise SettingError(f"${JVM_ARCHIVES} must be true or false, not {value!r}")
    return value == "true"


def jvm_options() -> list[str]:
    """``$OFFSET_LEDGER_JVM_OPTIONS``: options added to every JVM offset-ledger launches itself
    (a plain program's Spark driver, the embedded brokers), split as a shell splits them, e.g.
    ``-XX:TieredStopAtLevel=1``: short-lived JVMs on a small machine then spend about half the
    CPU (the test suite sets it). Default none; never applied under spark-submit or Databricks."""
    import shlex

    try:
        return shlex.split(get(JVM_OPTIONS) or "")
    except ValueError as exc:
        raise SettingError(f"${JVM_OPTIONS} must be options as a shell writes them: {exc}"
                           ) from None


_COLLECTOR = re.compile(r"-XX:\+Use\w+GC")


def chooses_collector(options: list[str]) -> bool:
    """Whether JVM options pick a garbage collector (``-XX:+Use...GC``)."""
    return any(_COLLECTOR.fullmatch(option) for option in options)


def jvm_options_over(defaults: list[str]) -> list[str]:
    """A launched JVM's ``defaults`` followed by :func:`jvm_options`, so that the user's word
    wins: the JVM takes the last of two ``-XX``/``-Xmx`` values, but refuses two collectors, so a
    collector chosen in ``$OFFSET_LEDGER_JVM_OPTIONS`` replaces the one in ``defaults``."""
    user = jvm_options()
    if chooses_collector(user):
        defaults = [option for option in defaults if not _COLLECTOR.fullmatch(option)]
    return [*defaults, *user]


def spark_ui() -> bool:
    """``$OFFSET_LEDGER_SPARK_UI``: ``true`` turns a plain program's Spark UI on. Default off."""
    return (get(SPARK_UI) or "false").lower() == "true"


def spark_log_level() -> str:
    """``$OFFSET_LEDGER_SPARK_LOG_LEVEL``: Spark's log level in a plain program. Default
    ``ERROR``."""
    return get(SPARK_LOG_LEVEL) or "ERROR"


def state_dir() -> Path:
    """``$OFFSET_LEDGER_STATE_DIR``: folder of a plain program's Spark warehouse and Derby
    metastore. Default ``.state`` (of the working directory)."""
    return Path(get(STATE_DIR) or ".state")


def audit_dir() -> str | None:
    """``$OFFSET_LEDGER_AUDIT_DIR``: shared folder for the audit's Delta marts, needed under
    spark-submit on a cluster (``None``: the driver's temporary folder)."""
    return get(AUDIT_DIR)


def source_schema() -> str:
    """``$OFFSET_LEDGER_SOURCE_SCHEMA``: catalog schema a path ledger is registered under for
    dbt. Default ``offset_ledger``."""
    return get(SOURCE_SCHEMA) or "offset_ledger"


def dbt_schema() -> str:
    """``$OFFSET_LEDGER_DBT_SCHEMA``: schema of the dbt marts. Default ``offset_ledger_dbt``
    (the same default as dbt/profiles.yml)."""
    return get(DBT_SCHEMA) or "offset_ledger_dbt"


def supervised_child() -> bool:
    """``$OFFSET_LEDGER_SUPERVISED_CHILD``: set by a continuous pass job for the child process
    that runs its loop (``pipelines.passes.supervise``); never set by hand."""
    return (get(SUPERVISED_CHILD) or "") == "1"


# --- where we run (other tools' variables) ----------------------------------------------------


def on_databricks() -> bool:
    """``$DATABRICKS_RUNTIME_VERSION`` is set: a Databricks runtime (Delta built in, paths on
    DBFS)."""
    return get(DATABRICKS_RUNTIME_VERSION) is not None


def under_launcher() -> bool:
    """Started by spark-submit (``$PYSPARK_GATEWAY_PORT``: its JVM is up) or on Databricks: the
    launcher's Spark configuration decides, never ours."""
    return get(PYSPARK_GATEWAY_PORT) is not None or on_databricks()


def other_default_fs() -> bool:
    """A path without a scheme is resolved by Spark on another filesystem than the driver's disk
    (Databricks, or ``$HADOOP_CONF_DIR``/``$YARN_CONF_DIR`` pointing at a Hadoop cluster)."""
    return on_databricks() or any(get(n) for n in (HADOOP_CONF_DIR, YARN_CONF_DIR))


def java_home() -> Path | None:
    """``$JAVA_HOME``: the JDK the embedded brokers run on (``None``: ``java`` on the PATH)."""
    value = get(JAVA_HOME)
    return Path(value) if value else None


def pyspark_python() -> str | None:
    """``$PYSPARK_PYTHON``: the interpreter of Spark's Python workers, when set."""
    return get(PYSPARK_PYTHON)
