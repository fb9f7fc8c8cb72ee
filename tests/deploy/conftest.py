"""Fixtures shared by the deployment tests: the wheel, built once per session from the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip wheel --no-deps`` of the checkout (what the bundle's artifact builds)."""
    out = tmp_path_factory.mktemp("dist")
    build = tmp_path_factory.mktemp("build")
    # pip builds in the source tree (build/, *.egg-info): from a copy, so that two test
    # processes never build in one folder and the checkout stays untouched.
    source = build / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "jars", ".state", "target", "logs", "build", "*.egg-info",
        "__pycache__", ".pytest_cache", "spark-warehouse", "metastore_db"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                    str(source)], check=True, cwd=build, capture_output=True, text=True)
    wheels = list(out.glob("offset_ledger-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]
