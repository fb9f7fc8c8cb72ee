"""The latency benchmark's results as markdown: per-case table, targets as ratios, scale case.

Ratios compare systems of the same round and rate only (the same run, the same machine load).
"""

from __future__ import annotations

LABELS = {
    "ol-alo": "offset-ledger, at-least-once",
    "ol-eos": "offset-ledger, exactly-once",
    "mm2-default": "MirrorMaker 2, defaults (tasks.max=1)",
    "mm2-tuned": "MirrorMaker 2, tuned",
    "mm2-eos": "MirrorMaker 2, exactly-once",
}


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value / 1000:.2f}"


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def arrived(r: dict) -> str:
    if r.get("missing"):
        return f"**MISSING {r['missing']:,}** of {r['records']:,}"
    if "distinct" not in r:
        return "-"
    dups = f", {r['duplicates']:,} dup" if r.get("duplicates") else ""
    return f"all {r['distinct']:,}{dups}"


def line(r: dict) -> str:
    """One case in one line (progress output)."""
    if "skipped" in r:
        return f"skipped: {r['skipped']}"
    lat, lag = r["latency_ms"], r.get("ledger_lag_ms")
    text = (f"p50 {_ms(lat['p50'])} p95 {_ms(lat['p95'])} p99 {_ms(lat['p99'])} max "
            f"{_ms(lat['max'])} ms; {_num(r['cores'])} cores, {r['rss_mb_peak']} MB; "
            f"sent {r['sent_rate']:,} rec/s; {arrived(r)}")
    if lag:
        text += (f"; ledger lag p50 {_s(lag['p50'])} p99 {_s(lag['p99'])} s, "
                 f"unrecorded {r['unrecorded']}")
    return text


def _not_run(r: dict, head: str, columns: int) -> str | None:
    """The row of a case that was skipped or failed (its reason in the first cell), else None."""
    if "skipped" in r:
        return head + f" skipped: {r['skipped']} |" + " |" * (columns - 1)
    if "error" in r:
        first = r["error"].splitlines()[0][:120] if r["error"] else "?"
        return head + f" **FAILED**: {first} |" + " |" * (columns - 1)
    return None


def _case_row(r: dict) -> str:
    head = f"| {r['round']} | {r['rate']:,.0f} | {LABELS[r['system']]} |"
    if (row := _not_run(r, head, 10)) is not None:
        return row
    lat, lag, rl = r["latency_ms"], r.get("ledger_lag_ms"), r["lag_records"]
    ledger = (f"{_s(lag['p50'])} / {_s(lag['p99'])} / {_s(lag['max'])}"
              + (f" ({r['unrecorded']:,} unrecorded)" if r.get("unrecorded") else "")
              if lag else "-")
    return (head + f" {r['sent_rate']:,} | {_ms(lat['p50'])} | {_ms(lat['p95'])} | "
            f"{_ms(lat['p99'])} | {_ms(lat['max'])} | {_num(rl['p50'], 0)} / "
            f"{_num(rl['max'], 0)} | {_num(r['cores'])} | {r['rss_mb_peak']} | {arrived(r)} | "
            f"{ledger} |")


def _ok(r: dict | None) -> bool:
    return bool(r) and "latency_ms" in r


