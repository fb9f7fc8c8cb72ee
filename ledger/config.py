"""The one frozen configuration object, loaded from ``offset-ledger.yaml``.

Invariants:
    * A :class:`Config` is immutable; CLI verbs that edit allowlists write the YAML file and load
      a new object.
    * Cluster properties are passed to librdkafka verbatim under their native names; nothing here
      renames them.
    * Every flow names two known, distinct aliases. Unknown keys are errors, never ignored.
    * Secret values (``sasl.password``, tokens, keys, JAAS configs) never appear in ``repr``,
      ``str``, logs or error messages: :func:`redact` is the only way properties are shown.

The YAML accepts MM2 property names either flat (``replication.policy.separator: "."``) or
nested (``replication: {policy: {separator: "."}}``); both mean the same key.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from ledger import settings
from ledger.errors import OffsetLedgerError

_log = logging.getLogger(__name__)

DEFAULT_CONFIG_PATH = "offset-ledger.yaml"
# More than a year: audits of last year's operations still time-travel.
DEFAULT_AUDIT_RETENTION_DAYS = 400
# A week of time travel into the tables committed to every few seconds or every pass: enough
# to replay a recent operation's audit and to follow up an incident; past it an operation is
# audited from its recorded evidence (bench/README.md, "The Delta log bounded").
DEFAULT_STREAMED_RETENTION_DAYS = 7
DEFAULT_HISTORY_REFRESH_HOURS = 24
DEFAULT_SPANS_REFRESH_COMMITS = 360  # an hour of 10 s batches
# A store load coalesces its tail at about 8 us a run (bench/README.md, stop 54): a second of
# every status, translate and move for 1,000 partitions an hour after a refresh by commits.
DEFAULT_SPANS_REFRESH_RUNS = 50_000
# Spans a windowed partition's snapshot keeps (an exactly-once flow's runs never coalesce): a
# store load holds at most about twice this per partition; a group committed further back
# than the window makes its load read that partition's runs since its offset (ledger.span_seek).
DEFAULT_SPANS_WINDOW = 200
# Exactly-once transaction boundary (bench/README.md, "Latency": measured against MM2's own).
DEFAULT_TRANSACTION_BOUNDARY_INTERVAL_MS = 30
# Above this a record waits invisibly for longer than any latency target, and a transaction
# nears librdkafka's transaction.timeout.ms (60 s) under load.
MAX_TRANSACTION_BOUNDARY_INTERVAL_MS = 10_000
CONFIG_ENV_VAR = settings.CONFIG
MASK = "********"

_SECRET_KEY = re.compile(r"(password|secret|token|jaas|credential|private|basic\.auth\.user\.info)",
                         re.IGNORECASE)
_ALIAS = re.compile(r"^[A-Za-z0-9_-]+$")

# MM2's default exclusions for groups (GroupFilter) and topics (TopicFilter), plus our own.
DEFAULT_GROUPS_EXCLUDE = ("console-consumer-.*", "connect-.*", "__.*", "offset-ledger-.*")
# MirrorMaker 2's DefaultConfigPropertyFilter: topic configs never copied to a replica.
DEFAULT_CONFIG_PROPERTIES_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas", r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms", r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable", r"min\.insync\.replicas")
DEFAULT_TOPICS_EXCLUDE = (r".*[\-\.]internal", r".*\.replica", "__.*", "offset-ledger-.*")

POLICIES = {
    "DefaultReplicationPolicy": "default",
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": "default",
    "IdentityReplicationPolicy": "identity",
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": "identity",
}


class ConfigError(OffsetLedgerError, ValueError):
    """A configuration problem; the message names the key and the (redacted) value."""


def is_secret_key(key: str) -> bool:
    """Whether a property's value must never be shown."""
    return bool(_SECRET_KEY.search(key))


