"""Property: the SQL marts equal ledger/translation.py on random run sequences and offsets.

Hypothesis generates the cases (runs in write order, including truncations that start a new
epoch, upstream gaps, rewinds, point syncs and no runs at all, and offsets around them); all
of them are written into one ledger with distinct topics and groups and translated by ONE dbt
invocation, then every SQL answer is compared with ``forward``/``reverse``.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ledger.schemas import GROUP_OFFSETS, OFFSET_SYNCS
from ledger.tables import Ledger
from ledger.translation import forward, reverse
from pipelines.audit.dbt_runner import build_marts, read_mart
from tests.dbt.ledger_rows import T0, append, group_row, sync_row

pytestmark = [pytest.mark.spark, pytest.mark.dbt]

MAX_EXAMPLES = 40

runs_strategy = st.lists(
    st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(1, 6)), max_size=7)


@st.composite
def cases(draw):
    runs = draw(runs_strategy)
    if runs and draw(st.booleans()):  # mostly "replicated in order": dense, increasing d
        u, d = draw(st.integers(0, 20)), draw(st.integers(0, 20))
        dense = []
        for _, _, n in runs:
            u += draw(st.sampled_from([0, 0, 0, 2, 5]))  # upstream gaps, sometimes
            dense.append((u, d, n))
            u += n
            d += n
        runs = dense
    offsets = st.lists(st.integers(0, 60), min_size=1, max_size=4)
    return runs, draw(offsets), draw(offsets)


def generate(n: int) -> list:
    drawn: list = []

    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(cases())
    def collect(case):
        drawn.append(case)

    collect()
    fixed = [  # the DESIGN.md example, point syncs, a truncation, nothing at all
        ([(100, 500, 4), (110, 504, 2)], [99, 100, 102, 104, 105, 112], [499, 503, 504, 506]),
        ([(10, 20, 1), (15, 30, 1)], [9, 10, 12, 15, 16], [19, 20, 25, 30, 31]),
        ([(0, 100, 10), (10, 0, 5)], [5, 12, 20], [0, 3, 50, 150]),
        ([], [0, 7], [0, 7]),
    ]
    return fixed + drawn


def test_sql_translation_equals_reference(spark, tmp_path):
    all_cases = generate(MAX_EXAMPLES)
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    ledger.init()
    syncs, commits = [], []
    for i, (runs, xs, cs) in enumerate(all_cases):
        topic = f"T{i}"
        # partition 1 always has a run, so the topic is known even when partition 0 has none
        syncs.append(sync_row("P->B", topic, 1, 0, 0, 1, 0, T0))
        for k, (u, d, n) in enumerate(runs):
            syncs.append(sync_row("P->B", topic, 0, u, d, n, k, T0 + dt.timedelta(seconds=k)))
        commits += [group_row(f"o{i}f{j}", "P", f"f{j}", topic, 0, x, T0)
                    for j, x in enumerate(xs)]
        commits += [group_row(f"o{i}r{j}", "B", f"r{j}", f"P.{topic}", 0, c, T0)
                    for j, c in enumerate(cs)]
    append(ledger, OFFSET_SYNCS, syncs)
    append(ledger, GROUP_OFFSETS, commits)

    build_marts(spark, ledger, select="+forward_translations +reverse_translations")
    fwd = {(r["source_topic"], r["group_id"]): r for r in read_mart(spark, "forward_translations")
           if r["partition_id"] == 0}
    rev = {(r["target_topic"], r["group_id"]): r for r in read_mart(spark, "reverse_translations")
           if r["partition_id"] == 0}

    mismatches = []
    for i, (runs, xs, cs) in enumerate(all_cases):
        for j, x in enumerate(xs):
            row, expected = fwd[(f"T{i}", f"f{j}")], forward(runs, x)
            status = "untranslatable" if expected is None else "translated"
            if (row["target_offset"], row["status"]) != (expected, status):
                mismatches.append(("forward", runs, x, expected, row["target_offset"]))
        for j, c in enumerate(cs):
            row, expected = rev[(f"T{i}", f"r{j}")], reverse(runs, c)
            status = "untranslatable" if expected is None else "translated"
            if (row["target_offset"], row["status"]) != (expected, status):
                mismatches.append(("reverse", runs, c, expected, row["target_offset"]))
    assert not mismatches, f"{len(mismatches)} SQL answers differ: {mismatches[:5]}"
    assert len(fwd) == sum(len(xs) for _, xs, _ in all_cases)
    assert len(rev) == sum(len(cs) for _, _, cs in all_cases)
