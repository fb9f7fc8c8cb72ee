"""ledger.span_sql: the spans DataFusion computes for a delta-rs load are the spans
``ledger.spans`` computes in Python, on random histories, with and without a snapshot."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from ledger import commits
from ledger.engine import LedgerEngine
from ledger.schemas import OFFSET_SYNCS
from ledger.span_refresh import refresh
from ledger.spans import coalesce, extend
from ledger.store import OffsetSyncStore
from ledger.translation import Run, current_epoch

pytestmark = pytest.mark.unit

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
FLOW = "P->B"


def history(rng: random.Random, length: int) -> list[tuple[int, int, int]]:
    """One partition's runs in write order: contiguous copies, upstream gaps, transaction
    markers, rewinds (a restart from an earlier record) and now and then a new epoch."""
    runs, u, d = [], rng.randrange(0, 50), rng.randrange(0, 50)
    for _ in range(length):
        step = rng.random()
        if step < 0.1 and runs:  # rewind: copy again from an earlier record, further on
            back = runs[rng.randrange(len(runs))]
            u = back[0] + rng.randrange(back[2])
        elif step < 0.15 and runs:  # the replica was recreated: downstream starts lower
            d = rng.randrange(0, max(1, d))
        elif step < 0.35:
            u += rng.randrange(1, 5)  # upstream gap (compacted or aborted records)
        elif step < 0.55:
            d += 1  # a transaction marker downstream
        n = rng.randrange(1, 6)
        runs.append((u, d, n))
        u, d = u + n, d + n
    return runs


def rows_of(partition: int, runs: list[tuple[int, int, int]], batch: int) -> list[dict]:
    return [{"flow": FLOW, "source_cluster": "P", "target_cluster": "B", "topic": "T",
             "replica_topic": "P.T", "partition": partition, "upstream_offset": u,
             "downstream_offset": d, "length": n, "run_id": "r", "batch_id": batch,
             "written_at": T0 + dt.timedelta(seconds=batch)}
            for u, d, n in runs]


def write(location: str, histories: dict[int, list], first_batch: int) -> None:
    """Run ``i`` of every history in commit ``first_batch + i`` (one run per partition per
    commit: the write order is the list's, whatever the offsets)."""
    for i in range(max(len(runs) for runs in histories.values())):
        rows = [row for p, runs in histories.items() if i < len(runs)
                for row in rows_of(p, [runs[i]], first_batch + i)]
        assert commits.append(location, OFFSET_SYNCS, rows) is commits.COMMITTED


def expected(runs: list[tuple[int, int, int]]) -> list[Run]:
    return coalesce(current_epoch([Run(*r) for r in runs]))


@pytest.mark.parametrize("seed", range(3))
def test_the_query_gives_the_python_spans_of_random_histories(tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    histories = {p: history(rng, 24) for p in range(40)}
    location = str(tmp_path / "ledger")
    engine = LedgerEngine(location)
    engine.init()
    write(location, histories, 0)

    store = OffsetSyncStore.load_direct(engine, FLOW)
    assert store is not None
    assert store.runs == {("T", p): expected(runs) for p, runs in histories.items()}
    assert store.replica_topics == {"T": "P.T"}
    some = {("T", p) for p in range(0, 40, 7)}
    part = OffsetSyncStore.load_direct(engine, FLOW, partitions=some)
    assert part.runs == {k: v for k, v in store.runs.items() if k in some}
    # what a load holds whole, for a later load to reuse: all, the topics asked, or none
    assert store.holds(None) and store.holds({"T", "U"})
    assert not part.holds({"T"}) and part.holds(set())
    of_t = OffsetSyncStore.load_direct(engine, FLOW, topics={"T"})
    assert of_t.holds({"T"}) and not of_t.holds({"T", "U"}) and not of_t.holds(None)


@pytest.mark.parametrize("seed", range(3))
def test_a_snapshot_then_a_tail_gives_the_extended_spans(tmp_path, seed: int) -> None:
    rng = random.Random(100 + seed)
    covered = {p: history(rng, 12) for p in range(40)}
    location = str(tmp_path / "ledger")
    engine = LedgerEngine(location)
    engine.init()
    write(location, covered, 0)
    refresh(engine, {FLOW: ("P", "B")})
    # the tail continues each history (or rewinds into it, or starts a new epoch)
    tails = {}
    for p, runs in covered.items():
        u, d, n = runs[-1]
        more = history(random.Random(seed * 1000 + p), 12)
        low = min(r[0] for r in more)
        shift_u = u + n - low if rng.random() < 0.7 else 0  # else often below: a rewind
        shift_d = d + n if rng.random() < 0.9 else 0
        tails[p] = [(a + shift_u, b + shift_d, c) for a, b, c in more]
    write(location, tails, 12)

    store = OffsetSyncStore.load_direct(engine, FLOW)
    assert store is not None
    rewound = 0
    for p in covered:
        spans = extend(expected(covered[p]), [Run(*r) for r in tails[p]])
        if spans is None:  # a rewind into the covered runs: the raw history, recomputed
            rewound += 1
            spans = expected(covered[p] + tails[p])
        assert store.runs[("T", p)] == spans, p
    assert 0 < rewound < len(covered)  # both paths were taken


def test_an_engine_reads_a_flow_version_once_for_the_topics_it_holds(tmp_path, monkeypatch):
    """A move's coverage check, then its plan, load the same flow at the same version: one
    delta-rs read (issue 37); a new version or a topic not held is read again."""
    rng = random.Random(7)
    location = str(tmp_path / "ledger")
    engine = LedgerEngine(location)
    engine.init()
    write(location, {p: history(rng, 6) for p in range(4)}, 0)
    reads = []
    load = OffsetSyncStore.load_direct
    monkeypatch.setattr(OffsetSyncStore, "load_direct", classmethod(
        lambda cls, *a, **k: reads.append(a[1:]) or load(*a, **k)))
    held = engine.load_store(FLOW, topics={"T"}, partitions={("T", 1)})
    assert engine.load_store(FLOW, topics={"T"}) is held
    assert engine.load_store(FLOW, topics={"T"}, partitions={("T", 2)}) is held
    assert held.runs == OffsetSyncStore.load_direct(LedgerEngine(location), FLOW).runs
    reads.clear()
    assert engine.load_store(FLOW).runs == held.runs and len(reads) == 1  # all topics: asked
    write(location, {0: [(500, 500, 3)]}, 10)  # a new version: read again
    newer = engine.load_store(FLOW, topics={"T"})
    assert newer is not held and newer.runs[("T", 0)] != held.runs[("T", 0)]
    assert len(reads) == 2
