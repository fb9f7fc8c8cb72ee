"""The sync's pure edges (pipelines/acls/sync.py): acl_syncs rows, the metrics of a report,
the interval of a long-running job's sync, and confluent-kafka's AclBinding round trip."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger.config import FlowConfig, config_from_mapping
from ledger.schemas import ACL_SYNCS, column_names
from pipelines.acls import admin, sync
from pipelines.acls.rules import Binding
from pipelines.metrics import Metrics

pytestmark = pytest.mark.unit

READ = Binding("TOPIC", "P.Payments", "LITERAL", "User:app", "*", "READ", "ALLOW")
OLD = Binding("TOPIC", "P.Old", "PREFIXED", "User:app", "*", "READ", "DENY")


def test_rows_are_the_table_columns_and_name_the_source_binding():
    report = sync.SyncReport("P->B", added=[READ], removed=[OLD])
    origin = Binding("TOPIC", "Payments", "LITERAL", "User:app", "*", "ALL", "ALLOW")
    rows = sync.rows(report, FlowConfig("P", "B"), {READ: origin}, dt.datetime(2026, 1, 1))
    assert [list(r) for r in rows] == [column_names(ACL_SYNCS)] * 2
    assert [(r["action"], r["resource_name"], r["source_resource_name"]) for r in rows] == [
        ("added", "P.Payments", "Payments"), ("removed", "P.Old", None)]
    assert rows[0]["sync_id"] == rows[1]["sync_id"]


def test_kafka_binding_round_trip():
    assert admin.from_kafka(admin.to_kafka(OLD)) == OLD
    assert admin.exact_filter(READ).name == "P.Payments"


def test_count_adds_bindings_and_failures_but_not_a_missing_authorizer():
    metrics = Metrics("replicate", process_collectors=False)
    sync.count(metrics, sync.SyncReport("P->B", added=[READ, OLD], removed=[OLD]))
    sync.count(metrics, sync.SyncReport("P->B", problem="missing ACL: ...",
                                        kind=admin.MISSING_ACL))
    sync.count(metrics, sync.SyncReport("P->B", problem="no authorizer",
                                        kind=admin.NO_AUTHORIZER))
    value = metrics.registry.get_sample_value
    assert value("offset_ledger_acl_bindings_synced_total",
                 {"source": "P", "target": "B", "action": "added"}) == 2
    assert value("offset_ledger_acl_bindings_synced_total",
                 {"source": "P", "target": "B", "action": "removed"}) == 1
    assert value("offset_ledger_acl_sync_failures_total", {"source": "P", "target": "B"}) == 1


def test_a_long_running_sync_waits_for_its_interval(monkeypatch):
    config = config_from_mapping({
        "clusters": {"P": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
        "flows": {"P->B": {"sync.topic.acls.interval.seconds": 600}}})
    passes: list[list[str]] = []
    monkeypatch.setattr(sync, "sync_flow", lambda c, f, topics, s: passes.append(topics)
                        or sync.SyncReport(f.name))
    reports: list[sync.SyncReport] = []
    syncer = sync.AclSync()
    syncer.on_report = reports.append
    flow = config.flow("P->B")
    syncer.run_due(config, flow, ["Payments"])
    syncer.run_due(config, flow, ["Payments"])   # within the interval: nothing
    assert passes == [["Payments"]] and len(reports) == 1
    syncer.last -= 601
    syncer.run_due(config, flow, ["Payments", "Orders"])
    assert passes[-1] == ["Payments", "Orders"]


def test_a_failing_pass_never_raises(monkeypatch, caplog):
    config = config_from_mapping({
        "clusters": {"P": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}},
        "flows": {"P->B": True}})

    def boom(*_):
        raise RuntimeError("broker said no\nsecond line")

    monkeypatch.setattr(sync, "sync_flow", boom)
    sync.AclSync().run_due(config, config.flow("P->B"), [])
    assert "flow P->B: ACL sync: broker said no; replication goes on" in caplog.text
