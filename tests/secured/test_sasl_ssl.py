"""SASL_SSL (SCRAM-SHA-512) clusters with StandardAuthorizer, driven through the CLI.

One secured pair for the module (``start_pair``); the replicator and the application hold
only the ACLs docs/security.md lists. The reference scenario's counts must hold (nothing lost,
nothing read twice) with KIP-848 consumers (``group.protocol=consumer``), and every error at the
Kafka edge must say what it is: a wrong password, an untrusted CA, a missing READ (literal and
regex allowlists), a missing WRITE on the target. No secret in any output or file.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from pipelines import cli
from pipelines.devtools.cluster_security import make_ca
from pipelines.edge import kafka_admin, kafka_offsets
from tests.secured.conftest import (
    committed_values,
    create_topic,
    grant_app,
    grant_replicator,
    grant_streaming,
    kip848_consume,
    produce,
    run,
    start_pair,
    unique,
)

pytestmark = [pytest.mark.secured, pytest.mark.e2e, pytest.mark.spark]
PARTITIONS = 3


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    yield from start_pair(tmp_path_factory, "sasl_ssl")


def secrets_of(pair) -> list[str]:
    return [pair.clusters.material.password(u) for u in ("admin", "replicator", "app")]


def assert_no_secret(pair, *texts: str, folder: Path | None = None) -> None:
    for secret in secrets_of(pair):
        assert all(secret not in t for t in texts), "a password reached the output"
        if folder is not None:
            for f in folder.rglob("*"):
                if f.is_file() and f.name != "offset-ledger.yaml":
                    assert secret.encode() not in f.read_bytes(), f"a password is in {f}"


def test_reference_scenario_with_kip848_groups(spark, pair, tmp_path, capsys):
    topic = unique("Payments")
    group, cutoff_group, disaster_group = unique("G"), unique("G2"), unique("G3")
    groups = [group, cutoff_group, disaster_group]
    for alias in ("P", "B"):
        create_topic(pair, alias, topic, PARTITIONS)
    grant_replicator(pair, "P", "B", [topic])
    grant_replicator(pair, "B", "P", [topic])
    grant_app(pair, [topic], groups)
    config = pair.config(tmp_path, flows={
        "P->B": {"topics": [topic]},
        "B->P": {"topics": [topic], "reverse.checkpointed.topics": [f"P.{topic}"]}},
        **{"sync.group.offsets.enabled": False})
    path = config.path
    app_p, app_b = pair.user("P", "app"), pair.user("B", "app")
    outputs: list[str] = []

    def ok(*argv: str) -> str:
        code, out, err = run(capsys, *argv, "--config", path)
        outputs.extend((out, err))
        assert code == 0, err
        return out

    p_values = [f"P-{i}" for i in range(900)]
    produce(app_p, topic, p_values, PARTITIONS)
    read = kip848_consume(app_p, group, [topic], limit=500)
    kip848_consume(app_p, cutoff_group, [topic], limit=300)
    kip848_consume(app_p, disaster_group, [topic], limit=200)
    ok("replicate", "--flow", "P->B", "--once")
    ok("replicate", "--flow", "B->P", "--once")

    # Group sync writes an empty KIP-848 group's offsets on B.
    ok("checkpoint", "--source", "P", "--target", "B", "--once", "--group", cutoff_group,
       "--sync")
    synced = kafka_offsets.list_offsets(config.cluster("B"), "committed", group=cutoff_group)
    assert sum(synced.values()) == 300 and {t for t, _ in synced} == {f"P.{topic}"}
    translated = json.loads(ok("translate", "--group", group, "--from", "P", "--to", "B",
                               "--format", "json"))
    assert {(t["target_topic"], t["status"]) for t in translated} == {(f"P.{topic}",
                                                                       "translated")}
    assert sum(t["committed_offset"] for t in translated) == 500
    status = json.loads(ok("status", "--flow", "P->B", "--group", group, "--format", "json"))
    assert status["flows"][0]["caught_up"] is True and status["flows"][0]["error"] is None

    # An active KIP-848 member is refused; nothing is written on B.
    stop, joined = threading.Event(), threading.Event()

    def member() -> None:
        from confluent_kafka import Consumer

        c = Consumer({**app_p, "group.id": group, "group.protocol": "consumer",
                      "enable.auto.commit": False, "log_level": 0})
        c.subscribe([topic])
        try:
            while not stop.is_set():
                c.poll(0.2)
                if c.assignment():
                    joined.set()
        finally:
            c.close()

    thread = threading.Thread(target=member, daemon=True)
    thread.start()
    try:
        assert joined.wait(60), "the KIP-848 member never got an assignment"
        code, _, err = run(capsys, "failover", "--group", group, "--from", "P", "--to", "B",
                           "--config", path)
        assert code == 2 and f"group {group} has 1 active member(s)" in err
        assert kafka_offsets.list_offsets(config.cluster("B"), "committed", group=group) == {}
    finally:
        stop.set()
        thread.join(30)

    over = json.loads(ok("failover", "--group", group, "--from", "P", "--to", "B",
                         "--format", "json"))
    assert over["subscribe"] == [f"P.{topic}", topic]
    read += kip848_consume(app_b, group, over["subscribe"])
    # --cutoff: the group has read everything on P, and nothing is left to replicate.
    cut_read = kip848_consume(app_p, cutoff_group, [topic])
    assert len(cut_read) == 600
    cut = json.loads(ok("failover", "--group", cutoff_group, "--from", "P", "--to", "B",
                        "--cutoff", "--timeout", "60", "--format", "json"))
    assert cut["subscribe"] == [f"P.{topic}", topic]
    # --disaster: P is not contacted; the group resumes from its last recorded commits.
    ok("checkpoint", "--source", "P", "--target", "B", "--once", "--group", disaster_group,
       "--no-sync")
    lost = json.loads(ok("failover", "--group", disaster_group, "--from", "P", "--to", "B",
                         "--disaster", "--format", "json"))
    disaster_read = kip848_consume(app_b, disaster_group, lost["subscribe"])
    assert len(disaster_read) == 700 and len(set(disaster_read)) == 700

    b_values = [f"B-{i}" for i in range(600)]
    produce(app_b, topic, b_values, PARTITIONS)
    assert sorted(v for _, v in kip848_consume(app_b, cutoff_group, cut["subscribe"])) == \
        sorted(b_values)
    read += kip848_consume(app_b, group, over["subscribe"], limit=250)
    ok("replicate", "--flow", "B->P", "--once")
    ok("replicate", "--flow", "P->B", "--once")
    back = json.loads(ok("failback", "--group", group, "--from", "B", "--to", "P",
                         "--format", "json"))
    assert back["subscribe"] == [f"B.{topic}", topic]
    read += kip848_consume(app_p, group, back["subscribe"])

    counts = Counter(v for _, v in read)
    assert set(p_values) | set(b_values) == set(counts), "records lost"
    assert {v: c for v, c in counts.items() if c > 1} == {}, "records read twice"
    ok("audit", "--group", group, "--format", "json")
    assert_no_secret(pair, *outputs, folder=tmp_path)


def test_wrong_password_is_named_not_unreachable(spark, pair, tmp_path, capsys):
    config = pair.config(tmp_path, overrides={"P": {"sasl.password": "not-the-password"}})

    def refused(*argv: str, exit_code: int = 2) -> None:
        code, out, err = run(capsys, *argv, "--config", config.path)
        text = out + err
        assert code == exit_code, (argv, code, text)
        assert "cluster P: authentication failed for user replicator (SCRAM-SHA-512)" in text
        assert "unreachable" not in text and "Traceback" not in text
        assert "--disaster" not in text  # a typo in a secret is not a lost data centre
        assert "not-the-password" not in text
        assert_no_secret(pair, text)

    refused("replicate", "--flow", "P->B", "--once")
    refused("replicate", "--flow", "P->B")  # streaming: refused before anything starts
    refused("failover", "--group", "G", "--from", "P", "--to", "B")
    refused("ingest", "mm2", "--flow", "P->B", "--once")
    assert not (tmp_path / "ledger").exists(), "something was written"
    assert cli.main(["ledger", "init", "--config", config.path]) == 0
    refused("status", "--flow", "P->B", "--format", "json", exit_code=3)


def test_untrusted_ca_is_named(spark, pair, tmp_path, capsys):
    make_ca(tmp_path, "other", "a CA that signed nothing of this broker")
    config = pair.config(tmp_path, overrides={"B": {"ssl.ca.location":
                                                    str(tmp_path / "other.pem")}})
    code, out, err = run(capsys, "replicate", "--flow", "P->B", "--once", "--config",
                         config.path)
    assert code == 2, out + err
    assert "cluster B: TLS handshake with" in err
    assert "the broker's certificate is not trusted" in err
    assert f"set ssl.ca.location to the CA that signed it (now {tmp_path / 'other.pem'})" in err
    assert "unreachable" not in err and "Traceback" not in err
    assert not (tmp_path / "ledger").exists()


@pytest.mark.parametrize("allowlist", ["literal", "regex"])
def test_missing_read_on_one_topic_is_an_error_naming_the_acl(spark, pair, tmp_path, capsys,
                                                             allowlist):
    prefix = unique("Ord")
    orders, payments = f"{prefix}Orders", f"{prefix}Payments"
    for t in (orders, payments):
        create_topic(pair, "P", t, 1)
    grant_replicator(pair, "P", "B", [orders, payments])
    app = pair.user("P", "app")
    pair.grant("P", "app", "TOPIC", prefix, ["WRITE", "DESCRIBE"], "PREFIXED")
    topics = [payments, orders] if allowlist == "literal" else [f"{prefix}.*"]
    config = pair.config(tmp_path, flows={"P->B": {"topics": topics}, "B->P": False})
    for t in (orders, payments):
        produce(app, t, [f"{t}-{i}" for i in range(80)], 1)
    code, _, err = run(capsys, "replicate", "--flow", "P->B", "--once", "--config", config.path)
    assert code == 0, err

    pair.revoke("P", "replicator", "TOPIC", orders, ["READ", "DESCRIBE_CONFIGS"])
    for t in (orders, payments):
        produce(app, t, [f"{t}-{i}" for i in range(80, 100)], 1)
    code, out, err = run(capsys, "replicate", "--flow", "P->B", "--once", "--config",
                         config.path)
    assert code == 1, out + err
    assert f"error: topic {orders} not replicated: " in err
    assert (f"cluster P: User:replicator is not authorized to READ topic {orders}: add ACL "
            f"--allow-principal User:replicator --operation Read --topic {orders}") in err
    assert "removed" not in err and "Traceback" not in err
    # The other topic went on.
    replicas = kafka_offsets.list_offsets(config.cluster("B"), "latest", [(f"P.{payments}", 0),
                                                             (f"P.{orders}", 0)])
    assert replicas == {(f"P.{payments}", 0): 100, (f"P.{orders}", 0): 80}
    # status never calls the flow caught up while a replicated topic cannot be read.
    code, out, _ = run(capsys, "status", "--flow", "P->B", "--format", "json", "--config",
                       config.path)
    flow = json.loads(out)["flows"][0]
    assert code != 0 and flow["caught_up"] is False
    assert f"topic {orders} is not replicated" in flow["error"]


def test_missing_write_on_the_target_is_a_topic_error_not_a_traceback(spark, pair, tmp_path,
                                                                      capsys):
    prefix = unique("W")
    denied, fine = f"{prefix}Denied", f"{prefix}Fine"
    for t in (denied, fine):
        create_topic(pair, "P", t, 1)
        produce(pair.admin("P"), t, [f"{t}-{i}" for i in range(30)], 1)
    grant_replicator(pair, "P", "B", [denied, fine])
    # WRITE on the one replica is denied (a DENY wins over the prefixed ALLOW).
    pair.grant("B", "replicator", "TOPIC", f"P.{denied}", ["WRITE"], permission="DENY")
    config = pair.config(tmp_path, flows={"P->B": {"topics": [denied, fine]}, "B->P": False})
    code, out, err = run(capsys, "replicate", "--flow", "P->B", "--once", "--executor", "local",
                         "--config", config.path)
    assert code == 1, out + err
    assert f"error: topic {denied} not replicated: " in err
    assert (f"User:replicator is not authorized to WRITE topic P.{denied}: add ACL "
            f"--allow-principal User:replicator --operation Write --topic P.{denied}") in err
    assert "Traceback" not in err and "pickle" not in err.lower()
    ends = kafka_offsets.list_offsets(config.cluster("B"), "latest", [(f"P.{fine}", 0)])
    assert ends == {(f"P.{fine}", 0): 30}


def test_copy_tasks_as_spark_tasks_then_streaming_with_its_acls(spark, pair, tmp_path, capsys):
    topic, denied = unique("Spark"), unique("Revoked")
    create_topic(pair, "P", topic, 2)
    create_topic(pair, "P", denied, 1)
    grant_replicator(pair, "P", "B", [topic, denied])
    admin = pair.admin("P")
    produce(admin, topic, [f"v{i}" for i in range(200)], 2)
    produce(admin, denied, [f"d{i}" for i in range(20)], 1)
    config = pair.config(tmp_path, flows={"P->B": {"topics": [topic, denied]}, "B->P": False})
    code, _, err = run(capsys, "replicate", "--flow", "P->B", "--once", "--executor", "spark",
                       "--config", config.path)
    assert code == 0, err
    replica = [(f"P.{topic}", p) for p in range(2)]
    assert sum(kafka_offsets.list_offsets(config.cluster("B"), "latest", replica).values()) == 200

    # Streaming (the default continuous mode), exactly-once, with only the ACLs
    # docs/security.md lists for it. READ on one topic is revoked while it streams: that topic
    # is named with the ACL to add (exit 1), the other goes on.
    grant_streaming(pair, "P", "B")
    produce(admin, topic, [f"w{i}" for i in range(100)], 2)
    b_admin = pair.admin("B")
    failures: list[BaseException] = []

    def wait(condition, what: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.5)

    def drive() -> None:
        try:
            wait(lambda: len(committed_values(b_admin, f"P.{topic}", 2, 10)) == 300, "300")
            pair.revoke("P", "replicator", "TOPIC", denied, ["READ", "DESCRIBE_CONFIGS"])
            produce(admin, topic, [f"x{i}" for i in range(50)], 2)
            produce(admin, denied, [f"e{i}" for i in range(10)], 1)
            wait(lambda: len(committed_values(b_admin, f"P.{topic}", 2, 10)) == 350, "350")
            wait(lambda: channel_error(b_admin, denied), f"the error of {denied}")
        except BaseException as exc:
            failures.append(exc)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # the job records and stops

    # A SIGTERM arriving after the job ended must not end the test run.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        code, out, err = run(capsys, "replicate", "--flow", "P->B", "--exactly-once",
                             "--executor", "local", "--commit-interval", "1", "--interval",
                             "0.5", "--config", config.path)
        driver.join(180)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not failures, (failures, err[-4000:])
    assert code == 1, out + err
    assert f"error: topic {denied} not replicated: " in err
    assert (f"cluster P: User:replicator is not authorized to READ topic {denied}: add ACL "
            f"--allow-principal User:replicator --operation Read --topic {denied}") in err
    assert "removed" not in err and "Traceback" not in err and "pickle" not in err.lower()
    values = committed_values(b_admin, f"P.{topic}", 2)
    twice = sorted(v for v, n in Counter(values).items() if n > 1)
    assert len(values) == 350 and not twice, ("a read_committed reader: once each", twice,
                                              err[-6000:])
    assert len(committed_values(b_admin, f"P.{denied}", 1)) == 20
    code, out, _ = run(capsys, "status", "--flow", "P->B", "--format", "json", "--config",
                       config.path)
    flow = json.loads(out)["flows"][0]
    assert code != 0 and flow["caught_up"] is False
    assert f"topic {denied} is not replicated" in flow["error"]
    assert_no_secret(pair, out, err, folder=tmp_path)


def channel_error(props: dict, topic: str) -> bool:
    """Whether the flow's runs channel holds a copy task's error for ``topic``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from pipelines.replicate import channel

    consumer = Consumer({**props, "group.id": unique("peek"), "enable.partition.eof": True,
                         "isolation.level": "read_committed", "log_level": 0})
    try:
        consumer.assign([TopicPartition(channel.topic_name("P", "B"), channel.RUNS_PARTITION,
                                        OFFSET_BEGINNING)])
        while (msg := consumer.poll(5)) is not None and msg.error() is None:
            decoded = channel.decode(msg.value())
            if isinstance(decoded, channel.TaskError) and decoded.topic == topic:
                return True
    finally:
        consumer.close()
    return False


