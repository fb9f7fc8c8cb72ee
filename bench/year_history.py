"""The ledger of a simulated year: the streaming driver's commit pattern in closed form.

Used by :mod:`bench.ledger_year`.

The commit pattern (:class:`Pattern`): one Delta commit every
``DEFAULT_COMMIT_INTERVAL_S`` (5 s: 720 commits an hour), ``batch_id`` the commit number,
``written_at`` 5 s apart. A commit holds the runs of the partitions that received records
since the previous one (``channel.summaries``: a commit's reports of one partition are
coalesced): 4 of 5 blocks of 200 partitions, the idle block rotating (block ``b`` idles in
commit ``i`` when ``(i + b) % 5 == 0``), so 800 partitions a commit.

* ``alo`` (at-least-once): one run of 6 records per active partition per commit, continuing
  where the previous one ended on both sides: 576,000 rows an hour (the issue: 575,000).
* ``eos`` (exactly-once): each transaction's marker takes a replica offset and ends the run,
  so 5 runs of 1 record per active partition per commit, 1 offset apart downstream:
  2,880,000 rows an hour (the issue: 2.9 million).

Every closed form exists twice, in Spark SQL (the history) and in Python (the tail and the
checks): the tail continues the history exactly (the test checks the product's span refresh
against the closed-form snapshot). Layout at each point, as a ledger maintained daily with a
checkpoint job running looks just before its next ``ledger maintain``:

* the history (every commit but the last ``TAIL_COMMITS``) as maintain leaves it: written in
  (topic, partition, downstream offset) order (what the Z-order clusters by), files of
  ``FILE_ROWS`` rows; and the span snapshot of that history (``offset_sync_spans``: in closed
  form, what the refresh computes), as the checkpoint job's refresh leaves it;
* the tail: the last ``TAIL_COMMITS`` commits (360, ``ledger.spans.refresh.commits``: the
  checkpoint job refreshes the snapshot once a flow is that far behind), each appended with
  the replicator's own delta-rs commit (:func:`ledger.commits.append_with_txn`, txn pair
  ``offset-ledger-replicate-P->B``, batch number), one file per commit;
* ``checkpoints`` and ``group_offsets``: 20 groups, group ``g`` committed on topic ``T{10g}``,
  one pass a minute over the last 25 hours only (the refresh window the verbs read; older
  checkpoint history is what ``bench.ledger_scale`` measures); two past failovers in
  ``operations`` with their ``resume_points``; ``replication_progress``, one row per partition.

Not simulated: upstream gaps, truncations and rewinds (a steady year), job restarts other than
a new ``run_id`` weekly.
"""
from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import RESULTS_DIR
from ledger.config import DEFAULT_SPANS_REFRESH_COMMITS

FLOW, SOURCE, TARGET = "P->B", "P", "B"
APP_ID = f"offset-ledger-replicate-{FLOW}"
TOPICS, PER_TOPIC = 200, 5
PARTITIONS = TOPICS * PER_TOPIC
BLOCKS = 5                               # blocks of 200 partitions; one idles in each commit
BLOCK = PARTITIONS // BLOCKS
COMMIT_S = 5                             # pipelines.replicate.streaming.DEFAULT_COMMIT_INTERVAL_S
COMMITS_PER_HOUR = 3600 // COMMIT_S
TAIL_COMMITS = DEFAULT_SPANS_REFRESH_COMMITS
FILE_ROWS = 25_000_000                   # rows per history file (maintain's OPTIMIZE output)
GROUPS, PASS_COMMITS, WINDOW_HOURS = 20, 12, 25
RUN_ID_COMMITS = 7 * 24 * COMMITS_PER_HOUR
RESULTS = RESULTS_DIR / "ledger_year.jsonl"
DISK_LIMIT = 40 * 2**30


@dataclass(frozen=True)
class Pattern:
    """Runs per active partition per commit, records per run, replica offsets after each run
    that hold no copy (a transaction marker)."""

    name: str
    runs: int
    length: int
    marker: int

    @property
    def rows_per_commit(self) -> int:
        return (BLOCKS - 1) * BLOCK * self.runs

    @property
    def rows_per_hour(self) -> int:
        return self.rows_per_commit * COMMITS_PER_HOUR


MODES = {"alo": Pattern("alo", 1, 6, 0), "eos": Pattern("eos", 5, 1, 1)}


# --- the closed forms (Python; SQL below) ------------------------------------------------------


def idle_residue(block: int) -> int:
    """Block ``block`` idles in the commits ``i`` with ``i % 5`` equal to this."""
    return (-block) % BLOCKS


def active_before(i: int, block: int) -> int:
    """Commits before ``i`` in which the partitions of ``block`` have runs."""
    return i - (i + BLOCKS - 1 - idle_residue(block)) // BLOCKS


