"""The Great Expectations suites on real Delta tables: a clean ledger passes; a corrupted copy
of every table fails every expectation of that table's suite, each by its own corruption."""

from __future__ import annotations

import json
import shutil

import pytest

from expectations import validate_ledger
from expectations.suites import SCHEMA_CHECKS, check_names
from ledger.schemas import (
    ACL_SYNCS,
    CHECKPOINTS,
    GROUP_OFFSETS,
    OFFSET_SYNC_SPANS,
    OFFSET_SYNCS,
    OPERATION_CHECKPOINTS,
    OPERATION_RUNS,
    OPERATIONS,
    REPLICATION_PROGRESS,
    RESUME_POINTS,
    SCHEMAS,
)
from ledger.tables import Ledger, LedgerError
from pipelines.validate import job
from tests.dbt.ledger_rows import (
    SECRET,
    append,
    at,
    checkpoint_row,
    config_for,
    group_row,
    reference_ledger,
    sync_row,
)

pytestmark = [pytest.mark.spark, pytest.mark.gx]


def _resume(rid, **over):
    row = {"resume_point_id": rid, "operation_id": "op-failover", "reason": "failover",
           "cluster": "B", "group_id": "G", "topic": "P.Payments", "partition": 0, "offset": 8,
           "previous_offset": None, "checkpoint_id": "cp-1", "direction": "forward",
           "source_cluster": "P", "source_topic": "Payments", "source_offset": 8,
           "offset_syncs_version": 2, "checkpoints_version": 1, "written_at": at(20)}
    return {**row, **over}


def _operation(oid, **over):
    row = {"operation_id": oid, "kind": "failover", "group_id": "G", "from_cluster": "P",
           "to_cluster": "B", "status": "completed", "subscribe_topics": ["Payments"],
           "offset_syncs_version": 1, "checkpoints_version": 1, "group_offsets_version": 1,
           "resume_points_version": 1, "reverse_checkpointing": True, "started_at": at(30),
           "ready_at": at(31), "seconds_to_ready": 1.0, "message": None}
    return {**row, **over}


def _progress(topic, **over):
    row = {"flow": "P->B", "topic": topic, "replica_topic": f"P.{topic}", "partition": 0,
           "last_upstream_offset": 9, "next_upstream_offset": 10, "source_end_offset": 10,
           "lag": 0, "newest_record_timestamp": at(1), "record_age_ms": 5, "batch_id": 1,
           "updated_at": at(1)}
    return {**row, **over}


def _span(oid, topic, batch, u, d, n, **over):
    # op-failover recorded P->B Payments p0 as one span (0, 0, 10) at offset_syncs version 2
    return {"operation_id": oid, "offset_syncs_version": 2,
            **sync_row("P->B", topic, 0, u, d, n, batch, at(5), run_id="span"), **over}


def _snapshot_span(flow, topic, batch, u, d, n, **over):
    # the reference snapshot of P->B holds Payments p0 as one span (0, 0, 15) at covered_until 7
    return {"offset_syncs_version": 7, "covered_until": at(7),
            **sync_row(flow, topic, 0, u, d, n, batch, at(7), run_id="span"), **over}


def _evidence_checkpoint(oid, group, **over):
    row = checkpoint_row("cp-1", "P->B", "forward", group, ("P", "Payments", 1),
                         ("B", "P.Payments", 1), 0, version=2, at_=at(4))
    return {"operation_id": oid, "checkpoints_version": 1, **row, **over}


def _acl_sync(sid, **over):
    row = {"sync_id": sid, "flow": "P->B", "source_cluster": "P", "target_cluster": "B",
           "action": "added", "resource_type": "TOPIC", "resource_name": "P.Payments",
           "pattern_type": "LITERAL", "principal": "User:app", "host": "*",
           "operation": "READ", "permission_type": "ALLOW", "source_resource_name": "Payments",
           "synced_at": at(3)}
    return {**row, **over}


