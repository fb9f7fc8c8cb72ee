"""``ledger maintain`` on a table past ``ZORDER_WHOLE_BYTES``: only the files written since the
last maintain are compacted, the history's files are left as they are, and every row, every
time-travel read and every translation answers the same before and after."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger import maintenance
from ledger.schemas import OFFSET_SYNCS, OFFSET_SYNCS_SCHEMA
from ledger.store import OffsetSyncStore
from ledger.tables import Ledger

pytestmark = [pytest.mark.spark, pytest.mark.slow]

T0 = dt.datetime(2026, 1, 1)
FLOW = "P->B"


def _runs(first_batch: int, batches: int) -> list[tuple]:
    """Three partitions: contiguous runs, an upstream gap every 7th batch, and partition 2's
    replica truncated (a new epoch) at batch 20."""
    rows = []
    for b in range(first_batch, first_batch + batches):
        for p in range(3):
            gap = 3 * (b // 7)
            d = 50 * (b - 20) if p == 2 and b >= 20 else 50 * b
            rows.append((FLOW, "P", "B", "Orders", "P.Orders", p, 1000 * p + 50 * b + gap, d,
                         50, "run-1", b, T0 + dt.timedelta(seconds=10 * b)))
    return rows


def _answers(ledger: Ledger) -> dict:
    store = OffsetSyncStore.load(ledger, FLOW)
    out = {}
    for p in range(3):
        for x in range(max(0, 1000 * p - 5), 1000 * p + 50 * 30 + 40, 7):
            out[("f", p, x)] = store.forward("Orders", p, x).offset
        for c in range(0, 50 * 30 + 20, 5):
            out[("r", p, c)] = store.reverse("Orders", p, c).offset
    return out


def test_a_large_table_compacts_only_its_new_files(spark, tmp_path, monkeypatch):
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    ledger.init()
    history = spark.createDataFrame(_runs(0, 24), OFFSET_SYNCS_SCHEMA).coalesce(1)
    ledger.append(OFFSET_SYNCS, history)
    big = set(ledger.read(OFFSET_SYNCS).inputFiles())
    for b in range(24, 30):  # the commits since the last maintain, one file each
        ledger.append(OFFSET_SYNCS, spark.createDataFrame(_runs(b, 1), OFFSET_SYNCS_SCHEMA)
                      .coalesce(1), txn_app_id="test", txn_version=b)
    version = ledger.version(OFFSET_SYNCS)
    rows = sorted(ledger.read(OFFSET_SYNCS).collect())
    answers = _answers(ledger)
    assert any(v is not None for v in answers.values())

    size = int(spark.sql(f"DESCRIBE DETAIL {ledger.identifier(OFFSET_SYNCS)}")
               .first()["sizeInBytes"])
    big_size = sum(f.stat().st_size for f in (tmp_path / "ledger" / OFFSET_SYNCS)
                   .glob("*.parquet") if any(str(f.name) in b for b in big))
    monkeypatch.setattr(maintenance, "ZORDER_WHOLE_BYTES", size - 1)  # past the limit
    monkeypatch.setattr(maintenance, "COMPACTED_BYTES", big_size)     # the history stays
    (report,) = maintenance.maintain(ledger, maintenance.Retention(30), (OFFSET_SYNCS,))

    assert report.incremental and report.zorder == ()
    assert "compacted, new files only" in report.line()
    assert (report.files_before, report.files_after) == (7, 2)
    files = set(ledger.read(OFFSET_SYNCS).inputFiles())
    assert big <= files  # the history's file was not rewritten
    assert sorted(ledger.read(OFFSET_SYNCS).collect()) == rows
    assert sorted(ledger.read(OFFSET_SYNCS, version=version).collect()) == rows
    assert _answers(ledger) == answers
    assert spark.conf.get("spark.databricks.delta.optimize.minFileSize", None) is None


def test_a_small_table_is_still_zordered_whole(spark, tmp_path):
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    ledger.init()
    for b in range(3):
        ledger.append(OFFSET_SYNCS, spark.createDataFrame(_runs(b, 1), OFFSET_SYNCS_SCHEMA))
    (report,) = maintenance.maintain(ledger, maintenance.Retention(30), (OFFSET_SYNCS,))
    assert not report.incremental and report.zorder == maintenance.ZORDER[OFFSET_SYNCS]
    assert report.files_after == 1
