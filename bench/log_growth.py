"""The Delta log of a year: what a year's tombstones cost the replicator and a store load.

A streaming flow commits ``offset_syncs`` every 5 s (17,280 files a day) and MERGEs
``replication_progress`` as often. ``ledger maintain`` compacts those files daily; each file it
replaces, and each file a MERGE replaces, leaves a **tombstone** (a ``remove`` action) that Delta
keeps in every log checkpoint for ``delta.deletedFileRetentionDuration``: the table's retention
(``ledger.maintenance.Retention``; ``ledger.streamed.retention.days``, a week, for
``offset_syncs``). At a steady state it holds about 17,280 x 7 = 120,960 tombstones (at 400
days, 6.9 million), and the replicator's delta-rs commits write a checkpoint every ``max(10,
actions / 500)`` commits (``ledger.commits.checkpoint_due``).

``bench.ledger_year`` writes a year's rows in a few commits, so its log holds none of this. Here
a small ledger is built with the replicator's own commits (``--commits`` of the streaming
driver's pattern, :mod:`bench.year_history`, with the replicator's span upkeep), then for each
``--tombstones`` count one commit holding that many ``remove`` actions (of compacted files, as
daily maintains leave them) is added to ``offset_syncs`` (its retention set to keep them), and
to ``replication_progress`` as many as its own retention keeps (a day's), and what the
replicator and the verbs do next is timed on it:

* the replicator's next ``offset_syncs`` commits as its recorder makes them (the table kept
  open: the first opens it; its span upkeep refreshing, untimed) up to the one that writes the
  next log checkpoint, that checkpoint's size, and a table open just before it (the most JSON
  commits a reader replays);
* its ``replication_progress`` MERGE;
* a fresh engine's store load of the whole flow (what ``status``, ``translate`` and
  ``failover`` do first), whose answers must equal the tombstone-free ledger's.

Kafka- and Spark-free::

    .venv/bin/python -m bench.log_growth                                  # 0, a week, 400 days
    .venv/bin/python -m bench.log_growth --tombstones 0,100000 --commits 24   # quick
    .venv/bin/python -m bench.log_growth --tombstones 0 --log-files 1000000   # the log folder

With ``--log-files``, the log folder instead: that many more commit files in ``offset_syncs``'
log (a week's: 120,960; 6.9 million at 400 days of log retention), read by listing it, by
opening the table, by the replicator's commits and by a store load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from pathlib import Path

from bench import year_history as yh
from bench.common import in_folder, save_results
from bench.tail_growth import load_median
from ledger import commits, direct
from ledger.config import (
    DEFAULT_AUDIT_RETENTION_DAYS,
    DEFAULT_SPANS_REFRESH_RUNS,
    DEFAULT_SPANS_WINDOW,
)
from ledger.engine import LedgerEngine
from ledger.maintenance import Retention, retention_properties
from ledger.schemas import NATURAL_KEYS, OFFSET_SYNC_SPANS, OFFSET_SYNCS, REPLICATION_PROGRESS
from pipelines.replicate.span_upkeep import SpanUpkeep

REPEATS = 3
COMMITS_PER_DAY = 24 * yh.COMMITS_PER_HOUR
RETENTION = Retention()
STEADY_TOMBSTONES = int(COMMITS_PER_DAY * RETENTION.days(OFFSET_SYNCS))
"""``offset_syncs``' tombstones at a steady state: a file a commit, each replaced once, kept for
its retention (``ledger.streamed.retention.days``, a week)."""
YEAR_TOMBSTONES = COMMITS_PER_DAY * DEFAULT_AUDIT_RETENTION_DAYS
"""The same kept for the audit retention (``ledger.streamed.retention.days: 400``)."""
TABLES = (OFFSET_SYNCS, REPLICATION_PROGRESS)
REFRESH_RUNS = DEFAULT_SPANS_REFRESH_RUNS
"""The replicator's span upkeep refreshes after this many runs (``ledger.spans.refresh.runs``)."""


def keep(table: str, days: float) -> None:
    """What ``ledger init`` sets with Spark: ``days`` of log and replaced files (delta-rs cannot
    set ``delta.checkpointRetentionDuration``, which nothing here reads)."""
    from deltalake import DeltaTable

    wanted = retention_properties(days)
    wanted.pop("delta.checkpointRetentionDuration")
    DeltaTable(table).alter.set_table_properties(wanted)


def copy_of(base: str, location: str) -> str:
    """A fresh copy of the built ledger at ``location``, for one point."""
    shutil.rmtree(location, ignore_errors=True)
    shutil.copytree(base, location)
    return location


