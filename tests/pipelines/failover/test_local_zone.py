"""A checkpoint pass and a failover on a machine outside UTC record true UTC times."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger import clock
from ledger.schemas import (
    CHECKPOINTS,
    GROUP_OFFSETS,
    OPERATION_RUNS,
    OPERATIONS,
    RESUME_POINTS,
)
from ledger.tables import Ledger
from pipelines import cli
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin
from pipelines.replicate.job import replicate_once
from tests.local_zone import local_zone

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def times(ledger: Ledger, table: str, *columns: str) -> list[dt.datetime]:
    """Every value of ``columns``, read with Spark (naive local time) and made aware."""
    return [clock.aware(r[c]) for r in ledger.read(table).collect() for c in columns]


def test_checkpoint_and_failover_times_are_utc_outside_utc(spark, make_config, unique):
    """Five hours behind UTC, every time a checkpoint pass and a failover record (observed,
    checkpointed, written, started, ready, the evidence's) lies between the true UTC times
    before and after them: a naive UTC "now" was recorded five hours late there."""
    config = make_config(flows={"P->B": {"topics": ["tz-.*"], "groups": ["tzg-.*"]}})
    primary = config.cluster("P")
    topic, group = unique("tz-t"), unique("tzg-g")
    kafka_admin.create_topic(primary, topic, 1)
    produce(primary, topic, [f"v{i}" for i in range(20)], 1)
    consume(primary, group, [topic], limit=8)
    ledger = Ledger(spark, config.ledger_location)
    checkpoint = ["checkpoint", "--flow", "P->B", "--once", "--no-sync", "--config", config.path]
    with local_zone():
        before = clock.now() - dt.timedelta(seconds=1)
        replicate_once(spark, config, "P->B")
        assert cli.main(checkpoint) == 0
        versions = {t: ledger.version(t) for t in (CHECKPOINTS, GROUP_OFFSETS)}
        # Nothing moved: the window read back outside UTC holds every key, nothing is recorded.
        assert cli.main(checkpoint) == 0
        assert {t: ledger.version(t) for t in (CHECKPOINTS, GROUP_OFFSETS)} == versions
        assert cli.main(["failover", "--group", group, "--from", "P", "--to", "B",
                         "--config", config.path]) == 0
        after = clock.now() + dt.timedelta(seconds=1)
        recorded = {
            CHECKPOINTS: times(ledger, CHECKPOINTS, "checkpointed_at"),
            GROUP_OFFSETS: times(ledger, GROUP_OFFSETS, "observed_at"),
            RESUME_POINTS: times(ledger, RESUME_POINTS, "written_at"),
            OPERATION_RUNS: times(ledger, OPERATION_RUNS, "written_at"),
            OPERATIONS: times(ledger, OPERATIONS, "started_at", "ready_at")}
    assert all(recorded.values()), recorded
    assert {t: [at for at in ats if not before <= at <= after]
            for t, ats in recorded.items()} == {t: [] for t in recorded}, (before, after)
