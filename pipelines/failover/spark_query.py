"""``failover|failback --spark-checkpoint PATH --from X --to Y``: move a streaming query.

A Structured Streaming query keeps its Kafka offsets in its checkpoint, not in a group. The move
is the group's (:class:`pipelines.failover.mover.Mover`: the same checks, readiness and
translation), with the checkpoint standing in for the group's commits::

    the query stops
      -> read the newest committed batch of PATH (offsets/N with commits/N)
      -> X answers (else: error; --disaster declares it lost and skips the wait)
      -> wait until the runs cover those offsets (--catch-up replicates until they do)
      -> PATH unchanged for --quiet-seconds since it was read (else: the query runs: refused)
      -> translate every partition (one untranslatable partition: exit 4, nothing written)
      -> startingOffsets on Y for the subscription of the reference architecture:
         translated partitions, and the log start of every other subscribed partition
      -> PATH still unchanged -> write <name>-on-Y-<stamp>.json beside PATH, record the
         checkpoints, resume points, evidence and the operation in the ledger
      -> print the new query's options: checkpointLocation, subscribe, startingOffsets

Invariants:
    * Nothing is written (file or ledger) with ``--dry-run`` or when any check fails; the
      query's own checkpoint is never modified.
    * In the ledger the query is the "group" ``spark:<name>`` (``--query-name``, default the
      checkpoint folder's name without a previous move's suffix), so ``audit --group`` and the
      audit marts show its operations like a group's: the resume points are the
      startingOffsets, each translated one backed by its checkpoint row and the spans.
    * A running query is detected by its checkpoint changing (a batch planned or committed)
      while the move waits and computes; Spark holds no lock, so an idle running query shows
      no change: stop the query first (docs/spark-queries.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ledger import clock, records
from ledger.errors import OffsetLedgerError
from ledger.schemas import CHECKPOINTS, GROUP_OFFSETS, OFFSET_SYNCS, RESUME_POINTS
from pipelines.checkpoint import offsets as offsets_json
from pipelines.checkpoint.compute import GroupCommit, OffsetWrite
from pipelines.checkpoint.coverage import log_start_keys, needs_for
from pipelines.checkpoint.engine import CheckpointResult, resume_point
from pipelines.checkpoint.mapping import subscribe_topics
from pipelines.checkpoint.readiness import replication_lag
from pipelines.checkpoint.report import render, translation_rows
from pipelines.failover import evidence
from pipelines.failover import spark_checkpoint as sc
from pipelines.failover.mover import MoveOptions, Mover, MoveRecord


class QueryRunningError(OffsetLedgerError):
    """The checkpoint changed while the move ran: the query is still running."""


@dataclass
class QueryMove:
    """The outcome of one query's move (also what ``--format json`` prints)."""

    operation_id: str
    kind: str
    query: str
    checkpoint: sc.Checkpoint
    location: Path
    resume_file: Path
    document: dict
    checkpoints: list = field(default_factory=list)
    starts: list[OffsetWrite] = field(default_factory=list)
    seconds_to_ready: float = 0.0
    replication_lag: int = 0
    dry_run: bool = False
    versions: dict[str, int] = field(default_factory=dict)

    def subscribe(self) -> list[str]:
        """Every topic the query subscribes to on the target (all sources)."""
        return sorted({t for s in self.document["sources"] for t in s["subscribe"].split(",")
                       if t})

    def as_dict(self) -> dict:
        return {**self.document, "query": self.query, "dry_run": self.dry_run,
                "resume_file": str(self.resume_file),
                "seconds_to_ready": round(self.seconds_to_ready, 3),
                "replication_lag_records": self.replication_lag,
                "uncommitted_batches": self.checkpoint.uncommitted,
                "translations": translation_rows(self.checkpoints),
                "log_starts": [{"topic": w.topic, "partition": w.partition, "offset": w.offset}
                               for w in self.starts],
                "ledger_versions": self.versions}


def query_label(checkpoint: sc.Checkpoint, name: str | None) -> str:
    """The query's name in the ledger's ``group_id`` columns."""
    return f"spark:{name or sc.base_name(checkpoint.path)}"


