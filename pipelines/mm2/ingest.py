"""``offset-ledger ingest mm2 --flow 'P->B' [--once]``: read an MM2 flow's syncs and checkpoints.

Reads, for the flow ``S->T`` of an existing MirrorMaker 2 (or SRM) deployment:

* ``mm2-offset-syncs.<T>.internal`` on S (``offset-syncs.topic.location: source``, MM2's
  default) or ``mm2-offset-syncs.<S>.internal`` on T (``target``), into ``offset_syncs``: each
  sync is a run of length 1 (MM2's point sync), in the order MM2 wrote them, so the DESIGN.md
  epoch and translation rules apply with n = 1, which is MM2's own rule;
* ``<S>.checkpoints.internal`` on T into ``checkpoints`` (forward, or reverse for a topic that
  came from T), so audits show what MM2's checkpoints said;
* MM2's Connect offsets topic on T (``mm2-offsets.<S>.internal`` in dedicated mode, or
  ``--connect-offsets-topic``): MirrorSourceConnector's committed source offsets, the last
  upstream record of each partition that T acknowledged, into ``replication_progress`` rows
  (flow, topic, partition). That is how far MM2 has replicated, which sparse syncs do not say:
  failover/failback readiness and ``status`` read it as they read offset-ledger's own progress.

Invariants:
    * Origin: every ingested row is marked. ``offset_syncs.run_id`` is ``mm2:<sync topic>`` and
      ``batch_id`` the sync's offset in that topic; ``checkpoints.checkpoint_id`` is
      ``mm2:<checkpoint topic>@<offset>``. Nothing else in the ledger starts with ``mm2:``.
    * Incremental and bounded: how far each internal topic was read is one
      ``replication_progress`` row (flow, internal topic, partition 0), MERGEd after the rows
      are appended; a pass reads that row, then only the records after it. Appends carry a
      Delta ``txnAppId``/``txnVersion`` (the last offset read), so a pass re-run after a crash
      between the append and the position update writes nothing twice.
    * A record that does not decode stops the pass with an error before anything is written.
    * Records are read up to the end offsets measured at the start of the pass.
    * Kafka errors are classified (``pipelines.edge.kafka_errors``): both clusters are probed before
      Spark starts (a wrong password or TLS problem: exit 2), and both internal topics are
      checked readable before the ledger is touched (a missing READ ACL is one line naming it,
      exit 2, nothing written). Only MM2's Connect offsets topic is optional (a warning).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ledger import clock
from ledger.config import ClusterConfig, Config, FlowConfig, reload_config
from ledger.errors import OffsetLedgerError
from ledger.policy import ReplicationPolicy
from ledger.records import CheckpointRecord, ProgressRecord, rows
from ledger.schemas import CHECKPOINTS, OFFSET_SYNCS, REPLICATION_PROGRESS, spark_schema
from ledger.tables import Ledger
from ledger.writer import WRITTEN_AT_STEP
from pipelines.args import add_flow_arguments, add_startup_wait
from pipelines.edge import kafka_errors, kafka_offsets
from pipelines.edge.kafka_errors import KafkaAccessError
from pipelines.edge.preflight import STARTUP_WAIT_S
from pipelines.mm2 import formats

log = logging.getLogger(__name__)

ORIGIN = "mm2:"
POLL_TIMEOUT_S = 1.0
READ_TIMEOUT_S = 60.0


class IngestError(OffsetLedgerError):
    """An MM2 internal topic cannot be read."""


@dataclass(frozen=True)
class Source:
    """One MM2 internal topic of a flow and the cluster that holds it."""

    cluster: ClusterConfig
    topic: str


@dataclass
class Record:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None


@dataclass
class IngestResult:
    flow: str
    syncs_topic: str
    checkpoints_topic: str
    syncs: int = 0
    checkpoints: int = 0
    positions: dict[str, int] = field(default_factory=dict)
    replicated: dict[tuple[str, int], int] = field(default_factory=dict)

    def summary(self) -> str:
        where = ", ".join(f"{t} at {o}" for t, o in sorted(self.positions.items()))
        return (f"ingest mm2 flow {self.flow}: {self.syncs} offset-sync(s), "
                f"{self.checkpoints} checkpoint(s) ingested; read up to {where or 'nothing'}; "
                f"MM2 replication progress for {len(self.replicated)} partition(s)")


def sources(config: Config, flow: FlowConfig) -> tuple[Source, Source]:
    """The flow's MM2 offset-syncs and checkpoints topics and where they live."""
    sep = config.replication_policy_separator
    if flow.offset_syncs_topic_location == "target":
        syncs = Source(config.cluster(flow.target), formats.offset_syncs_topic(flow.source, sep))
    else:
        syncs = Source(config.cluster(flow.source), formats.offset_syncs_topic(flow.target, sep))
    return syncs, Source(config.cluster(flow.target), formats.checkpoints_topic(flow.source, sep))