def answered(location: str, probes: list, reference: list, point: dict, what: str) -> dict:
    """A point's store load, checked to answer as the reference ledger did; its copy removed,
    the point printed and returned."""
    load_s, found = answers(location, probes)
    point["load_store_s"] = round(load_s, 3)
    if found != reference:
        raise SystemExit(f"with {what} the store translates differently")
    shutil.rmtree(location, ignore_errors=True)
    print(json.dumps(point), flush=True)
    return point


def build(location: str, pattern: yh.Pattern, count: int, t0: int) -> None:
    """``count`` commits as the streaming driver makes them, the upkeep refreshing the spans."""
    if not isinstance(commits.create_missing_tables(location), list):
        raise SystemExit(f"delta-rs could not create the ledger at {location}")
    for name in (*TABLES, OFFSET_SYNC_SPANS):
        keep(f"{location}/{name}", RETENTION.days(name))
    upkeep = SpanUpkeep(location, yh.FLOW, (yh.SOURCE, yh.TARGET), REFRESH_RUNS,
                        DEFAULT_SPANS_WINDOW)
    for i in range(count):
        rows = yh.commit_rows(pattern, t0, i)
        commits.append_with_txn(location, OFFSET_SYNCS, rows, app_id=yh.APP_ID, version=i)
        _merge_progress(location, pattern, i + 1, t0)
        upkeep.appended(len(rows), direct=True)
        upkeep.wait()
    upkeep.close()


def _merge_progress(location: str, pattern: yh.Pattern, done: int, t0: int,
                    opened: direct.Tables | None = None) -> float:
    started = time.perf_counter()
    outcome = commits.merge_on_keys(location, REPLICATION_PROGRESS,
                                    yh.progress(pattern, done, t0),
                                    NATURAL_KEYS[REPLICATION_PROGRESS], opened)
    if outcome is not commits.COMMITTED:
        raise SystemExit(f"replication_progress MERGE did not commit ({outcome})")
    return time.perf_counter() - started


def tombstone_days(name: str, count: int) -> float:
    """The retention under which ``name`` holds ``count`` tombstones at a steady state (one a
    commit): its own (``ledger.maintenance.Retention``), or longer for a count past it (the
    point asks what a longer ``ledger.streamed.retention.days`` would hold)."""
    return max(RETENTION.days(name), count / COMMITS_PER_DAY)


def add_tombstones(table: str, count: int, now_ms: int) -> None:
    """One commit removing ``count`` files, one deleted every commit interval back from now as
    daily maintains leave them (paths of the length Delta's writers give; none of them exists,
    as after a VACUUM). The table must keep them: :func:`tombstone_days`."""
    from deltalake import DeltaTable

    version = DeltaTable(table).version() + 1
    spread = 86_400_000 // COMMITS_PER_DAY
    with open(Path(table, "_delta_log", f"{version:020d}.json"), "w") as out:
        out.write(json.dumps({"commitInfo": {"timestamp": now_ms, "operation": "OPTIMIZE",
                                             "operationParameters": {}}}) + "\n")
        for k in range(count):
            path = f"part-00000-{k:08x}-0000-4000-8000-{k:012x}-c000.zstd.parquet"
            out.write(json.dumps({"remove": {
                "path": path, "deletionTimestamp": now_ms - k * spread, "dataChange": False,
                "extendedFileMetadata": True, "size": 41_000}}) + "\n")


def checkpoint_bytes(table: str) -> int:
    log = Path(table, "_delta_log")
    newest = max(log.glob("*.checkpoint*.parquet"), default=None)
    if newest is None:
        return 0
    version = newest.name.split(".")[0]
    return sum(p.stat().st_size for p in log.glob(f"{version}.checkpoint*.parquet"))


def answers(location: str, probes: list[tuple[str, int, int, int]]) -> tuple[float, list]:
    """The median of ``REPEATS`` fresh whole-flow loads, and the forward and reverse answers of
    the last load at ``probes`` (topic, partition, upstream offset, replica offset)."""
    seconds, store = load_median(location, REPEATS)
    out = [(store.forward(t, p, x).offset, store.reverse(t, p, c).offset)
           for t, p, x, c in probes]
    return seconds, out


def median_s(fn) -> float:
    """The median seconds of ``REPEATS`` calls of ``fn``."""
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 3)


def head_probes(location: str) -> list[tuple[str, int, int, int]]:
    """The last copied record of every 97th partition, both sides (later commits keep their
    answers: no rewind)."""
    store = LedgerEngine(location).load_store(yh.FLOW)
    return [(t, p, store.upstream_end(t, p) - 1, store.downstream_end(t, p) - 1)
            for t, p in (yh.topic_of(q) for q in range(0, yh.PARTITIONS, 97))]


def steady_tombstones(name: str, count: int) -> int:
    """The tombstones ``name`` holds when ``offset_syncs`` holds ``count`` (the point asked):
    another table lists its own retention's replaced files at most (``replication_progress``
    keeps a day, ``ledger.maintenance.Retention``)."""
    if name == OFFSET_SYNCS:
        return count
    return min(count, int(COMMITS_PER_DAY * RETENTION.days(name)))


