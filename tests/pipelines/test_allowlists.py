"""``offset-ledger topics|groups|reverse-checkpointed-topics``: srm-control-style edits.

Every test runs the real CLI (``pipelines.cli.main``) on a temporary copy of a commented YAML
file and checks the exact file text: edits keep comments and layout, refusals exit 2 with a
clear ``error:`` line and leave the file byte-for-byte unchanged, and secrets are never printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.config import load_config
from pipelines.cli import main

pytestmark = pytest.mark.unit

SECRET = "s3cret-value"

CONFIG = f"""\
# offset-ledger test configuration (this comment must survive every edit).
clusters:
  P:
    bootstrap.servers: 127.0.0.1:1   # primary
  B:
    bootstrap.servers: 127.0.0.1:2
    sasl.password: {SECRET}

flows:
  # forward flow, written as a bare boolean
  P->B: true  # enabled
  # reverse flow, with allowlists
  B->P:
    enabled: true
    topics: [".*"]
    groups:
      - orders-.*   # block style stays block style
    reverse.checkpointed.topics: [P.Payments]  # failback

# MM2 properties
replication.policy.separator: "."
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "offset-ledger.yaml"
    path.write_text(CONFIG)
    return path


def cli(path: Path, *argv: str) -> int:
    return main([*argv, "--config", str(path)])


