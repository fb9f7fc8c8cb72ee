"""A year of streaming, simulated: a 1,000-partition flow's ledger at growing durations.

``python -m bench.ledger_year [--mode alo|eos] [--points 1d,7d,30d] [--keep DIR]
[--budget-minutes M] [--repeats N] [--no-verbs] [--maintain-tables T,..]
[--zorder-whole-mb MB] [--compacted-mb MB]``

(the last two set ``ledger.maintenance``'s limits for the run: when a Z-ordered table stops being
Z-ordered whole and only its new files are compacted).

Kafka-free, one Spark session (``local[2]``). For each simulated duration (a point of the growth
curve) it builds the ledger of flow ``P->B``, 200 topics ``T000``..``T199`` of 5 partitions
(1,000 partitions), as the streaming driver (``pipelines.replicate.streaming``) leaves it, then
reports rows, bytes and files before and after ``ledger maintain`` (the product's
:func:`ledger.maintenance.maintain`, called as ``offset-ledger ledger maintain`` calls it), the
maintain's wall time, and the operator verbs' times before and after it (median of 3, the
readings of :mod:`bench.ledger_scale`). One JSON line per point in
``bench/results/ledger_year.jsonl``, a summary line with a linear extrapolation to a year.

The ledger each point builds, its commit pattern and closed forms: :mod:`bench.year_history`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shutil
import sys
import time
from pathlib import Path

from bench import ledger_scale
from bench.common import RESULTS_DIR, ledger_bench_session, offline_checkpointer
from bench.ledger_scale import measure
from bench.year_history import (
    COMMIT_S,
    COMMITS_PER_HOUR,
    DISK_LIMIT,
    FLOW,
    GROUPS,
    MODES,
    PARTITIONS,
    PER_TOPIC,
    RESULTS,
    SOURCE,
    TAIL_COMMITS,
    TARGET,
    Pattern,
    base,
    build,
    downstream_of,
    group_partitions,
    records_before,
    topic_of,
)

# --- measuring a point ---------------------------------------------------------------------------


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def table_stats(spark, location: Path) -> dict:
    """Rows, files and bytes of every table (Delta's own figures), and the folder on disk."""
    from ledger.schemas import TABLES
    from ledger.tables import Ledger

    ledger = Ledger(spark, str(location))
    out: dict = {"disk_bytes": disk_bytes(location), "tables": {}}
    for name in TABLES:
        if not ledger.exists(name):
            continue
        detail = spark.sql(f"DESCRIBE DETAIL {ledger.identifier(name)}").first()
        out["tables"][name] = {"rows": ledger.read(name).count(),
                               "files": int(detail["numFiles"] or 0),
                               "bytes": int(detail["sizeInBytes"] or 0)}
    return out


def verbs(spark, location: Path, pattern: Pattern, commits: int, op_ids: list[str]) -> dict:
    """The operator verbs' reads, Kafka-free (as ``bench.ledger_scale.operations``)."""
    from ledger.engine import LedgerEngine
    from ledger.store import OffsetSyncStore
    from pipelines.audit.audit import load_operations

    config, ledger, checkpointer = offline_checkpointer(spark, location, FLOW)
    groups = [f"year-g{g:02d}" for g in range(GROUPS)]
    flow = config.flow(FLOW)
    one = {topic_of(p)[0] for p in group_partitions(0)}
    group_topics = {topic_of(group_partitions(g)[0])[0] for g in range(GROUPS)}
    # an offset half way through each partition's history, and its copy
    middle = {topic_of(p): base(p) + records_before(pattern, p, commits) // 2
              for p in range(PARTITIONS)}

    def check(store: OffsetSyncStore | None, keys) -> None:
        assert store is not None
        for topic, partition in keys:
            x = middle[(topic, partition)]
            p = int(topic[1:]) * PER_TOPIC + partition
            assert store.forward(topic, partition, x).offset == downstream_of(pattern, p, x)
            assert store.reverse(topic, partition, downstream_of(pattern, p, x)).offset == x

    def translate_one() -> None:
        check(OffsetSyncStore.load(ledger, FLOW, topics=one), [k for k in middle if k[0] in one])

    def translate_one_direct() -> None:
        store = OffsetSyncStore.load_direct(LedgerEngine(str(location)), FLOW, topics=one)
        check(store, [k for k in middle if k[0] in one])

    def translate_all() -> None:
        check(OffsetSyncStore.load(ledger, FLOW), middle)

    def previous_checkpoints() -> None:
        assert len(checkpointer.previous_checkpoints(SOURCE, groups)) == GROUPS * PER_TOPIC

    def load_stores() -> None:
        stores = checkpointer.load_stores(checkpointer.mappings(flow, group_topics))
        assert len(stores[FLOW].runs) == GROUPS * PER_TOPIC

    def failover_dry_run() -> None:
        plan = checkpointer.plan(FLOW, groups=[groups[0]], recorded_commits=True)
        rows = plan.result.checkpoints
        assert len(rows) == PER_TOPIC and all(r.target_offset is not None for r in rows)

    def audit_one() -> None:
        ops, cps = load_operations(spark, config, operation=op_ids[-1])
        assert len(ops) == 1 and len(cps) == PER_TOPIC, (len(ops), len(cps))

    return {"translate, 1 group (5 partitions)": translate_one,
            "translate, 1 group, delta-rs": translate_one_direct,
            "translate, all 1,000 partitions": translate_all,
            "checkpoint: previous_checkpoints (20 groups)": previous_checkpoints,
            "checkpoint: load_stores (20 topics)": load_stores,
            "failover --dry-run (1 group, 5 partitions)": failover_dry_run,
            "audit: load_operations (1 operation)": audit_one}


def time_verbs(spark, location: Path, pattern: Pattern, commits: int, op_ids: list[str],
               label: str, warm_up: bool = True) -> dict:
    """Each verb's median of ``ledger_scale.REPEATS`` calls, after one untimed call (unless
    ``warm_up`` is false: the tests only need every verb to run and check its answers)."""
    out = {}
    for name, fn in verbs(spark, location, pattern, commits, op_ids).items():
        try:
            if warm_up:
                fn()
            m = measure(spark, fn)
        except Exception as exc:  # a verb that fails at this size is a finding, not a crash
            out[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            print(f"  {label} {name}: FAILED {out[name]['error']}", flush=True)
            continue
        out[name] = {"s": round(m["s"], 3), "all_s": m["all_s"],
                     "heap_mb": round(m["heap_mb"]), "rss_mb": round(m["rss_mb"])}
        print(f"  {label} {name}: {m['s']:.2f}s {m['all_s']}", flush=True)
    return out


def maintain(spark, location: Path, names: tuple[str, ...] = ()) -> dict:
    """``offset-ledger ledger maintain`` (what ``pipelines.ledger_admin`` calls), timed.

    Called table by table in its own order (the same work as one call over every table), so
    that each table's share is timed.
    """
    from ledger import maintenance
    from ledger.schemas import TABLES
    from ledger.tables import Ledger

    ledger = Ledger(spark, str(location))
    out: dict = {"tables_s": {}, "report": []}
    for name in [n for n in TABLES if n in (names or TABLES)]:
        started = time.perf_counter()
        reports = maintenance.maintain(ledger, maintenance.Retention(), (name,),
                                       vacuum=True, flows={FLOW: (SOURCE, TARGET)})
        out["tables_s"][name] = round(time.perf_counter() - started, 1)
        for r in reports:
            out["report"].append(r.line())
            print("  " + r.line().replace("\n", "\n  ") + f"  ({out['tables_s'][name]}s)",
                  flush=True)
    out["s"] = round(sum(out["tables_s"].values()), 1)
    return out


# --- the curve -----------------------------------------------------------------------------------


def parse_duration(text: str) -> int:
    """``30m``, ``6h``, ``7d``, ``1y`` -> commits (one per ``COMMIT_S`` seconds)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mhdwy])\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 6h, 7d, 1y)")
    seconds = float(m[1]) * {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400,
                             "y": 365 * 86400}[m[2]]
    return max(2, int(seconds // COMMIT_S))


def point(spark, root: Path, pattern: Pattern, label: str, commits: int, tail: int,
          timed: bool = True, tables: tuple[str, ...] = ()) -> dict:
    location = root / f"{pattern.name}-{label}" / "ledger"
    shutil.rmtree(location.parent, ignore_errors=True)
    location.parent.mkdir(parents=True)
    t0 = int(dt.datetime.now(dt.UTC).timestamp()) - COMMIT_S * commits - 60  # ends now
    from ledger import maintenance

    entry: dict = {"mode": pattern.name, "duration": label, "commits": commits,
                   "zorder_whole_bytes": maintenance.ZORDER_WHOLE_BYTES,
                   "compacted_bytes": maintenance.COMPACTED_BYTES,
                   "simulated_hours": round(commits / COMMITS_PER_HOUR, 2),
                   "partitions": PARTITIONS, "rows_per_hour": pattern.rows_per_hour}
    print(f"{pattern.name} {label} ({commits:,} commits): building in {location} ...",
          flush=True)
    started = time.perf_counter()
    entry.update(build(spark, location, pattern, commits, t0, tail))
    entry["build_s"] = round(time.perf_counter() - started, 1)
    entry["before"] = table_stats(spark, location)
    syncs = entry["before"]["tables"]["offset_syncs"]
    print(f"  built in {entry['build_s']}s: offset_syncs {syncs['rows']:,} rows, "
          f"{syncs['files']} files, {syncs['bytes'] / 2**20:.0f} MB; ledger on disk "
          f"{entry['before']['disk_bytes'] / 2**20:.0f} MB", flush=True)
    verbs_started = time.perf_counter()
    entry["verbs_before"] = time_verbs(spark, location, pattern, commits, entry["operations"],
                                       "before maintain:") if timed else {}
    entry["verbs_s"] = round(time.perf_counter() - verbs_started, 1)
    entry["maintain"] = maintain(spark, location, tables)
    entry["after"] = table_stats(spark, location)
    print(f"  after maintain: offset_syncs {entry['after']['tables']['offset_syncs']['files']} "
          f"files; ledger on disk {entry['after']['disk_bytes'] / 2**20:.0f} MB", flush=True)
    entry["verbs_after"] = time_verbs(spark, location, pattern, commits, entry["operations"],
                                      "after maintain:") if timed else {}
    return entry


def extrapolate(entries: list[dict], pattern: Pattern) -> dict:
    """A year and 400 days, linear in the rows from the two largest points (an estimate)."""
    if not entries:
        return {}
    big = entries[-1]
    rows = big["before"]["tables"]["offset_syncs"]["rows"]
    per_row = big["before"]["tables"]["offset_syncs"]["bytes"] / max(1, rows)
    out: dict = {"bytes_per_row": round(per_row, 2)}
    for label, hours in (("1y", 365 * 24), ("400d", 400 * 24)):
        year_rows = pattern.rows_per_hour * hours
        est = {"rows": year_rows, "bytes": int(year_rows * per_row)}
        if len(entries) >= 2:
            a, b = entries[-2], entries[-1]
            ra = a["before"]["tables"]["offset_syncs"]["rows"]
            slope = (b["maintain"]["s"] - a["maintain"]["s"]) / max(1, rows - ra)
            est["maintain_s"] = round(b["maintain"]["s"] + slope * (year_rows - rows))
        out[label] = est
    return out


def estimate(entries: list[dict], commits: int) -> tuple[float, float]:
    """Seconds and bytes a point of ``commits`` needs: a line through the last two points
    (fixed costs plus a cost per commit), proportional to the last one's with one point."""
    def cost(e: dict) -> float:
        return e["build_s"] + e["maintain"]["s"] + e.get("verbs_s", 120)

    last = entries[-1]
    grow = commits / last["commits"]
    need_b = grow * last["before"]["disk_bytes"]
    if len(entries) < 2:
        return grow * cost(last), need_b
    prev = entries[-2]
    slope = max(0.0, (cost(last) - cost(prev)) / max(1, last["commits"] - prev["commits"]))
    return cost(last) + slope * (commits - last["commits"]), need_b


def run(args: argparse.Namespace) -> list[dict]:
    pattern = MODES[args.mode]
    spark, root, state = ledger_bench_session("bench-ledger-year", args.keep)
    deadline = time.monotonic() + args.budget_minutes * 60
    entries: list[dict] = []
    RESULTS_DIR.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    try:
        for label, commits in args.points:
            if entries:  # skip a point that cannot fit (time linear in the commits)
                need_s, need_b = estimate(entries, commits)
                free = shutil.disk_usage(root).free
                if need_s > deadline - time.monotonic() or need_b > min(DISK_LIMIT, free / 2):
                    print(f"{label}: skipped (about {need_s / 60:.0f} min and "
                          f"{need_b / 2**30:.1f} GB needed)", flush=True)
                    _write(stamp, [{"mode": pattern.name, "duration": label, "skipped": True,
                                    "estimated_s": round(need_s),
                                    "estimated_bytes": int(need_b)}])
                    continue
            entry = point(spark, root, pattern, label, commits, args.tail_commits,
                          not args.no_verbs, args.maintain_tables)
            entry["repeats"] = ledger_scale.REPEATS
            entry["started"] = stamp
            entries.append(entry)
            _write(stamp, [entry])
            if not args.keep:
                shutil.rmtree(root / f"{pattern.name}-{label}", ignore_errors=True)
        summary = {"mode": pattern.name, "summary": True, "started": stamp,
                   "extrapolated": extrapolate(entries, pattern),
                   "points": [e["duration"] for e in entries]}
        _write(stamp, [summary])
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)
    return entries


def _write(stamp: str, entries: list[dict]) -> None:
    with RESULTS.open("a") as f:
        for e in entries:
            f.write(json.dumps({"started": stamp, **e}, default=str) + "\n")


def table(entries: list[dict]) -> str:
    """The README table: one row per point."""
    names = list(entries[0]["verbs_before"]) if entries else []
    head = ("| simulated | offset_syncs rows | bytes | files before -> after maintain | "
            "maintain s | " + " | ".join(f"{n} s (before / after)" for n in names) + " |")
    lines = [head, "|---" * (5 + len(names)) + "|"]
    for e in entries:
        syncs_b, syncs_a = e["before"]["tables"]["offset_syncs"], e["after"]["tables"][
            "offset_syncs"]
        files_b = sum(t["files"] for t in e["before"]["tables"].values())
        files_a = sum(t["files"] for t in e["after"]["tables"].values())
        cells = [e["duration"], f"{syncs_b['rows']:,}", f"{syncs_b['bytes'] / 2**20:,.0f} MB",
                 f"{syncs_b['files']} -> {syncs_a['files']} ({files_b} -> {files_a} all)",
                 f"{e['maintain']['s']}"]
        for n in names:
            b, a = e["verbs_before"].get(n, {}), e["verbs_after"].get(n, {})
            cells.append(f"{b.get('s', 'fail')} / {a.get('s', 'fail')}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _points(text: str) -> list[tuple[str, int]]:
    return [(t.strip(), parse_duration(t)) for t in text.split(",") if t.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger_year", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=sorted(MODES), default="alo",
                        help="the commit pattern: at-least-once or exactly-once (default alo)")
    parser.add_argument("--points", type=_points, default=_points("1d,7d,30d,90d,1y"),
                        help="simulated durations, growing (default 1d,7d,30d,90d,1y)")
    parser.add_argument("--tail-commits", type=int, default=TAIL_COMMITS,
                        help=f"commits after the last span refresh (default {TAIL_COMMITS})")
    parser.add_argument("--keep", metavar="DIR", help="build the ledgers in DIR and keep them")
    parser.add_argument("--budget-minutes", type=float, default=60.0,
                        help="skip a point whose estimated time exceeds what is left")
    parser.add_argument("--zorder-whole-mb", type=float,
                        help="ledger.maintenance.ZORDER_WHOLE_BYTES for this run, in MB (0: "
                             "every Z-ordered table is compacted incrementally)")
    parser.add_argument("--compacted-mb", type=float,
                        help="ledger.maintenance.COMPACTED_BYTES for this run, in MB")
    parser.add_argument("--maintain-tables", type=lambda t: tuple(t.split(",")), default=(),
                        help="maintain only these tables (comma-separated; default all)")
    parser.add_argument("--repeats", type=int, default=ledger_scale.REPEATS,
                        help=f"timed runs of each verb, the median reported (default "
                             f"{ledger_scale.REPEATS}, after one warm-up)")
    parser.add_argument("--no-verbs", action="store_true",
                        help="time ledger maintain only, not the verbs")
    args = parser.parse_args(argv)
    ledger_scale.REPEATS = args.repeats
    if args.zorder_whole_mb is not None:
        from ledger import maintenance

        maintenance.ZORDER_WHOLE_BYTES = int(args.zorder_whole_mb * 2**20)
    if args.compacted_mb is not None:
        from ledger import maintenance

        maintenance.COMPACTED_BYTES = int(args.compacted_mb * 2**20)
    entries = run(args)
    print(table(entries))
    print(f"results: {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