def _merge(sources: tuple[offsets_json.Offsets, ...], where: Path) -> offsets_json.Offsets:
    merged: offsets_json.Offsets = {}
    for offsets in sources:
        twice = {t for t, _ in offsets} & {t for t, _ in merged}
        if twice:
            raise sc.SparkCheckpointError(f"checkpoint {where}: topic(s) {sorted(twice)} are "
                                          "read by two sources of the query")
        merged.update(offsets)
    return merged


class QueryMover:
    """Moves streaming queries with a :class:`Mover`'s checks, readiness and ledger."""

    def __init__(self, mover: Mover):
        self.mover = mover
        self.config = mover.config
        self.ledger = mover.engine  # ledger.engine: delta-rs or Spark, as for every verb

    def move(self, kind: str, location: str, source: str, target: str, options: MoveOptions,
             name: str | None = None) -> QueryMove:
        started_mono, started = time.monotonic(), clock.now()
        flow = self.mover.check_flow(kind, source, target)
        checkpoint = sc.read(location)
        live = self.mover.check_source(source, options)
        self.ledger.require() if options.dry_run else self.ledger.init()
        label = query_label(checkpoint, name)
        offsets = _merge(checkpoint.sources, checkpoint.path)
        commits = [GroupCommit(source, label, t, p, o) for (t, p), o in sorted(offsets.items())]
        checkpointer = self.mover.checkpointer
        lag, log_starts, held = 0, set(), None
        if live:
            mappings = checkpointer.mappings(flow, {t for t, _ in offsets})
            needs = needs_for(commits, mappings)
            coverage, held = self.mover.wait_for_replication(source, needs, options, mappings)
            log_starts = log_start_keys(coverage)
            lag = replication_lag(self.config, self.ledger, needs, stores=held)
        self._await_quiet(checkpoint, started_mono, options.quiet_s)
        now = clock.now()
        checkpoints, stores = offsets_json.translate(
            checkpointer, source, target, offsets, label=label, now=now,
            checkpoint_id=uuid.uuid4().hex, log_starts=log_starts, stores=held)
        subscribe = [subscribe_topics(self.config, flow, {t for t, _ in s})
                     for s in checkpoint.sources]
        translated = offsets_json.translated(checkpoints)
        starts = self.mover.start_offsets(
            [label], target, {label: sorted({t for ts in subscribe for t in ts})},
            {(label, t, p) for t, p in translated})
        starting = [{k: o for k, o in [*translated.items(),
                                       *(((w.topic, w.partition), w.offset) for w in starts)]
                     if k[0] in topics} for topics in subscribe]
        operation_id = f"{kind}-{started:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        new_location = sc.successor(checkpoint.path, target, started)
        resume_file = new_location.with_name(new_location.name + ".json")
        if new_location.exists():
            raise sc.SparkCheckpointError(f"{new_location} exists already; nothing was written")
        document = sc.resume_document(
            operation_id=operation_id, kind=kind, source=source, target=target,
            checkpoint=checkpoint, location=new_location, subscribe=subscribe,
            starting=starting,
            bootstrap=self.config.cluster(target).client_config().get("bootstrap.servers", ""))
        result = QueryMove(operation_id, kind, label, checkpoint, new_location, resume_file,
                           document, checkpoints, starts, replication_lag=lag,
                           dry_run=options.dry_run)
        self._check_unchanged(checkpoint)
        if not options.dry_run:
            sc.write_resume(resume_file, document)
            result.versions = self._record(kind, result, source, target, stores, started,
                                           started_mono, live, options, now)
        result.seconds_to_ready = time.monotonic() - started_mono
        return result

    # --- is the query stopped? --------------------------------------------------------------

    def _await_quiet(self, checkpoint: sc.Checkpoint, since: float, quiet_s: float) -> None:
        """The checkpoint has not changed for ``quiet_s`` since it was read."""
        remaining = quiet_s - (time.monotonic() - since)
        if remaining > 0:
            time.sleep(remaining)  # a quiet period is a duration: nothing to await instead
        self._check_unchanged(checkpoint)

    def _check_unchanged(self, checkpoint: sc.Checkpoint) -> None:
        now = sc.read(checkpoint.path)
        if now.fingerprint() != checkpoint.fingerprint():
            raise QueryRunningError(
                f"checkpoint {checkpoint.path} changed while the move ran (newest batch "
                f"{checkpoint.newest_planned} -> {now.newest_planned}, committed "
                f"{checkpoint.batch_id} -> {now.batch_id}): the query is running. Stop it "
                "(query.stop(), or cancel its job run) and run the move again; nothing was "
                "written")

    # --- the ledger -------------------------------------------------------------------------

    def _record(self, kind: str, result: QueryMove, source: str, target: str, stores: dict,
                started, started_mono: float, live: bool, options: MoveOptions,
                now) -> dict[str, int]:
        """Checkpoints, resume points, evidence, then the operation row (in that order)."""
        label, op = result.query, result.operation_id
        self.ledger.append(CHECKPOINTS, records.rows(result.checkpoints))
        checkpoints_version = self.ledger.version(CHECKPOINTS)
        writes = [OffsetWrite(label, cp.target_topic, cp.partition, int(cp.target_offset),
                              None, cp) for cp in result.checkpoints] + result.starts
        points = [resume_point(w, operation_id=op, reason=kind, cluster=target,
                               checkpoints_version=checkpoints_version, now=now) for w in writes]
        self.ledger.append(RESUME_POINTS, records.rows(points))
        evidence.record(self.ledger, self.config, result.checkpoints, {label: op}, stores,
                        checkpoints_version, now)
        versions = {OFFSET_SYNCS: next(iter(stores.values())).version if stores
                    else self.ledger.version(OFFSET_SYNCS),
                    CHECKPOINTS: checkpoints_version}
        pass_result = CheckpointResult(uuid.uuid4().hex, f"{source}->{target}",
                                       checkpoints=result.checkpoints, versions=versions)
        cp = result.checkpoint
        message = (f"spark query checkpoint {cp.path} (query id {cp.query_id}) after batch "
                   f"{cp.batch_id} -> checkpointLocation {result.location}, options in "
                   f"{result.resume_file}")
        mode = "disaster" if not live else "continuous"
        self.mover.record_operations(MoveRecord(
            kind, (label,), source, target, {label: op}, {label: result.subscribe()}, started,
            time.monotonic() - started_mono, live, mode, messages={label: message}), pass_result)
        versions.update(pass_result.versions)
        versions.pop(GROUP_OFFSETS, None)
        return versions


