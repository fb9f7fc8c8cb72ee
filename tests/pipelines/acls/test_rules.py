"""The pure ACL rules (pipelines/acls/rules.py, check.evaluate) on plain data: MM2's mapping of
topic ACLs to replicas (LITERAL, PREFIXED, wildcard; ALL -> READ, WRITE never, DENY as is),
group ACLs, the diff against what a flow owns, Kafka's evaluation, the move's check, and the
configuration keys."""

from __future__ import annotations

import datetime as dt

import pytest

from ledger.config import ConfigError, config_from_mapping
from pipelines.acls import rules
from pipelines.acls.check import GAPS, OK, evaluate
from pipelines.acls.rules import Binding, Naming

pytestmark = pytest.mark.unit

P = Naming("P")


def b(name: str, op: str = "READ", perm: str = "ALLOW", *, kind: str = "TOPIC",
      pattern: str = "LITERAL", who: str = "User:app", host: str = "*") -> Binding:
    return Binding(kind, name, pattern, who, host, op, perm)


def test_literal_topic_acl_goes_to_the_replica_name():
    assert rules.target_topic_binding(b("Payments"), P, {"Payments"}) == b("P.Payments")
    assert rules.target_topic_binding(b("Orders"), P, {"Payments"}) is None  # not replicated
    assert rules.target_topic_binding(b("Payments"), Naming("P", "_"), {"Payments"}) == b(
        "P_Payments")
    assert rules.target_topic_binding(b("Payments"), Naming("P", prefixless=True),
                                      {"Payments"}) == b("Payments")


def test_allow_all_becomes_read_and_allow_write_is_never_copied():
    assert rules.target_topic_binding(b("Payments", "ALL"), P, {"Payments"}) == b("P.Payments")
    assert rules.target_topic_binding(b("Payments", "WRITE"), P, {"Payments"}) is None
    assert rules.target_topic_binding(b("Payments", "DESCRIBE"), P, {"Payments"}) == b(
        "P.Payments", "DESCRIBE")


def test_deny_is_copied_as_it_is():
    for op in ("WRITE", "ALL", "READ"):
        assert rules.target_topic_binding(b("Payments", op, "DENY"), P, {"Payments"}) == b(
            "P.Payments", op, "DENY")


def test_prefixed_pattern_goes_to_the_prefixed_replica_pattern():
    source = b("Pay", pattern="PREFIXED")
    assert rules.target_topic_binding(source, P, {"Payments"}) == b("P.Pay",
                                                                    pattern="PREFIXED")
    assert rules.target_topic_binding(source, P, {"Orders"}) is None  # covers no replicated


def test_wildcard_topic_goes_to_every_replica_and_not_under_the_prefixless_policy():
    assert rules.target_topic_binding(b("*"), P, {"Payments"}) == b("P.", pattern="PREFIXED")
    assert rules.target_topic_binding(b("*"), Naming("P", prefixless=True),
                                      {"Payments"}) is None


def test_other_resources_are_not_topic_acls():
    assert rules.target_topic_binding(b("Payments", kind="GROUP"), P, {"Payments"}) is None


def test_group_acls_read_describe_and_deny_of_checkpointed_groups():
    groups = {"G"}
    assert rules.target_group_binding(b("G", kind="GROUP"), groups) == b("G", kind="GROUP")
    assert rules.target_group_binding(b("G", "ALL", kind="GROUP"), groups) == b("G",
                                                                               kind="GROUP")
    assert rules.target_group_binding(b("G", "DELETE", kind="GROUP"), groups) is None
    assert rules.target_group_binding(b("G", "DELETE", "DENY", kind="GROUP"), groups) == b(
        "G", "DELETE", "DENY", kind="GROUP")
    assert rules.target_group_binding(b("H", kind="GROUP"), groups) is None
    assert rules.target_group_binding(b("G-", kind="GROUP", pattern="PREFIXED"),
                                      {"G-1"}) == b("G-", kind="GROUP", pattern="PREFIXED")


def test_desired_maps_each_binding_once_and_groups_only_when_asked():
    source = [b("Payments"), b("Payments", "ALL"), b("Payments", "WRITE"), b("G", kind="GROUP")]
    assert set(rules.desired(source, P, {"Payments"})) == {b("P.Payments")}
    with_groups = rules.desired(source, P, {"Payments"}, {"G"})
    assert set(with_groups) == {b("P.Payments"), b("G", kind="GROUP")}
    assert with_groups[b("P.Payments")] == b("Payments", "ALL")  # the first, sorted


