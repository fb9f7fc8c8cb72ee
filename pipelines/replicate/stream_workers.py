"""Where streaming copy tasks run: worker processes of the driver, or long-running Spark tasks.

    LocalStreams   one spawned process per task (a plain program whose Spark would be local)
    SparkStreams   one single-task Spark job per task, in a driver thread (a cluster,
                   spark-submit, Databricks); a job group per task, cancelled to kill it;
                   one task slot fewer than the registered executors have (below)

Both only start and watch tasks: the task itself (``stream_task.run``) reports its runs and
errors on the runs channel, and stops when the driver asks there (``channel``), so stopping and
reporting work alike on both.

Why these are not ``executors``' pools: a bounded copy is a function call whose result is the
batch (a pool of futures; a lost worker's group runs once more from the same planned offsets),
a streaming task has no result and must never re-run from its start offsets (they are stale
once it copied). They share the choice of local or Spark (``executors.use_local``), the slot
count (``plan.task_slots``), the workers' parent watch and the copy code itself (``sink``).

Invariants:
    * :meth:`finished` returns each task that ended, once, with whether it ended cleanly.
    * A Spark task is never retried with its original start offsets (they are stale once it
      copied): a retried attempt returns at once, the job ends, and the driver starts a new
      task from the ledger's position. Speculation must be off (``job``).
    * A streaming Spark task holds its slot for as long as it runs, so one slot is always left
      to the driver's own Spark jobs (a catalog ledger's commits and reads, a fallback from
      delta-rs), which would otherwise wait behind the copy tasks for ever. A cluster with a
      single slot streams only with a ledger committed by delta-rs (a local path).
    * Local workers die with the driver (``executors.watch_parent``) and ignore the signals
      sent to the process group, which the driver handles (it asks its tasks to stop).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
import time
from typing import Any

from ledger.errors import OffsetLedgerError, first_line
from pipelines.replicate import plan
from pipelines.replicate.executors import local_master, stop_signals_held, watch_parent
from pipelines.replicate.stream_task import StreamSpec, TaskFailed, run

log = logging.getLogger(__name__)


def _local_main(spec: StreamSpec, parent: int) -> None:
    watch_parent(parent)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run(spec)
    except Exception as exc:  # TaskFailed is one classified line; anything else, its first
        log.error("task %s failed: %s", spec.task, first_line(exc))
        sys.exit(3)


class LocalStreams:
    """Streaming tasks as spawned processes of this machine."""

    def __init__(self, master: str | None = None) -> None:
        self.slots = plan.task_slots(master or local_master() or "local[*]", os.cpu_count() or 1)
        self._ctx = multiprocessing.get_context("spawn")
        self._procs: dict[str, Any] = {}

    def start(self, spec: StreamSpec) -> None:
        proc = self._ctx.Process(target=_local_main, args=(spec, os.getpid()),
                                 name=f"offset-ledger-{spec.task}", daemon=True)
        with stop_signals_held():
            proc.start()
        self._procs[spec.task] = proc

    def finished(self) -> list[tuple[str, bool]]:
        done = [(t, p.exitcode == 0) for t, p in self._procs.items() if p.exitcode is not None]
        for t, _ in done:
            self._procs.pop(t).close()
        return done

    def alive(self, task: str) -> bool:
        proc = self._procs.get(task)
        return proc is not None and proc.exitcode is None

    def wait(self, tasks: list[str], timeout: float) -> None:
        """Wait for ``tasks`` to end; kill those still running after ``timeout``."""
        for t in tasks:
            proc = self._procs.get(t)
            if proc is None:
                continue
            proc.join(timeout)
            if proc.exitcode is None:
                log.warning("task %s did not stop within %.0fs: killed", t, timeout)
                proc.kill()
                proc.join(10)

    def kill(self, task: str) -> None:
        proc = self._procs.get(task)
        if proc is not None and proc.exitcode is None:
            proc.kill()
            proc.join(10)

    def close(self) -> None:
        for t in list(self._procs):
            self.kill(t)
        self.finished()


def _spark_task(specs: Any) -> Any:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    for spec in specs:
        if ctx is not None and ctx.attemptNumber() > 0:
            yield (spec.task, "a retried attempt does not resume from stale offsets")
            continue
        try:
            run(spec)
            yield (spec.task, None)
        except Exception as exc:  # a plain string back: a librdkafka exception does not pickle
            yield (spec.task, first_line(exc) if not isinstance(exc, TaskFailed) else str(exc))


# How long a cluster driver waits for its first executors before it counts task slots.
EXECUTORS_WAIT_S = 120.0


def _running_slots(sc: Any, wait_s: float) -> int:
    """How many tasks the registered executors run at once (0: unknown, or none within
    ``wait_s``): Spark's own count (``SparkContext.maxNumConcurrentTasks``, internal API)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            jsc = sc._jsc.sc()
            slots = int(jsc.maxNumConcurrentTasks(
                jsc.resourceProfileManager().defaultResourceProfile()))
        except Exception as exc:  # another Spark version: the configured parallelism counts
            log.debug("counting task slots: %s", first_line(exc))
            return 0
        if slots > 0 or time.monotonic() >= deadline:
            return slots
        time.sleep(1.0)


