"""A real Prometheus scrapes a running continuous replicate and checkpoint.

Through PromQL over Prometheus' HTTP API: the records copied equal what was produced and the
lag is 0, the group becomes ready to move, every query of the Grafana dashboard is valid, an
alert fires when a topic's replication is stopped (its replica deleted: its lag is the records
left behind), and after a restart recreates the replica its lag returns to 0.
``status --format prometheus`` agrees on the same numbers. Prometheus scrapes and evaluates
every second; every wait polls the API.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from pipelines import cli
from pipelines.devtools import workload
from pipelines.devtools.clusters import free_port
from pipelines.devtools.settings import LEAN_JVM_OPTIONS
from pipelines.edge import kafka_offsets
from tests.pipelines.metrics.servers import Job, Prometheus, http_get, wait_for
from tests.pipelines.replicate.kafka_io import create, delete

pytestmark = [pytest.mark.prometheus, pytest.mark.kafka, pytest.mark.spark, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "docs" / "prometheus-alerts.yml"
DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"
CLI = str(Path(sys.executable).with_name("offset-ledger"))
JVM_OPTS = f"{LEAN_JVM_OPTIONS} -Xshare:auto"


def dashboard_queries(**variables: str) -> list[tuple[str, str]]:
    """``(panel title, PromQL)`` of every dashboard target, Grafana's variables substituted."""
    out = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__rate_interval", "1m")
            for name, value in variables.items():
                expr = expr.replace(f"${name}", value)
            out.append((panel["title"], expr))
    return out


