"""The Databricks Asset Bundle (``databricks.yml`` + ``pipelines/*/job.yml``) is well formed.

No workspace and no Databricks CLI: the YAML files are read as the CLI would merge them, and every
job is parsed with the typed classes of the ``databricks-bundles`` package, which reject unknown
fields and wrong types. Invariants checked:

* the bundle is named ``offset-ledger`` and has the targets ``dev`` (default, development mode)
  and ``prod`` (production mode), and one wheel artifact built from the repository root;
* every job the project ships has its own ``pipelines/<job>/job.yml`` (a missing file fails),
  parses into a :class:`databricks.bundles.jobs.Job` and runs the expected kind of task;
* every ``${var.X}`` used anywhere is declared, and targets only override declared variables;
* every ``python_wheel_task`` entry point is a console script of ``pyproject.toml``, and every
  wheel library path, resolved relative to the file that declares it, points at ``dist/*.whl``.
"""

from __future__ import annotations

import copy
import os.path
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from databricks.bundles.core import Variable
from databricks.bundles.jobs import Job, Task

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "databricks.yml"
WHEELS = ROOT / "dist" / "*.whl"
_VAR = re.compile(r"\$\{var\.([A-Za-z0-9_-]+)")

# pipelines/<job>/job.yml -> what its job must look like.
EXPECTED_JOBS = ("replicate", "checkpoint", "audit", "validate")


def _load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) or {}


def _included_files() -> list[Path]:
    files: list[Path] = []
    for pattern in _load(BUNDLE).get("include", []):
        files.extend(sorted(ROOT.glob(pattern)))
    return files


def _jobs_by_file() -> dict[Path, dict[str, dict[str, Any]]]:
    """Each bundle file -> its ``resources.jobs`` (raw YAML mappings)."""
    return {path: (_load(path).get("resources") or {}).get("jobs") or {}
            for path in [BUNDLE, *_included_files()]}


def _merged_jobs() -> dict[str, tuple[Path, dict[str, Any]]]:
    merged: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path, jobs in _jobs_by_file().items():
        for key, spec in jobs.items():
            assert key not in merged, f"job {key!r} defined in {merged[key][0]} and {path}"
            merged[key] = (path, spec)
    return merged


def _job_file(name: str) -> Path:
    return ROOT / "pipelines" / name / "job.yml"


def _parsed_jobs(name: str) -> list[Job]:
    path = _job_file(name)
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing: the bundle has no {name} job"
    assert path in _included_files(), f"{path.relative_to(ROOT)} is not matched by include"
    jobs = _jobs_by_file()[path]
    assert jobs, f"{path.relative_to(ROOT)} defines no resources.jobs"
    return [Job.from_dict(copy.deepcopy(spec)) for spec in jobs.values()]


def _tasks(jobs: list[Job]) -> Iterator[Task]:
    for job in jobs:
        assert not isinstance(job.tasks, Variable)
        for task in job.tasks:
            assert isinstance(task, Task)
            yield task


def _console_scripts() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# --- databricks.yml --------------------------------------------------------------------------


def test_bundle_name_include_and_artifact() -> None:
    bundle = _load(BUNDLE)
    assert bundle["bundle"]["name"] == "offset-ledger"
    assert bundle["include"] == ["pipelines/*/job.yml"]
    artifact = bundle["artifacts"]["default"]
    assert artifact["type"] == "whl"
    assert artifact["path"] == "."
    assert artifact["build"] == "python -m pip wheel --no-deps -w dist ."


def test_targets_dev_and_prod() -> None:
    targets = _load(BUNDLE)["targets"]
    assert set(targets) == {"dev", "prod"}
    assert targets["dev"]["mode"] == "development" and targets["dev"]["default"] is True
    assert targets["prod"]["mode"] == "production"
    assert not targets["prod"].get("default")
    # production mode wants one explicit deployment location
    assert targets["prod"]["workspace"]["root_path"].startswith("/Workspace/")


def test_variables_have_defaults() -> None:
    variables = _load(BUNDLE)["variables"]
    assert {"catalog", "schema", "config_path", "flow"} <= set(variables)
    assert variables["catalog"]["default"] == "main"
    assert variables["schema"]["default"] == "offset_ledger"
    assert variables["flow"]["default"] == "P->B"
    assert variables["config_path"]["default"].startswith("/Workspace/")
    assert variables["config_path"]["default"].endswith("/offset-ledger.yaml")
    for name, spec in variables.items():
        assert spec.get("description"), f"variable {name} has no description"


