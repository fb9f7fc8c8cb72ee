"""docs/prometheus-alerts.yml is valid for Prometheus and its alerts fire when they should.

``promtool`` (Debian's ``prometheus`` package, installed by ``make setup``) checks the rules and
runs ``prometheus-alerts.test.yml``: synthetic series, expected alerts at given times.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.unit, pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "docs" / "prometheus-alerts.yml"
RULE_TESTS = Path(__file__).with_name("prometheus-alerts.test.yml")


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool not found: `make setup` installs Debian's prometheus package"
    return path


def test_promtool_accepts_the_rules():
    done = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_alerts_fire_as_their_unit_tests_expect():
    done = subprocess.run([promtool(), "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_the_issue_asks_for_is_there_and_tested():
    rules = {r["alert"]: r for g in yaml.safe_load(RULES.read_text())["groups"]
             for r in g["rules"] if "alert" in r}
    wanted = {"OffsetLedgerRPOHigh", "OffsetLedgerReplicationLagHigh",
              "OffsetLedgerTopicNotReplicated", "OffsetLedgerReplicationStalled",
              "OffsetLedgerGroupNotReadyToMove"}
    assert wanted <= set(rules)
    tested = {t["alertname"] for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for t in case["alert_rule_test"] if t.get("exp_alerts")}
    assert wanted <= tested
    assert all(r["labels"]["severity"] in ("warning", "critical") for r in rules.values())
