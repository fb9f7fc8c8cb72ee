"""Refreshing the persisted spans of ``offset_sync_spans`` (:mod:`ledger.span_snapshots`).

``ledger maintain`` refreshes every flow's snapshot; a checkpoint pass refreshes the flows it
translates over once they are ``ledger.spans.refresh.commits`` commits behind, or their tail
holds ``ledger.spans.refresh.runs`` runs and at least as many as their snapshot's spans.
Either engine (:mod:`ledger.engine`) makes the same commit: one flow's rows replaced in one
Delta commit.

Invariants:
    * A refresh loads the flow's spans at the current ``offset_syncs`` version starting from
      the previous snapshot (:meth:`ledger.store.OffsetSyncStore.load`: only the runs after
      it are read) and writes them with that version and ``covered_until``, the newest
      ``written_at`` of the flow's runs at that version (see the snapshot invariants).
    * A flow without runs and without a snapshot gets no rows.
    * A partition of more than ``2 * window`` spans keeps those from its newest valid cut
      leaving at least ``window`` (:func:`ledger.spans.window_start`), numbered on from the
      spans its window leaves out (``batch_id``: the span's position in its epoch): a load
      answers its offsets at or above the cut exactly, and reads the raw runs below it. Its
      rows carry its seek floors (:func:`ledger.spans.seek_floors`, carried on from the
      previous snapshot while its window goes on), above which that read is of the runs
      written since the offset asked only. A table of an earlier release gains the two
      columns at the first refresh (a metadata commit).
    * Another process may refresh the same flow at the same time (a checkpoint pass and the
      streaming job's upkeep): each load reads one version of the snapshot (F22), and a refresh
      never replaces a snapshot of a later ``offset_syncs`` version than its own.
    * This module sits above both :mod:`ledger.store` and :mod:`ledger.span_snapshots` (the
      store reads snapshots; a refresh loads a store): neither imports the other's caller.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from ledger.config import DEFAULT_SPANS_WINDOW
from ledger.engine import LedgerEngine, literal, timestamp
from ledger.schemas import OFFSET_SYNC_SPANS, OFFSET_SYNCS
from ledger.span_snapshots import SEEK_COLUMNS, SPAN_RUN_ID, Key, tail_start
from ledger.spans import seek_floors, window_start
from ledger.store import OffsetSyncStore
from ledger.tables import Ledger


def span_rows(store: OffsetSyncStore, source_cluster: str, target_cluster: str,
              written_at: dt.datetime, keys: Iterable[Key] | None = None,
              window: int | None = None) -> list[dict]:
    """offset_syncs-shaped rows of a store's spans (run_id "span", batch_id the span's
    position in its epoch, in write order).

    With ``window`` (a snapshot), each partition's window as loaded is cut again: its spans from
    the new cut on, and its seek floors (:func:`ledger.spans.seek_floors`) on each of its rows.
    Without (an operation's evidence), every span the store translated over, the runs a seek put
    before a window included (numbered on from the window's first position: they order its rows
    in write order, and answer like the whole epoch at and above their own floors).
    """
    rows = []
    for topic, partition in sorted(store.runs if keys is None else keys):
        key = (topic, partition)
        spans = store.window(topic, partition) if window is not None else store.runs.get(key, [])
        cut = 0 if window is None else window_start(spans, window)
        left_out = store.dropped.get(key, 0)
        first = left_out + cut
        floors: dict = {}
        if window is not None:
            seek = (seek_floors(spans, cut, store.seek.get(key) if left_out else None)
                    if first else None)
            floors = dict(zip(SEEK_COLUMNS, seek or (None, None), strict=True))
        rows.extend({
            "flow": store.flow, "source_cluster": source_cluster,
            "target_cluster": target_cluster, "topic": topic,
            "replica_topic": store.replica_topics[topic], "partition": partition,
            "upstream_offset": span.upstream_offset, "downstream_offset": span.downstream_offset,
            "length": span.length, "run_id": SPAN_RUN_ID, "batch_id": first + index,
            "written_at": written_at, **floors,
        } for index, span in enumerate(spans[cut:]))
    return rows


@dataclass(frozen=True)
class RefreshReport:
    flow: str
    version: int
    previous_version: int | None
    partitions: int
    spans: int

    def line(self) -> str:
        since = (f"from version {self.previous_version}" if self.previous_version is not None
                 else "from the raw runs")
        return (f"{OFFSET_SYNC_SPANS:22} flow {self.flow}: {self.spans} spans of "
                f"{self.partitions} partitions at offset_syncs version {self.version} ({since})")


def _head(engine: LedgerEngine, flow: str) -> dict | None:
    """One row of the flow's snapshot (its version and covered_until), or None."""
    if not engine.exists(OFFSET_SYNC_SPANS):
        return None
    found = engine.query("SELECT offset_syncs_version, covered_until, source_cluster, "
                         f"target_cluster FROM {{sp}} WHERE flow = {literal(flow)} LIMIT 1",
                         sp=OFFSET_SYNC_SPANS)
    return found[0] if found else None


def _usable(head: dict | None, version: int) -> bool:
    """Whether a load at ``version`` starts from the snapshot ``head`` is a row of (not one
    written at a later version than the load reads)."""
    return head is not None and int(head["offset_syncs_version"]) <= version


def _tail_where(flow: str, head: dict | None, version: int) -> str:
    """The condition of the flow's runs a load at ``version`` reads besides its snapshot: those
    written after the snapshot's ``covered_until``, or every run without a usable snapshot."""
    where = f"flow = {literal(flow)}"
    if _usable(head, version):
        where += f" AND written_at > {timestamp(tail_start(head['covered_until']))}"
    return where


def refresh(ledger: LedgerEngine | Ledger, clusters: dict[str, tuple[str, str]],
            only: Iterable[str] | None = None,
            window: int = DEFAULT_SPANS_WINDOW, rebuild: bool = False) -> list[RefreshReport]:
    """Replace each flow's snapshot with its spans at the current offset_syncs version.

    Incremental: the load starts from the previous snapshot and reads only the runs after it.

    Args:
        ledger: the engine (or a Spark ``Ledger``) to read and commit with.
        clusters: ``{flow: (source, target)}`` of the configured flows; flows the table already
            holds are refreshed too (their clusters taken from their rows).
        only: refresh only these flows.
        window: the fewest spans a windowed partition keeps (``ledger.spans.window``).
        rebuild: compute the spans from the raw runs, not from the previous snapshot (``ledger
            maintain --rebuild-spans``: a snapshot written before F22's fix may hold a
            truncated epoch, and an incremental refresh carries it on).
    """
    engine = LedgerEngine.of(ledger)
    version = engine.version(OFFSET_SYNCS)
    reports = []
    flows = set(clusters) | snapshot_flows(engine)
    for flow in sorted(flows if only is None else flows & set(only)):
        previous = _head(engine, flow)
        usable = _usable(previous, version) and not rebuild
        where = _tail_where(flow, previous if usable else None, version)
        newest = engine.query(f"SELECT max(written_at) AS newest FROM {{s}} WHERE {where}",
                              {"s": version}, s=OFFSET_SYNCS)[0]["newest"]
        if newest is None and not usable:
            continue  # the flow has no runs
        covered_until = newest or previous["covered_until"]
        store = engine.load_store(flow, version, raw=rebuild)
        source, target = clusters.get(flow) or (previous["source_cluster"],
                                                previous["target_cluster"])
        rows = [{**row, "offset_syncs_version": version, "covered_until": covered_until}
                for row in span_rows(store, source, target, covered_until, window=window)]
        now = _head(engine, flow)
        if now is not None and int(now["offset_syncs_version"]) > version:
            continue  # another process's refresh, at a later version, committed meanwhile
        engine.add_columns(OFFSET_SYNC_SPANS)  # a table of an earlier release: once
        engine.replace(OFFSET_SYNC_SPANS, rows, "flow", flow)
        reports.append(RefreshReport(flow, version,
                                     int(previous["offset_syncs_version"]) if usable else None,
                                     len(store.runs), len(rows)))
    return reports


def commits_since(ledger: LedgerEngine | Ledger, flow: str) -> int:
    """How many offset_syncs commits the flow's snapshot is behind; without a snapshot, every
    commit of the table (a young ledger is cheap to read raw: no refresh until it is not)."""
    return _Behind.of(LedgerEngine.of(ledger), flow).commits()


def runs_since(ledger: LedgerEngine | Ledger, flow: str, limit: int) -> int:
    """How many runs of the flow a store load reads besides its snapshot (the tail after
    ``covered_until``; without a snapshot, every run of the flow), counted up to ``limit``."""
    return _Behind.of(LedgerEngine.of(ledger), flow).runs(limit)


def snapshot_spans(ledger: LedgerEngine | Ledger, flow: str) -> int:
    """How many spans the flow's snapshot holds (0 without one)."""
    engine = LedgerEngine.of(ledger)
    return _span_count(engine, flow) if engine.exists(OFFSET_SYNC_SPANS) else 0


def _span_count(engine: LedgerEngine, flow: str) -> int:
    rows = engine.query(f"SELECT COUNT(*) AS spans FROM {{sp}} WHERE flow = {literal(flow)}",
                        sp=OFFSET_SYNC_SPANS)
    return int(rows[0]["spans"])


def tail_outgrew(ledger: LedgerEngine | Ledger, flow: str, runs: int) -> bool:
    """Whether the flow's tail holds at least ``runs`` runs and at least as many as its
    snapshot has spans. A refresh rewrites the whole snapshot: worth it while the tail's runs
    coalesce (at least once, a few spans per partition), not for runs that never do (an
    exactly-once flow's, split by markers), whose refresh would shorten no load::

        at least once   snapshot 1,000 spans   tail 50,000 runs  -> refresh (50x fewer rows)
        exactly once    snapshot 1.4M spans    tail 50,000 runs  -> not yet (as many rows)
    """
    return _Behind.of(LedgerEngine.of(ledger), flow).outgrew(runs)


def refresh_if_behind(ledger: LedgerEngine | Ledger, clusters: dict[str, tuple[str, str]],
                      flows: Iterable[str], commits: int,
                      runs: int | None = None,
                      window: int = DEFAULT_SPANS_WINDOW) -> list[RefreshReport]:
    """Refresh the snapshots of ``flows`` that are ``commits`` or more commits behind, or
    whose tail outgrew ``runs`` runs and the snapshot (:func:`tail_outgrew`: a flow of many
    partitions writes hundreds of runs a commit, a tail that costs each store load seconds
    long before ``commits`` are reached). Each flow's version and snapshot head are read once
    for both tests (a continuous ``checkpoint`` asks every pass)."""
    engine = LedgerEngine.of(ledger)
    behind = []
    for flow in flows:
        state = _Behind.of(engine, flow)
        if state.commits() >= commits or (runs is not None and state.outgrew(runs)):
            behind.append(flow)
    return refresh(ledger, clusters, only=behind, window=window) if behind else []


@dataclass(frozen=True)
class _Behind:
    """How far a flow's snapshot is behind ``offset_syncs`` at one version: what the public
    helpers above ask, with the version and the snapshot's head read once."""

    engine: LedgerEngine
    flow: str
    version: int
    head: dict | None

    @classmethod
    def of(cls, engine: LedgerEngine, flow: str) -> _Behind:
        return cls(engine, flow, engine.version(OFFSET_SYNCS), _head(engine, flow))

    def commits(self) -> int:
        if self.head is None:
            return self.version + 1
        return self.version - int(self.head["offset_syncs_version"])

    def runs(self, limit: int) -> int:
        where = _tail_where(self.flow, self.head, self.version)
        rows = self.engine.query(f"SELECT COUNT(*) AS runs FROM (SELECT 1 FROM {{s}} WHERE "
                                 f"{where} LIMIT {int(limit)}) AS t", {"s": self.version},
                                 s=OFFSET_SYNCS)
        return int(rows[0]["runs"])

    def outgrew(self, runs: int) -> bool:
        # A head means the table exists; without one the flow has no spans to count.
        spans = 0 if self.head is None else _span_count(self.engine, self.flow)
        bound = max(runs, spans)
        return self.runs(bound) >= bound


def snapshot_flows(ledger: LedgerEngine | Ledger) -> set[str]:
    """The flows the table holds a snapshot for."""
    engine = LedgerEngine.of(ledger)
    if not engine.exists(OFFSET_SYNC_SPANS):
        return set()
    return {r["flow"] for r in engine.query("SELECT DISTINCT flow FROM {sp}",
                                            sp=OFFSET_SYNC_SPANS)}
