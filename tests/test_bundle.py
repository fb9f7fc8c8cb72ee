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
  wheel library path, resolved relative to the file that declares it, points at ``dist/*.whl``;
* one ledger per target: with the target's variables resolved, every wheel task passes the same
  ``--ledger-location`` and the audit's dbt task reads that catalog and schema;
* both flows of the pair are replicated and checkpointed from every target;
* each compute kind gets libraries the way it accepts them (classic: task ``libraries``;
  serverless: ``environment_key`` and an environment with dependencies); node types and runtimes
  come from variables; Kafka credentials only as ``{{secrets/...}}`` references; Python 3.11
  and 3.12 environments; the maintenance job runs ``offset-ledger ledger maintain`` on a schedule.
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
EXPECTED_JOBS = ("replicate", "checkpoint", "audit", "validate", "failover")


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


# Variables a deployer must give per target or with --var (they depend on the workspace).
REQUIRED_VARIABLES = {"node_type_id", "warehouse_id"}


def test_variables_have_defaults() -> None:
    variables = _load(BUNDLE)["variables"]
    assert {"catalog", "schema", "config_path", "forward_flow", "reverse_flow"} <= set(variables)
    assert variables["catalog"]["default"] == "main"
    assert variables["schema"]["default"] == "offset_ledger"
    assert variables["forward_flow"]["default"] == "P->B"
    assert variables["reverse_flow"]["default"] == "B->P"
    without_default = {name for name, spec in variables.items() if "default" not in spec}
    assert without_default == REQUIRED_VARIABLES
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


def test_checkpoint_is_scheduled_but_not_every_minute() -> None:
    """A cron schedule or periodic trigger of at least 5 minutes, or a continuous job whose tasks
    run the periodic mode (no ``--once``: a pass every emit.checkpoints.interval.seconds)."""
    jobs = _parsed_jobs("checkpoint")
    for job in jobs:
        if job.schedule is not None:
            minutes = str(job.schedule.quartz_cron_expression).split()[1]
            assert minutes not in ("*", "0/1", "*/1"), "checkpoint scheduled every minute"
        elif job.trigger is not None and job.trigger.periodic is not None:
            periodic = job.trigger.periodic
            assert str(periodic.unit).upper().endswith(("HOURS", "DAYS", "WEEKS")) or (
                int(periodic.interval) >= 5)
        else:
            assert job.continuous is not None, "checkpoint needs a schedule"
            for task in _tasks([job]):
                assert task.python_wheel_task is not None
                assert "--once" not in task.python_wheel_task.parameters, (
                    "a continuous checkpoint job runs the periodic mode, not --once")


def test_audit_runs_dbt() -> None:
    assert any(t.dbt_task is not None for t in _tasks(_parsed_jobs("audit")))


def test_spark_query_move_runs_on_demand() -> None:
    """Moving a streaming query is an operator's action: no schedule, no trigger."""
    (job,) = _parsed_jobs("failover")
    assert job.schedule is None and job.continuous is None and job.trigger is None
    (task,) = _tasks([job])
    params = list(task.python_wheel_task.parameters)
    assert task.python_wheel_task.entry_point == "offset-ledger"
    assert params[0] == "{{job.parameters.verb}}" and "--spark-checkpoint" in params
    assert {p.name for p in job.parameters} == {"verb", "checkpoint", "from", "to"}


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



# --- one ledger, both flows, compute kinds, secrets, maintenance -------------------------------


def _target_variables(target: str) -> dict[str, Any]:
    bundle = _load(BUNDLE)
    values = {name: spec.get("default", f"<required:{name}>")
              for name, spec in bundle["variables"].items()}
    values.update((bundle["targets"][target] or {}).get("variables") or {})
    return values


def _resolve(value: Any, variables: dict[str, Any]) -> Any:
    """``${var.X}`` substituted (repeatedly, as the CLI does) in strings, lists and mappings."""
    if isinstance(value, str):
        for _ in range(5):
            value = _VAR_FULL.sub(lambda m: str(variables[m.group(1)]), value)
        return value
    if isinstance(value, list):
        return [_resolve(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, variables) for k, v in value.items()}
    return value


_VAR_FULL = re.compile(r"\$\{var\.([A-Za-z0-9_-]+)\}")
TARGETS = ("dev", "prod")


def _resolved_jobs(target: str) -> dict[str, Job]:
    variables = _target_variables(target)
    return {key: Job.from_dict(_resolve(copy.deepcopy(spec), variables))
            for key, (_, spec) in _merged_jobs().items()}


def _option(parameters: list[str], name: str) -> str | None:
    return parameters[parameters.index(name) + 1] if name in parameters else None


def ledgers_of(jobs: dict[str, Job]) -> dict[str, set[str]]:
    """Job key -> the ledger locations its tasks name (wheel tasks and dbt tasks)."""
    found: dict[str, set[str]] = {}
    for key, job in jobs.items():
        for task in _tasks([job]):
            if task.python_wheel_task is not None:
                location = _option(list(task.python_wheel_task.parameters), "--ledger-location")
                assert location, f"{key}.{task.task_key} does not pass --ledger-location"
                found.setdefault(key, set()).add(location)
            if task.dbt_task is not None:
                commands = " ".join(task.dbt_task.commands)
                schema = re.search(r"ledger_schema:\s*([A-Za-z0-9_]+)", commands)
                assert schema, f"{key}.{task.task_key}: dbt does not set the ledger_schema var"
                found.setdefault(key, set()).add(f"{task.dbt_task.catalog}.{schema.group(1)}")
    return found


