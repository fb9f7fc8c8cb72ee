"""Which operations can still be audited with time travel: the time-travel horizon.

An operation records the Delta versions it read (``offset_syncs``, ``checkpoints``,
``resume_points``). Time travel to a version needs its log (Delta cleans log files past
``delta.logRetentionDuration``) and its data files (VACUUM deletes files removed longer ago
than ``delta.deletedFileRetentionDuration``). Past that, the audit reads the evidence the
operation recorded instead (:mod:`pipelines.failover.evidence`).

Invariants:
    * A version is *readable* when its snapshot loads and every data file it lists that the
      current version no longer lists still exists (the current version's files exist by
      definition). That is exact for one version and costs one snapshot load.
    * Readability only shrinks with age: cleaning removes the oldest log first, and VACUUM
      deletes files by the age of their removal, so a version older than an unreadable one
      that needs any file removed as long ago is unreadable too. So for many operations the
      oldest readable version is found by a binary search over the versions they recorded:
      ``O(log operations)`` snapshot loads per table, never one per operation.
    * Reads only; nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger.records import Operation
from ledger.schemas import CHECKPOINTS, OFFSET_SYNCS, RESUME_POINTS
from ledger.tables import Ledger

# The tables whose versions an operation records.
RECORDED_TABLES = (OFFSET_SYNCS, CHECKPOINTS, RESUME_POINTS)


def recorded_versions(operation: Operation) -> dict[str, int | None]:
    """The versions an operation recorded, by the table (of :data:`RECORDED_TABLES`)."""
    return {OFFSET_SYNCS: operation.offset_syncs_version,
            CHECKPOINTS: operation.checkpoints_version,
            RESUME_POINTS: operation.resume_points_version}


class Horizon:
    """Readability of one ledger's table versions, probed lazily and remembered."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self._current: dict[str, set[str]] = {}
        self._readable: dict[tuple[str, int], bool] = {}

    def _files(self, name: str, version: int | None) -> set[str]:
        return set(self.ledger.read(name, version=version).inputFiles())

    def readable(self, name: str, version: int) -> bool:
        """Whether ``name`` can be read at ``version`` (log present, files not vacuumed)."""
        key = (name, int(version))
        if key not in self._readable:
            self._readable[key] = self._probe(name, int(version))
        return self._readable[key]

    def _probe(self, name: str, version: int) -> bool:
        try:
            if name not in self._current:
                self._current[name] = self._files(name, None)
            gone = self._files(name, version) - self._current[name]
        except Exception:  # any failure to load the snapshot means: not readable
            return False
        spark = self.ledger.spark
        jvm, conf = spark._jvm, spark._jsc.hadoopConfiguration()
        for uri in gone:
            path = jvm.org.apache.hadoop.fs.Path(uri)
            if not path.getFileSystem(conf).exists(path):
                return False
        return True

    def oldest_readable(self, name: str, versions: Iterable[int]) -> int | None:
        """The oldest of ``versions`` that is readable (binary search); None when none is."""
        ordered = sorted({int(v) for v in versions})
        low, high, found = 0, len(ordered) - 1, None
        while low <= high:
            mid = (low + high) // 2
            if self.readable(name, ordered[mid]):
                found, high = ordered[mid], mid - 1
            else:
                low = mid + 1
        return found


def past_horizon(ledger: Ledger, operations: Iterable[Operation]) -> list[str]:
    """The ids of ``operations`` whose recorded versions cannot all be read with time travel
    any more: their audit must use the recorded evidence."""
    recorded = [(o.operation_id, recorded_versions(o)) for o in operations]
    horizon = Horizon(ledger)
    oldest: dict[str, int | None] = {}
    for name in RECORDED_TABLES:
        versions = [v[name] for _, v in recorded if v[name] is not None]
        oldest[name] = horizon.oldest_readable(name, versions) if versions else None
    past = []
    for operation_id, versions in recorded:
        for name, version in versions.items():
            if version is not None and (oldest[name] is None or version < oldest[name]):
                past.append(operation_id)
                break
    return past
