"""The latency benchmark's view of offset-ledger's ledger: when each run reached Delta, and how
the ledger's tables grow.

The **ledger lag** of a record is the time from its arrival on the replica (the consumer's
readable time, ``bench.latency_clients``) to the Delta commit that added the ``offset_syncs``
run covering its replica offset: the commit's own timestamp (``commitInfo.timestamp`` in the
table's ``_delta_log``), i.e. when the run became readable in Delta. ``written_at`` is taken just
before that commit; the commit time is the stricter of the two.

    replica offsets   d ........ d+n-1      (one run, committed at version v, time T_v)
    record at offset o in [d, d+n): ledger lag = T_v - readable_ms(o)

Invariants:
    * Read-only; reads the log and the data files of the versions after the one given at start,
      so runs of earlier benchmark runs in the same ledger are never read.
    * Only ``add`` actions with ``dataChange = true`` are runs being recorded; files re-added by
      a compaction (``dataChange = false``) keep their first commit's time.
    * A replica offset no run covers is counted as ``unrecorded``, never given a lag.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import numpy as np

from ledger.schemas import OFFSET_SYNCS
from ledger.schemas import SCHEMAS as LEDGER_TABLES


def version(table: Path) -> int:
    """The newest version in ``table``'s log (-1 without one)."""
    versions = [int(p.name[:-5]) for p in (table / "_delta_log").glob("*.json")
                if p.name[:-5].isdigit()]
    return max(versions, default=-1)


class RunCommits:
    """``offset_syncs`` runs added after ``after`` with their commit times, read incrementally."""

    def __init__(self, ledger: Path, after: int) -> None:
        self.table = ledger / OFFSET_SYNCS
        self.last = after
        self.runs: dict[tuple[str, int], list[tuple[int, int, int]]] = {}  # (d, n, commit ms)

    def refresh(self) -> None:
        import pyarrow.parquet as pq

        while True:
            entry = self.table / "_delta_log" / f"{self.last + 1:020d}.json"
            if not entry.exists():
                return
            actions = [json.loads(line) for line in entry.read_text().splitlines() if line]
            commit_ms = next((a["commitInfo"].get("timestamp") for a in actions
                              if "commitInfo" in a), None) or int(entry.stat().st_mtime * 1000)
            for action in actions:
                add = action.get("add")
                if not add or not add.get("dataChange", True):
                    continue
                rows = pq.read_table(self.table / unquote(add["path"]), columns=[
                    "replica_topic", "partition", "downstream_offset", "length"]).to_pydict()
                for t, p, d, n in zip(rows["replica_topic"], rows["partition"],
                                      rows["downstream_offset"], rows["length"], strict=True):
                    self.runs.setdefault((t, p), []).append((d, n, commit_ms))
            self.last += 1

    def lags(self, arrivals: dict) -> tuple[np.ndarray, int]:
        """(ledger lag in ms of every covered arrival, number of arrivals no run covers).

        ``arrivals`` is the consumer's ``--offsets`` file loaded with ``np.load``.
        """
        slots = [(t, int(p)) for t, p in (s.split("\t") for s in arrivals["slots"])]
        where, offsets, times = arrivals["where"], arrivals["offsets"], arrivals["times"]
        out, unrecorded = [], 0
        for i, slot in enumerate(slots):
            mine = where == i
            offs, ts = offsets[mine], times[mine]
            runs = sorted(self.runs.get(slot, []))
            if not runs:
                unrecorded += len(offs)
                continue
            starts = np.array([r[0] for r in runs], dtype=np.int64)
            ends = starts + np.array([r[1] for r in runs], dtype=np.int64)
            commits = np.array([r[2] for r in runs], dtype=np.int64)
            k = np.searchsorted(starts, offs, side="right") - 1
            covered = (k >= 0) & (offs < ends[np.maximum(k, 0)])
            unrecorded += int((~covered).sum())
            out.append(commits[k[covered]] - ts[covered])
        return (np.concatenate(out) if out else np.array([], dtype=np.int64)), unrecorded


def table_sizes(ledger: Path) -> dict[str, dict[str, int]]:
    """``{table: {"rows", "files", "version"}}`` of each ledger table that exists (delta-rs)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    out = {}
    for name in LEDGER_TABLES:
        path = ledger / name
        if not (path / "_delta_log").is_dir():
            continue
        table = DeltaTable(str(path))
        actions = pa.table(table.get_add_actions(flatten=True))
        rows = sum(v or 0 for v in actions.column("num_records").to_pylist())
        out[name] = {"rows": int(rows), "files": actions.num_rows, "version": table.version()}
    return out
