"""pipelines.replicate.continuity: what makes the last copied record "the same" on both sides."""

from __future__ import annotations

import pytest

from pipelines.replicate.continuity import same_record

pytestmark = pytest.mark.unit

RECORD = (b"k", b"v", (("h", b"1"), ("n", None)), 1_700_000_000_000)


def test_identical_records_are_the_same_including_timestamp_zero_and_tombstones():
    assert same_record(RECORD, RECORD)
    assert same_record((None, None, (), 0), (None, None, (), 0))


@pytest.mark.parametrize("copy", [
    (b"K", *RECORD[1:]),                                  # key
    (b"k", b"w", *RECORD[2:]),                            # value
    (b"k", None, *RECORD[2:]),                            # a tombstone instead of a value
    (*RECORD[:2], (("n", None), ("h", b"1")), RECORD[3]),  # header order
    (*RECORD[:3], RECORD[3] + 1),                         # timestamp
])
def test_any_difference_is_another_record(copy):
    assert not same_record(RECORD, copy)


def test_a_source_record_without_timestamp_is_compared_without_it():
    # The replica gave it the produce time: only key, value and headers can be compared.
    assert same_record((*RECORD[:3], -1), (*RECORD[:3], 1_800_000_000_000))
