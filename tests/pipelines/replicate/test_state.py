"""The driver's view of a flow: the same answer with delta-rs (no JVM) as with Spark."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest

from ledger import direct
from ledger.schemas import (
    OFFSET_SYNCS,
    OFFSET_SYNCS_SCHEMA,
    REPLICATION_PROGRESS,
    REPLICATION_PROGRESS_SCHEMA,
)
from ledger.tables import Ledger
from pipelines.replicate.plan import RecordedTail
from pipelines.replicate.state import read_flow_state, read_flow_state_direct

T0 = dt.datetime(2026, 3, 1, 12, 0, 0)


def _run(topic, partition, u, d, n, batch, seconds, flow="P->B"):
    return (flow, "P", "B", topic, f"P.{topic}", partition, u, d, n, "r1", batch,
            T0 + dt.timedelta(seconds=seconds))


def _progress(topic, partition, nxt, batch, seconds, flow="P->B"):
    return (flow, topic, f"P.{topic}", partition, nxt - 1, nxt, nxt, 0, None, None, batch,
            T0 + dt.timedelta(seconds=seconds))


@pytest.fixture(scope="module")
def ledger(spark, tmp_path_factory):
    location = str(tmp_path_factory.mktemp("state") / "ledger")
    ledger = Ledger(spark, location)
    ledger.init()
    runs = [
        # orders[0]: three batches; a rewind in batch 2 (upstream goes back), resumed in 3.
        _run("orders", 0, 0, 0, 10, 0, 0), _run("orders", 0, 10, 10, 5, 1, 10),
        _run("orders", 0, 4, 15, 3, 2, 20), _run("orders", 0, 7, 18, 2, 3, 30),
        # orders[1]: two runs in one batch (an upstream gap): the later downstream wins.
        _run("orders", 1, 0, 0, 3, 1, 10), _run("orders", 1, 9, 3, 4, 1, 10),
        # events[0]: only an old batch, before every progress hint.
        _run("events", 0, 0, 0, 8, 0, 0),
        # Another flow's runs are never part of the answer.
        _run("orders", 0, 0, 0, 999, 7, 40, flow="B->P"),
    ]
    ledger.append(OFFSET_SYNCS, spark.createDataFrame(runs, OFFSET_SYNCS_SCHEMA))
    ledger.append(REPLICATION_PROGRESS, spark.createDataFrame([
        _progress("orders", 0, 9, 3, 30), _progress("orders", 1, 13, 1, 10)],
        REPLICATION_PROGRESS_SCHEMA))
    return ledger


@pytest.mark.spark
@pytest.mark.parametrize("partitions", [
    [("orders", 0), ("orders", 1)],              # every hinted partition: reads since a hint
    [("orders", 0), ("orders", 1), ("events", 0)],  # one without a hint: the full history
    [("orders", 0)],
    [("missing", 0)],
])
def test_direct_read_answers_what_spark_answers(ledger, partitions):
    by_spark = read_flow_state(ledger, "P->B", partitions)
    by_rust = read_flow_state_direct(ledger.location, "P->B", partitions)

    assert by_rust is not None and by_rust.tables_verified
    assert by_rust.tails == by_spark.tails
    assert by_rust.last_batch == by_spark.last_batch
    assert by_rust.newest_written_at == by_spark.newest_written_at
    assert by_spark.tails.get(("orders", 0)) == RecordedTail(9, 20)
    if ("orders", 1) in by_spark.tails:
        assert by_spark.tails[("orders", 1)] == RecordedTail(13, 7)


@pytest.mark.spark
def test_direct_read_of_a_full_history(ledger):
    state = read_flow_state_direct(ledger.location, "P->B", [("events", 0)])
    assert state is not None
    assert state.tails == {("orders", 0): RecordedTail(9, 20), ("orders", 1): RecordedTail(13, 7),
                           ("events", 0): RecordedTail(8, 8)}
    assert state.last_batch == 3
    assert state.newest_written_at == (T0 + dt.timedelta(seconds=30)).replace(tzinfo=dt.UTC)


@pytest.mark.spark
def test_a_damaged_or_foreign_ledger_is_left_to_spark(ledger, tmp_path):
    copy = tmp_path / "ledger"
    shutil.copytree(ledger.location, copy)
    (copy / OFFSET_SYNCS / "_delta_log" / f"{0:020d}.json").unlink()
    assert read_flow_state_direct(str(copy), "P->B", [("orders", 0)]) is None

    truncated = tmp_path / "truncated"
    shutil.copytree(ledger.location, truncated)
    for f in (truncated / OFFSET_SYNCS).glob("*.parquet"):
        with f.open("r+b") as fh:
            fh.truncate(100)
    assert read_flow_state_direct(str(truncated), "P->B", [("orders", 0)]) is None

    # A catalog schema or an object store: Spark has the catalog and the credentials.
    assert direct.query("ledger_db", {"s": OFFSET_SYNCS}, "SELECT 1") is direct.UNAVAILABLE
    assert direct.query("s3://bucket/ledger", {"s": OFFSET_SYNCS},
                        "SELECT 1") is direct.UNAVAILABLE


@pytest.mark.unit
def test_no_ledger_seen_here_is_left_to_spark(tmp_path, monkeypatch):
    # A missing folder may be a new ledger, or one on the filesystem Spark resolves the path
    # on: never "nothing recorded" (that would copy the whole history again).
    assert read_flow_state_direct(str(tmp_path / "nothing"), "P->B", [("orders", 0)]) is None
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "16.4")
    assert direct.local_path("/mnt/ledger") is None  # DBFS for Spark, not the driver's disk
    assert direct.local_path("file:///mnt/ledger") == Path("/mnt/ledger")


@pytest.mark.unit
def test_a_log_is_complete_from_its_last_checkpoint_or_from_version_0(tmp_path):
    log = tmp_path / "_delta_log"
    log.mkdir()

    def commit(*versions):
        for v in versions:
            (log / f"{v:020d}.json").write_text("{}")

    commit(0, 1, 2)
    assert direct.log_complete(tmp_path)
    (log / f"{1:020d}.json").unlink()
    assert not direct.log_complete(tmp_path)  # a hole
    # Log cleanup after a checkpoint at 10: versions 11.. must all be there, older may go.
    for p in log.glob("*.json"):
        p.unlink()
    (log / "_last_checkpoint").write_text('{"version": 10, "size": 3}')
    commit(11, 12)
    assert not direct.log_complete(tmp_path)  # the checkpoint it names is missing
    (log / f"{10:020d}.checkpoint.parquet").write_bytes(b"")
    assert direct.log_complete(tmp_path)
    commit(14)
    assert not direct.log_complete(tmp_path)
