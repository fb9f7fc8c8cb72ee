"""pipelines.replicate.source: librdkafka cluster properties -> Spark Kafka connector options."""

from __future__ import annotations

import pytest

from ledger.config import config_from_mapping
from pipelines.replicate.source import source_options

pytestmark = pytest.mark.unit


def _cluster(**props):
    raw = {"clusters": {"P": {"bootstrap.servers": "p:9092", **props},
                        "B": {"bootstrap.servers": "b:9092"}},
           "flows": {"P->B": True}}
    return config_from_mapping(raw, path="offset-ledger.yaml").cluster("P")


def test_plaintext_defaults_read_committed_from_the_start_with_headers():
    opts = source_options(_cluster(), ["orders", "events"])
    assert opts["kafka.bootstrap.servers"] == "p:9092"
    assert opts["subscribe"] == "orders,events"
    assert (opts["startingOffsets"], opts["includeHeaders"]) == ("earliest", "true")
    assert opts["kafka.isolation.level"] == "read_committed"
    assert not [k for k in opts if "sasl" in k or "ssl" in k]


def test_sasl_scram_becomes_a_jaas_config_with_quoted_credentials():
    opts = source_options(_cluster(**{
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": 'svc"repl', "sasl.password": 'pa\\ss"word',
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none"}), ["orders"])
    assert opts["kafka.security.protocol"] == "SASL_SSL"
    assert opts["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert opts["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="svc\\"repl" password="pa\\\\ss\\"word";')
    assert (opts["kafka.ssl.truststore.type"], opts["kafka.ssl.truststore.location"]) == \
        ("PEM", "/etc/ca.pem")
    assert opts["kafka.ssl.endpoint.identification.algorithm"] == ""
    # The password reaches the connector only inside the JAAS config.
    assert [k for k, v in opts.items() if "word" in v] == ["kafka.sasl.jaas.config"]


def test_plain_mechanism_uses_the_plain_login_module():
    opts = source_options(_cluster(**{"security.protocol": "SASL_PLAINTEXT",
                                      "sasl.mechanisms": "plain", "sasl.username": "u",
                                      "sasl.password": "p"}), ["orders"])
    assert opts["kafka.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required ")
