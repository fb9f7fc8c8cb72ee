"""``pipelines.edge.preflight.await_reachable``: a continuous job started while a cluster restarts
waits for it; any other failure (and the end of the wait) is raised as it is (torture F5)."""

from __future__ import annotations

import logging

import pytest

from ledger.config import ClusterConfig
from pipelines.edge import kafka_errors, preflight
from pipelines.edge.kafka_errors import KafkaAccessError

pytestmark = pytest.mark.unit

CLUSTER = ClusterConfig("P", {"bootstrap.servers": "127.0.0.1:1"})
DOWN = KafkaAccessError("cluster P is unreachable at 127.0.0.1:1: Connection refused",
                        kafka_errors.UNREACHABLE)
REFUSED = KafkaAccessError("cluster P refused the credentials", kafka_errors.AUTHENTICATION)


def probes(monkeypatch, this_thread_time, answers: list[BaseException | None]) -> list[float]:
    """``check_reachable`` answers from ``answers`` (None: the cluster answers); no back-off."""
    calls: list[float] = []

    def probe(cluster: ClusterConfig, timeout: float) -> None:
        calls.append(timeout)
        answer = answers.pop(0)
        if answer is not None:
            raise answer

    monkeypatch.setattr(preflight, "check_reachable", probe)
    this_thread_time("sleep", lambda s: None)
    return calls


def test_a_restarting_cluster_is_waited_for_with_one_warning(monkeypatch, this_thread_time,
                                                             caplog):
    calls = probes(monkeypatch, this_thread_time, [DOWN, DOWN, DOWN, None])
    with caplog.at_level(logging.WARNING, logger="pipelines.edge.preflight"):
        preflight.await_reachable(CLUSTER, 60.0, 10.0)
    assert calls == [10.0] * 4
    waits = [r.getMessage() for r in caplog.records if "waiting up to" in r.getMessage()]
    assert len(waits) == 1 and waits[0].startswith("cluster P is unreachable at 127.0.0.1:1")
    assert "cluster P answers again" in caplog.text


def test_credentials_fail_at_once(monkeypatch, this_thread_time):
    calls = probes(monkeypatch, this_thread_time, [REFUSED, None])
    with pytest.raises(KafkaAccessError) as err:
        preflight.await_reachable(CLUSTER, 60.0)
    assert err.value.kind == kafka_errors.AUTHENTICATION and len(calls) == 1


def test_no_wait_raises_the_first_unreachable(monkeypatch, this_thread_time):
    calls = probes(monkeypatch, this_thread_time, [DOWN, None])
    with pytest.raises(KafkaAccessError) as err:
        preflight.await_reachable(CLUSTER, 0.0)
    assert err.value is DOWN and len(calls) == 1


def test_the_wait_ends_with_the_clusters_own_error(monkeypatch, this_thread_time):
    clock = iter(range(0, 1000, 20))  # each probe costs 20 s of the 45 s allowed
    this_thread_time("monotonic", lambda: float(next(clock)))
    calls = probes(monkeypatch, this_thread_time, [DOWN] * 10)
    with pytest.raises(KafkaAccessError) as err:
        preflight.await_reachable(CLUSTER, 45.0)
    assert err.value.kind == kafka_errors.UNREACHABLE and len(calls) == 3
