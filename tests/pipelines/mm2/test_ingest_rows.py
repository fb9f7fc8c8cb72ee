"""The pure parts of ``ingest mm2``: MM2 records -> ledger rows, Connect offsets -> progress."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from ledger import clock
from ledger.config import config_from_mapping
from ledger.policy import ReplicationPolicy
from ledger.translation import Run, forward, reverse
from ledger.writer import WRITTEN_AT_STEP
from pipelines.mm2 import formats
from pipelines.mm2.ingest import (
    Record,
    checkpoint_records,
    connect_offsets,
    replicated_progress,
    sources,
    sync_rows,
)
from tests.local_zone import local_zone

pytestmark = pytest.mark.unit

CONFIG = config_from_mapping({
    "clusters": {a: {"bootstrap.servers": "127.0.0.1:1"} for a in ("P", "B")},
    "flows": {"P->B": True, "B->P": {"offset-syncs.topic.location": "target"}}})
FLOW = CONFIG.flow("P->B")
POLICY = ReplicationPolicy.from_config(CONFIG)


def sync_record(offset, ts, topic, partition, u, d):
    key, value = formats.encode_offset_sync(formats.OffsetSync(topic, partition, u, d))
    return Record(offset, ts, key, value)


def test_internal_topics_and_where_they_live():
    syncs, cps = sources(CONFIG, FLOW)
    assert (syncs.cluster.alias, syncs.topic) == ("P", "mm2-offset-syncs.B.internal")
    assert (cps.cluster.alias, cps.topic) == ("B", "P.checkpoints.internal")
    syncs, cps = sources(CONFIG, CONFIG.flow("B->P"))
    assert (syncs.cluster.alias, syncs.topic) == ("P", "mm2-offset-syncs.B.internal")
    assert (cps.cluster.alias, cps.topic) == ("P", "B.checkpoints.internal")


def test_syncs_become_n1_runs_in_sync_order_with_their_origin():
    recs = [sync_record(7, 1_000, "Payments", 0, 0, 0),
            sync_record(8, 900, "Payments", 0, 100, 100),   # clock step back: order kept
            sync_record(9, 2_000, "Payments", 1, 5, 3)]
    rows = sync_rows(FLOW, POLICY, "mm2-offset-syncs.B.internal", recs)
    assert [(r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10]) for r in rows] == [
        ("Payments", "P.Payments", 0, 0, 0, 1, "mm2:mm2-offset-syncs.B.internal", 7),
        ("Payments", "P.Payments", 0, 100, 100, 1, "mm2:mm2-offset-syncs.B.internal", 8),
        ("Payments", "P.Payments", 1, 5, 3, 1, "mm2:mm2-offset-syncs.B.internal", 9)]
    written = [r[11] for r in rows]
    assert written[0] == written[1] == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)
    # Over those n = 1 runs the ledger's rule is MM2's: exact match -> d, else last d + 1.
    runs = [Run(0, 0, 1), Run(100, 100, 1)]
    assert (forward(runs, 100), forward(runs, 57), forward(runs, 150)) == (100, 1, 101)
    assert (reverse(runs, 100), reverse(runs, 57)) == (100, 1)


def test_a_pass_is_written_after_the_previous_pass():
    # the previous pass's newest written_at is 2 s; this pass's syncs carry 1 s and 3 s
    previous = dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.UTC)
    recs = [sync_record(10, 1_000, "Payments", 0, 0, 0), sync_record(11, 3_000, "Payments", 0,
                                                                       1, 1)]
    written = [r[11] for r in sync_rows(FLOW, POLICY, "t", recs, after=previous)]
    assert written == [previous + WRITTEN_AT_STEP, dt.datetime(1970, 1, 1, 0, 0, 3, tzinfo=dt.UTC)]
    assert min(written) - previous >= dt.timedelta(milliseconds=2)


def test_a_malformed_sync_stops_the_pass():
    bad = Record(3, 0, b"\x00\x01T\x00\x00\x00\x00", b"\x00")
    with pytest.raises(formats.FormatError, match="truncated"):
        sync_rows(FLOW, POLICY, "t", [sync_record(2, 0, "T", 0, 0, 0), bad])


def test_checkpoints_forward_and_reverse():
    fwd = formats.encode_checkpoint(formats.Checkpoint("G", "P.Payments", 2, 130, 101, ""))
    rev = formats.encode_checkpoint(formats.Checkpoint("G", "Payments", 0, 40, 38, "m"))
    recs = [Record(11, 5_000, *fwd), Record(12, 6_000, *rev)]
    out = checkpoint_records(FLOW, POLICY, "P.checkpoints.internal", recs, 9)
    assert [(c.checkpoint_id, c.flow, c.direction, c.source_topic, c.target_topic,
             c.partition, c.source_offset, c.target_offset, c.status) for c in out] == [
        ("mm2:P.checkpoints.internal@11", "P->B", "forward", "Payments", "P.Payments", 2,
         130, 101, "translated"),
        ("mm2:P.checkpoints.internal@12", "B->P", "reverse", "B.Payments", "Payments", 0,
         40, 38, "translated")]
    assert all(c.source_cluster == "P" and c.target_cluster == "B"
               and c.offset_syncs_version == 9 for c in out)


def connect_record(offset, key, value):
    return Record(offset, 0, json.dumps(key).encode(),
                  None if value is None else json.dumps(value).encode())


def test_connect_offsets_last_wins_other_connectors_ignored():
    part = {"cluster": "P", "topic": "Payments", "partition": 1}
    recs = [connect_record(0, ["MirrorSourceConnector", part], {"offset": 10}),
            connect_record(1, ["MirrorSourceConnector", part], {"offset": 41}),
            connect_record(2, ["MirrorSourceConnector", {**part, "partition": 2}], {"offset": 5}),
            connect_record(3, ["MirrorSourceConnector", {**part, "partition": 2}], None),
            connect_record(4, ["MirrorSourceConnector", {**part, "cluster": "X"}], {"offset": 9}),
            connect_record(5, ["MirrorCheckpointConnector", {"group": "G"}], {"offset": 1}),
            Record(6, 0, b"not json", b"{}")]
    latest = connect_offsets(FLOW, recs)
    assert {tp: r.offset for tp, r in latest.items()} == {("Payments", 1): 41}
    now = dt.datetime(2026, 1, 1)
    [row] = replicated_progress(FLOW, POLICY, latest, {("Payments", 1): 50}, 7, now)
    assert (row.flow, row.topic, row.replica_topic, row.partition, row.last_upstream_offset,
            row.next_upstream_offset, row.source_end_offset, row.lag) == (
        "P->B", "Payments", "P.Payments", 1, 41, 42, 50, 8)


def test_times_are_utc_on_a_machine_outside_utc():
    # positions() reads the previous pass's newest written_at with Spark: naive local time.
    previous = dt.datetime(2026, 11, 25, 3, 0, 0, tzinfo=dt.UTC)
    recs = [sync_record(10, previous.timestamp() * 1000 - 500, "Payments", 0, 0, 0),
            sync_record(11, previous.timestamp() * 1000 + 1_000, "Payments", 0, 1, 1)]
    with local_zone():
        as_read = clock.local_naive(previous)
        written = [r[11] for r in sync_rows(FLOW, POLICY, "t", recs, after=as_read)]
        [cp] = checkpoint_records(FLOW, POLICY, "P.checkpoints.internal", [Record(
            12, previous.timestamp() * 1000, *formats.encode_checkpoint(
                formats.Checkpoint("G", "P.Payments", 0, 1, 1, "")))], 3)
    assert as_read != previous.replace(tzinfo=None)  # the zone is not UTC
    assert written == [previous + WRITTEN_AT_STEP, previous + dt.timedelta(seconds=1)]
    assert cp.checkpointed_at == previous