def mm2_acls(pair, user: str, topic_prefix: str) -> None:
    """MirrorMaker 2's own ACLs (its user, not the replicator's): read the source topics and
    keep its offset-syncs topic on P; on B write the replicas, its checkpoints and Connect's
    internal topics. Nothing on ``heartbeats`` (heartbeats off): MM2 leaves the topics the
    other tests' replicator writes alone."""
    everything = ["ALL"]
    pair.grant("P", user, "TOPIC", topic_prefix, ["READ", "DESCRIBE", "DESCRIBE_CONFIGS"],
               "PREFIXED")
    pair.grant("P", user, "TOPIC", "mm2-", everything, "PREFIXED")
    pair.grant("B", user, "TOPIC", f"P.{topic_prefix}", everything, "PREFIXED")
    pair.grant("B", user, "TOPIC", "mm2-", everything, "PREFIXED")
    pair.grant("B", user, "TOPIC", "P.checkpoints.internal", everything)
    for alias in ("P", "B"):
        pair.grant(alias, user, "GROUP", "*", everything)
        pair.grant(alias, user, "BROKER", "kafka-cluster", ["DESCRIBE", "DESCRIBE_CONFIGS"])


def test_ingest_mm2_from_a_secured_mirrormaker_then_translate(spark, pair, tmp_path, capsys):
    """A real MirrorMaker 2 with its own SCRAM user and ACLs replicates P->B; the replicator
    ingests its syncs and checkpoints with only the READs docs/security.md lists for
    ``ingest mm2`` (a missing one is named, exit 2, nothing written), then translates."""
    from pipelines.mm2.ingest import Source, read_topic
    from tests.pipelines.mm2.mm2_process import (
        MirrorMaker2,
        await_checkpointed,
        mm2_properties,
        new_run_id,
    )
    from tests.secured.conftest import add_scram_user, java_client_properties

    prefix = "mm2s-"
    topic, group = unique(prefix), unique("mm2sg-")
    create_topic(pair, "P", topic, PARTITIONS)
    produce(pair.admin("P"), topic, [f"m{i}" for i in range(600)], PARTITIONS)
    admin = pair.config(tmp_path / "admin", user="admin",
                        flows={"P->B": {"topics": [topic]}, "B->P": False})
    committed = {0: 30, 1: 145, 2: 160}  # away from MM2's sync points (0, 100, ...)
    kafka_admin.alter_group_offsets(admin.cluster("P"), group,
                                    {(topic, p): o for p, o in committed.items()})
    mm2_password = add_scram_user(pair, "mm2")
    mm2_acls(pair, "mm2", prefix)
    props = mm2_properties(pair.clusters.bootstrap("P"), pair.clusters.bootstrap("B"),
                           topics=f"{prefix}.*", groups="mm2sg-.*", run_id=new_run_id(),
                           extra={**java_client_properties(pair, "mm2", mm2_password),
                                  "sync.topic.acls.enabled": "false",
                                  "sync.group.offsets.enabled": "false",
                                  "emit.heartbeats.enabled": "false"})
    mm2 = MirrorMaker2(tmp_path / "mm2", props).start()
    try:
        mm2_cps = await_checkpointed(admin, mm2, topic, group, committed)
    finally:
        mm2.stop()  # what follows reads what MM2 wrote; it need not run on
    syncs_topic = "mm2-offset-syncs.B.internal"
    records, _ = read_topic(Source(admin.cluster("P"), syncs_topic), None)
    assert records, "MM2 wrote no offset-sync"
    # MM2 checkpoints a partition again when a newer sync improves its downstream offset, so
    # the topic may hold more checkpoints than the group has partitions: count what it holds.
    checkpoints, _ = read_topic(Source(admin.cluster("B"), "P.checkpoints.internal"), None)
    assert len(checkpoints) >= PARTITIONS, "MM2 wrote fewer checkpoints than partitions"

    grant_replicator(pair, "P", "B", [topic])
    for name in ("P.checkpoints.internal", mm2.connect_offsets_topic):
        pair.grant("B", "replicator", "TOPIC", name, ["READ"])
    config = pair.config(tmp_path / "replicator",
                         flows={"P->B": {"topics": [topic]}, "B->P": False})
    ingest = ["ingest", "mm2", "--flow", "P->B", "--once", "--config", config.path,
              "--connect-offsets-topic", mm2.connect_offsets_topic]
    outputs: list[str] = []

    # Without READ on MM2's offset-syncs topic: the ACL is named, nothing is written.
    code, out, err = run(capsys, *ingest)
    outputs += [out, err]
    assert code == 2, out + err
    assert err == (f"error: cluster P: User:replicator is not authorized to READ topic "
                   f"{syncs_topic}: add ACL --allow-principal User:replicator --operation Read "
                   f"--topic {syncs_topic} on cluster P\n")
    assert not (tmp_path / "replicator" / "ledger").exists()

    pair.grant("P", "replicator", "TOPIC", syncs_topic, ["READ"])
    code, out, err = run(capsys, *ingest)
    outputs += [out, err]
    assert code == 0, err
    counts = f"{len(records)} offset-sync(s), {len(checkpoints)} checkpoint(s)"
    assert f"ingest mm2 flow P->B: {counts}" in out, out

    code, out, err = run(capsys, "translate", "--group", group, "--from", "P", "--to", "B",
                         "--format", "json", "--config", config.path)
    outputs += [out, err]
    assert code == 0, err
    translations = {t["partition"]: t for t in json.loads(out)}
    for p, c in committed.items():
        t = translations[p]
        assert t["status"] == "translated" and t["target_topic"] == f"P.{topic}"
        assert mm2_cps[p].downstream_offset <= t["offset"] <= c, "never skips, never coarser"
    assert_no_secret(pair, *outputs, folder=tmp_path / "replicator")
    assert all(mm2_password not in text for text in outputs)