def test_prometheus_scrapes_replicate_and_checkpoint(spark, make_config, unique, tmp_path,
                                                     capsys):
    pay, orders, group = unique("pay"), unique("orders"), unique("G")
    config = make_config(
        flows={"P->B": {"topics": [pay, orders], "groups": [group]}},
        **{"emit.checkpoints.interval.seconds": 1, "sync.group.offsets.enabled": False})
    # The replica deleted below is told by librdkafka once its metadata has not shown the topic
    # for topic.metadata.propagation.max.ms (30 s by default): a user's setting, passed through
    # verbatim, shortened here so the test waits seconds for the flag.
    raw = yaml.safe_load(open(config.path))
    raw["clusters"]["B"]["topic.metadata.propagation.max.ms"] = 3000
    config = make_config(**raw)
    p, b = config.cluster("P"), config.cluster("B")
    create(p, pay, 2)
    create(p, orders, 1)
    workload.produce(p, pay, [f"p{i}" for i in range(300)], 2)
    workload.produce(p, orders, [f"o{i}" for i in range(40)], 1)
    ports = {"offset-ledger-replicate": free_port(), "offset-ledger-checkpoint": free_port()}
    prom = Prometheus(tmp_path / "prometheus",
                      {job: [f"127.0.0.1:{port}"] for job, port in ports.items()}, [RULES])
    env = {**os.environ, "OFFSET_LEDGER_STATE_DIR": str(tmp_path / ".state"),
           "SPARK_SUBMIT_OPTS": " ".join(filter(None, (os.environ.get("SPARK_SUBMIT_OPTS"),
                                                         JVM_OPTS)))}
    common = ["--flow", "P->B", "--config", config.path]
    jobs: list[Job] = []
    try:
        # The default continuous mode (streaming), committing every second.
        replicate_argv = [CLI, "replicate", *common, "--interval", "1", "--commit-interval", "1",
                          "--refresh-interval", "3600", "--metrics-address",
                          f"127.0.0.1:{ports['offset-ledger-replicate']}"]
        replicate = Job(replicate_argv, tmp_path / "replicate.log", env, tmp_path)
        jobs.append(replicate)

        def value(promql: str) -> float | None:
            assert replicate.alive(), replicate.tail()
            return prom.scalar(promql)

        copied = f'sum(offset_ledger_replication_records_total{{source_topic="{pay}"}})'
        lag = f'sum(offset_ledger_replication_lag_records{{source_topic="{pay}"}})'
        wait_for(lambda: value(copied) == 300, 300, f"{copied} == 300",
                 lambda: f"{value(copied)}, up: {prom.targets_up()}\n{replicate.tail()}")
        wait_for(lambda: value(lag) == 0, 60, f"{lag} == 0")
        assert value(f'sum(offset_ledger_replication_records_total{{source_topic="{orders}"}})'
                     ) == 40
        # The bytes are the values' (keys: "key-N"); every batch was a ledger commit.
        produced_bytes = sum(len(f"p{i}") + len(f"key-{i % 17}") for i in range(300))
        assert value(f'sum(offset_ledger_replication_bytes_total{{source_topic="{pay}"}})'
                     ) == produced_bytes
        assert value('sum(offset_ledger_ledger_commits_total{source="P",target="B"})') >= 1
        assert value(f'sum(offset_ledger_replication_latency_seconds_count'
                     f'{{source_topic="{pay}"}})') >= 2  # a report per partition at least

        # More records while it runs: counted exactly once more.
        workload.produce(p, pay, [f"q{i}" for i in range(100)], 2)
        wait_for(lambda: value(copied) == 400, 120, f"{copied} == 400")
        wait_for(lambda: value(lag) == 0, 60, f"{lag} == 0 again")
        wait_for(lambda: value(f'max(offset_ledger_replication_rpo_seconds'
                               f'{{source_topic="{pay}"}})') < 30, 60, "RPO back under 30 s")

        # A group reads part of pay on P; the checkpoint job says it can move to B.
        assert len(workload.consume(p, group, [pay], limit=150)) == 150
        checkpoint = Job([CLI, "checkpoint", *common, "--metrics-address",
                          f"127.0.0.1:{ports['offset-ledger-checkpoint']}"],
                         tmp_path / "checkpoint.log", env, tmp_path)
        jobs.append(checkpoint)
        ready = f'offset_ledger_group_ready_to_move{{group="{group}",source="P",target="B"}}'
        wait_for(lambda: checkpoint.alive() and prom.scalar(ready) == 1, 300, f"{ready} == 1",
                 checkpoint.tail)
        committed = len(kafka_offsets.list_offsets(p, "committed", group=group))
        assert prom.scalar(f'count(offset_ledger_checkpoint_latency_seconds_count'
                           f'{{group="{group}"}})') == committed  # one per partition
        assert prom.scalar(f'offset_ledger_group_records_not_replicated{{group="{group}"}}') == 0
        assert prom.targets_up() == {"offset-ledger-replicate": 1.0,
                                     "offset-ledger-checkpoint": 1.0}

        # status --format prometheus: the same numbers, from outside the jobs.
        capsys.readouterr()
        assert cli.main(["status", *common, "--group", group, "--format", "prometheus"]) == 0
        status = {(s.name, s.labels.get("source_topic"), s.labels.get("partition")): s.value
                  for f in text_string_to_metric_families(capsys.readouterr().out)
                  for s in f.samples}
        for partition in ("0", "1"):
            assert status[("offset_ledger_replication_lag_records", pay, partition)] == 0
            assert status[("offset_ledger_replication_recorded_offset", pay, partition)] == 200
        assert status[("offset_ledger_group_ready_to_move", None, None)] == 1
        assert status[("offset_ledger_status_exit_code", None, None)] == 0

        # Every query of the dashboard is valid PromQL (prom.query fails on an error); the
        # main panels have data once rate() has two samples of each counter.
        core = {"RPO (worst partition)", "Lag (records)", "Record rate (MM2 record-rate)",
                "Replication latency (MM2 replication-latency-ms)",
                "Checkpoint latency (MM2 checkpoint-latency-ms)", "Groups ready to move"}

        def empty_core() -> set[str]:
            return core & {title for title, expr in dashboard_queries(
                source=".*", target=".*", group=".*") if not prom.query(expr)}

        wait_for(lambda: not empty_core(), 60, "data in the dashboard's main panels",
                 lambda: str(empty_core()))

        # Stop orders' replication: its replica is deleted, and new records wait.
        delete(b, f"P.{orders}")
        workload.produce(p, orders, [f"late{i}" for i in range(5)], 1)
        flag = f'offset_ledger_topic_not_replicated{{source_topic="{orders}"}}'
        wait_for(lambda: value(flag) == 1, 120, f"{flag} == 1", replicate.tail)
        orders_lag = f'sum(offset_ledger_replication_lag_records{{source_topic="{orders}"}})'
        # What waits on the source: still measured while the topic is set aside.
        wait_for(lambda: value(orders_lag) == 5, 30, f"{orders_lag} == 5")

        def firing() -> list[dict]:
            return [a for a in prom.alerts()
                    if a["labels"]["alertname"] == "OffsetLedgerTopicNotReplicated"
                    and a["labels"].get("source_topic") == orders and a["state"] == "firing"]

        [alert] = wait_for(firing, 60, "OffsetLedgerTopicNotReplicated firing")
        assert alert["labels"]["reason"] == "unreadable"
        assert alert["labels"]["severity"] == "critical"
        assert f"Topic {orders} is not replicated P->B" in alert["annotations"]["summary"]
        # pay goes on: its lag stays 0 and nothing else fires.
        assert value(lag) == 0
        assert {a["labels"]["alertname"] for a in prom.alerts() if a["state"] == "firing"} <= {
            "OffsetLedgerTopicNotReplicated", "OffsetLedgerErrors"}
        # The copy error was logged by the replicator and counted as the process's own error.
        assert value('sum(offset_ledger_errors_total{job="offset-ledger-replicate"})') >= 1
        # The endpoint itself, as a scraper sees it.
        text = http_get(f"http://127.0.0.1:{ports['offset-ledger-replicate']}/metrics").decode()
        assert "process_cpu_seconds_total" in text and "offset_ledger_info" in text

        # Stopped on SIGTERM, the job exits 1 and names the topic it did not replicate (it never
        # stops replicating a topic silently). A restart recreates the replica and copies orders
        # again as a new epoch: its lag returns to 0 and its RPO falls back.
        assert replicate.stop() == 1, replicate.tail()
        assert f"error: topic {orders} not replicated" in replicate.tail()
        replicate = Job(replicate_argv, tmp_path / "replicate-2.log", env, tmp_path)
        jobs.append(replicate)
        wait_for(lambda: value(orders_lag) == 0, 300, f"{orders_lag} == 0", replicate.tail)
        assert value(f'sum(offset_ledger_replication_records_total{{source_topic="{orders}"}})'
                     ) == 45
        assert value(flag) is None
        wait_for(lambda: value(f'max(offset_ledger_replication_rpo_seconds'
                               f'{{source_topic="{orders}"}})') < 30, 60, "orders' RPO < 30 s")
    finally:
        codes = [job.stop() for job in jobs]
        prom.stop()
    assert codes[-1] == 0, jobs[-1].tail()  # the replicate job stopped cleanly on SIGTERM


