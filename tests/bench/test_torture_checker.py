"""The torture test's checker fires: each anomaly kind on a small made-up history, and nothing
on a correct one (no brokers: the judging functions get the records directly)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.torture import checker
from bench.torture.faults import Exit
from bench.torture.history import generate
from bench.torture.ops import Call
from bench.torture.readers import Run
from bench.torture.workload import Read

pytestmark = pytest.mark.unit

SRC = {0: {0: "t:P:1", 1: "t:P:2", 2: "t:P:3", 4: "t:P:5"}}  # offset 3: an aborted record
EVERY = {0: {10: "t:P:1", 11: "t:P:2", 12: "t:P:3", 13: "t:P:5"}}
COMMITTED = {"t:P:1", "t:P:2", "t:P:3", "t:P:5"}


def runs_report(runs: list[Run], every=EVERY, good=EVERY) -> checker.Report:
    rep = checker.Report()
    checker._check_runs(rep, "P->B", "t", runs, SRC, every, good, COMMITTED)
    return rep


def test_exact_runs_across_an_aborted_record_pass():
    runs = [Run("P->B", "t", 0, 0, 10, 3), Run("P->B", "t", 0, 4, 13, 1)]
    assert runs_report(runs).anomalies["bad_run"] == 0


@pytest.mark.parametrize(("runs", "what"), [
    ([Run("P->B", "t", 0, 0, 11, 3)], "upstream 0 is t:P:1, downstream 11 is t:P:2"),
    ([Run("P->B", "t", 0, 0, 10, 3), Run("P->B", "t", 0, 2, 12, 1),
      Run("P->B", "t", 0, 4, 13, 1)], "overlaps"),
    ([Run("P->B", "t", 0, 0, 10, 1), Run("P->B", "t", 0, 4, 13, 1)], "hole 1..3"),
    ([Run("P->B", "t", 0, 0, 10, 3)], "never covered"),
])
def test_wrong_runs_are_bad_runs(runs, what):
    rep = runs_report(runs)
    assert rep.anomalies["bad_run"] >= 1 and what in " ".join(rep.details), rep.details


def test_a_run_onto_an_aborted_copy_is_a_bad_run():
    good = {0: {o: i for o, i in EVERY[0].items() if o != 13}}
    rep = runs_report([Run("P->B", "t", 0, 0, 10, 3), Run("P->B", "t", 0, 4, 13, 1)],
                      good=good)
    assert rep.anomalies["bad_run"] == 1 and "not committed" in rep.details[0]


def reads(*ids: str, cluster: str = "P", topic: str = "t") -> list[Read]:
    return [Read(cluster, topic, 0, i, rid) for i, rid in enumerate(ids)]


def test_a_group_judged():
    rep = checker.Report()
    expected = {"t:P:1", "t:P:2", "t:P:3"}
    ok = reads("t:P:1", "t:P:2", "t:P:3")
    checker._check_group(rep, "g", ok, [ok], expected, set(), set())
    assert not any(rep.anomalies.values())

    rep = checker.Report()
    session = reads("t:P:1", "t:P:3", "t:P:2", "t:P:9", "t:P:3")
    checker._check_group(rep, "g", session[:2] + session[4:], [session], expected | {"t:P:4"},
                         {"t:P:9"}, set())
    assert rep.anomalies["lost"] == 2  # t:P:2 read but never committed past, t:P:4 never read
    assert rep.anomalies["duplicate"] == 1  # t:P:3 processed twice
    assert rep.anomalies["aborted_read"] == 1  # t:P:9
    assert rep.anomalies["out_of_order"] == 1  # t:P:2 after t:P:3
    # The same twice-processed record explained by a duplicate copy in a replica: allowed.
    rep = checker.Report()
    checker._check_group(rep, "g", ok + ok[2:], [ok + ok[2:]], expected, set(), {"t:P:3"})
    assert rep.anomalies["duplicate"] == 0


def test_job_exits_and_outputs_judged(tmp_path: Path):
    log = tmp_path / "job.log"
    log.write_text("started\nTraceback (most recent call last):\n  boom\n")
    exits = [Exit("replicate P->B", -9, "SIGKILL", str(log), 0),  # our kill -9: fine
             Exit("replicate P->B", 2, None, str(log), 0),  # died by itself, no error: line
             Exit("replicate B->P", 1, "SIGTERM", str(log), 0),  # unclean stop
             Exit("checkpoint", -15, "SIGTERM", str(log), 0)]  # signal's default: fine
    calls = [Call("failover", ["ol", "failover", "--config", "c"], 3, "", "waiting\n", 1.0),
             Call("status", ["ol", "status", "--config", "c"], 3, "not ready", "", 1.0)]
    ev = checker.Evidence([], {}, tmp_path, "alo", 2.0, 10.0, {}, {}, [], exits, calls)
    rep = checker.Report()
    checker._check_outputs(rep, ev)
    assert rep.anomalies["job_died"] == 1
    assert rep.anomalies["unclean_stop"] == 1
    assert rep.anomalies["silent_exit"] == 3  # the two job exits and the failover, not status
    assert rep.anomalies["traceback"] == 1


def test_a_seed_replays_its_history():
    assert generate(42, "eos") == generate(42, "eos")
    assert generate(42, "eos").describe() != generate(43, "eos").describe()


def test_the_groups_with_a_recorded_commit_are_read_from_the_ledger(tmp_path: Path):
    """History 19006 alo: P died before any commit of h19006-g0 was recorded; the disaster
    move's refusal is then the documented answer, which the checker tells by its own read."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from bench.torture.readers import groups_with_recorded_commits

    write_deltalake(str(tmp_path / "group_offsets"), pa.table({
        "cluster": ["P", "B", "P"], "group_id": ["g1", "g0", "g1"]}))
    assert groups_with_recorded_commits(tmp_path, "P") == {"g1"}


class _MovingLeader:
    """A consumer whose partition answers NOT_LEADER twice (a broker restarting), then 7."""

    def __init__(self, code):
        self.code, self.calls = code, 0

    def get_watermark_offsets(self, tp, timeout):
        from confluent_kafka import KafkaError, KafkaException

        self.calls += 1
        if self.calls <= 2:
            raise KafkaException(KafkaError(self.code))
        return 7, 20


def test_a_group_session_waits_for_a_moving_leader_and_gives_up_on_other_errors():
    """Seed 41006 alo: a session's first log-start lookup met NOT_LEADER_FOR_PARTITION after a
    broker fault and ended, so the group never committed and the move found no group."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    from bench.torture import workload

    moving = _MovingLeader(KafkaError.NOT_LEADER_FOR_PARTITION)
    assert workload._log_start(moving, TopicPartition("t", 0)) == 7
    assert moving.calls == 3
    denied = _MovingLeader(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        workload._log_start(denied, TopicPartition("t", 0))
    assert denied.calls == 1
