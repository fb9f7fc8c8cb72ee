"""The dashboard, the rules and docs/metrics.md name only metrics the code defines, and
docs/metrics.md documents every one the code defines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipelines.metrics import Metrics

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
NAME = re.compile(r"\boffset_ledger_[a-z_]+[a-z]")
SUFFIXES = ("_total", "_sum", "_count", "_bucket", "_created")


def defined() -> set[str]:
    """Family names (``_total`` included for counters) of every metric the code defines."""
    names = set()
    for family in Metrics("replicate", process_collectors=False).registry.collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


def base(name: str) -> str:
    for suffix in ("_sum", "_count", "_bucket"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def test_the_dashboard_and_the_rules_use_defined_metrics_only():
    known = defined()
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    rules = (DOCS / "prometheus-alerts.yml").read_text()
    used = {base(n) for text in [*exprs, rules] for n in NAME.findall(text)}
    assert used and used <= known, sorted(used - known)


def test_the_dashboard_is_a_grafana_dashboard_with_a_prometheus_datasource_variable():
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    assert dashboard["uid"] == "offset-ledger" and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert {"source", "target", "group"} <= set(variables)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"]


def test_docs_metrics_md_documents_every_metric():
    text = (DOCS / "metrics.md").read_text()
    documented = {base(n) for n in NAME.findall(text)}
    known = defined()
    assert known <= documented, sorted(known - documented)
    assert documented <= known, sorted(documented - known)
    for mm2 in ("record-count", "record-rate", "record-age-ms", "byte-rate",
                "replication-latency-ms", "checkpoint-latency-ms", "KIP-1280"):
        assert mm2 in text
