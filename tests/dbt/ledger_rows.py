"""Realistic ledger rows for the SQL, audit and validation tests (no Kafka needed).

``write_reference_ledger`` writes the reference scenario of DESIGN.md the way the jobs do:
one Delta commit per micro-batch or checkpoint pass, so the operations record real versions
and time travel reads something different from the current version.

Scenario (partition 0, flows P->B and B->P):
    P->B runs of Payments -> P.Payments: (0, 0, 5), (5, 5, 5), (12, 10, 3)  (gap 10..11)
    B->P runs of Payments -> B.Payments: (0, 0, 4)
    G commits 8 on P; failover writes 8 on B's P.Payments (forward(8) = 8).
    G then reads B's P.Payments up to 13 and B's Payments up to 4.
    failback writes reverse(13) = 15 on P's Payments (previous offset 8) and forward(4) = 4 on
    P's B.Payments. Without reverse checkpointing G would re-read 8, 9, 12, 13, 14 (5 records).
    A run written after the failback, (15, 13, 5), is not visible at the failback's versions.
    Before it, ``ledger maintain``'s span refresh persists both flows' spans
    (``offset_sync_spans``), so that run is the tail a store load reads after the snapshot.
    Each operation records its evidence as the failover job does (pipelines.failover.evidence,
    over OffsetSyncStore snapshots at its offset_syncs version) before its operations row.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from ledger.engine import LedgerEngine
from ledger.schemas import (
    CHECKPOINTS,
    GROUP_OFFSETS,
    OFFSET_SYNCS,
    OPERATIONS,
    RESUME_POINTS,
    SCHEMAS,
)
from ledger.tables import Ledger

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def sync_row(flow: str, topic: str, partition: int, u: int, d: int, n: int, batch: int,
             written_at: dt.datetime, run_id: str = "run-1") -> dict[str, Any]:
    source, target = flow.split("->")
    return {"flow": flow, "source_cluster": source, "target_cluster": target, "topic": topic,
            "replica_topic": f"{source}.{topic}", "partition": partition,
            "upstream_offset": u, "downstream_offset": d, "length": n, "run_id": run_id,
            "batch_id": batch, "written_at": written_at}


def checkpoint_row(checkpoint_id: str, flow: str, direction: str, group: str,
                   source: tuple[str, str, int], target: tuple[str, str, int | None],
                   partition: int, *, version: int, at_: dt.datetime,
                   status: str | None = None, rewound: bool = False) -> dict[str, Any]:
    target_offset = target[2]
    return {"checkpoint_id": checkpoint_id, "flow": flow, "direction": direction,
            "group_id": group, "source_cluster": source[0], "source_topic": source[1],
            "partition": partition, "source_offset": source[2], "target_cluster": target[0],
            "target_topic": target[1], "target_offset": target_offset,
            "status": status or ("translated" if target_offset is not None
                                 else "untranslatable"),
            "reason": None if target_offset is not None else "offset before the first run",
            "group_rewound": rewound, "offset_syncs_version": version,
            "checkpointed_at": at_}


def group_row(obs: str, cluster: str, group: str, topic: str, partition: int, offset: int,
              at_: dt.datetime, state: str = "Empty") -> dict[str, Any]:
    return {"observation_id": obs, "cluster": cluster, "group_id": group, "topic": topic,
            "partition": partition, "committed_offset": offset, "group_state": state,
            "observed_at": at_}


def append(ledger: Ledger | LedgerEngine, name: str, rows: list[dict[str, Any]]) -> int:
    """Append rows as one Delta commit; return the table's new version."""
    if isinstance(ledger, LedgerEngine):
        ledger.append(name, rows)
        return ledger.version(name)
    schema = SCHEMAS[name]
    data = [tuple(row.get(f.name) for f in schema.fields) for row in rows]
    ledger.append(name, ledger.spark.createDataFrame(data, schema))
    return ledger.version(name)


def record_evidence(ledger: Ledger | LedgerEngine, operation_id: str,
                    checkpoints: list[dict[str, Any]], checkpoints_version: int,
                    syncs_version: int, at_: dt.datetime) -> None:
    """The evidence the failover job records, with the job's own code."""
    from pipelines.failover import evidence

    engine = LedgerEngine.of(ledger)
    stores = {flow: engine.load_store(flow, syncs_version)
              for flow in {cp["flow"] for cp in checkpoints}}
    evidence.record(engine, config_for(engine.location), checkpoints, {"G": operation_id},
                    stores, checkpoints_version, at_)


