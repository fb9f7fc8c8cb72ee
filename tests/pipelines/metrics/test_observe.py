"""The observers and the per-process registry: pure logic on a fake clock, no broker."""

from __future__ import annotations

import datetime as dt
import math
from types import SimpleNamespace

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from pipelines.metrics import CheckpointObserver, Delivery, Metrics, RecordedBatch
from pipelines.metrics.definitions import REFUSED, UNREADABLE
from pipelines.metrics.export import exposition
from pipelines.metrics.observe import ReplicationObserver, set_aside_reasons

pytestmark = pytest.mark.unit


def samples(metrics: Metrics) -> dict[tuple[str, tuple], float]:
    """``{(sample name, sorted labels): value}`` parsed back from the exposition text."""
    out = {}
    for family in text_string_to_metric_families(exposition(metrics.registry)):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return samples(metrics)[(name, tuple(sorted(labels.items())))]


PART = {"source": "P", "target": "B", "topic": "P.Payments", "source_topic": "Payments",
        "partition": "0"}


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def observer(clock: Clock, metrics: Metrics | None = None) -> ReplicationObserver:
    return ReplicationObserver(metrics or Metrics("replicate", process_collectors=False), "P",
                               "B", interval_s=10, replica_name=lambda t: f"P.{t}", clock=clock)


def test_each_metrics_object_has_its_own_registry_and_nothing_is_global():
    before = set(REGISTRY._names_to_collectors)
    a, b = Metrics("replicate"), Metrics("replicate")
    assert a.registry is not b.registry
    a.records.labels(*PART.values()).inc(5)
    assert value(a, "offset_ledger_replication_records_total", **PART) == 5
    assert ("offset_ledger_replication_records_total",
            tuple(sorted(PART.items()))) not in samples(b)
    assert set(REGISTRY._names_to_collectors) == before
    [info] = [dict(k[1]) for k in samples(a) if k[0] == "offset_ledger_info"]
    assert info["verb"] == "replicate" and info["version"]


def test_a_recorded_batch_counts_records_bytes_latency_and_the_commit():
    clock = Clock(1_000.0)
    obs = observer(clock)
    obs.batch_recorded(RecordedBatch(
        (Delivery("Payments", "P.Payments", 0, 7, 700, 990_000),), copy_seconds=0.5,
        commit_seconds=0.25, copied_at=995.0, recorded_at=996.0))
    m = obs.m
    assert value(m, "offset_ledger_replication_records_total", **PART) == 7
    assert value(m, "offset_ledger_replication_bytes_total", **PART) == 700
    assert value(m, "offset_ledger_replication_record_age_seconds", **PART) == 5.0
    assert value(m, "offset_ledger_replication_latency_seconds_sum", **PART) == 6.0
    assert value(m, "offset_ledger_replication_latency_seconds_count", **PART) == 1
    assert value(m, "offset_ledger_replication_latency_seconds_bucket", **PART, le="10.0") == 1
    assert value(m, "offset_ledger_replication_latency_seconds_bucket", **PART, le="5.0") == 0
    flow = {"source": "P", "target": "B"}
    assert value(m, "offset_ledger_replication_batches_total", **flow) == 1
    assert value(m, "offset_ledger_ledger_commits_total", **flow) == 1
    assert value(m, "offset_ledger_ledger_commit_duration_seconds_sum", **flow) == 0.25
    assert value(m, "offset_ledger_replication_batch_duration_seconds_sum", **flow) == 0.75
    assert value(m, "offset_ledger_ledger_last_commit_timestamp_seconds", **flow) == 996.0
    assert value(m, "offset_ledger_replication_interval_seconds", **flow) == 10


