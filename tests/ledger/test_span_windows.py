"""Windowed span snapshots (delta-rs): a partition whose spans do not coalesce keeps only its
newest spans, its positions numbered on, and a load answers every offset exactly as the raw
runs do, reading that partition's raw runs only for an offset below its window."""

from __future__ import annotations

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
    # below them, the partition's raw runs are read once, then every offset answers exactly
    assert store.forward("T", 0, floor_u - 1).offset == forward(raw0, floor_u - 1)
    assert deepened == [{("T", 0)}] and store.dropped == {}
    for p, runs in whole.items():
        assert_translates_like_raw(store, p, runs)

    # a second refresh starts from the window and numbers on
    refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    assert_window_is_the_newest_spans(engine, whole)
    assert snapshot(engine)[0][0]["batch_id"] == 32
    assert snapshot(engine)[1][0]["batch_id"] == 7  # 11 spans now: windowed too


@pytest.mark.parametrize("seed", range(3))
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
    for p, runs in whole.items():
        assert_translates_like_raw(store, p, runs)
    refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    assert_window_is_the_newest_spans(engine, whole)
    again = LedgerEngine(location).load_store(FLOW)
    for p, runs in whole.items():
        assert_translates_like_raw(again, p, runs)


def test_a_store_without_a_ledger_names_what_it_cannot_read(ledger) -> None:
    location, engine = ledger
    write(location, {0: exactly_once(0, 0, 30)}, 0)
    refresh(engine, {FLOW: ("P", "B")}, window=WINDOW)
    store = LedgerEngine(location).load_store(FLOW)
    store.history = None
    with pytest.raises(ValueError, match=r"holds windows only .*\('T', 0\)"):
        store.forward("T", 0, 0)
