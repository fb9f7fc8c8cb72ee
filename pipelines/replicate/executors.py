"""Where a batch's copy tasks run: Spark's executors, or the local driver's worker processes.

    driver: plan ranges -> group them (one group per slot) -> run the groups -> record runs
                                                              |
              SparkCopies: one Spark task per group (a cluster, spark-submit, Databricks,
                           or a session the caller gave)
              LocalCopies: one worker process per slot, started by the driver itself
                           (a plain program whose Spark would be local[N])

On one machine Spark's local mode adds nothing to a copy but a JVM (its start, its Python
worker daemon, the task serialisation): ``LocalCopies`` runs the same task function in N
processes of this interpreter instead, so a pass that writes its ledger through delta-rs
(``ledger.commits``) starts no JVM at all. ``auto`` chooses local exactly where Spark would be
local: no launcher (spark-submit, Databricks), no session handed in, a ``local`` master.

Invariants:
    * Both run ``copy_task.copy_group`` on the same groups and return one ``RangeResult`` per
      range, and the driver records only results that came back.
    * A local worker lost mid-task (killed, crashed) loses only its group's unrecorded copies:
      the pool is replaced and the group runs once more (as Spark retries a task); a second
      loss returns an error for each of its ranges (nothing recorded; the next pass copies
      them again).
    * Local workers end with the driver: each watches its parent and exits when the driver is
      gone (``kill -9``), so no orphan goes on producing; they ignore SIGINT and SIGTERM sent
      to the process group, which the driver handles (a continuous run stops after recording
      its batch, then shuts its workers down).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ledger import settings
from ledger.errors import first_line
from pipelines.replicate import plan
from pipelines.replicate.copy_task import CopyRange, RangeResult, copy_group, copy_ranges

log = logging.getLogger(__name__)

EXECUTORS = ("auto", "spark", "local")


def local_master() -> str | None:
    """The ``local[...]`` master a plain program's Spark session would get, else None."""
    if settings.under_launcher():
        return None  # the launcher's configuration decides, and it may be a cluster
    master = settings.spark_master()
    return master if master.startswith("local") else None


def use_local(executor: str, spark_given: bool) -> bool:
    """Whether copy tasks run in local worker processes (``executor`` is one of EXECUTORS)."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    if executor != "auto":
        return executor == "local"
    return not spark_given and local_master() is not None


class SparkCopies:
    """Copy tasks as one Spark job per batch (speculation should be off: see ``job``)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        sc = spark.sparkContext
        self.slots = plan.task_slots(sc.master, sc.defaultParallelism)

    def run(self, groups: Sequence[Sequence[CopyRange]], consumer_config: Mapping[str, Any],
            producer_config: Mapping[str, Any], max_bytes: int | None,
            description: str) -> list[RangeResult]:
        sc = self.spark.sparkContext
        task = copy_ranges(consumer_config, producer_config, max_bytes)
        sc.setJobDescription(description)
        return sc.parallelize([list(g) for g in groups], len(groups)).mapPartitions(
            lambda it: task(r for group in it for r in group)).collect()

    def close(self) -> None:
        pass


STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def stop_signals_held() -> Iterator[None]:
    """Hold the stop signals in this thread while it spawns workers.

    A spawned interpreter inherits the thread's signal mask through ``exec``, so a group's
    Ctrl-C or SIGTERM that reaches a worker still importing its modules stays pending until
    :func:`watch_parent` ignores it (without, a ``KeyboardInterrupt`` traceback or a silent
    -15: torture seed 41001 eos, ``sigint_replicate_group``). The driver's own signals wait
    for the few milliseconds of the spawn.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def watch_parent(parent: int) -> None:
    """In a worker (bounded or streaming): exit once the driver ``parent`` is gone, and leave
    the process group's signals to the driver (held while it started:
    :func:`stop_signals_held`; released here, ignored)."""
    # A driver killed with -9 leaves its children to init; they stop copying.
    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(0.5)
        os._exit(1)

    # Signals to the whole process group (Ctrl-C, systemd's stop) are the driver's to handle:
    # it finishes and records the batch, then shuts the pool down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    threading.Thread(target=watch, name="offset-ledger-parent-watch", daemon=True).start()


class LocalCopies:
    """Copy tasks in worker processes of this machine, one per slot of the local master."""

    def __init__(self, master: str | None = None,
                 task: Callable[..., list[RangeResult]] = copy_group) -> None:
        self.slots = plan.task_slots(master or local_master() or "local[*]", os.cpu_count() or 1)
        self._task = task  # a module-level function: spawned workers import it by name
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn: a fresh interpreter, never a fork of a driver running client threads.
            self._pool = ProcessPoolExecutor(
                max_workers=self.slots, mp_context=multiprocessing.get_context("spawn"),
                initializer=watch_parent, initargs=(os.getpid(),))
        return self._pool

    def _replace_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def run(self, groups: Sequence[Sequence[CopyRange]], consumer_config: Mapping[str, Any],
            producer_config: Mapping[str, Any], max_bytes: int | None,
            description: str) -> list[RangeResult]:
        results: list[RangeResult] = []
        todo = [list(g) for g in groups]
        for attempt in (1, 2):
            pool = self._executor()
            with stop_signals_held():  # a submit spawns the pool's workers
                futures: list[tuple[list[CopyRange], Future[list[RangeResult]]]] = [
                    (g, pool.submit(self._task, g, dict(consumer_config),
                                    dict(producer_config), max_bytes)) for g in todo]
            lost: list[list[CopyRange]] = []
            for group, future in futures:
                try:
                    results.extend(future.result())
                except BrokenProcessPool:
                    lost.append(group)
                except Exception as exc:  # the task raised (it returns its errors normally)
                    results.extend(RangeResult(r, None, r.start, 0, 0,
                                               f"copy task failed: {first_line(exc)}")
                                   for r in group)
            if not lost:
                return results
            self._replace_pool()
            log.warning("%s: a copy worker was lost (attempt %s); %s group(s) of ranges %s",
                        description, attempt, len(lost),
                        "run again" if attempt == 1 else "left for the next pass")
            todo = lost
        results.extend(RangeResult(r, None, r.start, 0, 0, "the copy worker process was lost")
                       for group in todo for r in group)
        return results

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None