def _consumer(source: Source) -> tuple[Consumer, kafka_errors.ErrorWatch]:
    config, watch = kafka_errors.watched(source.cluster.client_config(**{
        "group.id": "offset-ledger-mm2-ingest", "enable.auto.commit": False,
        "enable.partition.eof": False, "log_level": 0}))
    return Consumer(config), watch


def _read_error(source: Source, error: object, consumer: Consumer,
                watch: kafka_errors.ErrorWatch, doing: str) -> OffsetLedgerError:
    """A failed read of an MM2 internal topic, classified: a missing ACL, a wrong password or
    a TLS problem is named as what it is (with what to fix); anything else is an IngestError."""
    kafka_errors.serve(consumer, 0.1)
    problem = kafka_errors.classify(error, source.cluster.alias, source.cluster.properties,
                                    operation="READ", resource=f"topic {source.topic}",
                                    watch=watch)
    if problem.kind in (kafka_errors.OTHER, kafka_errors.UNKNOWN_TOPIC):
        return IngestError(f"cluster {source.cluster.alias}: {doing} {source.topic} "
                           f"(is MirrorMaker 2 running this flow?): {problem.message}")
    return KafkaAccessError.of(problem)


def check_readable(source: Source) -> None:
    """Raise the classified error unless ``source`` exists and may be read (before anything is
    written). It is looked up by name: Kafka answers "not authorized" for a topic one may not
    describe, existing or not, and that is an error naming the ACL, never "does not exist"."""
    from pipelines.edge import kafka_admin

    found = kafka_admin.describe_topics(source.cluster, [source.topic], "READ")[source.topic]
    if isinstance(found, KafkaAccessError):
        if found.kind == kafka_errors.UNKNOWN_TOPIC:
            raise IngestError(f"cluster {source.cluster.alias}: no topic {source.topic} (is "
                              "MirrorMaker 2 running this flow?)")
        raise found


def read_topic(source: Source, start: int | None, partition: int = 0) -> tuple[list[Record], int]:
    """Records of one partition from ``start`` (or the log start) up to the current end.

    Returns the records and the end offset that was read up to.
    """
    return read_partitions(source, {partition: start})[partition]


def read_all_partitions(source: Source) -> list[Record]:
    """Every record of every partition (a compacted Connect topic has 25 by default)."""
    from pipelines.edge import kafka_admin

    partitions = kafka_admin.list_topics(source.cluster).get(source.topic)
    if partitions is None:
        raise IngestError(f"cluster {source.cluster.alias}: no topic {source.topic}")
    read = read_partitions(source, dict.fromkeys(range(partitions)))
    return [record for partition in range(partitions) for record in read[partition][0]]