def test_once_jobs_push_to_a_pushgateway_and_write_a_textfile(spark, make_config, unique,
                                                              tmp_path, pushgateway):
    """The Databricks way: a --once replicate pushes, Prometheus scrapes the Pushgateway;
    a --once checkpoint writes node exporter's textfile."""
    topic, group = unique("once"), unique("G")
    config = make_config(flows={"P->B": {"topics": [topic], "groups": [group]}},
                         **{"sync.group.offsets.enabled": False})
    p = config.cluster("P")
    create(p, topic, 3)
    workload.produce(p, topic, [f"v{i}" for i in range(90)], 3)
    prom = Prometheus(tmp_path / "prometheus",
                      {"pushgateway": [pushgateway.url.removeprefix("http://")]},
                      honor_labels=True)
    try:
        common = ["--flow", "P->B", "--config", config.path]
        assert cli.main(["replicate", *common, "--once", "--metrics-pushgateway",
                         pushgateway.url]) == 0
        pushed = ('sum(offset_ledger_replication_records_total{job="offset-ledger-replicate",'
                  f'source="P",target="B",source_topic="{topic}"}})')
        wait_for(lambda: prom.scalar(pushed) == 90, 60, f"{pushed} == 90")
        assert prom.scalar(f'sum(offset_ledger_replication_lag_records{{source_topic="{topic}"}})'
                           ) == 0
        assert prom.scalar('push_time_seconds{job="offset-ledger-replicate"}') > 0
        # A second pass with nothing new replaces the group: records counted 0 this time.
        assert cli.main(["replicate", *common, "--once", "--metrics-pushgateway",
                         pushgateway.url]) == 0
        wait_for(lambda: prom.scalar(pushed) is None, 60, "the second push replaced the first")
        assert prom.scalar(f'max(offset_ledger_replication_recorded_offset'
                           f'{{source_topic="{topic}"}})') == 30
    finally:
        prom.stop()
    assert len(workload.consume(p, group, [topic], limit=45)) == 45
    textfile = tmp_path / "node" / "offset_ledger.prom"
    textfile.parent.mkdir()
    assert cli.main(["checkpoint", *common, "--once", "--group", group,
                     "--metrics-textfile", str(textfile)]) == 0
    got = {(s.name, s.labels.get("group")): s.value
           for f in text_string_to_metric_families(textfile.read_text()) for s in f.samples}
    assert got[("offset_ledger_group_ready_to_move", group)] == 1
    assert got[("offset_ledger_checkpoint_passes_total", None)] == 1
    # One checkpoint per partition the group committed.
    committed = kafka_offsets.list_offsets(p, "committed", group=group)
    assert got[("offset_ledger_checkpoints_total", None)] == len(committed)
    assert [p.name for p in textfile.parent.iterdir()] == ["offset_ledger.prom"]
