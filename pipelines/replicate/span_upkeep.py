"""The replicator keeping its flow's span snapshot close to the runs it appends.

Every verb that reads a flow's store (``status``, ``translate``, ``failover``, a checkpoint
pass) reads its span snapshot and coalesces the runs written after it (:mod:`ledger.span_refresh`).
A checkpoint pass refreshes the snapshot, but a flow of a thousand partitions appends hundreds
of runs a commit: between two scheduled passes (or with none running, as in a disaster drill)
the tail grows by tens of thousands of runs, and each store load pays for them. So the
replicator refreshes it too, off the copy path::

    main (record_batch)   append N | appended(runs) -> counted >= ledger.spans.refresh.runs?
    offset-ledger-spans                              | tail_outgrew? -> refresh ........ |

Invariants:
    * Only delta-rs does the work (a local path ledger the recorder commits to directly): the
      replicator never starts Spark for it, and a catalog or object-store ledger is left to
      ``checkpoint`` and ``ledger maintain``.
    * At most one refresh runs at a time, on its own thread: never on the critical path of a
      batch, never behind the progress MERGE of :mod:`pipelines.replicate.recorder`.
    * A refresh is an optimisation of reads: the snapshot is derived from ``offset_syncs`` and
      every load gives the same spans with or without it. A failed one (a concurrent
      ``ledger maintain`` or checkpoint refresh committed first, a tail too long for delta-rs)
      is logged as a warning naming the flow, and replication carries on.
    * The rule is :func:`ledger.span_refresh.tail_outgrew` (``runs`` runs and at least the
      snapshot's spans), checked each time the replicator has appended ``runs`` more runs.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

from ledger import commits
from ledger.config import DEFAULT_SPANS_WINDOW
from ledger.engine import LedgerEngine
from ledger.errors import first_line
from ledger.schemas import OFFSET_SYNC_SPANS
from ledger.span_refresh import RefreshReport, refresh, tail_outgrew

log = logging.getLogger(__name__)


class SpanUpkeep:
    """Refreshes one flow's span snapshot in the background as its runs accumulate.

    Args:
        location: ``ledger.location``.
        flow: the flow's name.
        clusters: the flow's ``(source, target)`` aliases, as its snapshot rows name them.
        runs: ``ledger.spans.refresh.runs``.
    """

    def __init__(self, location: str, flow: str, clusters: tuple[str, str], runs: int,
                 window: int = DEFAULT_SPANS_WINDOW) -> None:
        self.location, self.flow, self.clusters, self.runs = location, flow, clusters, runs
        self.window = window
        self.counted = 0
        self.reports: list[RefreshReport] = []
        self._thread: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None

    def appended(self, runs: int, direct: bool) -> None:
        """``runs`` more runs were appended (through delta-rs when ``direct``)."""
        self.counted += runs
        if not direct or self.counted < self.runs:
            return
        if self._pending is not None and not self._pending.done():
            return  # the running refresh reads these runs too, or the next check will
        self.counted = 0
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1,
                                              thread_name_prefix="offset-ledger-spans")
        self._pending = self._thread.submit(self._refresh)

    def _refresh(self) -> None:
        engine = LedgerEngine(self.location)  # no session factory: delta-rs or nothing
        try:
            if not engine.exists(OFFSET_SYNC_SPANS):
                # A ledger whose tables replicate created without it (an older release, a
                # copy-only install): created as `ledger init` would, nothing else touched.
                commits.create_missing_tables(self.location)
            if not tail_outgrew(engine, self.flow, self.runs):
                return
            for report in refresh(engine, {self.flow: self.clusters}, only=[self.flow],
                                  window=self.window):
                self.reports.append(report)
                log.info("%s", report.line().strip())
        except Exception as exc:
            log.warning("flow %s: span snapshot refresh skipped (reads stay exact, only "
                        "slower): %s", self.flow, engine.declined or first_line(exc))

    def wait(self) -> None:
        """Wait for the refresh in flight, if any (it never raises)."""
        if self._pending is not None:
            self._pending.result()

    def close(self) -> None:
        """Let a running refresh finish (its commit is one Delta commit); drop none queued."""
        if self._thread is not None:
            self._thread.shutdown(wait=True, cancel_futures=True)
