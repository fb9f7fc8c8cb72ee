"""Results: one JSON line per history appended to a results file, and totals over the file.

Invariants:
    * A line is appended only once its history is checked, so an interrupted soak leaves every
      line it wrote whole; ``--summary`` adds up every line ever appended, per mode and overall.
    * Anomalies are counted by kind (every kind of :data:`bench.torture.checker.KINDS`, zeros
      included); ``harness_errors`` (the torture test's own failures) are counted apart.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

from bench.torture.checker import KINDS
from bench.torture.run import Outcome


def line(outcome: Outcome, commit: str) -> dict:
    rep = outcome.report
    return {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit,
        "seed": outcome.history.seed, "mode": outcome.history.mode,
        "seconds": round(outcome.seconds, 1), "history": outcome.history.describe(),
        "operations": outcome.operations, "faults": outcome.faults,
        "records_produced": rep.produced, "records_aborted": rep.aborted,
        "records_read": outcome.read, "anomalies": rep.anomalies,
        "details": rep.details[:40], "harness_errors": outcome.harness_errors,
        "stages": outcome.stages,
    }


def append(path: Path, entry: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps(entry, sort_keys=True) + "\n")


def totals(entries: list[dict]) -> dict:
    ops, faults, anomalies = Counter(), Counter(), Counter(dict.fromkeys(KINDS, 0))
    for e in entries:
        ops.update(e["operations"])
        faults.update(e["faults"])
        anomalies.update(e["anomalies"])
    return {
        "histories": len(entries),
        "seconds": round(sum(e["seconds"] for e in entries), 1),
        "operations": dict(sorted(ops.items())), "faults": dict(sorted(faults.items())),
        "records_produced": sum(e["records_produced"] for e in entries),
        "records_aborted": sum(e["records_aborted"] for e in entries),
        "records_read": sum(e["records_read"] for e in entries),
        "anomalies": {k: anomalies[k] for k in KINDS},
        "harness_errors": sum(1 for e in entries if e["harness_errors"]),
        "seeds_with_anomalies": sorted({(e["seed"], e["mode"]) for e in entries
                                        if any(e["anomalies"].values())}),
    }


def render(title: str, t: dict) -> str:
    def kv(d: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in d.items()) or "-"

    return "\n".join([
        f"{title}: {t['histories']} histories, {t['seconds'] / 60:.1f} min",
        f"  operations: {kv(t['operations'])}",
        f"  faults: {kv(t['faults'])}",
        f"  records: {t['records_produced']} produced (+{t['records_aborted']} aborted), "
        f"{t['records_read']} read by groups",
        f"  anomalies: {kv(t['anomalies'])}",
        f"  harness errors: {t['harness_errors']} history(ies); seeds with anomalies: "
        f"{t['seeds_with_anomalies'] or 'none'}",
    ])


def summary(path: Path) -> str:
    entries = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] \
        if path.exists() else []
    parts = [render(f"all runs in {path}", totals(entries))]
    for mode in ("alo", "eos"):
        parts.append(render(f"mode {mode}", totals([e for e in entries if e["mode"] == mode])))
    return "\n".join(parts)


def markdown(path: Path) -> str:
    """The totals per mode as the Markdown table of docs/reliability.md."""
    entries = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] \
        if path.exists() else []
    cols = {m: totals([e for e in entries if e["mode"] == m]) for m in ("alo", "eos")}
    cols["total"] = totals(entries)

    def row(name: str, get) -> str:
        return f"| {name} | " + " | ".join(str(get(t)) for t in cols.values()) + " |"

    lines = ["| | at-least-once | exactly-once | total |", "|---|---|---|---|",
             row("histories", lambda t: t["histories"]),
             row("minutes", lambda t: round(t["seconds"] / 60, 1))]
    for kind in sorted({k for t in cols.values() for k in t["operations"]}):
        lines.append(row(f"operation: {kind}", lambda t, k=kind: t["operations"].get(k, 0)))
    for kind in sorted({k for t in cols.values() for k in t["faults"]}):
        lines.append(row(f"fault: {kind}", lambda t, k=kind: t["faults"].get(k, 0)))
    lines += [row("records produced (committed)", lambda t: t["records_produced"]),
              row("records aborted", lambda t: t["records_aborted"]),
              row("records read by groups", lambda t: t["records_read"])]
    lines += [row(f"anomalies: {kind}", lambda t, k=kind: t["anomalies"][k]) for kind in KINDS]
    lines.append(row("histories with a harness error", lambda t: t["harness_errors"]))
    return "\n".join(lines)
