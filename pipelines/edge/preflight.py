"""The checks every operator verb makes before anything starts (no JVM, no ledger read).

``translate``, ``failover``, ``failback`` (and ``checkpoint``, ``status`` through the CLI's name
checks) refuse bad input with one line and exit 2 within a second::

    unknown cluster alias or flow, a disabled flow      ConfigError            (config only)
    a group outside the flow's group allowlist          ConfigError            (config only)
    a cluster that does not answer, refuses the         KafkaAdminError        (one probe,
      credentials or the TLS handshake                                          classified)

Invariants:
    * Nothing is written and no Spark session starts here.
    * A cluster probe waits at most ``timeout`` seconds, and fails early when librdkafka
      reports every broker down or a failed authentication/TLS handshake: a stopped broker is
      named unreachable in milliseconds, a slow but live one is given the whole timeout. The
      error is classified as every Kafka error is (``pipelines.edge.kafka_errors``: unreachable,
      authentication, TLS, ...), never "unreachable" for a wrong password.
    * A continuous job (``replicate`` streaming, ``ingest mm2`` without ``--once``; a
      continuous ``checkpoint`` skips passes instead, ``pipelines.passes``) started while a
      cluster restarts waits for it (:func:`await_reachable`, at
      most ``--startup-wait`` seconds, one warning line); any other kind of failure is raised
      at once, and ``--once`` never waits: its caller (a scheduler) wants the answer.
      A cluster that dies just after that probe, during the job's next start-up step, is
      ridden out the same way (:func:`ride_out`).
    * Messages name the cluster alias and its bootstrap servers, never other properties.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from ledger.config import ClusterConfig, Config, ConfigError, FlowConfig
from ledger.errors import first_line
from pipelines.edge import kafka_admin, kafka_errors

log = logging.getLogger(__name__)

T = TypeVar("T")


class Waitable(Protocol):
    """A stop request a retry waits on (``pipelines.stops.StopEvent``; ``threading.Event``)."""

    def wait(self, timeout: float | None = None) -> bool: ...


PROBE_TIMEOUT_S = 5.0
"""A live cluster answers a metadata request well within this; a dead one is told at once."""
STARTUP_WAIT_S = 120.0
"""How long a continuous job started during a broker restart waits for the cluster."""

FATAL = {KafkaError._ALL_BROKERS_DOWN, KafkaError._AUTHENTICATION, KafkaError._SSL,
         KafkaError._RESOLVE}
"""librdkafka errors after which waiting longer changes nothing."""


def check_reachable(cluster: ClusterConfig, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Raise a classified ``KafkaAdminError`` (``pipelines.edge.kafka_errors``) unless ``cluster``
    answers a metadata request; early when librdkafka reports the cause (see the invariants)."""
    down: list[KafkaError] = []

    def note(err: KafkaError) -> None:
        if err.code() in FATAL:
            down.append(err)

    config, watch = kafka_errors.watched(cluster.client_config(**{"log_level": 0,
                                                                  "error_cb": note}))
    client = AdminClient(config)
    client.watch = watch
    deadline = time.monotonic() + timeout
    while True:
        try:
            if client.list_topics(timeout=0.2).brokers:
                return
            failed: BaseException = KafkaException(KafkaError(KafkaError._TRANSPORT))
        except KafkaException as exc:  # this short attempt timed out: the callbacks say more
            failed = exc
        kafka_errors.serve(client, 0)
        if down:
            failed = KafkaException(down[-1])
        if down or watch.cause() is not None or time.monotonic() >= deadline:
            raise kafka_admin.failure(cluster, failed, client) from None


def await_reachable(cluster: ClusterConfig, wait_s: float,
                    timeout: float = PROBE_TIMEOUT_S, why: str = "--startup-wait") -> None:
    """:func:`check_reachable`, probed again for up to ``wait_s`` while the cluster is
    *unreachable* (a supervisor restarted the job during a broker restart: torture finding F5);
    credentials, TLS or any other kind fail at once, and so does the last probe's cause.
    ``why`` names the wait's bound in the warning (the option or the rule that sets it)."""
    deadline = time.monotonic() + wait_s
    warned = False
    while True:
        try:
            check_reachable(cluster, timeout)
        except kafka_errors.KafkaAccessError as exc:
            left = deadline - time.monotonic()
            if exc.kind != kafka_errors.UNREACHABLE or left <= 0:
                raise
            if not warned:
                log.warning("%s; waiting up to %.0fs for it (%s)", exc, left, why)
                warned = True
            time.sleep(min(1.0, left))  # a retry back-off, not a synchronisation
        else:
            if warned:
                log.warning("cluster %s answers again", cluster.alias)
            return


def ride_out(step: Callable[[], T], wait_s: float, what: str, *, bound: str = "",
             retry_s: float = 1.0, stop: Waitable | None = None) -> T | None:
    """``step()``, called again while it fails with a transient fault (``kafka_errors.TRANSIENT``:
    a cluster away or restarting, a leader moving) for up to ``wait_s`` seconds, with one
    warning naming ``what`` (and ``bound``, what sets ``wait_s``); any other failure, and the
    last transient one, is raised.

    Returns None, without calling again, when ``stop`` is set during a back-off.
    """
    deadline = time.monotonic() + wait_s
    warned = False
    while True:
        try:
            return step()
        except kafka_errors.KafkaAccessError as exc:
            if exc.kind not in kafka_errors.TRANSIENT or time.monotonic() >= deadline:
                raise
            if not warned:
                log.warning("%s postponed, tried again for up to %.0fs%s: %s", what, wait_s,
                            f" ({bound})" if bound else "", first_line(exc))
                warned = True
        if stop is not None:
            if stop.wait(retry_s):  # a retry back-off that a stop request ends
                return None
        else:
            time.sleep(retry_s)  # a retry back-off, not a synchronisation


def check_groups(flow: FlowConfig, groups: Iterable[str]) -> None:
    """Every group is in the flow's group allowlist (and not excluded)."""
    outside = [g for g in dict.fromkeys(groups) if not flow.group_allowed(g)]
    if outside:
        raise ConfigError(
            f"group(s) {', '.join(outside)} outside the group allowlist of flow {flow.name} "
            f"(groups: {', '.join(flow.groups)}; excluded: {', '.join(flow.groups_exclude)}); "
            f"add them with `offset-ledger groups --source {flow.source} --target "
            f"{flow.target} --add G`")


def check(config: Config, source: str, target: str, groups: Iterable[str] = (),
          contact: Iterable[str] | None = None) -> FlowConfig:
    """The flow ``source->target`` after the checks; ``contact`` (default both clusters) are
    probed, in order."""
    flow = config.flow(source, target)
    check_groups(flow, groups)
    for alias in (source, target) if contact is None else contact:
        check_reachable(config.cluster(alias))
    return flow
