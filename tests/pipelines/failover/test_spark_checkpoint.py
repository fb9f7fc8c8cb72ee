"""Reading a Structured Streaming checkpoint as files (pure: no Spark, no Kafka).

The files are written here in the exact format Spark 4.0 writes (the e2e test,
tests/e2e/test_spark_query_failover.py, reads real ones).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from pipelines.failover import spark_checkpoint as sc

pytestmark = [pytest.mark.unit]

META = ('{"batchWatermarkMs":0,"batchTimestampMs":1795575126292,"conf":'
        '{"spark.sql.shuffle.partitions":"4"}}')


def write_checkpoint(root: Path, batches: dict[int, list[str]], committed: list[int],
                     query_id: str = "ee4033f0-dd3e-46dc-907b-6e9f83a2e7ae") -> Path:
    """A checkpoint with ``offsets/N`` per batch (one line per source) and ``commits/N``."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text(json.dumps({"id": query_id}))
    for batch, sources in batches.items():
        (root / "offsets" / str(batch)).write_text("\n".join(["v1", META, *sources]))
        (root / "offsets" / f".{batch}.crc").write_bytes(b"crc")
    for batch in committed:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    return root


def test_the_newest_committed_batch_is_read(tmp_path):
    path = write_checkpoint(tmp_path / "q", {
        0: ['{"Payments":{"0":10,"1":8}}'],
        1: ['{"Payments":{"0":30,"1":28}}'],
        2: ['{"Payments":{"0":50,"1":41}}']}, committed=[0, 1])
    checkpoint = sc.read(str(path))
    assert checkpoint.batch_id == 1
    assert checkpoint.sources == ({("Payments", 0): 30, ("Payments", 1): 28},)
    assert checkpoint.uncommitted == [2]  # planned, never committed: read again after a move
    assert checkpoint.query_id == "ee4033f0-dd3e-46dc-907b-6e9f83a2e7ae"
    assert sc.read(f"file:{path}").fingerprint() == checkpoint.fingerprint()


def test_the_fingerprint_changes_when_spark_writes_a_batch(tmp_path):
    path = write_checkpoint(tmp_path / "q", {0: ['{"T":{"0":1}}']}, committed=[0])
    before = sc.read(path).fingerprint()
    (path / "offsets" / "1").write_text("\n".join(["v1", META, '{"T":{"0":2}}']))
    assert sc.read(path).fingerprint() != before


def test_several_sources_keep_their_order(tmp_path):
    path = write_checkpoint(tmp_path / "q", {
        4: ['{"Payments":{"0":3}}', '{"Refunds":{"0":7,"1":1}}']}, committed=[4])
    assert sc.read(path).sources == ({("Payments", 0): 3},
                                     {("Refunds", 0): 7, ("Refunds", 1): 1})


@pytest.mark.parametrize(("batches", "committed", "message"), [
    ({}, [], "no offsets/ batches"),
    ({0: ['{"T":{"0":1}}']}, [], "no batch has a commit yet"),
    ({0: ['{"logOffset":3}']}, [0], "not a Kafka source's offsets"),
    ({0: ['-']}, [0], "source(s) [0] have no offsets in batch 0"),
])
def test_what_cannot_be_moved_is_named(tmp_path, batches, committed, message):
    path = write_checkpoint(tmp_path / "q", batches, committed)
    with pytest.raises(sc.SparkCheckpointError) as info:
        sc.read(path)
    assert message in str(info.value)
    assert info.value.exit_code == 2


def test_an_unknown_log_version_is_refused(tmp_path):
    path = write_checkpoint(tmp_path / "q", {0: ['{"T":{"0":1}}']}, committed=[0])
    (path / "offsets" / "0").write_text("v9\n{}\n{\"T\":{\"0\":1}}")
    with pytest.raises(sc.SparkCheckpointError, match="log version 'v9' is not one"):
        sc.read(path)


def test_not_a_directory_and_cloud_uris_are_refused(tmp_path):
    with pytest.raises(sc.SparkCheckpointError, match="no such directory"):
        sc.read(tmp_path / "missing")
    with pytest.raises(sc.SparkCheckpointError) as info:
        sc.local_path("s3://bucket/checkpoints/payments")
    assert "s3: locations are not read directly" in str(info.value)
    assert "/dbfs/" in str(info.value) and "/Volumes/" in str(info.value)
    assert sc.local_path("file:///data/q") == Path("/data/q")


def test_successor_names_do_not_pile_up(tmp_path):
    at = dt.datetime(2026, 11, 25, 3, 15, 0)
    first = sc.successor(tmp_path / "payments", "B", at)
    assert first == tmp_path / "payments-on-B-20261125T031500"
    back = sc.successor(first, "P", at + dt.timedelta(minutes=20))
    assert back == tmp_path / "payments-on-P-20261125T033500"
    assert sc.base_name(back) == "payments"


def test_resume_file_is_never_overwritten(tmp_path):
    path = tmp_path / "payments-on-B-20261125T031500.json"
    sc.write_resume(path, {"a": 1})
    with pytest.raises(sc.SparkCheckpointError, match="exists already"):
        sc.write_resume(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 1}


def test_resume_document_has_the_new_querys_options(tmp_path):
    checkpoint = sc.read(write_checkpoint(tmp_path / "q", {3: ['{"Payments":{"0":5}}']}, [3]))
    doc = sc.resume_document(
        operation_id="failover-x", kind="failover", source="P", target="B",
        checkpoint=checkpoint, location=tmp_path / "q-on-B-20261125T031500",
        subscribe=[["P.Payments", "Payments"]],
        starting=[{("P.Payments", 0): 5, ("Payments", 0): 0}], bootstrap="b:9092")
    assert doc["subscribe"] == "P.Payments,Payments"
    assert doc["startingOffsets"] == '{"P.Payments":{"0":5},"Payments":{"0":0}}'
    assert doc["resumes_after_batch"] == 3
    assert doc["checkpointLocation"].endswith("q-on-B-20261125T031500")
    assert doc["kafka.bootstrap.servers"] == "b:9092"


def test_the_querys_job_finds_the_newest_resume_document(tmp_path):
    first = tmp_path / "payments"
    assert sc.latest_resume(first) is None  # never moved: the job starts as usual
    sc.write_resume(tmp_path / "payments-on-B-20261125T031500.json", {"to": "B"})
    sc.write_resume(tmp_path / "payments-on-P-20261125T033500.json", {"to": "P"})
    sc.write_resume(tmp_path / "payments-old-on-P-20261125T040000.json", {"to": "other"})
    assert sc.latest_resume(first) == {"to": "P"}
    assert sc.latest_resume(str(tmp_path / "payments-on-B-20261125T031500")) == {"to": "P"}
