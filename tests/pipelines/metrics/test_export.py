"""Where metrics go: /metrics on an address, a real Pushgateway, an atomic textfile; config."""

from __future__ import annotations

import argparse
import os
import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ledger.config import ConfigError, config_from_mapping, parse_address
from pipelines.devtools.clusters import free_port
from pipelines.metrics import Metrics
from pipelines.metrics.export import Exporter, Settings, add_arguments, job_metrics, settings
from tests.pipelines.metrics.servers import http_get

pytestmark = pytest.mark.unit

PART = ("P", "B", "P.Payments", "Payments", "0")


LABELS = {"source": "P", "target": "B", "topic": "P.Payments", "source_topic": "Payments",
          "partition": "0"}


def values(text: str) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def records(text: str) -> float | None:
    return values(text).get(("offset_ledger_replication_records_total",
                             frozenset(LABELS.items())))


def raw_config(**metrics: str):
    return config_from_mapping({
        "clusters": {"P": {"bootstrap.servers": "127.0.0.1:1"},
                     "B": {"bootstrap.servers": "127.0.0.1:2"}},
        "flows": {"P->B": True}, "metrics": metrics}, path="/etc/offset-ledger/c.yaml")


@pytest.mark.parametrize("text,expected", [
    ("127.0.0.1:9464", ("127.0.0.1", 9464)), ("9464", ("127.0.0.1", 9464)),
    (":9464", ("127.0.0.1", 9464)), ("0.0.0.0:9464", ("0.0.0.0", 9464)),
    ("[::1]:9464", ("::1", 9464)), ("metrics.internal:80", ("metrics.internal", 80))])
def test_addresses_default_to_loopback(text, expected):
    assert parse_address(text) == expected


def test_metrics_configuration_keys():
    config = raw_config(address="9464", pushgateway="http://pgw:9091", textfile="m/ol.prom")
    assert config.metrics_address == "127.0.0.1:9464"
    assert config.metrics_pushgateway == "http://pgw:9091"
    assert config.metrics_textfile == "/etc/offset-ledger/m/ol.prom"  # beside the config
    assert raw_config().metrics_address is None  # off unless configured
    with pytest.raises(ConfigError, match=r"metrics.address: invalid value 'x:99999'"):
        raw_config(address="x:99999")
    with pytest.raises(ConfigError, match=r"metrics.textfile: .*reads only \*.prom files"):
        raw_config(textfile="/tmp/ol.txt")
    with pytest.raises(ConfigError, match=r"metrics.port: unknown property"):
        raw_config(port="1")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_the_command_line_wins_over_the_configuration_and_once_serves_no_port():
    config = raw_config(address="9464", textfile="/var/lib/node/ol.prom")
    chosen = settings(parse(["--metrics-address", "0.0.0.0:9500"]), config)
    assert chosen == Settings(("0.0.0.0", 9500), None, "/var/lib/node/ol.prom")
    assert settings(parse([]), raw_config()).enabled is False
    assert job_metrics("replicate", parse([]), raw_config(), "P", "B") is None
    # A --once pass with only an address configured exports nothing (nothing could scrape it).
    assert job_metrics("replicate", parse([]), raw_config(address="9464"), "P", "B",
                       once=True) is None
    once = job_metrics("replicate", parse([]), config, "P", "B", once=True)
    assert once.exporter.settings.address is None

    with pytest.raises(ConfigError, match="--metrics-address"):
        settings(parse(["--metrics-address", "nope"]), config)
    with pytest.raises(ConfigError, match=r"ending in \.prom"):
        settings(parse(["--metrics-textfile", "/tmp/x.txt"]), config)


def test_an_address_asked_of_a_once_run_is_a_warning(caplog):
    assert job_metrics("replicate", parse(["--metrics-address", "9464"]), raw_config(), "P",
                       "B", once=True) is None
    assert "a --once run serves no /metrics" in caplog.text


