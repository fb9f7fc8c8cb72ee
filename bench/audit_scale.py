"""The audit of one operation against the number of operations in the ledger.

``python -m bench.audit_scale [--operations 2,200,2000] [--whole 2,200]``

Kafka-free. For each count N, a ledger is written with the project's own code
(:meth:`ledger.tables.Ledger.init`, :meth:`Ledger.append`, and the evidence rows of
:mod:`pipelines.failover.evidence` over real ``OffsetSyncStore`` snapshots): one flow ``P->B``,
topic ``Orders`` with 12 partitions of contiguous runs, and N past failovers of groups
``g0000`` .. each with 12 checkpoints, 12 resume points and their evidence. Every table gets a
handful of commits, so the operations share versions (what matters is how many operations an
audit reads, not how many versions exist).

Timed (wall seconds, one Spark session ``local[2]``, each measured twice after one warm-up run
of dbt, the lower reported):

* ``--operation X, time travel``: :func:`pipelines.audit.audit.run_audit` for the last
  operation, time travel at its recorded versions;
* ``--operation X, evidence``: the same with ``evidence=True`` (its recorded evidence);
* ``whole ledger`` (for the counts in ``--whole``): ``run_audit`` of every operation, which
  is what ``--operation X`` cost before the marts were restricted to the operations asked for.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
PARTITIONS = 12
FLOW, TOPIC = "P->B", "Orders"
T0 = dt.datetime(2026, 11, 1)


def _config(location: Path):
    from ledger.config import config_from_mapping

    raw = {"clusters": {a: {"bootstrap.servers": f"127.0.0.1:{port}"}  # never contacted
                        for a, port in (("P", 1), ("B", 2))},
           "flows": {FLOW: True},
           "ledger": {"location": str(location)}}
    return config_from_mapping(raw)


def build(spark, location: Path, operations: int):
    """The ledger with ``operations`` failovers; returns (config, last operation id)."""
    from ledger import schemas as s
    from ledger.store import OffsetSyncStore
    from ledger.tables import Ledger
    from pipelines.failover import evidence

    config = _config(location)
    ledger = Ledger(spark, str(location))
    ledger.init()

    def append(name, rows):
        ledger.append(name, spark.createDataFrame(rows, s.SCHEMAS[name]))
        return ledger.version(name)

    runs = [{"flow": FLOW, "source_cluster": "P", "target_cluster": "B", "topic": TOPIC,
             "replica_topic": f"P.{TOPIC}", "partition": p, "upstream_offset": 100 * b,
             "downstream_offset": 100 * b, "length": 100, "run_id": "r1", "batch_id": b,
             "written_at": T0 + dt.timedelta(seconds=10 * b)}
            for b in range(50) for p in range(PARTITIONS)]
    syncs_version = append(s.OFFSET_SYNCS, runs)
    groups = [f"g{i:04d}" for i in range(operations)]
    ids = {g: f"failover-{g}" for g in groups}
    checkpoints = [{"checkpoint_id": f"cp-{g}", "flow": FLOW, "direction": "forward",
                    "group_id": g, "source_cluster": "P", "source_topic": TOPIC,
                    "partition": p, "source_offset": 1234 + p, "target_cluster": "B",
                    "target_topic": f"P.{TOPIC}", "target_offset": 1234 + p,
                    "status": "translated", "reason": None, "group_rewound": False,
                    "offset_syncs_version": syncs_version, "checkpointed_at": T0}
                   for g in groups for p in range(PARTITIONS)]
    checkpoints_version = append(s.CHECKPOINTS, checkpoints)
    points_version = append(s.RESUME_POINTS, [{
        "resume_point_id": f"rp-{c['group_id']}-{c['partition']}",
        "operation_id": ids[c["group_id"]], "reason": "failover", "cluster": "B",
        "group_id": c["group_id"], "topic": c["target_topic"], "partition": c["partition"],
        "offset": c["target_offset"], "previous_offset": None,
        "checkpoint_id": c["checkpoint_id"], "direction": "forward", "source_cluster": "P",
        "source_topic": TOPIC, "source_offset": c["source_offset"],
        "offset_syncs_version": syncs_version, "checkpoints_version": checkpoints_version,
        "written_at": T0} for c in checkpoints])
    stores = {FLOW: OffsetSyncStore.load(ledger, FLOW, syncs_version)}
    evidence.record(ledger, config, checkpoints, ids, stores, checkpoints_version, T0)
    append(s.OPERATIONS, [{
        "operation_id": ids[g], "kind": "failover", "group_id": g, "from_cluster": "P",
        "to_cluster": "B", "status": "completed", "subscribe_topics": [f"P.{TOPIC}", TOPIC],
        "offset_syncs_version": syncs_version, "checkpoints_version": checkpoints_version,
        "group_offsets_version": 0, "resume_points_version": points_version,
        "reverse_checkpointing": False, "started_at": T0, "ready_at": T0,
        "seconds_to_ready": 1.0, "message": None} for g in groups])
    return config, ids[groups[-1]]


def timed(fn) -> float:
    best = float("inf")
    for _ in range(2):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def run(counts: list[int], whole: set[int]) -> list[dict]:
    from pipelines.audit.audit import run_audit
    from pipelines.spark import get_spark

    spark = get_spark("bench-audit-scale")
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    base = Path(tempfile.mkdtemp(prefix="audit-scale-"))
    try:
        for n in counts:
            config, last = build(spark, base / f"ledger-{n}", n)
            rows = run_audit(spark, config, operation=last)["resume_audit"]  # warm-up
            assert len(rows) == PARTITIONS and all(r["matches_retranslation"] for r in rows)
            result = {"operations": n,
                      "operation_time_travel_s": timed(
                          lambda c=config, o=last: run_audit(spark, c, operation=o)),
                      "operation_evidence_s": timed(
                          lambda c=config, o=last: run_audit(spark, c, operation=o,
                                                             evidence=True))}
            if n in whole:
                result["whole_ledger_s"] = timed(lambda c=config: run_audit(spark, c))
            print(json.dumps(result), flush=True)
            results.append(result)
    finally:
        spark.stop()
        shutil.rmtree(base, ignore_errors=True)
    return results


def table(results: list[dict]) -> str:
    lines = ["| operations in the ledger | `audit --operation X` (time travel) s | "
             "`--operation X --evidence` s | whole-ledger audit s |",
             "|---:|---:|---:|---:|"]
    for r in results:
        whole = f"{r['whole_ledger_s']:.1f}" if "whole_ledger_s" in r else "-"
        lines.append(f"| {r['operations']:,} | {r['operation_time_travel_s']:.1f} | "
                     f"{r['operation_evidence_s']:.1f} | {whole} |")
    return "\n".join(lines)


def _counts(text: str) -> list[int]:
    return sorted({int(v) for v in text.split(",") if v.strip()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--operations", type=_counts, default=[2, 200, 2000])
    parser.add_argument("--whole", type=_counts, default=[2, 200],
                        help="counts for which the whole-ledger audit is timed too")
    args = parser.parse_args(argv)
    logging.getLogger("py4j").setLevel(logging.ERROR)
    results = run(args.operations, set(args.whole))
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"audit-scale-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2))
    print(table(results))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
