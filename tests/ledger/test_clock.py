"""ledger.clock: every time made is aware UTC; a naive one read back is local time."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from ledger import clock, commits
from ledger.engine import LedgerEngine, timestamp
from ledger.schemas import GROUP_OFFSETS
from ledger.tables import Ledger
from tests.local_zone import NEW_YORK, local_zone

# 2026-11-25 03:00 UTC is 2026-11-24 22:00 in New York (EST, UTC-5).
INSTANT = dt.datetime(2026, 11, 25, 3, 0, 0, tzinfo=dt.UTC)
NEW_YORK_WALL = dt.datetime(2026, 11, 24, 22, 0, 0)


@pytest.mark.unit
def test_now_is_aware_utc_whatever_the_local_zone():
    with local_zone():
        before = time.time()
        now = clock.now()
        after = time.time()
    assert now.tzinfo is dt.UTC and now.utcoffset() == dt.timedelta(0)
    assert before - 0.001 <= now.timestamp() <= after + 0.001


@pytest.mark.unit
def test_a_naive_time_is_local_and_an_aware_one_keeps_its_instant():
    with local_zone():
        assert clock.aware(NEW_YORK_WALL) == INSTANT
        assert clock.aware(NEW_YORK_WALL).tzinfo is dt.UTC
        tokyo = INSTANT.astimezone(dt.timezone(dt.timedelta(hours=9)))
        assert clock.aware(tokyo) == INSTANT and clock.aware(tokyo).tzinfo is dt.UTC
        assert clock.aware(INSTANT) is not None and clock.aware(None) is None
        # The opposite way, as PySpark's collect() gives the instant; naive stays as it is.
        assert clock.local_naive(INSTANT) == NEW_YORK_WALL
        assert clock.local_naive(NEW_YORK_WALL) == NEW_YORK_WALL
        assert clock.aware(clock.local_naive(INSTANT)) == INSTANT
        # A SQL literal names the same instant from the naive and the aware form.
        assert timestamp(NEW_YORK_WALL) == timestamp(INSTANT) == (
            "TIMESTAMP '2026-11-25 03:00:00.000000Z'")


@pytest.mark.unit
def test_the_converter_for_many_values_answers_as_local_naive_in_every_zone():
    """Where local time is UTC all year it skips the zone lookup; elsewhere it is the rule."""
    summer = dt.datetime(2026, 7, 1, 12, 0, 0, tzinfo=dt.UTC)
    tokyo = INSTANT.astimezone(dt.timezone(dt.timedelta(hours=9)))
    for zone in ("UTC", "Etc/UTC", NEW_YORK, "Europe/London", "Asia/Kolkata"):
        with local_zone(zone):
            convert = clock.local_naive_converter()
            for value in (INSTANT, summer, tokyo, NEW_YORK_WALL):
                assert convert(value) == clock.local_naive(value), (zone, value)
                assert convert(value).tzinfo is None
            assert (convert is not clock.local_naive) == (zone in ("UTC", "Etc/UTC"))


@pytest.mark.unit
def test_milliseconds_are_unix_time_in_utc():
    with local_zone():
        assert clock.from_ms(INSTANT.timestamp() * 1000) == INSTANT
        assert clock.from_ms(1_500).tzinfo is dt.UTC
        assert clock.from_ms(1_500) == dt.datetime(1970, 1, 1, 0, 0, 1, 500_000, dt.UTC)


@pytest.mark.spark
def test_now_written_by_either_engine_reads_back_as_the_same_instant(spark, tmp_path):
    """Outside UTC, a time made with clock.now() and committed by delta-rs or by Spark reads
    back (both engines answer naive local time, as Spark's collect()) as the same instant."""
    location = str(tmp_path / "ledger")
    commits.create_missing_tables(location)  # as `ledger init` does, quicker than Spark
    with local_zone():
        engines = {"delta-rs": LedgerEngine(location), "spark": LedgerEngine(location,
                                                                            lambda: spark,
                                                                            engine="spark")}
        written = {}
        for name, engine in engines.items():
            written[name] = clock.now().replace(microsecond=0)
            engine.append(GROUP_OFFSETS, [{
                "observation_id": name, "cluster": "P", "group_id": "g", "topic": "T",
                "partition": 0, "committed_offset": 1, "group_state": "Empty",
                "observed_at": written[name]}])
        for engine in engines.values():
            rows = engine.query("SELECT observation_id, observed_at FROM {g}", g=GROUP_OFFSETS)
            assert {r["observation_id"]: clock.aware(r["observed_at"]) for r in rows} == written
        assert {r["observation_id"]: clock.aware(r["observed_at"])
                for r in Ledger(spark, location).read(GROUP_OFFSETS).collect()} == written
