"""bench.failover_scale's py-spy summary: a verb's main-thread wall seconds per function."""

from __future__ import annotations

import pytest

from bench import failover_scale as fs

pytestmark = pytest.mark.unit


def test_py_spy_stacks_give_the_main_threads_seconds_per_function(tmp_path):
    rate = fs.SPY_RATE
    raw = tmp_path / "001-failover.spy"
    raw.write_text("\n".join([
        # the main thread: move_groups -> plan -> load_store, then the same plan -> query
        f"<module> (offset-ledger:8);Mover.move_groups (pipelines/failover/mover.py:270);"
        f"Checkpointer.plan (pipelines/checkpoint/engine.py:280);"
        f"LedgerEngine.load_store (ledger/engine.py:300) {rate}",
        f"<module> (offset-ledger:8);Checkpointer.plan (pipelines/checkpoint/engine.py:280);"
        f"Checkpointer.plan (pipelines/checkpoint/engine.py:281);"
        f"LedgerEngine.query (ledger/engine.py:160) {rate // 2}",
        # a library's function of a profiled name, and another thread: not counted
        f"<module> (offset-ledger:8);query (/x/.venv/lib/deltalake/query.py:1) {rate}",
        f"_bootstrap (threading.py:1);Checkpointer.observe (engine.py:120) {rate * 3}",
    ]) + "\n")
    summary = fs.spy_summary(raw)
    assert summary["total_s"] == 2.5  # the main thread's samples, every one counted once
    assert summary["engine.Checkpointer.plan"] == [2, 1.5]  # a recursion counted once
    assert summary["engine.LedgerEngine.load_store"] == [1, 1.0]
    assert summary["engine.LedgerEngine.query"] == [1, 0.5]
    assert not any("observe" in k or k.startswith("query.") for k in summary)
