"""bench.latency's report: the scale case gets its own targets, a ratio per round of the same
run, met only when every round meets it."""

from __future__ import annotations

import pytest

from bench import latency_report

pytestmark = pytest.mark.unit


def _case(system: str, round_no: int, p50: float, p99: float, cores: float) -> dict:
    return {"round": round_no, "rate": 1000.0, "system": system, "partitions": 1000,
            "latency_ms": {"p50": p50, "p95": p99, "p99": p99, "max": p99},
            "cores": cores, "rss_mb_peak": 200, "missing": 0, "distinct": 60000,
            "records": 60000, "duplicates": 0, "to_readable_s": 9.0,
            **({"ledger_lag_ms": {"p50": 2500.0, "p99": 5000.0, "max": 5100.0},
                "unrecorded": 0} if system.startswith("ol-") else {})}


def _row(lines: list[str], target: str, system: str) -> list[str]:
    label = latency_report.LABELS[system]
    [row] = [x for x in lines if x.startswith(f"| {target}") and f"| {label} |" in x]
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_scale_targets_are_per_round_and_met_only_when_every_round_is() -> None:
    result = {"commit_interval_s": 5.0, "cases": [], "scale": [
        _case("ol-alo", 1, 60, 400, 0.2), _case("mm2-tuned", 1, 50, 800, 0.5),
        _case("ol-eos", 1, 300, 900, 0.25), _case("mm2-eos", 1, 250, 1000, 0.5),
        _case("mm2-eos", 2, 250, 1000, 0.5), _case("mm2-tuned", 2, 50, 300, 0.6),
        _case("ol-eos", 2, 200, 800, 0.2), _case("ol-alo", 2, 60, 450, 0.2)]}
    lines = latency_report.targets(result, "scale")

    assert _row(lines, "p99 latency <= MM2 tuned's p99", "ol-alo")[3:] == [
        "0.50x", "1.50x", "**not met**"]
    assert _row(lines, "p50 latency <= MM2 exactly-once's p50", "ol-eos")[3:] == [
        "1.20x", "0.80x", "**not met**"]
    assert _row(lines, "p99 latency <= MM2 exactly-once's p99", "ol-eos")[3:] == [
        "0.90x", "0.80x", "met"]
    assert _row(lines, "CPU cores <= 0.5x MM2 tuned's", "ol-alo")[3:] == [
        "0.40x", "0.33x", "met"]


def test_the_scale_table_shows_each_round_with_p50_and_p99() -> None:
    result = {"args": {"rounds": 0, "seconds": 60.0, "partitions": 6, "size": 100,
                       "scale_rate": 1000.0},
              "commit_interval_s": 5.0, "cases": [],
              "scale": [_case("ol-alo", 1, 60, 400, 0.2), _case("ol-alo", 2, 70, 450, 0.2)]}
    text = latency_report.markdown(result)
    rows = [x for x in text.splitlines() if x.startswith("| 2 | offset-ledger")]
    assert rows and "| 70.0 | 450 |" in rows[0]
