"""Every Prometheus metric offset-ledger exposes, on one registry per process.

``Metrics(job)`` builds a fresh :class:`~prometheus_client.CollectorRegistry` with the process
collectors and the metric families below; nothing is registered at import time and the global
default registry is never used, so two jobs (or two tests) in one interpreter never share or
collide on a series. Jobs do not touch the families directly: they call the observers in
:mod:`pipelines.metrics.observe`. ``docs/metrics.md`` documents each name with its MirrorMaker 2
counterpart; keep the two in step.

Label sets (MirrorMaker 2's tags, in its order):

    flow             source, target
    flow partition   source, target, topic (the replica, as MM2's tag), source_topic, partition
    group            source, target, group
    group partition  source, target, group, topic (the group's topic on source), partition

Invariants:
    * Counters only grow within a process; a restart starts them at 0 (Prometheus' ``rate``
      and ``increase`` handle the reset). Gauges hold the newest measured value.
    * Seconds and bytes, never milliseconds (Prometheus conventions); ``docs/metrics.md`` maps
      MM2's ``*-ms`` names.
    * No label carries a secret or a free-form error text (bounded cardinality): a topic set
      aside carries a ``reason`` from a fixed set.
"""

from __future__ import annotations

import logging

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
)
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector

NAMESPACE = "offset_ledger"

FLOW = ("source", "target")
PARTITION = (*FLOW, "topic", "source_topic", "partition")
TOPIC = (*FLOW, "topic", "source_topic", "reason")
GROUP = (*FLOW, "group")
GROUP_PARTITION = (*GROUP, "topic", "partition")

# Why a topic is not replicated now (offset_ledger_topic_not_replicated's ``reason``).
REFUSED = "refused"        # its source no longer holds what was copied (recreated, truncated)
UNREADABLE = "unreadable"  # its copy failed: not authorized, unknown topic, broker errors
REPLICA = "replica"        # its replica could not be created, grown or configured
REASONS = (REFUSED, UNREADABLE, REPLICA)

