"""The README and docs/ stay true against the code: every configuration key, environment
variable, CLI flag and ledger column is documented, and every local link resolves."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# Per-alias secrets of the Databricks bundle, documented as OFFSET_LEDGER_<ALIAS>_SASL_*.
# ledger/config.py resolves the YAML's ${env:NAME} values (names the user chooses).
ENVIRONMENT_READERS = ("ledger/settings.py", "ledger/config.py", "pipelines/devtools/settings.py")
ALIAS_SECRET = re.compile(r"OFFSET_LEDGER_[A-Z0-9]+_SASL_(USERNAME|PASSWORD)")


def _text(name: str) -> str:
    return (DOCS / name).read_text()


def test_readme_stays_short_and_leads_with_the_runbooks():
    readme = (ROOT / "README.md").read_text()
    assert len(readme) < 15_000, f"README.md is {len(readme)} characters: move reference to docs/"
    for heading in ("make demo", "make test", "## Runbooks", "Failover on disaster",
                    "Controlled failback", "Move a Spark streaming query",
                    "What to do on each error"):
        assert heading in readme


def test_the_readme_quotes_each_pinned_line_word_for_word():
    # tests/e2e/test_runbook_lines.py compares each with what the verb prints.
    from tests.docs_quotes import QUOTES

    readme = " ".join((ROOT / "README.md").read_text().split())
    missing = [q for q in QUOTES.values() if f"`{q}`" not in readme]
    assert not missing, f"README.md no longer quotes {missing}: update tests/docs_quotes.py"


@pytest.mark.parametrize("page", ["README.md", *sorted(
    str(p.relative_to(ROOT)) for p in DOCS.glob("*.md"))])
def test_local_links_resolve(page):
    path = ROOT / page
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        if not (path.parent / target.split("#", 1)[0]).exists():
            missing.append(target)
    assert not missing, f"{page} links to missing files: {missing}"


def test_every_configuration_key_documented():
    from ledger import config

    page = _text("configuration.md")
    keys = [*config._TOP_LEVEL, *config.REMOVED_KEYS]
    missing = [k for k in keys if f"`{k}`" not in page]
    missing += [f"flows.*.{k}" for k in config._FLOW_KEYS if f"`{k}`" not in page]
    assert not missing, f"docs/configuration.md does not document {missing}"


def test_every_environment_variable_documented():
    from ledger import settings
    from pipelines.devtools import settings as dev_settings

    page = _text("configuration.md")
    listed = {*settings.VARIABLES, *settings.ALIAS_SECRETS, *settings.RUNTIME_VARIABLES,
              *dev_settings.VARIABLES}
    missing = sorted(n for n in listed if f"`{n}`" not in page)
    assert not missing, f"docs/configuration.md does not document {missing}"
    # Every name used anywhere is one ledger/settings.py lists (so a new one gets documented),
    # and only ledger/settings.py reads the environment.
    names, readers = set(), []
    for folder in ("pipelines", "ledger", "expectations", "bench", "dbt", "tests"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in (".py", ".yml", ".yaml", ".sql") or "target" in path.parts:
                continue
            text = path.read_text()
            names |= set(re.findall(r"OFFSET_LEDGER_[A-Z0-9_]*[A-Z0-9]", text))
            if folder != "tests" and path.suffix == ".py" and \
                    path.relative_to(ROOT).as_posix() not in ENVIRONMENT_READERS and \
                    re.search(r"environ\.get\(|getenv\(|environ\[[^]]+\](?!\s*=)", text):
                readers.append(str(path.relative_to(ROOT)))
    unlisted = sorted(n for n in names - listed if not ALIAS_SECRET.fullmatch(n))
    assert not unlisted, (f"add {unlisted} to ledger/settings.py or pipelines/devtools/settings.py "
                          f"(and document them)")
    assert not readers, f"read the environment through ledger/settings.py: {readers}"


def _verbs(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(prefix), parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _verbs(sub, (*prefix, name))


def test_every_verb_and_flag_documented():
    from pipelines.cli import build_parser

    page = _text("cli.md")
    missing = []
    for verb, parser in _verbs(build_parser()):
        section = page.split(f"### `offset-ledger {verb}`", 1)
        if len(section) < 2:
            missing.append(verb)
            continue
        body = section[1].split("\n### ", 1)[0]
        missing += [f"{verb} {option}" for action in parser._actions
                    if action.help != argparse.SUPPRESS  # hidden on purpose (tests' knobs)
                    for option in action.option_strings if option not in body]
    assert not missing, f"docs/cli.md lacks {missing} (regenerate its --help section)"


def test_every_ledger_table_and_column_documented():
    from ledger.schemas import SCHEMAS

    page = _text("ledger-tables.md")
    design = _text("DESIGN.md")
    for name, schema in SCHEMAS.items():
        assert f"`{name}`" in design, f"docs/DESIGN.md does not name the table {name}"
        section = page.split(f"### `{name}`", 1)
        assert len(section) == 2, f"docs/ledger-tables.md has no section for {name}"
        body = section[1].split("\n### ", 1)[0]
        for field in schema.fields:
            row = f"| `{field.name}` | {field.dataType.simpleString()}"
            assert row in body, f"docs/ledger-tables.md: {name}.{field.name} missing or wrong"


def regenerate_cli_help() -> None:
    """Rewrite docs/cli.md's "Every verb's --help" section from the parser (100 columns)."""
    import os

    os.environ["COLUMNS"] = "100"
    from pipelines.cli import build_parser

    marker = "## Every verb's `--help`"
    out = [f"{marker}\n\nGenerated from the parser by `python tests/test_docs.py`; a test "
           "checks that every flag\nof every verb appears on this page.\n"]
    for verb, parser in _verbs(build_parser()):
        out.append(f"\n### `offset-ledger {verb}`\n\n```\n{parser.format_help().rstrip()}\n```\n")
    page = DOCS / "cli.md"
    head = page.read_text().split(marker)[0].rstrip("\n")
    page.write_text(f"{head}\n\n{''.join(out)}")


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(ROOT))
    regenerate_cli_help()
