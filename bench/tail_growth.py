"""A replicator streaming with no checkpoint job: what its tail costs every store load, and
what the replicator's own span upkeep (``pipelines.replicate.span_upkeep``) leaves of it.

Two ledgers at a local path receive the same commits, the streaming driver's at-least-once
pattern for 1,000 partitions (:mod:`bench.year_history`: 800 runs a 5 s commit, each its own
delta-rs commit with the replicator's txn pair, as ``LedgerRecorder`` appends them). One has
nothing but the appends (a replicator of the release before the upkeep, with no checkpoint job
and no ``ledger maintain``: its tail is every run); the other has a :class:`SpanUpkeep`
told of each append as :class:`~pipelines.replicate.replicator.FlowReplicator` tells it. At each
point, a store load of the whole flow by a fresh engine (what ``status``, ``translate`` and
``failover`` do first) is timed on both, and the two loads must hold the same spans.

With ``--mode eos`` the commits are the exactly-once pattern (4,000 runs a commit, each run
followed by its marker: nothing coalesces), and the upkeep's snapshots keep windows of
``--window`` spans a partition (``ledger.spans.window``). The two loads then hold different
spans (windows against the whole epoch) and must translate alike instead: for a sample of
partitions, offsets at their heads (what the groups of a live flow commit) and one far below
every window; then, each timed apart on a fresh load, offsets 1 and 10 minutes behind the head
and at the epoch's start: below the windows, a store seeks back to them by time
(:mod:`ledger.span_seek`), and the runs each read are counted.

Kafka-free and Spark-free (a load past ``RUNS_IN_PROCESS`` runs would start Spark: the point
where that happens is printed instead of timed)::

    .venv/bin/python -m bench.tail_growth                        # 360,720,1440 commits
    .venv/bin/python -m bench.tail_growth --points 120,240 --keep /tmp/tail-growth
    .venv/bin/python -m bench.tail_growth --mode eos --points 120,360,720 --window 200

Refreshes are waited for as soon as they start (in the product they run on their own thread):
their seconds are each refresh's whole cost, printed beside the loads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench import year_history as yh
from bench.common import in_folder, save_results
from ledger import commits
from ledger.config import DEFAULT_SPANS_REFRESH_RUNS, DEFAULT_SPANS_WINDOW
from ledger.engine import LedgerEngine
from ledger.schemas import OFFSET_SYNCS
from ledger.store import RUNS_IN_PROCESS, OffsetSyncStore
from pipelines.replicate.span_upkeep import SpanUpkeep

REPEATS = 3
SAMPLE = 20
"""Partitions whose translations the eos mode compares (every 50th of the 1,000)."""


def load_median(location: str, repeats: int | None = None) -> tuple[float, OffsetSyncStore]:
    """The median of ``repeats`` (default ``REPEATS``) whole-flow loads by fresh engines, and
    the last store."""
    times, store = [], None
    for _ in range(REPEATS if repeats is None else repeats):
        started = time.perf_counter()
        store = LedgerEngine(location).load_store(yh.FLOW)
        times.append(time.perf_counter() - started)
    assert store is not None
    return round(statistics.median(times), 3), store


def _answers(store: OffsetSyncStore, keys: list[tuple[str, int]]) -> list:
    """Forward and reverse at each sampled partition's head (its last 3 records), in order."""
    out = []
    for topic, partition in keys:
        top_u, top_d = store.upstream_end(topic, partition), store.downstream_end(topic, partition)
        for back in (1, 2, 3):
            out.append((store.forward(topic, partition, top_u - back).offset,
                        store.reverse(topic, partition, top_d - back).offset))
    return out


