"""status's ledger reads ahead: they overlap the clusters' reads, never another ledger read."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from ledger.config import config_from_mapping
from ledger.engine import LedgerEngine
from pipelines.status import gather
from pipelines.status.gather import Gatherer

pytestmark = pytest.mark.unit


def _gatherer(tmp_path, many_groups: bool) -> Gatherer:
    config = config_from_mapping({
        "clusters": {"P": {"bootstrap.servers": "127.0.0.1:1"},
                     "B": {"bootstrap.servers": "127.0.0.1:2"}},
        "flows": {"P->B": True, "B->P": True},
        "ledger": {"location": str(tmp_path / "ledger")}})
    return Gatherer(config, LedgerEngine(config.ledger_location), many_groups=many_groups)


def test_the_reads_ahead_finish_before_any_other_ledger_read(tmp_path, monkeypatch):
    gatherer = _gatherer(tmp_path, many_groups=True)
    release, reading, read = threading.Event(), threading.Event(), []

    def progress_ends(engine, flows):
        reading.set()
        assert release.wait(10)
        read.append(("progress", sorted(flows)))
        return {("P->B", "T", 0): "row"}

    monkeypatch.setattr(gather, "progress_ends", progress_ends)
    monkeypatch.setattr(LedgerEngine, "load_store",
                        lambda self, flow, *a, **k: read.append(("store", flow)) or flow)
    with ThreadPoolExecutor(max_workers=3) as pool:
        gatherer.read_ledger_ahead(pool, [gatherer.config.flow("P->B")])
        assert reading.wait(10)  # running beside this thread, which asks the clusters here
        threading.Timer(0.2, release.set).start()
        engine = gatherer.engine  # any other ledger read waits for them
        assert release.is_set() and isinstance(engine, LedgerEngine)
    # progress of the flow and of its reverse (one read), then the flow's whole store
    assert read == [("progress", ["B->P", "P->B"]), ("store", "P->B")]
    assert gatherer._progress(gatherer.config.flow("P->B")) == {("P->B", "T", 0): "row"}
    assert gatherer._stores == {"P->B": "P->B"}


def test_one_group_loads_no_store_ahead_and_an_error_ahead_is_raised_where_read(
        tmp_path, monkeypatch):
    gatherer = _gatherer(tmp_path, many_groups=False)

    def broken(engine, flows):
        raise gather.OffsetLedgerError("replication_progress is not a Delta table")

    monkeypatch.setattr(gather, "progress_ends", broken)
    monkeypatch.setattr(LedgerEngine, "load_store", lambda *a, **k: pytest.fail("loaded"))
    with ThreadPoolExecutor(max_workers=3) as pool:
        gatherer.read_ledger_ahead(pool, [gatherer.config.flow("P->B")])
        with pytest.raises(gather.OffsetLedgerError, match="not a Delta table"):
            _ = gatherer.engine
    assert isinstance(gatherer.engine, LedgerEngine)  # raised once, then the ledger as usual
