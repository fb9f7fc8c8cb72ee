"""``offset-ledger replicate --flow P->B [--once]``: copy a flow's topics and record every run.

One Structured Streaming query per flow reads the selected source topics with Spark's Kafka
connector (``read_committed``, from the earliest offsets, headers included) and, in each
micro-batch, produces the records to the replicas from the executors (``sink``), then appends
the batch's runs to ``offset_syncs`` and MERGEs ``replication_progress``.

Invariants:
    * Order of effects per micro-batch: every record is delivered (flushed, each delivery report
      checked) **before** its runs are appended; the ledger append **before** Spark commits the
      batch. A crash at any point therefore re-runs the batch, which re-copies its records
      (at-least-once), and the ledger never holds a run for a copy that does not exist.
    * Ledger appends carry ``txnAppId = offset-ledger-replicate-<flow>-<query id>`` and
      ``txnVersion = batch id``: a re-run batch whose runs were already appended appends nothing
      (its second copy stays unrecorded, never wrong), and a new checkpoint (new query id)
      cannot be mistaken for an old one.
    * ``written_at`` strictly increases between the batches of a flow, across restarts too (it
      starts after the newest ``written_at`` already in the ledger for the flow).
    * Every check (flow alias, reachable clusters, missing source topics, replicas with too few
      partitions) runs before the query starts: a refused flow writes no ledger rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # `spark-submit pipelines/replicate/job.py`: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import datetime as dt
import logging
import os
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ledger.config import Config, FlowConfig
from ledger.errors import OffsetLedgerError
from ledger.schemas import (
    OFFSET_SYNCS,
    OFFSET_SYNCS_SCHEMA,
    REPLICATION_PROGRESS,
    REPLICATION_PROGRESS_SCHEMA,
)
from ledger.tables import Ledger
from ledger.writer import (
    PartitionSummary,
    next_written_at,
    progress_row,
    sync_rows,
)
from pipelines import kafka_admin
from pipelines.cli import job_main
from pipelines.replicate import sink, topics
from pipelines.replicate.source import source_options
from pipelines.replicate.transforms import kafka_records

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 10.0
DEFAULT_REFRESH_S = 300.0


class ReplicationError(OffsetLedgerError):
    """The replication query failed (a broker became unreachable, deliveries failed, ...)."""


@dataclass(frozen=True)
class PartitionProgress:
    topic: str
    replica_topic: str
    partition: int
    last_upstream_offset: int
    source_end_offset: int | None
    lag: int | None
    newest_record_timestamp: dt.datetime | None
    record_age_ms: int | None


@dataclass
class ReplicationResult:
    """What one ``replicate_once`` (or one continuous query) did."""

    flow: str
    run_id: str
    topics: list[topics.TopicPlan]
    batches: int = 0
    records_copied: int = 0
    runs_written: int = 0
    progress: dict[tuple[str, int], PartitionProgress] = field(default_factory=dict)
    copy_seconds: float = 0.0
    ledger_seconds: float = 0.0
    wall_seconds: float = 0.0
    topic_sync: topics.TopicSyncReport | None = None


# --- the micro-batch -------------------------------------------------------------------------


class _BatchWriter:
    """The ``foreachBatch`` function: produce, then record runs, then progress.

    Per batch, on its critical path: copy (executors), then the ``offset_syncs`` append. The
    ``replication_progress`` MERGE is handed to one background thread once the append has
    committed, so it overlaps the next batch's copy; the next MERGE, and leaving the ``with``
    block, wait for it first, so progress is written in batch order and a failed MERGE fails
    the run.

        batch k    [copy k][append k]                     <- Spark commits batch k
        progress             └──────>[MERGE k]
        batch k+1                    [copy k+1][append k+1]
        progress                               └──────>[MERGE k+1]      with-exit: wait
    """

    def __init__(self, config: Config, flow: FlowConfig, plans: list[topics.TopicPlan],
                 ledger: Ledger, result: ReplicationResult) -> None:
        self.flow = flow
        self.source = config.cluster(flow.source)
        self.ledger = ledger
        self.result = result
        self.replica_topics = {p.topic: p.replica_topic for p in plans}
        self.producer_config = sink.producer_config(config.cluster(flow.target).properties)
        self._background = ThreadPoolExecutor(max_workers=1,
                                              thread_name_prefix="offset-ledger-progress")
        # Needed only once the first batch's rows are built: looked up while it copies.
        self._newest_written_at: Future[dt.datetime | None] | None = self._background.submit(
            _newest_written_at, ledger)
        self.last_written_at: dt.datetime | None = None
        self._progress_write: Future[None] | None = None
        self.query_id: str | None = None
        self.query_started = threading.Event()

    @property
    def txn_app_id(self) -> str:
        return f"offset-ledger-replicate-{self.flow.name}-{self.query_id}"

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        # The query id names the checkpoint the batch ids belong to; it is known once start()
        # returns, which can be just after the first batch began.
        if not self.query_started.wait(timeout=60):
            raise ReplicationError("the replication query did not report its id")
        writer = sink.partition_writer(self.producer_config, self.replica_topics)
        copy_started = time.perf_counter()
        summaries: list[PartitionSummary] = sink.summaries_from_rows(
            kafka_records(batch_df).mapInArrow(writer, sink.SUMMARY_SCHEMA).collect())
        self.result.copy_seconds += time.perf_counter() - copy_started
        if not summaries:
            return
        spark = batch_df.sparkSession
        if self._newest_written_at is not None:
            self.last_written_at = self._newest_written_at.result()
            self._newest_written_at = None
        written_at = next_written_at(dt.datetime.now(dt.UTC), self.last_written_at)
        rows = sync_rows(flow=self.flow.name, source_cluster=self.flow.source,
                         target_cluster=self.flow.target, summaries=summaries,
                         run_id=self.result.run_id, batch_id=batch_id, written_at=written_at)
        ends = kafka_admin.end_offsets(self.source, [(s.topic, s.partition) for s in summaries])
        progress = [progress_row(flow=self.flow.name, summary=s, source_end_offsets=ends,
                                 batch_id=batch_id, updated_at=written_at) for s in summaries]
        started = time.perf_counter()
        self.ledger.append(OFFSET_SYNCS, spark.createDataFrame(rows, OFFSET_SYNCS_SCHEMA),
                           txn_app_id=self.txn_app_id, txn_version=batch_id)
        self.result.ledger_seconds += time.perf_counter() - started
        # After the append: progress never claims more than offset_syncs records.
        self._wait_for_progress()
        self._progress_write = self._background.submit(
            self.ledger.merge, REPLICATION_PROGRESS,
            spark.createDataFrame(progress, REPLICATION_PROGRESS_SCHEMA))
        self.last_written_at = written_at
        self.result.batches += 1
        self.result.records_copied += sum(s.records for s in summaries)
        self.result.runs_written += len(rows)
        for row in progress:
            p = PartitionProgress(row[1], row[2], row[3], row[4], row[6], row[7], row[8], row[9])
            self.result.progress[(p.topic, p.partition)] = p
        log.info("flow %s batch %s: %s records, %s runs", self.flow.name, batch_id,
                 sum(s.records for s in summaries), len(rows))

    def _wait_for_progress(self) -> None:
        """Wait for the previous batch's progress MERGE (time counted as ledger time)."""
        if self._progress_write is None:
            return
        started = time.perf_counter()
        try:
            self._progress_write.result()
        finally:
            self._progress_write = None
            self.result.ledger_seconds += time.perf_counter() - started

    def __enter__(self) -> _BatchWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """Finish the last progress MERGE; raises if it failed, unless the run already did."""
        try:
            self._wait_for_progress()
        except Exception:
            if exc_type is None:
                raise
            # The query's own failure is the one to report; this one only goes to the log.
            log.exception("flow %s: replication_progress MERGE failed", self.flow.name)
        finally:
            self._background.shutdown(wait=True, cancel_futures=True)


