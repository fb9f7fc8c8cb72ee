"""pipelines.edge.kafka_admin: answers that leave a broker out are never taken as whole."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from ledger.config import ClusterConfig
from pipelines.edge import kafka_admin

pytestmark = pytest.mark.unit

P = ClusterConfig("P", {"bootstrap.servers": "p:9092"})


class _Admin:
    """Answers ListGroups from a script: each answer is (valid group ids, error codes)."""

    def __init__(self, answers):
        self.answers, self.asked = list(answers), 0

    def list_consumer_groups(self, request_timeout):
        valid, errors = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        future: Future = Future()
        future.set_result(SimpleNamespace(
            valid=[SimpleNamespace(group_id=g, state=None) for g in valid],
            errors=[KafkaException(KafkaError(code)) for code in errors]))
        return future


def test_a_broker_left_out_of_list_groups_is_asked_again(monkeypatch, this_thread_time):
    """Torture history 24001 eos: `failover --group-regex` found no group on P."""
    fake = _Admin([([], [KafkaError.COORDINATOR_LOAD_IN_PROGRESS]), (["g1", "g2"], [])])
    monkeypatch.setattr(kafka_admin, "admin", lambda cluster: fake)
    this_thread_time("sleep", lambda s: None)
    assert [g.group_id for g in kafka_admin.list_groups(P)] == ["g1", "g2"]
    assert fake.asked == 2


def test_a_broker_that_never_answers_list_groups_is_an_error(monkeypatch):
    fake = _Admin([(["g1"], [KafkaError.REQUEST_TIMED_OUT])])
    monkeypatch.setattr(kafka_admin, "admin", lambda cluster: fake)
    monkeypatch.setattr(kafka_admin, "LIST_GROUPS_RETRY_S", 0.0)
    with pytest.raises(kafka_admin.KafkaAdminError, match="listing groups: 1 broker"):
        kafka_admin.list_groups(P)


def test_a_refusal_of_list_groups_is_not_asked_again(monkeypatch):
    fake = _Admin([([], [KafkaError.CLUSTER_AUTHORIZATION_FAILED]), (["g1"], [])])
    monkeypatch.setattr(kafka_admin, "admin", lambda cluster: fake)
    with pytest.raises(kafka_admin.KafkaAdminError) as raised:
        kafka_admin.list_groups(P)
    assert raised.value.kind not in kafka_admin.kafka_errors.TRANSIENT and fake.asked == 1


class _Groups(_Admin):
    """ListGroups from a script (ids and states), DescribeGroups of every group asked."""

    def __init__(self, listed: dict[str, str], members: dict[str, int], list_errors=()):
        super().__init__([])
        self.listed, self.members, self.list_errors = listed, members, list(list_errors)
        self.described: list[str] = []

    def list_consumer_groups(self, request_timeout):
        future: Future = Future()
        future.set_result(SimpleNamespace(
            valid=[SimpleNamespace(group_id=g, state=SimpleNamespace(name=st))
                   for g, st in self.listed.items()],
            errors=[KafkaException(KafkaError(c)) for c in self.list_errors]))
        return future

    def describe_consumer_groups(self, groups, request_timeout):
        self.described += groups
        out = {}
        for g in groups:
            out[g] = future = Future()
            if g in self.members:
                future.set_result(SimpleNamespace(state=SimpleNamespace(name="STABLE"),
                                                  members=[object()] * self.members[g]))
            else:
                future.set_exception(KafkaException(KafkaError(KafkaError.GROUP_ID_NOT_FOUND)))
        return out


def test_many_groups_are_listed_first_and_only_busy_or_unlisted_ones_described(monkeypatch):
    """Issue 37: a describe of 200 groups took 1.2 s of a `translate --group-regex`; the idle
    ones are known from ListGroups, only the others are described (members, or a missing
    ACL that ListGroups leaves silent)."""
    idle = [f"idle-{i:02d}" for i in range(12)]
    fake = _Groups({**dict.fromkeys(idle, "EMPTY"), "busy": "STABLE"}, {"busy": 2})
    monkeypatch.setattr(kafka_admin, "admin", lambda cluster: fake)
    asked = ["unlisted", *idle, "busy"]
    infos = kafka_admin.describe_groups(P, asked)
    assert list(infos) == asked
    assert sorted(fake.described) == ["busy", "unlisted"]
    assert (infos["busy"].members, infos["unlisted"].state) == (2, "DEAD")
    assert {infos[g].state for g in idle} == {"EMPTY"} and {infos[g].members for g in idle} == {0}
    with pytest.raises(kafka_admin.GroupActiveError, match="group busy has 2 active member"):
        kafka_admin.ensure_all_inactive(P, asked)


def test_a_list_without_every_broker_falls_back_to_describing_each_group(monkeypatch):
    groups = [f"g{i:02d}" for i in range(12)]
    fake = _Groups(dict.fromkeys(groups, "EMPTY"), dict.fromkeys(groups, 0),
                   list_errors=[KafkaError.REQUEST_TIMED_OUT])
    monkeypatch.setattr(kafka_admin, "admin", lambda cluster: fake)
    assert list(kafka_admin.describe_groups(P, groups)) == groups
    assert fake.described == groups  # not taken from a partial list, and not waited for


def test_a_few_groups_are_described_without_a_list(monkeypatch):
    fake = _Groups({"a": "EMPTY"}, {"a": 0})
    monkeypatch.setattr(kafka_admin, "admin", lambda cluster: fake)
    assert kafka_admin.describe_groups(P, ["a"])["a"].state == "STABLE"
    assert fake.described == ["a"]
