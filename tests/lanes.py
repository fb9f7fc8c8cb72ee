"""Spark lanes and a lean lane: how ``make test`` spreads the suite's files over three workers.

Each xdist worker that runs a test using the ``spark`` fixture starts its own session Spark
driver, and that JVM costs minutes of CPU to warm up (its JIT compilers), so a third worker
with its own driver barely paid (1,128.9 s against 1,159.1 s). A third of the suite's time,
though, is files that never touch the session's Spark: the torture histories, the kill loops,
``spark-submit`` applications, the Kafka error tests, which mostly wait on brokers and
subprocesses. With three or more workers and ``--dist loadfile``, :class:`LaneScheduling`
gives them a lane of their own::

    gw0, gw1 (Spark lanes)   Spark files, longest first; then lean files nobody took yet
    gw2      (lean lane)     lean files only, longest first: never starts a session driver

A *lean* file is one whose collected tests do not use the ``spark`` fixture (directly or
through another fixture); each worker writes that list when it has collected
(:func:`write_lean_files`), and the scheduler reads it when it hands out the first file.

Invariants:
    * Every file goes to exactly one worker, whole (module fixtures are built once), in the
      collected order (the committed durations' longest first, ``tests/timing.py``).
    * A lean lane never receives a file that uses the ``spark`` fixture; with one or two workers,
      or another ``--dist``, xdist's own scheduling runs.
    * Lanes only decide where a test runs: none is skipped, selected or reordered within its file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.timing import file_of

LEAN_FILES = "offset_ledger_lean_files"  # the key of the path in each worker's workerinput
SPARK_LANES = 2


def lean_files(items: Iterable[Any]) -> list[str]:
    """The files none of whose ``items`` uses the ``spark`` fixture, in collected order."""
    spark: dict[str, bool] = {}
    for item in items:
        path = file_of(item.nodeid)
        spark[path] = spark.get(path, False) or "spark" in getattr(item, "fixturenames", ())
    return [path for path, uses in spark.items() if not uses]


def write_lean_files(path: str, items: Iterable[Any]) -> None:
    """Write :func:`lean_files` to ``path`` (atomically: every worker writes the same list)."""
    target = Path(path)
    partial = target.with_name(f"{target.name}.{os.getpid()}")
    partial.write_text(json.dumps(lean_files(items)))
    os.replace(partial, target)


def pick(scopes: Iterable[str], lean: set[str], lean_lane: bool) -> str | None:
    """The next file for a worker from the queue ``scopes`` (longest first): a lean lane takes
    the first lean file (None: nothing left for it); a Spark lane the first Spark file, else
    the first file left."""
    scopes = list(scopes)
    if lean_lane:
        return next((s for s in scopes if s in lean), None)
    return next((s for s in scopes if s not in lean), scopes[0] if scopes else None)


def make_scheduler(config: Any, log: Any) -> Any:
    """:class:`LaneScheduling` for ``-n 3`` or more under ``--dist loadfile``, else None
    (xdist's own)."""
    workers = config.getoption("numprocesses", None)
    if not isinstance(workers, int) or workers <= SPARK_LANES \
            or config.getoption("dist", None) != "loadfile":
        return None
    return _lane_scheduling_class()(config, log)


def _lane_scheduling_class() -> type:
    from xdist.scheduler import LoadFileScheduling

    class LaneScheduling(LoadFileScheduling):
        """:class:`xdist.scheduler.LoadFileScheduling` whose workers after the first
        :data:`SPARK_LANES` take lean files only (see the module)."""

        _lean: set[str] | None = None

        def _lean_files(self) -> set[str]:
            if self._lean is None:
                paths = {node.workerinput[LEAN_FILES] for node in self.nodes}
                self._lean = set(json.loads(Path(next(iter(paths))).read_text()))
            return self._lean

        def _is_lean_lane(self, node: Any) -> bool:
            return worker_number(node.workerinput["workerid"]) >= SPARK_LANES

        def _assign_work_unit(self, node: Any) -> None:
            scope = pick(self.workqueue, self._lean_files(), self._is_lean_lane(node))
            if scope is None:  # a lean lane with no lean file left: it is done
                idle = not self._pending_of(self.assigned_work.get(node, {}))
                if idle and not node.shutting_down:
                    node.shutdown()
                return
            work_unit = self.workqueue.pop(scope)
            self.assigned_work.setdefault(node, {})[scope] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(nodeid)
                                    for nodeid, completed in work_unit.items()
                                    if not completed])

    return LaneScheduling


def worker_number(workerid: str) -> int:
    """``gw2`` -> 2: xdist names its workers gw0, gw1, ... in the order it starts them."""
    return int(workerid.removeprefix("gw"))


def lean_files_path(controller_pid: int | None = None) -> Path:
    """Where the workers of one run write their lean files (one file per controller)."""
    import tempfile

    return Path(tempfile.gettempdir()) / (
        f"offset-ledger-lean-files-{controller_pid or os.getpid()}.json")
