"""The streaming driver's task start when the target (the runs channel's cluster) is away.

Torture history seed 11003 eos: partitions were added on B while P, the target of ``B->P``, was
killed (a disaster): the refresh that grew the replica succeeded, then the start of the new
partitions' copy task read the channel's control partition on P and the raw
``_ALL_BROKERS_DOWN`` ended the job (a traceback, rc 1). A start that meets a transient fault
now waits like an ended task's restart; a fault configuration must fix still ends the job.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from pipelines.edge import kafka_errors
from pipelines.edge.kafka_errors import KafkaAccessError
from pipelines.replicate.streaming import StreamingReplicator

pytestmark = pytest.mark.unit

PARTS = [("T", 0), ("T", 1)]


def driver(fault: KafkaAccessError) -> StreamingReplicator:
    """A driver whose only surface here is the start path, the control-partition read failing
    with ``fault``."""
    d = StreamingReplicator.__new__(StreamingReplicator)
    d.r = SimpleNamespace(tails={}, positions={tp: 0 for tp in PARTS},
                          flow=SimpleNamespace(name="B->P"),
                          check_continuity=lambda tps: None, drop_broken=lambda: None)
    d.tails, d.failures, d.restart_at, d.tasks = {}, {}, {}, {}
    d.commit = lambda: None

    def control_end() -> int:
        raise fault

    d.channel = SimpleNamespace(control_end=control_end)
    return d


def test_a_start_while_the_target_is_away_is_tried_again_later(caplog):
    d = driver(KafkaAccessError("cluster P is unreachable at 127.0.0.1:1: All broker "
                                "connections are down", kafka_errors.UNREACHABLE))
    d._start(3, PARTS)
    assert d.restart_at[3][1] == PARTS and d.failures == {3: 1} and d.tasks == {}
    d._start(3, PARTS)  # still away: the back-off grows
    assert d.failures == {3: 2}
    assert "copy task for 2 partition(s) not started, tried again later: cluster P is " \
           "unreachable" in caplog.text


def test_a_start_refused_by_the_target_ends_the_job():
    d = driver(KafkaAccessError("cluster P refused the credentials of User:repl",
                                kafka_errors.AUTHENTICATION))
    with pytest.raises(KafkaAccessError, match="refused the credentials"):
        d._start(0, PARTS)
    assert d.restart_at == {}


# --- the first refresh ------------------------------------------------------------------------
# The suite's source-broker-restart regression, on a loaded machine: B (the source of B->P) was
# killed while the job's first refresh read B's log starts for the placement; the
# ``_TIMED_OUT`` ended the job (rc 2) though the same fault a refresh later is ridden out.


def starting_driver(faults: list[KafkaAccessError], wait_s: float = 60.0):
    d = StreamingReplicator.__new__(StreamingReplicator)
    d.startup_wait_s = wait_s
    calls = {"refresh": 0, "sync": 0}

    def refresh(config) -> None:
        calls["refresh"] += 1
        if faults:
            raise faults.pop(0)

    d.r = SimpleNamespace(config=None, refresh=refresh, flow=SimpleNamespace(name="B->P"))
    d._sync_tasks = lambda: calls.__setitem__("sync", calls["sync"] + 1)
    return d, calls


def timed_out() -> KafkaAccessError:
    return KafkaAccessError("cluster B: DESCRIBE topic T1 (earliest offsets) failed: "
                            "_TIMED_OUT: Failed to query partition leaders", kafka_errors.OTHER)


def test_a_fault_during_the_first_refresh_is_waited_out(caplog):
    d, calls = starting_driver([timed_out(), timed_out()])
    d._first_refresh(threading.Event(), lambda c: c, retry_s=0.01)
    assert calls == {"refresh": 3, "sync": 1}
    assert caplog.text.count("flow B->P: first refresh postponed, tried again for up to 60s "
                             "(--startup-wait): cluster B: DESCRIBE topic T1") == 1


def test_a_first_refresh_refused_by_a_cluster_ends_the_job_at_once():
    d, calls = starting_driver([KafkaAccessError("cluster B refused the credentials",
                                                 kafka_errors.AUTHENTICATION)])
    with pytest.raises(KafkaAccessError, match="refused the credentials"):
        d._first_refresh(threading.Event(), lambda c: c, retry_s=0.01)
    assert calls == {"refresh": 1, "sync": 0}


def test_a_fault_that_outlasts_the_start_up_wait_ends_the_job_with_it():
    d, calls = starting_driver([timed_out() for _ in range(1000)], wait_s=0.05)
    with pytest.raises(KafkaAccessError, match="earliest offsets"):
        d._first_refresh(threading.Event(), lambda c: c, retry_s=0.01)
    assert calls["sync"] == 0 and calls["refresh"] > 1


def test_a_stop_during_the_wait_ends_it_without_tasks():
    d, calls = starting_driver([timed_out() for _ in range(1000)])
    stop = threading.Event()
    stop.set()
    d._first_refresh(stop, lambda c: c, retry_s=0.01)
    assert calls == {"refresh": 1, "sync": 0}


# --- where a placed partition starts ----------------------------------------------------------


def test_a_partition_placed_in_a_new_epoch_keeps_no_tail_from_before(monkeypatch):
    """A topic left the flow and came back with its replica recreated: its partitions start a
    new epoch at the log start, and no tail of the old epoch is kept (the streaming driver
    would start the copy there, past the new epoch's first records, and refuse every report of
    it as not continuing that tail)."""
    from ledger.config import ClusterConfig
    from pipelines.replicate import replicator
    from pipelines.replicate.plan import RecordedTail
    from pipelines.replicate.replicator import FlowReplicator

    old = RecordedTail(100, 100)
    r = FlowReplicator.__new__(FlowReplicator)
    r.tails, r.positions, r.replicas = {("T", 0): old, ("T", 1): old}, {}, {"T": "P.T"}
    r.flow = SimpleNamespace(name="P->B", source="P", target="B")
    r.config = SimpleNamespace(cluster=lambda alias: ClusterConfig(alias, {}))
    r.load_state = lambda partitions: SimpleNamespace(tails={("T", 0): old, ("T", 1): old})
    ends = {("P.T", 0): 0, ("P.T", 1): 100}  # partition 0's replica was recreated (empty)
    monkeypatch.setattr(replicator, "list_offsets", lambda cluster, which, tps, **kw: (
        {tp: 7 for tp in tps} if which == "earliest" else ends))
    r._place([("T", 0), ("T", 1)])
    assert r.positions == {("T", 0): 7, ("T", 1): 100}
    assert r.tails == {("T", 1): old}
