"""The one place a SparkSession is built.

Invariants:
    * Whatever the runtime configured wins. An active session (Databricks, a notebook, a test
      fixture) is used as is. Under ``spark-submit`` (the launcher's JVM is already there:
      ``PYSPARK_GATEWAY_PORT``) or on Databricks, the session is built from the launcher's
      configuration (master, memory, jars or packages, log settings), adding only the Delta SQL
      extension and catalog when they are not configured yet. Delta's classes must be loadable
      there (``--packages io.delta:delta-spark_2.13:<v>`` or ``--jars``): otherwise a clear
      error, never a silent local session.
    * Only a plain program (``offset-ledger ...``, ``python job.py``) falls back to a
      ``local[*]`` session (``OFFSET_LEDGER_SPARK_MASTER`` overrides the master) with the jars
      of ``$OFFSET_LEDGER_JARS_DIR/spark`` (default: ``jars/spark`` of the source checkout, which
      ``make setup`` fills with Maven): nothing is downloaded when a job starts. Only the Delta
      jars are required there; any other jar in the folder is added too. Its driver JVM maps
      the class-data archive of ``jars/cds`` when one matches (``pipelines.jvm_archive``).
    * The running Spark must be inside :data:`SUPPORTED_SPARK` (the ``local`` extra of
      ``pyproject.toml`` declares the same range): otherwise :class:`SparkSetupError` (exit 2).
    * Files read at run time (the log4j configuration) come from the package with
      ``importlib.resources``, never from the checkout. Nothing here runs at import time.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ledger import settings
from ledger.errors import OffsetLedgerError
from pipelines import jvm_archive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ledger.engine import LedgerEngine

JARS_ENV_VAR = settings.JARS_DIR
CHECKOUT_ROOT = Path(__file__).resolve().parents[1]
# [min, max) of the Spark (and delta-spark) versions this release supports: keep in step with
# the `local` extra in pyproject.toml.
SUPPORTED_SPARK = ((4, 0), (4, 1))
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# A plain program's tasks per local dataset (a few ledger rows): the driver's rows become this
# many partitions, and so files.
DEFAULT_PARALLELISM = 4
REQUIRED_LOCAL_JARS = ("delta-spark", "delta-storage")
# JVM options of a local driver (never applied under spark-submit or on Databricks). The quick
# compiler (C1) and the serial collector: a driver that plans and writes small commits on a small
# machine spends about half the CPU of the default tiers and G1. LEAN_JVM suits a JVM that lives
# a minute or two. A driver that lives longer also needs the code cache the default tiers reserve
# (240 MB): C1 alone reserves 48 MB, which a streaming `replicate` driver filled within four
# minutes (`jcmd <pid> Compiler.codecache`: full_count=1, compilation stopped once; it then used
# 60 MB), and which the test suite's session drivers filled and thrashed.
LEAN_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
LONG_LIVED_LEAN_JVM = f"{LEAN_JVM} -XX:ReservedCodeCacheSize=240m"


class SparkSetupError(OffsetLedgerError):
    """No usable Spark: jars or Delta missing, or a Spark version outside the supported range."""


def jars_dir(kind: str) -> Path:
    """``$OFFSET_LEDGER_JARS_DIR/<kind>``, or ``jars/<kind>`` of the source checkout."""
    return (settings.jars_dir() or CHECKOUT_ROOT / "jars") / kind


def spark_jars() -> list[str]:
    """Every jar of the local jars folder; the Delta jars must be among them."""
    folder = jars_dir("spark")
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    missing = [n for n in REQUIRED_LOCAL_JARS if not any(Path(j).name.startswith(n) for j in jars)]
    if missing:
        raise SparkSetupError(
            f"Spark jars missing in {folder}: {', '.join(missing)} (set ${JARS_ENV_VAR} to a "
            f"folder holding spark/<jar>, run `make setup` in a checkout, or run under "
            f"spark-submit with --packages io.delta:delta-spark_2.13:4.0.1)")
    return jars


def _version_tuple(version: str) -> tuple[int, int]:
    parts = [*version.split("-")[0].split("."), "0"][:2]
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        raise SparkSetupError(f"cannot read the Spark version {version!r}") from None


def check_version(what: str, version: str) -> None:
    """Raise :class:`SparkSetupError` when ``version`` is outside :data:`SUPPORTED_SPARK`."""
    low, high = SUPPORTED_SPARK
    if not low <= _version_tuple(version) < high:
        raise SparkSetupError(
            f"{what} {version} is not supported: offset-ledger needs >={low[0]}.{low[1]},"
            f"<{high[0]}.{high[1]} (pip install 'offset-ledger[local]' for a local Spark, or a "
            f"runtime with Spark {low[0]}.{low[1]}.x)")


_under_launcher = settings.under_launcher


def _class_loadable(jvm, name: str) -> bool:  # type: ignore[no-untyped-def]
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(name, False, loader)
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


def _launched_session(app_name: str) -> SparkSession:
    """The session spark-submit or the runtime configured, with Delta's SQL settings added."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    if settings.on_databricks():
        # Databricks: Delta is built in, and serverless sessions (Spark Connect) have no JVM
        # gateway to inspect.
        return SparkSession.builder.getOrCreate()
    SparkContext._ensure_initialized()  # connects to the launcher's JVM, creates no context
    conf = SparkConf()  # holds spark-submit's --master, --conf, --jars/--packages, memory
    if not _class_loadable(SparkContext._jvm, DELTA_EXTENSION):
        raise SparkSetupError(
            "Delta Lake is not on this Spark runtime's classpath: pass --packages "
            "io.delta:delta-spark_2.13:4.0.1 (or --jars with delta-spark and delta-storage) "
            "to spark-submit")
    builder = SparkSession.builder
    # spark-submit names the app after the script (job.py) unless --name was given: keep a
    # given name, replace the script's.
    if conf.get("spark.app.name", "") in ("", os.path.basename(sys.argv[0] or "")):
        builder = builder.appName(app_name)
    extensions = conf.get("spark.sql.extensions", "") or ""
    if DELTA_EXTENSION not in extensions:
        builder = builder.config("spark.sql.extensions",
                                 ",".join(e for e in (extensions, DELTA_EXTENSION) if e))
    if not conf.contains("spark.sql.catalog.spark_catalog"):
        builder = builder.config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
    return builder.getOrCreate()


