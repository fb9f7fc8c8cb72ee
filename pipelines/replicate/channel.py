"""The runs channel of a streaming flow: how long-running copy tasks tell the driver what landed.

A streaming copy task never ends, so it cannot return its runs as a batch's tasks do. It
produces them instead, as small JSON messages, to an internal topic on the **target** cluster
(as MirrorMaker 2 keeps its offset-syncs and Connect offsets in Kafka), and the driver consumes
them and commits them to Delta every ``--commit-interval``::

    task --records--> replica topics (target)          driver --every commit interval-->
    task --runs-----> offset-ledger-runs.<S>-<T>.internal  p0 -->  Delta offset_syncs
    task <--stop----- offset-ledger-runs.<S>-<T>.internal  p1 <--  driver (control)

Partition 0 carries runs and errors (tasks -> driver) and the drivers' lease and sync marks,
partition 1 stop requests (driver -> tasks). The driver consumes partition 0 in the consumer
group :func:`group_name`; holding partition 0 there is the flow's **lease**: one streaming
driver per flow, and an active member tells ``failover --catch-up`` that a job streams the flow
(it then waits for its commits). Each driver writes a lease message when it takes the lease; a
driver that reads another's after its own was replaced by a newer job (it stops).

Invariants:
    * A task publishes a partition's runs only after every record in them was acknowledged
      (at-least-once), or in the same Kafka transaction as the records (exactly-once); the
      driver reads ``read_committed``, so a run of an aborted transaction is never seen.
    * :func:`accept` is the one rule, applied alike live and when Delta catches up after a
      crash: a part is recorded only if it continues the partition's recorded chain (it was read
      from at or before where the recorded runs end, its first run starts at or after that end,
      and lands at or after the recorded downstream end). Accepted runs therefore never
      overlap, never leave an upstream hole, and never go down in the replica (no false epoch);
      a rejected part's copies are duplicates that no run maps.
    * Messages hold no cluster property (secrets never enter the channel).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger import spans
from ledger.translation import Run
from ledger.writer import PartitionSummary
from pipelines.replicate.plan import TP, RecordedTail

RUNS_PARTITION = 0
CONTROL_PARTITION = 1
# Deleted, never compacted: a message is needed only until the driver committed it to Delta.
TOPIC_CONFIGS = {"cleanup.policy": "delete", "retention.ms": str(7 * 24 * 3600 * 1000),
                 "segment.ms": str(3600 * 1000)}


def topic_name(source: str, target: str) -> str:
    """``offset-ledger-runs.P-B.internal``: internal by ``ledger.policy`` (never replicated)."""
    return f"offset-ledger-runs.{source}-{target}.internal"


def group_name(source: str, target: str) -> str:
    """The driver's consumer group: an active member = a streaming job runs for the flow."""
    return f"offset-ledger-replicate.{source}-{target}"


@dataclass(frozen=True)
class Delivered:
    """One task's report for one partition: runs acknowledged since its previous report.

    ``start`` is where the task's read of these runs began (the end of its previous report's
    runs, or where the task started): every record in ``[start, runs[0].upstream_offset)`` was
    a transaction marker or an aborted record. Latency is send time (the record's CreateTime)
    to its delivery report, over ``records`` records.
    """

    topic: str
    replica_topic: str
    partition: int
    start: int
    runs: tuple[Run, ...]
    position: int  # next upstream offset the task reads (markers passed)
    records: int
    bytes: int
    newest_timestamp_ms: int | None
    delivered_at_ms: int
    latency_max_ms: int
    latency_sum_ms: int
    task: str = ""

    @property
    def key(self) -> TP:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class RecordedCommit:
    """What one Delta commit of a streaming driver recorded (the metrics hook's argument)."""

    batch_id: int
    committed_at: dt.datetime
    parts: list[Delivered] = field(default_factory=list)


@dataclass(frozen=True)
class TaskError:
    """A task could not copy a partition: ``topic_level`` refuses the topic, else restart.

    ``message`` is one line classified by ``pipelines.edge.kafka_errors``, ``kind`` its kind (an
    authentication or TLS failure stops the flow)."""

    task: str
    topic: str
    partition: int
    message: str
    topic_level: bool
    kind: str = ""


# --- messages ------------------------------------------------------------------------------