def _newest_written_at(ledger: Ledger) -> dt.datetime | None:
    # Over all flows, not just this one: stricter than needed, and a plain max over the table
    # is answered from the Delta log's file statistics instead of a scan.
    row = ledger.spark.sql(
        f"SELECT max(written_at) AS m FROM {ledger.identifier(OFFSET_SYNCS)}").first()
    if row is None or row["m"] is None:
        return None
    # PySpark returns timestamps as naive local times.
    return row["m"].astimezone(dt.UTC)


# --- preparing and running a flow ------------------------------------------------------------


def checkpoint_location(config: Config, flow: FlowConfig) -> str:
    return f"{config.streaming_checkpoint_location.rstrip('/')}/replicate/" \
           f"{flow.source}-{flow.target}"


def prepare(spark: Any, config: Config, flow_name: str,
            ) -> tuple[FlowConfig, list[topics.TopicPlan], topics.TopicSyncReport, Ledger]:
    """Every check, then replica topics and ledger tables; raises before anything is written."""
    flow = config.flow(flow_name)
    for alias in (flow.source, flow.target):
        kafka_admin.check_reachable(config.cluster(alias))
    plans = topics.plan_topics(config, flow)
    report = topics.ensure_replicas(config, flow, plans)
    _use_driver_python_locally(spark)
    ledger = Ledger(spark, config.ledger_location)
    ledger.init()
    return flow, plans, report, ledger


def _use_driver_python_locally(spark: Any) -> None:
    # In local mode the Python workers must be an interpreter with confluent-kafka: this one,
    # unless PYSPARK_PYTHON chose another, rather than PySpark's default `python3` from PATH.
    # On a cluster the runtime decides.
    sc = spark.sparkContext
    if sc.master.startswith("local") and sc.pythonExec in ("python3", "python"):
        sc.pythonExec = os.environ.get("PYSPARK_PYTHON") or sys.executable