def base(p: int) -> int:
    """Upstream offset of partition ``p``'s first copied record (the replica starts at 0)."""
    return 1000 + 37 * p


def topic_of(p: int) -> tuple[str, int]:
    return f"T{p // PER_TOPIC:03d}", p % PER_TOPIC


def records_before(pattern: Pattern, p: int, i: int) -> int:
    """Records of partition ``p`` copied in commits before ``i``."""
    return active_before(i, p // BLOCK) * pattern.runs * pattern.length


def downstream_of(pattern: Pattern, p: int, x: int) -> int:
    """The replica offset of upstream record ``x`` of partition ``p``."""
    m = x - base(p)
    return m // pattern.length * (pattern.length + pattern.marker) + m % pattern.length


def at(t0: int, i: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(t0 + COMMIT_S * i, dt.UTC)


def commit_rows(pattern: Pattern, t0: int, i: int) -> list[dict]:
    """The offset_syncs rows of commit ``i``, as the driver's ``sync_rows`` makes them."""
    rows = []
    for p in range(PARTITIONS):
        block = p // BLOCK
        if i % BLOCKS == idle_residue(block):
            continue
        topic, partition = topic_of(p)
        first = active_before(i, block) * pattern.runs
        for n in range(first, first + pattern.runs):
            rows.append({
                "flow": FLOW, "source_cluster": SOURCE, "target_cluster": TARGET,
                "topic": topic, "replica_topic": f"{SOURCE}.{topic}", "partition": partition,
                "upstream_offset": base(p) + n * pattern.length,
                "downstream_offset": n * (pattern.length + pattern.marker),
                "length": pattern.length, "run_id": f"year-run-{i // RUN_ID_COMMITS:04d}",
                "batch_id": i, "written_at": at(t0, i)})
    return rows


# --- the closed forms in Spark SQL -------------------------------------------------------------


def _sql_active_before(i: str, block: str) -> str:
    return f"({i} - div({i} + {BLOCKS - 1} - pmod(-({block}), {BLOCKS}), {BLOCKS}))"


def _sql_nth_active(a: str, block: str) -> str:
    """The commit of the ``a``-th (0-based) run-holding commit of ``block``."""
    t, r = f"pmod({a}, {BLOCKS - 1})", f"pmod(-({block}), {BLOCKS})"
    return f"({BLOCKS} * div({a}, {BLOCKS - 1}) + {t} + IF({t} >= {r}, 1, 0))"


def _run_columns(pattern: Pattern, p: str, n: str, i: str, t0: int) -> list[str]:
    topic = f"format_string('T%03d', div({p}, {PER_TOPIC}))"
    return [f"'{FLOW}' AS flow", f"'{SOURCE}' AS source_cluster",
            f"'{TARGET}' AS target_cluster", f"{topic} AS topic",
            f"concat('{SOURCE}.', {topic}) AS replica_topic",
            f"CAST(pmod({p}, {PER_TOPIC}) AS INT) AS partition",
            f"CAST(1000 + 37 * {p} + {n} * {pattern.length} AS BIGINT) AS upstream_offset",
            f"CAST({n} * {pattern.length + pattern.marker} AS BIGINT) AS downstream_offset",
            f"CAST({pattern.length} AS BIGINT) AS length",
            f"format_string('year-run-%04d', div({i}, {RUN_ID_COMMITS})) AS run_id",
            f"CAST({i} AS BIGINT) AS batch_id",
            f"timestamp_seconds({t0} + {COMMIT_S} * {i}) AS written_at"]


def history(spark, pattern: Pattern, commits: int, t0: int):
    """offset_syncs rows of commits ``0..commits-1``, in (topic, partition, offset) order."""
    frames = []
    for block in range(BLOCKS):
        per = active_before(commits, block) * pattern.runs
        total = BLOCK * per
        if not total:
            continue
        p, n = f"({BLOCK * block} + div(id, {per}))", f"pmod(id, {per})"
        i = _sql_nth_active(f"div({n}, {pattern.runs})", str(block))
        frames.append(spark.range(0, total, numPartitions=max(1, -(-total // FILE_ROWS)))
                      .selectExpr(*_run_columns(pattern, p, n, i, t0)))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def snapshot(spark, pattern: Pattern, syncs, commits: int, t0: int, version: int):
    """``offset_sync_spans`` of the history (what a refresh at ``version`` writes): contiguous
    runs coalesce into one span per partition; runs split by markers are each a span."""
    covered = f"timestamp_seconds({t0} + {COMMIT_S * (commits - 1)})"
    head = [f"CAST({version} AS BIGINT) AS offset_syncs_version", f"{covered} AS covered_until"]
    unseekable = ["CAST(NULL AS BIGINT) AS seek_upstream_offset",  # no window: no seek floors
                  "CAST(NULL AS BIGINT) AS seek_downstream_offset"]
    if pattern.marker:
        n = f"div(downstream_offset, {pattern.length + pattern.marker})"
        return syncs.selectExpr(*head, "flow", "source_cluster", "target_cluster", "topic",
                                "replica_topic", "partition", "upstream_offset",
                                "downstream_offset", "length", "'span' AS run_id",
                                f"{n} AS batch_id", f"{covered} AS written_at", *unseekable)
    p = "CAST(id AS BIGINT)"
    per = (f"({_sql_active_before(str(commits), f'div({p}, {BLOCK})')} * "
           f"{pattern.runs * pattern.length})")
    columns = _run_columns(pattern, p, "0", "0", t0)
    columns[8] = f"CAST({per} AS BIGINT) AS length"
    columns[9:] = ["'span' AS run_id", "CAST(0 AS BIGINT) AS batch_id", f"{covered} AS written_at"]
    return (spark.range(0, PARTITIONS, numPartitions=1).selectExpr(*columns)
            .selectExpr(*head, "*", *unseekable))


# --- the other tables ---------------------------------------------------------------------------


def group_partitions(g: int) -> list[int]:
    """Group ``g`` commits on topic ``T{10g}``: its 5 partitions."""
    first = 10 * g * PER_TOPIC
    return list(range(first, first + PER_TOPIC))


def pass_commits(commits: int) -> list[int]:
    """The commits after which a checkpoint pass ran (one a minute, the last 25 hours)."""
    passes = min(commits // PASS_COMMITS, WINDOW_HOURS * 3600 // (PASS_COMMITS * COMMIT_S))
    return [commits - 1 - PASS_COMMITS * (passes - 1 - q) for q in range(passes)]


def committed(pattern: Pattern, g: int, p: int, i: int) -> int:
    """Group ``g``'s committed offset on partition ``p`` at the pass after commit ``i``."""
    return max(base(p), base(p) + records_before(pattern, p, i + 1) - g)


def pass_frame(spark, pattern: Pattern, commits: int, t0: int):
    """(pass, group, partition, offsets, time) of every pass: the rows of both time tables."""
    after = pass_commits(commits)
    first, passes = (after[0] if after else 0), len(after)
    q, g, k = f"div(id, {GROUPS * PER_TOPIC})", f"pmod(div(id, {PER_TOPIC}), {GROUPS})", \
        f"pmod(id, {PER_TOPIC})"
    p, i = f"({10 * PER_TOPIC} * {g} + {k})", f"({first} + {PASS_COMMITS} * {q})"
    before = (f"{_sql_active_before(f'{i} + 1', f'div({p}, {BLOCK})')} * "
              f"{pattern.runs * pattern.length}")
    x = f"greatest(0, {before} - {g})"  # records before the committed offset
    d = (f"div({x}, {pattern.length}) * {pattern.length + pattern.marker} "
         f"+ pmod({x}, {pattern.length})")
    return spark.range(0, passes * GROUPS * PER_TOPIC, numPartitions=4).selectExpr(
        f"{q} AS q", f"format_string('year-g%02d', {g}) AS group_id",
        f"format_string('T%03d', div({p}, {PER_TOPIC})) AS topic",
        f"CAST({k} AS INT) AS partition", f"1000 + 37 * {p} + {x} AS source_offset",
        f"{d} AS target_offset", f"timestamp_seconds({t0} + {COMMIT_S} * {i} + 3) AS at")


def checkpoints(passes):
    return passes.selectExpr(
        "format_string('year-cp-%08d', q) AS checkpoint_id", f"'{FLOW}' AS flow",
        "'forward' AS direction", "group_id", f"'{SOURCE}' AS source_cluster",
        "topic AS source_topic", "partition", "source_offset", f"'{TARGET}' AS target_cluster",
        f"concat('{SOURCE}.', topic) AS target_topic", "target_offset",
        "'translated' AS status", "CAST(NULL AS STRING) AS reason", "false AS group_rewound",
        "CAST(1 AS BIGINT) AS offset_syncs_version", "at AS checkpointed_at")


def group_offsets(passes):
    return passes.selectExpr(
        "format_string('year-obs-%08d', q) AS observation_id", f"'{SOURCE}' AS cluster",
        "group_id", "topic", "partition", "source_offset AS committed_offset",
        "'Empty' AS group_state", "at - INTERVAL 1 SECOND AS observed_at")


def past_operations(pattern: Pattern, commits: int, t0: int) -> tuple[list, list, list[str]]:
    """Two failovers (groups 0 and 1) at a third and two thirds of the window, with the
    resume points of each; the checkpoints of their pass are in ``checkpoints``."""
    passes = pass_commits(commits)
    ops, points, ids = [], [], []
    for g, q in ((0, len(passes) // 3), (1, 2 * len(passes) // 3)):
        i, op = passes[q], f"failover-year-{g}"
        moment = at(t0, i) + dt.timedelta(seconds=3)
        ids.append(op)
        first = 10 * g
        ops.append({"operation_id": op, "kind": "failover", "group_id": f"year-g{g:02d}",
                    "from_cluster": SOURCE, "to_cluster": TARGET, "status": "completed",
                    "subscribe_topics": [f"T{first:03d}", f"{SOURCE}.T{first:03d}"],
                    **{f"{t}_version": 1 for t in ("offset_syncs", "checkpoints",
                                                    "group_offsets", "resume_points")},
                    "reverse_checkpointing": False,
                    "started_at": moment - dt.timedelta(seconds=2),
                    "ready_at": moment + dt.timedelta(seconds=3), "seconds_to_ready": 5.0,
                    "message": None})
        for p in group_partitions(g):
            topic, partition = topic_of(p)
            x = committed(pattern, g, p, i)
            points.append({
                "resume_point_id": f"year-rp-{g}-{partition}", "operation_id": op,
                "reason": "failover", "cluster": TARGET, "group_id": f"year-g{g:02d}",
                "topic": f"{SOURCE}.{topic}", "partition": partition,
                "offset": downstream_of(pattern, p, x), "previous_offset": None,
                "checkpoint_id": f"year-cp-{q:08d}", "direction": "forward",
                "source_cluster": SOURCE, "source_topic": topic, "source_offset": x,
                "offset_syncs_version": 1, "checkpoints_version": 1,
                "written_at": moment + dt.timedelta(seconds=2)})
    return ops, points, ids


def progress(pattern: Pattern, commits: int, t0: int) -> list[dict]:
    rows = []
    for p in range(PARTITIONS):
        topic, partition = topic_of(p)
        end = base(p) + records_before(pattern, p, commits)
        rows.append({"flow": FLOW, "topic": topic, "replica_topic": f"{SOURCE}.{topic}",
                     "partition": partition, "last_upstream_offset": end - 1,
                     "next_upstream_offset": end, "source_end_offset": end, "lag": 0,
                     "newest_record_timestamp": at(t0, commits - 1), "record_age_ms": 0,
                     "batch_id": commits - 1, "updated_at": at(t0, commits - 1)})
    return rows


# --- building a point ----------------------------------------------------------------------------


def build(spark, location: Path, pattern: Pattern, commits: int, t0: int,
          tail: int = TAIL_COMMITS) -> dict:
    """The ledger after ``commits`` commits (see the module docstring); its operation ids."""
    from ledger import commits as delta_commits
    from ledger import schemas
    from ledger.tables import Ledger

    ledger = Ledger(spark, str(location))
    ledger.init()
    covered = commits - min(tail, commits - 1)
    syncs = history(spark, pattern, covered, t0)
    started = time.perf_counter()
    ledger.append(schemas.OFFSET_SYNCS, syncs)
    history_s = time.perf_counter() - started
    version = ledger.version(schemas.OFFSET_SYNCS)
    ledger.append(schemas.OFFSET_SYNC_SPANS, snapshot(spark, pattern, syncs, covered, t0,
                                                      version))
    passes = pass_frame(spark, pattern, commits, t0)
    ops, points, ids = past_operations(pattern, commits, t0)
    for name, df in ((schemas.CHECKPOINTS, checkpoints(passes).coalesce(1)),
                     (schemas.GROUP_OFFSETS, group_offsets(passes).coalesce(1)),
                     (schemas.OPERATIONS, ops), (schemas.RESUME_POINTS, points),
                     (schemas.REPLICATION_PROGRESS, progress(pattern, commits, t0))):
        if isinstance(df, list):
            df = spark.createDataFrame(df, schemas.spark_schema(name))
        ledger.append(name, df)
    started = time.perf_counter()
    for i in range(covered, commits):  # the replicator's own commit, one per interval
        done = delta_commits.append_with_txn(str(location), schemas.OFFSET_SYNCS,
                                             commit_rows(pattern, t0, i), app_id=APP_ID,
                                             version=i)
        if done is not delta_commits.COMMITTED:
            raise RuntimeError(f"commit {i}: delta-rs did not commit ({done})")
    return {"operations": ids, "history_commits": covered, "tail_commits": commits - covered,
            "history_write_s": round(history_s, 1),
            "tail_write_s": round(time.perf_counter() - started, 1)}
