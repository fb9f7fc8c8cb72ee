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


class _Offsets(_Client):
    """Answers OffsetFetch: each group's one committed offset, remembering who was asked."""

    def __init__(self, cluster: ClusterConfig) -> None:
        super().__init__(cluster)
        self.asked: list[str] = []

    def list_consumer_group_offsets(self, requests, request_timeout):
        from concurrent.futures import Future

        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        group = requests[0].group_id
        self.asked.append(group)
        future: Future = Future()
        future.set_result(ConsumerGroupTopicPartitions(group, [
            TopicPartition("t", 0, int(group[1:]))]))
        return {group: future}


@pytest.mark.unit
def test_many_groups_are_spread_over_lanes_of_their_own(monkeypatch):
    """A broker answers one connection's requests one at a time: 200 groups' one-group
    requests go over several clients (connections), a few groups over the command's own."""
    built: list[_Offsets] = []
    monkeypatch.setattr(kafka_admin, "_new_admin",
                        lambda cluster: built.append(_Offsets(cluster)) or built[-1])
    with kafka_admin.clients() as command:
        own = kafka_admin.admin(P)
        assert kafka_admin.lanes(P, 1) == [own] and kafka_admin.lanes(P, 25) == [own]
        assert len(kafka_admin.lanes(P, 26)) == 2
        many = kafka_admin.lanes(P, 200)
        assert len(many) == kafka_admin.MAX_LANES and many[0] is own
        assert len({id(c) for c in many}) == kafka_admin.MAX_LANES
        assert kafka_admin.lanes(P, 1000) == many  # kept for the command, like its own client
        groups = [f"g{i}" for i in range(200)]
        committed = kafka_offsets.committed_of(P, groups)
        assert committed == {g: {("t", 0): int(g[1:])} for g in groups}
        assert sorted(g for c in many for g in c.asked) == sorted(groups)
        assert {len(c.asked) for c in many} == {200 // kafka_admin.MAX_LANES}
        kafka_admin.renew(P)  # stale metadata: every lane is rebuilt, not only the first
        assert not {id(c) for c in kafka_admin.lanes(P, 200)} & {id(c) for c in many}
    assert command.closed and len(command) == 0


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


@pytest.mark.kafka
def test_many_groups_in_one_call_each_way(kafka_clusters, make_config, unique):
    """Issue 37: a move of hundreds of groups asks each cluster once per kind of request
    (describe, offset fetch, offset commit all in flight together), with per-group answers
    as exact as one group's: an active group is named (or skipped), a missing one is empty."""
    from confluent_kafka import Consumer

    cluster = make_config().cluster("P")
    topic = unique("batch")
    # more than kafka_admin.LIST_FIRST_GROUPS: idle groups are known from ListGroups, the
    # active one is described
    groups = [unique("g") for _ in range(kafka_admin.LIST_FIRST_GROUPS + 2)]
    assert kafka_admin.create_topic(cluster, topic, 3)
    with kafka_admin.clients():
        kafka_admin.alter_groups_offsets(cluster, {
            g: {(topic, p): 10 * i + p for p in range(3) if p <= i % 3}
            for i, g in enumerate(groups)})
        committed = kafka_offsets.committed_of(cluster, [*groups, unique("never")])
        assert [committed[g] for g in groups] == [
            {(topic, p): 10 * i + p for p in range(3) if p <= i % 3}
            for i, g in enumerate(groups)]
        assert list(committed.values())[-1] == {}
        assert kafka_offsets.committed_of(cluster, groups[:2], [(topic, 1)]) == {
            groups[0]: {}, groups[1]: {(topic, 1): 11}}
        infos = kafka_admin.describe_groups(cluster, [unique("never"), *groups])
        assert {i.members for i in infos.values()} == {0}
        assert list(infos)[1:] == groups and next(iter(infos.values())).state == "DEAD"

        member = Consumer(cluster.client_config(**{"group.id": groups[3],
                                                   "enable.auto.commit": False}))
        member.subscribe([topic])
        try:
            deadline = time.monotonic() + 60
            while not member.assignment() and time.monotonic() < deadline:
                member.poll(0.2)  # the condition awaited: the member is assigned
            assert member.assignment()
            assert kafka_admin.describe_groups(cluster, groups)[groups[3]].members == 1
            with pytest.raises(kafka_admin.GroupActiveError, match=groups[3]):
                kafka_admin.ensure_all_inactive(cluster, groups)
            with pytest.raises(kafka_admin.GroupActiveError, match=groups[3]):
                kafka_admin.alter_groups_offsets(cluster, {g: {(topic, 0): 99} for g in groups})
            # Refused before anything was written: no group moved to 99.
            assert all(o.get((topic, 0)) != 99
                       for o in kafka_offsets.committed_of(cluster, groups).values())
            skipped = kafka_admin.alter_groups_offsets(
                cluster, {g: {(topic, 0): 99} for g in groups}, skip_active=True)
            assert list(skipped) == [groups[3]]
            after = kafka_offsets.committed_of(cluster, groups)
            assert [after[g].get((topic, 0)) for g in groups] == [
                30 if i == 3 else 99 for i in range(len(groups))]
        finally:
            member.close()


@pytest.mark.kafka
def test_first_committed_answers_every_commit_of_a_partition(kafka_clusters, make_config,
                                                             unique):
    """One probe per partition answers every group's commit on it: an aborted transaction
    (records 2..5 and its marker) lies before the first committed record after offset 2."""
    cluster = make_config().cluster("P")
    topic = unique("firstc")
    assert kafka_admin.create_topic(cluster, topic, 1)
    plain = Producer(cluster.client_config())
    for _ in range(2):
        plain.produce(topic, value=b"c", partition=0)
    assert plain.flush(15) == 0
    tx = Producer(cluster.client_config(**{"transactional.id": unique("tx")}))
    tx.init_transactions(30)
    tx.begin_transaction()
    for _ in range(4):
        tx.produce(topic, value=b"a", partition=0)
    assert tx.flush(15) == 0  # written, then aborted (an abort purges what is unsent)
    tx.abort_transaction(30)
    landed: list[int] = []  # the abort marker may land before or among these
    for _ in range(3):
        plain.produce(topic, value=b"c", partition=0,
                      on_delivery=lambda err, msg: landed.append(msg.offset()))
    assert plain.flush(15) == 0
    first, end = min(landed), max(landed) + 1
    assert first >= 6  # after the 4 aborted records
    with kafka_admin.clients():
        assert kafka_admin.first_committed(cluster, {(topic, 0): (2, end)}) == {(topic, 0): first}
        # Commits at 3..first have nothing committed before them past 2; one past it has.
        assert kafka_admin.committed_records_between(cluster, {(topic, 0): (2, first)}) == {
            (topic, 0): False}
        assert kafka_admin.committed_records_between(cluster, {(topic, 0): (2, first + 1)}) \
            == {(topic, 0): True}
        # Asked past the log's end: where the log ends, nothing committed up to it.
        high = kafka_offsets.list_offsets(cluster, "latest", [(topic, 0)])[(topic, 0)]
        assert kafka_admin.first_committed(cluster, {(topic, 0): (end, high + 10)}) == {
            (topic, 0): high}
