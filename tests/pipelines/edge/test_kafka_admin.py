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


def test_a_broker_left_out_of_list_groups_is_asked_again(monkeypatch):
    """Torture history 24001 eos: `failover --group-regex` found no group on P."""
    fake = _Admin([([], [KafkaError.COORDINATOR_LOAD_IN_PROGRESS]), (["g1", "g2"], [])])
    monkeypatch.setattr(kafka_admin, "admin", lambda cluster: fake)
    monkeypatch.setattr(kafka_admin.time, "sleep", lambda s: None)
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
