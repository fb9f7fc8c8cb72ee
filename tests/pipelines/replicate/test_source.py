"""pipelines.replicate.source: cluster properties go to librdkafka verbatim, exactness forced."""

from __future__ import annotations

import pytest

from pipelines.replicate.source import consumer_config

pytestmark = pytest.mark.unit


def test_properties_pass_verbatim_and_exactness_settings_win():
    props = {"bootstrap.servers": "p:9092", "security.protocol": "SASL_SSL",
             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": "s3cret",
             "fetch.max.bytes": "1000", "isolation.level": "read_uncommitted",
             "enable.auto.commit": "true"}
    conf = consumer_config(props)
    for key in ("bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.username",
                "sasl.password", "fetch.max.bytes"):
        assert conf[key] == props[key]
    assert conf["isolation.level"] == "read_committed"
    assert conf["enable.auto.commit"] is False and conf["enable.auto.offset.store"] is False
    assert conf["auto.offset.reset"] == "earliest"