def read_partitions(source: Source, starts: dict[int, int | None]
                    ) -> dict[int, tuple[list[Record], int]]:
    """:func:`read_topic` of each partition of ``starts`` (``{partition: start}``), with one
    consumer and one offsets request per end: ``{partition: (records, end read up to)}``.

    A fetch returns once it holds every record still missing (or after
    :data:`POLL_TIMEOUT_S`), so a read costs the data's round trips, not a poll timeout per
    partition.
    """
    consumer, watch = _consumer(source)
    try:
        try:
            tps = [(source.topic, p) for p in starts]
            low = kafka_offsets.list_offsets(source.cluster, "earliest", tps)
            high = {p: o for (_, p), o in
                    kafka_offsets.list_offsets(source.cluster, "latest", tps).items()}
        except KafkaAccessError as exc:
            if exc.kind not in (kafka_errors.OTHER, kafka_errors.UNKNOWN_TOPIC):
                raise  # classified: a missing ACL, a wrong password, TLS...
            raise IngestError(f"cluster {source.cluster.alias}: cannot read {source.topic} "
                              f"(is MirrorMaker 2 running this flow?): {exc}") from None
        except OffsetLedgerError as exc:
            raise IngestError(f"cluster {source.cluster.alias}: cannot read {source.topic} "
                              f"(is MirrorMaker 2 running this flow?): {exc}") from None
        records: dict[int, list[Record]] = {p: [] for p in starts}
        begin = {p: (low[(source.topic, p)] if start is None
                     else max(start, low[(source.topic, p)])) for p, start in starts.items()}
        pending = {p: b for p, b in begin.items() if b < high[p]}  # partition -> next offset
        if pending:
            consumer.assign([TopicPartition(source.topic, p, b) for p, b in pending.items()])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while pending:
            if time.monotonic() > deadline:
                p, at = next(iter(pending.items()))
                raise IngestError(f"cluster {source.cluster.alias}: reading {source.topic} "
                                  f"stalled at {at}/{high[p]} (partition {p})")
            missing = sum(high[p] - at for p, at in pending.items())
            for msg in consumer.consume(num_messages=min(10_000, missing),
                                        timeout=POLL_TIMEOUT_S):
                if msg.error():
                    raise _read_error(source, msg.error(), consumer, watch, "reading")
                p = msg.partition()
                if p not in pending or msg.offset() >= high[p]:
                    continue
                records[p].append(Record(msg.offset(), msg.timestamp()[1], msg.key(),
                                         msg.value()))
                pending[p] = msg.offset() + 1
                if pending[p] >= high[p]:
                    del pending[p]
        return {p: (records[p], max(begin[p], high[p])) for p in starts}
    finally:
        consumer.close()


def sync_rows(flow: FlowConfig, policy: ReplicationPolicy, topic: str,
              records: list[Record], after: dt.datetime | None = None) -> list[tuple]:
    """``offset_syncs`` rows: one n = 1 run per sync, ``written_at`` never decreasing.

    ``after`` is the newest ``written_at`` of the previous pass: every row of this pass is at
    least ``WRITTEN_AT_STEP`` later, as the replicator's batches are (ledger.span_snapshots
    relies on it).
    """
    out = []
    previous = None if after is None else clock.aware(after) + WRITTEN_AT_STEP
    for rec in records:
        sync = formats.decode_offset_sync(rec.key, rec.value)
        written = clock.from_ms(rec.timestamp_ms)
        if previous is not None and written < previous:
            written = previous  # batch_id (the sync's offset) orders syncs with equal times
        previous = written
        out.append((flow.name, flow.source, flow.target, sync.topic,
                    policy.remote_topic(flow.source, sync.topic), sync.partition,
                    sync.upstream_offset, sync.downstream_offset, 1, f"{ORIGIN}{topic}",
                    rec.offset, written))
    return out


def checkpoint_records(flow: FlowConfig, policy: ReplicationPolicy, topic: str,
                       records: list[Record], offset_syncs_version: int) -> list[CheckpointRecord]:
    """``checkpoints`` rows for MM2's checkpoints (their topic is the name on the target)."""
    out = []
    for rec in records:
        cp = formats.decode_checkpoint(rec.key, rec.value)
        if policy.topic_source(cp.topic) == flow.source or policy.prefixless:
            direction, sync_flow = "forward", flow.name
            source_topic = policy.upstream_topic(cp.topic) or cp.topic
        else:  # MM2 maps a group's offsets on S's "T.X" back to "X" on T
            direction, sync_flow = "reverse", f"{flow.target}->{flow.source}"
            source_topic = policy.remote_topic(flow.target, cp.topic)
        out.append(CheckpointRecord(
            checkpoint_id=f"{ORIGIN}{topic}@{rec.offset}", flow=sync_flow, direction=direction,
            group_id=cp.group, source_cluster=flow.source, source_topic=source_topic,
            partition=cp.partition, source_offset=cp.upstream_offset,
            target_cluster=flow.target, target_topic=cp.topic,
            target_offset=cp.downstream_offset, status="translated",
            reason=f"MirrorMaker 2 checkpoint{' ' + cp.metadata if cp.metadata else ''}",
            group_rewound=False, offset_syncs_version=offset_syncs_version,
            checkpointed_at=clock.from_ms(rec.timestamp_ms)))
    return out


