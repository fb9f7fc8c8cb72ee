"""The validate job's wiring: Databricks YAML beside the code, CLI arguments (no JVM)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from pipelines.validate import job

pytestmark = pytest.mark.unit

JOB_YML = Path(job.__file__).with_name("job.yml")


def test_job_yaml_runs_the_wheel_entry_point_with_the_config_and_ledger_variables():
    doc = yaml.safe_load(JOB_YML.read_text())
    assert list(doc) == ["resources"] and list(doc["resources"]) == ["jobs"]
    (spec,) = doc["resources"]["jobs"].values()
    (task,) = spec["tasks"]
    wheel = task["python_wheel_task"]
    assert wheel["package_name"] == "offset_ledger"
    assert wheel["entry_point"] == "offset-ledger-validate"
    # The target's one ledger, as every job of the bundle names it.
    assert wheel["parameters"] == ["--config", "${var.config_path}",
                                   "--ledger-location", "${var.catalog}.${var.schema}"]


def test_arguments():
    parser = argparse.ArgumentParser()
    job.add_arguments(parser)
    args = parser.parse_args(["--table", "checkpoints", "--table", "operations",
                              "--format", "json"])
    assert args.table == ["checkpoints", "operations"] and args.format == "json"
    with pytest.raises(SystemExit):
        parser.parse_args(["--table", "nope"])
