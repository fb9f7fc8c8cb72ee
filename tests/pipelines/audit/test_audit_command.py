"""``offset-ledger audit`` end to end on the reference ledger: JSON, tables and the HTML
report (inline SVG per partition with failover/failback and resume points), and errors."""

from __future__ import annotations

import json

import pytest

from pipelines.audit import job
from tests.dbt.ledger_rows import config_for, reference_ledger

pytestmark = [pytest.mark.spark, pytest.mark.dbt]


@pytest.fixture(scope="module")
def config_path(spark, tmp_path_factory):
    info = reference_ledger(spark, str(tmp_path_factory.getbasetemp()))
    path = str(tmp_path_factory.mktemp("audit") / "offset-ledger.yaml")
    config_for(info["location"], path=path)
    return path


def test_audit_json_for_an_operation(config_path, capsys):
    assert job.main(["--config", config_path, "--operation", "op-failback",
                     "--format", "json"]) == 0
    marts = json.loads(capsys.readouterr().out)
    assert set(marts) == {"forward_translations", "reverse_translations", "resume_audit",
                          "failback_duplicates_avoided"}
    assert {r["operation_id"] for r in marts["resume_audit"]} == {"op-failback"}
    assert {r["group_id"] for r in marts["forward_translations"]} == {"G"}
    assert sum(r["duplicates_avoided"] for r in marts["failback_duplicates_avoided"]) == 6


def test_audit_html_report_as_of_a_version(config_path, tmp_path, capsys):
    output = tmp_path / "report.html"
    assert job.main(["--config", config_path, "--format", "html", "--output", str(output),
                     "--as-of-version", "1"]) == 0
    page = output.read_text()
    assert page.count("<svg") >= 2  # P->B p0, p1 (and B->P p0 when written by then)
    assert "failover op-failover" in page and "failback op-failback" not in page
    assert "resume point G B:P.Payments = 8" in page
    assert "<h2>resume_audit (2 rows)</h2>" in page


def test_audit_missing_ledger_is_an_error(tmp_path, capsys):
    path = str(tmp_path / "c.yaml")
    config_for(str(tmp_path / "nowhere"), path=path)
    assert job.main(["--config", path]) == 2
    assert "ledger tables missing" in capsys.readouterr().err
