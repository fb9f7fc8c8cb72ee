"""What a failover or failback returns and prints: one result per group.

Invariants:
    * ``--format json`` with one group prints one object (the shape tools already parse); with
      several, ``{"operations": [...]}`` in the order the groups were given.
    * Each result shows only its own group's translations and writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.records import CheckpointRecord
from pipelines.args import indented_json
from pipelines.checkpoint.compute import OffsetWrite
from pipelines.checkpoint.engine import CheckpointResult
from pipelines.checkpoint.report import render, translation_rows


@dataclass
class OperationResult:
    operation_id: str
    kind: str
    group: str
    source: str
    target: str
    subscribe: list[str]
    checkpoint: CheckpointResult
    start_writes: list[OffsetWrite]
    seconds_to_ready: float
    dry_run: bool
    mode: str = "continuous"
    replication_lag: int = 0
    acl_check: dict | None = None   # pipelines.acls.check.AclCheck.as_dict()

    @property
    def checkpoints(self) -> list[CheckpointRecord]:
        return self.checkpoint.of_group(self.group)[0]

    @property
    def writes(self) -> list[OffsetWrite]:
        return self.checkpoint.of_group(self.group)[1]

    def as_dict(self) -> dict:
        return {
            "operation_id": self.operation_id, "kind": self.kind, "group": self.group,
            "from": self.source, "to": self.target, "dry_run": self.dry_run, "mode": self.mode,
            "subscribe": self.subscribe, "seconds_to_ready": round(self.seconds_to_ready, 3),
            "replication_lag_records": self.replication_lag,
            "translations": translation_rows(self.checkpoints),
            "offsets_written": [
                {"topic": w.topic, "partition": w.partition, "offset": w.offset,
                 "previous_offset": w.previous_offset}
                for w in self.writes + self.start_writes],
            "ledger_versions": self.checkpoint.versions,
            "acl_check": self.acl_check,
        }



def print_result(results: list[OperationResult], fmt: str) -> None:
    if fmt == "json":
        doc = results[0].as_dict() if len(results) == 1 else {
            "operations": [r.as_dict() for r in results]}
        print(indented_json(doc, default=str))
        return
    for result in results:
        verb = "would resume" if result.dry_run else "resumes"
        print(f"{result.kind} {result.operation_id}{' (dry run)' if result.dry_run else ''} "
              f"({result.mode}): group {result.group} {result.source} -> {result.target}, "
              f"ready in {result.seconds_to_ready:.1f}s")
        print(f"subscribe on {result.target}: {', '.join(result.subscribe)}")
        if result.acl_check is not None:
            print(f"ACLs on {result.target}: {result.acl_check['status']} "
                  f"({len(result.acl_check['checked'])} checked)")
        print(render(translation_rows(result.checkpoints)))
        for w in result.start_writes:
            print(f"{result.group} {verb} at {result.target}:{w.topic}[{w.partition}] offset "
                  f"{w.offset} (log start: never consumed by this group)")
    first = results[0]
    if first.replication_lag:
        print(f"replication lags {first.replication_lag:,} record(s) behind the end on "
              f"{first.source}: they keep replicating (keep `offset-ledger replicate` running) "
              f"and the group(s) read them on {first.target}")
    if not first.dry_run:
        print(f"ledger versions: {first.checkpoint.versions}")
