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
    * :func:`read_flow_state_direct` answers exactly what :func:`read_flow_state` answers, with
      the same predicates, but through delta-rs without a JVM (``ledger.direct``); ``None``
      when the ledger cannot be read that way or has no ``offset_syncs`` folder, and then the
      caller reads with Spark. Only an installation without Spark (a copy-only
      ``pip install offset-ledger``) has delta-rs create a new ledger's tables instead.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass, field

from ledger import clock, commits, direct
from ledger.schemas import OFFSET_SYNCS, REPLICATION_PROGRESS
from ledger.tables import Ledger
from pipelines.replicate.plan import TP, RecordedTail


@dataclass
class FlowState:
    tails: dict[TP, RecordedTail] = field(default_factory=dict)
    last_batch: int = -1
    newest_written_at: dt.datetime | None = None
    # Read without a JVM from existing tables that have the ledger schema's columns: a writer
    # may append and MERGE without checking the tables again with Spark.
    tables_verified: bool = False


def _since(hints: Iterable[dict], wanted: set[TP], flow_sql: str) -> str:
    """The ``offset_syncs`` predicate: the flow's runs written since the oldest hint."""
    since = [r["updated_at"] for r in hints if (r["topic"], r["partition"]) in wanted]
    where = f"flow = '{flow_sql}'"
    if since:
        # An explicit zone: neither engine's session time zone changes the bound.
        oldest = min(clock.aware(t) for t in since)
        where += f" AND written_at >= TIMESTAMP '{oldest:%Y-%m-%d %H:%M:%S.%f}Z'"
    return where


def _state(rows: Iterable[dict]) -> FlowState:
    state = FlowState()
    for r in rows:
        state.last_batch = max(state.last_batch, int(r["last_batch"]))
        newest = clock.aware(r["newest"])
        if state.newest_written_at is None or (newest and newest > state.newest_written_at):
            state.newest_written_at = newest
        state.tails[(r["topic"], r["partition"])] = RecordedTail(int(r["tail_u"]),
                                                                 int(r["tail_d"]))
    return state


def read_flow_state(ledger: Ledger, flow: str, partitions: Iterable[TP]) -> FlowState:
    """The newest recorded run of each partition of ``flow`` and the flow's last batch number."""
    wanted = set(partitions)
    spark = ledger.spark
    flow_sql = flow.replace("'", "''")
    hints = spark.sql(
        f"SELECT topic, partition, updated_at FROM {ledger.identifier(REPLICATION_PROGRESS)} "
        f"WHERE flow = '{flow_sql}'").collect()
    where = _since([r.asDict() for r in hints], wanted, flow_sql)
    rows = spark.sql(f"""
        SELECT topic, partition,
               max_by(named_struct('u', upstream_offset + length,
                                   'd', downstream_offset + length),
                      named_struct('w', written_at, 'b', batch_id,
                                   'd', downstream_offset)) AS tail,
               max(batch_id) AS last_batch, max(written_at) AS newest
        FROM {ledger.identifier(OFFSET_SYNCS)} WHERE {where}
        GROUP BY topic, partition""").collect()
    return _state({**r.asDict(), "tail_u": r["tail"]["u"], "tail_d": r["tail"]["d"]}
                  for r in rows)


def read_flow_state_direct(location: str, flow: str, partitions: Iterable[TP]
                           ) -> FlowState | None:
    """:func:`read_flow_state` without a JVM (delta-rs); ``None``: read it with Spark."""
    wanted = set(partitions)
    flow_sql = flow.replace("'", "''")
    hints = direct.query(location, {"p": REPLICATION_PROGRESS},
                         f"SELECT topic, \"partition\", updated_at FROM p "
                         f"WHERE flow = '{flow_sql}'")
    if hints is direct.UNAVAILABLE:
        return None
    where = _since([] if hints is direct.ABSENT else hints, wanted, flow_sql)
    # DataFusion has no max_by: last_value over the same ordering picks the same run.
    order = "ORDER BY written_at, batch_id, downstream_offset"
    rows = direct.query(location, {"s": OFFSET_SYNCS}, f"""
        SELECT topic, "partition",
               last_value(upstream_offset + length {order}) AS tail_u,
               last_value(downstream_offset + length {order}) AS tail_d,
               max(batch_id) AS last_batch, max(written_at) AS newest
        FROM s WHERE {where}
        GROUP BY topic, "partition"
    """)
    if rows is direct.ABSENT and importlib.util.find_spec("pyspark") is None \
            and commits.create_missing_tables(location) not in ([], commits.UNAVAILABLE):
        # A copy-only installation (no Spark to ask): delta-rs created the new ledger's tables.
        return read_flow_state_direct(location, flow, wanted)
    if rows is direct.UNAVAILABLE or rows is direct.ABSENT:
        # No offset_syncs folder: a new ledger, or one this process does not see where Spark
        # does. Never plan from "nothing recorded" without Spark's word (that would copy the
        # whole history again): Spark reads it, or creates the tables.
        return None
    state = _state(rows)
    state.tables_verified = hints is not direct.ABSENT
    return state
