"""delta-rs commits of a path ledger: Spark reads them, and Spark's txn rule holds across both."""

from __future__ import annotations

import datetime as dt
import itertools
import shutil
from pathlib import Path

import pytest
from chispa import assert_df_equality

from ledger import commits
from ledger.schemas import (
    NATURAL_KEYS,
    OFFSET_SYNCS,
    OFFSET_SYNCS_SCHEMA,
    REPLICATION_PROGRESS,
    REPLICATION_PROGRESS_SCHEMA,
)

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
APP = "offset-ledger-replicate-P->B"


def _run(u, d, n, batch, partition=0):
    return {"flow": "P->B", "source_cluster": "P", "target_cluster": "B", "topic": "orders",
            "replica_topic": "P.orders", "partition": partition, "upstream_offset": u,
            "downstream_offset": d, "length": n, "run_id": "r1", "batch_id": batch,
            "written_at": T0 + dt.timedelta(seconds=batch)}


def _progress(partition, nxt, batch):
    return {"flow": "P->B", "topic": "orders", "replica_topic": "P.orders",
            "partition": partition, "last_upstream_offset": nxt - 1,
            "next_upstream_offset": nxt, "source_end_offset": nxt + 5, "lag": 5,
            "newest_record_timestamp": T0, "record_age_ms": 7, "batch_id": batch,
            "updated_at": T0 + dt.timedelta(seconds=batch)}


@pytest.fixture
def ledger(replication_ledger):
    return replication_ledger


def _rows(ledger, name):
    return sorted(tuple(r) for r in ledger.read(name).collect())


@pytest.mark.spark
def test_append_is_read_by_spark_and_a_repeated_txn_writes_nothing(ledger, spark):
    runs = [_run(0, 0, 10, 0), _run(12, 10, 5, 0)]

    first = commits.append_with_txn(ledger.location, OFFSET_SYNCS, runs, app_id=APP, version=0)
    again = commits.append_with_txn(ledger.location, OFFSET_SYNCS, [_run(99, 99, 1, 0)],
                                    app_id=APP, version=0)

    assert first is commits.COMMITTED
    assert again is commits.ALREADY_RECORDED
    expected = spark.createDataFrame([tuple(r.values()) for r in runs], OFFSET_SYNCS_SCHEMA)
    assert_df_equality(ledger.read(OFFSET_SYNCS), expected, ignore_row_order=True,
                       ignore_nullable=True)
    # Spark's own txnAppId/txnVersion rule sees the pair delta-rs committed.
    ledger.append(OFFSET_SYNCS, spark.createDataFrame([tuple(_run(50, 50, 1, 0).values())],
                                                      OFFSET_SYNCS_SCHEMA),
                  txn_app_id=APP, txn_version=0)
    assert ledger.read(OFFSET_SYNCS).count() == 2


@pytest.mark.spark
def test_delta_rs_respects_a_pair_spark_committed(ledger, spark):
    ledger.append(OFFSET_SYNCS, spark.createDataFrame([tuple(_run(0, 0, 3, 4).values())],
                                                      OFFSET_SYNCS_SCHEMA),
                  txn_app_id=APP, txn_version=4)

    assert commits.append_with_txn(ledger.location, OFFSET_SYNCS, [_run(3, 3, 1, 3)],
                                   app_id=APP, version=3) is commits.ALREADY_RECORDED
    assert commits.append_with_txn(ledger.location, OFFSET_SYNCS, [_run(3, 3, 1, 5)],
                                   app_id=APP, version=5) is commits.COMMITTED
    assert [r[6] for r in _rows(ledger, OFFSET_SYNCS)] == [0, 3]


@pytest.mark.spark
def test_a_concurrent_commit_of_the_same_pair_fails_the_later_one(ledger, monkeypatch):
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    path = str(Path(ledger.location) / OFFSET_SYNCS)
    winner = DeltaTable(path)  # read at the same version as the loser will be
    write_deltalake(winner, commits._arrow(winner, [_run(0, 0, 2, 7)]), mode="append",
                    commit_properties=CommitProperties(
                        app_transactions=[Transaction(APP, 7)]))
    stale = DeltaTable(path, version=winner.version() - 1)
    # The loser read the table before the winner committed.
    monkeypatch.setattr(commits, "_table", lambda location, name, opened=None: stale)

    with pytest.raises(commits.CommitConflict, match="at the same time"):
        commits.append_with_txn(ledger.location, OFFSET_SYNCS, [_run(0, 0, 2, 7)],
                                app_id=APP, version=7)
    monkeypatch.undo()
    assert len(_rows(ledger, OFFSET_SYNCS)) == 1