def targets(result: dict, key: str = "cases") -> list[str]:
    """Rows of the targets table of ``result[key]`` (the 6-partition cases, or ``"scale"``):
    each ratio per round, and whether every round met it."""
    cases = result[key]
    rounds = sorted({c["round"] for c in cases})
    rates = sorted({c["rate"] for c in cases})
    by = {(c["round"], c["rate"], c["system"]): c for c in cases}
    rows = []

    def add(target: str, rate: float, system: str, ratio, limit: float) -> None:
        values = [ratio(by.get((n, rate, system)), n, rate) for n in rounds]
        shown = " | ".join("-" if v is None else f"{v:.2f}x" for v in values)
        known = [v for v in values if v is not None]
        met = ("-" if not known else "met" if len(known) == len(values) and
               all(v <= limit for v in known) else "**not met**")
        rows.append(f"| {target} | {rate:,.0f} | {LABELS[system]} | {shown} | {met} |")

    def vs(system_key: str, metric):
        def ratio(r, n, rate):
            other = by.get((n, rate, system_key))
            if not (_ok(r) and _ok(other)):
                return None
            a, b = metric(r), metric(other)
            return a / b if a is not None and b else None
        return ratio

    ci = result.get("commit_interval_s") or 0
    for rate in rates:
        for system in ("ol-alo", "ol-eos"):
            if not any(_ok(by.get((n, rate, system))) for n in rounds):
                continue
            add("p99 latency <= MM2 tuned's p99", rate, system,
                vs("mm2-tuned", lambda r: r["latency_ms"]["p99"]), 1.0)
            add("CPU cores <= 0.5x MM2 tuned's", rate, system,
                vs("mm2-tuned", lambda r: r["cores"]), 0.5)
            add("CPU cores <= 0.5x MM2 default's", rate, system,
                vs("mm2-default", lambda r: r["cores"]), 0.5)
            if system == "ol-eos":  # exactly-once against exactly-once
                add("p50 latency <= MM2 exactly-once's p50", rate, system,
                    vs("mm2-eos", lambda r: r["latency_ms"]["p50"]), 1.0)
                add("p99 latency <= MM2 exactly-once's p99", rate, system,
                    vs("mm2-eos", lambda r: r["latency_ms"]["p99"]), 1.0)
            add(f"ledger lag p99 <= commit interval + 1 s ({ci + 1:g} s)", rate, system,
                lambda r, n, rate: (r["ledger_lag_ms"]["p99"] / ((ci + 1) * 1000)
                                    if _ok(r) and r["ledger_lag_ms"]["p99"] is not None
                                    else None), 1.0)
    head = " | ".join(f"round {n}" for n in rounds)
    return [f"| target | rate | system | {head} | |",
            "|---|---:|---|" + "---:|" * len(rounds) + "---|", *rows]


def _scale_row(r: dict) -> str:
    head = f"| {r['round']} | {LABELS[r['system']]} |"
    if (row := _not_run(r, head, 10)) is not None:
        return row
    per_hour = r.get("ledger_per_hour")
    # offset_syncs is the history that grows; replication_progress keeps one row per partition
    rows = f"{per_hour.get('offset_syncs', {}).get('rows', 0):,}" if per_hour else "-"
    files = f"{sum(v['files'] for v in per_hour.values()):,}" if per_hour else "-"
    m = r.get("maintain")
    kept = (f"{m['files_before']:,} -> {m['files_after']:,} ({m['seconds']} s"
            f"{'' if m['exit_code'] == 0 else ', exit ' + str(m['exit_code'])})" if m else "-")
    return (head + f" {r['partitions']:,} | {_num(r['to_readable_s'], 1)} | "
            f"{_num(r['cores'])} | {r['rss_mb_peak']} | {_ms(r['latency_ms']['p50'])} | "
            f"{_ms(r['latency_ms']['p99'])} | "
            f"{arrived(r)} | {rows} | {files} | {kept} |")


def markdown(result: dict) -> str:
    a = result["args"]
    out = [f"# bench.latency: {a['rounds']} round(s), {a['seconds']:g} s per case, "
           f"{a['partitions']} partitions, {a['size']} B values", "",
           result.get("offset_ledger_cli", ""), "",
           "| round | rate (rec/s) | system | sent (rec/s) | p50 ms | p95 ms | p99 ms | max ms "
           "| replica lag p50 / max (records) | cores | RSS MB (peak) | arrived "
           "| ledger lag p50 / p99 / max (s) |",
           "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
           *(_case_row(c) for c in result["cases"])]
    if result["cases"]:
        out += ["", "Targets (ratios within each round and rate):", "", *targets(result)]
    if result["scale"]:
        out += ["", f"Scale: 200 topics x 5 partitions, 5 records of 1 KiB per partition "
                f"before the start, then {a['scale_rate']:g} rec/s for {a['seconds']:g} s:", "",
                "| round | system | partitions | launch to all readable on the replica (s) "
                "| cores | RSS MB (peak) | p50 ms | p99 ms | arrived | offset_syncs rows/h "
                "| ledger files/h (all tables) | files before -> after `ledger maintain` |",
                "|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
                *(_scale_row(r) for r in result["scale"]),
                "", "Scale targets (ratios within each round):", "",
                *targets(result, "scale")]
    return "\n".join(out) + "\n"