def measure(base: str, work: Path, count: int, pattern: yh.Pattern, done: int, t0: int,
            reference: list, probes: list) -> dict:
    from deltalake import DeltaTable

    location = copy_of(base, str(work / f"tombstones-{count}"))
    now_ms = int(time.time() * 1000)
    point: dict = {"tombstones": count}
    for name in TABLES:
        point[f"{name}_tombstones"] = steady_tombstones(name, count)
        keep(f"{location}/{name}", tombstone_days(name, count))
        add_tombstones(f"{location}/{name}", point[f"{name}_tombstones"], now_ms)
        DeltaTable(f"{location}/{name}").create_checkpoint()  # the log as a checkpoint left it
    # the replicator's next commits as its recorder makes them (its tables kept open), up to
    # the one that writes a checkpoint (ledger.commits.checkpoint_due); the table opened
    # before that one, when a reader replays the most commits after the last checkpoint
    syncs = f"{location}/{OFFSET_SYNCS}"
    last = direct.last_checkpoint(Path(syncs))  # the one just written: the newest version
    if last is None:
        raise SystemExit(f"no log checkpoint in {syncs} after create_checkpoint")
    opened: direct.Tables = {}
    appends, i = [], done
    # the replicator's span upkeep refreshes as it does (its commits are not timed): a
    # checkpoint every hundreds of commits is hundreds of thousands of runs
    upkeep = SpanUpkeep(location, yh.FLOW, (yh.SOURCE, yh.TARGET), REFRESH_RUNS,
                        DEFAULT_SPANS_WINDOW)
    while True:
        rows = yh.commit_rows(pattern, t0, i)
        current = opened[syncs].version() if opened else last[0]
        if commits.checkpoint_due(current + 1, commits.SPARK_CHECKPOINT_INTERVAL, last):
            point["open_s"] = median_s(lambda: DeltaTable(syncs))
            point["replayed_commits"] = current - last[0]
        started = time.perf_counter()
        commits.append_with_txn(location, OFFSET_SYNCS, rows, app_id=yh.APP_ID, version=i,
                                opened=opened)
        appends.append(time.perf_counter() - started)
        i += 1
        upkeep.appended(len(rows), direct=True)
        upkeep.wait()
        if direct.last_checkpoint(Path(syncs)) != last:
            break
    upkeep.close()
    point["first_append_s"] = round(appends[0], 3)
    point["append_s"] = (round(statistics.median(appends[1:-1]), 3) if len(appends) > 2
                         else None)
    point["append_with_checkpoint_s"] = round(appends[-1], 3)
    point["commits_between_checkpoints"] = len(appends)
    size = checkpoint_bytes(syncs)
    point["checkpoint_mb"] = round(size / 2**20, 1)
    point["checkpoint_gb_a_day"] = round(size / 2**30 * COMMITS_PER_DAY / len(appends), 2)
    merges = [_merge_progress(location, pattern, done, t0, opened) for _ in range(REPEATS)]
    point["progress_merge_s"] = round(statistics.median(merges), 3)
    return answered(location, probes, reference, point, f"{count:,} tombstones")


