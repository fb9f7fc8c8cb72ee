"""failover --catch-up, status and replicate --once with a streaming replicate job beside them:
the move waits for the stream's commits (it never copies the same records a second time), and a
continuous failover with producers writing is ready within about one commit interval."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest

from ledger.schemas import OFFSET_SYNCS
from ledger.tables import Ledger
from pipelines import cli
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.replicate.job import replicate_continuously
from tests.pipelines.failover.test_modes import LiveProducer, failover

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]
COMMIT_S = 1.0


def test_continuous_failover_with_a_streaming_job_beside_it(spark, make_config, unique, capsys):
    topic, group = unique("sf-topic"), unique("sf-group")
    config = make_config(flows={"P->B": {"topics": ["sf-.*"]}, "B->P": {"topics": ["sf-.*"]}})
    primary, backup = config.cluster("P"), config.cluster("B")
    assert cli.main(["ledger", "init", "--config", config.path]) == 0
    kafka_admin.create_topic(primary, topic, 3)
    first = [f"v{i}" for i in range(300)]
    produce(primary, topic, first, 3)
    stop = threading.Event()
    outcome: dict = {}

    def stream() -> None:
        try:
            outcome["result"] = replicate_continuously(
                spark, config, "P->B", stop=stop, executor="local",
                commit_interval_s=COMMIT_S, interval_s=0.5)
        except BaseException as exc:
            outcome["error"] = exc

    job = threading.Thread(target=stream, daemon=True)
    job.start()
    try:
        with LiveProducer(primary, topic, 3, "on-p") as on_p:
            read = consume(primary, group, [topic], limit=450)  # live records too
            # A --once pass would copy the stream's records a second time: refused.
            capsys.readouterr()
            assert cli.main(["replicate", "--flow", "P->B", "--once",
                             "--config", config.path]) == 2
            assert "streamed by a running" in capsys.readouterr().err
            started = time.monotonic()
            assert cli.main(failover(config, "--group", group, "--catch-up", "--format",
                                     "json", "--timeout", "60")) == 0
            waited = time.monotonic() - started
            over = json.loads(capsys.readouterr().out)
            assert over["mode"] == "continuous"
            # status reads the stream's runs: G's commits are covered (producers write on, so
            # only the group's verdict counts).
            assert cli.main(["status", "--flow", "P->B", "--group", group, "--groups-only",
                             "--config", config.path]) == 0
            read += consume(backup, group, over["subscribe"])
        # The producers stopped: the stream copies their last records, G reads them on B.
        ends = kafka_offsets.list_offsets(primary, "latest", [(topic, p) for p in range(3)])
        deadline = time.monotonic() + 120
        while sum(kafka_offsets.list_offsets(backup, "latest", [(f"P.{topic}", p)
                                                   for p in range(3)]).values()) < sum(
                ends.values()):
            assert "error" not in outcome, outcome
            assert time.monotonic() < deadline, "the stream did not copy the last records"
            time.sleep(0.3)
        read += consume(backup, group, over["subscribe"])
    finally:
        stop.set()
        job.join(120)
    assert "error" not in outcome, outcome
    counts = Counter(v for _, v in read)
    produced = first + on_p.values
    assert set(produced) == set(counts), "a record was lost"
    assert sum(counts.values()) == len(produced), "a record was read twice"
    # Every run is the stream's: the catch-up waited for its commits and copied nothing.
    run_ids = {r["run_id"] for r in Ledger(spark, config.ledger_location).read(OFFSET_SYNCS)
               .where(f"topic = '{topic}'").select("run_id").distinct().collect()}
    assert run_ids == {outcome["result"].run_id}
    print(f"failover waited {waited:.1f}s with a commit interval of {COMMIT_S:g}s")
