"""The ledger's Delta tables on real Spark: init, idempotent writes, time travel, history."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality

from ledger.schemas import OFFSET_SYNCS, OFFSET_SYNCS_SCHEMA, SCHEMAS
from ledger.tables import Ledger, LedgerError

pytestmark = pytest.mark.spark

NOW = dt.datetime(2026, 1, 1, 12, 0, 0)


def sync_rows(spark, *runs):
    return spark.createDataFrame(
        [("P->B", "P", "B", "Payments", "P.Payments", 0, u, d, n, "run-1", batch, NOW)
         for u, d, n, batch in runs], OFFSET_SYNCS_SCHEMA)


def test_init_creates_every_table_and_is_idempotent(spark, tmp_path):
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    assert all(ledger.init().values())
    versions = {name: ledger.version(name) for name in SCHEMAS}
    assert not any(ledger.init().values())
    assert {name: ledger.version(name) for name in SCHEMAS} == versions
    for name, schema in SCHEMAS.items():
        assert [f.name for f in ledger.read(name).schema] == [f.name for f in schema]


def test_a_local_ledger_is_created_by_delta_rs_and_spark_writes_it(spark, tmp_path):
    """The tables of a local path come from delta-rs (no Spark write: milliseconds, not
    seconds per table); Spark then appends to them and reads them as its own."""
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    assert all(ledger.init().values())
    for name in SCHEMAS:
        (first,) = spark.sql(f"DESCRIBE HISTORY {ledger.identifier(name)}").collect()
        # Spark's own empty write would be a WRITE; delta-rs records its CREATE TABLE
        assert (first["version"], first["operation"]) == (0, "CREATE TABLE"), name
    ledger.append(OFFSET_SYNCS, sync_rows(spark, (100, 500, 4, 0)), "flow-P->B", 0)
    assert ledger.read(OFFSET_SYNCS).count() == 1


class _Conf:
    def __init__(self, default_fs):
        self.default_fs = default_fs

    def get(self, key):
        assert key == "fs.defaultFS"
        return self.default_fs


@pytest.mark.unit
@pytest.mark.parametrize(("location", "default_fs", "local"), [
    ("/data/ledger", "file:///", True), ("/data/ledger", None, True),
    ("/data/ledger", "hdfs://nn:8020", False), ("file:///data/ledger", "hdfs://nn:8020", True),
    ("/data/ledger", "no gateway", False)])
def test_delta_rs_creates_only_where_spark_reads_the_same_disk(location, default_fs, local):
    from types import SimpleNamespace

    if default_fs == "no gateway":  # Spark Connect: no JVM behind the session object
        spark = SimpleNamespace(sparkContext=SimpleNamespace())
    else:
        conf = _Conf(default_fs)
        spark = SimpleNamespace(sparkContext=SimpleNamespace(_jsc=SimpleNamespace(
            hadoopConfiguration=lambda: conf)))
    assert Ledger(spark, location)._spark_reads_local_paths() is local


def test_delta_time_travel_and_history_through_sql(spark, tmp_path):
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    ledger.init()
    ledger.append(OFFSET_SYNCS, sync_rows(spark, (100, 500, 4, 0)), "flow-P->B", 0)
    ledger.append(OFFSET_SYNCS, sync_rows(spark, (110, 504, 2, 1)), "flow-P->B", 1)
    table = ledger.identifier(OFFSET_SYNCS)
    v1 = spark.sql(f"SELECT upstream_offset, downstream_offset, length FROM {table} "
                   "VERSION AS OF 1")
    expected = spark.createDataFrame([(100, 500, 4)],
                                     "upstream_offset long, downstream_offset long, length long")
    assert_df_equality(v1, expected, ignore_nullable=True)
    assert spark.sql(f"SELECT count(*) c FROM {table}").first()["c"] == 2
    history = spark.sql(f"DESCRIBE HISTORY {table}").orderBy("version").collect()
    assert [r["version"] for r in history] == [0, 1, 2]
    assert [r["operation"] for r in history][1:] == ["WRITE", "WRITE"]


def test_append_with_same_txn_writes_nothing_twice(spark, tmp_path):
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    ledger.init()
    rows = sync_rows(spark, (0, 0, 10, 7))
    ledger.append(OFFSET_SYNCS, rows, "flow-P->B", 7)
    ledger.append(OFFSET_SYNCS, rows, "flow-P->B", 7)  # a re-run micro-batch
    assert ledger.read(OFFSET_SYNCS).count() == 1
    assert ledger.version(OFFSET_SYNCS) == 1


def test_merge_upserts_on_natural_key(spark, tmp_path):
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    ledger.init()
    ledger.merge(OFFSET_SYNCS, sync_rows(spark, (0, 0, 10, 1)))
    ledger.merge(OFFSET_SYNCS, sync_rows(spark, (0, 0, 10, 1)))
    assert ledger.read(OFFSET_SYNCS).count() == 1


def test_missing_table_is_a_clear_error(spark, tmp_path):
    ledger = Ledger(spark, str(tmp_path / "nothing-here"))
    with pytest.raises(LedgerError,
                       match=r"ledger tables missing at .*: offset_syncs \(run `offset-ledger"):
        ledger.require(OFFSET_SYNCS)
    with pytest.raises(LedgerError, match="cannot read ledger table offset_syncs"):
        ledger.read(OFFSET_SYNCS).count()


def test_corrupt_table_is_a_clear_error(spark, tmp_path):
    location = tmp_path / "ledger"
    ledger = Ledger(spark, str(location))
    ledger.init()
    for f in (location / OFFSET_SYNCS / "_delta_log").glob("*.json"):
        f.write_text("{not json")
    with pytest.raises(LedgerError, match=r"ledger table offset_syncs .* is damaged"):
        ledger.require(OFFSET_SYNCS, verify=True)


def test_wrong_schema_is_refused_by_init(spark, tmp_path):
    location = tmp_path / "ledger"
    spark.createDataFrame([(1,)], "x int").write.format("delta").save(
        str(location / OFFSET_SYNCS))
    with pytest.raises(LedgerError, match="does not match the ledger schema"):
        Ledger(spark, str(location)).init()