def _log4j_file(state: Path) -> Path:
    """The packaged log4j configuration as a file (copied out when the package is zipped)."""
    resource = importlib.resources.files("pipelines").joinpath("log4j2-spark.properties")
    if isinstance(resource, Path):
        return resource
    target = state / "log4j2-spark.properties"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(resource.read_bytes())
    return target


def _launch_jvm_apart(options: dict[str, str]) -> None:
    """Start the local driver JVM in a session of its own, before the builder would.

    A terminal's Ctrl-C or a ``kill -TERM -PGID`` signals the whole process group: a JVM in
    it (PySpark only ignores SIGINT) would die at once, under a job still recording its last
    runs through it, and the stop became a page of Py4J tracebacks. Apart, the JVM stops when
    the program does: it exits when its stdin (a pipe from this process) closes, even after a
    ``kill -9`` of the program.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf()
    for key, value in options.items():
        conf.set(key, value)
    # The builder's own launch, with the same conf; only the session differs.
    SparkContext._ensure_initialized(
        gateway=launch_gateway(conf, popen_kwargs={"start_new_session": True}))


def _local_session(app_name: str, master: str | None, ui: bool | None,
                   extra_conf: dict[str, str] | None, java_options: str = "") -> SparkSession:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkSetupError("pyspark is not installed: pip install 'offset-ledger[local]', "
                              "or run the job with spark-submit or on Databricks") from None
    try:
        check_version("delta-spark", importlib.metadata.version("delta-spark"))
    except importlib.metadata.PackageNotFoundError:
        pass  # the jars folder still has to provide Delta (checked by spark_jars)
    master = master or settings.spark_master()
    if ui is None:
        ui = settings.spark_ui()
    state = settings.state_dir().resolve()
    # Loopback only: the machine's other interfaces are not ours to listen on.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Local Python workers must run this interpreter (it has confluent-kafka), not PATH's.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log4j = _log4j_file(state)
    archive = jvm_archive.archive_options("spark", jars_dir("spark"))
    # The job's options first, the user's after them: theirs win (ledger.settings).
    java_options = " ".join([*archive, *map(shlex.quote,
                                            settings.jvm_options_over(shlex.split(java_options)))])
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.jars", ",".join(spark_jars()))
        .config("spark.sql.extensions", DELTA_EXTENSION)
        .config("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
        .config("spark.ui.enabled", str(ui).lower())
        .config("spark.ui.showConsoleProgress", "false")
        # Small local machines: a handful of shuffle partitions beats the default 200.
        .config("spark.sql.shuffle.partitions", str(settings.shuffle_partitions()))
        .config("spark.default.parallelism", str(DEFAULT_PARALLELISM))
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.sql.warehouse.dir", str(state / "warehouse"))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions",
                f"-Dderby.system.home={state / 'derby'} -Dlog4j2.configurationFile=file:{log4j}"
                f"{' ' + java_options if java_options else ''}")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", settings.driver_memory())
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    _launch_jvm_apart(builder._options)
    handler = signal.getsignal(signal.SIGINT)
    spark = builder.getOrCreate()
    if handler not in (signal.default_int_handler, signal.SIG_DFL, signal.SIG_IGN, None) \
            and threading.current_thread() is threading.main_thread():
        # SparkContext replaces a SIGINT handler with its own (cancel jobs, raise
        # KeyboardInterrupt anywhere): a job that handles Ctrl-C as a clean stop keeps its own.
        signal.signal(signal.SIGINT, handler)
    spark.sparkContext.setLogLevel(settings.spark_log_level())
    return spark


def get_spark(app_name: str = "offset-ledger", *, master: str | None = None,
              ui: bool | None = None, extra_conf: dict[str, str] | None = None,
              java_options: str = "") -> SparkSession:
    """The runtime's SparkSession (see the module invariants), or a new local one with Delta.

    ``master``, ``ui``, ``extra_conf`` and ``java_options`` (added to the driver JVM's options)
    apply to the local fallback only: under spark-submit or on Databricks the launcher's
    settings are never overridden.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        SparkSession = None  # pyspark missing: the local fallback says so clearly
    active = SparkSession.getActiveSession() if SparkSession is not None else None
    if active is not None:
        spark = active
    elif SparkSession is not None and _under_launcher():
        spark = _launched_session(app_name)
    else:
        spark = _local_session(app_name, master, ui, extra_conf, java_options)
    check_version("Spark", spark.version)
    return spark


def ledger_engine(location: str, app_name: str = "offset-ledger") -> LedgerEngine:
    """The ledger engine of a verb (:mod:`ledger.engine`): delta-rs on a path ledger in a plain
    program, Spark under spark-submit or on Databricks (the launcher's session, as today) and
    wherever delta-rs cannot; the session starts only when Spark is needed."""
    from ledger.engine import LedgerEngine

    return LedgerEngine(location, lambda: get_spark(app_name),
                        engine="spark" if _under_launcher() else "auto")
