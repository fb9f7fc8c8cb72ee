"""Job folders are safe to run as `spark-submit pipelines/<job>/job.py` files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"


@pytest.mark.parametrize("job", sorted(p.parent.name for p in PIPELINES.glob("*/job.py")))
def test_no_module_of_a_job_folder_shadows_the_standard_library(job):
    # spark-submit puts the job file's folder first on sys.path: a `copy.py` there replaces
    # the standard library's `copy` for every import in the driver (dataclasses included).
    names = {p.stem for p in (PIPELINES / job).glob("*.py")}
    assert not names & set(sys.stdlib_module_names)