def test_diff_adds_what_is_missing_and_removes_only_what_the_flow_owns():
    wanted = {b("P.A"), b("P.B")}
    existing = {b("P.B"), b("P.C"), b("P.Old")}   # P.C: an admin's; P.Old: the flow's
    todo = rules.diff(wanted, owned={b("P.Old"), b("P.B")}, existing=existing)
    assert todo.add == (b("P.A"),)
    assert todo.remove == (b("P.Old"),)


def _row(binding: Binding, action: str, minute: int) -> dict:
    return {"resource_type": binding.resource_type, "resource_name": binding.name,
            "pattern_type": binding.pattern_type, "principal": binding.principal,
            "host": binding.host, "operation": binding.operation,
            "permission_type": binding.permission, "action": action,
            "synced_at": dt.datetime(2026, 1, 1, 0, minute)}


def test_owned_is_the_newest_action_per_binding():
    history = [_row(b("P.A"), "added", 1), _row(b("P.A"), "removed", 2),
               _row(b("P.B"), "added", 1), _row(b("P.C"), "removed", 1),
               _row(b("P.C"), "added", 3)]
    assert rules.owned(reversed(history)) == {b("P.B"), b("P.C")}


def test_authorize_deny_wins_over_allow():
    acls = [b("P.Payments"), b("P.Payments", "READ", "DENY")]
    decision = rules.authorize(acls, "User:app", "TOPIC", "P.Payments", "READ")
    assert not decision.allowed and decision.denied_by == b("P.Payments", "READ", "DENY")
    assert "denied by DENY User:app READ topic P.Payments" in decision.reason


def test_authorize_patterns_wildcards_and_implied_operations():
    def allowed(acls, op="READ", name="P.Payments", who="User:app"):
        return rules.authorize(acls, who, "TOPIC", name, op).allowed

    assert allowed([b("P.", pattern="PREFIXED")])
    assert not allowed([b("P.X", pattern="PREFIXED")])
    assert allowed([b("*")]) and allowed([b("P.Payments", who="User:*")])
    assert not allowed([b("P.Payments", who="User:other")])
    assert allowed([b("P.Payments", "ALL")])
    assert allowed([b("P.Payments", "WRITE")], op="DESCRIBE")
    assert not allowed([b("P.Payments", "DESCRIBE")])
    assert not allowed([b("P.Payments", host="10.0.0.1")])  # the client's host is unknown
    assert not allowed([b("P.Payments"), b("P.", "ALL", "DENY", pattern="PREFIXED",
                                            who="User:*")])
    assert not allowed([])


def test_principals_allowed_skips_denied_ones():
    acls = [b("G", kind="GROUP"), b("G", kind="GROUP", who="User:x"),
            b("G", "ALL", "DENY", kind="GROUP", who="User:x"), b("G", "DESCRIBE", kind="GROUP",
                                                                  who="User:d")]
    assert rules.principals_allowed(acls, "GROUP", "G", "READ") == ["User:app"]


def test_kafka_acls_arguments():
    assert b("P.Pay", "DESCRIBE_CONFIGS", pattern="PREFIXED").acl_arguments() == (
        "--allow-principal User:app --operation DescribeConfigs --topic P.Pay "
        "--resource-pattern-type prefixed")
    assert b("G", "READ", "DENY", kind="GROUP", host="h").acl_arguments() == (
        "--deny-principal User:app --deny-host h --operation Read --group G")


def test_check_passes_when_the_target_authorizes_every_topic_and_the_group():
    source = [b("G", kind="GROUP"), b("Payments")]
    target = [b("G", kind="GROUP"), b("P.", pattern="PREFIXED"), b("Payments")]
    check = evaluate(source, target, "G", ["P.Payments", "Payments"], "B")
    assert check.status == OK and check.principals == ["User:app"]
    assert len(check.checked) == 3 and all(c["allowed"] for c in check.checked)
    assert check.summary().startswith("acls on B: ok, 3 checked for User:app")


def test_check_names_the_exact_acls_to_add_and_the_deny_to_remove():
    source = [b("G", kind="GROUP")]
    target = [b("Payments", "READ", "DENY")]
    check = evaluate(source, target, "G", ["P.Payments", "Payments"], "B")
    assert check.status == GAPS
    assert check.missing == [
        "User:app may not READ topic P.Payments on cluster B: add ACL --allow-principal "
        "User:app --operation Read --topic P.Payments on cluster B",
        "User:app is denied READ on topic Payments on cluster B by DENY User:app READ topic "
        "Payments: remove ACL --deny-principal User:app --operation Read --topic Payments on "
        "cluster B",
        "User:app may not READ group G on cluster B: add ACL --allow-principal User:app "
        "--operation Read --group G on cluster B"]


