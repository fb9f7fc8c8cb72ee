"""Config validation: each error names the bad key and value; secrets never shown."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from ledger.config import (
    MASK,
    ConfigError,
    config_from_mapping,
    is_catalog_schema,
    load_config,
    resolve_location,
)

pytestmark = pytest.mark.unit

BASE = {
    "clusters": {"P": {"bootstrap.servers": "127.0.0.1:1"},
                 "B": {"bootstrap.servers": "127.0.0.1:2"}},
    "flows": {"P->B": True, "B->P": True},
}


def with_(**changes):
    raw = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    raw.update(changes)
    return raw


def test_defaults_are_mm2s():
    config = config_from_mapping(BASE)
    assert config.replication_policy_separator == "."
    assert config.emit_checkpoints_interval_seconds == 60
    assert config.sync_group_offsets_interval_seconds == 60
    assert config.sync_group_offsets_enabled is False
    assert [f.name for f in config.flows] == ["P->B", "B->P"]


def test_nested_and_flat_mm2_keys_mean_the_same():
    flat = config_from_mapping(with_(**{"replication.policy.separator": "_"}))
    nested = config_from_mapping(with_(replication={"policy": {"separator": "_"}}))
    assert flat.replication_policy_separator == nested.replication_policy_separator == "_"


def test_exactly_once_top_level_and_per_flow():
    assert not config_from_mapping(BASE).exactly_once(config_from_mapping(BASE).flow("P->B"))
    config = config_from_mapping(with_(
        exactly={"once": {"enabled": True}},
        flows={"P->B": True, "B->P": {"exactly.once.enabled": False}}))
    assert config.exactly_once(config.flow("P->B")) is True
    assert config.exactly_once(config.flow("B->P")) is False
    with pytest.raises(ConfigError, match=r"exactly\.once\.enabled: invalid value"):
        config_from_mapping(with_(**{"exactly.once.enabled": "maybe"}))


def test_tasks_max_top_level_and_per_flow():
    assert config_from_mapping(BASE).tasks_max_for(config_from_mapping(BASE).flow("P->B")) is None
    config = config_from_mapping(with_(**{"tasks.max": 4}, flows={
        "P->B": True, "B->P": {"tasks.max": "1"}}))
    assert config.tasks_max_for(config.flow("P->B")) == 4
    assert config.tasks_max_for(config.flow("B->P")) == 1
    for bad in (0, -2, 1.5, "many", True):
        with pytest.raises(ConfigError, match=r"tasks\.max.*whole number of tasks"):
            config_from_mapping(with_(**{"tasks.max": bad}))
    with pytest.raises(ConfigError, match=r"flows\.P->B\.tasks\.max"):
        config_from_mapping(with_(flows={"P->B": {"tasks.max": 0}}))


def test_transaction_boundary_interval_top_level_and_per_flow():
    base = config_from_mapping(BASE)
    assert base.transaction_boundary_s(base.flow("P->B")) == 0.03
    config = config_from_mapping(with_(**{"transaction.boundary.interval.ms": 15}, flows={
        "P->B": True, "B->P": {"transaction.boundary.interval.ms": "0"}}))
    assert config.transaction_boundary_s(config.flow("P->B")) == 0.015
    assert config.transaction_boundary_s(config.flow("B->P")) == 0.0
    for bad in (-1, 1.5, "soon", True, 10_001):
        with pytest.raises(ConfigError, match=r"transaction\.boundary\.interval\.ms.*whole "
                                              r"milliseconds from 0"):
            config_from_mapping(with_(**{"transaction.boundary.interval.ms": bad}))
    with pytest.raises(ConfigError, match=r"flows\.P->B\.transaction\.boundary"):
        config_from_mapping(with_(flows={"P->B": {"transaction.boundary.interval.ms": -5}}))


def test_unknown_alias_in_flow():
    with pytest.raises(ConfigError, match=r"flows\.P->X: unknown cluster alias 'X'"):
        config_from_mapping(with_(flows={"P->X": True}))


def test_flow_to_itself():
    with pytest.raises(ConfigError, match=r"flows\.P->P: a flow from a cluster to itself"):
        config_from_mapping(with_(flows={"P->P": True}))


def test_missing_bootstrap_servers():
    with pytest.raises(ConfigError, match=r"clusters\.B: missing bootstrap\.servers"):
        config_from_mapping(with_(clusters={"P": {"bootstrap.servers": "h:1"},
                                            "B": {"security.protocol": "SSL"}}))


def test_unknown_property_named_with_value():
    with pytest.raises(ConfigError, match=r"offset\.lag\.maximum: unknown property \(value 5\)"):
        config_from_mapping(with_(**{"offset.lag.maximum": 5}))


def test_bad_value_named():
    with pytest.raises(ConfigError, match=r"replication\.factor: invalid value 'lots'"):
        config_from_mapping(with_(**{"replication.factor": "lots"}))
    with pytest.raises(ConfigError, match=r"replication\.factor: invalid value 0: expected -1"):
        config_from_mapping(with_(**{"replication.factor": 0}))
    assert config_from_mapping(with_(**{"replication.factor": 3})).replication_factor == 3
    assert config_from_mapping(BASE).replication_factor == -1


@pytest.mark.parametrize(("raw", "key", "advice"), [
    ({"emit": {"checkpoints": {"enabled": False}}}, "emit.checkpoints.enabled",
     "sync.group.offsets.enabled: false"),
    ({"emit.checkpoints.enabled": "maybe"}, "emit.checkpoints.enabled",
     "sync.group.offsets.enabled: false"),
])
def test_removed_key_asking_for_what_does_not_exist_is_refused(raw, key, advice):
    with pytest.raises(ConfigError, match=rf"(?i)^{re.escape(key)}: removed: .*"
                                          rf"{re.escape(advice)}.*delete the line"):
        config_from_mapping(with_(**raw))


@pytest.mark.parametrize(("raw", "without", "key", "advice"), [
    ({"offset.lag.max": 100}, {}, "offset.lag.max", "records every replicated run exactly"),
    ({"emit": {"checkpoints": {"enabled": True}}}, {}, "emit.checkpoints.enabled",
     "always records checkpoints"),
    ({"ledger": {"location": "/l", "streaming.checkpoint.location": "/s"}},
     {"ledger": {"location": "/l"}},
     "ledger.streaming.checkpoint.location", "keeps its position in the ledger only"),
])
def test_other_removed_keys_load_with_a_warning_that_says_what_to_do(raw, without, key, advice,
                                                                      caplog):
    with caplog.at_level(logging.WARNING, logger="ledger.config"):
        config = config_from_mapping(with_(**raw))
    assert config == config_from_mapping(with_(**without))
    [warning] = [r.getMessage() for r in caplog.records if r.getMessage().startswith(key)]
    assert advice in warning and "delete the line" in warning.lower()
    assert warning.endswith("(ignored)")


@pytest.mark.parametrize(("location", "schema"), [
    ("ledger", True), ("offset_ledger", True), ("main.offset_ledger", True),
    ("./ledger", False), ("/mnt/ledger", False), (".state/ledger", False),
    ("s3://bucket/ledger", False), ("dbfs:/ledger", False), ("a.b.c", False)])
def test_one_rule_for_a_ledger_location(location, schema, tmp_path):
    from ledger import direct, tables

    assert is_catalog_schema(location) is schema
    assert tables._is_path(location) is not schema
    if schema:
        assert direct.local_path(location) is None
    resolved = config_from_mapping(with_(ledger={"location": location}),
                                   path=str(tmp_path / "c.yaml")).ledger_location
    # YAML and --ledger-location agree: a schema stays one, a relative path becomes absolute.
    assert (resolved == location) is (schema or "/" == location[0] or ":" in location)
    assert resolve_location(location, tmp_path) == resolved


def test_unknown_flow_property():
    with pytest.raises(ConfigError, match=r"flows\.P->B\.topicz: unknown property"):
        config_from_mapping(with_(flows={"P->B": {"topicz": ["x"]}}))


def test_prefixless_bidirectional_flows_would_loop():
    with pytest.raises(ConfigError, match="would loop under IdentityReplicationPolicy"):
        config_from_mapping(with_(**{"replication.policy.class": "IdentityReplicationPolicy"}))


def test_reverse_checkpointing_under_prefixless_policy_is_refused():
    raw = with_(flows={"B->P": {"reverse.checkpointed.topics": ["P.Payments"]}, "P->B": True},
                **{"replication.policy.class": "IdentityReplicationPolicy"})
    with pytest.raises(ConfigError, match="needs the prefix policy"):
        config_from_mapping(raw)


def test_reverse_checkpointing_needs_both_flows():
    raw = with_(flows={"B->P": {"reverse.checkpointed.topics": ["P.Payments"]}})
    with pytest.raises(ConfigError, match="needs both flows enabled; P->B is not"):
        config_from_mapping(raw)


def test_reverse_checkpointed_topic_must_be_a_replica_of_the_target():
    raw = with_(flows={"P->B": True, "B->P": {"reverse.checkpointed.topics": ["Payments"]}})
    with pytest.raises(ConfigError, match="'Payments' is not a replica of a P topic"):
        config_from_mapping(raw)


def test_unknown_alias_lookup_is_clear():
    config = config_from_mapping(BASE)
    with pytest.raises(ConfigError, match=r"unknown cluster alias 'Q' \(configured: B, P\)"):
        config.cluster("Q")
    with pytest.raises(ConfigError, match="unknown cluster alias 'Q'"):
        config.flow("P->Q")


def test_secrets_masked_in_repr_str_and_logs(caplog):
    secret = "hunter2-s3cret"
    raw = with_(clusters={"P": {"bootstrap.servers": "h:1", "sasl.password": secret,
                                "sasl.oauthbearer.client.secret": secret},
                          "B": {"bootstrap.servers": "h:2"}})
    config = config_from_mapping(raw)
    with caplog.at_level(logging.INFO):
        logging.getLogger("t").info("config %s / %r / %s", config, config.cluster("P"),
                                    config.clusters)
    shown = repr(config) + str(config) + repr(config.cluster("P")) + caplog.text
    assert secret not in shown
    assert MASK in repr(config.cluster("P"))
    # The real value still reaches librdkafka.
    assert config.cluster("P").client_config()["sasl.password"] == secret


def test_secret_never_in_error_message():
    raw = with_(**{"sasl.password": "hunter2"})
    with pytest.raises(ConfigError) as info:
        config_from_mapping(raw)
    assert "hunter2" not in str(info.value)
    assert "sasl.password" in str(info.value)


def test_load_config_env_var_and_missing_file(tmp_path: Path, monkeypatch):
    path = tmp_path / "c.yaml"
    path.write_text("clusters:\n  P: {bootstrap.servers: 'h:1'}\n  B: {bootstrap.servers: 'h:2'}\n"
                    "flows:\n  P->B: true\nledger:\n  location: ./led\n")
    monkeypatch.setenv("OFFSET_LEDGER_CONFIG", str(path))
    config = load_config()
    assert config.ledger_location == str(tmp_path / "led")
    with pytest.raises(ConfigError, match="not found"):
        load_config(str(tmp_path / "nope.yaml"))


def test_shipped_example_config_is_valid():
    config = load_config(str(Path(__file__).resolve().parents[2] / "offset-ledger.yaml"))
    assert set(config.clusters) == {"P", "B"}
    assert config.flow("B->P").reverse_checkpointed_topics == ("P.Payments",)


def test_catalog_schema_location_kept_as_is():
    config = config_from_mapping(with_(ledger={"location": "main.offset_ledger"}))
    assert config.ledger_location == "main.offset_ledger"


@pytest.mark.unit
def test_cluster_property_from_environment_is_resolved_and_masked(monkeypatch):
    monkeypatch.setenv("OL_TEST_P_PASSWORD", "s3cr3t-from-env")
    config = config_from_mapping({
        "clusters": {"P": {"bootstrap.servers": "p:9092",
                           "sasl.password": "${env:OL_TEST_P_PASSWORD}"},
                     "B": {"bootstrap.servers": "b:9092"}},
        "flows": {"P->B": True}})
    assert config.cluster("P").properties["sasl.password"] == "s3cr3t-from-env"
    assert "s3cr3t-from-env" not in repr(config)


@pytest.mark.unit
def test_missing_environment_variable_names_the_key_not_a_value(monkeypatch):
    monkeypatch.delenv("OL_TEST_MISSING", raising=False)
    with pytest.raises(ConfigError, match=r"clusters\.P\.sasl\.password: environment variable "
                                          r"OL_TEST_MISSING is not set"):
        config_from_mapping({
            "clusters": {"P": {"bootstrap.servers": "p:9092",
                               "sasl.password": "${env:OL_TEST_MISSING}"},
                         "B": {"bootstrap.servers": "b:9092"}},
            "flows": {"P->B": True}})


@pytest.mark.parametrize(("key", "unit"), [("ledger.history.refresh.hours", "hours"),
                                           ("ledger.spans.refresh.commits", "commits"),
                                           ("ledger.spans.refresh.runs", "runs")])
def test_a_whole_number_key_names_its_own_unit(key, unit):
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({"clusters": {"P": {"bootstrap.servers": "h:1"}}, key: 0})
    assert f"expected a whole number of {unit} >= 1" in str(caught.value)


def test_the_span_refresh_bounds_default_and_parse():
    base = {"clusters": {"P": {"bootstrap.servers": "h:1"}}}
    config = config_from_mapping(base)
    assert (config.spans_refresh_commits, config.spans_refresh_runs) == (360, 50_000)
    config = config_from_mapping({**base, "ledger.spans.refresh.runs": 2000})
    assert config.spans_refresh_runs == 2000
