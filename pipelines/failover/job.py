"""``offset-ledger failover|failback --group G --from X --to Y``: move a group between clusters.

Sequence (seconds, not MM2's 2 x (emit + sync intervals))::

    consumers of G stop
      -> check G has no active members on X and Y        (GroupActiveError otherwise)
      -> wait until offset_syncs cover X's end offsets    (bounded by --timeout; progress shown)
      -> checkpoint G now: forward and reverse translations, recorded in the ledger
      -> write G's offsets on Y (never rewinding), recorded as resume points
      -> record the operation with the ledger versions used
      -> print the topics to subscribe to on Y and the offsets G resumes from

Invariants:
    * Nothing is written to Kafka or the ledger with ``--dry-run`` or when any check fails.
    * An untranslatable partition is reported, never replaced by a guessed offset: the
      operation fails (exit 4) unless ``--allow-untranslatable`` is given, and even then no
      offset is written for that partition.
    * If X is unreachable (a disaster), the last commits recorded in the ledger are used and
      the wait is skipped: everything replicated before X stopped is resumed from.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from dataclasses import dataclass

from pyspark.sql import functions as F

from ledger.config import Config
from ledger.errors import OffsetLedgerError
from ledger.schemas import (
    CHECKPOINTS,
    GROUP_OFFSETS,
    OFFSET_SYNCS,
    OPERATIONS,
    OPERATIONS_SCHEMA,
    REPLICATION_PROGRESS,
    RESUME_POINTS,
    RESUME_POINTS_SCHEMA,
)
from ledger.store import OffsetSyncStore
from ledger.tables import Ledger
from pipelines import kafka_admin
from pipelines.checkpoint.compute import OffsetWrite
from pipelines.checkpoint.engine import Checkpointer, CheckpointResult, resume_point_row, utcnow
from pipelines.checkpoint.mapping import subscribe_topics
from pipelines.checkpoint.report import render, translation_rows
from pipelines.spark import get_spark


class ReplicationLagError(OffsetLedgerError):
    exit_code = 3


class UntranslatableError(OffsetLedgerError):
    exit_code = 4


@dataclass
class OperationResult:
    operation_id: str
    kind: str
    group: str
    source: str
    target: str
    subscribe: list[str]
    checkpoint: CheckpointResult
    start_writes: list[OffsetWrite]
    seconds_to_ready: float
    dry_run: bool

    def as_dict(self) -> dict:
        return {
            "operation_id": self.operation_id, "kind": self.kind, "group": self.group,
            "from": self.source, "to": self.target, "dry_run": self.dry_run,
            "subscribe": self.subscribe, "seconds_to_ready": round(self.seconds_to_ready, 3),
            "translations": translation_rows(self.checkpoint.checkpoints),
            "offsets_written": [
                {"topic": w.topic, "partition": w.partition, "offset": w.offset,
                 "previous_offset": w.previous_offset}
                for w in self.checkpoint.writes + self.start_writes],
            "ledger_versions": self.checkpoint.versions,
        }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--group", required=True)
    parser.add_argument("--from", dest="source", required=True, help="cluster alias")
    parser.add_argument("--to", dest="target", required=True, help="cluster alias")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds to wait for replication to catch up (default 120)")
    parser.add_argument("--catch-up", action="store_true",
                        help="run one replication pass of the flows involved first")
    parser.add_argument("--dry-run", action="store_true", help="print, write nothing")
    parser.add_argument("--allow-untranslatable", action="store_true",
                        help="proceed when some partitions cannot be translated (none written)")
    parser.add_argument("--format", choices=["table", "json"], default="table")


def _progress(message: str) -> None:
    print(f"\r{message}", end="", file=sys.stderr, flush=True)


class Mover:
    """Failover and failback of one group."""

    def __init__(self, spark, config: Config):
        self.spark = spark
        self.config = config
        self.ledger = Ledger(spark, config.ledger_location)
        self.checkpointer = Checkpointer(spark, config, self.ledger)

    def check_inactive(self, group: str, source: str, target: str) -> bool:
        """Raise if G is active anywhere; return whether the source answered."""
        source_live = True
        try:
            kafka_admin.check_reachable(self.config.cluster(source), timeout=5.0)
            kafka_admin.ensure_inactive(self.config.cluster(source), group)
        except kafka_admin.KafkaAdminError:
            source_live = False
            print(f"warning: cluster {source} is unreachable: disaster mode, resuming from the "
                  "last commits recorded in the ledger", file=sys.stderr)
        kafka_admin.ensure_inactive(self.config.cluster(target), group)
        return source_live

    def wait_for_replication(self, group: str, source: str, target: str,
                             timeout: float) -> None:
        """Block until the runs cover the end offsets of every topic G needs translated."""
        flow = self.config.flow(source, target)
        commits, _ = self.checkpointer.observe(source, [group])
        mappings = self.checkpointer.mappings(flow, {c.topic for c in commits})
        needed: dict[tuple[str, str], set[int]] = {}
        for c in commits:
            if c.topic in mappings:
                m = mappings[c.topic]
                needed.setdefault((m.sync_flow, m.sync_topic), set()).add(c.partition)
        if not needed:
            return
        ends: dict[tuple[str, str, int], int] = {}
        for (sync_flow, topic), partitions in needed.items():
            cluster = self.config.cluster(sync_flow.split("->")[0])
            marks = kafka_admin.watermarks(cluster, topic, max(partitions) + 1)
            ends.update({(sync_flow, topic, p): marks[p][1] for p in partitions})
        deadline = time.monotonic() + timeout
        while True:
            behind = self._behind(ends)
            if not behind:
                if sys.stderr.isatty():
                    _progress("replication caught up".ljust(70) + "\n")
                return
            lag = sum(end - got for _, got, end in behind)
            _progress(f"waiting for replication: {len(behind)} partition(s), {lag} record(s) "
                      "behind")
            if time.monotonic() > deadline:
                print(file=sys.stderr)
                detail = ", ".join(f"{k[0]} {k[1]}[{k[2]}] at {got}/{end}"
                                   for k, got, end in behind[:5])
                raise ReplicationLagError(
                    f"replication has not caught up within {timeout:.0f}s ({detail}); run "
                    "`offset-ledger replicate --flow ...`, pass --catch-up, or raise --timeout")
            time.sleep(0.5)  # polling the ledger for a condition, with a deadline

    def _behind(self, ends: dict[tuple[str, str, int], int]) -> list:
        """``[(key, replicated_up_to, end)]`` for every partition replication has not reached.

        ``replication_progress`` (one small row per partition) answers first; the runs in
        ``offset_syncs`` are read only for partitions it does not show as caught up.
        """
        flows = sorted({f for f, _, _ in ends})
        progress = {}
        if self.ledger.exists(REPLICATION_PROGRESS):
            rows = self.ledger.read(REPLICATION_PROGRESS).where(
                F.col("flow").isin(flows)).select(
                "flow", "topic", "partition", "next_upstream_offset").collect()
            progress = {(r["flow"], r["topic"], r["partition"]): r["next_upstream_offset"]
                        for r in rows if r["next_upstream_offset"] is not None}
        pending = {k: e for k, e in ends.items() if progress.get(k, -1) < e}
        behind = []
        stores: dict[str, OffsetSyncStore] = {}
        for key, end in pending.items():
            sync_flow, topic, partition = key
            if sync_flow not in stores:
                topics = {t for f, t, _ in pending if f == sync_flow}
                stores[sync_flow] = OffsetSyncStore.load(self.ledger, sync_flow, topics=topics)
            got = max(stores[sync_flow].upstream_end(topic, partition) or 0,
                      progress.get(key, 0))
            if got < end:
                behind.append((key, got, end))
        return behind

    def catch_up(self, source: str, target: str) -> None:
        from pipelines.replicate.job import replicate_once

        flows = {f"{source}->{target}"}
        if any(f.source == target and f.target == source and f.enabled
               for f in self.config.flows):
            flows.add(f"{target}->{source}")
        for flow in sorted(flows):
            replicate_once(self.spark, self.config, flow)

    def start_offsets(self, group: str, target: str, subscribe: list[str],
                      written: set[tuple[str, int]]) -> list[OffsetWrite]:
        """Offsets at the log start for subscribed topics where G has nothing on the target.

        Such a topic holds only what producers wrote on the target cluster itself, which G has
        never read: it starts at the beginning, whatever its ``auto.offset.reset``.
        """
        cluster = self.config.cluster(target)
        existing = kafka_admin.group_offsets(cluster, group)
        topics = kafka_admin.list_topics(cluster)
        writes = []
        for topic in subscribe:
            if topic not in topics:
                continue
            for partition, (low, _) in kafka_admin.watermarks(cluster, topic,
                                                              topics[topic]).items():
                if (topic, partition) in existing or (topic, partition) in written:
                    continue
                writes.append(OffsetWrite(group, topic, partition, low, None, {}))
        return writes

    def move(self, kind: str, group: str, source: str, target: str, *, timeout: float = 120.0,
             catch_up: bool = False, dry_run: bool = False,
             allow_untranslatable: bool = False) -> OperationResult:
        started_mono, started = time.monotonic(), utcnow()
        flow = self.config.flow(source, target)
        self.ledger.init() if not dry_run else self.ledger.require()
        operation_id = f"{kind}-{started:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        source_live = self.check_inactive(group, source, target)
        if source_live:
            if catch_up and not dry_run:
                self.catch_up(source, target)
            self.wait_for_replication(group, source, target, timeout)
        plan = self.checkpointer.plan(flow.name, groups=[group], allow_unreachable_source=True)
        probe = plan.result
        if not probe.source_commits:
            raise OffsetLedgerError(f"group {group} has no committed offsets on {source}"
                                    + ("" if source_live else " recorded in the ledger"))
        untranslatable = [r for r in probe.checkpoints if r["target_offset"] is None]
        if untranslatable and not allow_untranslatable:
            raise UntranslatableError(
                f"{len(untranslatable)} partition(s) of group {group} cannot be translated; "
                "nothing was written:\n" + render(translation_rows(untranslatable)))
        subscribe = subscribe_topics(self.config, flow, {c.topic for c in probe.source_commits})
        if dry_run:
            written = {(w.topic, w.partition) for w in probe.writes}
            starts = self.start_offsets(group, target, subscribe, written)
            return OperationResult(operation_id, kind, group, source, target, subscribe, probe,
                                   starts, time.monotonic() - started_mono, True)
        result = self.checkpointer.commit(plan, sync=True, operation_id=operation_id,
                                          reason=kind, strict=True)
        written = {(w.topic, w.partition) for w in result.writes} | {
            (s[0]["target_topic"], s[0]["partition"]) for s in result.skipped}
        starts = self.start_offsets(group, target, subscribe, written)
        if starts:
            kafka_admin.alter_group_offsets(
                self.config.cluster(target), group,
                {(w.topic, w.partition): w.offset for w in starts})
            now = utcnow()
            rows = [resume_point_row(w, operation_id=operation_id, reason=kind, cluster=target,
                                     checkpoints_version=None, now=now) for w in starts]
            self.ledger.append(RESUME_POINTS, self.spark.createDataFrame(
                rows, RESUME_POINTS_SCHEMA))
        seconds = time.monotonic() - started_mono
        reverse = any(r["direction"] == "reverse" for r in result.checkpoints)
        self.ledger.append(OPERATIONS, self.spark.createDataFrame([{
            "operation_id": operation_id, "kind": kind, "group_id": group,
            "from_cluster": source, "to_cluster": target, "status": "completed",
            "subscribe_topics": subscribe,
            "offset_syncs_version": result.versions.get(OFFSET_SYNCS),
            "checkpoints_version": result.versions.get(CHECKPOINTS),
            "group_offsets_version": result.versions.get(GROUP_OFFSETS),
            "resume_points_version": self.ledger.version(RESUME_POINTS),
            "reverse_checkpointing": reverse, "started_at": started, "ready_at": utcnow(),
            "seconds_to_ready": seconds,
            "message": None if source_live else f"{source} unreachable: recorded commits used",
        }], OPERATIONS_SCHEMA))
        result.versions[OPERATIONS] = self.ledger.version(OPERATIONS)
        return OperationResult(operation_id, kind, group, source, target, subscribe, result,
                               starts, seconds, False)


def print_result(result: OperationResult, fmt: str) -> None:
    if fmt == "json":
        print(json.dumps(result.as_dict(), indent=2, default=str))
        return
    verb = "would resume" if result.dry_run else "resumes"
    print(f"{result.kind} {result.operation_id}{' (dry run)' if result.dry_run else ''}: "
          f"group {result.group} {result.source} -> {result.target}, ready in "
          f"{result.seconds_to_ready:.1f}s")
    print(f"subscribe on {result.target}: {', '.join(result.subscribe)}")
    print(render(translation_rows(result.checkpoint.checkpoints)))
    for w in result.start_writes:
        print(f"{result.group} {verb} at {result.target}:{w.topic}[{w.partition}] offset "
              f"{w.offset} (log start: never consumed by this group)")
    if not result.dry_run:
        print(f"ledger versions: {result.checkpoint.versions}")


def run(args: argparse.Namespace, config: Config) -> int:
    mover = Mover(get_spark(f"offset-ledger-{args._verb}"), config)
    result = mover.move(args._verb, args.group, args.source, args.target, timeout=args.timeout,
                        catch_up=args.catch_up, dry_run=args.dry_run,
                        allow_untranslatable=args.allow_untranslatable)
    print_result(result, args.format)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python pipelines/failover/job.py failover --group G --from P --to B``."""
    from pipelines.cli import main as cli_main

    return cli_main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