def write_reference_ledger(spark: SparkSession, location: str) -> dict[str, Any]:
    """Write the reference scenario; return the ids and versions a test asserts on.

    ``ledger init`` creates the tables; every later commit is made as the jobs make it on a
    local path ledger (``LedgerEngine``: delta-rs, no Spark job), one per batch or pass.
    """
    Ledger(spark, location).init()
    ledger = LedgerEngine(location, lambda: spark)
    pb, bp = "P->B", "B->P"
    append(ledger, OFFSET_SYNCS, [sync_row(pb, "Payments", 0, 0, 0, 5, 0, at(1))])
    append(ledger, OFFSET_SYNCS, [sync_row(pb, "Payments", 0, 5, 5, 5, 1, at(2)),
                                  sync_row(pb, "Payments", 1, 0, 0, 3, 1, at(2))])
    append(ledger, GROUP_OFFSETS, [group_row("o1", "P", "G", "Payments", 0, 8, at(3), "Stable"),
                                   group_row("o2", "P", "G", "Payments", 1, 2, at(3), "Stable")])
    # failover: checkpoint G forward, write its offsets on B
    syncs_v1 = ledger.version(OFFSET_SYNCS)
    checkpoints_1 = [
        checkpoint_row("cp-1", pb, "forward", "G", ("P", "Payments", 8),
                       ("B", "P.Payments", 8), 0, version=syncs_v1, at_=at(4)),
        checkpoint_row("cp-1", pb, "forward", "G", ("P", "Payments", 2),
                       ("B", "P.Payments", 2), 1, version=syncs_v1, at_=at(4))]
    cp_v1 = append(ledger, CHECKPOINTS, checkpoints_1)
    rp_v1 = append(ledger, RESUME_POINTS, [
        {"resume_point_id": "rp-1", "operation_id": "op-failover", "reason": "failover",
         "cluster": "B", "group_id": "G", "topic": "P.Payments", "partition": 0, "offset": 8,
         "previous_offset": None, "checkpoint_id": "cp-1", "direction": "forward",
         "source_cluster": "P", "source_topic": "Payments", "source_offset": 8,
         "offset_syncs_version": syncs_v1, "checkpoints_version": cp_v1, "written_at": at(5)},
        {"resume_point_id": "rp-2", "operation_id": "op-failover", "reason": "failover",
         "cluster": "B", "group_id": "G", "topic": "P.Payments", "partition": 1, "offset": 2,
         "previous_offset": None, "checkpoint_id": "cp-1", "direction": "forward",
         "source_cluster": "P", "source_topic": "Payments", "source_offset": 2,
         "offset_syncs_version": syncs_v1, "checkpoints_version": cp_v1, "written_at": at(5)}])
    go_v1 = ledger.version(GROUP_OFFSETS)
    record_evidence(ledger, "op-failover", checkpoints_1, cp_v1, syncs_v1, at(5))
    append(ledger, OPERATIONS, [{
        "operation_id": "op-failover", "kind": "failover", "group_id": "G",
        "from_cluster": "P", "to_cluster": "B", "status": "completed",
        "subscribe_topics": ["Payments", "P.Payments"], "offset_syncs_version": syncs_v1,
        "checkpoints_version": cp_v1, "group_offsets_version": go_v1,
        "resume_points_version": rp_v1, "reverse_checkpointing": True,
        "started_at": at(3.5), "ready_at": at(5), "seconds_to_ready": 1.5, "message": None}])
    # producers keep writing on P for a while (replicated), then move to B
    append(ledger, OFFSET_SYNCS, [sync_row(pb, "Payments", 0, 12, 10, 3, 2, at(6))])
    append(ledger, OFFSET_SYNCS, [sync_row(bp, "Payments", 0, 0, 0, 4, 0, at(7))])
    append(ledger, GROUP_OFFSETS, [
        group_row("o3", "B", "G", "P.Payments", 0, 13, at(8)),
        group_row("o4", "B", "G", "Payments", 0, 4, at(8)),
        group_row("o5", "B", "G", "P.Payments", 1, 3, at(8))])
    # failback: reverse-checkpoint P.Payments, forward-checkpoint B's Payments
    syncs_v2 = ledger.version(OFFSET_SYNCS)
    checkpoints_2 = [
        checkpoint_row("cp-2", pb, "reverse", "G", ("B", "P.Payments", 13),
                       ("P", "Payments", 15), 0, version=syncs_v2, at_=at(9)),
        checkpoint_row("cp-2", pb, "reverse", "G", ("B", "P.Payments", 3),
                       ("P", "Payments", 3), 1, version=syncs_v2, at_=at(9)),
        checkpoint_row("cp-2", bp, "forward", "G", ("B", "Payments", 4),
                       ("P", "B.Payments", 4), 0, version=syncs_v2, at_=at(9))]
    cp_v2 = append(ledger, CHECKPOINTS, checkpoints_2)
    rp_v2 = append(ledger, RESUME_POINTS, [
        {"resume_point_id": "rp-3", "operation_id": "op-failback", "reason": "failback",
         "cluster": "P", "group_id": "G", "topic": "Payments", "partition": 0, "offset": 15,
         "previous_offset": 8, "checkpoint_id": "cp-2", "direction": "reverse",
         "source_cluster": "B", "source_topic": "P.Payments", "source_offset": 13,
         "offset_syncs_version": syncs_v2, "checkpoints_version": cp_v2, "written_at": at(10)},
        {"resume_point_id": "rp-4", "operation_id": "op-failback", "reason": "failback",
         "cluster": "P", "group_id": "G", "topic": "Payments", "partition": 1, "offset": 3,
         "previous_offset": 2, "checkpoint_id": "cp-2", "direction": "reverse",
         "source_cluster": "B", "source_topic": "P.Payments", "source_offset": 3,
         "offset_syncs_version": syncs_v2, "checkpoints_version": cp_v2, "written_at": at(10)},
        {"resume_point_id": "rp-5", "operation_id": "op-failback", "reason": "failback",
         "cluster": "P", "group_id": "G", "topic": "B.Payments", "partition": 0, "offset": 4,
         "previous_offset": None, "checkpoint_id": "cp-2", "direction": "forward",
         "source_cluster": "B", "source_topic": "Payments", "source_offset": 4,
         "offset_syncs_version": syncs_v2, "checkpoints_version": cp_v2, "written_at": at(10)}])
    go_v2 = ledger.version(GROUP_OFFSETS)
    record_evidence(ledger, "op-failback", checkpoints_2, cp_v2, syncs_v2, at(10))
    ops_v2 = append(ledger, OPERATIONS, [{
        "operation_id": "op-failback", "kind": "failback", "group_id": "G",
        "from_cluster": "B", "to_cluster": "P", "status": "completed",
        "subscribe_topics": ["Payments", "B.Payments"], "offset_syncs_version": syncs_v2,
        "checkpoints_version": cp_v2, "group_offsets_version": go_v2,
        "resume_points_version": rp_v2, "reverse_checkpointing": True,
        "started_at": at(8.5), "ready_at": at(10), "seconds_to_ready": 1.5, "message": None}])
    from ledger.span_refresh import refresh

    refresh(ledger, {pb: ("P", "B"), bp: ("B", "P")})
    # after the failback: more replication; the audit at the failback's versions ignores it
    append(ledger, OFFSET_SYNCS, [sync_row(pb, "Payments", 0, 15, 13, 5, 3, at(11))])
    append(ledger, GROUP_OFFSETS, [group_row("o6", "P", "G", "Payments", 0, 15, at(12))])
    assert ledger.direct, "the reference ledger is written with delta-rs, as the jobs write it"
    return {"ledger": Ledger(spark, location), "syncs_v1": syncs_v1, "syncs_v2": syncs_v2,
            "cp_v1": cp_v1, "cp_v2": cp_v2, "operations_version": ops_v2}


