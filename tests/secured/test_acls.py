"""ACL sync and the permission check of a move, on SASL_SSL clusters with StandardAuthorizer.

One secured pair for the module. The application's ACLs exist only on P: ``replicate`` copies
them to B (MM2's rules, plus the opt-in group ACLs), so the group fails over and its consumers
read on B with no hand-made ACL, then fail back. Each rule (DENY, PREFIXED, ALL, WRITE) is
checked on B's real ACLs and in the ledger's ``acl_syncs``; a replicator lacking ALTER on the
cluster keeps replicating and names the missing ACL; ``--require-acls`` writes nothing.
"""

from __future__ import annotations

import json
import logging

import pytest

from ledger.config import ClusterConfig
from pipelines.acls.admin import describe
from pipelines.acls.rules import Binding
from pipelines.edge import kafka_offsets
from tests.secured.conftest import (
    create_topic,
    grant_replicator,
    kip848_consume,
    produce,
    run,
    start_pair,
    unique,
)

pytestmark = [pytest.mark.secured, pytest.mark.e2e, pytest.mark.spark]
PARTITIONS = 2


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    yield from start_pair(tmp_path_factory, "sasl_ssl")


def grant_acl_sync(pair, aliases=("P", "B"), operations=("DESCRIBE", "ALTER")) -> None:
    """The replicator's extra ACLs for ACL sync and the check (docs/security.md#acl-sync)."""
    for alias in aliases:
        pair.grant(alias, "replicator", "BROKER", "kafka-cluster", list(operations))


def acls_on(pair, alias: str, name_part: str) -> set[Binding]:
    """B's bindings whose name holds ``name_part`` (the replicator's own are synced too, as
    MM2 does: left out here)."""
    found = describe(ClusterConfig(alias, pair.admin(alias)))
    return {b for b in found if name_part in b.name and b.principal != "User:replicator"}


def acl_sync_rows(folder) -> list[dict]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(folder / "ledger" / "acl_syncs")).to_pyarrow_table().to_pylist()
    return [r for r in rows if r["principal"] != "User:replicator"]


def b(name: str, op: str = "READ", perm: str = "ALLOW", *, kind: str = "TOPIC",
      pattern: str = "LITERAL", who: str = "User:app") -> Binding:
    return Binding(kind, name, pattern, who, "*", op, perm)


def test_a_group_with_acls_only_on_p_fails_over_and_back(spark, pair, tmp_path, capsys):
    topic, group = unique("Pay"), unique("G")
    create_topic(pair, "P", topic, PARTITIONS)
    grant_replicator(pair, "P", "B", [topic])
    grant_replicator(pair, "B", "P", [])
    grant_acl_sync(pair)
    pair.grant("P", "app", "TOPIC", topic, ["READ", "WRITE", "DESCRIBE"])
    pair.grant("P", "app", "GROUP", group, ["READ"])

    def config(group_acls: bool):
        return pair.config(tmp_path, flows={
            "P->B": {"topics": [topic], "groups": [group],
                     "sync.group.acls.enabled": group_acls},
            "B->P": {"topics": [f"{topic}.*"], "reverse.checkpointed.topics": [f"P.{topic}"]}},
            **{"sync.group.offsets.enabled": False}).path

    app_p, app_b = pair.user("P", "app"), pair.user("B", "app")
    values = [f"v{i}" for i in range(400)]
    produce(app_p, topic, values, PARTITIONS)
    read = kip848_consume(app_p, group, [topic], limit=150)

    # Topic ACLs are synced by default; the group's are not (opt-in): the check names it.
    path = config(group_acls=False)
    code, _, err = run(capsys, "replicate", "--flow", "P->B", "--once", "--config", path)
    assert code == 0, err
    assert b(f"P.{topic}") in acls_on(pair, "B", topic)
    assert b(f"P.{topic}", "WRITE") not in acls_on(pair, "B", topic)
    code, _, err = run(capsys, "failover", "--group", group, "--from", "P", "--to", "B",
                       "--require-acls", "--config", path)
    assert code == 2, err
    assert (f"User:app may not READ group {group} on cluster B: add ACL --allow-principal "
            f"User:app --operation Read --group {group} on cluster B") in err
    assert "unreachable" not in err
    assert kafka_offsets.list_offsets(ClusterConfig("B", pair.admin("B")), "committed",
                                      group=group) == {}, "--require-acls wrote offsets"

    path = config(group_acls=True)
    code, _, err = run(capsys, "replicate", "--flow", "P->B", "--once", "--config", path)
    assert code == 0, err
    assert b(group, kind="GROUP") in acls_on(pair, "B", group)
    code, out, err = run(capsys, "failover", "--group", group, "--from", "P", "--to", "B",
                         "--require-acls", "--format", "json", "--config", path)
    assert code == 0, err
    over = json.loads(out)
    # The replicator holds READ on group * on P (for failbacks): it is checked too.
    assert over["acl_check"]["status"] == "ok" and over["acl_check"]["principals"] == [
        "User:app", "User:replicator"]
    assert {(c["resource_type"], c["name"]) for c in over["acl_check"]["checked"]
            if c["principal"] == "User:app"} == {("TOPIC", f"P.{topic}"), ("GROUP", group)}
    assert over["subscribe"] == [f"P.{topic}", topic]
    assert over["acl_check"]["not_on_target"] == [topic]
    read += kip848_consume(app_b, group, [f"P.{topic}"], limit=100)  # no hand-made ACL

    code, out, err = run(capsys, "failback", "--group", group, "--from", "B", "--to", "P",
                         "--catch-up", "--require-acls", "--format", "json", "--config", path)
    assert code == 0, err
    back = json.loads(out)
    assert back["acl_check"]["status"] == "ok"
    read += kip848_consume(app_p, group, back["subscribe"])
    assert sorted(v for _, v in read) == sorted(values), "records lost or read twice"

    from deltalake import DeltaTable

    ops = DeltaTable(str(tmp_path / "ledger" / "operations")).to_pyarrow_table().to_pylist()
    assert sorted(o["message"] for o in ops) == [
        "acls on B: ok, 4 checked for User:app, User:replicator",
        "acls on P: ok, 4 checked for User:app, User:replicator"]
    added = {(r["resource_type"], r["resource_name"], r["operation"]) for r in
             acl_sync_rows(tmp_path) if r["action"] == "added"}
    assert {("TOPIC", f"P.{topic}", "READ"), ("GROUP", group, "READ")} <= added


