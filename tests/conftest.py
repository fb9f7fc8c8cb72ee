"""Session-wide fixtures: one SparkSession, one pair of embedded Kafka clusters.

Both are started through the project's own code (``pipelines.spark.get_spark`` and
``pipelines.devtools.clusters.EmbeddedClusters``), on free loopback ports, and stopped at the end.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ledger.config import Config, config_from_mapping
from pipelines.devtools.clusters import EmbeddedClusters, free_port
from pipelines.devtools.settings import LEAN_JVM_OPTIONS
from tests import lanes, timing
from tests.tiny_spark import ONE_TASK_CONF, SESSION_JVM_OPTIONS, TINY_DATA_CONF, TINY_TABLE_CONF


def pytest_configure(config: pytest.Config) -> None:
    """Each test process (an xdist worker too) gets its own state folder.

    The JVM's Derby metastore, Spark's warehouse and the jobs' streaming checkpoints live there;
    two processes sharing one would lock each other out, and the checkout stays clean.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    os.environ.setdefault("OFFSET_LEDGER_STATE_DIR",
                          tempfile.mkdtemp(prefix=f"offset-ledger-tests-{worker}-"))
    # Most of the suite's JVMs (brokers, spark-submit drivers, the CLI's own Spark) live
    # minutes on tiny data: the C2 compiler's work would never pay back, and on 2 cores C1
    # alone halves such a Spark driver's CPU (38 s -> 20 s for one file's ledger). The serial
    # collector spares them G1's concurrent threads and barriers (the brokers then run it
    # instead of Kafka's usual G1). The session's own SparkSession keeps C2 (see ``spark``).
    # Results are the JVM's contract either way; the jobs, the demo and the benchmarks keep the
    # JVM's defaults.
    os.environ.setdefault("OFFSET_LEDGER_JVM_OPTIONS", LEAN_JVM_OPTIONS)


# Fixtures that start something, and the marker a test using them must carry, so that a tier
# (`make check`, `-m unit`) never starts brokers or a JVM it did not ask for.
FIXTURE_MARKERS = {"kafka_clusters": "kafka", "spark": "spark"}
TIERS = {"unit", "spark", "kafka", "e2e", "dbt", "gx", "deploy", "prometheus", "secured", "slow"}


def marker_problems(items: list[pytest.Item]) -> list[str]:
    """Tests that use the brokers or Spark without their marker, or carry no tier at all."""
    problems = []
    for item in items:
        marks = {m.name for m in item.iter_markers()}
        fixtures = set(getattr(item, "fixturenames", ()))
        missing = sorted(marker for fixture, marker in FIXTURE_MARKERS.items()
                         if fixture in fixtures and marker not in marks)
        if missing:
            problems.append(f"{item.nodeid}: uses {', '.join(missing)} without the marker")
        elif not marks & TIERS:
            problems.append(f"{item.nodeid}: no tier marker ({', '.join(sorted(TIERS))})")
    return problems


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    problems = marker_problems(items)
    if problems:
        raise pytest.UsageError("tests without their markers:\n  " + "\n  ".join(problems))
    # The longest files first (committed durations, tests/timing.py), so that the workers of
    # `make test` (--dist loadfile --no-loadscope-reorder, in lanes) finish together.
    items[:] = timing.longest_first(items, timing.load())
    where = getattr(config, "workerinput", {}).get(lanes.LEAN_FILES)
    if where:  # an xdist worker of a run in lanes (tests/lanes.py)
        lanes.write_lean_files(where, items)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist's controller: where each worker writes its lean files (tests/lanes.py)."""
    node.workerinput[lanes.LEAN_FILES] = str(lanes.lean_files_path())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Three workers or more under --dist loadfile: Spark lanes and a lean lane."""
    return lanes.make_scheduler(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        lanes.lean_files_path().unlink(missing_ok=True)


@pytest.fixture(scope="session", autouse=True)
def verbs_imported() -> None:
    """Import every verb module once, first: a test that patches ``get_spark`` (to prove no
    JVM starts) would otherwise leave its stub in a module that imports it by name for the
    rest of the session, whatever the order the files run in."""
    from pipelines import cli

    cli.build_parser()


@pytest.fixture(scope="session")
def spark():
    """The session's SparkSession: offset-ledger's jars, plus Spark's Kafka connector
    (jars/spark-kafka, jvm/spark-kafka/pom.xml) for the Structured Streaming queries that
    tests fail over: they are the consumers; offset-ledger never loads a Kafka class in Spark."""
    from pipelines.spark import get_spark, jars_dir, spark_jars

    consumer_jars = sorted(str(p) for p in jars_dir("spark-kafka").glob("*.jar"))
    # This JVM runs every Spark test of its worker, a quarter of an hour: the C1 compiler
    # as in the short-lived JVMs the tests launch, but with the code cache of the default
    # tiers, which a quarter of an hour of Spark fills at C1's 48 MB (tests/tiny_spark.py).
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OFFSET_LEDGER_JVM_OPTIONS", SESSION_JVM_OPTIONS)
        session = get_spark("offset-ledger-tests", master="local[2]", ui=False,
                            extra_conf={"spark.jars": ",".join(spark_jars() + consumer_jars),
                                        **TINY_DATA_CONF, **ONE_TASK_CONF,
                                        **TINY_TABLE_CONF})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def replication_ledger_template(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The replication job's two tables as Spark's own empty writes create them (a ledger
    from before delta-rs created tables), made once per session: a copy of a Delta table's
    folder is that table, and copying costs milliseconds where the two writes cost seconds."""
    from ledger.schemas import (
        OFFSET_SYNCS,
        OFFSET_SYNCS_SCHEMA,
        REPLICATION_PROGRESS,
        REPLICATION_PROGRESS_SCHEMA,
    )
    from ledger.tables import Ledger

    ledger = Ledger(spark, str(tmp_path_factory.mktemp("replication-template") / "ledger"))
    for name, schema in ((OFFSET_SYNCS, OFFSET_SYNCS_SCHEMA),
                         (REPLICATION_PROGRESS, REPLICATION_PROGRESS_SCHEMA)):
        spark.createDataFrame([], schema).write.format("delta").save(ledger.table_path(name))
    return Path(ledger.location)


