"""A real Structured Streaming query (Spark's Kafka source, foreachBatch into Delta) failed over
to B and back to P with ``--spark-checkpoint``: no record lost, none read twice, counted by id.

The control is the same query moved without offset-ledger: a new query on the other cluster
from ``earliest`` on the same subscription (the only start that loses nothing without
translated offsets); it re-reads what the query had already processed.

    P:T    A (3 deleted: never read) B     Q1 reads A, stops         failover P -> B (Q2)
    B:P.T  copies of A and B               Q2 reads B                producers -> B
    B:T    C D                             Q2 reads C, stops         failback B -> P (Q3)
    P:B.T  copies of C and D               Q3 reads D; nothing of P:T again
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import functions as F

from ledger.schemas import OPERATIONS, RESUME_POINTS
from ledger.tables import Ledger
from pipelines import cli
from pipelines.devtools.workload import produce
from pipelines.edge import kafka_admin
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]
def run_query(spark, bootstrap: str, subscribe: str, starting: str, checkpoint: Path,
              table: Path) -> None:
    """One run of the user's query, Trigger.AvailableNow: reads what is there, then stops.

    Every record's id goes to a Delta table; the write is idempotent per (checkpoint, batch):
    ``txnAppId`` names the checkpoint, since a moved query's batch ids start again at 0.
    """
    app_id = str(checkpoint)

    def sink(batch, batch_id):
        (batch.select(F.col("value").cast("string").alias("id"), "topic", "partition", "offset")
         .write.format("delta").mode("append")
         .option("txnAppId", app_id).option("txnVersion", batch_id).save(str(table)))

    stream = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", subscribe)
              .option("startingOffsets", starting)
              .load())
    query = (stream.writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None


def read_ids(spark, *tables: Path) -> Counter:
    counts: Counter = Counter()
    for table in tables:
        if (table / "_delta_log").is_dir():
            counts.update(r["id"] for r in spark.read.format("delta").load(str(table))
                          .select("id").collect())
    return counts


def verdict(counts: Counter, produced: set[str]) -> tuple[int, int]:
    """(lost, read twice) by id."""
    lost = len(produced - set(counts))
    twice = sum(n - 1 for n in counts.values() if n > 1)
    return lost, twice


def move(config, capsys, verb: str, checkpoint: Path, source: str, target: str,
         *extra: str) -> dict:
    capsys.readouterr()
    code = cli.main([verb, "--spark-checkpoint", str(checkpoint), "--from", source, "--to",
                     target, "--quiet-seconds", "1", "--format", "json", *extra,
                     "--config", config.path])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_streaming_query_fails_over_and_back_exactly(spark, make_config, unique, tmp_path,
                                                     capsys):
    topic = unique("sq-pay")
    config = make_config(flows={
        "P->B": {"topics": [topic]},
        "B->P": {"topics": [topic],
                 "reverse.checkpointed.topics": [f"P.{topic}"]}})
    primary, backup = config.cluster("P"), config.cluster("B")
    on_p, on_b = (c.client_config()["bootstrap.servers"] for c in (primary, backup))
    for cluster in (primary, backup):
        kafka_admin.create_topic(cluster, topic, 2)
    ids = {part: [f"{part}{i}" for i in range(n)]
           for part, n in (("a", 60), ("b", 40), ("c", 30), ("d", 20))}
    # The first three records of P:T[0] are deleted before anyone reads or copies them, so
    # the replica's offsets are P's minus 3 on partition 0: translation is not the identity.
    produce(primary, topic, ids["a"], 2)
    client = AdminClient(primary.client_config())
    for future in client.delete_records([TopicPartition(topic, 0, 3)]).values():
        future.result(30)
    produced = set(ids["a"]) - {"a0", "a2", "a4"}
    tables = {name: tmp_path / "tables" / name
              for name in ("on_p", "on_b", "back_on_p", "control_b", "control_p")}
    first = tmp_path / "checkpoints" / "payments"

    # 1. The query reads P's T (A), and stops; producers write B, which it has not read.
    run_query(spark, on_p, topic, "earliest", first, tables["on_p"])
    assert verdict(read_ids(spark, tables["on_p"]), produced) == (0, 0)
    produce(primary, topic, ids["b"], 2)
    produced |= set(ids["b"])

    # 2. Failover: the checkpoint's last batch translated onto B, a new query started there.
    doc = move(config, capsys, "failover", first, "P", "B", "--catch-up")
    assert doc["subscribe"] == f"P.{topic},{topic}"
    assert json.loads(doc["startingOffsets"]) == {f"P.{topic}": {"0": 27, "1": 30},
                                                  topic: {"0": 0, "1": 0}}
    second = Path(doc["checkpointLocation"])
    assert second.parent == first.parent and not second.exists()
    assert json.loads(Path(doc["resume_file"]).read_text())["startingOffsets"] == \
        doc["startingOffsets"]
    replicate_once(spark, config, "P->B")  # what a running replicate job does meanwhile
    run_query(spark, on_b, doc["subscribe"], doc["startingOffsets"], second, tables["on_b"])
    # The control: the query moved without offset-ledger, from earliest on B.
    run_query(spark, on_b, doc["subscribe"], "earliest", tmp_path / "control-b",
              tables["control_b"])
    lost, twice = verdict(read_ids(spark, tables["on_p"], tables["control_b"]), produced)
    assert (lost, twice) == (0, 57)  # everything read on P, read again on B

    # 3. Producers move to B; the query reads some of B's own T (C), then stops.
    produce(backup, topic, ids["c"], 2)
    run_query(spark, on_b, doc["subscribe"], doc["startingOffsets"], second, tables["on_b"])
    produce(backup, topic, ids["d"], 2)
    produced |= set(ids["c"]) | set(ids["d"])

    # 4. Failback: P.T reverse-checkpointed into P's T, B's T forward into P's B.T.
    replicate_once(spark, config, "B->P")  # what a running replicate job does meanwhile
    ledger = Ledger(spark, config.ledger_location)
    rows = {name: ledger.read(name).count() for name in (OPERATIONS, RESUME_POINTS)}
    files = sorted(p.name for p in first.parent.iterdir())
    dry = move(config, capsys, "failback", second, "B", "P", "--dry-run")
    assert dry["dry_run"] is True
    assert sorted(p.name for p in first.parent.iterdir()) == files  # nothing written
    assert {name: ledger.read(name).count() for name in rows} == rows
    back = move(config, capsys, "failback", second, "B", "P")
    assert back["startingOffsets"] == dry["startingOffsets"]
    assert back["subscribe"] == f"B.{topic},{topic}"
    assert json.loads(back["startingOffsets"]) == {f"B.{topic}": {"0": 15, "1": 15},
                                                   topic: {"0": 50, "1": 50}}
    third = Path(back["checkpointLocation"])
    assert third.parent == first.parent and third.name.startswith("payments-on-P-")
    run_query(spark, on_p, back["subscribe"], back["startingOffsets"], third,
              tables["back_on_p"])
    run_query(spark, on_p, back["subscribe"], "earliest", tmp_path / "control-p",
              tables["control_p"])
    lost, twice = verdict(read_ids(spark, tables["on_p"], tables["on_b"], tables["control_p"]),
                          produced)
    assert (lost, twice) == (0, 57 + 40 + 30)  # A, B and C read again on P

    # With offset-ledger every id was read exactly once, across the three queries.
    counts = read_ids(spark, tables["on_p"], tables["on_b"], tables["back_on_p"])
    assert verdict(counts, produced) == (0, 0)
    assert sum(counts.values()) == len(produced) == 57 + 40 + 30 + 20

    # The ledger holds both operations, their resume points being the startingOffsets.
    ops = ledger.read(OPERATIONS).where(F.col("group_id") == "spark:payments").collect()
    assert sorted(o["kind"] for o in ops) == ["failback", "failover"]
    assert all(str(first) in o["message"] or str(second) in o["message"] for o in ops)
    points = ledger.read(RESUME_POINTS).where(
        F.col("operation_id") == back["operation_id"]).collect()
    assert {(p["topic"], p["partition"]): p["offset"] for p in points} == {
        (t, int(k)): v for t, parts in json.loads(back["startingOffsets"]).items()
        for k, v in parts.items()}
    assert {p["direction"] for p in points} == {"forward", "reverse"}

    # The audit shows the query's operations like a group's: each of the 6 translated starting
    # offsets (2 at failover, 4 at failback; log starts translate nothing) re-derived.
    capsys.readouterr()
    assert cli.main(["audit", "--group", "spark:payments", "--config", config.path]) == 0
    assert capsys.readouterr().out.startswith(
        "Everything matched: 6 of 6 resume points in 2 operation(s)")


