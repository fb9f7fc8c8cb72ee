"""Typed ledger records: one frozen dataclass per row kind, with ``to_row``/``from_row``.

Jobs build and read checkpoints, resume points, operations and progress rows as these objects
instead of dicts or positional tuples; only the Delta edge sees rows.

Invariants:
    * Each class's fields are exactly its table's columns (:mod:`ledger.schemas`), in the same
      order: ``to_row()`` is a dict in schema column order, ``to_tuple()`` the same values as a
      tuple, and ``from_row(r)`` accepts a Spark ``Row`` or any mapping with those keys
      (unknown keys are ignored, so a row with extra columns from a join still reads), or a
      record of the same class (returned as is).
    * "Cannot translate" stays distinct from an offset: a :class:`CheckpointRecord` with
      ``status == 'untranslatable'`` has ``target_offset is None`` and a ``reason``.
    * No field can hold a cluster property, so a secret cannot reach a row through these.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self

from ledger import schemas

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


class _Record:
    """Shared ``to_row``/``from_row`` for the frozen dataclasses below."""

    TABLE: ClassVar[str]

    @classmethod
    def schema(cls) -> StructType:
        return schemas.spark_schema(cls.TABLE)

    def to_row(self) -> dict[str, Any]:
        """The row as a dict in the table's column order."""
        return {n: getattr(self, n) for n in _names(type(self))}

    def to_tuple(self) -> tuple:
        """The row's values in the table's column order."""
        return tuple(getattr(self, n) for n in _names(type(self)))

    @classmethod
    def from_row(cls, row: Mapping[str, Any] | Any) -> Self:
        """A record from a Spark ``Row`` or a mapping (extra keys are ignored)."""
        if isinstance(row, cls):
            return row
        data = row.asDict() if hasattr(row, "asDict") else row
        names = _names(cls)
        missing = [n for n in names if n not in data]
        if missing:
            raise ValueError(f"a {cls.TABLE} row lacks {missing}")
        values = {n: data[n] for n in names}
        if "subscribe_topics" in values and values["subscribe_topics"] is not None:
            values["subscribe_topics"] = tuple(values["subscribe_topics"])
        return cls(**values)

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any] | Any]) -> list[Self]:
        """:meth:`from_row` of each row (e.g. of ``DataFrame.collect()``)."""
        return [cls.from_row(r) for r in rows]

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (the records are frozen)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def rows(records: Iterable[_Record]) -> list[dict[str, Any]]:
    """``to_row()`` of each record (for ``spark.createDataFrame(rows, schema)``)."""
    return [r.to_row() for r in records]


@dataclasses.dataclass(frozen=True, slots=True)
class CheckpointRecord(_Record):
    """A forward or reverse checkpoint of one (group, source partition) in one pass."""

    TABLE: ClassVar[str] = schemas.CHECKPOINTS

    checkpoint_id: str
    flow: str
    direction: str
    group_id: str
    source_cluster: str
    source_topic: str
    partition: int
    source_offset: int
    target_cluster: str
    target_topic: str
    target_offset: int | None
    status: str
    reason: str | None
    group_rewound: bool
    offset_syncs_version: int
    checkpointed_at: dt.datetime

    @property
    def translated(self) -> bool:
        return self.target_offset is not None


@dataclasses.dataclass(frozen=True, slots=True)
class ResumePoint(_Record):
    """An offset this tool wrote into a group on a cluster, with what it came from."""

    TABLE: ClassVar[str] = schemas.RESUME_POINTS

    resume_point_id: str
    operation_id: str | None
    reason: str
    cluster: str
    group_id: str
    topic: str
    partition: int
    offset: int
    previous_offset: int | None
    checkpoint_id: str | None
    direction: str | None
    source_cluster: str | None
    source_topic: str | None
    source_offset: int | None
    offset_syncs_version: int | None
    checkpoints_version: int | None
    written_at: dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class Operation(_Record):
    """A failover or failback with the ledger versions it was computed from."""

    TABLE: ClassVar[str] = schemas.OPERATIONS

    operation_id: str
    kind: str
    group_id: str
    from_cluster: str
    to_cluster: str
    status: str
    subscribe_topics: tuple[str, ...]
    offset_syncs_version: int | None
    checkpoints_version: int | None
    group_offsets_version: int | None
    resume_points_version: int | None
    reverse_checkpointing: bool
    started_at: dt.datetime
    ready_at: dt.datetime | None
    seconds_to_ready: float | None
    message: str | None

    def to_row(self) -> dict[str, Any]:
        row = _Record.to_row(self)
        row["subscribe_topics"] = list(self.subscribe_topics)
        return row


@dataclasses.dataclass(frozen=True, slots=True)
class ProgressRecord(_Record):
    """The replication state of one flow partition after a batch."""

    TABLE: ClassVar[str] = schemas.REPLICATION_PROGRESS

    flow: str
    topic: str
    replica_topic: str
    partition: int
    last_upstream_offset: int | None
    next_upstream_offset: int | None
    source_end_offset: int | None
    lag: int | None
    newest_record_timestamp: dt.datetime | None
    record_age_ms: int | None
    batch_id: int
    updated_at: dt.datetime
