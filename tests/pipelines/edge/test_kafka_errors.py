"""Kafka errors classified: what is wrong and what to fix, never a secret, always picklable.

The classifier is pure logic over librdkafka's codes and texts (the ones the secured test
module meets for real: ``tests/secured``); the TLS diagnosis is checked against a real TLS
server on loopback with certificates made by the project's own CA helpers.
"""

from __future__ import annotations

import pickle
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from pipelines.devtools.cluster_security import make_ca, sign
from pipelines.edge import kafka_errors
from pipelines.edge.kafka_errors import ErrorWatch, KafkaAccessError, classify
from pipelines.replicate import copy_task
from pipelines.replicate.copy_task import CopyRange

pytestmark = pytest.mark.unit

SECRET = "s3cret-Passw0rd"
SCRAM = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SASL_SSL",
         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "replicator",
         "sasl.password": SECRET}


def err(code: int, text: str = "x", fatal: bool = False) -> KafkaError:
    return KafkaError(code, text, fatal=fatal)


def test_wrong_password_names_user_and_mechanism_not_the_secret():
    problem = classify(err(KafkaError._AUTHENTICATION, "SASL authentication error: "
                           "Authentication failed during authentication due to invalid "
                           "credentials with SASL mechanism SCRAM-SHA-512 (after 5ms in state "
                           "AUTH_REQ)"), "P", SCRAM)
    assert problem.kind == "authentication" and problem.cluster_wide
    assert "user replicator (SCRAM-SHA-512)" in problem.message
    assert "clusters.P.sasl.username" in problem.message
    assert SECRET not in problem.message and "after 5ms" not in problem.message


def test_a_vague_transport_error_is_explained_by_the_watched_cause():
    watch = ErrorWatch()
    watch(err(KafkaError._AUTHENTICATION, "SASL authentication error: invalid credentials"))
    vague = KafkaException(err(KafkaError._TRANSPORT, "Failed to get metadata: Local: Broker "
                                                      "transport failure"))
    assert classify(vague, "P", SCRAM, watch=watch).kind == "authentication"
    # Without the cause it is what it looks like: nothing answered.
    unreachable = classify(vague, "P", SCRAM, watch=ErrorWatch())
    assert unreachable.kind == "unreachable"
    assert unreachable.message.startswith("cluster P is unreachable at 127.0.0.1:1")


@pytest.mark.parametrize(("code", "operation", "resource", "acl"), [
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, "READ", "topic Orders",
     "--operation Read --topic Orders on cluster P"),
    (KafkaError.GROUP_AUTHORIZATION_FAILED, "DESCRIBE", "group G",
     "--operation Describe --group G on cluster P"),
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, "DESCRIBE_CONFIGS", "topic Orders",
     "--operation DescribeConfigs --topic Orders on cluster P"),
])
def test_not_authorized_names_principal_operation_resource_and_the_acl(code, operation,
                                                                      resource, acl):
    problem = classify(KafkaException(err(code)), "P", SCRAM, operation=operation,
                       resource=resource)
    assert problem.kind == "authorization" and not problem.cluster_wide
    assert f"User:replicator is not authorized to {operation} {resource}" in problem.message
    assert f"add ACL --allow-principal User:replicator {acl}" in problem.message


def test_idempotent_producer_refused_names_the_write_acl_on_the_replica():
    watch = ErrorWatch()
    watch(err(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "Failed to acquire idempotence PID "
              "from broker: Broker: Cluster authorization failed", fatal=True))
    problem = classify(err(KafkaError._FATAL, "Unable to produce message: Local: Fatal error"),
                       "the target cluster", SCRAM, operation="WRITE",
                       resource="topic P.Orders", watch=watch)
    assert problem.kind == "authorization"
    assert problem.message.startswith("the target cluster: User:replicator is not authorized "
                                      "to write topic P.Orders")
    assert "--operation Write --topic P.Orders" in problem.message


def test_delivery_report_text_alone_is_classified():
    problem = classify("Broker: Topic authorization failed", "B", SCRAM, operation="WRITE",
                       resource="topic P.Orders")
    assert problem.kind == "authorization" and "--operation Write --topic P.Orders" in \
        problem.message