def connect_offsets(flow: FlowConfig, records: list[Record]) -> dict[tuple[str, int], Record]:
    """MirrorSourceConnector's latest committed upstream offset per (topic, partition) of S.

    Key ``["MirrorSourceConnector", {"cluster": S, "topic": t, "partition": p}]``, value
    ``{"offset": o}``: record ``o`` of ``t[p]`` was acknowledged by T. The last record per key
    wins (a tombstone removes it); keys of other connectors or clusters are ignored.
    """
    latest: dict[tuple[str, int], Record | None] = {}
    for rec in records:
        try:
            key = json.loads(rec.key or b"null")
            name, part = key
            if not str(name).endswith("MirrorSourceConnector") or part.get("cluster") != \
                    flow.source:
                continue
            tp = (str(part["topic"]), int(part["partition"]))
            offset = None if rec.value is None else int(json.loads(rec.value)["offset"])
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # another connector's record: not MM2's source offsets
        latest[tp] = None if offset is None else Record(offset, rec.timestamp_ms, None, None)
    return {tp: r for tp, r in latest.items() if r is not None}


def replicated_progress(flow: FlowConfig, policy: ReplicationPolicy,
                        latest: dict[tuple[str, int], Record], ends: dict[tuple[str, int], int],
                        batch_id: int, now: dt.datetime) -> list[ProgressRecord]:
    """``replication_progress`` rows for the partitions MM2 has replicated."""
    out = []
    for (topic, partition), rec in sorted(latest.items()):
        last = rec.offset
        end = ends.get((topic, partition))
        out.append(ProgressRecord(
            flow=flow.name, topic=topic, replica_topic=policy.remote_topic(flow.source, topic),
            partition=partition, last_upstream_offset=last, next_upstream_offset=last + 1,
            source_end_offset=end, lag=None if end is None else max(0, end - (last + 1)),
            newest_record_timestamp=None, record_age_ms=None, batch_id=batch_id,
            updated_at=now))
    return out


def positions(ledger: Ledger, flow: str, topics: list[str]
              ) -> tuple[dict[str, int], dict[str, dt.datetime]]:
    """Where the last pass stopped in each internal topic, and the newest record time it
    recorded there (one small row each)."""
    found = (ledger.read(REPLICATION_PROGRESS)
             .where((F.col("flow") == flow) & F.col("topic").isin(topics)
                    & (F.col("partition") == 0))
             .select("topic", "next_upstream_offset", "newest_record_timestamp").collect())
    return ({r["topic"]: r["next_upstream_offset"] for r in found
             if r["next_upstream_offset"] is not None},
            {r["topic"]: clock.aware(r["newest_record_timestamp"]) for r in found
             if r["newest_record_timestamp"] is not None})


def position_record(flow: str, topic: str, records: list[Record], end: int,
                    now: dt.datetime, newest: dt.datetime | None = None) -> ProgressRecord:
    """The pass's position in an internal topic; ``newest`` defaults to its newest record time
    (for the offset-syncs topic: the newest ``written_at`` the pass wrote)."""
    last = records[-1]
    newest = newest or clock.from_ms(max(r.timestamp_ms for r in records))
    return ProgressRecord(
        flow=flow, topic=topic, replica_topic=topic, partition=0,
        last_upstream_offset=last.offset, next_upstream_offset=last.offset + 1,
        source_end_offset=end, lag=max(0, end - (last.offset + 1)),
        newest_record_timestamp=newest,
        record_age_ms=max(0, int((now - newest).total_seconds() * 1000)),
        batch_id=last.offset, updated_at=now)


def default_connect_offsets_topic(config: Config, flow: FlowConfig) -> str:
    """Dedicated-mode MM2's Connect offsets topic on T (``offset.storage.topic``)."""
    return f"mm2-offsets.{flow.source}.internal"


