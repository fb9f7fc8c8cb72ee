"""Typed ledger records: fields match the table schemas, rows round-trip."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from ledger import records, schemas

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 1, 1, 12, 0, 0)


@pytest.mark.parametrize("cls", [records.CheckpointRecord, records.ResumePoint,
                                 records.Operation, records.ProgressRecord])
def test_fields_are_the_table_columns_in_order(cls):
    assert [f.name for f in dataclasses.fields(cls)] == cls.schema().fieldNames()


def test_checkpoint_round_trip_keeps_untranslatable_distinct():
    cp = records.CheckpointRecord(
        "c1", "P->B", "forward", "G", "P", "Payments", 0, 42, "B", "P.Payments", None,
        "untranslatable", "no offset-syncs", False, 7, NOW)
    row = cp.to_row()
    assert list(row) == schemas.CHECKPOINTS_SCHEMA.fieldNames()
    assert row["target_offset"] is None and not cp.translated
    back = records.CheckpointRecord.from_row({**row, "extra": 1})
    assert back == cp


def test_operation_subscribe_topics_list_in_row_tuple_in_record():
    op = records.Operation("o1", "failover", "G", "P", "B", "completed",
                           ("Payments", "P.Payments"), 1, 2, 3, 4, True, NOW, NOW, 0.5, None)
    row = op.to_row()
    assert row["subscribe_topics"] == ["Payments", "P.Payments"]
    assert records.Operation.from_row(row) == op


def test_from_rows_passes_records_through_and_replace_copies():
    cp = records.CheckpointRecord(
        "c1", "P->B", "forward", "G", "P", "Payments", 0, 42, "B", "P.Payments", 40,
        "translated", None, False, 7, NOW)
    assert records.CheckpointRecord.from_rows([cp, cp.to_row()]) == [cp, cp]
    held = cp.replace(status="held", target_offset=41)
    assert (held.status, held.target_offset, cp.status, cp.target_offset) == (
        "held", 41, "translated", 40)
    assert records.rows([cp]) == [cp.to_row()]


def test_from_row_names_missing_columns():
    with pytest.raises(ValueError, match="lacks"):
        records.ProgressRecord.from_row({"flow": "P->B"})