def refused(path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> str:
    """Run a command that must be refused: exit 2, ``error: ...message...``, file unchanged."""
    before = path.read_bytes()
    assert cli(path, *argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: "), err
    assert message in err, err
    assert path.read_bytes() == before
    assert SECRET not in err
    return err


# --- topics ----------------------------------------------------------------------------------


def test_first_topics_add_replaces_the_implicit_default_and_keeps_comments(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(config_file, "topics", "--source", "P", "--target", "B", "--add", "Payments") == 0
    out, err = capsys.readouterr()
    assert "added 'Payments' to flows.P->B.topics" in out
    assert "was not set, so the default ['.*'] allowed all topics" in err
    assert "it now lists only ['Payments']" in err
    assert config_file.read_text() == CONFIG.replace(
        "  P->B: true  # enabled\n",
        "  P->B:\n    enabled: true  # enabled\n    topics: [Payments]\n")
    flow = load_config(str(config_file)).flow("P->B")
    assert flow.enabled and flow.topics == ("Payments",)
    assert flow.topic_allowed("Payments") and not flow.topic_allowed("Orders")


def test_topics_add_to_an_explicit_list_appends_in_its_style(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(config_file, "topics", "--source", "B", "--target", "P",
               "--add", "Pay.*", "--add", "Orders") == 0
    out, err = capsys.readouterr()
    assert "added 'Pay.*'" in out and "added 'Orders'" in out
    assert "still contains '.*'" in err
    assert config_file.read_text() == CONFIG.replace(
        'topics: [".*"]', 'topics: [".*", "Pay.*", "Orders"]')


def test_topics_add_existing_name_is_a_no_op(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(config_file, "topics", "--source", "B", "--target", "P", "--add", ".*") == 0
    assert "'.*' is already in flows.B->P.topics; nothing to add" in capsys.readouterr().out
    assert cli(config_file, "topics", "--source", "P", "--target", "B", "--add", ".*") == 0
    assert "already in flows.P->B.topics (by default)" in capsys.readouterr().out
    assert config_file.read_text() == CONFIG


def test_topics_remove(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(config_file, "topics", "--source", "B", "--target", "P", "--add", "Payments")
    capsys.readouterr()
    assert cli(config_file, "topics", "--source", "B", "--target", "P", "--remove", ".*") == 0
    assert "removed '.*' from flows.B->P.topics" in capsys.readouterr().out
    assert config_file.read_text() == CONFIG.replace('topics: [".*"]', 'topics: ["Payments"]')


def test_removing_the_last_topic_leaves_an_explicit_empty_list(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(config_file, "topics", "--source", "B", "--target", "P", "--remove", ".*") == 0
    assert "is now empty: the flow replicates no topics" in capsys.readouterr().err
    assert load_config(str(config_file)).flow("B->P").topics == ()
    assert 'topics: []' in config_file.read_text()


def test_topics_remove_missing_is_refused(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(config_file, capsys, ["topics", "--source", "B", "--target", "P", "--remove", "Nope"],
            "flows.B->P.topics: 'Nope' not present (it lists '.*'); nothing changed")
    refused(config_file, capsys, ["topics", "--source", "P", "--target", "B", "--remove", "Nope"],
            "'Nope' not present (it lists '.*' (the default))")


def test_topics_invalid_regex_is_refused(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(config_file, capsys, ["topics", "--source", "P", "--target", "B", "--add", "Pay(("],
            "flows.P->B.topics: invalid regex 'Pay(('")


def test_topics_list_marks_defaults(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(config_file, "topics", "--source", "P", "--target", "B", "--list") == 0
    assert capsys.readouterr().out == ".* (default)\n"
    assert cli(config_file, "topics", "--source", "B", "--target", "P", "--list") == 0
    assert capsys.readouterr().out == ".*\n"
    assert config_file.read_text() == CONFIG


def test_disabled_boolean_flow_stays_disabled(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config_file.write_text(CONFIG.replace("P->B: true  # enabled", "P->B: false")
                           .replace("    reverse.checkpointed.topics: [P.Payments]  # failback\n",
                                    ""))
    assert cli(config_file, "topics", "--source", "P", "--target", "B", "--add", "Payments") == 0
    assert "  P->B:\n    enabled: false\n    topics: [Payments]\n  # reverse flow" in (
        config_file.read_text())
    assert not load_config(str(config_file)).flows[0].enabled


# --- groups ----------------------------------------------------------------------------------


def test_groups_add_list_remove(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(config_file, "groups", "--source", "B", "--target", "P", "--add", "billing") == 0
    assert "added 'billing' to flows.B->P.groups" in capsys.readouterr().out
    block = "    groups:\n      - orders-.*   # block style stays block style\n"
    assert config_file.read_text() == CONFIG.replace(block, block + "      - billing\n")
    assert cli(config_file, "groups", "--source", "B", "--target", "P", "--list") == 0
    assert capsys.readouterr().out == "orders-.*\nbilling\n"
    assert cli(config_file, "groups", "--source", "B", "--target", "P", "--remove", "billing") == 0
    assert config_file.read_text() == CONFIG
    flow = load_config(str(config_file)).flow("B->P")
    assert flow.group_allowed("orders-eu") and not flow.group_allowed("billing")


def test_groups_first_add_on_boolean_flow(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(config_file, "groups", "--source", "P", "--target", "B", "--add", "G") == 0
    assert "default ['.*'] allowed all consumer groups" in capsys.readouterr().err
    assert load_config(str(config_file)).flow("P->B").groups == ("G",)


def test_groups_remove_missing_is_refused(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(config_file, capsys, ["groups", "--source", "B", "--target", "P", "--remove", "G"],
            "flows.B->P.groups: 'G' not present (it lists 'orders-.*'); nothing changed")


# --- reverse-checkpointed-topics ------------------------------------------------------------


def test_reverse_checkpointed_topics_add_list_remove(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # srm-control reverse-checkpointed-topics --source B --target P --add P.Orders
    argv = ["reverse-checkpointed-topics", "--source", "B", "--target", "P"]
    assert cli(config_file, *argv, "--add", "P.Orders") == 0
    assert ("added 'P.Orders' to flows.B->P.reverse.checkpointed.topics"
            in capsys.readouterr().out)
    assert config_file.read_text() == CONFIG.replace(
        "[P.Payments]  # failback", "[P.Payments, P.Orders]  # failback")
    assert load_config(str(config_file)).flow("B->P").reverse_checkpointed_topics == (
        "P.Payments", "P.Orders")
    assert cli(config_file, *argv, "--list") == 0
    assert capsys.readouterr().out == "P.Payments\nP.Orders\n"
    assert cli(config_file, *argv, "--remove", "P.Orders") == 0
    assert config_file.read_text() == CONFIG


def test_reverse_checkpointed_topics_on_a_boolean_flow(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The other direction: replicas of B topics on P, translated back to B.
    argv = ["reverse-checkpointed-topics", "--source", "P", "--target", "B"]
    assert cli(config_file, *argv, "--list") == 0
    assert capsys.readouterr().out == ""
    assert cli(config_file, *argv, "--add", "B.Payments") == 0
    assert config_file.read_text() == CONFIG.replace(
        "  P->B: true  # enabled\n",
        "  P->B:\n    enabled: true  # enabled\n    reverse.checkpointed.topics: [B.Payments]\n")


def test_reverse_checkpointed_topics_nested_key_is_edited_in_place(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nested = CONFIG.replace("reverse.checkpointed.topics: [P.Payments]",
                            "reverse:\n      checkpointed.topics: [P.Payments]")
    config_file.write_text(nested)
    assert cli(config_file, "reverse-checkpointed-topics", "--source", "B", "--target", "P",
               "--add", "P.Orders") == 0
    assert config_file.read_text() == nested.replace("[P.Payments]", "[P.Payments, P.Orders]")


def test_reverse_checkpointing_refused_under_prefixless_policy(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefixless = (CONFIG.replace("P->B: true", "P->B: false")
                  .replace("    reverse.checkpointed.topics: [P.Payments]  # failback\n", "")
                  + "replication.policy.class: IdentityReplicationPolicy\n")
    config_file.write_text(prefixless)
    refused(config_file, capsys, ["reverse-checkpointed-topics", "--source", "B", "--target", "P",
                                  "--add", "P.Payments"],
            "reverse checkpointing needs the prefix policy (DefaultReplicationPolicy); "
            "IdentityReplicationPolicy is prefixless")


@pytest.mark.parametrize(("disabled", "argv"), [
    ("P->B", ["--source", "B", "--target", "P", "--add", "P.Orders"]),   # the opposite flow
    ("B->P", ["--source", "P", "--target", "B", "--add", "B.Orders"]),   # the flow itself
])
def test_reverse_checkpointing_refused_unless_both_flows_enabled(
        config_file: Path, capsys: pytest.CaptureFixture[str], disabled: str,
        argv: list[str]) -> None:
    text = CONFIG.replace("P->B: true", "P->B: false") if disabled == "P->B" else (
        CONFIG.replace("    enabled: true\n", "    enabled: false\n")
        .replace("    reverse.checkpointed.topics: [P.Payments]  # failback\n", ""))
    config_file.write_text(text)
    refused(config_file, capsys, ["reverse-checkpointed-topics", *argv],
            f"reverse checkpointing needs both flows enabled; {disabled} is not")


def test_reverse_checkpointed_topic_needs_the_target_prefix(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(config_file, capsys, ["reverse-checkpointed-topics", "--source", "B", "--target", "P",
                                  "--add", "B.Payments"],
            "flows.B->P.reverse.checkpointed.topics: 'B.Payments' is not a replica of a P topic "
            "(expected a name like P.Payments)")
    refused(config_file, capsys, ["reverse-checkpointed-topics", "--source", "B", "--target", "P",
                                  "--add", "Payments"], "'Payments' is not a replica of a P topic")


def test_reverse_checkpointed_topics_remove_missing_is_refused(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(config_file, capsys, ["reverse-checkpointed-topics", "--source", "B", "--target", "P",
                                  "--remove", "P.Orders"],
            "'P.Orders' not present (it lists 'P.Payments'); nothing changed")


# --- flows and aliases -----------------------------------------------------------------------


@pytest.mark.parametrize("verb", ["topics", "groups", "reverse-checkpointed-topics"])
def test_unknown_alias_is_named(config_file: Path, capsys: pytest.CaptureFixture[str],
                                verb: str) -> None:
    refused(config_file, capsys, [verb, "--source", "X", "--target", "P", "--list"],
            "unknown cluster alias 'X' (configured: B, P)")
    refused(config_file, capsys, [verb, "--source", "B", "--target", "Q", "--add", "P.T"],
            "unknown cluster alias 'Q' (configured: B, P)")


def test_unconfigured_flow_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "one-way.yaml"
    path.write_text(CONFIG.replace("  P->B: true  # enabled\n", "")
                    .replace("    reverse.checkpointed.topics: [P.Payments]  # failback\n", ""))
    refused(path, capsys, ["topics", "--source", "P", "--target", "B", "--add", "Payments"],
            "flow P->B is not configured; add `P->B: true` under flows")


def test_same_source_and_target_is_refused(
        config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(config_file, capsys, ["topics", "--source", "P", "--target", "P", "--list"],
            "--source and --target are both 'P'")


def test_add_remove_list_are_exclusive(config_file: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        cli(config_file, "topics", "--source", "P", "--target", "B", "--add", "a", "--list")
    assert exc.value.code == 2
    assert config_file.read_text() == CONFIG


def test_secrets_are_never_printed(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["topics", "--source", "P", "--target", "B", "--add", "Payments"],
                 ["groups", "--source", "B", "--target", "P", "--list"],
                 ["reverse-checkpointed-topics", "--source", "B", "--target", "P", "--list"]):
        assert cli(config_file, *argv) == 0
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert SECRET in config_file.read_text()  # kept in the file, untouched


def test_no_temporary_file_is_left_behind(config_file: Path) -> None:
    assert cli(config_file, "topics", "--source", "P", "--target", "B", "--add", "Payments") == 0
    assert sorted(p.name for p in config_file.parent.iterdir()) == ["offset-ledger.yaml"]
