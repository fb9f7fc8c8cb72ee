"""What a checkpoint pass records: changes, refreshes, complete operations; windowed reads."""

from __future__ import annotations

import datetime as dt
from operator import itemgetter

import pytest

from ledger.engine import LedgerEngine
from ledger.records import CheckpointRecord
from ledger.schemas import CHECKPOINTS, GROUP_OFFSETS
from ledger.tables import Ledger
from pipelines import cli
from pipelines.checkpoint import history
from pipelines.checkpoint.compute import Previous
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

NOW = dt.datetime(2026, 11, 23, 12, 0, 0)
KEY, VALUE = ("group_id", "partition"), ("offset",)


def row(group: str, partition: int, offset: int, at: dt.datetime | None = None) -> dict:
    return {"group_id": group, "partition": partition, "offset": offset, "at": at or NOW}


def record(rows, latest, *, complete=False, now=NOW, refresh_hours=24):
    key = itemgetter(*KEY)
    return history.to_record(rows, history.by_key(latest, key), key=key,
                             value=itemgetter(*VALUE), at=itemgetter("at"), now=now,
                             refresh_hours=refresh_hours, complete=complete)


@pytest.mark.unit
def test_only_changed_or_new_keys_are_recorded():
    before = [row("g", 0, 10, NOW - dt.timedelta(minutes=1)),
              row("g", 1, 20, NOW - dt.timedelta(minutes=1))]
    rows = [row("g", 0, 10), row("g", 1, 21), row("h", 0, 5)]
    assert record(rows, before) == [row("g", 1, 21), row("h", 0, 5)]


@pytest.mark.unit
def test_an_unchanged_key_is_recorded_again_once_its_record_is_as_old_as_the_refresh():
    young = [row("g", 0, 10, NOW - dt.timedelta(hours=23, minutes=59))]
    old = [row("g", 0, 10, NOW - dt.timedelta(hours=24))]
    assert record([row("g", 0, 10)], young) == []
    assert record([row("g", 0, 10)], old) == [row("g", 0, 10)]
    assert record([row("g", 0, 10)], young, refresh_hours=1) == [row("g", 0, 10)]


@pytest.mark.unit
def test_an_operation_pass_records_everything():
    before = [row("g", 0, 10, NOW - dt.timedelta(minutes=1))]
    assert record([row("g", 0, 10)], before, complete=True) == [row("g", 0, 10)]


@pytest.mark.unit
def test_checkpoints_are_compared_by_their_key_and_values():
    cp = CheckpointRecord("c1", "P->B", "forward", "g", "P", "T", 0, 10, "B", "P.T", 10,
                          "translated", None, False, 3, NOW - dt.timedelta(minutes=1))
    latest = history.by_key([cp], history.checkpoint_key)
    assert list(latest) == [("g", "forward", "T", 0)]
    again = cp.replace(checkpoint_id="c2", offset_syncs_version=4, checkpointed_at=NOW)
    moved = again.replace(source_offset=11, target_offset=11)

    def passes(rows):
        return history.to_record(rows, latest, key=history.checkpoint_key,
                                 value=history.checkpoint_value, at=history.checkpoint_at,
                                 now=NOW, refresh_hours=24, complete=False)

    assert passes([again]) == []  # another pass, same translation: nothing to record
    assert passes([moved]) == [moved]


@pytest.mark.unit
def test_the_window_covers_the_refresh_and_a_late_pass():
    start = history.window_start(NOW, 24)
    assert start == NOW - dt.timedelta(hours=24) - history.SLACK
    assert start < NOW - dt.timedelta(hours=24)


@pytest.mark.spark
def test_latest_reads_only_the_window_alike_in_both_engines(spark, tmp_path):
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    ledger.init()
    observed = [("g", 0, 1, NOW - dt.timedelta(days=3)), ("g", 0, 2, NOW - dt.timedelta(hours=2)),
                ("g", 1, 7, NOW - dt.timedelta(days=3)), ("h", 0, 9, NOW)]
    rows = [{"observation_id": f"o{i}", "cluster": "P", "group_id": g, "topic": "T",
             "partition": p, "committed_offset": o, "group_state": "Empty", "observed_at": at}
            for i, (g, p, o, at) in enumerate(observed)]
    LedgerEngine.of(ledger).append(GROUP_OFFSETS, rows)
    since = history.window_start(NOW, 24)
    where = "cluster = 'P' AND group_id IN ('g')"
    answers = {}
    for engine in (LedgerEngine(ledger.location), LedgerEngine.of(ledger)):
        for name, start in (("recent", since), ("everything", None)):
            found = engine.query(history.latest_sql("t", ("group_id", "partition"),
                                                    "observed_at", start, where),
                                 t=GROUP_OFFSETS)
            answers[(engine.name, name)] = {(r["group_id"], r["partition"]): r["committed_offset"]
                                            for r in history.rows_of(found)}
    assert answers[("delta-rs", "recent")] == answers[("spark", "recent")] == {("g", 0): 2}
    assert answers[("delta-rs", "everything")] == answers[("spark", "everything")] == {
        ("g", 0): 2, ("g", 1): 7}