def test_lag_rpo_and_ledger_lag_follow_the_measurements():
    clock = Clock(1_000.0)
    obs = observer(clock)
    tp = ("Payments", 0)
    # Caught up at t=1000: nothing to lose.
    obs.measured({tp: 100}, {tp: 100}, {}, at=1_000.0)
    m = obs.m
    assert value(m, "offset_ledger_replication_lag_records", **PART) == 0
    assert value(m, "offset_ledger_replication_lag_seconds", **PART) == 0
    assert value(m, "offset_ledger_replication_rpo_seconds", **PART) == 0
    # 30 s later, 5 records arrived and were not copied yet: the RPO grows with the clock.
    clock.now = 1_030.0
    obs.measured({tp: 105}, {tp: 100}, {}, at=1_030.0)
    assert value(m, "offset_ledger_replication_lag_records", **PART) == 5
    assert value(m, "offset_ledger_replication_rpo_seconds", **PART) == 30
    assert value(m, "offset_ledger_replication_covered_timestamp_seconds", **PART) == 1_000
    # Ledger lag needs the newest recorded record's timestamp: unknown yet.
    assert math.isnan(value(m, "offset_ledger_replication_lag_seconds", **PART))
    obs.batch_recorded(RecordedBatch((Delivery("Payments", "P.Payments", 0, 3, 30, 1_020_000),),
                                     0.1, 0.1, 1_031.0, 1_031.5))
    obs.measured({tp: 105}, {tp: 103}, {}, at=1_031.5)
    clock.now = 1_040.0
    assert value(m, "offset_ledger_replication_lag_records", **PART) == 2
    assert value(m, "offset_ledger_replication_lag_seconds", **PART) == 20
    # Every record written before the newest recorded one (t=1020) is recorded.
    assert value(m, "offset_ledger_replication_rpo_seconds", **PART) == 20
    obs.measured({tp: 105}, {tp: 105}, {}, at=1_041.0)
    clock.now = 1_043.0
    assert value(m, "offset_ledger_replication_lag_records", **PART) == 0
    assert value(m, "offset_ledger_replication_lag_seconds", **PART) == 0
    assert value(m, "offset_ledger_replication_rpo_seconds", **PART) == 2
    flow = {"source": "P", "target": "B"}
    assert value(m, "offset_ledger_replication_passes_total", **flow) == 4
    assert value(m, "offset_ledger_replication_last_pass_timestamp_seconds", **flow) == 1_041


def test_a_topic_set_aside_is_exported_with_its_reason_and_keeps_its_growing_rpo():
    clock = Clock(1_000.0)
    obs = observer(clock)
    tp, other = ("Payments", 0), ("Orders", 0)
    obs.measured({tp: 10, other: 4}, {tp: 10, other: 4}, {}, at=1_000.0)
    # Orders is refused: its positions are gone from the replicator; the job still reads the
    # end offsets of the partitions the observer names.
    assert obs.aside({"Orders": REFUSED}) == [other]
    obs.measured({tp: 10, other: 9}, {tp: 10}, {"Orders": REFUSED}, at=1_010.0)
    clock.now = 1_100.0
    m = obs.m
    orders = {**PART, "topic": "P.Orders", "source_topic": "Orders"}
    assert value(m, "offset_ledger_replication_lag_records", **orders) == 5
    flag = {"source": "P", "target": "B", "topic": "P.Orders", "source_topic": "Orders"}
    assert value(m, "offset_ledger_topic_not_replicated", **flag, reason="refused") == 1
    assert value(m, "offset_ledger_replication_rpo_seconds", **orders) == 100
    assert value(m, "offset_ledger_replication_rpo_seconds", **PART) == 90
    # The reason changes, then the topic comes back: the old series go.
    obs.measured({tp: 10}, {tp: 10}, {"Orders": UNREADABLE}, at=1_100.0)
    names = samples(m)
    assert (("offset_ledger_topic_not_replicated",
             tuple(sorted({**flag, "reason": "refused"}.items()))) not in names)
    assert value(m, "offset_ledger_topic_not_replicated", **flag, reason="unreadable") == 1
    obs.measured({tp: 10, other: 4}, {tp: 10, other: 4}, {}, at=1_110.0)
    assert not any(k[0] == "offset_ledger_topic_not_replicated" for k in samples(m))
    # A topic no longer selected at all: its partition series are removed.
    obs.measured({tp: 10}, {tp: 10}, {}, at=1_120.0)
    assert not any(dict(k[1]).get("source_topic") == "Orders" for k in samples(m))


def test_set_aside_reasons():
    broken = {"A": "x", "B": "y", "C": "z"}
    assert set_aside_reasons(broken, {"A"}, {"B": "cannot create"}) == {
        "A": "refused", "B": "replica", "C": "unreadable"}


