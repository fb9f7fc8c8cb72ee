"""Windowed span snapshots (delta-rs): a partition whose spans do not coalesce keeps only its
newest spans, its positions numbered on, and a load answers every offset exactly as the raw
runs do, reading that partition's raw runs only for an offset below its window."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from ledger.engine import LedgerEngine
from ledger.schemas import OFFSET_SYNC_SPANS
from ledger.span_refresh import refresh
from ledger.store import OffsetSyncStore
from ledger.translation import Run, current_epoch, forward, reverse
from tests.ledger.test_span_sql import FLOW, expected, history, write

pytestmark = pytest.mark.unit

WINDOW = 4


def exactly_once(u: int, d: int, count: int) -> list[tuple[int, int, int]]:
    """``count`` transactions of 1 to 3 records, each followed by its commit marker."""
    rng = random.Random(u * 7 + d)
    runs = []
    for _ in range(count):
        n = rng.randrange(1, 4)
        runs.append((u, d, n))
        u, d = u + n, d + n + 1
    return runs


def snapshot(engine: LedgerEngine) -> dict[int, list[dict]]:
    rows = engine.query("SELECT * FROM {sp}", sp=OFFSET_SYNC_SPANS)
    found: dict[int, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["partition"], r["batch_id"])):
        found.setdefault(r["partition"], []).append(r)
    return found


def assert_window_is_the_newest_spans(engine: LedgerEngine, raw: dict[int, list]) -> None:
    """Each partition's snapshot rows are its epoch's spans from position ``batch_id`` on."""
    for p, rows in snapshot(engine).items():
        spans = expected(raw[p])
        first = rows[0]["batch_id"]
        assert [r["batch_id"] for r in rows] == list(range(first, first + len(rows)))
        assert [Run(r["upstream_offset"], r["downstream_offset"], r["length"])
                for r in rows] == spans[first:], p


def assert_translates_like_raw(store: OffsetSyncStore, p: int, runs: list) -> None:
    raw = [Run(*r) for r in runs]
    epoch = current_epoch(raw)
    for x in range(max(r.upstream_end for r in epoch) + 2):
        assert store.forward("T", p, x).offset == forward(raw, x), (p, x)
    for c in range(max(r.downstream_end for r in epoch) + 2):
        assert store.reverse("T", p, c).offset == reverse(raw, c), (p, c)
    assert store.upstream_end("T", p) == max(r.upstream_end for r in epoch)
    assert store.downstream_end("T", p) == max(r.downstream_end for r in epoch)


@pytest.fixture
def ledger(tmp_path) -> tuple[str, LedgerEngine]:
    location = str(tmp_path / "ledger")
    engine = LedgerEngine(location)
    engine.init()
    return location, engine


def test_an_exactly_once_partition_keeps_a_window_and_answers_every_offset(ledger) -> None:
    location, engine = ledger
    covered = {0: exactly_once(0, 0, 30), 1: exactly_once(100, 50, 5)}
    write(location, covered, 0)
    (report,) = refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    rows = snapshot(engine)
    # 30 spans > 2 x 4: the newest 4 from a valid cut; 5 spans: kept whole
    assert [r["batch_id"] for r in rows[0]] == [26, 27, 28, 29]
    assert [r["batch_id"] for r in rows[1]] == [0, 1, 2, 3, 4]
    assert report.spans == 9
    assert_window_is_the_newest_spans(engine, covered)

    # the tail continues both partitions; a fresh engine loads window + tail
    tails = {p: exactly_once(runs[-1][0] + runs[-1][2], runs[-1][1] + runs[-1][2] + 1, 6)
             for p, runs in covered.items()}
    write(location, tails, 30)
    whole = {p: covered[p] + tails[p] for p in covered}
    store = LedgerEngine(location).load_store(FLOW)
    assert store.dropped == {("T", 0): 26}
    deepened = []
    history_of = store.history
    store.history = lambda keys: deepened.append(set(keys)) or history_of(keys)
    floor_u, floor_d = store.floors("T", 0)
    assert (floor_u, floor_d) == (covered[0][26][0], covered[0][26][1])
    # at and above the floors the window answers, without reading the history
    raw0 = [Run(*r) for r in whole[0]]
    for x in range(floor_u, floor_u + 20):
        assert store.forward("T", 0, x).offset == forward(raw0, x)
    for c in range(floor_d, floor_d + 20):
        assert store.reverse("T", 0, c).offset == reverse(raw0, c)
    assert deepened == []
    # below them, down to the seek floors (the epoch's start: exactly-once runs never rewind),
    # the runs written since the offset's are read by time, never the whole history
    assert store.seek == {("T", 0): (0, 0)}
    seeks = []
    recent = store.recent
    store.recent = lambda keys, after, until: seeks.append(after) or recent(keys, after, until)
    assert store.forward("T", 0, floor_u - 1).offset == forward(raw0, floor_u - 1)
    assert deepened == [] and len(seeks) == 1 and store.dropped == {("T", 0): 26}
    assert store.floors("T", 0)[0] <= floor_u - 1
    for p, runs in whole.items():
        assert_translates_like_raw(store, p, runs)
    assert deepened == [] and store.prepended[("T", 0)] == 26

    # a second refresh starts from the window and numbers on
    refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    assert_window_is_the_newest_spans(engine, whole)
    assert snapshot(engine)[0][0]["batch_id"] == 32
    assert snapshot(engine)[1][0]["batch_id"] == 7  # 11 spans now: windowed too


@pytest.mark.parametrize("seed", range(6))
def test_windows_of_random_histories_answer_like_the_raw_runs(ledger, seed: int) -> None:
    """Rewinds, upstream gaps, markers and new epochs, in the covered part and in the tail:
    a windowed load answers every offset of every partition as the raw runs do."""
    location, engine = ledger
    rng = random.Random(seed)
    covered = {p: history(rng, 30) if p % 2 else exactly_once(p, 2 * p, 30)
               for p in range(12)}
    write(location, covered, 0)
    refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    assert_window_is_the_newest_spans(engine, covered)
    assert any(rows[0]["batch_id"] > 0 for rows in snapshot(engine).values())
    tails = {}
    for p, runs in covered.items():
        u, d, n = runs[-1]
        more = history(random.Random(seed * 100 + p), 10)
        kind = rng.random()
        shift_u = u + n - min(r[0] for r in more) if kind < 0.7 else 0  # else: a rewind
        shift_d = d + n if kind < 0.9 else 0                            # else: a new epoch
        tails[p] = [(a + shift_u, b + shift_d, c) for a, b, c in more]
    write(location, tails, 30)
    whole = {p: covered[p] + tails[p] for p in covered}
    store = LedgerEngine(location).load_store(FLOW)
    assert store.dropped  # some windows go on
    store.seek_step = dt.timedelta(seconds=1)  # seeks of several slices (a run a second)
    for p, runs in whole.items():
        assert_translates_like_raw(store, p, runs)
    refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    assert_window_is_the_newest_spans(engine, whole)
    again = LedgerEngine(location).load_store(FLOW)
    assert again.seek  # the refresh cut the windows again: seek floors where no rewind is
    for p, runs in whole.items():
        assert_translates_like_raw(again, p, runs)


def counting(store: OffsetSyncStore) -> tuple[list[int], list[set]]:
    """Counts the rows each seek slice reads and the partitions read whole."""
    rows, wholes = [], []
    recent, history = store.recent, store.history

    def read(keys, after, until):
        found = list(recent(keys, after, until))
        rows.append(len(found))
        return found

    store.recent = read
    store.history = lambda keys: wholes.append(set(keys)) or history(keys)
    return rows, wholes


def test_below_a_window_a_seek_reads_back_only_as_far_as_the_offset(ledger) -> None:
    """An exactly-once partition of 120 transactions, one a second, windowed to its newest
    4: an offset 10 transactions below the window reads a few slices of time (tens of runs),
    not the 120; the epoch's first offset reads them all, still without a whole-epoch read."""
    location, engine = ledger
    runs = {0: exactly_once(0, 0, 120), 1: exactly_once(5, 5, 120)}
    write(location, runs, 0)
    refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    store = LedgerEngine(location).load_store(FLOW)
    assert store.seek == {("T", 0): (0, 0), ("T", 1): (5, 5)}
    store.seek_step = dt.timedelta(seconds=1)
    rows, wholes = counting(store)
    raw0 = [Run(*r) for r in runs[0]]
    floor_u = store.floors("T", 0)[0]
    ten_below = runs[0][-WINDOW - 10][0]
    assert store.forward("T", 0, ten_below).offset == forward(raw0, ten_below)
    assert wholes == [] and 2 <= len(rows) <= 4 and sum(rows) <= 4 * 16, rows
    assert ten_below >= store.floors("T", 0)[0] < floor_u
    # a checkpoint pass deepens both partitions at once, each to its lowest offset
    rows.clear()
    raw1 = [Run(*r) for r in runs[1]]
    low_d = runs[1][60][1]
    store.deepen([("T", 0), ("T", 1)], {("T", 0): (0, None), ("T", 1): (None, low_d)})
    assert wholes == [] and sum(rows) <= 2 * 120, rows  # slices never read a run twice
    assert store.reverse("T", 1, low_d).offset == reverse(raw1, low_d)
    assert store.floors("T", 1)[1] <= low_d and store.floors("T", 0) == (0, 0)
    assert wholes == []
    # every offset: those below partition 1's first record (5) lie below its seek floors too
    for p, transactions in runs.items():
        assert_translates_like_raw(store, p, transactions)
    assert wholes == [{("T", 1)}]


