"""ledger.writer: runs from delivery reports (exact, covering, maximal) and the ledger rows."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.schemas import OFFSET_SYNCS_SCHEMA, REPLICATION_PROGRESS_SCHEMA
from ledger.translation import Run
from ledger.writer import (
    PartitionSummary,
    RunBuilder,
    downstream_contiguous,
    next_written_at,
    progress_row,
    runs_from_deliveries,
    sync_rows,
    upstream_contiguous,
)

pytestmark = pytest.mark.unit


def test_consecutive_copies_form_one_run():
    assert runs_from_deliveries([(100 + k, 500 + k) for k in range(4)]) == [Run(100, 500, 4)]


def test_design_example_upstream_gap_splits_the_run():
    pairs = [(100, 500), (101, 501), (102, 502), (103, 503), (110, 504), (111, 505)]
    assert runs_from_deliveries(pairs) == [Run(100, 500, 4), Run(110, 504, 2)]


def test_downstream_gap_splits_the_run():
    assert runs_from_deliveries([(0, 10), (1, 11), (2, 13)]) == [Run(0, 10, 2), Run(2, 13, 1)]


def test_rewind_upstream_starts_a_new_run():
    assert runs_from_deliveries([(5, 0), (6, 1), (5, 2), (6, 3)]) == [Run(5, 0, 2), Run(5, 2, 2)]


def test_nothing_delivered_no_runs():
    assert runs_from_deliveries([]) == []
    assert RunBuilder().runs() == []


def test_named_conditions():
    assert upstream_contiguous(104, 104) and not upstream_contiguous(104, 110)
    assert downstream_contiguous(504, 504) and not downstream_contiguous(504, 503)


def test_builder_counts_records_and_newest_timestamp():
    builder = RunBuilder()
    for k, ts in enumerate([30, 10, None, 20]):
        builder.add(k, k, ts)
    assert builder.records == 4 and builder.newest_timestamp_ms == 30
    assert builder.runs() == [Run(0, 0, 4)]


pairs_strategy = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=60)


@given(pairs_strategy)
def test_runs_are_exact_covering_and_maximal(pairs):
    runs = runs_from_deliveries(pairs)
    expanded = [(r.upstream_offset + k, r.downstream_offset + k)
                for r in runs for k in range(r.length)]
    assert expanded == pairs  # exact and covering, in delivery order
    for a, b in itertools.pairwise(runs):  # maximal: a break has a reason
        assert not (upstream_contiguous(a.upstream_end, b.upstream_offset)
                    and downstream_contiguous(a.downstream_end, b.downstream_offset))


@given(pairs_strategy, st.integers(0, 60))
def test_extend_equals_add_pair_by_pair(pairs, split):
    one_by_one = RunBuilder()
    for u, d in pairs:
        one_by_one.add(u, d)
    bulk = RunBuilder()  # in two calls: the open run continues across them
    bulk.extend([u for u, _ in pairs[:split]], [d for _, d in pairs[:split]])
    bulk.extend([u for u, _ in pairs[split:]], [d for _, d in pairs[split:]])
    assert bulk.runs() == one_by_one.runs()
    assert bulk.records == one_by_one.records == len(pairs)
    downstream = [d for _, d in pairs]
    assert bulk.out_of_order == any(b <= a for a, b in itertools.pairwise(downstream))


def test_extend_flags_downstream_offsets_that_do_not_increase():
    builder = RunBuilder()
    builder.extend([0, 1, 2], [10, 11, 12], newest_timestamp_ms=7)
    assert not builder.out_of_order and builder.newest_timestamp_ms == 7
    builder.extend([3, 4], [12, 13])  # a report paired with the wrong record
    assert builder.out_of_order
    swapped = RunBuilder()
    swapped.extend([0, 1], [11, 10])
    assert swapped.out_of_order
    with pytest.raises(ValueError):
        RunBuilder().extend([0, 1], [10])


def test_written_at_strictly_increases_even_if_the_clock_goes_back():
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert next_written_at(t0, None) == t0
    assert next_written_at(t0 + dt.timedelta(seconds=5), t0) == t0 + dt.timedelta(seconds=5)
    assert next_written_at(t0 - dt.timedelta(seconds=5), t0) > t0
    assert next_written_at(t0, t0) > t0


def test_rows_match_the_ledger_schemas():
    now = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
    summary = PartitionSummary("Payments", "P.Payments", 2, (Run(100, 500, 4), Run(110, 504, 2)),
                               6, int((now - dt.timedelta(seconds=3)).timestamp() * 1000))
    rows = sync_rows(flow="P->B", source_cluster="P", target_cluster="B", summaries=[summary],
                     run_id="r1", batch_id=7, written_at=now)
    assert len(rows) == 2 and all(len(r) == len(OFFSET_SYNCS_SCHEMA.fields) for r in rows)
    assert rows[1][:9] == ("P->B", "P", "B", "Payments", "P.Payments", 2, 110, 504, 2)
    row = progress_row(flow="P->B", summary=summary, source_end_offsets={("Payments", 2): 120},
                       batch_id=7, updated_at=now)
    names = [f.name for f in REPLICATION_PROGRESS_SCHEMA.fields]
    assert list(row.to_row()) == names
    assert row.last_upstream_offset == 111 and row.next_upstream_offset == 112
    assert row.lag == 8 and row.record_age_ms == 3000
    unknown_end = progress_row(flow="P->B", summary=summary, source_end_offsets={},
                               batch_id=7, updated_at=now)
    assert unknown_end.lag is None
