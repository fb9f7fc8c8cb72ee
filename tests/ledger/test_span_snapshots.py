"""Persisted spans on real Spark and Delta: a load from the snapshot plus the runs written after
it translates like the raw runs, reads only the newest files, and falls back where it must."""

from __future__ import annotations

import datetime as dt
import functools

import pytest
from pyspark.sql import functions as F

from bench.scan_metrics import scan_stats
from ledger import commits, span_snapshots, translation
from ledger import store as store_module
from ledger.engine import LedgerEngine
from ledger.schemas import OFFSET_SYNC_SPANS, OFFSET_SYNCS, OFFSET_SYNCS_SCHEMA
from ledger.span_refresh import (
    commits_since,
    refresh,
    refresh_if_behind,
    runs_since,
    snapshot_spans,
    tail_outgrew,
)
from ledger.span_snapshots import SpanSnapshot
from ledger.spans import coalesce
from ledger.store import OffsetSyncStore
from ledger.tables import Ledger
from tests.tiny_spark import product_settings

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
FLOWS = {"P->B": ("P", "B")}
# Runs per phase (the covered history, then the tail) of the contiguous partition. Every
# assertion compares the store with the reference rule at every offset, which costs runs x
# offsets: 100 keeps each threshold crossed below (10) at a ninth of 300's time.
BATCHES = 100

# Per partition of Payments: (runs covered by the snapshot, runs written after it).
CONTIGUOUS = [(10 * i, 5 + 10 * i, 10) for i in range(2 * BATCHES)]
HISTORIES = {
    0: (CONTIGUOUS[:BATCHES], CONTIGUOUS[BATCHES:]),
    # a rewind inside the covered part, then contiguous again
    1: ([(10, 500, 3), (13, 503, 2), (15, 505, 4), (11, 509, 2), (13, 511, 3)],
        [(16, 514, 5), (21, 519, 4), (30, 523, 2), (32, 525, 2)]),
    # the replica is truncated in the tail: a new epoch
    2: ([(0, 0, 5), (5, 5, 5), (10, 10, 5)], [(15, 7, 3), (18, 10, 3), (22, 15, 2)]),
    # the tail restarts from 20, inside what the snapshot covers: this partition is read raw
    3: ([(0, 0, 10), (10, 10, 10), (20, 20, 10)], [(20, 30, 5), (25, 35, 10)]),
    # no run before the snapshot: all in the tail
    4: ([], [(7, 0, 2), (9, 2, 2)]),
}


def rows(partition: int, runs: list[tuple[int, int, int]], first_batch: int) -> list[tuple]:
    # One run per partition per batch; written_at grows batch by batch, as the writer's does.
    return [("P->B", "P", "B", "Payments", "P.Payments", partition, u, d, n, "run-1",
             first_batch + i, T0 + dt.timedelta(seconds=10 * (first_batch + i)))
            for i, (u, d, n) in enumerate(runs)]


