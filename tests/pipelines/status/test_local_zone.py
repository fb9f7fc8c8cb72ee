"""status outside UTC: the checkpoint window and the ages are true UTC times."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger import clock, commits
from ledger.config import load_config
from ledger.engine import LedgerEngine
from ledger.records import CheckpointRecord, rows
from ledger.schemas import CHECKPOINTS
from ledger.tables import Ledger
from pipelines.status.gather import Gatherer
from tests.local_zone import local_zone

CONFIG = """\
clusters:
  P: {bootstrap.servers: "127.0.0.1:1"}
  B: {bootstrap.servers: "127.0.0.1:2"}
flows:
  P->B: true
ledger:
  location: LOCATION
"""


def checkpoint(group: str, at: dt.datetime) -> CheckpointRecord:
    return CheckpointRecord("c-" + group, "P->B", "forward", group, "P", "T", 0, 10, "B", "P.T",
                            10, "translated", None, False, 1, at)


@pytest.mark.spark
def test_the_checkpoint_window_and_its_newest_time_are_utc(spark, tmp_path):
    """A checkpoint 23 hours old is inside status's window (24 h refresh + 1 h slack) on a
    machine five hours behind UTC, and reads back at its instant: a window taken from a naive
    UTC "now" started five hours late there and missed it."""
    path = tmp_path / "offset-ledger.yaml"
    path.write_text(CONFIG.replace("LOCATION", str(tmp_path / "ledger")))
    config = load_config(str(path))
    commits.create_missing_tables(config.ledger_location)  # as `ledger init`, without Spark
    ledger = Ledger(spark, config.ledger_location)
    with local_zone():
        now = clock.now().replace(microsecond=0)
        recorded = {"recent": now - dt.timedelta(minutes=5), "day": now - dt.timedelta(hours=23),
                    "old": now - dt.timedelta(hours=26)}
        LedgerEngine.of(ledger).append(CHECKPOINTS, rows(
            [checkpoint(g, at) for g, at in recorded.items()]))
        for engine in (LedgerEngine(config.ledger_location), LedgerEngine.of(ledger)):
            found = Gatherer(config, engine).checkpoints(sorted(recorded), config.flows)
            assert {g: c.newest for (g, _, _), c in found.items()} == {
                "recent": recorded["recent"], "day": recorded["day"]}, engine.name
