"""A streaming job survives a restart of the target broker and of the source broker: librdkafka
reconnects and retries, nothing is lost and every recorded run stays exact. After the target's
restart librdkafka's static member of the runs channel's group can be fenced by its own rejoin:
the driver then sees no other job in the group and takes its lease back (a real second driver
still wins: ``test_streaming``'s lease test).

The brokers are this test's own pair: restarting the session's shared clusters would disturb
the other tests.
"""

from __future__ import annotations

import pytest
import yaml

from ledger.config import config_from_mapping
from pipelines.devtools.clusters import EmbeddedClusters, free_port
from tests.pipelines.replicate.kafka_io import create, create_replication_tables, produce, sample
from tests.pipelines.replicate.test_streaming import Job, check_exact, covered

pytestmark = [pytest.mark.kafka, pytest.mark.e2e]


@pytest.fixture
def own_config(tmp_path):
    raw = {
        "clusters": {alias: {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
                     for alias in ("P", "B")},
        "flows": {"P->B": {"topics": ["restart-.*"]}},
        "ledger": {"location": str(tmp_path / "ledger")},
        "embedded": {"data.dir": str(tmp_path / "clusters")},
    }
    path = tmp_path / "offset-ledger.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    config = config_from_mapping(raw, path=str(path))
    clusters = EmbeddedClusters(config, tied_to_parent=True)
    clusters.up()
    try:
        create_replication_tables(config.ledger_location)
        yield config, clusters
    finally:
        clusters.down()


def test_streaming_survives_a_restart_of_the_target_and_of_the_source_broker(own_config):
    config, clusters = own_config
    topic = "restart-t"
    p = config.cluster("P")
    create(p, topic, 2)
    produce(p, topic, sample(2, 20, "a"))
    job = Job(config)
    try:
        job.wait_for(lambda: covered(config, topic, {0: 20, 1: 20}), "first runs")
        clusters.stop("B")  # the target: the copy's producer and the runs channel wait
        produce(p, topic, sample(2, 20, "b"))
        clusters.up()
        job.wait_for(lambda: covered(config, topic, {0: 40, 1: 40}), "runs after B restarted",
                     timeout=180)
        clusters.stop("P")  # the source: the copy's consumer waits
        clusters.up()
        produce(p, topic, sample(2, 20, "c"))
        job.wait_for(lambda: covered(config, topic, {0: 60, 1: 60}), "runs after P restarted",
                     timeout=180)
    finally:
        job.finish()
    check_exact(config, topic, 2)
    assert job.result.errors == {}
