"""Offsets that live outside Kafka (a Spark query's checkpoint, a file, a database row).

The shape is Spark's ``startingOffsets`` / checkpoint JSON, one object per topic, partitions as
strings, offsets as "next offset to consume"::

    {"Payments": {"0": 1000, "1": 800}}           offsets of a reader on P
        |  translate --from P --to B   (runs of flow P->B, forward)
        v
    {"P.Payments": {"0": 1000, "1": 800}}         where it resumes on B

Each topic maps as a group's committed topic does (:func:`pipelines.checkpoint.mapping.map_topic`):
an original topic of the flow forward to its replica, a reverse-checkpointed replica back to its
original. The translation itself is the groups' (:func:`pipelines.checkpoint.compute.
compute_checkpoints` over :class:`ledger.store.OffsetSyncStore`), so the rules are the same.

Invariants:
    * "Cannot translate" is never an offset: :func:`translate` raises
      :class:`UntranslatableOffsetsError` naming every partition that cannot be translated (a
      topic the flow neither replicates nor reverse-checkpoints, no runs, an offset before the
      first replicated record) and returns nothing for the others.
    * Spark's symbolic offsets ``-2`` (earliest) and ``-1`` (latest) are not positions: refused,
      never translated to a guess.
    * :func:`parse` and :func:`dumps` are pure and inverse of each other on valid input.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ledger import clock
from ledger.errors import OffsetLedgerError

if TYPE_CHECKING:
    from ledger.records import CheckpointRecord
    from ledger.store import OffsetSyncStore
    from pipelines.checkpoint.engine import Checkpointer

Offsets = dict[tuple[str, int], int]
"""``{(topic, partition): offset}``."""

SYMBOLIC = {-2: "earliest", -1: "latest"}


class OffsetsFormatError(OffsetLedgerError):
    """The offsets given are not in the ``{"topic": {"partition": offset}}`` shape."""


class UntranslatableOffsetsError(OffsetLedgerError):
    """Some partitions cannot be translated: nothing is printed or written."""

    exit_code = 4


def parse(text: str, what: str = "offsets") -> Offsets:
    """Offsets from Spark's JSON shape; :class:`OffsetsFormatError` names what is wrong."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetsFormatError(f"{what}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not doc:
        raise OffsetsFormatError(f'{what}: expected {{"topic": {{"partition": offset}}}}, '
                                 f"got {text.strip()[:80]!r}")
    out: Offsets = {}
    for topic, partitions in doc.items():
        if not isinstance(partitions, dict) or not partitions:
            raise OffsetsFormatError(f'{what}: topic {topic!r} needs {{"partition": offset}}, '
                                     f"got {partitions!r}")
        for key, offset in partitions.items():
            try:
                partition = int(key)
            except (TypeError, ValueError):
                partition = -1
            if partition < 0 or str(partition) != str(key).strip():
                raise OffsetsFormatError(f"{what}: {topic!r} partition {key!r} is not a "
                                         "partition number")
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise OffsetsFormatError(f"{what}: {topic}[{partition}] offset {offset!r} is "
                                         "not an integer")
            if offset in SYMBOLIC:
                raise OffsetsFormatError(
                    f"{what}: {topic}[{partition}] is {offset} ({SYMBOLIC[offset]}), Spark's "
                    "symbol, not a position: only numeric offsets can be translated")
            if offset < 0:
                raise OffsetsFormatError(f"{what}: {topic}[{partition}] offset {offset} is "
                                         "negative")
            out[(topic, partition)] = offset
    return out


def dumps(offsets: Offsets) -> str:
    """Spark's compact JSON shape, topics and partitions in order."""
    doc: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        doc.setdefault(topic, {})[str(partition)] = offset
    return json.dumps(doc, separators=(",", ":"))


def translated(checkpoints: Iterable[CheckpointRecord]) -> Offsets:
    """The translated offsets of ``checkpoints``, keyed by their target topic."""
    return {(cp.target_topic, cp.partition): int(cp.target_offset) for cp in checkpoints
            if cp.target_offset is not None}


def describe_untranslatable(checkpoints: Iterable[CheckpointRecord]) -> list[str]:
    """One line per checkpoint that has no translation, with its reason."""
    return [f"{cp.source_cluster}:{cp.source_topic}[{cp.partition}] offset {cp.source_offset} "
            f"({cp.direction}): {cp.reason}" for cp in checkpoints if cp.target_offset is None]


def translate(checkpointer: Checkpointer, source: str, target: str, offsets: Offsets, *,
              label: str, now: dt.datetime | None = None,
              checkpoint_id: str | None = None,
              log_starts: set[tuple[str, str, int]] = frozenset(),
              stores: Mapping[str, OffsetSyncStore] | None = None,
              ) -> tuple[list[CheckpointRecord], dict[str, OffsetSyncStore]]:
    """Translate ``offsets`` of a reader on ``source`` to ``target``, reading the ledger only.

    ``label`` stands for the group id in the checkpoint records (the reader's name). Returns
    one translated checkpoint per partition, in (topic, partition) order, and the stores
    (by flow) they were translated over. ``log_starts`` (``{(direction, topic, partition)}``,
    ``pipelines.checkpoint.coverage.log_start_keys``) have nothing before the offset to copy:
    their checkpoints stay untranslated and the reader starts at the target's log start.
    ``stores``: loaded already (a move's coverage check): translated over, at their version.

    Raises:
        UntranslatableOffsetsError: a topic with no mapping, or a partition with no
            translation; the message names each one.
    """
    from pipelines.checkpoint.compute import GroupCommit, compute_checkpoints

    flow = checkpointer.config.flow(source, target)
    mappings = checkpointer.mappings(flow, {t for t, _ in offsets})
    unmapped = sorted({t for t, _ in offsets} - set(mappings))
    problems = [f"{source}:{t}[{p}] offset {o}: flow {flow.name} neither replicates {t} nor "
                "reverse-checkpoints it" for (t, p), o in sorted(offsets.items())
                if t in unmapped]
    checkpoints: list[CheckpointRecord] = []
    held, stores = stores, {}
    if mappings:
        stores = checkpointer.load_stores(mappings, held)
        commits = [GroupCommit(source, label, t, p, o) for (t, p), o in sorted(offsets.items())
                   if t in mappings]
        checkpoints = compute_checkpoints(
            commits, mappings, stores, {}, checkpoint_id=checkpoint_id or uuid.uuid4().hex,
            target_cluster=target, now=now or clock.now())
        problems += describe_untranslatable(
            cp for cp in checkpoints
            if (cp.direction, cp.source_topic, cp.partition) not in log_starts)
    if problems:
        raise UntranslatableOffsetsError(
            f"{len(problems)} partition(s) cannot be translated {source} -> {target}; "
            "nothing was guessed or written:\n  " + "\n  ".join(problems))
    return checkpoints, stores
