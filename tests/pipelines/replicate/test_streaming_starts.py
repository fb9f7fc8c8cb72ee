"""The streaming driver's task start when the target (the runs channel's cluster) is away.

Torture history seed 11003 eos: partitions were added on B while P, the target of ``B->P``, was
killed (a disaster): the refresh that grew the replica succeeded, then the start of the new
partitions' copy task read the channel's control partition on P and the raw
``_ALL_BROKERS_DOWN`` ended the job (a traceback, rc 1). A start that meets a transient fault
now waits like an ended task's restart; a fault configuration must fix still ends the job.
"""

from __future__ import annotations

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

    d._control_end = control_end
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
