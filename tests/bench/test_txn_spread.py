"""bench.txn_spread commits every record it times, with either client, in transactions."""

from __future__ import annotations

import pytest

from bench import txn_spread
from tests.pipelines.replicate.kafka_io import create, read_all

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("client", txn_spread.CLIENTS)
def test_every_record_is_committed_and_timed(make_config, unique, client):
    cluster = make_config().cluster("B")
    topic = unique("txn-spread")
    create(cluster, topic, 12)
    result = txn_spread.measure(cluster.bootstrap_servers, topic, 12, rate=200, seconds=1,
                                interval_ms=50, client=client)
    assert result["client"] == client
    assert result["committed"] == 200
    assert 10 <= result["transactions"] <= 40  # a second in 50 ms transactions
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]
    values = [rec.value for part in read_all(cluster, topic, 12).values()
              for rec in part.values()]
    # read_committed sees the prefill, one warm-up record a partition and every timed record.
    assert values.count(b"v" * 100) == 200
    assert values.count(b"w") == 12
    assert values.count(b"p" * txn_spread.PREFILL_BYTES) == 12 * txn_spread.PREFILL_RECORDS


def test_an_unknown_client_is_refused():
    with pytest.raises(ValueError, match="unknown client 'java'"):
        txn_spread.measure("127.0.0.1:1", "t", 1, rate=1, seconds=1, interval_ms=50,
                           client="java")
