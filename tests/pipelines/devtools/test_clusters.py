"""The embedded clusters: real KRaft brokers started and stopped by the project's own code."""

from __future__ import annotations

import socket

import pytest
from confluent_kafka import Consumer, Producer

from ledger.config import config_from_mapping
from pipelines.devtools.clusters import ClusterError, EmbeddedClusters, free_port
from pipelines.edge import kafka_admin, kafka_offsets

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("alias", ["P", "B"])
def test_produce_consume_round_trip(kafka_clusters, make_config, unique, alias):
    cluster = make_config().cluster(alias)
    topic = unique("roundtrip")
    assert kafka_admin.create_topic(cluster, topic, 2)
    producer = Producer(cluster.client_config(**{"enable.idempotence": True}))
    delivered = []
    for i in range(10):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", partition=i % 2,
                         on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert producer.flush(15) == 0
    assert all(err is None for err, _ in delivered)
    consumer = Consumer(cluster.client_config(**{"group.id": unique("g"),
                                                 "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    seen = []
    try:
        while len(seen) < 10:
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(seen)} of 10 records arrived"
            assert msg.error() is None
            seen.append((msg.key().decode(), msg.value().decode()))
    finally:
        consumer.close()
    assert sorted(seen) == sorted((f"k{i}", f"v{i}") for i in range(10))
    assert kafka_offsets.watermarks(cluster, topic, 2) == {0: (0, 5), 1: (0, 5)}


def test_status_reports_both_clusters_running(kafka_clusters):
    statuses = {s.alias: s for s in kafka_clusters.status()}
    assert set(statuses) == {"P", "B"}
    assert all(s.running and s.answering for s in statuses.values())


def test_port_taken_gives_clear_error_and_leaves_nothing_running(tmp_path):
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        raw = {"clusters": {"X": {"bootstrap.servers": f"127.0.0.1:{free_port()}"},
                            "Y": {"bootstrap.servers": f"127.0.0.1:{taken}"}},
               "embedded": {"data.dir": str(tmp_path)}}
        clusters = EmbeddedClusters(config_from_mapping(raw))
        with pytest.raises(ClusterError, match=f"port 127.0.0.1:{taken} is already in use"):
            clusters.up()
    assert clusters.pid("X") is None and clusters.pid("Y") is None


def test_java_missing_is_clear(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    raw = {"clusters": {"X": {"bootstrap.servers": f"127.0.0.1:{free_port()}"}},
           "embedded": {"data.dir": str(tmp_path)}}
    with pytest.raises(ClusterError, match="Java not found"):
        EmbeddedClusters(config_from_mapping(raw)).up()


def test_non_loopback_cluster_cannot_be_embedded(tmp_path):
    raw = {"clusters": {"X": {"bootstrap.servers": "kafka.example.com:9092"}},
           "embedded": {"data.dir": str(tmp_path)}}
    with pytest.raises(ClusterError, match="not a single loopback host:port"):
        EmbeddedClusters(config_from_mapping(raw)).up()


def test_unknown_alias_is_refused(kafka_clusters):
    with pytest.raises(ValueError, match="unknown cluster alias 'Q'"):
        EmbeddedClusters(kafka_clusters.config, ["Q"])


@pytest.mark.unit
def test_cluster_ids_never_look_like_options(monkeypatch):
    import uuid

    from pipelines.devtools import clusters

    # 0xf8 encodes to "-" first in urlsafe base64; the next draw is an ordinary id.
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(int=1)])
    monkeypatch.setattr(clusters.uuid, "uuid4", lambda: next(draws))
    cluster_id = clusters._new_cluster_id()
    assert not cluster_id.startswith("-")
    assert cluster_id == "AAAAAAAAAAAAAAAAAAAAAQ"


@pytest.mark.unit
def test_free_port_is_outside_the_ephemeral_range_and_bindable(monkeypatch, tmp_path):
    """A port an outgoing connection can take as its local end (the kernel's ephemeral range)
    is never handed out: a broker started on it a moment later could not bind."""
    from pipelines.devtools import clusters

    low = clusters._ephemeral_low()
    if low is not None:
        for _ in range(50):
            port = free_port()
            assert clusters._LOWEST_PORT <= port < low
    port = free_port()
    with socket.socket() as s:  # nothing listens there: a server can bind it
        s.bind(("127.0.0.1", port))
    # Without a known range (not Linux), the kernel's own choice.
    monkeypatch.setattr(clusters, "_EPHEMERAL_RANGE", tmp_path / "missing")
    assert clusters._ephemeral_low() is None
    assert 0 < free_port() < 65536


@pytest.mark.unit
def test_free_port_never_hands_a_process_the_same_port_twice(monkeypatch):
    """A cluster's ports are all chosen before any broker binds one: a port chosen for P's
    listener must not come back as B's controller port (seen as a broker that could not bind
    a port nothing else was meant to hold)."""
    from pipelines.devtools import clusters

    monkeypatch.setattr(clusters, "_HANDED_OUT", set())
    if clusters._ephemeral_low() is None:
        pytest.skip("no ephemeral range known here: the kernel picks the port")
    ports = [free_port() for _ in range(400)]
    assert len(set(ports)) == len(ports)


def test_a_fresh_port_taken_before_the_broker_binds_it_is_chosen_again(tmp_path, monkeypatch):
    """Another process can bind a port between free_port choosing it and the broker binding
    it: the broker exits, and ``up`` starts it again on new ports instead of failing."""
    from pipelines.devtools import clusters

    with socket.socket() as thief:
        thief.bind(("127.0.0.1", 0))
        thief.listen()
        stolen = thief.getsockname()[1]
        real_free, real_check = clusters.free_port, clusters.port_free
        handed = iter([stolen])
        # the controller port is chosen free, then taken before the broker binds it
        monkeypatch.setattr(clusters, "free_port", lambda host="127.0.0.1": next(
            handed, None) or real_free(host))
        monkeypatch.setattr(clusters, "port_free",
                            lambda host, port: port == stolen or real_check(host, port))
        raw = {"clusters": {"X": {"bootstrap.servers": f"127.0.0.1:{real_free()}"}},
               "embedded": {"data.dir": str(tmp_path)}}
        embedded = EmbeddedClusters(config_from_mapping(raw), tied_to_parent=True)
        try:
            embedded.up()
            controller = int((tmp_path / "X" / "controller.port").read_text().split()[0])
            assert controller != stolen
            assert "Address already in use" in (tmp_path / "X" / "broker.log").read_text()
            assert embedded.status()[0].answering
        finally:
            embedded.down()


def test_the_configured_broker_port_taken_at_bind_is_an_error(tmp_path, monkeypatch):
    """Only ports ``up`` chose itself are chosen again: the configured listener is the user's."""
    from pipelines.devtools import clusters

    with socket.socket() as thief:
        thief.bind(("127.0.0.1", 0))
        thief.listen()
        taken = thief.getsockname()[1]
        real_check = clusters.port_free
        monkeypatch.setattr(clusters, "port_free",
                            lambda host, port: port == taken or real_check(host, port))
        raw = {"clusters": {"X": {"bootstrap.servers": f"127.0.0.1:{taken}"}},
               "embedded": {"data.dir": str(tmp_path)}}
        embedded = EmbeddedClusters(config_from_mapping(raw), tied_to_parent=True)
        with pytest.raises(ClusterError, match=f"failed to bind to 127.0.0.1:{taken}"):
            embedded.up()
        assert embedded.pid("X") is None
