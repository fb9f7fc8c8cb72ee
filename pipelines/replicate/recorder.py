"""Recording a flow's batches: the runs appended to ``offset_syncs``, then progress MERGEd.

:meth:`LedgerRecorder.record` of batch N appends its runs (txn ``(offset-ledger-replicate-
<flow>, N)``, on the critical path), then waits for batch N-1's MERGE, then submits N's MERGE
of ``replication_progress`` to the background thread, where it overlaps the copy of batch N+1
and the append of N+1 (another table)::

    main        append N | wait MERGE N-1 | copy N+1 ........... | append N+1 | wait MERGE N |
    background                            | MERGE N ............................. |

Engines: delta-rs (``ledger.commits``) for a path ledger whose two tables the driver's direct
read verified; Spark (``ledger.tables.Ledger``) otherwise, and for good after the first commit
delta-rs could not make. The Spark session and the ``Ledger`` are opened only when a commit or
a read needs them; with Spark copy tasks the first batch opens them in the background while it
copies.

Invariants:
    * A batch's ``offset_syncs`` append completes before its progress MERGE starts, and MERGEs
      run one at a time in batch order (N+1's is submitted only once N's has finished):
      ``replication_progress`` never claims more than ``offset_syncs`` records. Batch N+1's
      append may run while batch N's MERGE does (the diagram).
    * The engine switch (``_tables_verified``, ``_direct``, ``_declined``) is read and written
      only under ``_lock``: the background MERGE may decline delta-rs while the main thread
      appends, and a decline is for good (a later ``tables_verified`` never undoes it). The
      Spark ``Ledger`` is opened once, under ``_opening_lock``; a thread never waits for an
      opening queued behind its own work on the background thread (it opens inline instead).
    * Both engines write the same commit for a batch (the same txn pair, the same MERGE on the
      natural key), so switching engines after a failure records a batch at most once.
    * A failed append or MERGE raises :class:`ReplicationError` naming the flow and batch; no
      cluster property (secrets) is part of the message.
    * delta-rs keeps each table open between batches (``_opened``, one ``DeltaTable`` per table,
      each used by one thread): a commit reads only the log entries written since the last one
      (none but its own, unless another flow's job wrote), never the whole log again, whose
      checkpoint and folder grow with the table's retention (``bench.log_growth``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ledger import commits, direct
from ledger.errors import OffsetLedgerError, first_line
from ledger.records import ProgressRecord
from ledger.records import rows as record_rows
from ledger.schemas import NATURAL_KEYS, OFFSET_SYNCS, REPLICATION_PROGRESS, TABLES, spark_schema

if TYPE_CHECKING:
    from ledger.tables import Ledger

LEDGER_WRITES = ("auto", "spark")


class ReplicationError(OffsetLedgerError):
    """A batch could not be recorded (the ledger append or MERGE failed, ...)."""


class LedgerRecorder:
    """One flow's ledger writes, and the Spark ``Ledger`` when something needs it.

    Args:
        location: ``ledger.location``.
        flow: the flow's name (the txn app id is ``offset-ledger-replicate-<flow>``).
        session: returns the SparkSession, starting it on the first call.
        ledger_writes: ``auto`` (delta-rs where it can) or ``spark``.
    """

    def __init__(self, location: str, flow: str, session: Callable[[], Any], *,
                 ledger_writes: str = "auto") -> None:
        if ledger_writes not in LEDGER_WRITES:
            raise ValueError(f"ledger_writes must be auto or spark, not {ledger_writes!r}")
        self.location, self.flow = location, flow
        self.app_id = f"offset-ledger-replicate-{flow}"
        self._session = session
        self._ledger_writes = ledger_writes
        self.ledger: Ledger | None = None
        self.seconds = 0.0  # on the critical path: appends and waits for a MERGE
        # The engine switch, shared by the main thread (appends) and the background (MERGEs).
        self._lock = threading.Lock()
        self._tables_verified = False
        self._direct = False
        self._declined = False  # delta-rs could not make a commit: Spark's from then on
        self._opening_lock = threading.Lock()  # guards ``ledger`` and ``_opening``
        # A streaming driver holds the flow's lease: a batch number someone else recorded means
        # another writer, and its runs must not be dropped silently.
        self.exclusive = False
        self._background = ThreadPoolExecutor(max_workers=1,
                                              thread_name_prefix="offset-ledger-progress")
        self._opening: Future[Ledger] | None = None
        self._progress_write: Future[None] | None = None
        self._opened: direct.Tables = {}

    def tables_verified(self, verified: bool) -> None:
        """The driver's direct read found both tables readable (or not): commit with delta-rs."""
        with self._lock:
            self._tables_verified = verified
            self._direct = verified and self._ledger_writes == "auto" and not self._declined

    @property
    def direct_possible(self) -> bool:
        """Whether delta-rs may commit at all (a local path ledger, writes not forced to
        Spark); a catalog or object-store ledger commits with Spark."""
        return self._ledger_writes == "auto" and direct.local_path(self.location) is not None

    @property
    def direct(self) -> bool:
        """Whether the next commits go through delta-rs."""
        with self._lock:
            return self._direct

    def _decline(self) -> None:
        """delta-rs could not make a commit: every later commit goes through Spark."""
        with self._lock:
            self._direct, self._declined = False, True

    # --- the Spark ledger, when first needed -------------------------------------------------

    def _open(self) -> Ledger:
        from ledger.tables import Ledger  # Spark's: a copy-only install commits with delta-rs

        ledger = Ledger(self._session(), self.location)
        with self._lock:
            verified = self._tables_verified
        if not verified:  # else the two tables written here were read already
            ledger.init()
        return ledger

    def _open_and_warm(self) -> Ledger:
        ledger = self._open()
        # Delta's classes and the two tables' snapshots load now, so the batch's append and
        # MERGE do not pay for them on the critical path.
        for name in (OFFSET_SYNCS, REPLICATION_PROGRESS):
            ledger.read(name).schema
        return ledger

    def open_while_copying(self) -> None:
        """Open the Spark ledger in the background, unless delta-rs makes the commits."""
        if self.direct or not self._opening_lock.acquire(blocking=False):
            return  # delta-rs commits, or a thread is opening the ledger right now
        try:
            if self.ledger is None and self._opening is None:
                self._opening = self._background.submit(self._open_and_warm)
        finally:
            self._opening_lock.release()

    def ledger_now(self) -> Ledger:
        """The initialised Spark ledger (its tables created or checked on the first call)."""
        with self._opening_lock:
            if self.ledger is None:
                opening, self._opening = self._opening, None
                if opening is not None and opening.cancel():
                    # Still queued behind the background's current work (perhaps the caller
                    # itself, a MERGE that fell back to Spark): waiting would never end.
                    opening = None
                self.ledger = opening.result() if opening is not None else self._open()
            return self.ledger

    # --- one batch ---------------------------------------------------------------------------

    def record(self, rows: list[tuple], progress: list[ProgressRecord], batch: int) -> None:
        """Append the batch's runs now; MERGE its progress in the background afterwards."""
        started = time.perf_counter()
        try:
            self._append(rows, batch)
        except Exception as exc:
            raise ReplicationError(f"flow {self.flow}: recording batch {batch} failed: "
                                   f"{first_line(exc)}") from exc
        finally:
            self.seconds += time.perf_counter() - started
        self.wait_for_progress()
        self._progress_write = self._background.submit(self._merge, progress)

    def _append(self, rows: list[tuple], batch: int) -> None:
        if self.direct:
            names = TABLES[OFFSET_SYNCS].column_names
            outcome = commits.append_with_txn(self.location, OFFSET_SYNCS,
                                              [dict(zip(names, r, strict=True)) for r in rows],
                                              app_id=self.app_id, version=batch,
                                              opened=self._opened)
            if outcome is commits.ALREADY_RECORDED and self.exclusive:
                raise ReplicationError(f"batch {batch} of flow {self.flow} was recorded by "
                                       f"another writer: is another replicate job running?")
            if outcome is not commits.UNAVAILABLE:
                return
            self._decline()
        ledger = self.ledger_now()
        ledger.append(OFFSET_SYNCS, ledger.spark.createDataFrame(rows, spark_schema(OFFSET_SYNCS)),
                      txn_app_id=self.app_id, txn_version=batch)

    def _merge(self, progress: list[ProgressRecord]) -> None:
        if self.direct:
            if commits.merge_on_keys(self.location, REPLICATION_PROGRESS, record_rows(progress),
                                     NATURAL_KEYS[REPLICATION_PROGRESS],
                                     self._opened) is commits.COMMITTED:
                return
            self._decline()
        ledger = self.ledger_now()
        ledger.merge(REPLICATION_PROGRESS,
                     ledger.spark.createDataFrame(record_rows(progress),
                                                  spark_schema(REPLICATION_PROGRESS)))

    def wait_for_progress(self) -> None:
        """Wait for the last batch's MERGE; raise :class:`ReplicationError` if it failed."""
        if self._progress_write is None:
            return
        started = time.perf_counter()
        try:
            self._progress_write.result()
        except Exception as exc:
            raise ReplicationError(f"flow {self.flow}: replication_progress MERGE failed: "
                                   f"{first_line(exc)}") from exc
        finally:
            self._progress_write = None
            self.seconds += time.perf_counter() - started

    def close(self) -> None:
        try:
            self.wait_for_progress()
        finally:
            self._background.shutdown(wait=True, cancel_futures=True)
