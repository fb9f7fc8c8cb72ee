"""Reads a flow's runs from ``offset_syncs`` and translates offsets (MM2's OffsetSyncStore).

Invariants:
    * A store is a snapshot: it is loaded at one Delta version of ``offset_syncs`` and records
      that version, so every translation it gives can be replayed with time travel.
    * Runs of a flow partition are kept in write order ``(written_at, batch_id,
      downstream_offset)``; :mod:`ledger.translation` applies the epoch rule to them.
    * A translation is either an offset or :class:`Untranslatable` with the reason: the two are
      different types, so "cannot translate" can never be mistaken for an offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import functions as F

from ledger import translation
from ledger.schemas import OFFSET_SYNCS
from ledger.tables import Ledger


@dataclass(frozen=True)
class Translated:
    offset: int
    status: str = "translated"


@dataclass(frozen=True)
class Untranslatable:
    reason: str
    status: str = "untranslatable"
    offset: None = None


Translation = Translated | Untranslatable


@dataclass
class OffsetSyncStore:
    """The runs of one flow at one ``offset_syncs`` version, by (topic, partition).

    ``topic`` is the topic on the flow's source cluster (the original); ``replica_topics`` maps
    it to the replica's name on the target.
    """

    flow: str
    version: int
    runs: dict[tuple[str, int], list[translation.Run]] = field(default_factory=dict)
    replica_topics: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, ledger: Ledger, flow: str, version: int | None = None,
             topics: set[str] | None = None) -> OffsetSyncStore:
        """Load ``flow``'s runs (optionally only ``topics``) at ``version`` (default: latest)."""
        version = ledger.version(OFFSET_SYNCS) if version is None else version
        df = ledger.read(OFFSET_SYNCS, version=version).where(F.col("flow") == flow)
        if topics is not None:
            if not topics:
                return cls(flow, version)
            df = df.where(F.col("topic").isin(sorted(topics)))
        rows = (df.select("topic", "replica_topic", "partition", "upstream_offset",
                          "downstream_offset", "length", "written_at", "batch_id")
                .orderBy("topic", "partition", "written_at", "batch_id", "downstream_offset")
                .collect())
        store = cls(flow, version)
        for r in rows:
            store.runs.setdefault((r["topic"], r["partition"]), []).append(
                translation.Run(r["upstream_offset"], r["downstream_offset"], r["length"]))
            store.replica_topics[r["topic"]] = r["replica_topic"]
        # Only the current epoch matters; dropping older ones keeps lookups short.
        store.runs = {k: translation.current_epoch(v) for k, v in store.runs.items()}
        return store

    def _epoch(self, topic: str, partition: int) -> list[translation.Run] | Untranslatable:
        runs = self.runs.get((topic, partition))
        if not runs:
            return Untranslatable(f"no offset-syncs for {topic}[{partition}] in flow "
                                  f"{self.flow} at offset_syncs version {self.version}")
        return runs

    def forward(self, topic: str, partition: int, offset: int) -> Translation:
        """A group at ``offset`` on the original ``topic`` -> its position on the replica."""
        runs = self._epoch(topic, partition)
        if isinstance(runs, Untranslatable):
            return runs
        result = translation.forward(runs, offset)
        if result is None:
            return Untranslatable(
                f"offset {offset} of {topic}[{partition}] is before the first replicated "
                f"record ({min(r.upstream_offset for r in runs)}) of the current epoch")
        return Translated(result)

    def reverse(self, topic: str, partition: int, offset: int) -> Translation:
        """A group at ``offset`` on the replica of ``topic`` -> its position on the original."""
        runs = self._epoch(topic, partition)
        if isinstance(runs, Untranslatable):
            return runs
        result = translation.reverse(runs, offset)
        if result is None:
            return Untranslatable(
                f"replica offset {offset} of {topic}[{partition}] is before the first recorded "
                f"copy ({min(r.downstream_offset for r in runs)}) of the current epoch")
        return Translated(result)

    def upstream_end(self, topic: str, partition: int) -> int | None:
        """One past the highest upstream record the runs hold (how far replication got)."""
        runs = self.runs.get((topic, partition))
        return max(r.upstream_end for r in runs) if runs else None

    def downstream_end(self, topic: str, partition: int) -> int | None:
        """One past the highest replica offset the runs hold (what a reader there may have read)."""
        runs = self.runs.get((topic, partition))
        return max(r.downstream_end for r in runs) if runs else None