def test_unknown_topic_and_other_errors():
    unknown = classify(err(KafkaError.UNKNOWN_TOPIC_OR_PART), "P", SCRAM, operation="DESCRIBE",
                       resource="topic Gone")
    assert unknown.kind == "unknown_topic" and unknown.message == "cluster P: topic Gone does " \
                                                                   "not exist"
    other = classify(err(KafkaError.POLICY_VIOLATION, "no"), "P", SCRAM, operation="CREATE",
                     resource="topic T")
    assert other.kind == "other" and "CREATE topic T failed: POLICY_VIOLATION" in other.message


def test_mtls_principal_is_the_certificate_cn(tmp_path: Path):
    make_ca(tmp_path, "ca", "test CA")
    sign(tmp_path, "ca", "replicator")
    props = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL",
             "ssl.certificate.location": str(tmp_path / "replicator.pem"),
             "ssl.key.location": str(tmp_path / "replicator.key")}
    problem = classify(err(KafkaError.TOPIC_AUTHORIZATION_FAILED), "P", props,
                       operation="READ", resource="topic T")
    assert "User:replicator is not authorized to READ topic T" in problem.message


def test_errors_pickle_with_their_kind():
    error = KafkaAccessError("cluster P: authentication failed", "authentication")
    back = pickle.loads(pickle.dumps(error))
    assert (type(back), str(back), back.kind, back.cluster_wide) == \
        (KafkaAccessError, str(error), "authentication", True)
    problem = classify(err(KafkaError._SSL, "SSL handshake failed"), "P", SCRAM)
    assert pickle.loads(pickle.dumps(problem)) == problem


def test_copy_task_returns_a_fatal_producer_error_classified_and_picklable(monkeypatch):
    """The librdkafka exception a producer raises never leaves the task (it does not pickle)."""
    def refused(consumer, producer, opened, max_bytes, producer_config):
        raise KafkaException(err(KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                                 "Failed to acquire idempotence PID: Broker: Cluster "
                                 "authorization failed", fatal=True))

    monkeypatch.setattr(copy_task, "_consume_and_produce", refused)
    ranges = [CopyRange("Orders", "P.Orders", 0, 0, 10), CopyRange("Orders", "P.Orders", 1, 0, 5)]
    results = copy_task.copy_group(ranges, {**SCRAM, "group.id": "g"}, dict(SCRAM))
    assert len(results) == 2
    for r in results:
        assert r.summary is None and r.position == r.range.start
        assert "User:replicator is not authorized to write topic P.Orders" in r.error
        assert SECRET not in r.error
    assert pickle.loads(pickle.dumps(results)) == results


# --- TLS: untrusted, other host -------------------------------------------------------------


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    make_ca(tmp_path, "ca", "the right CA")
    make_ca(tmp_path, "other", "another CA")
    sign(tmp_path, "ca", "broker", server=True)
    sign(tmp_path, "ca", "elsewhere", server=True, sans="DNS:broker.example.invalid")
    return tmp_path


def _tls_server(cert: Path, key: Path) -> Iterator[str]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert), str(key))
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                with context.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_tls_reason_names_an_untrusted_certificate(pki: Path):
    for bootstrap in _tls_server(pki / "broker.pem", pki / "broker.key"):
        reason = kafka_errors.tls_reason({"bootstrap.servers": bootstrap,
                                          "ssl.ca.location": str(pki / "other.pem")})
        assert reason.startswith("the broker's certificate is not trusted")
        assert f"set ssl.ca.location to the CA that signed it (now {pki / 'other.pem'})" in reason
        assert kafka_errors.tls_reason({"bootstrap.servers": bootstrap,
                                        "ssl.ca.location": str(pki / "ca.pem")},
                                       "SSL handshake failed") == \
            "SSL handshake failed; check ssl.ca.location (" + str(pki / "ca.pem") + ")"


def test_tls_reason_names_a_certificate_for_another_host(pki: Path):
    for bootstrap in _tls_server(pki / "elsewhere.pem", pki / "elsewhere.key"):
        problem = classify(err(KafkaError._SSL, "SSL handshake failed: certificate verify "
                               "failed"), "P", {"bootstrap.servers": bootstrap,
                                                "ssl.ca.location": str(pki / "ca.pem")})
        assert problem.kind == "tls"
        assert "the broker's certificate is not for 127.0.0.1" in problem.message
        assert "subjectAltName" in problem.message


