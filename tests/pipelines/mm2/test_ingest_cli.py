"""``offset-ledger ingest mm2``: bad input is refused before Spark starts, writing nothing."""

from __future__ import annotations

import pytest
import yaml

from pipelines import cli

pytestmark = pytest.mark.unit


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "offset-ledger.yaml"
    path.write_text(yaml.safe_dump({
        "clusters": {a: {"bootstrap.servers": "127.0.0.1:1"} for a in ("P", "B")},
        "flows": {"P->B": True},
        "ledger": {"location": str(tmp_path / "ledger")}}))
    return path


@pytest.mark.parametrize("flow, message", [
    ("P->X", "unknown cluster alias 'X'"),
    ("B->P", "flow B->P is not configured"),
    ("P-", "is not of the form SOURCE->TARGET"),
])
def test_bad_flow_is_an_error_and_writes_nothing(config_path, tmp_path, capsys, flow, message):
    assert cli.main(["ingest", "mm2", "--flow", flow, "--once",
                     "--config", str(config_path)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "ledger").exists()


def test_continuous_ingest_reads_the_file_again_before_each_pass(config_path, monkeypatch,
                                                                 capsys):
    from pipelines import spark
    from pipelines.edge import preflight
    from pipelines.mm2 import ingest

    seen = []

    def one_pass(spark_session, config, flow, connect_offsets_topic):
        seen.append(config.flow(flow).groups)
        doc = yaml.safe_load(config_path.read_text())  # `groups --add` while the job runs
        doc["flows"] = {"P->B": {"groups": [f"added-{len(seen)}"]}}
        config_path.write_text(yaml.safe_dump(doc))
        return type("Done", (), {"summary": lambda self: "pass"})()

    monkeypatch.setattr(preflight, "check_reachable", lambda cluster, timeout=None: None)
    monkeypatch.setattr(spark, "get_spark", lambda name: None)
    monkeypatch.setattr(ingest, "ingest_once", one_pass)
    assert cli.main(["ingest", "mm2", "--flow", "P->B", "--interval", "0", "--max-passes", "3",
                     "--config", str(config_path)]) == 0
    assert [list(g) for g in seen[1:]] == [["added-1"], ["added-2"]]