def _start(spark: Any, config: Config, flow: FlowConfig, plans: list[topics.TopicPlan],
           writer: _BatchWriter, trigger: dict[str, Any],
           max_records_per_batch: int | None) -> Any:
    reader = spark.readStream.format("kafka").options(
        **source_options(config.cluster(flow.source), [p.topic for p in plans]))
    if max_records_per_batch:
        reader = reader.option("maxOffsetsPerTrigger", str(max_records_per_batch))
    query = (reader.load().writeStream
             .queryName(f"offset-ledger-replicate-{flow.source}-{flow.target}")
             .option("checkpointLocation", checkpoint_location(config, flow))
             .foreachBatch(writer)
             .trigger(**trigger)
             .start())
    writer.query_id = str(query.id)
    writer.query_started.set()
    return query


def _await(query: Any, timeout_s: float | None = None) -> bool:
    """Whether the query terminated (within ``timeout_s``); its failure as a ReplicationError."""
    try:
        if timeout_s is None:
            query.awaitTermination()
            return True
        return bool(query.awaitTermination(timeout_s))
    except Exception as exc:  # StreamingQueryException: the cause is in its first line
        raise ReplicationError(f"replication query {query.name} failed: "
                               f"{str(exc).strip().splitlines()[0][:500]}") from exc


def replicate_once(spark: Any, config: Config, flow_name: str, *,
                   max_records_per_batch: int | None = None) -> ReplicationResult:
    """Replicate what the flow's source topics hold now, record the runs, and return.

    Runs the flow's query with the ``availableNow`` trigger to completion (several batches if
    ``max_records_per_batch`` is set). Raises an :class:`OffsetLedgerError` subclass for an
    unknown flow, an unreachable cluster, a missing source topic, a replica with too few
    partitions, or a failed batch.
    """
    started = time.perf_counter()
    flow, plans, report, ledger = prepare(spark, config, flow_name)
    result = ReplicationResult(flow.name, _new_run_id(), plans, topic_sync=report)
    if plans:
        with _BatchWriter(config, flow, plans, ledger, result) as writer:
            _await(_start(spark, config, flow, plans, writer, {"availableNow": True},
                          max_records_per_batch))
    result.wall_seconds = time.perf_counter() - started
    return result


def replicate_continuously(spark: Any, config: Config, flow_name: str, *,
                           interval_s: float = DEFAULT_INTERVAL_S,
                           refresh_s: float = DEFAULT_REFRESH_S,
                           max_records_per_batch: int | None = None) -> None:
    """Run the flow until stopped; every ``refresh_s`` re-select topics and re-sync configs.

    A changed topic selection restarts the query (same checkpoint: new topics start from their
    earliest offsets, the others where they were).
    """
    while True:
        flow, plans, _, ledger = prepare(spark, config, flow_name)
        if not plans:
            log.warning("flow %s: no topic selected; checking again in %ss", flow.name,
                        refresh_s)
            time.sleep(refresh_s)
            continue
        result = ReplicationResult(flow.name, _new_run_id(), plans)
        with _BatchWriter(config, flow, plans, ledger, result) as writer:
            query = _start(spark, config, flow, plans, writer,
                           {"processingTime": f"{interval_s} seconds"}, max_records_per_batch)
            try:
                while not _await(query, refresh_s):
                    new_plans = topics.plan_topics(config, flow)
                    topics.ensure_replicas(config, flow, new_plans)
                    if [p.topic for p in new_plans] != [p.topic for p in plans]:
                        log.info("flow %s: topic selection changed; restarting", flow.name)
                        break
                else:
                    return  # stopped from outside
            finally:
                if query.isActive:
                    query.stop()


def _new_run_id() -> str:
    return f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"


# --- command line ----------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--flow", required=True, help="the flow to replicate, e.g. P->B")
    parser.add_argument("--once", action="store_true",
                        help="replicate what is available now, then stop (availableNow)")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S,
                        help=f"seconds between micro-batches (default {DEFAULT_INTERVAL_S:g})")
    parser.add_argument("--refresh-interval", type=float, default=DEFAULT_REFRESH_S,
                        help="seconds between topic re-selection and config sync "
                             f"(default {DEFAULT_REFRESH_S:g})")
    parser.add_argument("--max-records-per-batch", type=int, default=None,
                        help="cap on records per micro-batch (default: no cap)")


def run(args: argparse.Namespace, config: Config) -> int:
    from pipelines.spark import get_spark

    config.flow(args.flow)  # an unknown flow fails before a JVM starts
    spark = get_spark("offset-ledger-replicate")
    if args.once:
        result = replicate_once(spark, config, args.flow,
                                max_records_per_batch=args.max_records_per_batch)
        print(f"flow {result.flow}: {len(result.topics)} topic(s), {result.batches} batch(es), "
              f"{result.records_copied} record(s) copied, {result.runs_written} run(s) "
              f"recorded in {result.wall_seconds:.1f}s")
        for p in sorted(result.progress.values(), key=lambda p: (p.topic, p.partition)):
            print(f"  {p.topic}[{p.partition}] -> {p.replica_topic}: last upstream offset "
                  f"{p.last_upstream_offset}, lag {p.lag}")
        return 0
    replicate_continuously(spark, config, args.flow, interval_s=args.interval,
                           refresh_s=args.refresh_interval,
                           max_records_per_batch=args.max_records_per_batch)
    return 0


def main(argv: list[str] | None = None) -> int:
    return job_main("replicate", argv)


if __name__ == "__main__":
    sys.exit(main())
