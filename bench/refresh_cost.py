"""What one span-snapshot refresh costs as a flow's history grows (issue 37 item 3).

One ledger at a local path receives the streaming driver's commits of 1,000 partitions
(:mod:`bench.year_history`'s pattern, each commit its own delta-rs commit with the replicator's
txn pair), and every ``--every`` commits its flow's snapshot is refreshed
(:func:`ledger.span_refresh.refresh`, the call the replicator's upkeep, a checkpoint pass and
``ledger maintain`` make). Each refresh prints its seconds, split into the store load (the
previous snapshot and the runs after it) and the commit of the new snapshot, and the spans it
wrote. With ``--mode eos`` nothing coalesces and the snapshot keeps windows of ``--window``
spans a partition, so the spans written stay between ``window`` and ``2 * window`` a
partition whatever the history's length::

    .venv/bin/python -m bench.refresh_cost --mode eos --commits 240 --every 12
    .venv/bin/python -m bench.refresh_cost --mode alo --commits 720 --every 60

Kafka-free and Spark-free.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bench import year_history as yh
from bench.common import in_folder, save_results
from ledger import commits
from ledger.config import DEFAULT_SPANS_WINDOW
from ledger.engine import LedgerEngine
from ledger.schemas import OFFSET_SYNCS
from ledger.span_refresh import refresh


class _Timed:
    """Seconds spent in the named methods of one object (instance attributes wrap them)."""

    def __init__(self, target: Any, names: tuple[str, ...]):
        self.seconds = dict.fromkeys(names, 0.0)
        for name in names:
            setattr(target, name, self._wrap(name, getattr(target, name)))

    def _wrap(self, name: str, method: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started

        return timed


def run(commit_count: int, every: int, work: Path, mode: str = "eos",
        window: int = DEFAULT_SPANS_WINDOW) -> list[dict]:
    """Append ``commit_count`` commits, refreshing every ``every``; one entry per refresh."""
    location = str(work / "ledger")
    if not isinstance(commits.create_missing_tables(location), list):
        raise SystemExit(f"delta-rs could not create the ledger at {location}")
    pattern, results, appended = yh.MODES[mode], [], 0
    t0 = int(time.time()) - yh.COMMIT_S * commit_count - 60
    for i in range(commit_count):
        rows = yh.commit_rows(pattern, t0, i)
        commits.append_with_txn(location, OFFSET_SYNCS, rows, app_id=yh.APP_ID, version=i)
        appended += len(rows)
        if (i + 1) % every:
            continue
        engine = LedgerEngine(location)  # a fresh engine, as each refresh's caller has
        timed = _Timed(engine, ("load_store", "replace"))
        started = time.perf_counter()
        [report] = refresh(engine, {yh.FLOW: (yh.SOURCE, yh.TARGET)}, window=window)
        entry = {"commits": i + 1, "runs": appended, "spans": report.spans,
                 "partitions": report.partitions,
                 "refresh_s": round(time.perf_counter() - started, 3),
                 "load_s": round(timed.seconds["load_store"], 3),
                 "commit_s": round(timed.seconds["replace"], 3)}
        results.append(entry)
        print(json.dumps(entry), flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=240,
                        help="commits (5 s each) to append (240: 20 minutes)")
    parser.add_argument("--every", type=int, default=12,
                        help="refresh every this many commits (12: about 50,000 exactly-once "
                             "runs, ledger.spans.refresh.runs)")
    parser.add_argument("--mode", choices=sorted(yh.MODES), default="eos",
                        help="the commit pattern: exactly-once (default) or at-least-once")
    parser.add_argument("--window", type=int, default=DEFAULT_SPANS_WINDOW,
                        help="ledger.spans.window (the default)")
    parser.add_argument("--keep", help="build the ledger in this folder and keep it")
    args = parser.parse_args(argv)
    results = in_folder(args.keep, "refresh-cost-", lambda work: run(
        args.commits, args.every, work, args.mode, args.window))
    out = save_results(f"refresh-cost-{args.mode}", results)
    print("| commits | runs | spans written | refresh (s) | store load (s) | commit (s) |\n"
          "|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['commits']} | {r['runs']:,} | {r['spans']:,} | {r['refresh_s']:.2f} | "
              f"{r['load_s']:.2f} | {r['commit_s']:.2f} |")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
