"""A history's configuration file and the conditions its run waits for (topics created,
groups without members).

Invariants:
    * Both flows replicate only the history's own topics (``h<seed>-*``), each reverse
      checkpointing the other cluster's replicas, so every move of a history is translated both
      ways, as the README's runbooks set it up; group offset sync is off (only the moves write
      group offsets), checkpoints are emitted every 2 s, and each checkpoint pass refreshes
      its flows' span snapshots once 10 runs are past them (``ledger.spans.refresh.runs``; a
      history writes a few dozen runs a flow): its store loads read a snapshot and a tail, as
      at scale, refreshed again and again under its faults. A snapshot keeps windows of 2
      spans (``ledger.spans.window``): an exactly-once partition's runs never coalesce, so
      its loads hold windows and read a partition's raw runs for a group behind its window.
    * Half the histories give both clusters a ``linger.ms`` of 100 or 1000 ms
      (``History.linger_ms``), as a user tuning the replica producer for throughput would: every
      report, lease message and checkpoint of offset-ledger then waits that long unless flushed.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from confluent_kafka.admin import AdminClient

from bench.torture.history import History
from pipelines.devtools.clusters import free_port


def config_file(h: History, workdir: Path) -> tuple[Path, dict]:
    raw = {
        "clusters": {a: {"bootstrap.servers": f"127.0.0.1:{free_port()}"} for a in ("P", "B")},
        "flows": {f"{s}->{t}": {"topics": [f"{h.prefix}-.*"],
                                "reverse.checkpointed.topics": [f"{t}.{h.prefix}-.*"]}
                  for s, t in (("P", "B"), ("B", "P"))},
        "ledger": {"location": str(workdir / "ledger")},
        "embedded": {"data.dir": str(workdir / "clusters")},
        "sync.group.offsets.enabled": False,
        "emit.checkpoints.interval.seconds": 2,
        "ledger.spans.refresh.runs": 10,
        "ledger.spans.window": 2,
        "exactly.once.enabled": h.mode == "eos",
    }
    if h.linger_ms is not None:
        for cluster in raw["clusters"].values():
            cluster["linger.ms"] = h.linger_ms
    path = workdir / "offset-ledger.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path, raw


def wait_topics(bootstrap: str, names: list[str], bound_s: float = 120) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + bound_s
    while not set(names) <= set(admin.list_topics(timeout=30).topics):
        if time.monotonic() > deadline:
            raise RuntimeError(f"replica topics {names} not created within {bound_s:g}s")
        time.sleep(0.5)


def groups_empty(bootstrap: str, groups: list[str], bound_s: float = 60) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        described = admin.describe_consumer_groups(groups, request_timeout=20)
        try:
            if all(not f.result(30).members for f in described.values()):
                return True
        except Exception:  # unknown group (nothing committed yet) counts as empty
            return True
        time.sleep(0.5)
    return False
