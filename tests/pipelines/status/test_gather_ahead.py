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


def test_a_flow_is_read_before_the_reverse_store_and_the_ledger_after_both(tmp_path,
                                                                           monkeypatch):
    config = config_from_mapping({
        "clusters": {"P": {"bootstrap.servers": "127.0.0.1:1"},
                     "B": {"bootstrap.servers": "127.0.0.1:2"}},
        "flows": {"P->B": {"reverse.checkpointed.topics": ["B.T.*"]},
                  "B->P": {"reverse.checkpointed.topics": ["P.T.*"]}},
        "ledger": {"location": str(tmp_path / "ledger")}})
    gatherer = Gatherer(config, LedgerEngine(config.ledger_location), many_groups=True)
    release, reversing, read = threading.Event(), threading.Event(), []

    def load_store(self, flow, *a, **k):
        if flow == "B->P":  # the reverse flow's store: a group on B's replicas needs it
            reversing.set()
            assert release.wait(10)
        read.append(flow)
        return flow

    monkeypatch.setattr(gather, "progress_ends", lambda engine, flows: {})
    monkeypatch.setattr(LedgerEngine, "load_store", load_store)
    with ThreadPoolExecutor(max_workers=3) as pool:
        gatherer.read_ledger_ahead(pool, [config.flow("P->B")])
        gatherer._flow_read["P->B"].result(10)  # flow_status goes on from here ...
        assert reversing.wait(10) and read == ["P->B"]  # ... while the reverse store loads
        threading.Timer(0.2, release.set).start()
        assert isinstance(gatherer.engine, LedgerEngine)  # any other read waits for it
        assert release.is_set()
    assert read == ["P->B", "B->P"]
    assert gatherer._stores == {"P->B": "P->B", "B->P": "B->P"}
