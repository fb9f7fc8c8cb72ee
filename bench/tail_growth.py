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

Kafka-free and Spark-free (a load past ``RUNS_IN_PROCESS`` runs would start Spark: the point
where that happens is printed instead of timed)::

    .venv/bin/python -m bench.tail_growth                        # 360,720,1440 commits
    .venv/bin/python -m bench.tail_growth --points 120,240 --keep /tmp/tail-growth

Refreshes are waited for as soon as they start (in the product they run on their own thread):
their seconds are each refresh's whole cost, printed beside the loads.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench import year_history as yh
from bench.common import RESULTS_DIR
from ledger import commits
from ledger.config import DEFAULT_SPANS_REFRESH_RUNS
from ledger.engine import LedgerEngine
from ledger.schemas import OFFSET_SYNCS
from ledger.store import RUNS_IN_PROCESS
from pipelines.replicate.span_upkeep import SpanUpkeep

REPEATS = 3


def _load_seconds(location: str) -> tuple[float, dict]:
    """The median of ``REPEATS`` whole-flow loads by fresh engines, and the spans loaded."""
    times, store = [], None
    for _ in range(REPEATS):
        started = time.perf_counter()
        store = LedgerEngine(location).load_store(yh.FLOW)
        times.append(time.perf_counter() - started)
    assert store is not None
    return round(statistics.median(times), 3), {k: list(v) for k, v in store.runs.items()}


def run(points: list[int], runs: int, work: Path) -> list[dict]:
    plain, kept = str(work / "plain"), str(work / "upkeep")
    for location in (plain, kept):
        if not isinstance(commits.create_missing_tables(location), list):
            raise SystemExit(f"delta-rs could not create the ledger at {location}")
    upkeep = SpanUpkeep(kept, yh.FLOW, (yh.SOURCE, yh.TARGET), runs)
    pattern, results, refreshes = yh.MODES["alo"], [], []
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
            point["upkeep_s"], _ = _load_seconds(kept)
        else:
            point["plain_s"], plain_spans = _load_seconds(plain)
            point["upkeep_s"], kept_spans = _load_seconds(kept)
            if plain_spans != kept_spans:
                raise SystemExit(f"at {i + 1} commits the two loads differ")
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
    args = parser.parse_args(argv)
    points = sorted({int(p) for p in args.points.split(",")})
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tail-growth-"))
    try:
        results = run(points, args.runs, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = RESULTS_DIR / f"tail-growth-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2))
    print("| commits | hours | runs | load, no upkeep (s) | load, upkeep (s) | refreshes "
          "| refresh (s) |\n|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        plain = r["plain_s"] if isinstance(r["plain_s"], str) else f"{r['plain_s']:.2f}"
        print(f"| {r['commits']} | {r['hours']} | {r['runs']:,} | {plain} | "
              f"{r['upkeep_s']:.2f} | {r['refreshes']} | {r['refresh_s_median']} |")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
