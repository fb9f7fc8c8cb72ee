"""Class-data archives: used only when they match the JVM about to start, made by setup."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ledger import settings
from ledger.settings import SettingError
from pipelines import jvm_archive
from pipelines.devtools import jvm_archives
from pipelines.spark import jars_dir
from tests.tiny_spark import SESSION_JVM_OPTIONS


def _folder(tmp_path: Path) -> tuple[Path, Path]:
    """A jars folder of one kind with two jars, and its archive folder with a matching key."""
    jars = tmp_path / "jars" / "kafka"
    jars.mkdir(parents=True)
    for name in ("a.jar", "b.jar"):
        (jars / name).write_bytes(name.encode())
    cds = jvm_archive.archive_dir(jars)
    cds.mkdir()
    (cds / "kafka.jsa").write_bytes(b"archive")
    (cds / "kafka.key").write_text(jvm_archive.archive_key("/bin/true", [jars]) + "\n")
    return jars, cds


@pytest.mark.unit
def test_a_matching_archive_is_mapped_quietly_and_never_required(tmp_path, monkeypatch):
    monkeypatch.delenv("OFFSET_LEDGER_JVM_ARCHIVES", raising=False)
    jars, cds = _folder(tmp_path)
    options = jvm_archive.archive_options("kafka", jars, "/bin/true")
    assert options == [f"-XX:SharedArchiveFile={cds / 'kafka.jsa'}", "-Xshare:auto",
                       "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


@pytest.mark.unit
@pytest.mark.parametrize("change", ["jar touched", "jar added", "jar removed", "other java",
                                    "no key", "no archive", "turned off"])
def test_an_archive_that_does_not_match_gives_no_options(tmp_path, monkeypatch, change):
    monkeypatch.delenv("OFFSET_LEDGER_JVM_ARCHIVES", raising=False)
    jars, cds = _folder(tmp_path)
    java = "/bin/true"
    if change == "jar touched":
        stat = (jars / "a.jar").stat()
        os.utime(jars / "a.jar", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    elif change == "jar added":
        (jars / "c.jar").write_bytes(b"c")
    elif change == "jar removed":
        (jars / "b.jar").unlink()
    elif change == "other java":
        java = "/bin/false"
    elif change == "no key":
        (cds / "kafka.key").unlink()
    elif change == "no archive":
        (cds / "kafka.jsa").unlink()
    else:
        monkeypatch.setenv("OFFSET_LEDGER_JVM_ARCHIVES", "false")
    assert jvm_archive.archive_options("kafka", jars, java) == []


@pytest.mark.unit
def test_the_switch_takes_true_or_false_only(tmp_path, monkeypatch):
    jars, _ = _folder(tmp_path)
    monkeypatch.setenv("OFFSET_LEDGER_JVM_ARCHIVES", "maybe")
    with pytest.raises(SettingError, match="OFFSET_LEDGER_JVM_ARCHIVES must be true or false"):
        jvm_archive.archive_options("kafka", jars, "/bin/true")


def _loaded_from_archive(java: str, options: list[str]) -> list[str]:
    """The classes a short Kafka tool's JVM took from the archive (``-Xlog:class+load``)."""
    out = subprocess.run(
        [java, *options, "-Xlog:class+load=info", "-cp", str(jars_dir("kafka") / "*"),
         "kafka.tools.StorageTool", "random-uuid"],
        capture_output=True, text=True, timeout=120, check=True).stdout
    return [line for line in out.splitlines()
            if "kafka." in line and "shared objects file (top)" in line]


@pytest.mark.deploy  # a broker run and a dump, as `make setup` makes it: not in `make check`
def test_the_broker_archive_is_made_then_used_then_left_alone(tmp_path, monkeypatch):
    # The kafka kind made afresh beside a linked copy of the jars (the real ones stay as set up).
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "kafka").symlink_to(jars_dir("kafka").resolve())
    monkeypatch.setenv("OFFSET_LEDGER_JARS_DIR", str(tmp_path / "jars"))
    monkeypatch.delenv("OFFSET_LEDGER_JVM_ARCHIVES", raising=False)
    assert jvm_archives.build("kafka").startswith("made (")
    java = jvm_archive.java_binary()
    options = jvm_archive.archive_options("kafka", jars_dir("kafka"), java)
    assert options, "the archive just made does not match its own key"
    assert _loaded_from_archive(java, options), "no Kafka class came from the archive"
    assert not _loaded_from_archive(java, [])
    assert sorted(p.name for p in (tmp_path / "jars" / "cds").iterdir()) == \
        ["kafka.jsa", "kafka.key"]  # no temporary dump left behind
    assert jvm_archives.build("kafka") == "up to date"


@pytest.mark.spark
def test_the_local_spark_driver_maps_the_archive_setup_made(spark):
    options = jvm_archive.archive_options("spark", jars_dir("spark"))
    assert options, ("no Spark class-data archive matches this machine's jars: "
                     "`make setup` makes it (python -m pipelines.devtools.jvm_archives)")
    pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    archive = options[0].split("=", 1)[1]
    assert archive in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.spark
@pytest.mark.kafka
def test_the_jvms_offset_ledger_launches_carry_the_configured_options(spark, kafka_clusters):
    """$OFFSET_LEDGER_JVM_OPTIONS (the suite sets it, tests/conftest.py) reaches the local Spark
    driver and every embedded broker, beside their archives. The session's driver was launched
    with the suite's options for it (all compiler tiers), the brokers with the suite's own."""
    options = settings.jvm_options()
    assert options, "the suite runs its JVMs with $OFFSET_LEDGER_JVM_OPTIONS"
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    driver = set(runtime.getInputArguments())
    session_only = set(SESSION_JVM_OPTIONS.split()) - set(options)  # its code cache
    assert session_only and set(SESSION_JVM_OPTIONS.split()) <= driver
    for alias in kafka_clusters.aliases:
        pid = kafka_clusters.pid(alias)
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        assert set(options) <= set(argv) and not session_only & set(argv), alias
