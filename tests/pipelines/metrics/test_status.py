"""``status --format prometheus``: the numbers of the other formats, as gauges (no JVM)."""

from __future__ import annotations

import datetime as dt

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pipelines import cli
from pipelines.metrics.status import to_prometheus
from pipelines.status.readiness import (
    Checkpoint,
    CommitCoverage,
    CommitLag,
    FlowStatus,
    GroupStatus,
    PartitionLag,
)
from pipelines.status.render import Report, as_dict

pytestmark = pytest.mark.unit

AT = dt.datetime(2026, 1, 1, 12, 0, 10, tzinfo=dt.UTC)


def gauges(text: str) -> dict[tuple[str, frozenset], float]:
    families = list(text_string_to_metric_families(text))
    assert all(f.type == "gauge" for f in families)
    return {(s.name, frozenset(s.labels.items())): s.value for f in families for s in f.samples}


def part(topic: str, partition: int, **extra: str) -> frozenset:
    return frozenset({"source": "P", "target": "B", "topic": f"P.{topic}", "source_topic": topic,
                      "partition": str(partition), **extra}.items())


def report() -> Report:
    behind = PartitionLag("Orders", "P.Orders", 0, 120, 100, True,
                          newest_record=AT - dt.timedelta(seconds=40),
                          last_run=AT - dt.timedelta(seconds=5))
    markers = PartitionLag("Payments", "P.Payments", 0, 312, 302, True, committed_left=False,
                           newest_record=AT - dt.timedelta(seconds=100))
    flow = FlowStatus("P->B", "P", "B", [behind, markers], last_run=AT - dt.timedelta(seconds=5),
                      heartbeat=AT - dt.timedelta(seconds=2))
    down = FlowStatus("B->P", "B", "P", error="cluster B is unreachable at 127.0.0.1:2")
    waiting = GroupStatus("G", "P->B", "P", "B",
                          coverage=[CommitCoverage("forward", "Orders", 0, 110, 100)],
                          checkpoint=Checkpoint(AT - dt.timedelta(seconds=30), 1))
    waiting.commits["P"] = [CommitLag("P", "Orders", 0, 110, 120)]
    nothing = GroupStatus("G", "B->P", "B", "P")
    return Report(AT, [flow, down], [waiting, nothing], 3)


def test_the_same_numbers_as_json():
    r = report()
    data = as_dict(r)
    got = gauges(to_prometheus(r))
    flow = frozenset({"source": "P", "target": "B"}.items())
    [orders, payments] = data["flows"][0]["partitions"]
    assert got[("offset_ledger_replication_lag_records", part("Orders", 0))] == orders["lag"]
    assert got[("offset_ledger_replication_source_end_offset", part("Orders", 0))] == 120
    assert got[("offset_ledger_replication_recorded_offset", part("Orders", 0))] == 100
    assert got[("offset_ledger_replication_caught_up", part("Orders", 0))] == 0
    # Only markers left: caught up, lag 0 (as the jobs count it), though JSON shows 10 offsets.
    assert payments["lag"] == 10 and payments["caught_up"] is True
    assert got[("offset_ledger_replication_lag_records", part("Payments", 0))] == 0
    assert got[("offset_ledger_replication_caught_up", part("Payments", 0))] == 1
    # Ledger lag and RPO as of the report: behind -> since the newest recorded record.
    assert got[("offset_ledger_replication_lag_seconds", part("Orders", 0))] == 40
    assert got[("offset_ledger_replication_rpo_seconds", part("Orders", 0))] == 40
    assert got[("offset_ledger_replication_rpo_seconds", part("Payments", 0))] == 0
    assert got[("offset_ledger_replication_covered_timestamp_seconds", part("Payments", 0))] == \
        AT.timestamp()
    assert got[("offset_ledger_flow_caught_up", flow)] == 0
    assert got[("offset_ledger_replication_last_run_timestamp_seconds", flow)] == \
        AT.timestamp() - 5
    assert got[("offset_ledger_replication_heartbeat_timestamp_seconds", flow)] == \
        AT.timestamp() - 2
    assert got[("offset_ledger_flow_unreadable", flow)] == 0
    # A flow that could not be read: flagged, and no numbers that would read as caught up.
    back = frozenset({"source": "B", "target": "P"}.items())
    assert got[("offset_ledger_flow_unreadable", back)] == 1
    assert ("offset_ledger_flow_caught_up", back) not in got
    # The group that can move P -> B waits for 10 records; the one with nothing to move: absent.
    group = frozenset({"source": "P", "target": "B", "group": "G"}.items())
    [g] = [g for g in data["groups"] if g["applicable"]]
    assert got[("offset_ledger_group_ready_to_move", group)] == int(g["ready"]) == 0
    assert got[("offset_ledger_group_records_not_replicated", group)] == \
        g["records_not_replicated"] == 10
    assert got[("offset_ledger_group_cutoff_ready", group)] == 0
    assert got[("offset_ledger_checkpoint_newest_timestamp_seconds", group)] == \
        AT.timestamp() - 30
    assert not any(dict(k[1]).get("source") == "B" and k[0].startswith("offset_ledger_group")
                   for k in got)
    assert got[("offset_ledger_status_exit_code", frozenset())] == data["exit_code"] == 3
    assert got[("offset_ledger_status_timestamp_seconds", frozenset())] == AT.timestamp()


def test_no_empty_families_and_no_process_metrics():
    text = to_prometheus(report())
    assert "process_cpu_seconds_total" not in text
    assert "offset_ledger_replication_records_total" not in text  # a job's counter: not here
    helps = [line for line in text.splitlines() if line.startswith("# HELP")]
    names = {line.split()[2] for line in helps}
    assert all(any(line.startswith(n) for line in text.splitlines() if not line.startswith("#"))
               for n in names)


def test_the_format_is_offered_on_the_command_line(capsys):
    with pytest.raises(SystemExit):
        cli.main(["status", "--help"])
    assert "prometheus" in capsys.readouterr().out
