"""offset-ledger beside a real MirrorMaker 2: ingest its syncs, translate, fail back over them."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import functions as F

from ledger.schemas import OFFSET_SYNCS, OPERATIONS, REPLICATION_PROGRESS
from ledger.tables import Ledger
from pipelines import cli
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.mm2 import formats
from pipelines.mm2.ingest import Source, read_topic
from tests.pipelines.mm2.mm2_process import (
    await_checkpointed,
    await_condition,
    await_group_known,
    ends,
    mm2_committed_all,
    replicated,
)

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]

PARTITIONS = 3
OFFSET_LAG_MAX = 100  # MM2's default: a sync at least every 100 downstream offsets


def mm2_syncs(config, topic):
    records, _ = read_topic(Source(config.cluster("P"), "mm2-offset-syncs.B.internal"), None)
    syncs = [formats.decode_offset_sync(r.key, r.value) for r in records]
    return {(s.partition, s.upstream_offset, s.downstream_offset) for s in syncs
            if s.topic == topic}


def ingest(config, mm2, capsys):
    assert cli.main(["ingest", "mm2", "--flow", "P->B", "--once", "--config", config.path,
                     "--connect-offsets-topic", mm2.connect_offsets_topic]) == 0
    return capsys.readouterr().out


def translate(config, group, capsys):
    assert cli.main(["translate", "--group", group, "--from", "P", "--to", "B",
                     "--format", "json", "--config", config.path]) == 0
    return {r["partition"]: r for r in json.loads(capsys.readouterr().out)}


def test_ingest_then_translate_over_mm2_syncs(spark, mm2, mm2_config, unique, capsys):
    config = mm2_config
    topic, group = unique("mm2t-a"), unique("mm2g-a")
    kafka_admin.create_topic(config.cluster("P"), topic, PARTITIONS)
    # The group's commits, away from MM2's sync points (0, 100, 200 downstream), known to MM2
    # before any record is replicated (see await_group_known).
    committed = {0: 130, 1: 145, 2: 260}
    kafka_admin.alter_group_offsets(config.cluster("P"), group,
                                    {(topic, p): o for p, o in committed.items()})
    await_group_known(mm2, group)
    produce(config.cluster("P"), topic, [f"a{i}" for i in range(900)], PARTITIONS)
    mm2_cps = await_checkpointed(config, mm2, topic, group, committed)

    out = ingest(config, mm2, capsys)
    assert "ingest mm2 flow P->B" in out
    ledger = Ledger(spark, config.ledger_location)
    rows = (ledger.read(OFFSET_SYNCS).where(F.col("topic") == topic)
            .select("partition", "upstream_offset", "downstream_offset", "length", "run_id",
                    "replica_topic").collect())
    expected = mm2_syncs(config, topic)
    assert {(r["partition"], r["upstream_offset"], r["downstream_offset"]) for r in rows} \
        == expected
    assert all(r["length"] == 1 and r["run_id"] == "mm2:mm2-offset-syncs.B.internal"
               and r["replica_topic"] == f"P.{topic}" for r in rows)
    assert len(rows) < 900 // 2, "MM2's syncs are sparse"
    progress = {r["partition"]: r["next_upstream_offset"] for r in ledger.read(
        REPLICATION_PROGRESS).where(F.col("topic") == topic).collect()}
    assert progress == ends(config.cluster("P"), topic)

    # A second pass reads only what MM2 wrote since: nothing is ingested twice.
    ingest(config, mm2, capsys)
    all_mm2 = ledger.read(OFFSET_SYNCS).where(F.col("run_id").startswith("mm2:"))
    assert all_mm2.count() == all_mm2.select("batch_id").distinct().count()

    translations = translate(config, group, capsys)
    for p in range(PARTITIONS):
        t = translations[p]
        # The replica mirrors the partition from offset 0 without gaps: offset c is exact.
        assert t["status"] == "translated"
        assert t["offset"] <= committed[p], "never skips a record"
        assert committed[p] - t["offset"] <= OFFSET_LAG_MAX
        assert t["offset"] >= mm2_cps[p].downstream_offset, "never coarser than MM2"
    # The ledger's data-quality suites hold over ingested MM2 syncs and checkpoints too.
    capsys.readouterr()
    code = cli.main(["validate", "--format", "json", "--config", config.path])
    report = capsys.readouterr().out
    assert code == 0, report[-3000:]
    print(f"\ntranslate over MM2 syncs: committed {committed}, ours "
          f"{ {p: translations[p]['offset'] for p in translations} }, MM2's "
          f"{ {p: c.downstream_offset for p, c in mm2_cps.items()} }")


def read_values(cluster, topic, start, stop=None):
    """Every value of ``topic`` from ``{partition: offset}`` to ``stop`` or the end (no group)."""
    consumer = Consumer(cluster.client_config(**{"group.id": "mm2-test-reader",
                                                 "enable.auto.commit": False, "log_level": 0}))
    high = stop or ends(cluster, topic)
    out = []
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in start.items() if o < high[p]])
        pos = dict(start)
        while any(pos[p] < high[p] for p in pos):
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            if msg.offset() < high[msg.partition()]:
                out.append(msg.value().decode())
            pos[msg.partition()] = msg.offset() + 1
    finally:
        consumer.close()
    return out


def test_failover_with_mm2_then_failback_with_offset_ledger(spark, mm2, mm2_config, unique,
                                                             capsys):
    config = mm2_config
    P, B = config.cluster("P"), config.cluster("B")
    topic, group = unique("mm2t-f"), unique("mm2g-f")
    values = [f"f{i}" for i in range(1500)]
    kafka_admin.create_topic(P, topic, PARTITIONS)
    # The group processed 30 records of each partition on P and committed; its commits are
    # known to MM2 before any record is replicated (see await_group_known).
    before_failover = dict.fromkeys(range(PARTITIONS), 30)
    kafka_admin.alter_group_offsets(P, group, {(topic, p): o
                                               for p, o in before_failover.items()})
    await_group_known(mm2, group)
    produce(P, topic, values[:750], PARTITIONS)
    on_p = read_values(P, topic, dict.fromkeys(range(PARTITIONS), 0), before_failover)
    produce(P, topic, values[750:], PARTITIONS)  # MM2 replicates while the group works
    # Failover with MM2's own checkpoints: sync.group.offsets writes the group's offsets on B.
    await_condition("MM2 to replicate the topic", lambda: replicated(config, topic), mm2=mm2)
    await_condition("MM2 to commit its source offsets",
                    lambda: mm2_committed_all(config, mm2, topic), mm2=mm2)
    mm2_offsets = await_condition(
        "MM2 to sync the group's offsets to B",
        lambda: (lambda o: o if len(o) == PARTITIONS else None)(
            kafka_offsets.list_offsets(B, "committed", group=group)), mm2=mm2)
    on_b = [v for _, v in consume(B, group, [f"P.{topic}"])]
    failover_dups = len(set(on_p) & set(on_b))

    # Failback with offset-ledger over MM2's ingested syncs (reverse checkpointing).
    ingest(config, mm2, capsys)
    assert cli.main(["failback", "--group", group, "--from", "B", "--to", "P", "--timeout",
                     "30", "--format", "json", "--config", config.path]) == 0
    result = json.loads(capsys.readouterr().out)
    reverse = {t["partition"]: t["offset"] for t in result["translations"]
               if t["direction"] == "reverse"}
    assert sorted(reverse) == list(range(PARTITIONS))
    after = [v for _, v in consume(P, group, [topic])]

    processed = set(on_p) | set(on_b)
    assert set(values) - processed - set(after) == set(), "nothing skipped"
    dups_with = len(set(after) & processed)
    # Without reverse checkpointing the group resumes on P where it left it before failover.
    dups_without = len(set(read_values(P, topic, before_failover)) & processed)
    assert dups_with < dups_without
    assert dups_with <= PARTITIONS * OFFSET_LAG_MAX, "bounded by MM2's sync spacing"
    ops = Ledger(spark, config.ledger_location).read(OPERATIONS).where(
        F.col("group_id") == group).collect()
    assert [(o["kind"], o["reverse_checkpointing"]) for o in ops] == [("failback", True)]
    # The audit shows where the group resumed, over MM2's ingested syncs.
    assert cli.main(["audit", "--operation", result["operation_id"], "--format", "json",
                     "--config", config.path]) == 0
    audit = json.loads(capsys.readouterr().out)
    resumed = {r["partition_id"]: r["resume_offset"] for r in audit["resume_audit"]
               if r["direction"] == "reverse"}
    assert resumed == reverse
    print(f"\nMM2 failover (offsets {mm2_offsets}): {failover_dups} duplicate(s); failback "
          f"over MM2 syncs: {dups_with} duplicate(s) with reverse checkpointing "
          f"(resumed at {reverse}), {dups_without} without")