def test_mm2_rules_deny_prefixed_all_write_and_removal(spark, pair, tmp_path, capsys,
                                                        caplog):
    topic, prefix = unique("Rules"), unique("pre")
    other = f"{prefix}-orders"
    for name in (topic, other):
        create_topic(pair, "P", name, 1)
    grant_replicator(pair, "P", "B", [topic, other])
    grant_acl_sync(pair)
    pair.grant("P", "app", "TOPIC", topic, ["ALL"])                       # -> READ
    pair.grant("P", "app", "TOPIC", topic, ["WRITE"])                     # never copied
    pair.grant("P", "intruder", "TOPIC", topic, ["READ"], permission="DENY")   # as is
    pair.grant("P", "app", "TOPIC", prefix, ["READ"], "PREFIXED")        # -> P.<prefix>
    pair.grant("B", "app", "TOPIC", f"P.{other}", ["DESCRIBE"])            # B's own, kept
    pair.grant("P", "app", "TOPIC", other, ["DESCRIBE"])                  # already on B
    path = pair.config(tmp_path, flows={"P->B": {"topics": [topic, other]},
                                        "B->P": False}).path

    code, _, err = run(capsys, "replicate", "--flow", "P->B", "--once", "--config", path)
    assert code == 0, err
    synced = acls_on(pair, "B", topic) | acls_on(pair, "B", prefix)
    assert synced == {b(f"P.{topic}"), b(f"P.{topic}", who="User:intruder", perm="DENY"),
                      b(f"P.{prefix}", pattern="PREFIXED"), b(f"P.{other}", "DESCRIBE")}
    rows = acl_sync_rows(tmp_path)
    assert {(r["resource_name"], r["action"]) for r in rows} == {
        (f"P.{topic}", "added"), (f"P.{prefix}", "added")}  # 3 bindings; B's own not recorded
    assert len(rows) == 3

    # The source drops the ALL and B's own DESCRIBE; the sync removes only what it added.
    pair.revoke("P", "app", "TOPIC", topic, ["ALL"])
    pair.revoke("P", "app", "TOPIC", other, ["DESCRIBE"])
    code, _, err = run(capsys, "replicate", "--flow", "P->B", "--once", "--config", path)
    assert code == 0, err
    assert b(f"P.{topic}") not in acls_on(pair, "B", topic)
    assert b(f"P.{other}", "DESCRIBE") in acls_on(pair, "B", other)
    removed = [r for r in acl_sync_rows(tmp_path) if r["action"] == "removed"]
    assert [(r["resource_name"], r["principal"], r["operation"]) for r in removed] == [
        (f"P.{topic}", "User:app", "READ")]

    # Without ALTER on B's cluster: one line naming the ACL, and replication goes on.
    pair.revoke("B", "replicator", "BROKER", "kafka-cluster", ["ALTER"])
    pair.grant("P", "app", "TOPIC", topic, ["DESCRIBE"])
    produce(pair.user("P", "app"), topic, ["x", "y"], 1)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pipelines.acls.sync"):
        code, out, err = run(capsys, "replicate", "--flow", "P->B", "--once", "--config", path)
    assert code == 0, err
    assert "2 record(s) copied" in out
    lines = [r.getMessage() for r in caplog.records if r.name == "pipelines.acls.sync"]
    assert len(lines) == 1, lines
    assert "missing ACL: cluster B: User:replicator is not authorized to ALTER" in lines[0]
    assert "add ACL --allow-principal User:replicator --operation Alter --cluster" in lines[0]
    assert "unreachable" not in lines[0]
    pair.grant("B", "replicator", "BROKER", "kafka-cluster", ["ALTER"])