def test_serves_metrics_on_loopback_and_stops():
    m = Metrics("replicate")
    m.records.labels(*PART).inc(3)
    port = free_port()
    with Exporter(Settings(("127.0.0.1", port)), m.registry, job="offset-ledger-replicate"):
        text = http_get(f"http://127.0.0.1:{port}/metrics").decode()
        assert records(text) == 3
        assert "process_cpu_seconds_total" in text  # the process's own collectors
        # A second exporter on the same port is a clear error, not a traceback.
        with pytest.raises(ConfigError, match=f"metrics address 127.0.0.1:{port}: cannot listen"):
            Exporter(Settings(("127.0.0.1", port)), m.registry, job="x").start()
    with pytest.raises(OSError):
        http_get(f"http://127.0.0.1:{port}/metrics", 2)


def test_the_textfile_is_replaced_atomically(tmp_path):
    m = Metrics("replicate", process_collectors=False)
    path = tmp_path / "offset_ledger.prom"
    exporter = Exporter(Settings(textfile=str(path)), m.registry, job="x", push_every_s=3600)
    seen: list[str] = []
    stop = threading.Event()

    def read() -> None:  # what node exporter would read meanwhile: never half a file
        while not stop.is_set():
            if path.exists():
                seen.append(path.read_text())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(200):
            m.records.labels(*PART).inc()
            m.lag_records.labels(*PART).set(i)
            exporter.publish(final=True)
    finally:
        stop.set()
        reader.join()
    assert seen and all(text.endswith("\n") and "offset_ledger_info" in text
                        for text in seen)
    assert [p.name for p in tmp_path.iterdir()] == ["offset_ledger.prom"]  # no temp left
    final = values(path.read_text())
    assert records(path.read_text()) == 200
    # Not due yet: an unforced publish waits for push_every_s.
    m.records.labels(*PART).inc()
    exporter.publish()
    assert values(path.read_text()) == final


def test_a_textfile_that_cannot_be_written_is_logged_not_raised(tmp_path, caplog):
    m = Metrics("replicate", process_collectors=False)
    exporter = Exporter(Settings(textfile=str(tmp_path / "missing" / "x.prom")), m.registry,
                        job="x")
    exporter.publish(final=True)
    assert "metrics textfile" in caplog.text and "not written" in caplog.text


@pytest.mark.prometheus
def test_pushes_to_a_real_pushgateway_with_the_flow_as_grouping_key(pushgateway):
    m = Metrics("replicate", process_collectors=False)
    m.records.labels(*PART).inc(42)
    exporter = Exporter(Settings(pushgateway=pushgateway.url), m.registry,
                        job="offset-ledger-replicate", grouping_key={"source": "P",
                                                                      "target": "B"})
    exporter.close()
    text = http_get(f"{pushgateway.url}/metrics").decode()
    got = [s for f in text_string_to_metric_families(text) for s in f.samples
           if s.name == "offset_ledger_replication_records_total"]
    assert [(s.labels["job"], s.labels["source"], s.labels["topic"], s.value) for s in got] == [
        ("offset-ledger-replicate", "P", "P.Payments", 42.0)]
    # The next push replaces the group: a series gone from the process is gone there too.
    m.records.remove(*PART)
    exporter.publish(final=True)
    assert "offset_ledger_replication_records_total{" not in http_get(
        f"{pushgateway.url}/metrics").decode()


def test_an_unreachable_pushgateway_is_logged_not_raised(caplog):
    m = Metrics("replicate", process_collectors=False)
    Exporter(Settings(pushgateway=f"http://127.0.0.1:{free_port()}"), m.registry,
             job="x").close()
    assert "metrics not pushed to" in caplog.text


def test_nothing_is_left_listening_or_registered_by_import():
    import importlib

    import pipelines.metrics as package

    before = threading.active_count()
    importlib.reload(package)
    assert threading.active_count() == before
    assert os.environ.get("PROMETHEUS_MULTIPROC_DIR") is None