@pytest.mark.spark
def test_merge_upserts_on_the_natural_key(ledger, spark):
    keys = NATURAL_KEYS[REPLICATION_PROGRESS]
    assert commits.merge_on_keys(ledger.location, REPLICATION_PROGRESS,
                                 [_progress(0, 10, 0), _progress(1, 4, 0)],
                                 keys) is commits.COMMITTED
    assert commits.merge_on_keys(ledger.location, REPLICATION_PROGRESS,
                                 [_progress(0, 25, 1), _progress(2, 3, 1)],
                                 keys) is commits.COMMITTED

    expected = spark.createDataFrame(
        [tuple(_progress(0, 25, 1).values()), tuple(_progress(1, 4, 0).values()),
         tuple(_progress(2, 3, 1).values())], REPLICATION_PROGRESS_SCHEMA)
    assert_df_equality(ledger.read(REPLICATION_PROGRESS), expected, ignore_row_order=True,
                       ignore_nullable=True)


@pytest.mark.spark
def test_a_ledger_delta_rs_cannot_write_is_left_to_spark(ledger, tmp_path, monkeypatch):
    # A catalog schema, an object store, a Hadoop default filesystem: nothing written here.
    for location in ("main.offset_ledger", "s3://bucket/ledger"):
        assert commits.append_with_txn(location, OFFSET_SYNCS, [_run(0, 0, 1, 0)],
                                       app_id=APP, version=0) is commits.UNAVAILABLE
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    assert commits.merge_on_keys(ledger.location, REPLICATION_PROGRESS, [_progress(0, 1, 0)],
                                 NATURAL_KEYS[REPLICATION_PROGRESS]) is commits.UNAVAILABLE
    monkeypatch.delenv("HADOOP_CONF_DIR")
    # A log with a hole (a commit file lost): never committed on top of it.
    ledger.append(OFFSET_SYNCS, ledger.spark.createDataFrame(
        [tuple(_run(0, 0, 1, 0).values())], OFFSET_SYNCS_SCHEMA))
    ledger.append(OFFSET_SYNCS, ledger.spark.createDataFrame(
        [tuple(_run(1, 1, 1, 1).values())], OFFSET_SYNCS_SCHEMA))
    log = Path(ledger.location) / OFFSET_SYNCS / "_delta_log"
    shutil.move(log / f"{1:020d}.json", tmp_path / "lost.json")
    assert commits.append_with_txn(ledger.location, OFFSET_SYNCS, [_run(2, 2, 1, 2)],
                                   app_id=APP, version=2) is commits.UNAVAILABLE
    assert not (log / f"{3:020d}.json").exists()


@pytest.mark.spark
def test_checkpoints_come_at_sparks_interval(ledger):
    from ledger import direct

    for batch in range(11):  # versions 1..11 after Spark's create at version 0
        run = _run(batch, batch, 1, batch)
        assert commits.append_with_txn(ledger.location, OFFSET_SYNCS, [run], app_id=APP,
                                       version=batch) is commits.COMMITTED
    table = Path(ledger.location) / OFFSET_SYNCS
    log = table / "_delta_log"

    assert sorted(p.name for p in log.glob("*.checkpoint.parquet")) == [
        f"{10:020d}.checkpoint.parquet"]
    assert direct.log_complete(table)
    assert ledger.read(OFFSET_SYNCS).count() == 11


@pytest.mark.spark
def test_an_append_over_a_concurrent_compaction_commits(ledger, spark, monkeypatch):
    from deltalake import DeltaTable

    for batch in range(3):
        commits.append_with_txn(ledger.location, OFFSET_SYNCS, [_run(batch, batch, 1, batch)],
                                app_id=APP, version=batch)
    path = str(Path(ledger.location) / OFFSET_SYNCS)
    before = DeltaTable(path)  # the append reads the table, then `ledger maintain` compacts
    spark.sql(f"OPTIMIZE delta.`{path}`").collect()
    monkeypatch.setattr(commits, "_table", lambda location, name, opened=None: before)

    outcome = commits.append_with_txn(ledger.location, OFFSET_SYNCS, [_run(3, 3, 1, 3)],
                                      app_id=APP, version=3)

    assert outcome is commits.COMMITTED
    assert sorted(r[6] for r in _rows(ledger, OFFSET_SYNCS)) == [0, 1, 2, 3]