@pytest.mark.e2e
def test_a_pass_with_nothing_new_appends_nothing(spark, make_config, unique):
    config = make_config(flows={"P->B": {"topics": ["hist-.*"], "groups": ["histg-.*"]}})
    primary = config.cluster("P")
    topic, group = unique("hist-t"), unique("histg-g")
    kafka_admin.create_topic(primary, topic, 2)
    produce(primary, topic, [f"v{i}" for i in range(30)], 2)
    replicate_once(spark, config, "P->B")
    consume(primary, group, [topic], limit=20)
    ledger = Ledger(spark, config.ledger_location)
    checkpoint = ["checkpoint", "--flow", "P->B", "--once", "--no-sync", "--config", config.path]

    assert cli.main(checkpoint) == 0
    first = {t: ledger.version(t) for t in (CHECKPOINTS, GROUP_OFFSETS)}
    assert ledger.read(CHECKPOINTS).where(f"group_id = '{group}'").count() == 2
    assert cli.main(checkpoint) == 0  # nothing moved: no new version of either table
    assert {t: ledger.version(t) for t in (CHECKPOINTS, GROUP_OFFSETS)} == first

    consume(primary, group, [topic], limit=5)  # the group moves on one or two partitions
    moved = kafka_offsets.list_offsets(primary, "committed", group=group)
    assert cli.main(checkpoint) == 0
    rows = ledger.read(CHECKPOINTS).where(f"group_id = '{group}'").collect()
    latest = {}
    for r in sorted(rows, key=lambda r: r["checkpointed_at"]):
        latest[(r["source_topic"], r["partition"])] = r["source_offset"]
    assert latest == moved  # the latest per partition is the group's position
    assert 2 < len(rows) <= 4  # only the partitions that moved were recorded again


@pytest.mark.spark
def test_a_moves_never_backwards_hold_reads_the_latest_offsets_alike(spark, tmp_path):
    """A move reads only the two offsets per key the hold needs (issue 37): the same answer
    as the whole latest records, in both engines, inside the window only."""
    from ledger.config import config_from_mapping
    from pipelines.checkpoint.engine import Checkpointer, _previous

    ledger = Ledger(spark, str(tmp_path / "ledger"))
    ledger.init()
    now = dt.datetime.now(dt.UTC)

    def checkpoint(group, partition, source, target, age_h, cluster="P"):
        return CheckpointRecord(
            "c", "P->B", "forward", group, cluster, "T", partition, source, "B", "P.T", target,
            "translated" if target is not None else "untranslatable",
            None if target is not None else "no run", False, 3,
            now - dt.timedelta(hours=age_h)).to_row()

    LedgerEngine.of(ledger).append(CHECKPOINTS, [
        checkpoint("g", 0, 5, 5, 3), checkpoint("g", 0, 9, 8, 1), checkpoint("g", 1, 4, None, 1),
        checkpoint("g", 2, 7, 7, 24 * 5), checkpoint("h", 0, 3, 3, 1),
        checkpoint("g", 3, 6, 6, 1, cluster="B")])
    config = config_from_mapping({"clusters": {"P": {"bootstrap.servers": "p:9092"},
                                               "B": {"bootstrap.servers": "b:9092"}},
                                  "flows": {"P->B": True}})
    answers = [Checkpointer(engine, config).previous_checkpoints("P", ["g"], now)
               for engine in (LedgerEngine(ledger.location), LedgerEngine.of(ledger))]
    whole = _previous(Checkpointer(LedgerEngine.of(ledger), config).latest_checkpoints(
        "P", ["g"], now))
    assert answers[0] == answers[1] == whole == {
        ("g", "forward", "T", 0): Previous(9, 8), ("g", "forward", "T", 1): Previous(4, None)}
