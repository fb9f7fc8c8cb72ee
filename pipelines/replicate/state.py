"""What the ledger says about a flow's replication: the newest run per partition, batch numbers.

Invariants:
    * The ledger (``offset_syncs``) is the truth. ``replication_progress`` is only a hint that
      bounds the read: it is MERGEd after each batch's append, so every partition's newest run
      was written at or after the oldest ``updated_at`` among the progress rows of the
      partitions asked for, and the read of ``offset_syncs`` is limited to runs written since
      then (Delta skips older files by their ``written_at`` statistics). Without progress rows
      (a flow's first pass, or progress lost) the flow's runs are read in full once.
    * Batch numbers (``batch_id``, also the Delta ``txnVersion``) increase with ``written_at``
      in a flow, so the newest batch number is among the runs read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

from ledger.schemas import OFFSET_SYNCS, REPLICATION_PROGRESS
from ledger.tables import Ledger
from pipelines.replicate.plan import TP, RecordedTail


@dataclass
class FlowState:
    tails: dict[TP, RecordedTail] = field(default_factory=dict)
    last_batch: int = -1
    newest_written_at: dt.datetime | None = None


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    # PySpark returns timestamps as naive local times.
    return None if value is None else value.astimezone(dt.UTC)


def read_flow_state(ledger: Ledger, flow: str, partitions: Iterable[TP]) -> FlowState:
    """The newest recorded run of each partition of ``flow`` and the flow's last batch number."""
    wanted = set(partitions)
    spark = ledger.spark
    flow_sql = flow.replace("'", "''")
    hints = spark.sql(
        f"SELECT topic, partition, updated_at FROM {ledger.identifier(REPLICATION_PROGRESS)} "
        f"WHERE flow = '{flow_sql}'").collect()
    since = [r["updated_at"] for r in hints if (r["topic"], r["partition"]) in wanted]
    where = f"flow = '{flow_sql}'"
    if since:
        oldest = min(since)
        where += f" AND written_at >= TIMESTAMP '{oldest:%Y-%m-%d %H:%M:%S.%f}'"
    rows = spark.sql(f"""
        SELECT topic, partition,
               max_by(named_struct('u', upstream_offset + length,
                                   'd', downstream_offset + length),
                      named_struct('w', written_at, 'b', batch_id,
                                   'd', downstream_offset)) AS tail,
               max(batch_id) AS last_batch, max(written_at) AS newest
        FROM {ledger.identifier(OFFSET_SYNCS)} WHERE {where}
        GROUP BY topic, partition""").collect()
    state = FlowState()
    for r in rows:
        state.last_batch = max(state.last_batch, int(r["last_batch"]))
        newest = _utc(r["newest"])
        if state.newest_written_at is None or (newest and newest > state.newest_written_at):
            state.newest_written_at = newest
        state.tails[(r["topic"], r["partition"])] = RecordedTail(int(r["tail"]["u"]),
                                                                 int(r["tail"]["d"]))
    return state