def add_log_files(table: str, count: int) -> None:
    """``count`` commits (commit info only) after the table's newest, and its checkpoint copied
    to the last of them: the log folder of a table that has committed that much more, with
    the state it had (readers start at the checkpoint and never open the files below it)."""
    from deltalake import DeltaTable

    DeltaTable(table).create_checkpoint()
    log = Path(table, "_delta_log")
    pointer = json.loads((log / "_last_checkpoint").read_text())
    start = int(pointer["version"])
    body = (json.dumps({"commitInfo": {"timestamp": int(time.time() * 1000),
                                       "operation": "WRITE", "operationParameters": {}}})
            + "\n").encode()
    for version in range(start + 1, start + 1 + count):
        fd = os.open(log / f"{version:020d}.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            os.write(fd, body)
        finally:
            os.close(fd)
    newest = start + count
    shutil.copy(log / f"{start:020d}.checkpoint.parquet",
                log / f"{newest:020d}.checkpoint.parquet")
    (log / "_last_checkpoint").write_text(json.dumps({**pointer, "version": newest}))


def measure_log_files(base: str, work: Path, count: int, pattern: yh.Pattern, done: int,
                      t0: int, reference: list, probes: list) -> dict:
    """The same readings with ``count`` more commit files in offset_syncs' log folder."""
    from deltalake import DeltaTable

    location = copy_of(base, str(work / f"log-files-{count}"))
    syncs = Path(location, OFFSET_SYNCS)
    add_log_files(str(syncs), count)
    point: dict = {"log_files": count}
    point["list_log_s"] = median_s(lambda: direct.complete_version(syncs))
    point["open_s"] = median_s(lambda: DeltaTable(str(syncs)))
    opened: direct.Tables = {}
    for i, key in ((done, "first_append_s"), (done + 1, "next_append_s")):  # as the recorder
        started = time.perf_counter()
        commits.append_with_txn(location, OFFSET_SYNCS, yh.commit_rows(pattern, t0, i),
                                app_id=yh.APP_ID, version=i, opened=opened)
        point[key] = round(time.perf_counter() - started, 3)
    return answered(location, probes, reference, point, f"{count:,} more log files")


def spans_kept(base: str, pattern: yh.Pattern) -> dict:
    """What replaced span snapshots keep on disk a day, from the newest snapshot's size."""
    from deltalake import DeltaTable

    table = DeltaTable(f"{base}/{OFFSET_SYNC_SPANS}")
    size = sum(Path(f.removeprefix("file://")).stat().st_size for f in table.file_uris())
    per_day = COMMITS_PER_DAY * pattern.rows_per_commit / DEFAULT_SPANS_REFRESH_RUNS
    return {"snapshot_mb": round(size / 2**20, 2), "refreshes_per_day": round(per_day),
            "kept_gb_at_audit_retention": round(size * per_day * DEFAULT_AUDIT_RETENTION_DAYS
                                                / 2**30, 1),
            "kept_mb_a_day": round(size * per_day / 2**20, 1)}


def run(work: Path, counts: list[int], mode: str, count: int,
        log_files: tuple[int, ...] = ()) -> dict:
    pattern = yh.MODES[mode]
    base = str(work / "base")
    t0 = int(time.time()) - yh.COMMIT_S * count - 60
    build(base, pattern, count, t0)
    probes = head_probes(base)
    _, reference = answers(base, probes)
    points = [measure(base, work, n, pattern, count, t0, reference, probes) for n in counts]
    folders = [measure_log_files(base, work, n, pattern, count, t0, reference, probes)
               for n in log_files]
    return {"mode": mode, "commits": count, "steady_tombstones": STEADY_TOMBSTONES,
            "year_tombstones": YEAR_TOMBSTONES, "year_log_files": YEAR_TOMBSTONES,
            "spans": spans_kept(base, pattern),
            "points": points, "log_folders": folders}


def table(result: dict) -> str:
    lines = ["| offset_syncs tombstones | replication_progress tombstones | checkpoint MB "
             "| commits between checkpoints | checkpoints GB a day | first append s | append s "
             "| append + checkpoint s | progress MERGE s | open s | store load s |",
             "|---:" * 11 + "|"]
    for p in result["points"]:
        lines.append(f"| {p['tombstones']:,} | {p[f'{REPLICATION_PROGRESS}_tombstones']:,} "
                     f"| {p['checkpoint_mb']} | {p['commits_between_checkpoints']} | "
                     f"{p['checkpoint_gb_a_day']} | {p['first_append_s']} | {p['append_s']} | "
                     f"{p['append_with_checkpoint_s']} | {p['progress_merge_s']} | "
                     f"{p['open_s']} | {p['load_store_s']} |")
    if result.get("log_folders"):
        lines += ["", "| commit files in the log folder | list the log s | delta-rs open s "
                  "| first append s | next append s | store load s |",
                  "|---:|---:|---:|---:|---:|---:|"]
        for p in result["log_folders"]:
            lines.append(f"| {p['log_files']:,} | {p['list_log_s']} | {p['open_s']} | "
                         f"{p['first_append_s']} | {p['next_append_s']} | "
                         f"{p['load_store_s']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tombstones", default=f"0,{STEADY_TOMBSTONES},{YEAR_TOMBSTONES}",
                        help="remove actions added to offset_syncs (default: none, a week's "
                             "as its retention keeps them, and 400 days')")
    parser.add_argument("--commits", type=int, default=60,
                        help="replicator commits the ledger is built with (default 60)")
    parser.add_argument("--log-files", default="",
                        help="also time reads and commits with this many more commit files "
                             f"in the log folder (comma-separated; a week's: {STEADY_TOMBSTONES}, "
                             f"400 days': {YEAR_TOMBSTONES})")
    parser.add_argument("--mode", choices=sorted(yh.MODES), default="eos")
    parser.add_argument("--keep", help="build the ledgers in this folder and keep them")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.tombstones.split(",")]
    folders = tuple(int(c) for c in args.log_files.split(",") if c.strip())
    result = in_folder(args.keep, "log-growth-",
                       lambda work: run(work, counts, args.mode, args.commits, folders))
    out = save_results(f"log-growth-{args.mode}", result)
    print(table(result))
    print(json.dumps(result["spans"]))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
