"""An operation's audit evidence: the checkpoints and spans its resume points came from.

A failover or failback records, beside its resume points, exactly what its audit re-derives
them from, so ``audit`` still answers once Delta time travel no longer reaches the versions the
operation recorded (log cleaned, files vacuumed past ``ledger.streamed.retention.days``, a week,
for the tables whose versions it records; the evidence keeps ``ledger.audit.retention.days``)::

    operation_checkpoints   every checkpoint row of the operation's pass (its groups)
    operation_runs          per flow partition those checkpoints were translated over, the
                            current-epoch spans the store held (ledger.spans), in write order

Invariants:
    * The spans are the ones the translation used (the same ``OffsetSyncStore`` snapshot, at
      the ``offset_syncs_version`` the operation records), and spans give every forward and
      reverse answer the raw runs give (tests/ledger/test_spans.py), so re-translating over
      the evidence is re-translating over the ledger as the operation saw it.
    * Both tables are written before the operation's ``operations`` row: an operation the
      ledger lists always has its evidence (a crash in between leaves evidence and no
      operation, which no audit reads).
    * Pure row building here; the two appends are the only I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from ledger.config import Config
from ledger.engine import LedgerEngine
from ledger.records import CheckpointRecord
from ledger.schemas import OPERATION_CHECKPOINTS, OPERATION_RUNS
from ledger.span_refresh import span_rows
from ledger.store import OffsetSyncStore
from ledger.tables import Ledger
from pipelines.checkpoint.mapping import FORWARD


def sync_partition(checkpoint: CheckpointRecord) -> tuple[str, str, int]:
    """``(flow, original topic, partition)`` whose runs translate a checkpoint.

    Forward: the group's topic is the original; reverse: its topic is the replica and the
    original is the checkpoint's target topic.
    """
    topic = (checkpoint.source_topic if checkpoint.direction == FORWARD
             else checkpoint.target_topic)
    return checkpoint.flow, topic, checkpoint.partition


def checkpoint_rows(checkpoints: Iterable[CheckpointRecord], operation_ids: Mapping[str, str],
                    checkpoints_version: int) -> list[dict]:
    """The operation_checkpoints rows: each checkpoint of a group that has an operation."""
    return [{**cp.to_row(), "operation_id": operation_ids[cp.group_id],
             "checkpoints_version": checkpoints_version}
            for cp in checkpoints if cp.group_id in operation_ids]


def run_rows(checkpoints: Iterable[CheckpointRecord], operation_ids: Mapping[str, str],
             stores: Mapping[str, OffsetSyncStore], config: Config,
             now: dt.datetime) -> list[dict]:
    """The operation_runs rows: per operation and flow partition, the store's spans."""
    wanted = sorted({(operation_ids[cp.group_id], *sync_partition(cp))
                     for cp in checkpoints if cp.group_id in operation_ids})
    rows = []
    for operation_id, flow_name, topic, partition in wanted:
        store = stores.get(flow_name)
        if store is None:
            continue  # nothing to translate over: the checkpoint says untranslatable
        flow = config.flow(flow_name)
        rows.extend({**row, "operation_id": operation_id, "offset_syncs_version": store.version}
                    for row in span_rows(store, flow.source, flow.target, now,
                                         [(topic, partition)]))
    return rows


def record(ledger: LedgerEngine | Ledger, config: Config,
           checkpoints: Iterable[CheckpointRecord | Mapping], operation_ids: Mapping[str, str],
           stores: Mapping[str, OffsetSyncStore],
           checkpoints_version: int, now: dt.datetime) -> None:
    """Append the evidence of ``operation_ids``' operations (before their operations rows).

    ``checkpoints`` may also be ``checkpoints`` rows (fixtures that write the table directly).
    """
    engine = LedgerEngine.of(ledger)
    cps = CheckpointRecord.from_rows(checkpoints)
    engine.append(OPERATION_RUNS, run_rows(cps, operation_ids, stores, config, now))
    engine.append(OPERATION_CHECKPOINTS, checkpoint_rows(cps, operation_ids, checkpoints_version))