# table -> {check: rows that break exactly that check}
CORRUPTIONS = {
    ACL_SYNCS: {
        "action_known": [_acl_sync("ax-1", action="granted")],
        "permission_known": [_acl_sync("ax-2", permission_type="MAYBE")],
        "pattern_known": [_acl_sync("ax-3", pattern_type="MATCH")],
        "natural_key_unique": [_acl_sync("ax-4"), _acl_sync("ax-4")],
        "no_configured_secret": [_acl_sync("ax-5", principal=f"User:{SECRET}")],
    },
    OFFSET_SYNCS: {
        "length_positive": [sync_row("P->B", "C1", 0, 0, 0, 0, 0, at(1))],
        "upstream_offset_non_negative": [sync_row("P->B", "C2", 0, -1, 0, 1, 0, at(1))],
        "downstream_offset_non_negative": [sync_row("P->B", "C3", 0, 0, -4, 1, 0, at(1))],
        "flow_matches_clusters": [{**sync_row("P->B", "C4", 0, 0, 0, 1, 0, at(1)),
                                   "source_cluster": "X"}],
        "epoch_runs_disjoint_downstream": [sync_row("P->B", "C5", 0, 0, 10, 5, 0, at(1)),
                                           sync_row("P->B", "C5", 0, 5, 12, 5, 0, at(1))],
        "natural_key_unique": [sync_row("P->B", "Payments", 0, 0, 0, 5, 0, at(1))],
        "no_configured_secret": [sync_row("P->B", "C6", 0, 0, 0, 1, 0, at(1),
                                          run_id=f"run-{SECRET}")],
    },
    CHECKPOINTS: {
        "source_offset_non_negative": [checkpoint_row(
            "cx1", "P->B", "forward", "H1", ("P", "Payments", -1), ("B", "P.Payments", 0), 0,
            version=1, at_=at(20))],
        "target_offset_non_negative": [checkpoint_row(
            "cx2", "P->B", "forward", "H2", ("P", "Payments", 1), ("B", "P.Payments", -5), 0,
            version=1, at_=at(20))],
        "status_known": [checkpoint_row(
            "cx3", "P->B", "forward", "H3", ("P", "Payments", 1), ("B", "P.Payments", 1), 0,
            version=1, at_=at(20), status="bogus")],
        "direction_known": [checkpoint_row(
            "cx4", "P->B", "sideways", "H4", ("P", "Payments", 1), ("B", "P.Payments", 1), 0,
            version=1, at_=at(20))],
        "untranslatable_iff_null": [checkpoint_row(
            "cx5", "P->B", "forward", "H5", ("P", "Payments", 1), ("B", "P.Payments", 1), 0,
            version=1, at_=at(20), status="untranslatable")],
        # G's forward checkpoint of p0 was 8 (cp-1); a later 3 without a rewind is backwards
        "never_backwards_unless_rewound": [checkpoint_row(
            "cx6", "P->B", "forward", "G", ("P", "Payments", 3), ("B", "P.Payments", 3), 0,
            version=1, at_=at(20))],
        "natural_key_unique": [checkpoint_row(
            "cp-1", "P->B", "forward", "G", ("P", "Payments", 8), ("B", "P.Payments", 8), 0,
            version=1, at_=at(4))],
        "no_configured_secret": [{**checkpoint_row(
            "cx7", "P->B", "forward", "H7", ("P", "Payments", 1), ("B", "P.Payments", 1), 0,
            version=1, at_=at(20)), "reason": f"sasl.password={SECRET}"}],
    },
    GROUP_OFFSETS: {
        "committed_offset_non_negative": [group_row("x1", "P", "H1", "Payments", 0, -1, at(20))],
        "natural_key_unique": [group_row("o1", "P", "G", "Payments", 0, 8, at(3))],
        "no_configured_secret": [group_row("x2", "P", "H2", "Payments", 0, 1, at(20),
                                           state=SECRET)],
    },
    RESUME_POINTS: {
        "offset_non_negative": [_resume("rx1", offset=-1, checkpoint_id=None)],
        "previous_offset_non_negative": [_resume("rx2", previous_offset=-3)],
        "reason_known": [_resume("rx3", reason="bogus")],
        "matches_a_checkpoint": [_resume("rx4", checkpoint_id="cp-missing")],
        "natural_key_unique": [_resume("rp-1")],
        "no_configured_secret": [_resume("rx5", group_id=f"G{SECRET}", checkpoint_id=None)],
    },
    OPERATIONS: {
        "kind_known": [_operation("ox1", kind="bogus")],
        "status_known": [_operation("ox2", status="bogus")],
        "seconds_to_ready_non_negative": [_operation("ox3", seconds_to_ready=-1.0)],
        "ready_after_start": [_operation("ox4", ready_at=at(29))],
        "completed_records_versions": [_operation("ox5", checkpoints_version=None)],
        "natural_key_unique": [_operation("op-failover")],
        "no_configured_secret": [_operation("ox6", message=f"password {SECRET}")],
    },
    OPERATION_RUNS: {
        "length_positive": [_span("ox-1", "E1", 0, 0, 0, 0)],
        "upstream_offset_non_negative": [_span("ox-2", "E2", 0, -1, 0, 1)],
        "downstream_offset_non_negative": [_span("ox-3", "E3", 0, 0, -1, 1)],
        "spans_of_one_epoch": [_span("ox-4", "E4", 0, 0, 10, 5), _span("ox-4", "E4", 1, 5, 12, 5)],
        "version_matches_operation": [_span("op-failover", "E5", 0, 0, 0, 1,
                                            offset_syncs_version=1)],
        "natural_key_unique": [_span("op-failover", "Payments", 0, 0, 100, 1)],
        "no_configured_secret": [_span("ox-6", f"E6{SECRET}", 0, 0, 0, 1)],
    },
    OFFSET_SYNC_SPANS: {
        "length_positive": [_snapshot_span("X->Y", "S1", 0, 0, 0, 0)],
        "upstream_offset_non_negative": [_snapshot_span("X->Y", "S2", 0, -1, 0, 1)],
        "downstream_offset_non_negative": [_snapshot_span("X->Y", "S3", 0, 0, -1, 1)],
        "spans_of_one_epoch": [_snapshot_span("X->Y", "S4", 0, 0, 10, 5),
                               _snapshot_span("X->Y", "S4", 1, 5, 12, 5)],
        "one_snapshot_per_flow": [_snapshot_span("P->B", "S5", 0, 0, 0, 1,
                                                 offset_syncs_version=1)],
        "within_recorded_runs": [_snapshot_span("P->B", "Payments", 9, 100, 100, 1)],
        "seek_floors_below_the_window": [_snapshot_span("P->B", "S6", 0, 0, 0, 1,
                                                        seek_upstream_offset=0,
                                                        seek_downstream_offset=0)],
        "natural_key_unique": [_snapshot_span("P->B", "Payments", 0, 0, 0, 15)],
        "no_configured_secret": [_snapshot_span("X->Y", f"S6{SECRET}", 0, 0, 0, 1)],
    },
    OPERATION_CHECKPOINTS: {
        "status_known": [_evidence_checkpoint("ox-1", "H1", status="bogus")],
        "direction_known": [_evidence_checkpoint("ox-2", "H2", direction="sideways")],
        "untranslatable_iff_null": [_evidence_checkpoint("ox-3", "H3",
                                                         status="untranslatable")],
        "version_matches_operation": [_evidence_checkpoint("op-failover", "H4",
                                                           checkpoints_version=7)],
        "natural_key_unique": [_evidence_checkpoint("op-failover", "G")],
        "no_configured_secret": [_evidence_checkpoint("ox-5", "H5",
                                                      reason=f"password {SECRET}")],
    },
    REPLICATION_PROGRESS: {
        "lag_non_negative": [_progress("R1", lag=-1)],
        "next_upstream_offset_non_negative": [_progress("R2", last_upstream_offset=-2,
                                                        next_upstream_offset=-1)],
        "next_is_last_plus_one": [_progress("R3", next_upstream_offset=12)],
        "natural_key_unique": [_progress("R4"), _progress("R4")],
        "no_configured_secret": [_progress(f"R5{SECRET}")],
    },
}


