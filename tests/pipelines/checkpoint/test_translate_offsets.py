"""``translate --offsets`` and ``--group-regex`` on real clusters: exact, both ways, no guess."""

from __future__ import annotations

import io
import json

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from ledger.schemas import CHECKPOINTS, OPERATIONS, RESUME_POINTS
from ledger.tables import Ledger
from pipelines import cli
from pipelines.checkpoint.engine import Checkpointer
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]
@pytest.fixture
def four_topics(spark, make_config, unique):
    """The reference layout for one topic T: T and B.T on P, T and P.T on B, runs both ways.

    T on P has 2 partitions of 10 records; records 0..3 of partition 0 are deleted before
    replication, so P.T[0] starts at the copy of record 4 (translation is not the identity).
    T on B has 5 records in 1 partition, replicated to P as B.T.
    """
    config = make_config(flows={
        "P->B": {"topics": ["tro-.*"]},
        "B->P": {"topics": ["tro-.*"], "reverse.checkpointed.topics": ["P.tro-.*"]}})
    topic = unique("tro-topic")
    primary, backup = config.cluster("P"), config.cluster("B")
    kafka_admin.create_topic(primary, topic, 2)
    produce(primary, topic, [f"p{i}" for i in range(20)], 2)
    client = AdminClient(primary.client_config())
    for future in client.delete_records([TopicPartition(topic, 0, 4)]).values():
        future.result(30)
    kafka_admin.create_topic(backup, topic, 1)
    produce(backup, topic, [f"b{i}" for i in range(5)], 1)
    replicate_once(spark, config, "P->B")
    replicate_once(spark, config, "B->P")
    return config, topic


def ledger_counts(spark, config):
    ledger = Ledger(spark, config.ledger_location)
    return {name: ledger.read(name).count() for name in (CHECKPOINTS, OPERATIONS, RESUME_POINTS)}


def translate(config, *args):
    return cli.main(["translate", *args, "--config", config.path])


