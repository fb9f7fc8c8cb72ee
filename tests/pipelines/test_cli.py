"""The command line: flows and aliases checked before any JVM, usage per verb, help epilogs."""

from __future__ import annotations

import pytest
import yaml

from pipelines import cli

pytestmark = pytest.mark.unit


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "offset-ledger.yaml"
    # Nothing listens there: every test below must finish before anything connects.
    path.write_text(yaml.safe_dump({
        "clusters": {"P": {"bootstrap.servers": "127.0.0.1:1"},
                     "B": {"bootstrap.servers": "127.0.0.1:2"}},
        "flows": {"P->B": True, "B->P": True},
        "ledger": {"location": str(tmp_path / "ledger")},
    }))
    return str(path)


@pytest.fixture(autouse=True)
def no_spark(monkeypatch):
    import pipelines.spark

    def refuse(*_a, **_k):
        raise AssertionError("a JVM was started before the arguments were checked")

    monkeypatch.setattr(pipelines.spark, "get_spark", refuse)


@pytest.mark.parametrize("verb", ["replicate", "checkpoint"])
def test_unquoted_flow_says_to_quote_it(verb, config_path, capsys):
    # `--flow P->B` unquoted in bash reaches us as `--flow P-` (and a file named B).
    assert cli.main([verb, "--flow", "P-", "--config", config_path]) == 2
    err = capsys.readouterr().err
    assert "flow 'P-' is not of the form SOURCE->TARGET" in err
    assert "--flow 'P->B'" in err and "--source P --target B" in err


@pytest.mark.parametrize("argv", [
    ["replicate", "--source", "P", "--target", "X", "--once"],
    ["checkpoint", "--flow", "X->B", "--once"],
    ["translate", "--group", "G", "--from", "P", "--to", "X"],
    ["failover", "--group", "G", "--from", "X", "--to", "B"],
    ["ingest", "mm2", "--source", "X", "--target", "B", "--once"],
])
def test_unknown_alias_is_refused_before_spark(argv, config_path, capsys):
    assert cli.main([*argv, "--config", config_path]) == 2
    assert "unknown cluster alias 'X'" in capsys.readouterr().err


def test_source_and_target_mean_the_flow():
    parser = cli.build_parser()
    args, _ = parser.parse_known_args(["replicate", "--source", "P", "--target", "B"])
    cli._resolve_flow(args, args._parser)
    assert args.flow == "P->B"


@pytest.mark.parametrize("argv,message", [
    (["replicate", "--once"], "the flow is required"),
    (["replicate", "--flow", "P->B", "--source", "P", "--target", "B"], "not both"),
    (["checkpoint", "--flow", "P->B", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_argument_errors_show_the_verbs_usage(argv, message, config_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*argv, "--config", config_path])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert f"usage: offset-ledger {argv[0]}" in err


@pytest.mark.parametrize("verb", sorted(cli.EXAMPLES))
def test_every_verb_help_ends_with_an_example_and_exit_codes(verb, capsys):
    extra = ["mm2"] if verb == "ingest" else []
    with pytest.raises(SystemExit):
        cli.main([verb, *extra, "--help"])
    out = capsys.readouterr().out
    assert f"example:\n  {cli.EXAMPLES[verb]}" in out
    assert out.rstrip().endswith("an offset cannot be translated (nothing is written)")
    assert "  2  a clear error" in out


def test_every_verb_has_an_example():
    assert set(cli.EXAMPLES) == set(cli.COMMANDS)


def test_a_verb_whose_extra_is_missing_names_it(config_path, capsys, monkeypatch):
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "great_expectations" else found(name, *a))
    assert cli.main(["validate", "--config", config_path]) == 2
    assert capsys.readouterr().err == (
        "error: offset-ledger validate needs great_expectations, which this installation "
        "lacks: pip install 'offset-ledger[validate]'\n")


def test_an_import_of_a_missing_extra_at_run_is_named(config_path, capsys, monkeypatch):
    from pipelines.replicate import job

    def run(args, config):
        raise ModuleNotFoundError("No module named 'pyspark'", name="pyspark")

    monkeypatch.setattr(job, "run", run)
    assert cli.main(["replicate", "--flow", "P->B", "--config", config_path]) == 2
    assert capsys.readouterr().err == (
        "error: offset-ledger replicate needs pyspark, which this installation lacks: "
        "pip install 'offset-ledger[local]'\n")


def test_the_retired_batch_mode_names_its_replacements(config_path, capsys):
    assert cli.main(["replicate", "--flow", "P->B", "--mode", "batch",
                     "--config", config_path]) == 2
    assert capsys.readouterr().err == (
        "error: replicate --mode batch is retired: run the streaming job (replicate without "
        "--once, the default: runs recorded every --commit-interval), or replicate --once from "
        "a scheduler for bounded passes\n")