@pytest.fixture(scope="module")
def clean(spark, tmp_path_factory):
    info = reference_ledger(spark, str(tmp_path_factory.getbasetemp()))
    return info, validate_ledger(spark, config_for(info["location"]))


@pytest.fixture(scope="module")
def corrupted(spark, tmp_path_factory, clean):
    info, _ = clean
    location = str(tmp_path_factory.mktemp("corrupted") / "ledger")
    shutil.copytree(info["location"], location)  # Delta tables copy with their history
    ledger = Ledger(spark, location)
    for table, checks in CORRUPTIONS.items():
        append(ledger, table, [row for rows in checks.values() for row in rows])
    config_path = str(tmp_path_factory.mktemp("corrupted-config") / "offset-ledger.yaml")
    config = config_for(location, path=config_path)
    return config, validate_ledger(spark, config)


def test_every_check_is_targeted_by_a_corruption():
    for table in SCHEMAS:
        assert set(CORRUPTIONS[table]) == set(check_names(table)) - set(SCHEMA_CHECKS), table


def test_clean_ledger_passes(clean):
    _, report = clean
    assert report.success, report.summary()
    assert {r.table for r in report.results} == set(SCHEMAS)
    assert {r.table for r in report.results if r.check == "columns_match_definition"} == set(
        SCHEMAS)
    assert "OK:" in report.summary()


@pytest.mark.parametrize("table", list(CORRUPTIONS))
def test_corrupted_copy_fails_each_expectation(corrupted, table):
    _, report = corrupted
    # Appended rows cannot break a schema check (Delta enforces the columns on write).
    assert report.failed_checks(table) == set(check_names(table)) - set(SCHEMA_CHECKS), \
        report.summary()
    for result in report.results:
        if result.table == table and result.check not in SCHEMA_CHECKS:
            assert result.unexpected_count, (table, result.check)


def test_summary_is_readable_and_never_shows_the_secret(corrupted):
    _, report = corrupted
    summary = report.summary()
    assert "FAIL  epoch_runs_disjoint_downstream" in summary
    assert "FAIL  never_backwards_unless_rewound" in summary
    assert "FAILED:" in summary and "e.g." in summary
    assert SECRET not in summary
    assert SECRET not in json.dumps(report.to_dict(), default=str)
    assert "********" in summary


def test_validate_command_exit_codes(corrupted, capsys, tmp_path):
    config, _ = corrupted
    assert job.main(["--config", config.path, "--table", "operations"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  kind_known" in out and SECRET not in out
    missing = config_for(str(tmp_path / "nowhere"), path=str(tmp_path / "c.yaml"))
    assert job.main(["--config", missing.path]) == 2
    assert "ledger tables missing" in capsys.readouterr().err


def test_missing_ledger_raises(spark, tmp_path):
    with pytest.raises(LedgerError):
        validate_ledger(spark, config_for(str(tmp_path / "absent")))
