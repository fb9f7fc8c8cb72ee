"""``offset-ledger audit`` end to end on the reference ledger: JSON, the 120-column table, the
HTML report (summary cards, inline SVG per partition) rendered in headless Chromium, errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile

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


@pytest.fixture(scope="module")
def evidence_marts(spark, config_path):
    """Every operation audited from its recorded evidence: one dbt build for the tests that
    compare the evidence with time travel and with ``audit --operation``'s quick answer."""
    from ledger.config import load_config
    from pipelines.audit.audit import run_audit

    return run_audit(spark, load_config(config_path), evidence=True)


def test_audit_json_for_an_operation(config_path, capsys):
    """From the operation's recorded evidence by default; ``--marts``: the dbt marts."""
    assert job.main(["--config", config_path, "--operation", "op-failback",
                     "--format", "json"]) == 0
    quick = json.loads(capsys.readouterr().out)
    assert set(quick) == {"operation", "resume_audit", "failback_duplicates_avoided",
                          "checkpoints"}
    assert quick["operation"]["operation_id"] == "op-failback"
    assert quick["operation"]["audit_source"] == "recorded_evidence"
    assert quick["operation"]["duplicates_avoided"] == 6
    assert {r["operation_id"] for r in quick["resume_audit"]} == {"op-failback"}
    assert {c["group_id"] for c in quick["checkpoints"]} == {"G"}

    assert job.main(["--config", config_path, "--operation", "op-failback", "--marts",
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
    assert "1. failover of G: P &rarr; B" in page and "failback of G" not in page
    assert "2 of 2 resume points match re-translation" in page
    assert "G: 8" in page  # the resume point B:P.Payments[0] = 8, labelled on its chart
    assert "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "").replace("http://www.w3.org/1999/xlink", "")


def test_audit_table_fits_120_columns_and_wide_shows_the_marts(config_path, capsys):
    assert job.main(["--config", config_path]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Everything matched: 5 of 5 resume points in 2 operation(s)")
    assert max(len(line) for line in out.splitlines()) <= 120
    assert "reverse checkpointing saved 6 re-read record(s)" in out
    assert job.main(["--config", config_path, "--wide"]) == 0
    assert "== resume_audit (5 rows)" in capsys.readouterr().out


@pytest.mark.e2e
def test_html_report_renders_in_headless_chromium(config_path, tmp_path, capsys):
    """The page loads in a real browser without errors and shows every operation's verdict."""
    output, shot = tmp_path / "report.html", tmp_path / "report.png"
    assert job.main(["--config", config_path, "--format", "html", "--output", str(output)]) == 0
    browser = shutil.which("chromium")
    assert browser, "chromium is missing: `make setup` installs Debian's chromium package"
    flags = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--enable-logging=stderr", "--v=0", "--window-size=1280,2000"]
    dom = subprocess.run([*flags, "--dump-dom", output.as_uri()], capture_output=True,
                         text=True, timeout=120, check=True)
    assert "Uncaught" not in dom.stderr and "CONSOLE" not in dom.stderr, dom.stderr[-2000:]
    for verdict in ("2 of 2 resume points match re-translation",
                    "3 of 3 resume points match re-translation"):
        assert verdict in dom.stdout
    assert "Everything matched: 5 of 5 resume points" in dom.stdout
    subprocess.run([*flags, f"--screenshot={shot}", output.as_uri()], capture_output=True,
                   timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_an_unchanged_audit_reuses_its_marts(spark, config_path, monkeypatch):
    """The same audit of the same ledger versions runs dbt once per session; marts that are
    gone are built again (the key's other parts: tests/pipelines/audit/test_build_key.py)."""
    from ledger.config import load_config
    from pipelines.audit import dbt_runner
    from pipelines.audit.audit import run_audit

    config = load_config(config_path)
    first = run_audit(spark, config)
    real, runs = dbt_runner.invoke_dbt, []

    def counted(*args, **kwargs):
        runs.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(dbt_runner, "invoke_dbt", counted)
    assert run_audit(spark, config) == first and runs == []
    spark.sql(f"DROP TABLE {dbt_runner.dbt_schema()}.resume_audit")
    assert run_audit(spark, config) == first and len(runs) == 1


def test_audit_missing_ledger_is_an_error(tmp_path, capsys):
    path = str(tmp_path / "c.yaml")
    config_for(str(tmp_path / "nowhere"), path=path)
    assert job.main(["--config", path]) == 2
    assert "ledger tables missing" in capsys.readouterr().err


def test_evidence_audit_equals_time_travel(spark, config_path, tmp_path, monkeypatch,
                                           request):
    """Every operation audited from its recorded evidence answers as time travel does; dbt's
    temporary folders go (the last build's marts stay while they are registered)."""
    from ledger.config import load_config
    from pipelines.audit.audit import run_audit

    config = load_config(config_path)
    # The plain audit first: it reuses the marts of the tests above (one dbt run fewer).
    travelled = run_audit(spark, config)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    from_evidence = request.getfixturevalue("evidence_marts")
    assert {r["audit_source"] for r in travelled["resume_audit"]} == {"time_travel"}
    assert {r["audit_source"] for r in from_evidence["resume_audit"]} == {"recorded_evidence"}
    keys = ("operation_id", "resume_point_id", "resume_offset", "checkpoint_found",
            "checkpoint_target_offset", "retranslated_offset", "matches_retranslation")
    assert [tuple(r[k] for k in keys) for r in from_evidence["resume_audit"]] == \
        [tuple(r[k] for k in keys) for r in travelled["resume_audit"]]
    assert all(r["matches_retranslation"] for r in from_evidence["resume_audit"]
               if r["source_offset"] is not None)
    assert from_evidence["failback_duplicates_avoided"] == travelled[
        "failback_duplicates_avoided"]
    # By age alone (the Databricks dbt task): every reference operation is years old.
    by_age = run_audit(spark, config, variables={"time_travel_days": 30})
    assert {r["audit_source"] for r in by_age["resume_audit"]} == {"recorded_evidence"}
    (left,) = tmp_path.glob("offset-ledger-dbt-*")  # the last build's marts
    assert [p.name for p in left.iterdir()] == ["tables"]


DUPLICATES = ("operation_id", "topic", "partition_id", "records_read_on_replica",
              "duplicates_without_reverse_checkpointing",
              "duplicates_with_reverse_checkpointing", "duplicates_avoided")


def rows_of(rows: list[dict], keys: tuple[str, ...]) -> list[tuple]:
    return sorted(tuple(r.get(k) for k in keys) for r in rows)


def test_one_operation_from_its_evidence_gives_the_marts_verdict(spark, config_path,
                                                                 evidence_marts, monkeypatch,
                                                                 capsys):
    """``audit --operation X`` without dbt: the rows and verdict of the marts over the same
    evidence, for a failover (forward) and a failback (reverse, with duplicates avoided)."""
    from ledger.config import load_config
    from ledger.engine import LedgerEngine
    from pipelines import spark as spark_module
    from pipelines.audit.audit import load_operations, select_rows
    from pipelines.audit.operation import audit_operation
    from pipelines.audit.summary import summarize

    config = load_config(config_path)
    keys = ("operation_id", "resume_point_id", "audit_source", "resume_offset", "source_offset",
            "checkpoint_found", "checkpoint_source_offset", "checkpoint_target_offset",
            "retranslated_offset", "matches_retranslation")
    verdicts = {}
    for operation in ("op-failover", "op-failback"):
        found = audit_operation(LedgerEngine(config.ledger_location), operation)
        assert found is not None
        op, quick, checkpoints, _ = found
        marts = select_rows(evidence_marts, operation, {op.group_id})
        assert marts["resume_audit"], operation

        assert rows_of(quick["resume_audit"], keys) == rows_of(marts["resume_audit"], keys)
        assert rows_of(quick["failback_duplicates_avoided"], DUPLICATES) == rows_of(
            marts["failback_duplicates_avoided"], DUPLICATES)
        ops, cps = load_operations(spark, config, operation=operation)
        [by_marts] = summarize(ops, marts, cps)
        [by_evidence] = summarize([op], quick, checkpoints)
        assert (by_evidence.verdict, by_evidence.saved, by_evidence.untouched) == (
            by_marts.verdict, by_marts.saved, by_marts.untouched)
        verdicts[operation] = (marts, by_marts)

    def no_jvm(*args, **kwargs):
        raise AssertionError("audit --operation started Spark")

    monkeypatch.setattr(spark_module, "get_spark", no_jvm)
    capsys.readouterr()
    assert job.main(["--config", config_path, "--operation", "op-failback"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Everything matched: ") and "in 1 operation(s)" in out.splitlines()[0]
    assert "reverse checkpointing saved 6 re-read record(s)" in out
    for operation, (marts, by_marts) in verdicts.items():  # --format json, no JVM either
        assert job.main(["--config", config_path, "--operation", operation,
                         "--format", "json"]) == 0
        quick = json.loads(capsys.readouterr().out)
        assert rows_of(quick["resume_audit"], keys) == rows_of(marts["resume_audit"], keys)
        assert rows_of(quick["failback_duplicates_avoided"], DUPLICATES) == rows_of(
            marts["failback_duplicates_avoided"], DUPLICATES)
        assert (quick["operation"]["verdict"], quick["operation"]["all_match"],
                quick["operation"]["duplicates_avoided"]) == (
            by_marts.verdict, by_marts.all_match, by_marts.saved)
