
"""The streaming copy task's errors: classified, picklable, cluster-wide only when lasting
(unit tests of the pure parts; the secured suite drives them against real brokers)."""

from __future__ import annotations

import pickle

import pytest

from pipelines.edge import kafka_errors
from pipelines.replicate import channel, stream_task

pytestmark = pytest.mark.unit


class FakeError:
    """What librdkafka hands an ``error_cb`` (name, text, fatal)."""

    def __init__(self, name: str, text: str) -> None:
        self._name, self._text = name, text

    def name(self) -> str:
        return self._name

    def str(self) -> str:
        return self._text

    def fatal(self) -> bool:
        return False


def test_an_authentication_failure_is_cluster_wide_only_once_it_lasted(this_thread_time):
    now = [1000.0]
    this_thread_time("monotonic", lambda: now[0])
    watch = kafka_errors.ErrorWatch()
    auth = FakeError("_AUTHENTICATION", "SASL authentication error: Authentication failed")
    watch(auth)
    assert watch.persistent_cause(15) is None  # one failure: a broker may be restarting
    for _ in range(4):
        now[0] += 5
        watch(auth)
    assert watch.persistent_cause(15) == ("_AUTHENTICATION", auth.str())
    now[0] += kafka_errors.STREAK_GAP_S + 1  # it stopped failing
    assert watch.persistent_cause(15) is None
    watch(auth)  # a new streak starts
    assert watch.persistent_cause(15) is None


def test_task_errors_pickle_and_carry_their_kind():
    failed = stream_task.TaskFailed("cluster B: User:replicator is not authorized to WRITE ...")
    assert str(pickle.loads(pickle.dumps(failed))) == str(failed)
    error = channel.TaskError("t/0/1", "Orders", 0, "cluster P: ... READ topic Orders", True,
                              kafka_errors.AUTHORIZATION)
    assert channel.decode(channel.encode_error(error)) == error
    spec = stream_task.StreamSpec("t/0/1", "c", 0, (("Orders", "P.Orders", 0, 5),), {}, {}, {},
                                  source_alias="P", target_alias="B")
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_a_missing_acl_is_named_with_the_flow_aliases():
    copier = stream_task._Copier(
        stream_task.StreamSpec("t/0/1", "c", 0, (), {"sasl.username": "replicator"},
                               {"sasl.username": "replicator"}, {}, source_alias="P",
                               target_alias="B"), {}, None, None, None, [])
    problem = copier.classify(FakeError("TOPIC_AUTHORIZATION_FAILED", "Broker: Topic "
                                        "authorization failed"), source=True,
                              operation="READ", resource="topic Orders")
    assert problem.kind == kafka_errors.AUTHORIZATION
    assert problem.message == (
        "cluster P: User:replicator is not authorized to READ topic Orders: add ACL "
        "--allow-principal User:replicator --operation Read --topic Orders on cluster P")
    written = copier.classify("Broker: Topic authorization failed", source=False,
                              operation="WRITE", resource="topic P.Orders")
    assert "not authorized to WRITE topic P.Orders" in written.message
    assert written.message.startswith("cluster B: ")


@pytest.mark.parametrize("boundary_s", [0.03, 0.015])
def test_a_transaction_is_due_only_with_records_that_lingered(boundary_s):
    txn = stream_task._Txn(boundary_s)
    assert not txn.due(1e9)  # idle: never an empty transaction
    assert txn.deadline(100.0) == 100.0 + stream_task.CONTROL_POLL_S
    txn.first_record_at = 100.0
    assert txn.holds_records()
    assert not txn.due(100.0 + boundary_s / 2)
    assert txn.deadline(100.0) == 100.0 + boundary_s
    assert txn.due(100.0 + boundary_s)


def test_a_zero_boundary_commits_after_every_fetched_batch():
    txn = stream_task._Txn(0.0)
    assert not txn.due(1e9)  # still never an empty transaction
    txn.first_record_at = 100.0
    assert txn.due(100.0)
