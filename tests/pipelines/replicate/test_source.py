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


@pytest.mark.parametrize(("partitions", "wait_ms"), [
    (None, 5), (1, 5), (6, 5), (50, 5), (51, 6), (100, 10), (500, 50), (1000, 100), (5000, 100)])
def test_a_task_with_many_partitions_fetches_less_often(partitions, wait_ms):
    assert consumer_config({}, partitions)["fetch.wait.max.ms"] == wait_ms


@pytest.mark.parametrize(("partitions", "wait_ms"), [(6, 10), (100, 10), (101, 11), (500, 50)])
def test_an_exactly_once_task_fetches_at_most_every_10_ms(partitions, wait_ms):
    conf = consumer_config({}, partitions, transactional=True)
    assert conf["fetch.wait.max.ms"] == wait_ms


def test_the_clusters_own_fetch_wait_wins():
    assert consumer_config({"fetch.wait.max.ms": "20"}, 1000)["fetch.wait.max.ms"] == "20"
