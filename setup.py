"""Package list for setuptools (metadata lives in pyproject.toml).

The dbt project stays at the repository's top level (``dbt/``) and ships in the wheel as the
data-only package ``offset_ledger_dbt`` (never ``dbt``: that name is dbt-core's), found at run
time with ``importlib.resources``. ``dbt/`` itself must not hold an ``__init__.py`` (from the
checkout's root it would shadow dbt-core), so the build writes one into the wheel: a regular
package is importable from a zip too (``spark-submit --py-files offset_ledger-*.whl``).
"""

import warnings
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

DBT_PACKAGE = "offset_ledger_dbt"

# The dbt project's and the templates' folders are data, not subpackages: setuptools would warn
# once per folder that it "recognizes" them as importable but they are not listed.
warnings.filterwarnings("ignore", message=r"Package '.*' is absent from the `packages`")


class BuildPy(build_py):
    """``build_py`` that also gives the dbt project package an ``__init__.py``."""

    def run(self) -> None:
        super().run()
        init = Path(self.build_lib) / DBT_PACKAGE / "__init__.py"
        init.parent.mkdir(parents=True, exist_ok=True)
        init.write_text('"""The offset-ledger dbt project (package data only)."""\n')


setup(
    cmdclass={"build_py": BuildPy},
    packages=[*find_packages(include=["ledger*", "pipelines*", "expectations*"]), DBT_PACKAGE],
    package_dir={DBT_PACKAGE: "dbt"},
    package_data={
        "": ["*.yml", "*.yaml", "*.properties", "*.xml"],
        "pipelines.audit": ["templates/*.j2"],
        DBT_PACKAGE: ["*.yml", "*.md", "macros/**/*.sql", "models/**/*.sql",
                      "models/**/*.yml", "tests/**/*.sql"],
    },
    exclude_package_data={DBT_PACKAGE: ["target/**", "logs/**", "dbt_packages/**"]},
)
