"""Mutual TLS clusters (client certificates, principal = the certificate's CN) with ACLs.

One pair for the module. A flow is replicated and a KIP-848 group moved through the CLI with
only docs/security.md's ACLs; a client certificate the brokers do not trust is named as such.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from pipelines.devtools.cluster_security import make_ca, sign
from pipelines.edge import kafka_admin
from tests.secured.conftest import (
    create_topic,
    grant_app,
    grant_replicator,
    kip848_consume,
    produce,
    run,
    start_pair,
    unique,
)

pytestmark = [pytest.mark.secured, pytest.mark.e2e, pytest.mark.spark]
@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    yield from start_pair(tmp_path_factory, "mtls")


def test_replicate_status_and_failover_over_mtls(spark, pair, tmp_path, capsys):
    topic, group = unique("Payments"), unique("G")
    create_topic(pair, "P", topic, 2)
    grant_replicator(pair, "P", "B", [topic])
    grant_app(pair, [topic], [group])
    config = pair.config(tmp_path, flows={"P->B": {"topics": [topic]}, "B->P": False},
                         **{"sync.group.offsets.enabled": False})
    app_p, app_b = pair.user("P", "app"), pair.user("B", "app")
    values = [f"v{i}" for i in range(300)]
    produce(app_p, topic, values, 2)
    read = kip848_consume(app_p, group, [topic], limit=120)
    for argv in (["replicate", "--flow", "P->B", "--once"],
                 ["status", "--flow", "P->B", "--format", "json"]):
        code, out, err = run(capsys, *argv, "--config", config.path)
        assert code == 0, err
    code, out, err = run(capsys, "failover", "--group", group, "--from", "P", "--to", "B",
                         "--format", "json", "--config", config.path)
    assert code == 0, err
    over = json.loads(out)
    read += kip848_consume(app_b, group, over["subscribe"])
    counts = Counter(v for _, v in read)
    assert set(counts) == set(values) and max(counts.values()) == 1
    assert kafka_admin.describe_group(config.cluster("B"), group).members == 0


def test_a_client_certificate_the_brokers_do_not_trust_is_named(pair, tmp_path, capsys):
    make_ca(tmp_path, "rogue", "a CA the brokers do not trust")
    sign(tmp_path, "rogue", "replicator")
    config = pair.config(tmp_path, overrides={"P": {
        "ssl.certificate.location": str(tmp_path / "replicator.pem"),
        "ssl.key.location": str(tmp_path / "replicator.key")}})
    code, out, err = run(capsys, "replicate", "--flow", "P->B", "--once", "--config",
                         config.path)
    assert code == 2, out + err
    assert "cluster P: TLS handshake with" in err
    assert f"the broker refused the client certificate ({tmp_path / 'replicator.pem'}" in err
    assert "unreachable" not in err and "Traceback" not in err
    assert not (tmp_path / "ledger").exists()


def test_clusters_cli_knows_the_secured_pair(pair, tmp_path, capsys):
    """``clusters status`` finds the security the data dir was set up with; the users'
    client settings are private files that load as a configuration."""
    import yaml

    from ledger.config import config_from_mapping

    config = pair.config(tmp_path)
    code, out, _ = run(capsys, "clusters", "status", "--config", config.path)
    assert code == 0 and out.count("running (pid") == 2
    folder = pair.clusters.material.write_client_files(
        {a: pair.clusters.bootstrap(a) for a in ("P", "B")})
    for user in ("admin", "replicator", "app"):
        path = folder / f"{user}.yaml"
        assert path.stat().st_mode & 0o077 == 0
        clusters = yaml.safe_load(path.read_text())["clusters"]
        assert clusters["P"]["ssl.certificate.location"].endswith(f"{user}.pem")
        config_from_mapping({"clusters": clusters, "flows": {"P->B": True}})
