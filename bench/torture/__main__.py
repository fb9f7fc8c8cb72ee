"""``python -m bench.torture``: disaster-recovery torture test (issue 35).

Generates histories (one seed each: workload, groups, moves, faults), runs each on a fresh
pair of embedded clusters with the real CLI jobs and verbs, checks it with an independent
checker, prints what happened and appends one JSON line per history to the results file.

    python -m bench.torture --histories 5 --mode both
    python -m bench.torture --minutes 10 --mode eos
    python -m bench.torture --seed 1234 --mode alo       # replay one history
    python -m bench.torture --summary                    # totals over the results file
"""

from __future__ import annotations

import argparse
import faulthandler
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.torture import history, ops, results
from bench.torture.run import HistoryRun

DEFAULT_RESULTS = Path(__file__).resolve().parents[1] / "results" / "torture.jsonl"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.torture", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, help="the first seed (default: random); with "
                        "--histories 1 (the default) replays exactly that history")
    parser.add_argument("--histories", type=int, help="how many histories (default 1)")
    parser.add_argument("--minutes", type=float, help="start histories until this long passed")
    parser.add_argument("--mode", choices=("alo", "eos", "both"), default="both",
                        help="replication at-least-once, exactly-once, or alternate (default)")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS,
                        help=f"JSON lines appended here (default {DEFAULT_RESULTS})")
    parser.add_argument("--summary", action="store_true", help="print the totals of the "
                        "results file and exit")
    parser.add_argument("--markdown", action="store_true", help="with --summary: the table "
                        "of docs/reliability.md")
    parser.add_argument("--workdir", type=Path, help="keep each history's folder (logs, "
                        "ledger) here instead of a temporary folder removed afterwards")
    return parser.parse_args(argv)


def commit() -> str:
    done = subprocess.run(["git", "-C", str(ops.ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return done.stdout.strip()


def _interrupted(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    faulthandler.enable()  # a native crash prints every thread (soak 44000: SIGSEGV, no line)
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: where every thread is
    signal.signal(signal.SIGTERM, _interrupted)  # a stop runs every history's cleanup
    if args.summary:
        print(results.markdown(args.results) if args.markdown else results.summary(args.results))
        return 0
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    count = args.histories or (10**9 if args.minutes else 1)
    deadline = time.monotonic() + 60 * args.minutes if args.minutes else None
    template = ops.ledger_template()
    base = args.workdir or Path(tempfile.mkdtemp(prefix="offset-ledger-torture-"))
    entries, sha = [], commit()
    for i in range(count):
        if deadline is not None and time.monotonic() > deadline:
            break
        mode = args.mode if args.mode != "both" else ("alo", "eos")[i % 2]
        h = history.generate(seed + i, mode)
        print(f"history {i + 1}: {h.describe()}", flush=True)
        workdir = base / f"{h.prefix}-{mode}"
        outcome = HistoryRun(h, workdir, template).run()
        entry = results.line(outcome, sha)
        results.append(args.results, entry)
        entries.append(entry)
        bad = {k: v for k, v in entry["anomalies"].items() if v}
        harness = "; ".join(outcome.harness_errors)
        print(f"  {outcome.seconds:.0f}s: operations {entry['operations']}, faults "
              f"{entry['faults']}, records {entry['records_produced']} produced "
              f"(+{entry['records_aborted']} aborted), {entry['records_read']} read; "
              f"anomalies {bad or 'none'}{'; harness: ' + harness if harness else ''}; "
              f"seconds {outcome.stages}",
              flush=True)
        for detail in entry["details"][:12]:
            print(f"    {detail}", flush=True)
        if not args.workdir and not bad and not outcome.harness_errors:
            shutil.rmtree(workdir, ignore_errors=True)
    print(results.render("this run", results.totals(entries)))
    anomalies = sum(sum(e["anomalies"].values()) for e in entries)
    return 1 if anomalies or any(e["harness_errors"] for e in entries) else 0


if __name__ == "__main__":
    sys.exit(main())