def redact(properties: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``properties`` with every secret value masked."""
    return {k: (MASK if is_secret_key(k) else v) for k, v in properties.items()}


@dataclass(frozen=True)
class ClusterConfig:
    """One Kafka cluster: its alias and native librdkafka properties."""

    alias: str
    properties: Mapping[str, str]

    @property
    def bootstrap_servers(self) -> str:
        return self.properties["bootstrap.servers"]

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka properties for a confluent-kafka client (secrets included: never log)."""
        return {**self.properties, **overrides}

    def __repr__(self) -> str:
        return f"ClusterConfig(alias={self.alias!r}, properties={redact(self.properties)!r})"

    __str__ = __repr__


@dataclass(frozen=True)
class FlowConfig:
    """A replication flow ``source->target`` and its MM2-style allowlists (regexes, full match)."""

    source: str
    target: str
    enabled: bool = True
    topics: tuple[str, ...] = (".*",)
    topics_exclude: tuple[str, ...] = DEFAULT_TOPICS_EXCLUDE
    groups: tuple[str, ...] = (".*",)
    groups_exclude: tuple[str, ...] = DEFAULT_GROUPS_EXCLUDE
    # Replica topics on ``source`` (named ``<target><sep><topic>``) whose group offsets are
    # translated back to the original topic on ``target`` (SRM's reverse checkpointing).
    reverse_checkpointed_topics: tuple[str, ...] = ()
    # Where an existing MirrorMaker 2 deployment keeps this flow's offset-syncs topic
    # (MM2's offset-syncs.topic.location): 'source' (default) or 'target'.
    offset_syncs_topic_location: str = "source"
    # The flow's own exactly.once.enabled; None: the top-level setting.
    exactly_once_enabled: bool | None = None
    # The flow's own tasks.max; None: the top-level setting.
    tasks_max: int | None = None
    # The flow's own transaction.boundary.interval.ms; None: the top-level setting.
    transaction_boundary_interval_ms: int | None = None
    # The flow's own ACL sync keys (pipelines.acls); None: the top-level setting.
    sync_topic_acls_enabled: bool | None = None
    sync_topic_acls_interval_seconds: int | None = None
    sync_group_acls_enabled: bool | None = None

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def topic_allowed(self, topic: str) -> bool:
        return _matches(topic, self.topics) and not _matches(topic, self.topics_exclude)

    def reverse_checkpointed(self, topic: str) -> bool:
        return _matches(topic, self.reverse_checkpointed_topics)

    def group_allowed(self, group: str) -> bool:
        return _matches(group, self.groups) and not _matches(group, self.groups_exclude)


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return _fullmatch_any(name, tuple(patterns))


@functools.lru_cache(maxsize=1 << 16)
def _fullmatch_any(name: str, patterns: tuple[str, ...]) -> bool:
    # Cached: a status or a move of hundreds of groups asks about the same topic and group
    # names thousands of times (a pure function of its arguments).
    return any(re.fullmatch(p, name) for p in patterns)


@dataclass(frozen=True)
class Config:
    """Everything a job needs; built once by :func:`load_config` and passed down."""

    clusters: Mapping[str, ClusterConfig]
    flows: tuple[FlowConfig, ...]
    ledger_location: str = ".state/ledger"
    # Delta log and deleted-file retention of the operations and their evidence, and the cap of
    # every other table's (ledger.maintenance.Retention): how far back time travel reaches.
    # A fraction of a day is allowed (tests that expire versions); 0 is refused.
    audit_retention_days: float = DEFAULT_AUDIT_RETENTION_DAYS
    # The same for the tables a running job commits to continually (schemas.STREAMED), capped
    # by audit_retention_days: their log and replaced files grow with every commit.
    streamed_retention_days: float = DEFAULT_STREAMED_RETENTION_DAYS
    # A checkpoint pass records a checkpoint or a group commit only when it changed, or when its
    # latest record is older than this: so "the latest per group partition" is always inside
    # this window and is read from it, never from the whole history.
    history_refresh_hours: int = DEFAULT_HISTORY_REFRESH_HOURS
    # A checkpoint pass refreshes its flows' span snapshots (offset_sync_spans) once
    # offset_syncs has this many commits after them: a store load reads at most about this
    # many small files besides the snapshot, however long since the last ``ledger maintain``.
    spans_refresh_commits: int = DEFAULT_SPANS_REFRESH_COMMITS
    # ... or once that tail holds this many runs (a flow of many partitions writes hundreds of
    # runs a commit): a store load coalesces at most about this many runs besides the snapshot.
    spans_refresh_runs: int = DEFAULT_SPANS_REFRESH_RUNS
    # A snapshot refresh keeps, of a partition with more than twice this many spans, those
    # from its newest valid cut leaving at least this many (ledger.spans.window_start).
    spans_window: int = DEFAULT_SPANS_WINDOW
    replication_policy_separator: str = "."
    replication_policy_class: str = "DefaultReplicationPolicy"
    emit_checkpoints_interval_seconds: int = 60
    sync_group_offsets_enabled: bool = False
    sync_group_offsets_interval_seconds: int = 60
    emit_mm2_checkpoints: bool = False  # also write checkpoints in MM2's format (pipelines.mm2)
    # Streaming replication with a transactional producer (pipelines.replicate.stream_task).
    exactly_once_enabled: bool = False
    # The most copy tasks a flow runs at once (MM2's tasks.max); None: the job decides
    # (pipelines.replicate.plan.task_count). Never more than the task slots or the partitions.
    tasks_max: int | None = None
    # Exactly-once: a copy task commits its transaction once the transaction's first record
    # was produced this long ago (Connect's transaction.boundary=interval, counted from the
    # first record so an idle task commits nothing). Shorter: lower latency, more transactions
    # (each adds an offset_syncs row per partition it wrote and a marker per replica partition).
    transaction_boundary_interval_ms: int = DEFAULT_TRANSACTION_BOUNDARY_INTERVAL_MS
    # Replication factor of the topics offset-ledger creates (replicas, heartbeats, MM2-format
    # checkpoints); -1: the target broker's default.replication.factor.
    replication_factor: int = -1
    embedded_data_dir: str = ".state/clusters"
    # Regexes (full match) of topic configs never copied to replicas (MM2's property name).
    config_properties_exclude: tuple[str, ...] = DEFAULT_CONFIG_PROPERTIES_EXCLUDE
    # Prometheus metrics (pipelines.metrics): off unless set. ``host:port`` to serve /metrics
    # on (a bare port listens on loopback), a Pushgateway URL, a node-exporter textfile.
    metrics_address: str | None = None
    metrics_pushgateway: str | None = None
    metrics_textfile: str | None = None
    # ACL sync (pipelines.acls): MM2's sync.topic.acls.* (on by default, as in MM2) and the
    # opt-in group ACL sync; each may be set per flow.
    sync_topic_acls_enabled: bool = True
    sync_topic_acls_interval_seconds: int = 600
    sync_group_acls_enabled: bool = False
    path: str | None = field(default=None, compare=False)

    @property
    def prefixless(self) -> bool:
        return POLICIES[self.replication_policy_class] == "identity"

    def cluster(self, alias: str) -> ClusterConfig:
        try:
            return self.clusters[alias]
        except KeyError:
            known = ", ".join(sorted(self.clusters)) or "none"
            raise ConfigError(f"unknown cluster alias {alias!r} (configured: {known})") from None

    def flow(self, name_or_source: str, target: str | None = None) -> FlowConfig:
        """The enabled flow ``source->target``; a clear error names what is wrong."""
        source, target = parse_flow(name_or_source) if target is None else (name_or_source, target)
        self.cluster(source)
        self.cluster(target)
        for flow in self.flows:
            if (flow.source, flow.target) == (source, target):
                if not flow.enabled:
                    raise ConfigError(f"flow {source}->{target} is disabled in the configuration")
                return flow
        raise ConfigError(f"flow {source}->{target} is not configured "
                          f"(flows: {', '.join(f.name for f in self.flows) or 'none'})")

    def exactly_once(self, flow: FlowConfig) -> bool:
        """Whether ``flow`` replicates exactly once (its own setting, else the top level's)."""
        if flow.exactly_once_enabled is not None:
            return flow.exactly_once_enabled
        return self.exactly_once_enabled

    def tasks_max_for(self, flow: FlowConfig) -> int | None:
        """``flow``'s ``tasks.max`` (its own, else the top level's; None: not set)."""
        return flow.tasks_max if flow.tasks_max is not None else self.tasks_max

    def transaction_boundary_s(self, flow: FlowConfig) -> float:
        """``flow``'s exactly-once transaction boundary interval, in seconds."""
        return self.for_flow(flow, "transaction_boundary_interval_ms") / 1000

    def for_flow(self, flow: FlowConfig, attr: str) -> Any:
        """``flow``'s own value of a per-flow key (``attr``), else the top level's."""
        own = getattr(flow, attr)
        return own if own is not None else getattr(self, attr)

    def enabled_flows(self) -> tuple[FlowConfig, ...]:
        return tuple(f for f in self.flows if f.enabled)

    def __repr__(self) -> str:
        clusters = ", ".join(repr(c) for c in self.clusters.values())
        return (f"Config(clusters=[{clusters}], flows={[f.name for f in self.flows]}, "
                f"ledger_location={self.ledger_location!r}, "
                f"separator={self.replication_policy_separator!r})")

    __str__ = __repr__


def parse_flow(text: str) -> tuple[str, str]:
    """``"P->B"`` -> ``("P", "B")``."""
    parts = [p.strip() for p in str(text).split("->")]
    if len(parts) != 2 or not all(_ALIAS.match(p) for p in parts):
        hint = ""
        if str(text).rstrip().endswith("-"):
            # `--flow P->B` unquoted: the shell took `>B` as a redirection to a file named B.
            hint = (": quote it in a shell, --flow 'P->B' (unquoted, '>' redirects output to a "
                    "file), or use --source P --target B")
        raise ConfigError(f"flow {text!r} is not of the form SOURCE->TARGET (e.g. 'P->B'){hint}")
    return parts[0], parts[1]


# Flat key -> (Config field, parser). Anything else at top level is an unknown property.
def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if str(v).lower() in ("true", "false"):
        return str(v).lower() == "true"
    raise ValueError("expected true or false")


def _positive_days(v: Any) -> float:
    if isinstance(v, bool):
        raise ValueError("expected a number of days > 0")
    value = float(v)
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError("expected a number of days > 0 (a fraction of a day is allowed)")
    return int(value) if value.is_integer() else value


def _positive_int(unit: str) -> Callable[[Any], int]:
    """A whole number of ``unit`` >= 1 (the message names the unit the key counts)."""
    def parse(v: Any) -> int:
        value = _nonneg_int(v)
        if value < 1:
            raise ValueError(f"expected a whole number of {unit} >= 1")
        return value

    return parse


def _task_count(v: Any) -> int:
    try:
        value = float(v)
    except (TypeError, ValueError):
        value = 0.0
    if isinstance(v, bool) or value < 1 or not value.is_integer():
        raise ValueError("expected a whole number of tasks >= 1")
    return int(value)


def _boundary_ms(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int | str) or not str(v).strip().isdigit() \
            or int(v) > MAX_TRANSACTION_BOUNDARY_INTERVAL_MS:
        raise ValueError("expected whole milliseconds from 0 (commit after every fetched "
                         f"batch) to {MAX_TRANSACTION_BOUNDARY_INTERVAL_MS}")
    return int(v)


def _nonneg_int(v: Any) -> int:
    if isinstance(v, bool) or int(v) < 0:
        raise ValueError("expected a non-negative integer")
    return int(v)


def _replication_factor(v: Any) -> int:
    if isinstance(v, bool) or int(v) == 0 or int(v) < -1:
        raise ValueError("expected -1 (the broker's default.replication.factor) or >= 1")
    return int(v)


def _separator(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError("expected a non-empty string")
    return v


def parse_address(text: Any) -> tuple[str, int]:
    """``"host:port"``, ``"[::1]:port"``, ``":port"`` or ``"port"`` -> ``(host, port)``;
    the host defaults to loopback (a metrics port is opened to the network only on purpose)."""
    value = str(text).strip()
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected host:port or a port (1-65535), got {value!r}")
    return host, int(port)


def _address(v: Any) -> str:
    host, port = parse_address(v)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _textfile(v: Any) -> str:
    if not isinstance(v, str) or not v.endswith(".prom"):
        raise ValueError("expected a path ending in .prom (node exporter's textfile collector "
                         "reads only *.prom files)")
    return v


def _location(v: Any) -> str:
    if v not in ("source", "target"):
        raise ValueError("expected source or target")
    return str(v)


def _policy(v: Any) -> str:
    if v not in POLICIES:
        raise ValueError(f"expected one of {sorted(set(POLICIES))}")
    return str(v).rsplit(".", 1)[-1]


_TOP_LEVEL = {
    "ledger.location": ("ledger_location", str),
    "ledger.audit.retention.days": ("audit_retention_days", lambda v: _positive_days(v)),
    "ledger.streamed.retention.days": ("streamed_retention_days",
                                       lambda v: _positive_days(v)),
    "ledger.history.refresh.hours": ("history_refresh_hours", _positive_int("hours")),
    "ledger.spans.refresh.commits": ("spans_refresh_commits", _positive_int("commits")),
    "ledger.spans.refresh.runs": ("spans_refresh_runs", _positive_int("runs")),
    "ledger.spans.window": ("spans_window", _positive_int("spans")),
    "replication.policy.separator": ("replication_policy_separator", _separator),
    "replication.policy.class": ("replication_policy_class", _policy),
    "replication.factor": ("replication_factor", lambda v: _replication_factor(v)),
    "emit.checkpoints.interval.seconds": ("emit_checkpoints_interval_seconds", _nonneg_int),
    "sync.group.offsets.enabled": ("sync_group_offsets_enabled", _bool),
    "sync.group.offsets.interval.seconds": ("sync_group_offsets_interval_seconds", _nonneg_int),
    "embedded.data.dir": ("embedded_data_dir", str),
    "emit.mm2.checkpoints.enabled": ("emit_mm2_checkpoints", _bool),
    "exactly.once.enabled": ("exactly_once_enabled", _bool),
    "tasks.max": ("tasks_max", _task_count),
    "transaction.boundary.interval.ms": ("transaction_boundary_interval_ms", _boundary_ms),
    "sync.topic.acls.enabled": ("sync_topic_acls_enabled", _bool),
    "sync.topic.acls.interval.seconds": ("sync_topic_acls_interval_seconds", _nonneg_int),
    "sync.group.acls.enabled": ("sync_group_acls_enabled", _bool),
    "metrics.address": ("metrics_address", _address),
    "metrics.pushgateway": ("metrics_pushgateway", _separator),
    "metrics.textfile": ("metrics_textfile", _textfile),
    "config.properties.exclude": (
        "config_properties_exclude",
        lambda v: _patterns("config.properties.exclude",
                            [x.strip() for x in v.split(",") if x.strip()]
                            if isinstance(v, str) else v)),
}
# Keys that did nothing and were removed. A value asking for behaviour offset-ledger does not have
# is refused with what to do; any other value is ignored with a warning that says the same, so a
# file written for MirrorMaker 2 or an earlier release still loads and is told to drop the line.
REMOVED_KEYS = {
    "offset.lag.max": (
        "removed: offset-ledger records every replicated run exactly (no lag bound applies, "
        "translation never re-reads); delete the line"),
    "emit.checkpoints.enabled": (
        "removed: it never switched anything off; `checkpoint` always records checkpoints for "
        "the flows it runs. To stop checkpointing a flow, do not run `checkpoint` for it (or "
        "narrow the flow's groups); to stop writing target group offsets, set "
        "sync.group.offsets.enabled: false. Delete the line"),
    "ledger.streaming.checkpoint.location": (
        "removed: replicate keeps its position in the ledger only (no Spark streaming "
        "checkpoint); delete the line (a Spark query's own checkpoint is moved with "
        "failover --spark-checkpoint)"),
}
# Removed keys whose value (parsed) asks for what does not exist: refused, never ignored.
_REFUSED_VALUES = {"emit.checkpoints.enabled": lambda v: not _bool(v)}

_FLOW_KEYS = {
    "enabled": ("enabled", _bool),
    "topics": ("topics", None),
    "topics.exclude": ("topics_exclude", None),
    "groups": ("groups", None),
    "groups.exclude": ("groups_exclude", None),
    "reverse.checkpointed.topics": ("reverse_checkpointed_topics", None),
    "offset-syncs.topic.location": ("offset_syncs_topic_location", _location),
    "exactly.once.enabled": ("exactly_once_enabled", _bool),
    "tasks.max": ("tasks_max", _task_count),
    "transaction.boundary.interval.ms": ("transaction_boundary_interval_ms", _boundary_ms),
    "sync.topic.acls.enabled": ("sync_topic_acls_enabled", _bool),
    "sync.topic.acls.interval.seconds": ("sync_topic_acls_interval_seconds", _nonneg_int),
    "sync.group.acls.enabled": ("sync_group_acls_enabled", _bool),
}


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def _patterns(key: str, value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if items is None:
        return ()
    if not isinstance(items, list | tuple):
        raise ConfigError(f"{key}: expected a list of regexes, got {value!r}")
    out = []
    for item in items:
        try:
            re.compile(str(item))
        except re.error as exc:
            raise ConfigError(f"{key}: invalid regex {item!r}: {exc}") from None
        out.append(str(item))
    return tuple(out)


def _load_clusters(raw: Any) -> dict[str, ClusterConfig]:
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError("clusters: expected a mapping of alias -> librdkafka properties")
    clusters = {}
    for alias, props in raw.items():
        alias = str(alias)
        if not _ALIAS.match(alias):
            raise ConfigError(f"clusters: invalid alias {alias!r} (letters, digits, _ and - only)")
        flat: dict[str, Any] = {}
        _flatten("", props or {}, flat)
        flat = {k: _from_environment(f"clusters.{alias}.{k}", v) for k, v in flat.items()}
        if not flat.get("bootstrap.servers"):
            raise ConfigError(f"clusters.{alias}: missing bootstrap.servers")
        clusters[alias] = ClusterConfig(alias, MappingProxyType({k: str(v) if not isinstance(
            v, bool) else str(v).lower() for k, v in flat.items()}))
    return clusters


_ENV_REF = re.compile(r"^\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}$")


def _from_environment(key: str, value: Any) -> Any:
    """A property written as ``${env:NAME}`` takes the variable's value (secrets stay out of
    the YAML: Databricks resolves ``{{secrets/scope/key}}`` into such variables)."""
    match = _ENV_REF.match(value) if isinstance(value, str) else None
    if match is None:
        return value
    name = match.group(1)
    if name not in os.environ:
        raise ConfigError(f"{key}: environment variable {name} is not set")
    return os.environ[name]


def _load_flows(raw: Any, clusters: Mapping[str, ClusterConfig]) -> tuple[FlowConfig, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ConfigError("flows: expected a mapping like {'P->B': true}")
    flows = []
    for name, spec in raw.items():
        source, target = parse_flow(str(name))
        for alias in (source, target):
            if alias not in clusters:
                raise ConfigError(f"flows.{name}: unknown cluster alias {alias!r} "
                                  f"(configured: {', '.join(sorted(clusters))})")
        if source == target:
            raise ConfigError(f"flows.{name}: a flow from a cluster to itself would loop")
        kwargs: dict[str, Any] = {"source": source, "target": target}
        if isinstance(spec, bool) or isinstance(spec, str):
            kwargs["enabled"] = _parse(f"flows.{name}", spec, _bool)
        elif isinstance(spec, Mapping):
            flat: dict[str, Any] = {}
            _flatten("", spec, flat)
            for key, value in flat.items():
                if key not in _FLOW_KEYS:
                    raise ConfigError(f"flows.{name}.{key}: unknown property "
                                      f"(known: {', '.join(_FLOW_KEYS)})")
                attr, parser = _FLOW_KEYS[key]
                full = f"flows.{name}.{key}"
                kwargs[attr] = (_patterns(full, value) if parser is None
                                else _parse(full, value, parser))
        else:
            raise ConfigError(f"flows.{name}: expected true/false or a mapping, got {spec!r}")
        flows.append(FlowConfig(**kwargs))
    return tuple(flows)


def _parse(key: str, value: Any, parser: Any) -> Any:
    try:
        return parser(value)
    except (TypeError, ValueError) as exc:
        shown = MASK if is_secret_key(key) else repr(value)
        raise ConfigError(f"{key}: invalid value {shown}: {exc}") from None


def _removed(key: str, value: Any) -> None:
    """Refuse a removed key whose value asks for behaviour that does not exist; warn otherwise."""
    message = f"{key}: {REMOVED_KEYS[key]}"
    refused = _REFUSED_VALUES.get(key)
    try:
        refuse = refused is not None and refused(value)
    except (TypeError, ValueError):
        refuse = True
    if refuse:
        raise ConfigError(message)
    _log.warning("%s (ignored)", message)


def config_from_mapping(raw: Mapping[str, Any], path: str | None = None) -> Config:
    """Validate a parsed YAML document and build the :class:`Config`."""
    if not isinstance(raw, Mapping):
        raise ConfigError("configuration: expected a mapping at the top level")
    raw = dict(raw)
    clusters = _load_clusters(raw.pop("clusters", None))
    flows = _load_flows(raw.pop("flows", None), clusters)
    flat: dict[str, Any] = {}
    _flatten("", raw, flat)
    kwargs: dict[str, Any] = {}
    for key, value in flat.items():
        if key in REMOVED_KEYS:
            _removed(key, value)
            continue
        if key not in _TOP_LEVEL:
            shown = MASK if is_secret_key(key) else repr(value)
            raise ConfigError(f"{key}: unknown property (value {shown})")
        attr, parser = _TOP_LEVEL[key]
        kwargs[attr] = _parse(key, value, parser)
    base = Path(path).resolve().parent if path else Path.cwd()
    if "metrics_textfile" in kwargs:
        kwargs["metrics_textfile"] = str((base / kwargs["metrics_textfile"]).resolve())
    for attr in ("ledger_location", "embedded_data_dir"):
        value = kwargs.get(attr, Config.__dataclass_fields__[attr].default)
        kwargs[attr] = resolve_location(str(value), base)
    config = Config(clusters=MappingProxyType(clusters), flows=flows, path=path, **kwargs)
    validate_topology(config)
    return config


def is_catalog_schema(location: str) -> bool:
    """The one rule for what a ledger location is (YAML, ``--ledger-location``, tables, direct).

    ``schema`` or ``catalog.schema`` (identifiers: letters, digits, ``_``) is a catalog schema,
    tables ``<schema>.<name>``; anything else (``./ledger``, ``/mnt/ledger``, ``s3://b/l``,
    ``dbfs:/l``) is a path, tables at ``<path>/<name>``. So a bare ``ledger`` is a schema
    everywhere; write ``./ledger`` for a folder.
    """
    return bool(re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?", location))


def resolve_location(value: str, base: Path | None = None) -> str:
    """A location as jobs use it: a relative path made absolute against ``base`` (the config
    file's folder; the working directory for ``--ledger-location``); URIs
    (``s3://``, ``dbfs:/``), absolute paths and catalog schemas stay as given."""
    if ("://" in value or value.startswith("/") or re.match(r"^[A-Za-z][\w+.-]*:/", value)
            or is_catalog_schema(value)):
        return value
    return str(((base or Path.cwd()) / value).resolve())


def validate_topology(config: Config) -> None:
    """Refuse flows that would loop and reverse checkpointing where it cannot work."""
    for flow in config.flows:
        if flow.reverse_checkpointed_topics:
            check_reverse_checkpointing(config, flow)
    enabled = {(f.source, f.target) for f in config.enabled_flows()}
    if config.prefixless:
        for source, target in enabled:
            if (target, source) in enabled:
                raise ConfigError(
                    f"flows {source}->{target} and {target}->{source} would loop under "
                    "IdentityReplicationPolicy (prefixless replica names carry no origin)")


def check_reverse_checkpointing(config: Config, flow: FlowConfig) -> None:
    """SRM's preconditions: prefix policy and both flows enabled; topics named ``<target><sep>``."""
    where = f"flows.{flow.name}.reverse.checkpointed.topics"
    if config.prefixless:
        raise ConfigError(f"{where}: reverse checkpointing needs the prefix policy "
                          "(DefaultReplicationPolicy); IdentityReplicationPolicy is prefixless")
    enabled = {(f.source, f.target) for f in config.enabled_flows()}
    for pair in ((flow.source, flow.target), (flow.target, flow.source)):
        if pair not in enabled:
            raise ConfigError(f"{where}: reverse checkpointing needs both flows enabled; "
                              f"{pair[0]}->{pair[1]} is not")
    prefix = f"{flow.target}{config.replication_policy_separator}"
    for topic in flow.reverse_checkpointed_topics:
        if not topic.startswith(prefix) or topic == prefix:
            raise ConfigError(f"{where}: {topic!r} is not a replica of a {flow.target} topic "
                              f"(expected a name like {prefix}Payments)")


def resolve_config_path(path: str | None = None) -> str:
    """``--config`` if given, else ``$OFFSET_LEDGER_CONFIG``, else ``./offset-ledger.yaml``."""
    return path or settings.config_path() or DEFAULT_CONFIG_PATH


def load_config(path: str | None = None) -> Config:
    """Read and validate the YAML file."""
    resolved = resolve_config_path(path)
    try:
        text = Path(resolved).read_text()
    except FileNotFoundError:
        raise ConfigError(f"configuration file {resolved!r} not found "
                          f"(use --config PATH or set ${CONFIG_ENV_VAR})") from None
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{resolved}: not valid YAML: {exc}") from None
    return config_from_mapping(raw, path=resolved)


def reload_config(config: Config) -> Config:
    """The configuration file as it is now, for a long-running job's refresh: the allowlists
    that ``topics``/``groups``/``reverse-checkpointed-topics --add`` edited apply without a
    restart. A ``--ledger-location`` override stays; a file that no longer loads is logged and
    the previous configuration kept (a typo never stops a running job); a config built without
    a file is returned as it is."""
    if not config.path:
        return config
    try:
        fresh = load_config(config.path)
    except OffsetLedgerError as exc:
        _log.error("configuration %s not reloaded, keeping the previous one: %s", config.path,
                   exc)
        return config
    return dataclasses.replace(fresh, ledger_location=config.ledger_location)