def append_in(ledger: Ledger, data: list[tuple], count: int) -> None:
    """``data`` in ``count`` commits of one file each, by delta-rs as the local writer makes
    them (a Spark append costs two seconds; what is read back is the same)."""
    data = sorted(data, key=lambda r: r[-1])
    size = -(-len(data) // count)
    names = OFFSET_SYNCS_SCHEMA.fieldNames()
    for i in range(0, len(data), size):
        chunk = [dict(zip(names, r, strict=True)) for r in data[i:i + size]]
        assert commits.append(ledger.location, OFFSET_SYNCS, chunk) is commits.COMMITTED


@pytest.fixture(scope="module")
def ledger(spark, tmp_path_factory) -> dict:
    ledger = Ledger(spark, str(tmp_path_factory.mktemp("snapshots") / "ledger"))
    ledger.init()
    append_in(ledger, [r for p, (covered, _) in HISTORIES.items() for r in rows(p, covered, 0)],
              4)
    before_snapshot = ledger.version(OFFSET_SYNCS)
    spark.sql(f"OPTIMIZE {ledger.identifier(OFFSET_SYNCS)}").collect()  # as maintain does
    with product_settings(spark):  # a snapshot in several files: file skipping is tested
        reports = refresh(ledger, FLOWS)
    covered_version = ledger.version(OFFSET_SYNCS)
    append_in(ledger, [r for p, (_, tail) in HISTORIES.items()
                       for r in rows(p, tail, BATCHES)], 3)
    return {"ledger": ledger, "reports": reports, "covered_version": covered_version,
            "before_snapshot": before_snapshot}


def raw(partition: int, part: str = "all") -> list[translation.Run]:
    covered, tail = HISTORIES[partition]
    chosen = {"covered": covered, "all": covered + tail}[part]
    return [translation.Run(*r) for r in chosen]


@functools.cache
def expected(runs: tuple[translation.Run, ...]) -> tuple[list, list, int, int]:
    """The reference rule over the raw runs, at every offset (computed once per history: the
    rule over 200 raw runs at 2,000 offsets takes a second)."""
    epoch = translation.current_epoch(runs)
    upstream_end = max(r.upstream_end for r in epoch)
    downstream_end = max(r.downstream_end for r in epoch)
    return ([translation.forward(runs, x) for x in range(upstream_end + 3)],
            [translation.reverse(runs, c) for c in range(downstream_end + 3)],
            upstream_end, downstream_end)


def assert_translates_like(store: OffsetSyncStore, partition: int,
                           runs: list[translation.Run]) -> None:
    forward, reverse, upstream_end, downstream_end = expected(tuple(runs))
    for x, offset in enumerate(forward):
        assert store.forward("Payments", partition, x).offset == offset, x
    for c, offset in enumerate(reverse):
        assert store.reverse("Payments", partition, c).offset == offset, c
    assert store.upstream_end("Payments", partition) == upstream_end
    assert store.downstream_end("Payments", partition) == downstream_end


def test_the_snapshot_is_the_spans_at_its_version(ledger: dict) -> None:
    (report,) = ledger["reports"]
    assert (report.flow, report.version, report.previous_version) == (
        "P->B", ledger["covered_version"], None)
    snapshot = SpanSnapshot.read(ledger["ledger"], "P->B")
    assert snapshot is not None and snapshot.version == ledger["covered_version"]
    assert snapshot.covered_until == T0 + dt.timedelta(seconds=10 * (BATCHES - 1))
    assert set(snapshot.rows) == {("Payments", p) for p in range(4)}  # p4 had no runs yet
    for p in range(4):
        spans = [translation.Run(r["upstream_offset"], r["downstream_offset"], r["length"])
                 for r in snapshot.rows[("Payments", p)]]
        assert spans == coalesce(translation.current_epoch(raw(p, "covered")))
        assert [r["batch_id"] for r in snapshot.rows[("Payments", p)]] == list(range(len(spans)))
    assert snapshot.rows[("Payments", 0)][0]["length"] == 10 * BATCHES  # BATCHES runs, one span


def test_a_load_from_the_snapshot_translates_like_the_raw_runs(ledger: dict) -> None:
    store = OffsetSyncStore.load(ledger["ledger"], "P->B")
    assert store.version == ledger["ledger"].version(OFFSET_SYNCS)
    for p in HISTORIES:
        assert_translates_like(store, p, raw(p))
    assert store.runs[("Payments", 0)] == [translation.Run(0, 5, 20 * BATCHES)]
    assert store.runs[("Payments", 2)] == [translation.Run(15, 7, 6), translation.Run(22, 15, 2)]
    partial = OffsetSyncStore.load(ledger["ledger"], "P->B", partitions={("Payments", 3),
                                                                         ("Payments", 4)})
    assert set(partial.runs) == {("Payments", 3), ("Payments", 4)}
    assert_translates_like(partial, 3, raw(3))
    assert_translates_like(partial, 4, raw(4))


def test_delta_rs_loads_the_spans_spark_loads(ledger: dict, monkeypatch) -> None:
    spark_ledger = ledger["ledger"]
    engine = LedgerEngine(spark_ledger.location, lambda: spark_ledger.spark)
    for kwargs in ({}, {"topics": {"Payments"}},
                   {"partitions": {("Payments", 1), ("Payments", 3), ("Payments", 4)}},
                   {"version": ledger["before_snapshot"]}, {"topics": set()}):
        direct = OffsetSyncStore.load_direct(engine, "P->B", **kwargs)
        by_spark = OffsetSyncStore.load(spark_ledger, "P->B", **kwargs)
        assert direct is not None and engine.direct, kwargs
        assert (direct.version, direct.runs, direct.replica_topics) == (
            by_spark.version, by_spark.runs, by_spark.replica_topics), kwargs
    # More runs than a process coalesces: the engine leaves the load to Spark, same spans.
    monkeypatch.setattr(store_module, "RUNS_IN_PROCESS", 10)
    assert OffsetSyncStore.load_direct(engine, "P->B") is None
    assert engine.load_store("P->B").runs == OffsetSyncStore.load(spark_ledger, "P->B").runs
    assert not engine.direct


@pytest.mark.parametrize("bound", ["TAIL_ON_DRIVER", "SNAPSHOT_ON_DRIVER"])
def test_a_long_tail_or_a_large_snapshot_is_coalesced_in_spark_with_the_same_spans(
        ledger: dict, monkeypatch, bound: str) -> None:
    """Past either bound the snapshot is extended in Spark (``with_tail``: the spans never
    come to the driver and go back) and the spans come back as Arrow."""
    on_driver = OffsetSyncStore.load(ledger["ledger"], "P->B")
    monkeypatch.setattr(span_snapshots, bound, 2 if bound == "SNAPSHOT_ON_DRIVER" else 10)
    if bound == "SNAPSHOT_ON_DRIVER":
        snapshot = SpanSnapshot.read(ledger["ledger"], "P->B")
        assert snapshot is not None and snapshot.rows is None and snapshot.frame is not None
    in_spark = OffsetSyncStore.load(ledger["ledger"], "P->B")
    assert in_spark.runs == on_driver.runs
    assert in_spark.replica_topics == on_driver.replica_topics == {"Payments": "P.Payments"}
    for p in HISTORIES:
        assert_translates_like(in_spark, p, raw(p))


def test_the_load_reads_the_snapshot_and_the_newest_files_only(ledger: dict, spark) -> None:
    lg = ledger["ledger"]
    with product_settings(spark):  # Delta's data skipping, which the session turns off
        snapshot = SpanSnapshot.read(lg, "P->B", partitions={("Payments", 0)})
        runs = lg.read(OFFSET_SYNCS).where((F.col("flow") == "P->B") & (F.col("partition") == 0))
        everything = scan_stats(runs)
        bounded = scan_stats(snapshot.with_tail(runs)[0])
    # scanned rows are whole files' (every file holds every partition)
    covered, tail = (sum(len(h[i]) for h in HISTORIES.values()) for i in (0, 1))
    assert (everything.files, everything.rows) == (4, covered + tail)  # compacted + 3 commits
    # the three tail commits only, and the snapshot's file (its one span of partition 0: the
    # spans stay in Spark, none comes to the driver and goes back)
    assert (bounded.files, bounded.rows) == (3 + 1, tail + 1)
    # a partition whose tail rewinds into the covered history is read whole, raw
    rewound = SpanSnapshot.read(lg, "P->B", partitions={("Payments", 3)})
    runs_3 = lg.read(OFFSET_SYNCS).where(F.col("partition") == 3)
    assert {translation.Run(r["upstream_offset"], r["downstream_offset"], r["length"])
            for r in rewound.with_tail(runs_3)[0].collect()} == set(raw(3))


def test_time_travel_before_the_snapshot_ignores_it(ledger: dict) -> None:
    store = OffsetSyncStore.load(ledger["ledger"], "P->B", version=ledger["before_snapshot"])
    for p in range(4):
        assert_translates_like(store, p, raw(p, "covered"))
    assert ("Payments", 4) not in store.runs


def test_a_refresh_continues_from_the_previous_snapshot(ledger: dict, spark) -> None:
    lg = ledger["ledger"]
    location = lg.location + "-copy"
    import shutil

    shutil.copytree(lg.location, location)
    copy = Ledger(spark, location)
    assert commits_since(copy, "P->B") == 3  # the three tail commits
    assert commits_since(copy, "B->P") == copy.version(OFFSET_SYNCS) + 1  # no snapshot
    assert refresh_if_behind(copy, FLOWS, ["P->B"], commits=4) == []
    # ... or a tail of so many runs: the runs after covered_until, counted up to the bound
    tail = sum(len(h[1]) for h in HISTORIES.values())
    assert runs_since(copy, "P->B", tail + 5) == tail
    assert runs_since(copy, "P->B", 2) == 2
    assert runs_since(copy, "B->P", 10**6) == copy.read(OFFSET_SYNCS).where(
        F.col("flow") == "B->P").count()  # no snapshot: every run
    assert refresh_if_behind(copy, FLOWS, ["P->B"], commits=4, runs=tail + 1) == []
    # ... but never for a tail shorter than the snapshot (runs that would not coalesce)
    spans = snapshot_spans(copy, "P->B")
    assert spans == sum(len(r) for r in SpanSnapshot.read(copy, "P->B").rows.values())
    assert tail_outgrew(copy, "P->B", 1) is (tail >= spans)
    assert snapshot_spans(copy, "B->P") == 0
    (by_runs,) = refresh_if_behind(copy, FLOWS, ["P->B"], commits=4, runs=tail)
    assert (by_runs.previous_version, runs_since(copy, "P->B", 10**6)) == (
        ledger["covered_version"], 0)
    assert commits_since(copy, "P->B") == 0
    assert refresh_if_behind(copy, FLOWS, ["P->B"], commits=1) == []
    # Two more runs: a tail of 2 reaches runs=1 but not the snapshot's spans (runs that do not
    # coalesce, as an exactly-once flow's, would make every refresh rewrite them all for nothing)
    append_in(copy, rows(4, [(11, 4, 1), (12, 5, 1)], 3 * BATCHES), 1)
    assert (runs_since(copy, "P->B", 10), snapshot_spans(copy, "P->B") > 2) == (2, True)
    assert refresh_if_behind(copy, FLOWS, ["P->B"], commits=2, runs=1) == []
    (late,) = refresh_if_behind(copy, FLOWS, ["P->B"], commits=1, runs=1)  # by commits
    assert (late.flow, runs_since(copy, "P->B", 10)) == ("P->B", 0)
    shutil.rmtree(location)
    shutil.copytree(lg.location, location)
    copy = Ledger(spark, location)
    (report,) = refresh_if_behind(copy, FLOWS, ["P->B"], commits=3)
    assert report.previous_version == ledger["covered_version"]
    assert report.version == copy.version(OFFSET_SYNCS)
    assert commits_since(copy, "P->B") == 0
    snapshot = SpanSnapshot.read(copy, "P->B")
    assert snapshot.covered_until == T0 + dt.timedelta(seconds=10 * (2 * BATCHES - 1))
    store = OffsetSyncStore.load(copy, "P->B")
    for p in HISTORIES:
        assert_translates_like(store, p, raw(p))
    # deleting the derived table loses nothing but speed
    spark.sql(f"DELETE FROM {copy.identifier(OFFSET_SYNC_SPANS)}")
    assert SpanSnapshot.read(copy, "P->B") is None
    reloaded = OffsetSyncStore.load(copy, "P->B")
    for p in HISTORIES:
        assert_translates_like(reloaded, p, raw(p))


def test_a_ledger_from_before_the_table_reads_and_maintain_adds_it(ledger: dict, spark) -> None:
    import shutil

    from ledger import maintenance

    location = ledger["ledger"].location + "-old"
    shutil.copytree(ledger["ledger"].location, location)
    shutil.rmtree(f"{location}/{OFFSET_SYNC_SPANS}")
    old = Ledger(spark, location)
    old.require()  # a derived table is never required
    assert SpanSnapshot.read(old, "P->B") is None
    store = OffsetSyncStore.load(old, "P->B")
    for p in HISTORIES:
        assert_translates_like(store, p, raw(p))
    (report,) = maintenance.maintain(old, maintenance.Retention(30), (OFFSET_SYNC_SPANS,),
                                     vacuum=False, flows=FLOWS)
    assert report.refreshed[0].version == old.version(OFFSET_SYNCS)
    assert SpanSnapshot.read(old, "P->B") is not None


TRANSACTIONS = [(2 * i, 3 * i, 2) for i in range(40)]  # 2 records + a marker each


@pytest.fixture(scope="module")
def windowed(spark, tmp_path_factory) -> Ledger:
    """An exactly-once partition (0) and a contiguous one (1), snapshot with a window of 4."""
    lg = Ledger(spark, str(tmp_path_factory.mktemp("windowed") / "ledger"))
    lg.init()
    append_in(lg, rows(0, TRANSACTIONS[:30], 0) + rows(1, CONTIGUOUS[:30], 0), 3)
    refresh(lg, FLOWS, window=4)
    append_in(lg, rows(0, TRANSACTIONS[30:], 30) + rows(1, CONTIGUOUS[30:40], 30), 2)
    return lg


@pytest.mark.parametrize("bound", [None, "SNAPSHOT_ON_DRIVER"])
def test_a_windowed_snapshot_loads_in_spark_like_in_delta_rs(windowed: Ledger, monkeypatch,
                                                             bound: str | None) -> None:
    """A Spark load of an exactly-once partition's window (on the driver, or extended in
    Spark) holds the window and seek floors delta-rs holds, and seeks through Spark for an
    offset below it; below the seek floors it reads the whole epoch."""
    lg = windowed
    if bound is not None:
        monkeypatch.setattr(span_snapshots, bound, 1)
    store = OffsetSyncStore.load(lg, "P->B")
    direct = LedgerEngine(lg.location).load_store("P->B")
    assert store.dropped == direct.dropped == {("Payments", 0): 26}
    assert store.seek == direct.seek == {("Payments", 0): (0, 0)}
    assert store.runs == direct.runs
    assert store.floors("Payments", 0) == (52, 78)
    all_runs = [translation.Run(*r) for r in TRANSACTIONS]
    for x in range(52, 82):
        assert store.forward("Payments", 0, x).offset == translation.forward(all_runs, x)
    assert store.prepended == {}  # the window answered
    assert store.reverse("Payments", 0, 10).offset == translation.reverse(all_runs, 10)
    assert store.dropped == {("Payments", 0): 26} and store.prepended == {("Payments", 0): 26}
    assert len(store.runs[("Payments", 0)]) == 40 and store.floors("Payments", 0) == (0, 0)
    store.seek.clear()  # as a snapshot without seek floors: the whole epoch, through Spark
    store.prepended.clear()
    store.runs[("Payments", 0)] = store.runs[("Payments", 0)][26:]
    assert store.reverse("Payments", 0, 10).offset == translation.reverse(all_runs, 10)
    assert store.dropped == {} and len(store.runs[("Payments", 0)]) == 40
    assert_translates_like(store, 0, all_runs)
    assert_translates_like(store, 1, [translation.Run(*r) for r in CONTIGUOUS[:40]])


def test_a_spark_refresh_adds_the_seek_columns_to_an_older_snapshot_table(spark, tmp_path):
    """A snapshot table of an earlier release (no seek columns) through Spark: the store loads
    its windows, and a refresh adds the two columns with ALTER TABLE before it writes."""
    import pyarrow as pa
    from deltalake import DeltaTable

    from ledger.schemas import arrow_schema

    lg = Ledger(spark, str(tmp_path / "ledger"))
    lg.init()
    DeltaTable.create(lg.table_path(OFFSET_SYNC_SPANS), pa.schema(
        [f for f in arrow_schema(OFFSET_SYNC_SPANS) if not f.name.startswith("seek_")]),
        mode="overwrite")
    append_in(lg, rows(0, TRANSACTIONS[:30], 0), 3)
    assert "seek_upstream_offset" not in lg.read(OFFSET_SYNC_SPANS).columns
    assert OffsetSyncStore.load(lg, "P->B").dropped == {}
    refresh(lg, FLOWS, window=4)
    assert {"seek_upstream_offset", "seek_downstream_offset"} <= set(
        lg.read(OFFSET_SYNC_SPANS).columns)
    store = OffsetSyncStore.load(lg, "P->B")
    assert store.dropped == {("Payments", 0): 26} and store.seek == {("Payments", 0): (0, 0)}
    all_runs = [translation.Run(*r) for r in TRANSACTIONS[:30]]
    assert store.forward("Payments", 0, 3).offset == translation.forward(all_runs, 3)
    assert store.prepended == {("Payments", 0): 26}