def test_a_checkpoint_pass_counts_statuses_latency_writes_and_readiness():
    clock = Clock(1_000.0)
    m = Metrics("checkpoint", process_collectors=False)
    obs = CheckpointObserver(m, "P", "B", interval_s=60, clock=clock)
    at = dt.datetime.fromtimestamp(998.0, dt.UTC)  # a pass's time: aware UTC (ledger.clock)

    def cp(group: str, partition: int, status: str) -> SimpleNamespace:
        return SimpleNamespace(group_id=group, source_topic="Payments", partition=partition,
                               status=status, translated=status != "untranslatable",
                               checkpointed_at=at)

    result = SimpleNamespace(
        checkpoints=[cp("G", 0, "translated"), cp("G", 1, "untranslatable"),
                     cp("H", 0, "held")],
        writes=[SimpleNamespace(group_id="G")])
    obs.pass_done(result, 1.5, {"G": (False, 12), "H": (True, 0)})
    flow = {"source": "P", "target": "B"}
    assert value(m, "offset_ledger_checkpoints_total", **flow, status="translated") == 1
    assert value(m, "offset_ledger_checkpoints_total", **flow, status="untranslatable") == 1
    assert value(m, "offset_ledger_checkpoint_latency_seconds_sum", **flow, group="G",
                 topic="Payments", partition="0") == 2.0
    assert value(m, "offset_ledger_group_offsets_written_total", **flow, group="G") == 1
    assert value(m, "offset_ledger_group_ready_to_move", **flow, group="G") == 0
    assert value(m, "offset_ledger_group_records_not_replicated", **flow, group="G") == 12
    assert value(m, "offset_ledger_group_ready_to_move", **flow, group="H") == 1
    assert value(m, "offset_ledger_checkpoint_pass_duration_seconds_sum", **flow) == 1.5
    assert value(m, "offset_ledger_checkpoint_interval_seconds", **flow) == 60
    # A group that is gone from the next pass is gone from the metrics.
    obs.pass_done(SimpleNamespace(checkpoints=[], writes=[]), 1.0, {"G": (True, 0)})
    assert not any(dict(k[1]).get("group") == "H" and k[0].startswith("offset_ledger_group")
                   for k in samples(m))
    assert value(m, "offset_ledger_checkpoint_passes_total", **flow) == 2


def test_logged_errors_and_warnings_are_counted_per_logger():
    import logging

    m = Metrics("replicate", process_collectors=False)
    m.count_logged_errors()
    try:
        logging.getLogger("pipelines.replicate.replicator").error("copy failed")
        logging.getLogger("ledger.commits").warning("retry")
        logging.getLogger("pipelines.x").info("fine")
    finally:
        m.close()
    logging.getLogger("pipelines.replicate.replicator").error("after close: not counted")
    assert value(m, "offset_ledger_errors_total", verb="replicate",
                 logger="pipelines.replicate.replicator") == 1
    assert value(m, "offset_ledger_warnings_total", verb="replicate",
                 logger="ledger.commits") == 1


def test_a_streaming_commit_counts_its_reports():
    from ledger.translation import Run
    from pipelines.replicate.channel import Delivered, RecordedCommit

    clock = Clock(1_000.0)
    obs = observer(clock)
    report = Delivered("Payments", "P.Payments", 0, start=10, runs=(Run(10, 0, 4),), position=14,
                       records=4, bytes=400, newest_timestamp_ms=990_000,
                       delivered_at_ms=994_000, latency_max_ms=3_000, latency_sum_ms=8_000)
    obs.commit_recorded(RecordedCommit(7, dt.datetime.fromtimestamp(995.0, dt.UTC), [report]))
    m = obs.m
    assert value(m, "offset_ledger_replication_records_total", **PART) == 4
    assert value(m, "offset_ledger_replication_bytes_total", **PART) == 400
    # Latency: the report's mean (record timestamp -> delivery), once per report.
    assert value(m, "offset_ledger_replication_latency_seconds_sum", **PART) == 2.0
    assert value(m, "offset_ledger_replication_latency_seconds_count", **PART) == 1
    assert value(m, "offset_ledger_replication_record_age_seconds", **PART) == 4.0
    flow = {"source": "P", "target": "B"}
    assert value(m, "offset_ledger_ledger_commits_total", **flow) == 1
    assert value(m, "offset_ledger_ledger_last_commit_timestamp_seconds", **flow) == 995.0
    # No durations measured for a streaming commit: none observed (never a fake 0).
    assert not any(k[0].startswith("offset_ledger_ledger_commit_duration") for k in samples(m))