def ingest_once(spark: SparkSession, config: Config, flow_name: str,
                connect_offsets_topic: str | None = None) -> IngestResult:
    """One pass: everything MM2 wrote since the last pass, into the ledger."""
    flow = config.flow(flow_name)
    policy = ReplicationPolicy.from_config(config)
    syncs_src, cps_src = sources(config, flow)
    for source in (syncs_src, cps_src):
        check_readable(source)  # nothing is written (not even the tables) when one is not
    ledger = Ledger(spark, config.ledger_location)
    ledger.init()
    offsets_src = Source(config.cluster(flow.target),
                         connect_offsets_topic or default_connect_offsets_topic(config, flow))
    result = IngestResult(flow.name, syncs_src.topic, cps_src.topic)
    start, newest = positions(ledger, flow.name, [syncs_src.topic, cps_src.topic])
    sync_recs, _ = read_topic(syncs_src, start.get(syncs_src.topic))
    cp_recs, _ = read_topic(cps_src, start.get(cps_src.topic))
    # Compacted and small: read whole, so the latest offset of every partition is known.
    try:
        offset_recs = read_all_partitions(offsets_src)
    except (IngestError, OffsetLedgerError) as exc:
        log.warning("%s; replication progress of flow %s not ingested", exc, flow.name)
        offset_recs = []
    latest = connect_offsets(flow, offset_recs)
    # Decode everything before writing anything: a bad record writes nothing.
    syncs = sync_rows(flow, policy, syncs_src.topic, sync_recs, newest.get(syncs_src.topic))
    checkpoints = checkpoint_records(flow, policy, cps_src.topic, cp_recs, -1)
    now = clock.now()
    progress: list[ProgressRecord] = []
    app = f"offset-ledger mm2 ingest {flow.name}"
    if syncs:
        ledger.append(OFFSET_SYNCS, spark.createDataFrame(syncs, spark_schema(OFFSET_SYNCS)),
                      txn_app_id=f"{app} {syncs_src.topic}", txn_version=sync_recs[-1].offset)
        progress.append(position_record(flow.name, syncs_src.topic, sync_recs,
                                        sync_recs[-1].offset + 1, now,
                                        max(row[-1] for row in syncs)))
    if checkpoints:
        version = ledger.version(OFFSET_SYNCS)
        records = [CheckpointRecord.from_row({**c.to_row(), "offset_syncs_version": version})
                   for c in checkpoints]
        ledger.append(CHECKPOINTS, spark.createDataFrame(rows(records), spark_schema(CHECKPOINTS)),
                      txn_app_id=f"{app} {cps_src.topic}", txn_version=cp_recs[-1].offset)
        progress.append(position_record(flow.name, cps_src.topic, cp_recs,
                                        cp_recs[-1].offset + 1, now))
    if latest:
        ends = kafka_offsets.list_offsets(config.cluster(flow.source), "latest", latest)
        progress.extend(replicated_progress(flow, policy, latest, ends, len(offset_recs), now))
        result.replicated = {tp: r.offset + 1 for tp, r in latest.items()}
    if progress:
        ledger.merge(REPLICATION_PROGRESS,
                     spark.createDataFrame(rows(progress), spark_schema(REPLICATION_PROGRESS)))
    result.syncs, result.checkpoints = len(syncs), len(checkpoints)
    result.positions = {**start, **{p.topic: p.next_upstream_offset for p in progress}}
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source_kind", choices=["mm2"], metavar="mm2",
                        help="what to ingest: mm2 (MirrorMaker 2 or SRM internal topics)")
    add_flow_arguments(parser, "the MM2 flow")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument("--interval", type=float, default=None,
                        help="seconds between passes (default emit.checkpoints.interval.seconds)")
    parser.add_argument("--connect-offsets-topic", default=None,
                        help="MM2's Connect offsets topic on the target (offset.storage.topic; "
                             "default mm2-offsets.<source>.internal)")
    add_startup_wait(parser, STARTUP_WAIT_S)
    parser.add_argument("--max-passes", type=int, default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace, config: Config) -> int:
    from pipelines.edge import preflight
    from pipelines.passes import run_passes, supervise, wants_supervisor
    from pipelines.spark import get_spark

    flow = config.flow(args.flow)  # unknown aliases fail before Spark starts
    if wants_supervisor(args):  # the passes run in a child, started again after a crash
        return supervise("ingest mm2", args._argv)
    for alias in (flow.source, flow.target):  # a wrong password or TLS problem too
        preflight.await_reachable(config.cluster(alias), 0.0 if args.once else args.startup_wait)
    spark = get_spark("offset-ledger-ingest-mm2")
    every = args.interval if args.interval is not None else max(
        1, config.emit_checkpoints_interval_seconds)

    def one_pass(n: int) -> None:
        nonlocal config
        if n:  # the file as it is now, as replicate and checkpoint read it at a refresh
            config = reload_config(config)
        result = ingest_once(spark, config, args.flow, args.connect_offsets_topic)
        print(result.summary(), flush=True)

    return run_passes("ingest mm2", one_pass, every_s=every, once=args.once,
                      max_passes=args.max_passes)


def main(argv: list[str] | None = None) -> int:
    from pipelines.cli import job_main

    return job_main("ingest", argv)


if __name__ == "__main__":
    sys.exit(main())
