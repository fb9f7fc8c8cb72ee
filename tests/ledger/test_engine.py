"""ledger.engine: delta-rs and Spark read and commit a ledger alike; Spark takes over where
delta-rs cannot, and names the damage."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from ledger.engine import LedgerEngine, literal, timestamp
from ledger.schemas import GROUP_OFFSETS, REPLICATION_PROGRESS
from ledger.tables import Ledger, LedgerError

T = dt.datetime(2026, 11, 25, 3, 0, 0)


def no_spark():
    raise AssertionError("delta-rs was expected to read and commit this ledger")


@pytest.mark.unit
def test_sql_literals_survive_the_template_and_name_their_zone():
    assert literal("it's {G}").format() == "'it''s {G}'"
    assert timestamp(T.replace(tzinfo=dt.UTC)) == "TIMESTAMP '2026-11-25 03:00:00.000000Z'"
    assert timestamp(T) == timestamp(T.astimezone(dt.UTC))  # naive: local time, as Spark


@pytest.mark.unit
def test_the_engine_of_a_path_a_catalog_and_a_spark_ledger(tmp_path):
    assert LedgerEngine(str(tmp_path / "ledger")).name == "delta-rs"
    assert LedgerEngine("main.offset_ledger").name == "spark"
    assert LedgerEngine(str(tmp_path / "ledger"), engine="spark").name == "spark"


def observation(i: int, offset: int) -> dict:
    return {"observation_id": f"o{i}", "cluster": "P", "group_id": "G{1}", "topic": "T",
            "partition": 0, "committed_offset": offset, "group_state": "Empty",
            "observed_at": T + dt.timedelta(seconds=i)}


@pytest.mark.spark
def test_both_engines_commit_and_read_alike(spark, tmp_path):
    location = str(tmp_path / "ledger")
    Ledger(spark, location).init()
    direct = LedgerEngine(location, no_spark)
    direct.init()  # every table reads with delta-rs: nothing to create, no Spark
    direct.append(GROUP_OFFSETS, [observation(0, 5)])
    direct.append(GROUP_OFFSETS, [observation(1, 7)], txn=("bench", 1))
    direct.append(GROUP_OFFSETS, [observation(1, 7)], txn=("bench", 1))  # a retry: nothing
    progress = {"flow": "P->B", "topic": "T", "replica_topic": "P.T", "partition": 0,
                "last_upstream_offset": 9, "next_upstream_offset": 10,
                "source_end_offset": 10, "lag": 0, "newest_record_timestamp": T,
                "record_age_ms": 0, "batch_id": 3, "updated_at": T}
    direct.merge(REPLICATION_PROGRESS, [progress])
    direct.merge(REPLICATION_PROGRESS, [{**progress, "next_upstream_offset": 12}])
    assert direct.direct and direct.declined is None
    by_spark = LedgerEngine.of(Ledger(spark, location))
    sql = ("SELECT observation_id, committed_offset, observed_at FROM {g} "
           f"WHERE group_id = {literal('G{1}')} ORDER BY observation_id")
    assert direct.query(sql, g=GROUP_OFFSETS) == by_spark.query(sql, g=GROUP_OFFSETS) == [
        {"observation_id": "o0", "committed_offset": 5, "observed_at": T},
        {"observation_id": "o1", "committed_offset": 7, "observed_at": T + dt.timedelta(1 / 86400)}]
    assert [r["next_upstream_offset"] for r in by_spark.query(
        "SELECT * FROM {p}", p=REPLICATION_PROGRESS)] == [12]
    assert direct.version(GROUP_OFFSETS) == by_spark.version(GROUP_OFFSETS)
    assert direct.query("SELECT count(*) AS n FROM {g}", {"g": 1}, g=GROUP_OFFSETS) == [
        {"n": 1}]  # time travel: version 1 held the first append only


@pytest.mark.spark
def test_a_damaged_table_goes_to_spark_which_names_the_damage(spark, tmp_path):
    location = str(tmp_path / "ledger")
    Ledger(spark, location).init()
    LedgerEngine(location).append(GROUP_OFFSETS, [observation(0, 5)])
    (Path(location) / GROUP_OFFSETS / "_delta_log" / "00000000000000000000.json").unlink()
    engine = LedgerEngine(location, lambda: spark)
    with pytest.raises(LedgerError, match=f"ledger table {GROUP_OFFSETS} at .* is damaged"):
        engine.query("SELECT * FROM {g}", g=GROUP_OFFSETS)
    assert not engine.direct and engine.declined == "delta-rs cannot read a table"