def test_tls_on_one_side_only_is_a_protocol_mismatch_not_unreachable(pki: Path):
    vague = err(KafkaError._TRANSPORT, "Failed to get metadata: Local: Broker transport failure")
    for bootstrap in _tls_server(pki / "broker.pem", pki / "broker.key"):
        problem = classify(vague, "P", {"bootstrap.servers": bootstrap})
        assert problem.kind == "protocol" and problem.cluster_wide
        assert "expects speak TLS" not in problem.message
        assert f"the listener at {bootstrap} expects" in problem.message
        assert "security.protocol is PLAINTEXT: set it to SSL or SASL_SSL" in problem.message
    # A TLS client at a plain listener.
    plain = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(plain.accept()[0]), daemon=True)
    thread.start()
    try:
        address = f"127.0.0.1:{plain.getsockname()[1]}"
        closer = threading.Timer(0.5, lambda: [c.close() for c in accepted])
        closer.start()
        problem = classify(vague, "P", {"bootstrap.servers": address,
                                        "security.protocol": "SASL_SSL"})
        assert problem.kind == "protocol"
        assert "does not speak TLS, but security.protocol is SASL_SSL" in problem.message
    finally:
        plain.close()
    # Nothing listening: unreachable, as it is.
    assert classify(vague, "P", {"bootstrap.servers": address}).kind == "unreachable"


# --- TLS: an expired certificate, from a real client and through the CLI's preflight ---------


@pytest.fixture
def expired_broker(pki: Path) -> Iterator[str]:
    """A TLS listener on loopback whose certificate, signed by the trusted CA, has expired
    (``-days -1``: it was valid until yesterday)."""
    sign(pki, "ca", "expired", server=True, days=-1)
    yield from _tls_server(pki / "expired.pem", pki / "expired.key")


EXPIRED = "the broker's certificate has expired (certificate has expired): renew it on the broker"


def test_an_expired_certificate_is_named_with_what_to_fix(pki: Path, expired_broker: str):
    from ledger.config import config_from_mapping
    from pipelines.edge import preflight

    properties = {"bootstrap.servers": expired_broker, "security.protocol": "SASL_SSL",
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "replicator",
                  "sasl.password": SECRET, "ssl.ca.location": str(pki / "ca.pem")}
    assert kafka_errors.tls_reason(properties) == EXPIRED
    config = config_from_mapping({"clusters": {"P": properties, "B": properties},
                                  "flows": {"P->B": True}}, path=str(pki / "c.yaml"))
    # A real librdkafka client: its vague metadata failure is explained by the handshake's.
    with pytest.raises(KafkaAccessError) as raised:
        preflight.check_reachable(config.cluster("P"))
    assert raised.value.kind == "tls" and raised.value.cluster_wide
    assert str(raised.value) == f"cluster P: TLS handshake with {expired_broker} failed: " \
        + EXPIRED
    assert SECRET not in str(raised.value)


@pytest.mark.parametrize("verb", [
    ["failover", "--group", "G", "--from", "P", "--to", "B"],
    ["failback", "--group", "G", "--from", "P", "--to", "B"],
    ["translate", "--group", "G", "--from", "P", "--to", "B"],
], ids=lambda verb: verb[0])
def test_an_expired_certificate_stops_a_verb_at_its_preflight(pki: Path, expired_broker: str,
                                                              tmp_path: Path, capsys, verb):
    import yaml

    from pipelines import cli

    properties = {"bootstrap.servers": expired_broker, "security.protocol": "SSL",
                  "ssl.ca.location": str(pki / "ca.pem")}
    path = tmp_path / "offset-ledger.yaml"
    path.write_text(yaml.safe_dump({"clusters": {"P": properties, "B": properties},
                                    "flows": {"P->B": True},
                                    "ledger": {"location": str(tmp_path / "ledger")}}))
    code = cli.main([*verb, "--config", str(path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: cluster ")  # the first cluster the verb contacts (B or P)
    assert f": TLS handshake with {expired_broker} failed: {EXPIRED}" in err
    assert "unreachable" not in err and "--disaster" not in err and "Traceback" not in err
    assert err.count("\n") == 1, err  # one line
    assert not (tmp_path / "ledger").exists()
