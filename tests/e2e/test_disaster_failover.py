"""Disaster failover: the primary is killed without warning; nothing replicated is lost."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ledger.config import config_from_mapping
from pipelines import cli
from pipelines.checkpoint.engine import Checkpointer
from pipelines.devtools.clusters import EmbeddedClusters, free_port
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.e2e, pytest.mark.spark]
@pytest.fixture
def own_clusters(tmp_path):
    """A separate pair, since this test kills its primary."""
    raw = {
        "clusters": {a: {"bootstrap.servers": f"127.0.0.1:{free_port()}"} for a in ("P", "B")},
        "flows": {"P->B": True, "B->P": True},
        "ledger": {"location": str(tmp_path / "ledger")},
        "embedded": {"data.dir": str(tmp_path / "clusters")},
    }
    path = tmp_path / "offset-ledger.yaml"
    path.write_text(json.dumps(raw))  # JSON is YAML
    config = config_from_mapping(raw, path=str(path))
    clusters = EmbeddedClusters(config, tied_to_parent=True)
    clusters.up()
    yield config, clusters
    clusters.down()


def test_disaster_failover_loses_nothing_replicated(spark, own_clusters, capsys):
    config, clusters = own_clusters
    primary, backup = config.cluster("P"), config.cluster("B")
    kafka_admin.create_topic(primary, "Payments", 2)
    values = [f"v{i}" for i in range(400)]
    produce(primary, "Payments", values, 2)
    read = consume(primary, "G", ["Payments"], limit=150)
    replicate_once(spark, config, "P->B")
    # The last checkpoint before the disaster records G's commits in the ledger...
    Checkpointer(spark, config).run("P->B", groups=["G"], sync=False)
    # ...then G reads a little more, and the primary dies without warning.
    read += consume(primary, "G", ["Payments"], limit=50)
    clusters.stop("P", hard=True)

    capsys.readouterr()
    # An unreachable source is never taken for a disaster on its own: refused, nothing written.
    move = ["failover", "--group", "G", "--from", "P", "--to", "B", "--format", "json",
            "--timeout", "5", "--config", config.path]
    assert cli.main(move) == 2
    refused = capsys.readouterr().err
    assert "cluster P is unreachable" in refused and "--disaster" in refused
    assert kafka_offsets.list_offsets(backup, "committed", group="G") == {}

    assert cli.main([*move, "--disaster"]) == 0
    captured = capsys.readouterr()
    assert "disaster mode (--disaster): P is not contacted" in captured.err
    result = json.loads(captured.out)
    assert result["subscribe"] == ["P.Payments", "Payments"]
    read += consume(backup, "G", result["subscribe"])

    counts = Counter(v for _, v in read)
    assert set(values) - set(counts) == set(), "a replicated record was lost"
    # Only what G read after the last checkpoint is read again.
    assert sum(c - 1 for c in counts.values()) == 50