def test_check_without_principals_checks_nothing():
    check = evaluate([], [], "G", ["P.Payments"], "B")
    assert check.status == OK and not check.checked and "nothing to check" in check.note


def test_configuration_keys_top_level_and_per_flow():
    base = {"clusters": {"P": {"bootstrap.servers": "a:1"}, "B": {"bootstrap.servers": "b:1"}}}
    config = config_from_mapping({**base, "flows": {"P->B": True}})
    flow = config.flow("P->B")
    assert config.for_flow(flow, "sync_topic_acls_enabled") is True
    assert config.for_flow(flow, "sync_topic_acls_interval_seconds") == 600
    assert config.for_flow(flow, "sync_group_acls_enabled") is False
    config = config_from_mapping({
        **base, "sync": {"topic": {"acls": {"enabled": False, "interval.seconds": 30}}},
        "flows": {"P->B": {"sync.topic.acls.enabled": True, "sync.group.acls.enabled": True},
                  "B->P": True}})
    assert config.for_flow(config.flow("P->B"), "sync_topic_acls_enabled") is True
    assert config.for_flow(config.flow("B->P"), "sync_topic_acls_enabled") is False
    assert config.for_flow(config.flow("B->P"), "sync_topic_acls_interval_seconds") == 30
    assert config.for_flow(config.flow("P->B"), "sync_group_acls_enabled") is True
    with pytest.raises(ConfigError, match=r"sync\.topic\.acls\.enabled: invalid value 'maybe'"):
        config_from_mapping({**base, "sync.topic.acls.enabled": "maybe"})
    with pytest.raises(ConfigError, match=r"flows\.P->B\.sync\.topic\.acls\.interval\.seconds"):
        config_from_mapping({**base, "flows": {"P->B": {"sync.topic.acls.interval.seconds": -1}}})


def test_status_checks_nothing_without_groups_and_asks_each_cluster_once(monkeypatch):
    """`status` without --group contacts no cluster for ACLs; with groups, one offset fetch
    for all of them and one check per flow (issue 37: 200 groups asked the authorizer 200
    times)."""
    from types import SimpleNamespace

    from pipelines.acls import check
    from pipelines.edge import kafka_offsets

    flow = SimpleNamespace(name="P->B", source="P", target="B")
    config = SimpleNamespace(cluster=lambda alias: alias)
    fetched, checked = [], []
    monkeypatch.setattr(kafka_offsets, "committed_of", lambda cluster, groups: fetched.append(
        (cluster, list(groups))) or {g: ({("T", 0): 5} if g != "idle" else {}) for g in groups})
    monkeypatch.setattr("pipelines.checkpoint.mapping.subscribe_topics",
                        lambda config, flow, topics: sorted(topics))
    monkeypatch.setattr(check, "check_groups", lambda config, s, t, subscribe, live: (
        checked.append(dict(subscribe))
        or {g: check.AclCheck(g, t, check.OK, ["User:app"]) for g in subscribe}))
    assert check.for_status(config, [flow], []) == [] and fetched == []
    rows = check.for_status(config, [flow], ["g1", "idle", "g2"])
    assert fetched == [("P", ["g1", "idle", "g2"])]
    assert checked == [{"g1": ["T"], "g2": ["T"]}]
    assert [(f, g) for f, g, _, _ in rows] == [("P->B", "g1"), ("P->B", "g2")]
    # The commits `status` read already are not fetched again (issue 37: 0.4 s of 200 groups)
    fetched.clear()
    read = {("P->B", "g1"): {"T"}, ("P->B", "idle"): set(), ("P->B", "g2"): {"T"}}
    assert check.for_status(config, [flow], ["g1", "idle", "g2"], read) == rows
    assert fetched == [] and checked[-1] == {"g1": ["T"], "g2": ["T"]}
    del read[("P->B", "g2")]  # one group unread (its cluster did not answer): all read again
    assert check.for_status(config, [flow], ["g1", "idle", "g2"], read) == rows
    assert fetched == [("P", ["g1", "idle", "g2"])]
    # A cluster the report found away is named, not asked again (each request would wait out
    # its timeout: status of an unreachable P took 20 s).
    fetched.clear()
    away = check.for_status(config, [flow], ["g1"], None,
                            {"P": None, "B": "cluster B is unreachable at b:9092"})
    assert fetched == [] and len(checked) == 3
    assert [(f, g, d["status"], d["note"]) for f, g, _, d in away] == [
        ("P->B", "g1", "unknown", "cluster B is unreachable at b:9092")]
