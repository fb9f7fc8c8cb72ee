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