class SingleSlotError(OffsetLedgerError):
    """Streaming Spark tasks would take the only slot the ledger's Spark commits need."""


class SparkStreams:
    """Streaming tasks as long-running Spark tasks (one job, one task each).

    Args:
        spark: the session whose executors run the tasks.
        spark_ledger: the ledger is read and committed by Spark (a catalog schema, an object
            store): it needs a free slot, so a single-slot cluster is refused.
    """

    def __init__(self, spark: Any, spark_ledger: bool = False) -> None:
        self.sc = spark.sparkContext
        total = plan.task_slots(self.sc.master, self.sc.defaultParallelism)
        running = _running_slots(self.sc, wait_s=0.0 if self.sc.master.startswith("local")
                                 else EXECUTORS_WAIT_S)
        if running:
            # spark.default.parallelism may exceed the cores: a task beyond them would queue
            # for good, its partitions never copied.
            total = min(total, running)
        if total < 2 and spark_ledger:
            raise SingleSlotError(
                f"streaming with Spark executors needs at least 2 task slots (copy tasks hold "
                f"theirs for good; the ledger's Spark commits need one more), but "
                f"{self.sc.master} has {total}: add executor cores, or run replicate --once "
                f"from a scheduler")
        self.slots = max(1, total - 1)
        self._threads: dict[str, threading.Thread] = {}
        self._outcome: dict[str, bool] = {}

    def start(self, spec: StreamSpec) -> None:
        def job() -> None:
            self.sc.setJobGroup(spec.task, f"offset-ledger streaming copy {spec.task}",
                                interruptOnCancel=True)
            ok = False
            try:
                out = self.sc.parallelize([spec], 1).mapPartitions(_spark_task).collect()
                ok = all(error is None for _, error in out)
                for _, error in out:
                    if error is not None:
                        log.error("task %s ended: %s", spec.task, error)
            except Exception as exc:
                log.error("task %s ended: %s", spec.task, first_line(exc))
            self._outcome[spec.task] = ok

        thread = threading.Thread(target=job, name=f"offset-ledger-{spec.task}", daemon=True)
        self._threads[spec.task] = thread
        thread.start()

    def finished(self) -> list[tuple[str, bool]]:
        done = [(t, self._outcome.get(t, False)) for t, th in self._threads.items()
                if not th.is_alive()]
        for t, _ in done:
            self._threads.pop(t)
            self._outcome.pop(t, None)
        return done

    def alive(self, task: str) -> bool:
        thread = self._threads.get(task)
        return thread is not None and thread.is_alive()

    def wait(self, tasks: list[str], timeout: float) -> None:
        for t in tasks:
            thread = self._threads.get(t)
            if thread is None:
                continue
            thread.join(timeout)
            if thread.is_alive():
                log.warning("task %s did not stop within %.0fs: cancelled", t, timeout)
                self.kill(t)

    def kill(self, task: str) -> None:
        thread = self._threads.get(task)
        if thread is not None and thread.is_alive():
            self.sc.cancelJobGroup(task)
            thread.join(30)

    def close(self) -> None:
        for t in list(self._threads):
            self.kill(t)
        self.finished()
