"""Retention as table properties, and ``ledger maintain`` on a real Delta ledger."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality

from ledger import maintenance
from ledger.config import (
    DEFAULT_AUDIT_RETENTION_DAYS,
    DEFAULT_STREAMED_RETENTION_DAYS,
    ConfigError,
    config_from_mapping,
)
from ledger.schemas import (
    CHECKPOINTS,
    GROUP_OFFSETS,
    OFFSET_SYNC_SPANS,
    OFFSET_SYNCS,
    OFFSET_SYNCS_SCHEMA,
    OPERATION_RUNS,
    OPERATIONS,
    REPLICATION_PROGRESS,
    RESUME_POINTS,
    SCHEMAS,
)
from ledger.span_snapshots import SpanSnapshot
from ledger.tables import Ledger
from pipelines import cli

pytestmark = [pytest.mark.spark, pytest.mark.slow]

T0 = dt.datetime(2026, 1, 1)


def _append_batches(spark, ledger: Ledger, batches: int, start: int = 0) -> None:
    for b in range(start, start + batches):
        rows = [("P->B", "P", "B", "Payments", "P.Payments", p, 100 * b, 100 * b, 100,
                 "run-1", b, T0 + dt.timedelta(seconds=10 * b)) for p in range(3)]
        ledger.append(OFFSET_SYNCS, spark.createDataFrame(rows, OFFSET_SYNCS_SCHEMA),
                      txn_app_id="test", txn_version=b)


def test_retention_is_set_once_and_changes_with_the_configuration(spark, tmp_path):
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    ledger.init()
    thirty = maintenance.Retention(audit_days=30)
    assert all(maintenance.apply_retention(ledger, thirty).values())
    versions = {name: ledger.version(name) for name in SCHEMAS}
    assert not any(maintenance.apply_retention(ledger, thirty).values())
    assert {name: ledger.version(name) for name in SCHEMAS} == versions
    # the evidence keeps the audit retention; the streamed tables a week; the span snapshots
    # and the replication progress a day (never time-travelled)
    for name, days in ((OPERATIONS, 30), (OPERATION_RUNS, 30), (OFFSET_SYNCS, 7),
                       (CHECKPOINTS, 7), (GROUP_OFFSETS, 7), (RESUME_POINTS, 7),
                       (OFFSET_SYNC_SPANS, 1), (REPLICATION_PROGRESS, 1)):
        props = maintenance.table_properties(ledger, name)
        assert props["delta.logRetentionDuration"] == f"interval {days} days", name
        assert props["delta.deletedFileRetentionDuration"] == f"interval {days} days", name
    # a longer streamed retention applies up to the audit retention, no further
    assert maintenance.apply_retention(ledger, maintenance.Retention(45, 400), (
        OFFSET_SYNCS, OFFSET_SYNC_SPANS)) == {OFFSET_SYNCS: True, OFFSET_SYNC_SPANS: False}
    assert (maintenance.table_properties(ledger, OFFSET_SYNCS)
            ["delta.logRetentionDuration"]) == "interval 45 days"
    # a retention below a day wins everywhere
    assert maintenance.apply_retention(ledger, maintenance.Retention(0.5), (
        OFFSET_SYNC_SPANS, CHECKPOINTS)) == {OFFSET_SYNC_SPANS: True, CHECKPOINTS: True}
    for name in (OFFSET_SYNC_SPANS, CHECKPOINTS):
        assert (maintenance.table_properties(ledger, name)
                ["delta.deletedFileRetentionDuration"]) == "interval 43200 seconds"


def test_maintain_compacts_keeps_every_row_and_time_travel(spark, tmp_path):
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    ledger.init()
    _append_batches(spark, ledger, 6)
    before = ledger.read(OFFSET_SYNCS)
    expected_latest = before.collect()
    version_3 = ledger.read(OFFSET_SYNCS, version=3).collect()

    # Two tables: one Z-ordered, one only compacted (each table costs a full OPTIMIZE+VACUUM).
    reports = {r.table: r for r in maintenance.maintain(ledger, maintenance.Retention(30),
                                                        (OFFSET_SYNCS, CHECKPOINTS))}

    syncs = reports[OFFSET_SYNCS]
    assert syncs.files_before >= 6 and syncs.files_after == 1
    assert syncs.zorder == ("topic", "partition", "downstream_offset")
    assert syncs.version_after > syncs.version_before
    assert_df_equality(spark.createDataFrame(expected_latest, OFFSET_SYNCS_SCHEMA),
                       ledger.read(OFFSET_SYNCS), ignore_row_order=True, ignore_nullable=True)
    # VACUUM kept what the retention promises: an older version still reads in full.
    assert sorted(ledger.read(OFFSET_SYNCS, version=3).collect()) == sorted(version_3)
    assert set(reports) == {OFFSET_SYNCS, CHECKPOINTS}
    # An empty table has nothing to compact.
    assert not reports[CHECKPOINTS].optimized and "empty" in reports[CHECKPOINTS].line()

    # Nothing written since: no second OPTIMIZE (it would rewrite the same rows into the same
    # file), and no version for it.
    (again,) = maintenance.maintain(ledger, maintenance.Retention(30), (OFFSET_SYNCS,),
                                       vacuum=False)
    assert not again.optimized and again.zorder == ()
    assert (again.files_after, again.version_after) == (1, again.version_before)
    assert "unchanged since its last OPTIMIZE" in again.line()
    # A commit after it: Z-ordered again.
    _append_batches(spark, ledger, 1, start=6)
    (written,) = maintenance.maintain(ledger, maintenance.Retention(30), (OFFSET_SYNCS,),
                                       vacuum=False)
    assert written.optimized and written.zorder == maintenance.ZORDER[OFFSET_SYNCS]
    assert written.files_before > 1 and written.files_after == 1


def test_retention_days_keys(tmp_path):
    base = {"clusters": {"P": {"bootstrap.servers": "p:1"}, "B": {"bootstrap.servers": "b:1"}},
            "flows": {"P->B": True}}
    default = config_from_mapping(base)
    assert default.audit_retention_days == DEFAULT_AUDIT_RETENTION_DAYS
    assert default.streamed_retention_days == DEFAULT_STREAMED_RETENTION_DAYS == 7
    assert maintenance.Retention.of(default) == maintenance.Retention()
    configured = config_from_mapping({**base, "ledger": {"audit.retention.days": 90,
                                                         "streamed.retention.days": 14}})
    assert maintenance.Retention.of(configured) == maintenance.Retention(90, 14)
    for key in ("audit", "streamed"):
        with pytest.raises(ConfigError, match=rf"ledger\.{key}\.retention\.days"):
            config_from_mapping({**base, f"ledger.{key}.retention.days": 0})


def test_maintain_and_init_from_the_cli(spark, tmp_path, capsys):
    import yaml

    path = tmp_path / "offset-ledger.yaml"
    path.write_text(yaml.safe_dump({
        "clusters": {"P": {"bootstrap.servers": "p:1"}, "B": {"bootstrap.servers": "b:1"}},
        "flows": {"P->B": True},
        "ledger": {"location": str(tmp_path / "ledger"), "audit.retention.days": 60}}))
    assert cli.main(["ledger", "maintain", "--config", str(path)]) == 2
    assert "ledger tables missing" in capsys.readouterr().err
    assert cli.main(["ledger", "init", "--config", str(path)]) == 0
    assert "retention 60 days" in capsys.readouterr().out
    assert cli.main(["ledger", "maintain", "--config", str(path), "--table", OFFSET_SYNCS]) == 0
    out = capsys.readouterr().out
    assert ("retention 60 days (ledger.audit.retention.days), 7 for checkpoints, group_offsets,"
            " offset_syncs, resume_points (ledger.streamed.retention.days), 1 for "
            "offset_sync_spans, replication_progress") in out
    assert [line.split()[0] for line in out.splitlines() if "files" in line] == [OFFSET_SYNCS]
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    props = maintenance.table_properties(ledger, OFFSET_SYNCS)
    assert props["delta.deletedFileRetentionDuration"] == "interval 7 days"
    # the span refresh alone (what may run hourly): one line per flow with runs
    runs = [("P->B", "P", "B", "T", "P.T", p, 10 * i, 10 * i, 10, "r", i,
             dt.datetime(2026, 1, 1) + dt.timedelta(seconds=10 * i))
            for i in range(5) for p in range(2)]
    ledger.append(OFFSET_SYNCS, spark.createDataFrame(runs, OFFSET_SYNCS_SCHEMA))
    assert cli.main(["ledger", "maintain", "--config", str(path), "--no-vacuum",
                     "--table", OFFSET_SYNC_SPANS]) == 0
    out = capsys.readouterr().out
    assert (f"{OFFSET_SYNC_SPANS:22} flow P->B: 2 spans of 2 partitions at offset_syncs version "
            f"{ledger.version(OFFSET_SYNCS)} (from the raw runs)") in out
    snapshot = SpanSnapshot.read(ledger, "P->B")
    assert snapshot is not None and snapshot.rows[("T", 1)][0]["length"] == 50
    # again: incremental from the snapshot; --rebuild-spans: from the raw runs (F22's repair)
    assert cli.main(["ledger", "maintain", "--config", str(path), "--no-vacuum",
                     "--table", OFFSET_SYNC_SPANS]) == 0
    assert "(from version" in capsys.readouterr().out
    assert cli.main(["ledger", "maintain", "--config", str(path), "--no-vacuum",
                     "--table", OFFSET_SYNC_SPANS, "--rebuild-spans"]) == 0
    assert "2 spans of 2 partitions" in (out := capsys.readouterr().out)
    assert "(from the raw runs)" in out