_REFERENCE: dict[str, dict[str, Any]] = {}


def reference_ledger(spark: SparkSession, base_dir: str) -> dict[str, Any]:
    """The reference ledger, written once per test run (test modules share it read-only).

    Under xdist the first worker that needs it writes it beside the workers' temporary
    folders (``base_dir``'s parent, which pytest cleans up with them), under a file lock; every
    worker then copies it into its own ``base_dir`` (Delta tables copy with their history and
    their log files' times, which time travel by timestamp reads).
    """
    if "info" not in _REFERENCE:
        location = f"{base_dir.rstrip('/')}/reference-ledger"
        if os.environ.get("PYTEST_XDIST_WORKER"):
            versions = _shared_reference(spark, Path(base_dir).parent / "reference-ledger")
            shutil.copytree(versions.pop("location"), location)
            versions["ledger"] = Ledger(spark, location)
        else:
            versions = write_reference_ledger(spark, location)
        _REFERENCE["info"] = {**versions, "location": location}
    return _REFERENCE["info"]


def _shared_reference(spark: SparkSession, shared: Path) -> dict[str, Any]:
    """The versions of the run's one reference ledger at ``shared/ledger``, written first if
    no worker has written it yet."""
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = shared / "versions.json"
        if not done.exists():
            info = write_reference_ledger(spark, str(shared / "ledger"))
            done.write_text(json.dumps({k: v for k, v in info.items() if k != "ledger"}))
        return {**json.loads(done.read_text()), "location": str(shared / "ledger")}


SECRET = "s3cr3t-Pa55word-for-tests"


def config_for(location: str, path: str | None = None) -> Any:
    """A Config for a ledger location; brokers are never contacted. P has a secret property."""
    import yaml

    from ledger.config import config_from_mapping

    raw = {"clusters": {"P": {"bootstrap.servers": "127.0.0.1:1",
                              "security.protocol": "SASL_PLAINTEXT",
                              "sasl.mechanism": "PLAIN", "sasl.username": "ledger",
                              "sasl.password": SECRET},
                        "B": {"bootstrap.servers": "127.0.0.1:2"}},
           "flows": {"P->B": True, "B->P": True},
           "ledger": {"location": location}}
    if path is not None:
        with open(path, "w") as handle:
            yaml.safe_dump(raw, handle, sort_keys=False)
    return config_from_mapping(raw, path=path)
