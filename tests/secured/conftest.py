"""A secured pair of embedded clusters, started once per test module by the project's code.

``EmbeddedClusters(..., security=...)`` (``offset-ledger clusters up --security``) makes the CA,
the users (``admin`` super user for setup only, ``replicator``, ``app``) and starts two KRaft
brokers with ``StandardAuthorizer`` and ``allow.everyone.if.no.acl.found=false``. The fixture
then grants, as ``admin``, exactly the ACLs ``docs/security.md`` lists: what passes here is
what the docs promise.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger.config import Config, config_from_mapping
from pipelines import cli
from pipelines.devtools import cluster_security
from pipelines.devtools.clusters import EmbeddedClusters, free_port

ALIASES = ("P", "B")


@dataclass
class SecuredPair:
    clusters: EmbeddedClusters

    def admin(self, alias: str) -> dict[str, Any]:
        return self.clusters.client_config(alias, cluster_security.SUPER_USER)

    def user(self, alias: str, user: str) -> dict[str, Any]:
        return self.clusters.client_config(alias, user)

    def grant(self, alias: str, principal: str, resource: str, name: str, ops: list[str],
              pattern: str = "LITERAL", permission: str = "ALLOW") -> None:
        cluster_security.grant(self.admin(alias), principal, resource, name, ops, pattern,
                               permission)

    def revoke(self, alias: str, principal: str, resource: str, name: str, ops: list[str],
               pattern: str = "LITERAL") -> None:
        cluster_security.revoke(self.admin(alias), principal, resource, name, ops, pattern)

    def config(self, folder: Path, user: str = "replicator", overrides: dict | None = None,
               **raw_overrides: Any) -> Config:
        """A configuration whose clusters are ``user``'s, with a fresh ledger in ``folder``;
        ``overrides``: per-alias property overrides (a wrong password...)."""
        raw: dict[str, Any] = {
            "clusters": {a: {**self.user(a, user), **(overrides or {}).get(a, {})}
                         for a in ALIASES},
            "flows": {"P->B": True, "B->P": True},
            "ledger": {"location": str(folder / "ledger")},
            "embedded": {"data.dir": str(self.clusters.data_dir)},
        }
        raw.update(raw_overrides)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "offset-ledger.yaml"
        path.write_text(json.dumps(raw))  # JSON is YAML
        return config_from_mapping(raw, path=str(path))


def grant_replicator(pair: SecuredPair, source: str, target: str, topics: list[str]) -> None:
    """The replicator's ACLs for the flow ``source->target`` (docs/security.md, verb by verb):
    each source topic literally (so one can be revoked), the replicas by prefix."""
    r = "replicator"
    for topic in topics:
        pair.grant(source, r, "TOPIC", topic, ["READ", "DESCRIBE_CONFIGS"])
    pair.grant(source, r, "GROUP", "*", ["DESCRIBE"])
    pair.grant(target, r, "TOPIC", f"{source}.", ["CREATE", "WRITE", "READ", "DESCRIBE",
                                                  "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALTER"],
               "PREFIXED")
    pair.grant(target, r, "GROUP", "*", ["READ", "DESCRIBE"])
    for alias in (source, target):
        pair.grant(alias, r, "TOPIC", "heartbeats", ["CREATE", "WRITE", "READ", "DESCRIBE",
                                                     "DESCRIBE_CONFIGS"])


def grant_streaming(pair: SecuredPair, source: str, target: str) -> None:
    """What continuous ``replicate`` in streaming mode needs on the target besides
    :func:`grant_replicator` (docs/security.md): the runs channel topic, the driver's group
    (the lease) and, for ``--exactly-once``, the transactional ids (prefixed)."""
    r, flow = "replicator", f"{source}-{target}"
    pair.grant(target, r, "TOPIC", f"offset-ledger-runs.{flow}.internal",
               ["CREATE", "WRITE", "READ", "DESCRIBE"])
    pair.grant(target, r, "GROUP", f"offset-ledger-replicate.{flow}", ["READ", "DESCRIBE"])
    pair.grant(target, r, "TRANSACTIONAL_ID", f"offset-ledger-replicate.{flow}.",
               ["WRITE", "DESCRIBE"], "PREFIXED")


def committed_values(props: dict[str, Any], topic: str, partitions: int,
                     timeout: float = 60.0) -> list[str]:
    """Every value of ``topic`` a ``read_committed`` consumer reads (to the end, no group)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**props, "group.id": f"count-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "enable.auto.commit": False, "log_level": 0})
    out: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == -191:  # _PARTITION_EOF
                    at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            out.append(msg.value().decode())
    finally:
        consumer.close()
    return out


