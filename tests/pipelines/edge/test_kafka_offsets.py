"""pipelines.edge.kafka_offsets (every offset read) and the command's admin clients
(kafka_admin)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from ledger.config import ClusterConfig
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.edge.kafka_errors import KafkaAccessError

P = ClusterConfig("P", {"bootstrap.servers": "p:9092"})
B = ClusterConfig("B", {"bootstrap.servers": "b:9092"})


class _Client:
    def __init__(self, cluster: ClusterConfig) -> None:
        self.cluster, self.polled = cluster, 0

    def poll(self, timeout: float) -> int:
        self.polled += 1
        return 0


@pytest.mark.unit
def test_one_admin_client_per_cluster_closed_with_the_command(monkeypatch):
    built: list[_Client] = []
    monkeypatch.setattr(kafka_admin, "_new_admin",
                        lambda cluster: built.append(_Client(cluster)) or built[-1])
    with kafka_admin.clients() as command:
        first = kafka_admin.admin(P)
        assert kafka_admin.admin(P) is first
        assert kafka_admin.admin(ClusterConfig("P", dict(P.properties))) is first
        other = kafka_admin.admin(B)
        assert other is not first
        with kafka_admin.clients() as inner:  # a command run by a command shares its clients
            assert inner is command and kafka_admin.admin(B) is other
        assert not command.closed and len(command) == 2
    assert command.closed and len(command) == 0
    assert [c.polled for c in built] == [1, 1]  # their pending callbacks served at close
    with pytest.raises(RuntimeError, match="closed"):
        command.get(P)
    outside = kafka_admin.admin(P)  # no command: a client of its own
    assert outside is not first and len(built) == 3


@pytest.mark.unit
def test_which_is_checked():
    with pytest.raises(ValueError, match="needs the group"):
        kafka_offsets.list_offsets(P, "committed", [("t", 0)])
    with pytest.raises(ValueError, match="reads no group"):
        kafka_offsets.list_offsets(P, "latest", [("t", 0)], group="g")
    with pytest.raises(ValueError, match="earliest, latest, committed"):
        kafka_offsets.list_offsets(P, "newest", [("t", 0)])
    assert kafka_offsets.list_offsets(P, "latest", []) == {}


@pytest.mark.kafka
def test_earliest_latest_committed_and_by_time(kafka_clusters, make_config, unique):
    cluster = make_config().cluster("P")
    topic, group = unique("offsets"), unique("g")
    assert kafka_admin.create_topic(cluster, topic, 2)
    producer = Producer(cluster.client_config())
    base = int(time.time() * 1000) - 60_000
    for i in range(6):  # partition 0: timestamps base, base+10 s, base+20 s
        producer.produce(topic, value=b"v", partition=i % 2, timestamp=base + (i // 2) * 10_000)
    assert producer.flush(15) == 0
    tps = [(topic, 0), (topic, 1)]
    with kafka_admin.clients() as command:
        assert kafka_offsets.list_offsets(cluster, "earliest", tps) == {(topic, 0): 0,
                                                                        (topic, 1): 0}
        assert kafka_offsets.list_offsets(cluster, "latest", tps, read_committed=True) == {
            (topic, 0): 3, (topic, 1): 3}
        assert kafka_offsets.list_offsets(cluster, base + 5_000, tps) == {(topic, 0): 1,
                                                                          (topic, 1): 1}
        # No record that new: the end, never a guess.
        assert kafka_offsets.list_offsets(cluster, base + 50_000, tps) == {(topic, 0): 3,
                                                                           (topic, 1): 3}
        assert kafka_offsets.list_offsets(cluster, "committed", group=group) == {}
        kafka_admin.alter_group_offsets(cluster, group, {(topic, 0): 2})
        assert kafka_offsets.list_offsets(cluster, "committed", group=group) == {(topic, 0): 2}
        assert kafka_offsets.list_offsets(cluster, "committed", [(topic, 1)], group=group) == {}
        missing = unique("missing")
        with pytest.raises(KafkaAccessError, match=missing):
            kafka_offsets.list_offsets(cluster, "latest", [(missing, 0)])
        assert len(command) == 1  # every read above went through one admin client
