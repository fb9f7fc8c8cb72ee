"""bench.latency's ``--ol-flow KEY=VALUE``: a flow key of offset-ledger's ``P->B``, typed as YAML
and written into the flow's configuration, which the product then reads."""

from __future__ import annotations

import argparse

import pytest
import yaml

from bench import latency
from bench.common import flow_config
from ledger.config import load_config

pytestmark = pytest.mark.unit


def test_a_flow_key_is_parsed_as_yaml() -> None:
    assert latency._flow_key("transaction.boundary.interval.ms=0") == (
        "transaction.boundary.interval.ms", 0)
    assert latency._flow_key(" exactly.once.enabled = true") == ("exactly.once.enabled", True)
    for bad in ("no-equals", "=5"):
        with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
            latency._flow_key(bad)


def test_the_flow_key_reaches_the_flow(tmp_path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump({"clusters": {"P": {"bootstrap.servers": "127.0.0.1:1"},
                                                 "B": {"bootstrap.servers": "127.0.0.1:2"}}}))
    out = flow_config(str(base), ["lat-.*"], tmp_path / "ledger", tmp_path / "flow.yaml",
                      **dict([latency._flow_key("transaction.boundary.interval.ms=7")]))
    config = load_config(str(out))
    assert config.transaction_boundary_s(config.flow("P->B")) == 0.007
