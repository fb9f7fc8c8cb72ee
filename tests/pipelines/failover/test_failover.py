"""failover/failback refusals and dry runs on real clusters: clear errors, nothing written."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from ledger.schemas import OPERATIONS, RESUME_POINTS
from ledger.tables import Ledger
from pipelines import cli
from pipelines.checkpoint.engine import Checkpointer
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]
@pytest.fixture
def replicated(spark, make_config, unique):
    """A topic on P with 30 records, replicated to B, and a group that read 12 of them."""
    config = make_config(flows={"P->B": {"topics": ["fo-.*"]}, "B->P": {"topics": ["fo-.*"]}})
    topic, group = unique("fo-topic"), unique("fo-group")
    kafka_admin.create_topic(config.cluster("P"), topic, 2)
    produce(config.cluster("P"), topic, [f"v{i}" for i in range(30)], 2)
    consume(config.cluster("P"), group, [topic], limit=12)
    replicate_once(spark, config, "P->B")
    return config, topic, group


def ledger_counts(spark, config):
    ledger = Ledger(spark, config.ledger_location)
    return {name: ledger.read(name).count() for name in (OPERATIONS, RESUME_POINTS)}


def test_active_group_is_refused_and_nothing_written(spark, replicated, capsys):
    config, topic, group = replicated
    before = ledger_counts(spark, config)
    consumer = Consumer(config.cluster("P").client_config(**{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    consumer.subscribe([topic])
    try:
        # Poll until the group has joined (a member appears), then try to fail it over.
        for _ in range(60):
            consumer.poll(0.5)
            if kafka_admin.describe_group(config.cluster("P"), group).members:
                break
        assert cli.main(["failover", "--group", group, "--from", "P", "--to", "B",
                         "--config", config.path]) == 2
    finally:
        consumer.close()
    assert f"group {group} has 1 active member(s) on cluster P" in capsys.readouterr().err
    assert ledger_counts(spark, config) == before
    assert kafka_offsets.list_offsets(config.cluster("B"), "committed", group=group) == {}


def test_unknown_alias_is_refused(make_config, unique, capsys):
    config, group = make_config(), unique("fo-group")
    assert cli.main(["failover", "--group", group, "--from", "P", "--to", "X",
                     "--config", config.path]) == 2
    assert "unknown cluster alias 'X'" in capsys.readouterr().err


def test_dry_run_prints_and_writes_nothing(spark, replicated, capsys, monkeypatch):
    config, topic, group = replicated
    before = ledger_counts(spark, config)

    def not_read(*args, **kwargs):  # what decides a pass's recorded rows: not a dry run's
        raise AssertionError("the latest recorded commits were read")

    monkeypatch.setattr(Checkpointer, "latest_commits", not_read)
    capsys.readouterr()
    assert cli.main(["failover", "--group", group, "--from", "P", "--to", "B", "--dry-run",
                     "--format", "json", "--config", config.path]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dry_run"] is True
    # A fresh replica copies partition p's records 0.. at 0..: translation is the identity.
    committed = kafka_offsets.list_offsets(config.cluster("P"), "committed", group=group)
    assert sum(committed.values()) == 12
    expected = {(f"P.{topic}", p, o) for (_, p), o in committed.items()}
    assert {(t["target_topic"], t["partition"], t["offset"]) for t in out["translations"]} == \
        expected
    assert ledger_counts(spark, config) == before
    assert kafka_offsets.list_offsets(config.cluster("B"), "committed", group=group) == {}
    # translate prints the same numbers and writes nothing either.
    assert cli.main(["translate", "--group", group, "--from", "P", "--to", "B",
                     "--format", "json", "--config", config.path]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["target_topic"], r["partition"], r["offset"]) for r in rows} == expected
    assert ledger_counts(spark, config) == before


def test_untranslatable_offset_is_never_guessed(spark, make_config, unique, capsys):
    config = make_config(flows={"P->B": {"topics": ["ut-.*"]}, "B->P": {"topics": ["ut-.*"]}})
    topic, group = unique("ut-topic"), unique("ut-group")
    primary = config.cluster("P")
    kafka_admin.create_topic(primary, topic, 1)
    produce(primary, topic, [f"v{i}" for i in range(10)], 1)
    # Records 0..4 are deleted before replication, so the runs start at upstream offset 5.
    client = AdminClient(primary.client_config())
    for future in client.delete_records([TopicPartition(topic, 0, 5)]).values():
        future.result(30)
    replicate_once(spark, config, "P->B")
    kafka_admin.alter_group_offsets(primary, group, {(topic, 0): 2})
    before = ledger_counts(spark, config)
    assert cli.main(["failover", "--group", group, "--from", "P", "--to", "B",
                     "--config", config.path]) == 4
    err = capsys.readouterr().err
    assert "1 partition(s) of group" in err and "cannot be translated" in err
    assert "before the first replicated record (5)" in err
    assert ledger_counts(spark, config) == before
    assert kafka_offsets.list_offsets(config.cluster("B"), "committed", group=group) == {}


def test_replication_lag_times_out_clearly(spark, replicated, capsys):
    config, topic, group = replicated
    produce(config.cluster("P"), topic, [f"late{i}" for i in range(5)], 2)
    # G reads the late records, which are not replicated: its commits are beyond the runs.
    consume(config.cluster("P"), group, [topic])
    assert cli.main(["failover", "--group", group, "--from", "P", "--to", "B", "--timeout", "1",
                     "--config", config.path]) == 3
    err = capsys.readouterr().err
    assert "replication has not caught up within 1s" in err
    assert f"P->B {topic}[" in err and "group committed" in err


def test_a_move_translates_over_the_runs_its_coverage_was_found_with(spark, replicated,
                                                                      monkeypatch):
    """The coverage check loads the runs the plan translates with, once, and the plan uses the
    commits the move read with the group inactive; a ``replicate`` commit between the check and
    the plan changes nothing: the failover translates and records the ``offset_syncs`` version
    at which the group's commits were found covered."""
    from ledger.schemas import OFFSET_SYNCS
    from ledger.store import OffsetSyncStore

    config, topic, group = replicated
    ledger = Ledger(spark, config.ledger_location)
    covered_at = ledger.version(OFFSET_SYNCS)
    loads: list[str] = []
    for name in ("load", "load_direct"):
        real = getattr(OffsetSyncStore, name).__func__

        def counted(cls, engine, flow, *args, _real=real, **kwargs):
            loads.append(flow)
            return _real(cls, engine, flow, *args, **kwargs)

        monkeypatch.setattr(OffsetSyncStore, name, classmethod(counted))
    observed: list[str] = []
    real_observe = Checkpointer.observe

    def counted_observe(self, cluster_alias, *args, **kwargs):
        observed.append(cluster_alias)
        return real_observe(self, cluster_alias, *args, **kwargs)

    monkeypatch.setattr(Checkpointer, "observe", counted_observe)
    planned = Checkpointer.plan

    def plan_after_a_commit(self, *args, **kwargs):
        produce(config.cluster("P"), topic, [f"late{i}" for i in range(6)], 2)
        replicate_once(spark, config, "P->B")  # runs of the late records: a newer version
        return planned(self, *args, **kwargs)

    monkeypatch.setattr(Checkpointer, "plan", plan_after_a_commit)
    assert cli.main(["failover", "--group", group, "--from", "P", "--to", "B",
                     "--config", config.path]) == 0
    assert ledger.version(OFFSET_SYNCS) > covered_at  # the commit did land in between
    assert loads == ["P->B"]
    assert sorted(observed) == ["B", "P"]  # the source's commits are read once, inactive
    [operation] = ledger.read(OPERATIONS).where(f"group_id = '{group}'").collect()
    assert operation["offset_syncs_version"] == covered_at
    committed = kafka_offsets.list_offsets(config.cluster("P"), "committed", group=group)
    on_b = kafka_offsets.list_offsets(config.cluster("B"), "committed", group=group)
    # Translated where G committed (identity on a fresh replica); its other partition starts
    # at the replica's log start.
    assert on_b == {(f"P.{topic}", p): committed.get((topic, p), 0) for p in (0, 1)}