def print_move(result: QueryMove, fmt: str) -> None:
    if fmt == "json":
        print(json.dumps(result.as_dict(), indent=2, default=str))
        return
    doc, cp = result.document, result.checkpoint
    dry = " (dry run)" if result.dry_run else ""
    print(f"{result.kind} {result.operation_id}{dry}: Spark query {result.query} "
          f"{doc['from']} -> {doc['to']}, ready in {result.seconds_to_ready:.1f}s")
    print(f"checkpoint {cp.path}: resumes after batch {cp.batch_id} (query id {cp.query_id})")
    if cp.uncommitted:
        print(f"batch(es) {cp.uncommitted} were planned but never committed: their records are "
              f"read again on {doc['to']}, as Spark would re-run them")
    print(render(translation_rows(result.checkpoints)))
    print(f"\nstart the query on {doc['to']} as a NEW query with these options:")
    for i, source in enumerate(doc["sources"]):
        head = "" if len(doc["sources"]) == 1 else f"source {i}: "
        print(f"  {head}kafka.bootstrap.servers  {doc['kafka.bootstrap.servers']}")
        print(f"  {head}subscribe                {source['subscribe']}")
        print(f"  {head}startingOffsets          {source['startingOffsets']}")
    print(f"  checkpointLocation       {doc['checkpointLocation']}")
    where = "would be saved" if result.dry_run else "saved"
    print(f"{where} in {result.resume_file}")
    if result.replication_lag:
        print(f"replication lags {result.replication_lag:,} record(s) behind the end on "
              f"{doc['from']}: they keep replicating and the query reads them on {doc['to']}")


def run(args: argparse.Namespace, mover: Mover, options: MoveOptions) -> int:
    if args.group or args.group_regex:
        args._parser.error("give --spark-checkpoint or --group/--group-regex, not both")
    if options.cutoff or options.allow_untranslatable:
        args._parser.error("--cutoff and --allow-untranslatable do not apply to "
                           "--spark-checkpoint (every partition of a query needs an offset)")
    result = QueryMover(mover).move(args._verb, args.spark_checkpoint, args.source,
                                    args.target, options, name=args.query_name)
    print_move(result, args.format)
    if not result.dry_run:
        print(f"audit: offset-ledger audit --operation {result.operation_id}",
              file=sys.stderr)
    return 0