@pytest.mark.parametrize("target", TARGETS)
def test_every_job_of_a_target_uses_one_ledger(target: str) -> None:
    found = ledgers_of(_resolved_jobs(target))
    assert set(found) == set(_merged_jobs()), "every job must name its ledger"
    locations = set().union(*found.values())
    variables = _target_variables(target)
    assert locations == {f"{variables['catalog']}.{variables['schema']}"}, found


def test_two_ledgers_in_a_target_are_detected() -> None:
    jobs = _resolved_jobs("dev")
    key, job = next((k, j) for k, j in jobs.items() if k.startswith("replicate"))
    spec = job.as_dict()
    params = spec["tasks"][0]["python_wheel_task"]["parameters"]
    params[params.index("--ledger-location") + 1] = "main.somewhere_else"
    jobs[key] = Job.from_dict(spec)
    assert len(set().union(*ledgers_of(jobs).values())) == 2


@pytest.mark.parametrize("target", TARGETS)
def test_both_flows_of_the_pair_deploy_from_one_target(target: str) -> None:
    jobs = _resolved_jobs(target)
    for entry_point in ("offset-ledger-replicate", "offset-ledger-checkpoint"):
        flows = {_option(list(t.python_wheel_task.parameters), "--flow")
                 for t in _tasks(list(jobs.values()))
                 if t.python_wheel_task is not None
                 and t.python_wheel_task.entry_point == entry_point}
        assert flows == {"P->B", "B->P"}, (entry_point, flows)


def test_compute_kinds_get_libraries_the_way_they_accept_them() -> None:
    for key, job in _resolved_jobs("prod").items():
        clusters = {c.job_cluster_key for c in job.job_clusters}
        environments = {e.environment_key: e for e in job.environments}
        for task in _tasks([job]):
            where = f"{key}.{task.task_key}"
            classic = task.job_cluster_key or task.existing_cluster_id or task.new_cluster
            if classic:
                assert task.job_cluster_key in clusters, where
                assert task.environment_key is None, f"{where}: classic task with environment"
                if task.python_wheel_task is not None:
                    assert [lib.whl for lib in task.libraries if lib.whl], where
            else:  # serverless
                assert not task.libraries, f"{where}: serverless tasks take no libraries"
                assert task.environment_key in environments, f"{where}: no environment"
                spec = environments[task.environment_key].spec
                assert spec is not None and spec.dependencies, where
                assert spec.environment_version, f"{where}: no environment_version"


def test_node_types_and_runtimes_come_from_variables() -> None:
    for key, (_, spec) in _merged_jobs().items():
        job = Job.from_dict(copy.deepcopy(spec))
        for cluster in job.job_clusters:
            assert str(cluster.new_cluster.node_type_id) == "${var.node_type_id}", key
            assert str(cluster.new_cluster.spark_version) == "${var.spark_version}", key
    assert _load(BUNDLE)["variables"]["spark_version"]["default"].startswith("17.")


def test_python_311_and_312_environments() -> None:
    versions = {str(_target_variables(t)["serverless_environment_version"]) for t in TARGETS}
    assert "2" in versions, "no target runs the Python 3.11 serverless environment"
    assert versions & {"3", "4"}, "no target runs a Python 3.12 serverless environment"
    python = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert python == ">=3.11,<3.13"


_SECRET_REF = re.compile(r"^\{\{secrets/[^/{}]+/[^/{}]+\}\}$")
_SECRET_WORDS = ("password", "secret", "token", "jaas")


def test_credentials_only_as_secret_references() -> None:
    for target in TARGETS:
        for key, job in _resolved_jobs(target).items():
            for cluster in job.job_clusters:
                for name, value in cluster.new_cluster.spark_env_vars.items():
                    if any(w in name.lower() for w in (*_SECRET_WORDS, "username")):
                        assert _SECRET_REF.match(str(value)), f"{key}: {name} is not a secret ref"
    for path in [BUNDLE, *_included_files()]:
        for line in path.read_text().splitlines():
            key, _, value = line.split("#", 1)[0].partition(":")
            value = value.strip().strip('"')
            if any(w in key.lower() for w in _SECRET_WORDS) and key.strip() != "secret_scope":
                assert value.startswith("{{secrets/") or not value, (
                    f"{path.relative_to(ROOT)}: {line.strip()!r} writes a credential")


def test_audit_dbt_task_runs_on_a_warehouse() -> None:
    jobs = _parsed_jobs("audit")
    dbt_tasks = [t for t in _tasks(jobs) if t.dbt_task is not None]
    assert dbt_tasks
    for task in dbt_tasks:
        assert str(task.dbt_task.warehouse_id) == "${var.warehouse_id}"
        project = str(task.dbt_task.project_directory)
        resolved = Path(os.path.normpath(_job_file("audit").parent / project))
        assert resolved == ROOT / "dbt" and (resolved / "dbt_project.yml").is_file()
        assert task.environment_key, "dbt-databricks comes from the task's environment"


def test_maintenance_job_is_scheduled() -> None:
    jobs = _resolved_jobs("prod")
    maintain = [(job, t) for job in jobs.values() for t in _tasks([job])
                if t.python_wheel_task is not None
                and t.python_wheel_task.entry_point == "offset-ledger"
                and list(t.python_wheel_task.parameters)[:2] == ["ledger", "maintain"]]
    assert len(maintain) == 1
    job, _ = maintain[0]
    assert job.schedule is not None and str(job.schedule.pause_status).endswith("UNPAUSED")
