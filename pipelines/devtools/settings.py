"""The developer tools' environment variables (embedded brokers, benchmarks, tests).

Invariants: as ``ledger.settings`` (read when called, unset or empty means the default, a value
of the wrong type is a ``SettingError`` naming the variable); never read by a production job.
"""

from __future__ import annotations

from pathlib import Path

from ledger.settings import get, number
from pipelines import spark

BROKER_HEAP = "OFFSET_LEDGER_BROKER_HEAP"
BROKER_START_TIMEOUT = "OFFSET_LEDGER_BROKER_START_TIMEOUT"
MM2_PEER = "OFFSET_LEDGER_MM2_PEER"
TEST_KILLS = "OFFSET_LEDGER_TEST_KILLS"
VARIABLES = (BROKER_HEAP, BROKER_START_TIMEOUT, MM2_PEER, TEST_KILLS)
# The options of the short-lived JVMs the tests and benchmarks start (brokers, CLI drivers,
# spark-submit): the quick compiler only and the serial collector start a JVM on a small machine
# with about half the CPU (pipelines.spark.LEAN_JVM). Tuning only: no result depends on it.
LEAN_JVM_OPTIONS = spark.LEAN_JVM


def broker_heap() -> str:
    """``$OFFSET_LEDGER_BROKER_HEAP``: heap of each embedded broker. Default ``512m``."""
    return get(BROKER_HEAP) or "512m"


def broker_start_timeout() -> float:
    """``$OFFSET_LEDGER_BROKER_START_TIMEOUT``: seconds to wait for an embedded broker to
    answer. Default 90."""
    return number(BROKER_START_TIMEOUT, 90.0)


def mm2_peer() -> Path | None:
    """``$OFFSET_LEDGER_MM2_PEER``: the MirrorMaker 2 installation ``bench`` compares against
    (``None``: ``shared/peers/mm2`` beside the checkout)."""
    value = get(MM2_PEER)
    return Path(value) if value else None


def test_kills() -> int:
    """``$OFFSET_LEDGER_TEST_KILLS``: kills per mode of the replicator kill-loop test. Default
    3 (the torture soak, ``python -m bench.torture``, kills far more)."""
    return int(number(TEST_KILLS, 3, int))


# Not a pytest test, whatever its name says.
test_kills.__test__ = False  # type: ignore[attr-defined]
