"""status verdicts and exit codes from gathered numbers (no JVM, no broker)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import yaml

from pipelines import cli
from pipelines.status.readiness import (
    CommitCoverage,
    CommitLag,
    FlowStatus,
    GroupStatus,
    PartitionLag,
    exit_code,
)
from pipelines.status.render import Report, as_dict, to_json, to_table

pytestmark = pytest.mark.unit


def lag(end: int, to: int, left: bool | None = True) -> PartitionLag:
    return PartitionLag("T", "P.T", 0, end, to, True, committed_left=left)


def group(coverage: list[CommitCoverage], source_lag: int = 0,
          caught_up: bool = True) -> GroupStatus:
    g = GroupStatus("G", "P->B", "P", "B", coverage=coverage, flow_caught_up=caught_up)
    g.commits["P"] = [CommitLag("P", c.topic, c.partition, c.committed, c.committed + source_lag)
                      for c in coverage]
    return g


def test_a_tail_of_markers_and_aborted_records_is_caught_up():
    assert lag(10, 10).caught_up
    assert not lag(312, 302, left=True).caught_up
    assert lag(312, 302, left=False).caught_up            # nothing committed in [302, 312)
    assert not lag(312, 302, left=None).caught_up         # open transaction: cannot tell
    flow = FlowStatus("P->B", "P", "B", [lag(312, 302, left=False), lag(20, 5)])
    assert not flow.caught_up and flow.lag == 15


def test_group_verdicts():
    waiting = group([CommitCoverage("forward", "T", 0, 1500, 296),
                     CommitCoverage("forward", "T", 1, 9, 9)])
    assert waiting.verdict == "wait: 1,204 records not yet replicated" and not waiting.ready
    ready = group([CommitCoverage("forward", "T", 0, 1500, 296, committed_left=False)])
    assert ready.verdict == "ready to fail over P -> B" and ready.ready
    back = group([CommitCoverage("reverse", "B.T", 0, 40, 40)])
    assert back.verdict == "ready to fail back P -> B"
    # With operations recorded, the newest one decides: G came from B, so P -> B goes back.
    mixed = group([CommitCoverage("forward", "T", 0, 5, 5),
                   CommitCoverage("reverse", "B.T", 0, 4, 4)])
    assert mixed.kind == "failover"
    mixed.last_move = ("B", "P")
    assert mixed.kind == "failback"
    mixed.last_move = ("P", "B")
    assert mixed.kind == "failover"
    open_txn = group([CommitCoverage("forward", "T", 0, 50, 40, committed_left=None)])
    assert open_txn.verdict.endswith("(1 partition(s) with an open transaction)")
    assert group([]).verdict == "nothing to move: no committed offsets on P"
    down = GroupStatus("G", "P->B", "P", "B", errors={"P": "cluster P is unreachable"})
    assert down.verdict.startswith("cannot tell: cluster P is unreachable")


def test_cutoff_needs_the_group_at_the_end_and_replication_caught_up():
    assert group([CommitCoverage("forward", "T", 0, 10, 10)]).cutoff_ready
    behind = group([CommitCoverage("forward", "T", 0, 10, 10)], source_lag=7)
    assert behind.ready and not behind.cutoff_ready
    assert "group has 7 records to read on P" in behind.cutoff_verdict
    assert not group([CommitCoverage("forward", "T", 0, 10, 10)], caught_up=False).cutoff_ready


def test_exit_code():
    up, down = FlowStatus("P->B", "P", "B", [lag(5, 5)]), FlowStatus("P->B", "P", "B", [lag(9, 5)])
    ready = group([CommitCoverage("forward", "T", 0, 5, 5)])
    waiting = group([CommitCoverage("forward", "T", 0, 9, 5)])
    nothing = GroupStatus("G", "B->P", "B", "P")
    assert exit_code([up], []) == 0
    assert exit_code([down], []) == 3
    assert exit_code([FlowStatus("P->B", "P", "B", error="unreachable")], []) == 3
    assert exit_code([up], [ready, nothing]) == 0   # the other direction has nothing to move
    assert exit_code([up], [waiting]) == 3
    assert exit_code([up], [nothing]) == 3          # a group with nothing to move anywhere
    assert exit_code([down], [ready], groups_only=True) == 0
    assert exit_code([down], [waiting], groups_only=True) == 3


def test_table_and_json_carry_the_same_facts():
    at = dt.datetime(2026, 1, 1, 12, 0, 10, tzinfo=dt.UTC)
    flow = FlowStatus("P->B", "P", "B", [lag(312, 302, left=False)],
                      last_run=at - dt.timedelta(seconds=10))
    report = Report(at, [flow], [group([CommitCoverage("forward", "T", 0, 312, 302,
                                                 committed_left=False)])], 0)
    document = to_json(report)
    data = json.loads(document)
    assert data == json.loads(to_json(report, one_line=True)) == as_dict(report)
    assert len(to_json(report, one_line=True).splitlines()) == 1
    partition = json.dumps(as_dict(report)["flows"][0]["partitions"][0])
    assert f"\n        {partition}\n" in document  # indented; a row on a line of its own
    assert data["flows"][0]["partitions"][0]["only_markers_left"] is True
    assert data["flows"][0]["last_run_age_seconds"] == 10.0
    assert data["groups"][0]["verdict"] == "ready to fail over P -> B"
    text = to_table(report)
    assert "flow P->B: caught up; last run 2026-01-01 12:00:00 UTC (10.0s ago)" in text
    assert "yes (only markers/aborted left)" in text
    assert "group G, flow P->B: ready to fail over P -> B" in text


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "offset-ledger.yaml"
    path.write_text(yaml.safe_dump({
        "clusters": {"P": {"bootstrap.servers": "127.0.0.1:1"},
                     "B": {"bootstrap.servers": "127.0.0.1:2"}},
        "flows": {"P->B": True}, "ledger": {"location": str(tmp_path / "ledger")}}))
    return str(path)


@pytest.fixture
def no_spark(monkeypatch):
    import pipelines.spark

    def refuse(*_a, **_k):
        raise AssertionError("a JVM was started before the arguments were checked")

    monkeypatch.setattr(pipelines.spark, "get_spark", refuse)


@pytest.mark.parametrize("argv,message", [
    (["--flow", "P->X"], "unknown cluster alias 'X'"),
    (["--source", "X", "--target", "B"], "unknown cluster alias 'X'"),
    (["--flow", "B->P"], "flow B->P is not configured"),
    (["--flow", "P-"], "quote it in a shell"),
])
def test_bad_input_exits_2_before_spark(argv, message, config_path, no_spark, capsys):
    assert cli.main(["status", *argv, "--config", config_path]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["--source", "P"], "give both --source S and --target T"),
    (["--watch", "0"], "--watch needs a number of seconds > 0"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_argument_errors_show_the_status_usage(argv, message, config_path, no_spark, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["status", *argv, "--config", config_path])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "usage: offset-ledger status" in err


def test_watch_repeats_until_interrupted_and_exits_with_the_last_round(
        config_path, monkeypatch, capsys, this_thread_time):
    import pipelines.spark
    import pipelines.status.job as status_job
    from ledger.engine import LedgerEngine

    monkeypatch.setattr(pipelines.spark, "get_spark", lambda *_a, **_k: None)
    monkeypatch.setattr(LedgerEngine, "require", lambda *_a, **_k: None)
    codes = iter([3, 0])
    monkeypatch.setattr(status_job, "gather_report", lambda *_a, **_k: Report(
        dt.datetime.now(dt.UTC), exit_code=next(codes)))
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:
            raise KeyboardInterrupt

    this_thread_time("sleep", sleep)
    assert cli.main(["status", "--watch", "2", "--format", "json", "--config",
                     config_path]) == 0
    rounds = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["exit_code"] for r in rounds] == [3, 0] and sleeps == [2.0, 2.0]
