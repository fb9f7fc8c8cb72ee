"""Pure logic of ``pipelines.spark``: the supported Spark range and the local jars folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines import spark as spark_module
from pipelines.spark import SparkSetupError, check_version, jars_dir, spark_jars

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("version", ["4.0.0", "4.0.1", "4.0.2-SNAPSHOT"])
def test_supported_versions_pass(version: str) -> None:
    check_version("Spark", version)


@pytest.mark.parametrize("version", ["3.5.2", "4.1.0", "5.0.0"])
def test_versions_outside_the_range_are_a_clear_error(version: str) -> None:
    with pytest.raises(SparkSetupError) as caught:
        check_version("Spark", version)
    assert caught.value.exit_code == 2
    assert str(caught.value).startswith(f"Spark {version} is not supported: "
                                        "offset-ledger needs >=4.0,<4.1")


def test_jars_dir_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(spark_module.JARS_ENV_VAR, str(tmp_path))
    assert jars_dir("spark") == tmp_path / "spark"
    (tmp_path / "spark").mkdir()
    (tmp_path / "spark" / "delta-spark_2.13-4.0.1.jar").write_bytes(b"")
    with pytest.raises(SparkSetupError,
                       match=r"missing in .*: delta-storage .*OFFSET_LEDGER_JARS_DIR"):
        spark_jars()
    (tmp_path / "spark" / "delta-storage-4.0.1.jar").write_bytes(b"")
    (tmp_path / "spark" / "other.jar").write_bytes(b"")
    assert [Path(j).name for j in spark_jars()] == [
        "delta-spark_2.13-4.0.1.jar", "delta-storage-4.0.1.jar", "other.jar"]


def test_jars_dir_defaults_to_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(spark_module.JARS_ENV_VAR, raising=False)
    assert jars_dir("kafka") == spark_module.CHECKOUT_ROOT / "jars" / "kafka"
