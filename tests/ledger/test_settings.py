"""ledger.settings: every environment variable read at use, typed, with its default."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import settings
from pipelines.devtools import settings as dev_settings

pytestmark = pytest.mark.unit


def test_read_at_call_time_not_at_import(monkeypatch):
    monkeypatch.delenv(settings.SHUFFLE, raising=False)
    assert settings.shuffle_partitions() == 4
    monkeypatch.setenv(settings.SHUFFLE, "8")
    assert settings.shuffle_partitions() == 8
    monkeypatch.setenv(settings.STATE_DIR, "/x/state")
    assert settings.state_dir() == Path("/x/state")
    monkeypatch.setenv(settings.SPARK_UI, "TRUE")
    assert settings.spark_ui() is True


def test_empty_means_default(monkeypatch):
    for name in (settings.SPARK_MASTER, dev_settings.BROKER_START_TIMEOUT, settings.JARS_DIR,
                 settings.CONFIG):
        monkeypatch.setenv(name, "  ")
    assert settings.spark_master() == "local[*]"
    assert dev_settings.broker_start_timeout() == 90.0
    assert settings.jars_dir() is None
    assert settings.config_path() is None


@pytest.mark.parametrize(("name", "value", "read"), [
    (settings.SHUFFLE, "four", settings.shuffle_partitions),
    (dev_settings.BROKER_START_TIMEOUT, "-1", dev_settings.broker_start_timeout),
    (dev_settings.TEST_KILLS, "2.5", dev_settings.test_kills),
    (settings.JVM_OPTIONS, "-Dx='unclosed", settings.jvm_options),
])
def test_a_wrong_value_names_the_variable(monkeypatch, name, value, read):
    monkeypatch.setenv(name, value)
    with pytest.raises(settings.SettingError, match=rf"\${name} must be"):
        read()


def test_where_we_run(monkeypatch):
    for name in settings.RUNTIME_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert not settings.under_launcher() and not settings.other_default_fs()
    monkeypatch.setenv(settings.HADOOP_CONF_DIR, "/etc/hadoop")
    assert settings.other_default_fs() and not settings.under_launcher()
    monkeypatch.setenv(settings.PYSPARK_GATEWAY_PORT, "4040")
    assert settings.under_launcher() and not settings.on_databricks()


def test_jvm_options_split_as_a_shell_splits_them(monkeypatch):
    monkeypatch.delenv(settings.JVM_OPTIONS, raising=False)
    assert settings.jvm_options() == []
    monkeypatch.setenv(settings.JVM_OPTIONS, "-XX:TieredStopAtLevel=1  '-Dname=a b'")
    assert settings.jvm_options() == ["-XX:TieredStopAtLevel=1", "-Dname=a b"]


def test_a_collector_in_the_jvm_options_replaces_the_default_one(monkeypatch):
    assert settings.chooses_collector(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"])
    assert settings.chooses_collector(["-XX:+UseParallelGC"])
    assert settings.chooses_collector(["-XX:+UseZGC"])
    assert not settings.chooses_collector([]) and not settings.chooses_collector(["-XX:-UseG1GC"])
    assert not settings.chooses_collector(["-XX:+UseStringDeduplication"])
    defaults = ["-Xmx1g", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    monkeypatch.delenv(settings.JVM_OPTIONS, raising=False)
    assert settings.jvm_options_over(defaults) == defaults
    # The user's options come last, so the JVM takes their -Xmx and tiering over the defaults'.
    monkeypatch.setenv(settings.JVM_OPTIONS, "-Xmx2g -XX:TieredStopAtLevel=4")
    assert settings.jvm_options_over(defaults) == [*defaults, "-Xmx2g", "-XX:TieredStopAtLevel=4"]
    # Two collectors would not start: the user's replaces the default one.
    monkeypatch.setenv(settings.JVM_OPTIONS, "-XX:+UseG1GC")
    assert settings.jvm_options_over(defaults) == [
        "-Xmx1g", "-XX:TieredStopAtLevel=1", "-XX:+UseG1GC"]