@pytest.fixture
def replication_ledger(spark, tmp_path: Path, replication_ledger_template: Path):
    """A path ledger holding only the replication job's two tables, created by Spark (a copy
    of :func:`replication_ledger_template`)."""
    from ledger.tables import Ledger

    shutil.copytree(replication_ledger_template, tmp_path / "ledger")
    return Ledger(spark, str(tmp_path / "ledger"))


@pytest.fixture(scope="session")
def kafka_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedClusters]:
    """Two single-node KRaft brokers, aliases P and B, for the whole test session."""
    data_dir = tmp_path_factory.mktemp("clusters")
    raw = {
        "clusters": {alias: {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
                     for alias in ("P", "B")},
        "flows": {"P->B": True, "B->P": True},
        "embedded": {"data.dir": str(data_dir)},
    }
    clusters = EmbeddedClusters(config_from_mapping(raw, path=str(data_dir / "c.yaml")),
                                tied_to_parent=True)
    clusters.up()
    yield clusters
    clusters.down()


@pytest.fixture
def make_config(tmp_path: Path, kafka_clusters: EmbeddedClusters) -> Callable[..., Config]:
    """Build a Config for the embedded clusters with a fresh ledger under ``tmp_path``.

    Keyword arguments are merged into the YAML document (nested MM2 keys allowed), and the
    YAML is written to ``tmp_path/offset-ledger.yaml`` so CLI tests can pass ``--config``.
    """

    def build(**overrides: Any) -> Config:
        raw: dict[str, Any] = {
            "clusters": {alias: {"bootstrap.servers": kafka_clusters.bootstrap(alias)}
                         for alias in ("P", "B")},
            "flows": {"P->B": True, "B->P": True},
            "ledger": {"location": str(tmp_path / "ledger")},
            "embedded": {"data.dir": str(kafka_clusters.data_dir)},
        }
        raw.update(overrides)
        path = tmp_path / "offset-ledger.yaml"
        path.write_text(yaml.safe_dump(raw, sort_keys=False))
        return config_from_mapping(raw, path=str(path))

    return build


@pytest.fixture
def this_thread_time(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, Callable[..., Any]], None]:
    """Replace a ``time`` function (``sleep``, ``monotonic``) for the calling thread only.

    A module's ``time`` is the one ``time`` module, so patching ``module.time.sleep`` patches
    every thread's: py4j's finalizer thread (alive once a worker has a SparkSession) sleeps a
    second between polls, and would spin on a no-op sleep, count as the test's own sleep, or
    draw from a fake clock. Other threads keep the real function.
    """
    import threading
    import time

    mine = threading.get_ident()

    def install(name: str, fake: Callable[..., Any]) -> None:
        real = getattr(time, name)

        def either(*args: Any) -> Any:
            return fake(*args) if threading.get_ident() == mine else real(*args)

        monkeypatch.setattr(time, name, either)

    return install


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Unique topic/group names, since the clusters are shared by the whole session."""
    return lambda prefix: f"{prefix}-{uuid.uuid4().hex[:8]}"
