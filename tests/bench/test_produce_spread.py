"""bench.produce_spread measures every record it sends, whatever the producer count."""

from __future__ import annotations

import pytest

from bench import produce_spread
from tests.pipelines.replicate.kafka_io import create

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("producers", [1, 3])
def test_every_record_is_delivered_and_timed(make_config, unique, producers):
    config = make_config()
    topic = unique("spread")
    create(config.cluster("B"), topic, 12)
    result = produce_spread.measure(config.cluster("B").bootstrap_servers, topic,
                                    12, rate=200, seconds=1, producers=producers)
    assert result["producers"] == producers
    assert result["delivered"] == 200
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]
