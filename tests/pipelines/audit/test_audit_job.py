"""The audit job's wiring: the dbt_task YAML beside the code, CLI arguments (no JVM)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from pipelines.audit import job

pytestmark = pytest.mark.unit

JOB_YML = Path(job.__file__).with_name("job.yml")
DBT_DIR = Path(job.__file__).resolve().parents[2] / "dbt"


def test_job_yaml_is_a_dbt_task_on_the_project():
    doc = yaml.safe_load(JOB_YML.read_text())
    assert list(doc) == ["resources"] and list(doc["resources"]) == ["jobs"]
    (spec,) = doc["resources"]["jobs"].values()
    (task,) = spec["tasks"]
    dbt = task["dbt_task"]
    # Bundle paths are relative to the file declaring them: pipelines/audit/job.yml -> dbt/.
    project = (JOB_YML.parent / dbt["project_directory"]).resolve()
    assert project == DBT_DIR.resolve() and (DBT_DIR / "dbt_project.yml").exists()
    # Marts in their own schema; the sources read the ledger's schema (ledger_schema var).
    assert dbt["catalog"] == "${var.catalog}" and dbt["schema"] == "${var.schema}_audit"
    # Operations older than the bundle's time_travel_days are audited from their evidence.
    assert any(c.startswith("dbt build") and "{ledger_schema: ${var.schema}, "
               "time_travel_days: ${var.time_travel_days}}" in c for c in dbt["commands"])


def test_profiles_have_a_local_session_target_and_a_databricks_target():
    profiles = yaml.safe_load((DBT_DIR / "profiles.yml").read_text())["offset_ledger"]
    local, databricks = profiles["outputs"]["local"], profiles["outputs"]["databricks"]
    assert (local["type"], local["method"], local["host"]) == ("spark", "session", "NA")
    assert databricks["type"] == "databricks"
    assert all("env_var(" in databricks[k] for k in ("host", "http_path", "token"))


def test_arguments():
    parser = argparse.ArgumentParser()
    job.add_arguments(parser)
    args = parser.parse_args(["--group", "G", "--as-of-version", "3", "--format", "html"])
    assert (args.group, args.as_of_version, args.format) == ("G", 3, "html")
    with pytest.raises(SystemExit):
        parser.parse_args(["--as-of-version", "3", "--as-of-timestamp", "2026-01-01"])