def grant_app(pair: SecuredPair, topics: list[str], groups: list[str]) -> None:
    """The application's ACLs: its topics and their replicas on both clusters, its groups."""
    for alias, other in (("P", "B"), ("B", "P")):
        for topic in topics:
            pair.grant(alias, "app", "TOPIC", topic, ["READ", "WRITE", "DESCRIBE"])
            pair.grant(alias, "app", "TOPIC", f"{other}.{topic}", ["READ", "DESCRIBE"])
        for group in groups:
            pair.grant(alias, "app", "GROUP", group, ["READ", "DESCRIBE"])


def start_pair(tmp_path_factory: pytest.TempPathFactory, security: str) -> Iterator[SecuredPair]:
    data_dir = tmp_path_factory.mktemp(f"secured-{security}")
    raw = {"clusters": {a: {"bootstrap.servers": f"127.0.0.1:{free_port()}"} for a in ALIASES},
           "flows": {"P->B": True, "B->P": True}, "embedded": {"data.dir": str(data_dir)}}
    clusters = EmbeddedClusters(config_from_mapping(raw, path=str(data_dir / "c.yaml")),
                                tied_to_parent=True, security=security)
    clusters.up()
    try:
        yield SecuredPair(clusters)
    finally:
        clusters.down()


def kip848_consume(props: dict[str, Any], group: str, topics: list[str],
                   limit: int | None = None, timeout: float = 90.0) -> list[tuple[str, str]]:
    """Consume as a KIP-848 group member (``group.protocol=consumer``, ``subscribe``): to the
    end (every partition of ``topics`` assigned and read up to its high watermark as it was
    when the call began) or ``limit`` records; commit what was processed; leave the group (it
    becomes empty). The end is awaited as a condition, never as a quiet period."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**props, "group.id": group, "group.protocol": "consumer",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "log_level": 0})
    out: list[tuple[str, str]] = []
    last: dict[tuple[str, int], int] = {}
    try:
        metadata = consumer.list_topics(timeout=30).topics
        parts = [TopicPartition(t, p) for t in topics if t in metadata
                 for p in metadata[t].partitions]
        ends, position = {}, {}
        for tp in consumer.committed(parts, timeout=30):
            low, high = consumer.get_watermark_offsets(tp, timeout=30)
            key = (tp.topic, tp.partition)
            ends[key], position[key] = high, tp.offset if tp.offset >= 0 else low
        consumer.subscribe(topics)
        deadline = time.monotonic() + timeout
        while limit is None or len(out) < limit:
            assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
            if assigned >= ends.keys() and all(position[k] >= e for k, e in ends.items()):
                break
            assert time.monotonic() < deadline, (
                f"{group} did not reach the end of {topics} (at {position}, ends {ends}, "
                f"assigned {sorted(assigned)})")
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.topic(), msg.value().decode()))
            key = (msg.topic(), msg.partition())
            last[key] = position[key] = msg.offset() + 1
        if last:
            consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in last.items()],
                            asynchronous=False)
    finally:
        consumer.close()
    return out


def produce(props: dict[str, Any], topic: str, values: list[str], partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({**props, "enable.idempotence": True, "log_level": 0})
    errors: list[str] = []
    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=f"k{i % 7}", partition=i % partitions,
                         on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
    assert producer.flush(60) == 0 and not errors, errors[:3]


def create_topic(pair: SecuredPair, alias: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(pair.admin(alias))
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


def add_scram_user(pair: SecuredPair, user: str) -> str:
    """A SCRAM-SHA-512 user created on both clusters as ``admin`` (for a peer such as MM2);
    returns its generated password."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    password = secrets.token_urlsafe(18)
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
    for alias in ALIASES:
        admin = AdminClient({**pair.admin(alias), "log_level": 0})
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)
    return password


def java_client_properties(pair: SecuredPair, user: str, password: str) -> dict[str, str]:
    """A Java Kafka client's settings (per alias, ``<alias>.`` prefixed as MirrorMaker 2 takes
    them) for SCRAM-SHA-512 over TLS with the pair's CA as a PEM truststore."""
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";')
    out: dict[str, str] = {}
    for alias in ALIASES:
        out.update({f"{alias}.security.protocol": "SASL_SSL",
                    f"{alias}.sasl.mechanism": cluster_security.MECHANISM,
                    f"{alias}.sasl.jaas.config": jaas,
                    f"{alias}.ssl.truststore.type": "PEM",
                    f"{alias}.ssl.truststore.location": str(pair.clusters.material.ca)})
    return out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``offset-ledger <argv>`` in-process: its exit code, and what it printed to stdout and
    stderr (alone: what was captured before is dropped)."""
    capsys.readouterr()
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:6]}"