def encode_runs(task: str, parts: list[Delivered]) -> bytes:
    return json.dumps({"kind": "runs", "task": task, "parts": [
        {"t": d.topic, "r": d.replica_topic, "p": d.partition, "s": d.start,
         "runs": [[r.upstream_offset, r.downstream_offset, r.length] for r in d.runs],
         "pos": d.position, "n": d.records, "b": d.bytes, "ts": d.newest_timestamp_ms,
         "at": d.delivered_at_ms, "lmax": d.latency_max_ms, "lsum": d.latency_sum_ms}
        for d in parts]}, separators=(",", ":")).encode()


def encode_error(error: TaskError) -> bytes:
    return json.dumps({"kind": "error", "task": error.task, "t": error.topic,
                       "p": error.partition, "error": error.message,
                       "topic_level": error.topic_level, "k": error.kind}).encode()


def encode_stop(tasks: list[str]) -> bytes:
    return json.dumps({"kind": "stop", "tasks": tasks}).encode()


def encode_sync(mark: str) -> bytes:
    return json.dumps({"kind": "sync", "id": mark}).encode()


def encode_lease(driver: str) -> bytes:
    """A driver took the lease (written once, when it starts): a driver that reads another
    driver's lease message after its own was replaced by a newer job and stops."""
    return json.dumps({"kind": "lease", "driver": driver}).encode()


def lease_holder(decoded: Any) -> str | None:
    """The driver named by a lease message (``decode``'s output), else None."""
    if isinstance(decoded, dict) and decoded.get("kind") == "lease":
        return str(decoded.get("driver", ""))
    return None


def decode(value: bytes | None) -> list[Delivered] | TaskError | dict[str, Any] | None:
    """Runs (a list), an error, a control dict; None for anything unreadable (skipped)."""
    try:
        msg = json.loads(value or b"")
    except ValueError:
        return None
    if not isinstance(msg, dict):
        return None
    kind, task = msg.get("kind"), str(msg.get("task", ""))
    if kind == "runs":
        return [Delivered(p["t"], p["r"], int(p["p"]), int(p["s"]),
                          tuple(Run(int(u), int(d), int(n)) for u, d, n in p["runs"]),
                          int(p["pos"]), int(p["n"]), int(p["b"]), p.get("ts"), int(p["at"]),
                          int(p["lmax"]), int(p["lsum"]), task) for p in msg["parts"]]
    if kind == "error":
        return TaskError(task, msg["t"], int(msg["p"]), str(msg["error"]),
                         bool(msg.get("topic_level")), str(msg.get("k", "")))
    return msg


# --- the acceptance rule --------------------------------------------------------------------


def accept(part: Delivered, tail: RecordedTail | None, floor: int | None = None) -> bool:
    """Whether ``part`` continues its partition's recorded chain (see the module invariants).

    ``tail``: where the recorded (and accepted) runs of the current epoch end; ``floor``: for a
    partition without a tail, the offset its copy was started from (None: any start).
    """
    if not part.runs:
        return False
    first = part.runs[0]
    if tail is None:
        return floor is None or part.start <= floor <= first.upstream_offset
    return (part.start <= tail.upstream_end <= first.upstream_offset
            and first.downstream_offset >= tail.downstream_end)


def advance(tail: RecordedTail | None, part: Delivered) -> RecordedTail:
    """The tail after ``part`` was accepted."""
    last = max(part.runs, key=lambda r: r.downstream_offset)
    return RecordedTail(last.upstream_end, last.downstream_end)


def summaries(parts: list[Delivered]) -> list[PartitionSummary]:
    """Accepted parts folded per partition, runs in delivery order (one Delta commit's rows)."""
    by_tp: dict[TP, list[Delivered]] = {}
    for d in parts:
        by_tp.setdefault(d.key, []).append(d)
    out = []
    for (topic, partition), ds in by_tp.items():
        stamps = [d.newest_timestamp_ms for d in ds if d.newest_timestamp_ms is not None]
        # Reports split runs where a task reported; the ledger keeps runs maximal (writer).
        runs = spans.coalesce(r for d in ds for r in d.runs)
        out.append(PartitionSummary(topic, ds[0].replica_topic, partition, tuple(runs),
                                    sum(d.records for d in ds),
                                    max(stamps) if stamps else None))
    return out


def positions_after(parts: list[Delivered], positions: Mapping[TP, int]) -> dict[TP, int]:
    """Positions moved to the parts' read positions (markers passed), never backwards."""
    out = dict(positions)
    for d in parts:
        out[d.key] = max(out.get(d.key, 0), d.position)
    return out