def _compare(plain: OffsetSyncStore, kept: OffsetSyncStore, point: dict) -> None:
    """The windowed store answers like the plain one at the heads of 20 sampled partitions."""
    keys = sorted(plain.runs)[::len(plain.runs) // SAMPLE or 1][:SAMPLE]
    if _answers(plain, keys) != _answers(kept, keys):
        raise SystemExit(f"at {point['commits']} commits the two stores translate differently")
    point["windowed_partitions"] = len(kept.dropped)
    point["held_spans"] = sum(len(v) for v in kept.runs.values())
    point["seek_floored_partitions"] = len(kept.seek)


def _below(plain: str, kept: str, point: dict) -> None:
    """Offsets 1 and 10 minutes behind a sampled partition's head (about 4 runs a commit: 5
    runs in 4 of 5 commits) and at its epoch's first run (below every window: as old as the
    flow), each on a fresh load of the upkeep's ledger: how it was read (the window, a seek, the
    whole epoch), the runs the seek read and the time; the answer must be the raw runs'."""
    engine = LedgerEngine(plain)
    for p in range(0, yh.PARTITIONS, yh.BLOCK):  # one partition of each block: one has runs
        key = yh.topic_of(p)
        reference = engine.load_store(yh.FLOW, partitions={key}, raw=True)
        runs = reference.runs.get(key)
        if runs:
            break
    else:
        return
    for label, back in (("1min", 4 * 12), ("10min", 4 * 120), ("start", len(runs) - 1)):
        if back >= len(runs):
            continue
        low = runs[-1 - back].upstream_offset + 1
        fresh = LedgerEngine(kept).load_store(yh.FLOW)
        read: list[int] = []
        if fresh.recent is not None:
            fresh.recent = _counted(fresh.recent, read)
        windowed = key in fresh.dropped
        started = time.perf_counter()
        deep = fresh.forward(*key, low)
        point[f"below_{label}_s"] = round(time.perf_counter() - started, 3)
        point[f"below_{label}_runs_read"] = sum(read)
        point[f"below_{label}_read"] = (
            "held (no window)" if not windowed else "seek" if key in fresh.prepended
            else "window" if key in fresh.dropped else "whole epoch")
        if deep != reference.forward(*key, low):
            raise SystemExit(f"at {point['commits']} commits an offset below the window differs")
        if label == "10min" and windowed:  # the same offset as before seek floors: whole epoch
            fresh = LedgerEngine(kept).load_store(yh.FLOW)
            fresh.seek.clear()
            started = time.perf_counter()
            deep = fresh.forward(*key, low)
            point["below_10min_whole_epoch_s"] = round(time.perf_counter() - started, 3)
            point["below_10min_whole_epoch_runs"] = len(runs)
            if deep != reference.forward(*key, low):
                raise SystemExit(f"at {point['commits']} commits a whole-epoch read differs")


def _counted(recent, read: list[int]):
    """``recent`` (a store's seek reader) counting the runs each slice reads into ``read``."""
    def counted(keys, after, until):
        rows = list(recent(keys, after, until))
        read.append(len(rows))
        return rows
    return counted


def run(points: list[int], runs: int, work: Path, mode: str = "alo",
        window: int = DEFAULT_SPANS_WINDOW) -> list[dict]:
    plain, kept = str(work / "plain"), str(work / "upkeep")
    for location in (plain, kept):
        if not isinstance(commits.create_missing_tables(location), list):
            raise SystemExit(f"delta-rs could not create the ledger at {location}")
    upkeep = SpanUpkeep(kept, yh.FLOW, (yh.SOURCE, yh.TARGET), runs, window)
    pattern, results, refreshes = yh.MODES[mode], [], []
    t0 = int(time.time()) - yh.COMMIT_S * max(points) - 60
    appended = 0
    for i in range(max(points)):
        rows = yh.commit_rows(pattern, t0, i)
        for location in (plain, kept):
            commits.append_with_txn(location, OFFSET_SYNCS, rows, app_id=yh.APP_ID, version=i)
        appended += len(rows)
        before = len(upkeep.reports)
        started = time.perf_counter()
        upkeep.appended(len(rows), direct=True)
        upkeep.wait()
        if len(upkeep.reports) > before:
            refreshes.append(time.perf_counter() - started)
        if i + 1 not in points:
            continue
        point: dict = {"commits": i + 1, "hours": round((i + 1) / yh.COMMITS_PER_HOUR, 2),
                       "runs": appended, "refreshes": len(upkeep.reports),
                       "refresh_s_median": round(statistics.median(refreshes), 3)
                       if refreshes else None}
        if appended > RUNS_IN_PROCESS:
            point["plain_s"] = f"Spark (more than {RUNS_IN_PROCESS:,} runs)"
            point["upkeep_s"], kept_store = load_median(kept)
            point["held_spans"] = sum(len(v) for v in kept_store.runs.values())
            point["seek_floored_partitions"] = len(kept_store.seek)
        else:
            point["plain_s"], plain_store = load_median(plain)
            point["upkeep_s"], kept_store = load_median(kept)
            if mode == "eos":
                _compare(plain_store, kept_store, point)
            elif plain_store.runs != kept_store.runs:
                raise SystemExit(f"at {i + 1} commits the two loads differ")
        if mode == "eos":
            _below(plain, kept, point)
        results.append(point)
        print(json.dumps(point), flush=True)
    upkeep.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", default="360,720,1440",
                        help="commits (5 s each) at which loads are timed (360,720,1440)")
    parser.add_argument("--runs", type=int, default=DEFAULT_SPANS_REFRESH_RUNS,
                        help="ledger.spans.refresh.runs (the default)")
    parser.add_argument("--keep", help="build the ledgers in this folder and keep them")
    parser.add_argument("--mode", choices=sorted(yh.MODES), default="alo",
                        help="the commit pattern: at-least-once (default) or exactly-once")
    parser.add_argument("--window", type=int, default=DEFAULT_SPANS_WINDOW,
                        help="ledger.spans.window (the default)")
    args = parser.parse_args(argv)
    points = sorted({int(p) for p in args.points.split(",")})
    results = in_folder(args.keep, "tail-growth-", lambda work: run(
        points, args.runs, work, args.mode, args.window))
    out = save_results(f"tail-growth-{args.mode}", results)
    print("| commits | hours | runs | load, no upkeep (s) | load, upkeep (s) | spans held "
          "| 10 min behind: read, runs, s | the same, whole epoch: runs, s "
          "| the epoch's start: read, runs, s | refreshes | refresh (s) |\n"
          "|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|")
    for r in results:
        plain = r["plain_s"] if isinstance(r["plain_s"], str) else f"{r['plain_s']:.2f}"
        below = [", ".join(str(r.get(f"below_{label}_{k}", "")) for k in ("read", "runs_read", "s"))
                 if f"below_{label}_s" in r else "" for label in ("10min", "start")]
        whole = (f"{r['below_10min_whole_epoch_runs']}, {r['below_10min_whole_epoch_s']}"
                 if "below_10min_whole_epoch_s" in r else "")
        print(f"| {r['commits']} | {r['hours']} | {r['runs']:,} | {plain} | "
              f"{r['upkeep_s']:.2f} | {r.get('held_spans', '')} | {below[0]} | {whole} "
              f"| {below[1]} | {r['refreshes']} | {r['refresh_s_median']} |")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
