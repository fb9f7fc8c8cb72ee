"""``status --format prometheus``: the numbers ``status`` gathered, as a textfile for a cron job.

A renderer beside ``pipelines.status.render``'s table and JSON, over the same
:class:`~pipelines.status.render.Report`; the names and labels are those the running jobs
serve (:mod:`pipelines.metrics.definitions`), so one dashboard and one rules file serve both.
Gauges only; times are Unix seconds, ``rpo`` and ``lag_seconds`` are as of ``report.at``.

Invariants:
    * A flow whose cluster could not be read exports ``offset_ledger_flow_unreadable 1`` and no
      partition numbers (never zeros that would read as caught up).
    * A partition with only transaction markers or aborted records left has lag 0, as in the
      jobs (they are never copied).
    * Groups export readiness only for a move they have (committed offsets on the source that
      the flow translates); a group with nothing to move exports nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pipelines.metrics.definitions import Metrics
from pipelines.metrics.export import exposition


def _ts(t: dt.datetime | None) -> float | None:
    return None if t is None else t.timestamp()


def status_metrics(report: Any) -> Metrics:
    """A :class:`Metrics` (no process collectors) holding ``report``'s numbers."""
    m = Metrics("status", process_collectors=False)
    at = report.at.timestamp()
    m.status_at.set(at)
    m.status_exit.set(report.exit_code)
    for f in report.flows:
        flow = (f.source, f.target)
        m.flow_error.labels(*flow).set(0 if f.error is None else 1)
        if f.error is not None and not f.partitions:
            continue
        m.flow_caught_up.labels(*flow).set(1 if f.caught_up else 0)
        for family, value in ((m.last_run, _ts(f.last_run)), (m.heartbeat, _ts(f.heartbeat))):
            if value is not None:
                family.labels(*flow).set(value)
        for p in f.partitions:
            labels = (*flow, p.replica_topic, p.topic, str(p.partition))
            lag = 0 if p.caught_up else p.lag
            newest = _ts(p.newest_record)
            m.end_offset.labels(*labels).set(p.end)
            m.recorded_offset.labels(*labels).set(p.replicated_to)
            m.lag_records.labels(*labels).set(lag)
            m.caught_up.labels(*labels).set(1 if p.caught_up else 0)
            covered = at if p.caught_up else newest
            if newest is not None:
                m.newest_record.labels(*labels).set(newest)
            if lag == 0:
                m.lag_seconds.labels(*labels).set(0)
            elif newest is not None:
                m.lag_seconds.labels(*labels).set(max(0.0, at - newest))
            if covered is not None:
                m.covered_at.labels(*labels).set(covered)
                m.rpo.labels(*labels).set(max(0.0, at - covered))
    for g in report.groups:
        if not g.applicable:
            continue
        labels = (g.source, g.target, g.group)
        m.group_ready.labels(*labels).set(1 if g.ready else 0)
        m.group_missing.labels(*labels).set(g.missing)
        m.cutoff_ready.labels(*labels).set(1 if g.cutoff_ready else 0)
        if g.checkpoint is not None:
            m.newest_checkpoint.labels(*labels).set(g.checkpoint.newest.timestamp())
    return m


def to_prometheus(report: Any) -> str:
    """The text exposition format (what node exporter's textfile collector reads)."""
    return exposition(status_metrics(report).registry)
