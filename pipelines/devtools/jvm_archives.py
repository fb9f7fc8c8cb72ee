"""Make the class-data archives the JVMs offset-ledger launches map in (``make setup``).

``python -m pipelines.devtools.jvm_archives [--force]`` runs each kind's JVM once through a
representative workload with ``-XX:ArchiveClassesAtExit``, and files the archive its exit
dumps, with its key, under ``jars/cds`` (``pipelines.jvm_archive`` says when one is used):

    spark   a local Spark session with Delta: a path ledger created, a table written, merged
            and read back (also as of a version), queries with and without generated code
    kafka   one embedded KRaft broker: topics created, records produced and consumed, a
            group's offsets committed and listed, then a clean stop

Invariants:
    * A kind whose archive matches its key is left alone (``--force`` makes it again), so a
      second ``make setup`` costs a second.
    * An archive appears complete or not at all: the dump goes to a temporary name, renamed
      into place with its key once the JVM that wrote it has exited.
    * A failure says which kind failed and why, and leaves the JVMs running without an
      archive of that kind (exit 1); nothing else depends on the archives.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ledger import settings
from pipelines import jvm_archive
from pipelines.spark import jars_dir

DUMP_TIMEOUT = 180.0  # seconds for a JVM to exit and write its archive (177 MB for Spark)


def _current(kind: str, java: str) -> bool:
    return bool(jvm_archive.archive_options(kind, jars_dir(kind), java))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _await_exit(pid: int, dump: Path, timeout: float = DUMP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the JVM (pid {pid}) did not exit within {timeout:.0f}s")
        time.sleep(0.2)
    if not dump.is_file() or dump.stat().st_size == 0:
        raise RuntimeError(f"the JVM exited without writing {dump.name}")


def _spark_workload(dump: Path) -> int:
    """In a child process: the Spark session's workload; prints the driver JVM's pid."""
    from pyspark.sql import functions as F

    from ledger.tables import Ledger
    from pipelines.spark import get_spark

    spark = get_spark("offset-ledger-jvm-archive", master="local[2]", ui=False,
                      java_options=f"-XX:ArchiveClassesAtExit={dump}")
    print(spark.sparkContext._jvm.ProcessHandle.current().pid(), flush=True)
    with tempfile.TemporaryDirectory(prefix="offset-ledger-cds-") as folder:
        Ledger(spark, f"{folder}/ledger").init()
        path = f"{folder}/t"
        rows = spark.range(200).select(F.col("id"), (F.col("id") % 7).alias("k"),
                                       F.current_timestamp().alias("at"))
        rows.write.format("delta").save(path)
        from delta.tables import DeltaTable

        (DeltaTable.forPath(spark, path).alias("t").merge(rows.alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        for codegen in ("FALLBACK", "NO_CODEGEN"):
            spark.conf.set("spark.sql.codegen.factoryMode", codegen)
            spark.sql(f"select k, count(*), max(at) from delta.`{path}` group by k").collect()
        spark.read.format("delta").option("versionAsOf", 0).load(path).count()
    return 0


def _spark(dump: Path) -> None:
    # The workload's JVM dumps; it must not also map an archive (a stale or --force'd one).
    env = {**os.environ, settings.JVM_ARCHIVES: "false"}
    command = [sys.executable, "-m", "pipelines.devtools.jvm_archives", "--spark-workload",
               str(dump)]
    child = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    pid = next((int(line) for line in child.stdout.split() if line.isdigit()), None)
    if child.returncode != 0 or pid is None:
        raise RuntimeError(f"the Spark workload failed (exit {child.returncode}): "
                           f"{(child.stderr or child.stdout).strip()[-800:]}")
    _await_exit(pid, dump)  # the JVM outlives its Python program by the dump


def _kafka(dump: Path) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from ledger.config import config_from_mapping
    from pipelines.devtools.clusters import EmbeddedClusters, free_port

    with tempfile.TemporaryDirectory(prefix="offset-ledger-cds-") as folder:
        raw = {"clusters": {"A": {"bootstrap.servers": f"127.0.0.1:{free_port()}"}},
               "flows": {}, "embedded": {"data.dir": folder}}
        clusters = EmbeddedClusters(config_from_mapping(raw, path=f"{folder}/c.yaml"),
                                    tied_to_parent=True,
                                    java_options=[f"-XX:ArchiveClassesAtExit={dump}"])
        clusters.up()
        try:
            pid = clusters.pid("A")
            bootstrap = clusters.bootstrap("A")
            quiet = {"bootstrap.servers": bootstrap, "log_level": 0}  # the stop is expected
            admin = AdminClient(quiet)
            for future in admin.create_topics([NewTopic("warm", 3, 1)]).values():
                future.result(60)
            producer = Producer({**quiet, "enable.idempotence": True})
            for n in range(300):
                producer.produce("warm", str(n).encode(), partition=n % 3)
            producer.flush(60)
            consumer = Consumer({**quiet, "group.id": "warm",
                                 "auto.offset.reset": "earliest"})
            consumer.subscribe(["warm"])
            seen, deadline = 0, time.monotonic() + 60
            while seen < 300 and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    seen += 1
            consumer.commit(asynchronous=False)
            consumer.close()
            admin.list_consumer_groups().result(60)
        finally:
            clusters.stop("A", timeout=DUMP_TIMEOUT)
        if pid is None:
            raise RuntimeError("the broker wrote no pid")
        _await_exit(pid, dump)


BUILDERS: dict[str, Callable[[Path], None]] = {"spark": _spark, "kafka": _kafka}


def build(kind: str, force: bool = False) -> str:
    """Make ``kind``'s archive unless a matching one exists; returns what was done."""
    java = jvm_archive.java_binary()
    if java is None:
        raise RuntimeError("no java: install a JDK 17+ or set JAVA_HOME")
    if not force and _current(kind, java):
        return "up to date"
    folder = jvm_archive.archive_dir(jars_dir(kind))
    folder.mkdir(parents=True, exist_ok=True)
    dump = folder / f".{kind}.{os.getpid()}.jsa"
    started = time.monotonic()
    try:
        BUILDERS[kind](dump)
        key = jvm_archive.archive_key(java, jvm_archive.class_path(kind, jars_dir(kind)))
        (folder / f"{kind}.key").unlink(missing_ok=True)  # never a key beside another archive
        os.replace(dump, folder / f"{kind}.jsa")
        (folder / f"{kind}.key").write_text(key + "\n")
    finally:
        with contextlib.suppress(FileNotFoundError):
            dump.unlink()
    size = (folder / f"{kind}.jsa").stat().st_size
    return f"made ({size / 2**20:.0f} MiB in {time.monotonic() - started:.0f}s)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.devtools.jvm_archives",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="make them even when current")
    parser.add_argument("--spark-workload", metavar="DUMP", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.spark_workload:
        return _spark_workload(Path(args.spark_workload))
    failed = 0
    for kind in BUILDERS:
        try:
            print(f"class-data archive {kind}: {build(kind, args.force)}", flush=True)
        except Exception as exc:  # one kind's failure leaves the other's archive to be made
            failed = 1
            print(f"class-data archive {kind}: not made: {exc}", file=sys.stderr, flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