def test_every_variable_used_is_declared() -> None:
    declared = set(_load(BUNDLE)["variables"])
    for path in [BUNDLE, *_included_files()]:
        used = set(_VAR.findall(path.read_text()))
        assert used <= declared, f"{path.relative_to(ROOT)} uses undeclared {used - declared}"
        for target, spec in (_load(path).get("targets") or {}).items():
            assert target in {"dev", "prod"}, f"{path.relative_to(ROOT)}: unknown target {target}"
            overridden = set((spec or {}).get("variables") or {})
            assert overridden <= declared, f"target {target} overrides {overridden - declared}"


def test_include_matches_only_job_files() -> None:
    for path in _included_files():
        assert path.name == "job.yml" and path.parent.parent == ROOT / "pipelines"
        assert set(_load(path)) <= {"resources", "targets", "variables"}, path


# --- jobs ------------------------------------------------------------------------------------


def test_every_included_job_parses() -> None:
    jobs = _merged_jobs()
    for key, (path, spec) in jobs.items():
        job = Job.from_dict(copy.deepcopy(spec))
        assert job.tasks, f"{path.relative_to(ROOT)}: job {key} has no tasks"


@pytest.mark.parametrize("name", EXPECTED_JOBS)
def test_job_file_exists_and_parses(name: str) -> None:
    for job in _parsed_jobs(name):
        assert job.name, f"pipelines/{name}/job.yml: job without a name"


def test_replicate_is_a_continuous_wheel_job() -> None:
    jobs = _parsed_jobs("replicate")
    entry_points = {t.python_wheel_task.entry_point for t in _tasks(jobs) if t.python_wheel_task}
    assert "offset-ledger-replicate" in entry_points
    assert any(job.continuous is not None for job in jobs), "replicate must run continuously"


def test_checkpoint_is_scheduled() -> None:
    jobs = _parsed_jobs("checkpoint")
    assert any(job.schedule is not None
               or (job.trigger is not None and job.trigger.periodic is not None)
               for job in jobs), "checkpoint needs a schedule or a periodic trigger"


def test_audit_runs_dbt() -> None:
    assert any(t.dbt_task is not None for t in _tasks(_parsed_jobs("audit")))


def test_validate_is_a_wheel_job() -> None:
    assert any(t.python_wheel_task is not None for t in _tasks(_parsed_jobs("validate")))


def test_wheel_entry_points_are_console_scripts() -> None:
    scripts = _console_scripts()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    for key, (path, spec) in _merged_jobs().items():
        for task in _tasks([Job.from_dict(copy.deepcopy(spec))]):
            wheel = task.python_wheel_task
            if wheel is None:
                continue
            where = f"{path.relative_to(ROOT)}: {key}.{task.task_key}"
            assert wheel.entry_point in scripts, f"{where}: {wheel.entry_point} not in scripts"
            if isinstance(wheel.package_name, str):
                assert _normalize(wheel.package_name) == _normalize(project), where


def test_wheel_libraries_point_at_the_built_wheel() -> None:
    """``whl`` paths are relative to the file declaring them: from pipelines/<job>/job.yml,
    ``../../dist/*.whl``."""
    for key, (path, spec) in _merged_jobs().items():
        job = Job.from_dict(copy.deepcopy(spec))
        wheels = [lib.whl for task in _tasks([job]) for lib in task.libraries if lib.whl]
        for env in job.environments:
            if env.spec is not None:
                wheels += [d for d in env.spec.dependencies
                           if isinstance(d, str) and d.endswith(".whl")]
        uses_wheel = any(t.python_wheel_task is not None for t in _tasks([job]))
        assert wheels or not uses_wheel, f"{path.relative_to(ROOT)}: {key} installs no wheel"
        for whl in wheels:
            if "://" in whl or whl.startswith(("/Workspace", "/Volumes", "dbfs:")):
                continue
            resolved = Path(os.path.normpath(path.parent / whl))  # the wheel may not exist yet
            assert resolved == WHEELS, (f"{path.relative_to(ROOT)}: {key} library {whl!r} "
                                        f"resolves to {resolved}, not {WHEELS}")