# Seconds: a batch every few seconds, a checkpoint pass every minute; minutes mean trouble.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class Metrics:
    """The metric families of one process (``job``, the verb: replicate, checkpoint, status)."""

    def __init__(self, job: str, *, process_collectors: bool = True) -> None:
        self.job = job
        self.registry = CollectorRegistry(auto_describe=True)
        if process_collectors:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        r, ns = self.registry, NAMESPACE

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(name, doc, labels, namespace=ns, registry=r)

        def gauge(name: str, doc: str, labels: tuple[str, ...]) -> Gauge:
            return Gauge(name, doc, labels, namespace=ns, registry=r)

        def histogram(name: str, doc: str, labels: tuple[str, ...],
                      buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, labels, namespace=ns, registry=r, buckets=buckets)

        # --- replication, per flow partition (MM2's MirrorSourceConnector metrics) ---------
        self.records = counter(
            "replication_records", "Records copied and recorded in the ledger (MM2 "
            "record-count; rate() is record-rate)", PARTITION)
        self.bytes = counter(
            "replication_bytes", "Key and value bytes of the records copied and recorded "
            "(MM2 byte-count; rate() is byte-rate)", PARTITION)
        self.replication_latency = histogram(
            "replication_latency_seconds", "Seconds from the newest copied record's timestamp "
            "to its run being recorded in the ledger, per partition and batch (MM2 "
            "replication-latency-ms)", PARTITION, LATENCY_BUCKETS)
        self.record_age = gauge(
            "replication_record_age_seconds", "Age of the newest record of the partition's "
            "last batch when its copy was delivered (MM2 record-age-ms)", PARTITION)
        self.lag_records = gauge(
            "replication_lag_records", "Records not yet replicated: the source's last stable "
            "offset minus where the ledger's runs end (MM2 has none)", PARTITION)
        self.lag_seconds = gauge(
            "replication_lag_seconds", "Ledger lag in seconds: while records are not yet "
            "replicated, now minus the timestamp of the newest record the ledger holds; 0 when "
            "caught up", PARTITION)
        self.end_offset = gauge(
            "replication_source_end_offset", "The source partition's last stable offset, as "
            "last measured", PARTITION)
        self.recorded_offset = gauge(
            "replication_recorded_offset", "Where the ledger's runs of the partition end "
            "(next upstream offset to copy)", PARTITION)
        self.covered_at = gauge(
            "replication_covered_timestamp_seconds", "Newest moment (Unix time) at which "
            "everything the source partition held was recorded in the ledger", PARTITION)
        self.rpo = gauge(
            "replication_rpo_seconds", "Seconds of writes a disaster failover would lose now "
            "at most: now minus replication_covered_timestamp_seconds", PARTITION)
        self.not_replicated = gauge(
            "topic_not_replicated", "1 while a topic selected by the flow is set aside (not "
            "replicated), by reason: refused, unreadable, replica", TOPIC)
        # --- replication, per flow ---------------------------------------------------------
        self.batches = counter(
            "replication_batches", "Batches copied and recorded", FLOW)
        self.batch_duration = histogram(
            "replication_batch_duration_seconds", "Seconds per batch: copy plus ledger commit",
            FLOW, DURATION_BUCKETS)
        self.commits = counter(
            "ledger_commits", "Ledger commits of replicated runs (one per batch)", FLOW)
        self.commit_duration = histogram(
            "ledger_commit_duration_seconds", "Seconds per ledger commit of a batch's runs and "
            "progress", FLOW, DURATION_BUCKETS)
        self.last_commit = gauge(
            "ledger_last_commit_timestamp_seconds", "Unix time of the newest ledger commit of "
            "replicated runs", FLOW)
        self.replication_passes = counter(
            "replication_passes", "Passes of the replication loop (a batch or an idle check)",
            FLOW)
        self.last_pass = gauge(
            "replication_last_pass_timestamp_seconds", "Unix time the replication loop last "
            "measured the source (alive and not stuck)", FLOW)
        self.interval = gauge(
            "replication_interval_seconds", "The configured seconds between batches when "
            "caught up (--interval)", FLOW)
        # --- ACL sync (MM2's sync.topic.acls, pipelines.acls) -------------------------------
        self.acl_bindings_synced = counter(
            "acl_bindings_synced", "ACL bindings the flow's ACL sync created or deleted on the "
            "target (recorded in acl_syncs), by action: added, removed", (*FLOW, "action"))
        self.acl_sync_failures = counter(
            "acl_sync_failures", "ACL sync passes that failed (a missing ACL of the replicator, "
            "a cluster error); replication goes on", FLOW)
        # --- checkpoints (MM2's MirrorCheckpointConnector metrics) --------------------------
        self.checkpoint_latency = histogram(
            "checkpoint_latency_seconds", "Seconds from observing a group's committed offset "
            "to its checkpoint being recorded (and synced) (MM2 checkpoint-latency-ms)",
            GROUP_PARTITION, LATENCY_BUCKETS)
        self.checkpoints = counter(
            "checkpoints", "Checkpoints computed, by status: translated, untranslatable, held",
            (*FLOW, "status"))
        self.group_offsets_written = counter(
            "group_offsets_written", "Translated offsets written into groups on the target "
            "(group offset sync)", GROUP)
        self.group_ready = gauge(
            "group_ready_to_move", "1 when the ledger's runs cover every committed offset the "
            "group would move from source to target (failover/failback can go now)", GROUP)
        self.group_missing = gauge(
            "group_records_not_replicated", "Committed records of the group not yet covered "
            "by the ledger's runs (what a move would wait for)", GROUP)
        self.checkpoint_passes = counter(
            "checkpoint_passes", "Checkpoint passes completed", FLOW)
        self.checkpoint_pass_duration = histogram(
            "checkpoint_pass_duration_seconds", "Seconds per checkpoint pass (observe, "
            "translate, record, sync)", FLOW, DURATION_BUCKETS)
        self.checkpoint_last_pass = gauge(
            "checkpoint_last_pass_timestamp_seconds", "Unix time of the newest completed "
            "checkpoint pass", FLOW)
        self.checkpoint_interval = gauge(
            "checkpoint_interval_seconds", "The configured seconds between checkpoint passes "
            "(emit.checkpoints.interval.seconds)", FLOW)
        # --- what only `status --format prometheus` measures (a cron job's textfile) --------
        self.caught_up = gauge(
            "replication_caught_up", "1 when the partition caught up (lag 0, or only "
            "transaction markers and aborted records left)", PARTITION)
        self.newest_record = gauge(
            "replication_newest_record_timestamp_seconds", "Timestamp (Unix time) of the "
            "newest record the ledger records as copied", PARTITION)
        self.flow_caught_up = gauge(
            "flow_caught_up", "1 when every partition of the flow caught up", FLOW)
        self.flow_error = gauge(
            "flow_unreadable", "1 when status could not read a cluster of the flow (nothing "
            "measured: never taken as caught up)", FLOW)
        self.last_run = gauge(
            "replication_last_run_timestamp_seconds", "Unix time of the flow's newest "
            "recorded run", FLOW)
        self.heartbeat = gauge(
            "replication_heartbeat_timestamp_seconds", "Timestamp (Unix time) carried by the "
            "newest replicated MM2 heartbeat on the target", FLOW)
        self.cutoff_ready = gauge(
            "group_cutoff_ready", "1 when a cutoff failover of the group could go once "
            "producers stop (group read everything, replication caught up)", GROUP)
        self.newest_checkpoint = gauge(
            "checkpoint_newest_timestamp_seconds", "Unix time of the group's newest "
            "checkpoint source -> target", GROUP)
        self.status_at = gauge("status_timestamp_seconds", "When status gathered these "
                               "numbers (Unix time)", ())
        self.status_exit = gauge("status_exit_code", "status' exit code: 0 caught up and "
                                 "ready, 3 not", ())
        # --- the process -------------------------------------------------------------------
        self.errors = counter(
            "errors", "Errors the process logged, by logger (a copy, a ledger write, a "
            "heartbeat, a configuration reload ...)", ("verb", "logger"))
        self.warnings = counter(
            "warnings", "Warnings the process logged, by logger", ("verb", "logger"))
        # ``verb``, not ``job``: Prometheus owns the ``job`` label (the scrape job).
        self.info = gauge("info", "1, with the verb this process runs and the version",
                          ("verb", "version"))
        self.info.labels(job, _version()).set(1)
        self._log_handler = _CountingHandler(self)
        self._counted: list[str] = []

    def count_logged_errors(self, *loggers: str) -> None:
        """Count ERROR and WARNING records of ``loggers`` (default: the project's packages)."""
        for name in loggers or ("pipelines", "ledger"):
            if name not in self._counted:
                logging.getLogger(name).addHandler(self._log_handler)
                self._counted.append(name)

    def close(self) -> None:
        """Detach the logging handler (the registry itself holds no resources)."""
        for name in self._counted:
            logging.getLogger(name).removeHandler(self._log_handler)
        self._counted.clear()


class _CountingHandler(logging.Handler):
    """A logging handler that only counts: the process's own errors, whatever logged them."""

    def __init__(self, metrics: Metrics) -> None:
        super().__init__(level=logging.WARNING)
        self.metrics = metrics

    def emit(self, record: logging.LogRecord) -> None:
        family = self.metrics.errors if record.levelno >= logging.ERROR else self.metrics.warnings
        family.labels(self.metrics.job, record.name).inc()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("offset-ledger")
    except PackageNotFoundError:
        return "unknown"