def test_below_the_seek_floors_the_whole_epoch_is_read(ledger) -> None:
    """The replicator restarted from an earlier record after 40 transactions: the left-out
    spans rewind there, so the seek floors lie above the restart's reach; below them the
    store reads the partition's whole epoch, above them it seeks."""
    location, engine = ledger
    first = exactly_once(0, 0, 40)
    u, d, n = first[-1]
    again = exactly_once(first[20][0], d + n + 1, 60)  # copies records again, further on
    write(location, {0: first + again}, 0)
    refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    store = LedgerEngine(location).load_store(FLOW)
    (seek_u, seek_d), = store.seek.values()
    assert seek_u >= u + n and seek_d > d  # above every end of the first 40
    raw = [Run(*r) for r in first + again]
    rows, wholes = counting(store)
    assert store.forward("T", 0, seek_u).offset == forward(raw, seek_u)
    assert wholes == [] and rows
    assert store.forward("T", 0, seek_u - 1).offset == forward(raw, seek_u - 1)
    assert wholes == [{("T", 0)}] and store.dropped == {} and store.seek == {}
    assert_translates_like_raw(store, 0, first + again)


def test_a_snapshot_table_of_an_earlier_release_gains_the_seek_columns(ledger) -> None:
    """A snapshot written without the seek columns (an earlier release) still loads its
    windows, without seek floors (below a window: the whole epoch); the next refresh adds the
    columns (a metadata commit), and the windows seek again."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from ledger.schemas import arrow_schema

    location, engine = ledger
    write(location, {0: exactly_once(0, 0, 30)}, 0)
    refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    rows = LedgerEngine(location).query("SELECT * FROM {sp}", sp=OFFSET_SYNC_SPANS)
    older = pa.schema([f for f in arrow_schema(OFFSET_SYNC_SPANS)
                       if not f.name.startswith("seek_")])
    path = f"{location}/{OFFSET_SYNC_SPANS}"
    DeltaTable.create(path, older, mode="overwrite")
    write_deltalake(path, pa.Table.from_pylist(
        [{k: v for k, v in r.items() if not k.startswith("seek_")} for r in rows],
        schema=older), mode="overwrite")
    assert "seek_upstream_offset" not in LedgerEngine(location).columns(OFFSET_SYNC_SPANS)

    store = LedgerEngine(location).load_store(FLOW)
    assert store.dropped == {("T", 0): 26} and store.seek == {}
    _, wholes = counting(store)
    assert store.forward("T", 0, 1).offset == forward([Run(*r) for r in
                                                       exactly_once(0, 0, 30)], 1)
    assert wholes == [{("T", 0)}]

    fresh = LedgerEngine(location)
    refresh(fresh, {FLOW: ("P", "B")}, window=WINDOW)
    assert {"seek_upstream_offset", "seek_downstream_offset"} <= fresh.columns(
        OFFSET_SYNC_SPANS)
    # the spans left out before have no known floors; those the next cut leaves out do
    old_floors = LedgerEngine(location).load_store(FLOW).floors("T", 0)
    u, d, n = exactly_once(0, 0, 30)[-1]
    write(location, {0: exactly_once(u + n, d + n + 1, 10)}, 30)
    refresh(fresh, {FLOW: ("P", "B")}, window=WINDOW)
    store = LedgerEngine(location).load_store(FLOW)
    assert store.dropped == {("T", 0): 36} and store.seek == {("T", 0): old_floors}


def test_a_store_without_a_ledger_names_what_it_cannot_read(ledger) -> None:
    location, engine = ledger
    write(location, {0: exactly_once(0, 0, 30)}, 0)
    refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    store = LedgerEngine(location).load_store(FLOW)
    store.history = store.recent = None
    with pytest.raises(ValueError, match=r"holds windows only .*\('T', 0\)"):
        store.forward("T", 0, 0)


def test_a_refresh_over_a_store_that_sought_writes_the_window_as_loaded(ledger) -> None:
    """An engine keeps its store: a checkpoint pass's seek, then a refresh at the same version
    through the same engine, writes the window and positions it loaded, not the runs sought."""
    location, engine = ledger
    write(location, {0: exactly_once(0, 0, 30)}, 0)
    refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    before = snapshot(engine)
    same = LedgerEngine(location)
    store = same.load_store(FLOW)
    assert store.forward("T", 0, 1).offset == forward([Run(*r) for r in
                                                       exactly_once(0, 0, 30)], 1)
    assert store.prepended == {("T", 0): 26}
    refresh(same, {FLOW: ("P", "B")}, window=WINDOW)
    after = snapshot(same)
    assert [(r["batch_id"], r["upstream_offset"], r["seek_upstream_offset"]) for r in after[0]] \
        == [(r["batch_id"], r["upstream_offset"], r["seek_upstream_offset"]) for r in before[0]]