def test_offsets_translate_forward_and_back_in_the_same_shape(spark, four_topics, tmp_path,
                                                             capsys, monkeypatch, unique):
    config, topic = four_topics
    before = ledger_counts(spark, config)
    # Forward, from a file: P's T[0] at 6 is the copy of record 6, at replica offset 2.
    path = tmp_path / "offsets.json"
    path.write_text(json.dumps({topic: {"0": 6, "1": 4}}))
    capsys.readouterr()
    assert translate(config, "--from", "P", "--to", "B", "--offsets", str(path)) == 0
    assert json.loads(capsys.readouterr().out) == {f"P.{topic}": {"0": 2, "1": 4}}

    # Failback shape, from stdin: the replica P.T reversed to T on P, B's own T forward to B.T.
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(
        {f"P.{topic}": {"0": 2, "1": 10}, topic: {"0": 3}})))
    assert translate(config, "--from", "B", "--to", "P", "--offsets", "-") == 0
    out = capsys.readouterr().out
    assert json.loads(out) == {topic: {"0": 6, "1": 10}, f"B.{topic}": {"0": 3}}
    assert out.strip() == json.dumps(json.loads(out), separators=(",", ":"), sort_keys=True)

    # The table names the direction of each partition.
    path.write_text(json.dumps({f"P.{topic}": {"1": 7}, topic: {"0": 5}}))
    assert translate(config, "--from", "B", "--to", "P", "--offsets", str(path),
                     "--format", "table") == 0
    table = capsys.readouterr().out
    assert f"B:P.{topic}  1          7          reverse  P:{topic}" in table
    assert f"B:{topic}    0          5          forward  P:B.{topic}" in table

    # --group-regex: every matching group on P, translated the same way.
    prefix = unique("tro-rx")
    for name, limit in ((f"{prefix}-a", 14), (f"{prefix}-b", 16)):
        consume(config.cluster("P"), name, [topic], limit=limit)
    asked = []  # the clusters whose commits were read
    observe = Checkpointer.observe
    monkeypatch.setattr(Checkpointer, "observe", lambda self, alias, groups, **kw: (
        asked.append(alias), observe(self, alias, groups, **kw))[1])
    assert translate(config, "--from", "P", "--to", "B", "--group-regex", f"{prefix}-.*",
                     "--format", "json") == 0
    rows = json.loads(capsys.readouterr().out)
    # Translation only: B's commits would decide offset writes, and translate writes none.
    assert asked == ["P"]
    assert {r["group"] for r in rows} == {f"{prefix}-a", f"{prefix}-b"}
    for r in rows:
        committed = kafka_offsets.list_offsets(config.cluster("P"), "committed", group=r["group"])
        upstream = committed[(topic, r["partition"])]
        assert r["offset"] == (upstream - 4 if r["partition"] == 0 else upstream)

    # Many groups: the flows' whole stores are read while P is asked for the commits
    # (Checkpointer.prefetch_stores); what is printed is what the topic-by-topic reads give.
    fetched = []
    prefetch = Checkpointer.prefetch_stores
    monkeypatch.setattr(Checkpointer, "prefetch_stores", lambda self, flow: (
        lambda stores: (fetched.append(sorted(stores or {})), stores)[1])(prefetch(self, flow)))
    monkeypatch.setattr("pipelines.checkpoint.engine.PREFETCH_GROUPS", 1)
    assert translate(config, "--from", "P", "--to", "B", "--group-regex", f"{prefix}-.*",
                     "--format", "json") == 0
    assert json.loads(capsys.readouterr().out) == rows
    assert fetched == [["P->B"]]

    # Failback shape: a group on B reads the replica P.T (reversed with P->B's runs) and B's
    # own T (forward with B->P's): both flows' stores are read ahead.
    consume(config.cluster("B"), f"{prefix}-c", [f"P.{topic}", topic])
    back = []
    for many in (1, 1000):
        monkeypatch.setattr("pipelines.checkpoint.engine.PREFETCH_GROUPS", many)
        assert translate(config, "--from", "B", "--to", "P", "--group-regex", f"{prefix}-c",
                         "--format", "json") == 0
        back.append(json.loads(capsys.readouterr().out))
    assert fetched == [["P->B"], ["B->P", "P->B"]]  # the second run read topic by topic
    assert back[0] == back[1]
    assert {(r["direction"], r["topic"]) for r in back[0]} == {
        ("reverse", f"P.{topic}"), ("forward", topic)}
    assert ledger_counts(spark, config) == before  # translate writes nothing


def test_untranslatable_offsets_are_named_and_nothing_is_printed(spark, four_topics, tmp_path,
                                                                 capsys):
    config, topic = four_topics
    path = tmp_path / "offsets.json"
    # [0] at 2: records 2..3 were never replicated; [1] at 4 is fine; partition 5 has no
    # runs; another topic is not replicated at all.
    path.write_text(json.dumps({topic: {"0": 2, "1": 4, "5": 0}, "unreplicated": {"0": 1}}))
    capsys.readouterr()
    assert translate(config, "--from", "P", "--to", "B", "--offsets", str(path)) == 4
    out, err = capsys.readouterr()
    assert out == ""
    assert "3 partition(s) cannot be translated P -> B; nothing was guessed or written" in err
    assert f"P:{topic}[0] offset 2 (forward): offset 2 of {topic}[0] is before the first " \
           "replicated record (4)" in err
    assert f"P:{topic}[5] offset 0 (forward): no offset-syncs for {topic}[5]" in err
    assert "P:unreplicated[0] offset 1: flow P->B neither replicates unreplicated nor " \
           "reverse-checkpoints it" in err
    assert f"{topic}[1]" not in err

    # Bad input is a clear error (exit 2), before anything is read.
    path.write_text(json.dumps({topic: {"0": -2}}))
    assert translate(config, "--from", "P", "--to", "B", "--offsets", str(path)) == 2
    assert "is -2 (earliest), Spark's symbol, not a position" in capsys.readouterr().err
    assert translate(config, "--from", "P", "--to", "B", "--offsets",
                     str(tmp_path / "missing.json")) == 2
    assert "No such file or directory" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        translate(config, "--from", "P", "--to", "B", "--offsets", str(path), "--group", "G")
    assert "give --offsets or --group/--group-regex, not both" in capsys.readouterr().err
