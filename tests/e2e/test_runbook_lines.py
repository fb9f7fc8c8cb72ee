"""The README's runbooks, run as written (table output), and every line they quote compared
with what the verbs print (``tests/docs_quotes.py``): an on-call engineer searching for a quoted
line finds the one the program prints.

    P: Payments 3 partitions, 60 records         replicate P->B --once; G reads 40, commits
    status --groups-only                         "group G, flow P->B: ready to fail over P -> B"
    status (producers stopped, G read all)       "cutoff: ready once producers ... stopped ..."
    failover with a member of G still active     "group G has N active member(s) on cluster P"
    failover --catch-up                          "failover <id> (continuous): ...", "subscribe on B"
    G reads on B; replicate B->P --once
    status B->P --groups-only; failback          "ready to fail back", "failback <id> ...",
                                                 "subscribe on P"
    P lost (a configuration whose P does not answer, same ledger and B):
    status --flow 'P->B'                         "flow P->B: unknown: cluster P is unreachable"
    failover --disaster                          "disaster mode (--disaster): ...",
                                                 "failover <id> (disaster): ..."
"""

from __future__ import annotations

import time

import pytest
import yaml
from confluent_kafka import Consumer

from pipelines import cli
from pipelines.devtools.clusters import free_port
from pipelines.devtools.workload import consume, produce
from tests.docs_quotes import assert_printed

pytestmark = [pytest.mark.e2e, pytest.mark.kafka]


def test_the_runbooks_print_what_the_readme_quotes(payments, capsys, tmp_path):
    topic, group, config = payments.topic, payments.group, payments.config
    primary, backup = payments.primary, payments.backup
    produce(primary, topic, [f"p{i}" for i in range(60)], 3)
    base = ["--config", config.path]

    def run(*argv: str, code: int = 0) -> str:
        capsys.readouterr()
        got = cli.main([*argv, *base])
        out = capsys.readouterr()
        assert got == code, out.out + out.err
        return out.out + out.err

    def printed(key: str, output: str) -> None:
        assert_printed(key, output, group, topic)

    run("replicate", "--flow", "P->B", "--once")
    consume(primary, group, [topic], limit=40)
    run("checkpoint", "--flow", "P->B", "--once")
    printed("ready to fail over", run("status", "--flow", "P->B", "--group", group,
                                      "--groups-only"))
    consume(primary, group, [topic])  # G read everything; nothing is produced any more
    run("replicate", "--flow", "P->B", "--once")
    run("checkpoint", "--flow", "P->B", "--once")
    printed("cutoff ready", run("status", "--flow", "P->B", "--group", group))

    member = Consumer(primary.client_config(**{"group.id": group, "log_level": 0}))
    member.subscribe([topic])
    try:
        deadline = time.monotonic() + 60
        while not member.assignment():  # joined: G has an active member on P
            assert time.monotonic() < deadline, "the member never joined"
            member.poll(0.2)
        printed("active members", run("failover", "--group", group, "--from", "P", "--to", "B",
                                      code=2))
    finally:
        member.close()
    moved = run("failover", "--group", group, "--from", "P", "--to", "B", "--catch-up",
                "--timeout", "60")
    printed("failover line", moved)
    printed("subscribe on B", moved)

    produce(backup, topic, [f"b{i}" for i in range(30)], 3)
    consume(backup, group, [f"P.{topic}", topic])
    run("replicate", "--flow", "B->P", "--once")
    printed("ready to fail back", run("status", "--flow", "B->P", "--group", group,
                                      "--groups-only"))
    back = run("failback", "--group", group, "--from", "B", "--to", "P", "--catch-up",
               "--timeout", "60")
    printed("failback line", back)
    printed("subscribe on P", back)

    # P lost: the same ledger and B, P's address answered by nothing.
    raw = yaml.safe_load(open(config.path))
    raw["clusters"]["P"] = {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
    lost = tmp_path / "p-lost.yaml"
    lost.write_text(yaml.safe_dump(raw))
    base = ["--config", str(lost)]
    printed("P lost", run("status", "--flow", "P->B", code=3))
    disaster = run("failover", "--group", group, "--from", "P", "--to", "B", "--disaster")
    printed("disaster mode", disaster)
    printed("disaster failover", disaster)