@pytest.mark.spark
def test_merges_of_two_flows_at_once_all_commit(ledger, spark, monkeypatch):
    """Torture history 21006 alo: the replicate jobs of P->B and B->P MERGE their rows into
    replication_progress at the same moments; a MERGE that met the other's commit failed the
    job on stop (`replication_progress MERGE failed`). Each MERGE now runs again over the
    newer table: every one commits, with delta-rs, and every row is there."""
    import threading

    declined = []
    monkeypatch.setattr(commits, "_fallback", lambda *a: declined.append(a))
    keys = NATURAL_KEYS[REPLICATION_PROGRESS]
    start = threading.Barrier(2)
    outcomes: list = []

    def writer(flow: str) -> None:
        start.wait()
        for batch in range(12):
            rows = [{**_progress(p, 10 * batch + p, batch), "flow": flow} for p in range(3)]
            outcomes.append(commits.merge_on_keys(ledger.location, REPLICATION_PROGRESS,
                                                  rows, keys))

    threads = [threading.Thread(target=writer, args=(f,)) for f in ("P->B", "B->P")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert declined == [] and outcomes == [commits.COMMITTED] * 24
    rows = {(r["flow"], r["partition"]): r["next_upstream_offset"]
            for r in ledger.read(REPLICATION_PROGRESS).collect()}
    assert rows == {(f, p): 110 + p for f in ("P->B", "B->P") for p in range(3)}


@pytest.mark.unit
def test_a_merge_conflict_is_told_from_other_failures():
    spark_text = ("An error occurred while calling o170.execute.\n: io.delta.exceptions."
                  "ConcurrentAppendException: [DELTA_CONCURRENT_APPEND] ConcurrentAppend"
                  "Exception: Files were added to the root of the table by a concurrent update.")
    assert commits.merge_conflict(RuntimeError(spark_text))

    class CommitFailedError(Exception):
        pass

    assert commits.merge_conflict(CommitFailedError(
        "Commit failed: a concurrent transactions added new data."))
    assert not commits.merge_conflict(CommitFailedError("Commit failed: protocol"))
    assert not commits.merge_conflict(RuntimeError("[DELTA_FILE_NOT_FOUND] part-0001"))


@pytest.mark.unit
@pytest.mark.parametrize(("version", "last", "due"), [
    (10, None, True), (11, None, False), (20, None, True),      # no checkpoint yet: Spark's
    (20, (10, 300), True), (19, (10, 300), False),              # small: every 10 commits
    (1239, (1000, 120_000), False), (1240, (1000, 120_000), True),  # large: every 240
    (17, (12, 13), False), (22, (12, 13), True),                # relative to the last one
])
def test_a_checkpoint_is_due_every_interval_or_every_actions_per_commit(version, last, due):
    assert commits.ACTIONS_PER_COMMIT == 500
    assert commits.checkpoint_due(version, 10, last) is due


@pytest.mark.unit
def test_a_large_checkpoint_spaces_the_next_ones(tmp_path, monkeypatch):
    """With one action per commit allowed, each checkpoint comes as many commits after the last
    as the last one holds actions; every version stays readable."""
    from deltalake import DeltaTable

    from ledger import direct

    monkeypatch.setattr(commits, "ACTIONS_PER_COMMIT", 1)
    location = str(tmp_path / "ledger")
    assert isinstance(commits.create_missing_tables(location), list)
    table = Path(location) / OFFSET_SYNCS
    seen = []
    for batch in range(60):
        assert commits.append_with_txn(location, OFFSET_SYNCS, [_run(batch, batch, 1, batch)],
                                       app_id=APP, version=batch) is commits.COMMITTED
        last = direct.last_checkpoint(table)
        if last is not None and (not seen or seen[-1] != last):
            seen.append(last)
    # each checkpoint lists the files so far (plus protocol, metadata, txn), and the next one
    # comes that many commits later
    for (version, actions), (following, _) in itertools.pairwise(seen):
        assert following - version == max(10, actions)
    assert len(seen) >= 2 and seen[0][0] == 10
    assert direct.log_complete(table)
    assert len(DeltaTable(str(table)).to_pyarrow_table()) == 60


@pytest.mark.unit
def test_a_failed_checkpoint_leaves_the_commit_and_falls_back_to_nothing(tmp_path,
                                                                          monkeypatch):
    """The commit has landed: a checkpoint that fails must not send the rows to Spark again."""
    from deltalake import DeltaTable

    location = str(tmp_path / "ledger")
    assert isinstance(commits.create_missing_tables(location), list)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(DeltaTable, "create_checkpoint", broken)
    for batch in range(12):  # version 10 is due a checkpoint
        assert commits.append(location, OFFSET_SYNCS, [_run(batch, batch, 1, batch)]
                              ) is commits.COMMITTED
    table = DeltaTable(str(Path(location) / OFFSET_SYNCS))
    assert len(table.to_pyarrow_table()) == 12
