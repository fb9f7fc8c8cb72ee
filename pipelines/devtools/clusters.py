"""Embedded single-node KRaft Apache Kafka brokers for the configured cluster aliases.

``offset-ledger clusters up|status|down`` and the test suite's two-cluster fixture both use
:class:`EmbeddedClusters`.

Invariants:
    * One broker per alias whose ``bootstrap.servers`` is a single loopback ``host:port``; it
      listens on loopback only. State lives in ``<embedded.data.dir>/<alias>/``.
    * ``down`` stops only processes this module started: it reads their pid files and checks the
      process command line names that alias's ``server.properties`` before signalling it.
    * ``up`` either leaves every requested broker answering metadata requests or, on any
      failure (port taken, Java or jars missing, broker exits), stops what it started and raises
      :class:`ClusterError` with the reason.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger import settings
from ledger.config import ClusterConfig, Config, load_config
from ledger.errors import OffsetLedgerError
from pipelines import jvm_archive
from pipelines.devtools import settings as dev_settings
from pipelines.devtools.cluster_security import (
    SECURITY_MODES,
    SecurityMaterial,
    mode_file,
    recorded_mode,
)
from pipelines.passes import die_with_parent
from pipelines.spark import jars_dir

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")

LISTENERS = """\
# Written by offset-ledger for the embedded cluster {alias}; loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@{host}:{controller_port}
listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}
advertised.listeners=PLAINTEXT://{host}:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
"""
# Either kind of listeners (above, or pipelines.devtools.cluster_security's secured ones) + these.
# The controller's no-op metadata record (KIP-835) every 10 s, not every 0.5 s: an idle
# single-node broker then costs 0.9 CPU-s a minute instead of 1.6 (measured from /proc), and
# tests, benchmarks and the demo keep several brokers idle beside their work. A lone
# controller needs no liveness beat from its own log.
BROKER_PROPERTIES = """\
log.dirs={log_dir}
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=5
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=5
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
log.cleaner.backoff.ms=1000
log.cleaner.min.compaction.lag.ms=0
metadata.max.idle.interval.ms=10000
"""

LOG4J2 = """\
status = error
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRefs = stdout
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka.server.KafkaRaftServer
logger.kafka.level = INFO
"""


class ClusterError(OffsetLedgerError):
    """An embedded cluster could not be started, checked or stopped."""


@dataclass(frozen=True)
class BrokerStatus:
    alias: str
    bootstrap: str
    pid: int | None
    running: bool
    answering: bool

    def line(self) -> str:
        state = ("running" if self.answering else "starting/unhealthy") if self.running \
            else "stopped"
        pid = f"pid {self.pid}" if self.pid else "no pid"
        return f"{self.alias}: {self.bootstrap}  {state} ({pid})"


def _host_port(cluster: ClusterConfig) -> tuple[str, int]:
    servers = cluster.bootstrap_servers.split(",")
    target = servers[0].strip()
    if "://" in target:
        target = target.split("://", 1)[1]
    host, _, port = target.rpartition(":")
    if len(servers) != 1 or host not in LOOPBACK or not port.isdigit():
        raise ClusterError(
            f"cluster {cluster.alias}: bootstrap.servers {cluster.bootstrap_servers!r} is not a "
            "single loopback host:port, so it cannot be an embedded cluster")
    return ("127.0.0.1" if host == "localhost" else host.strip("[]")), int(port)


def port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _new_cluster_id() -> str:
    """A KRaft cluster id; like Kafka's ``Uuid.randomUuid``, never starting with ``-``.

    One id in 64 would otherwise start with ``-`` and be taken for an option by
    ``kafka-storage format``.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_PORT = 20000
_RANDOM = random.SystemRandom()  # never a seeded sequence: two processes must not agree
_HANDED_OUT: set[int] = set()  # ports free_port returned in this process
# Kafka's SocketServer: "Socket server failed to bind to 127.0.0.1:23456: Address already in use."
_BIND_CLASH = re.compile(r"failed to bind to \S*?:(\d+): Address already in use")
PORT_RACE_RESTARTS = 3  # fresh ports taken by another process between choice and bind


def _ephemeral_low() -> int | None:
    """The lowest port the kernel hands out as a connection's local port, if known."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, for a server started a moment later.

    Taken below the kernel's ephemeral range where the system has one: a port from that range
    (what binding port 0 returns) can be handed to any outgoing connection's local end between
    this call and the server's bind (a broker then fails with "Address already in use"), while
    ports below it are only ever taken by a bind. A process is never handed the same port
    twice: a cluster's ports are all chosen before its first broker binds any of them, so a
    free-but-chosen port would otherwise be chosen again (another process can still take one
    first: :meth:`EmbeddedClusters.up` then starts that broker again on new ports).
    """
    low = _ephemeral_low()
    if low is not None and low - _LOWEST_PORT >= 1000:
        if len(_HANDED_OUT) > (low - _LOWEST_PORT) // 2:
            _HANDED_OUT.clear()  # a long-lived process: the oldest servers are long gone
        for port in _RANDOM.sample(range(_LOWEST_PORT, low), 200):
            if port not in _HANDED_OUT and port_free(host, port):
                _HANDED_OUT.add(port)
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def broker_answers(bootstrap: str, timeout: float = 3.0,
                   client: Mapping[str, Any] | None = None) -> bool:
    """Whether a metadata request to ``bootstrap`` succeeds within ``timeout`` seconds
    (``client``: the security properties of a secured cluster)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**(client or {}), "bootstrap.servers": bootstrap,
                         "socket.timeout.ms": int(timeout * 1000), "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout)
        return bool(metadata.brokers)
    except Exception:
        return False


def coordinator_ready(bootstrap: str, timeout: float = 3.0,
                      client: Mapping[str, Any] | None = None) -> bool:
    """Whether the group coordinator answers (``__consumer_offsets`` created and loaded).

    A fresh broker answers metadata before its coordinators are loaded; clients that commit or
    fetch offsets then get NOT_COORDINATOR, so "up" waits for this too. A synchronous consumer
    call is used: an admin future outliving its client can crash librdkafka.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**(client or {}), "bootstrap.servers": bootstrap, "log_level": 0,
                         "group.id": "offset-ledger-startup-probe"})
    try:
        consumer.committed([TopicPartition("offset-ledger-startup-probe", 0)], timeout=timeout)
        return True
    except Exception:
        return False
    finally:
        consumer.close()


def _java() -> str:
    java = jvm_archive.java_binary()
    if not java:
        raise ClusterError("Java not found: install a JDK 17+ or set JAVA_HOME "
                           "(the embedded Kafka brokers run on the JVM)")
    return java


def _kafka_classpath() -> str:
    folder = jars_dir("kafka")
    if not any(folder.glob("kafka_2.13-*.jar")):
        raise ClusterError(f"Kafka broker jars missing in {folder} (run `make setup`)")
    return str(folder / "*")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


class EmbeddedClusters:
    """Start, inspect and stop the embedded brokers for ``config``'s clusters."""

    def __init__(self, config: Config, aliases: list[str] | None = None,
                 data_dir: str | None = None, tied_to_parent: bool = False,
                 security: str | None = None, java_options: list[str] | None = None) -> None:
        """``tied_to_parent``: the brokers die with this process (tests), instead of outliving
        it (``clusters up``). ``security``: ``sasl_ssl`` or ``mtls`` for secured brokers
        (``pipelines.devtools.cluster_security``); by default, what the data dir was set up with.
        ``java_options``: the brokers' class-data options instead of the matching archive's
        (``pipelines.jvm_archive``; ``pipelines.devtools.jvm_archives`` passes its dump)."""
        self.config = config
        self.java_options = java_options
        self.tied_to_parent = tied_to_parent
        self.aliases = aliases or list(config.clusters)
        for alias in self.aliases:
            config.cluster(alias)
        self.data_dir = Path(data_dir or config.embedded_data_dir).resolve()
        recorded = recorded_mode(self.data_dir)
        if security and recorded and security != recorded:
            raise ClusterError(
                f"the embedded clusters in {self.data_dir} were set up with security "
                f"{recorded}, not {security}: run `offset-ledger clusters down` and remove "
                "that folder to start them anew")
        self.security = security or recorded
        self.material = (SecurityMaterial(self.data_dir, self.security)
                         if self.security else None)
        # alias -> the controller and inter-broker ports _prepare chose for a fresh log dir
        self._chosen: dict[str, set[int]] = {}
        self._log_start: dict[str, int] = {}  # alias -> broker.log's size at the last launch

    def client_config(self, alias: str, user: str = "admin") -> dict[str, Any]:
        """librdkafka properties of ``user`` for ``alias``'s broker (secrets included: only
        for clients; the super user ``admin`` is for setup such as ACLs)."""
        props: dict[str, Any] = {"bootstrap.servers": self.bootstrap(alias)}
        if self.material is not None:
            props.update(self.material.client_properties(user))
        return props

    # --- files ---------------------------------------------------------------------------

    def _dir(self, alias: str) -> Path:
        return self.data_dir / alias

    def _pid_file(self, alias: str) -> Path:
        return self._dir(alias) / "broker.pid"

    def _properties(self, alias: str) -> Path:
        return self._dir(alias) / "server.properties"

    def pid(self, alias: str) -> int | None:
        """The pid of the broker this module started for ``alias``, if it still runs."""
        try:
            pid = int(self._pid_file(alias).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if not _alive(pid):
            return None
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if str(self._properties(alias)) not in cmdline:
                return None  # the pid was reused by an unrelated process
        return pid

    def _prepare(self, alias: str) -> list[str]:
        host, port = _host_port(self.config.cluster(alias))
        folder = self._dir(alias)
        folder.mkdir(parents=True, exist_ok=True)
        props = self._properties(alias)
        log_dir = folder / "data"
        ports_file = folder / "controller.port"  # "<controller> [<internal>]"
        if ports_file.exists() and (log_dir / "meta.properties").exists():
            saved = [int(p) for p in ports_file.read_text().split()]
            controller_port = saved[0]
            internal_port = saved[1] if len(saved) > 1 else free_port(host)
        else:
            controller_port, internal_port = free_port(host), free_port(host)
            shutil.rmtree(log_dir, ignore_errors=True)
            self._chosen[alias] = {controller_port, internal_port}
        used = [(port, "broker"), (controller_port, "controller")]
        if self.material is not None:
            used.append((internal_port, "inter-broker"))
        for p, what in used:
            if not port_free(host, p):
                raise ClusterError(
                    f"cluster {alias}: {what} port {host}:{p} is already in use by another "
                    f"process; free it or change clusters.{alias}.bootstrap.servers")
        where = {"alias": alias, "host": host, "port": port, "controller_port": controller_port}
        if self.material is None:
            listeners = LISTENERS.format(**where)
        else:
            self.material.ensure()
            mode_file(self.data_dir).write_text(self.material.mode)
            listeners = self.material.broker_properties(**where, internal_port=internal_port)
        props.write_text(listeners + BROKER_PROPERTIES.format(log_dir=log_dir))
        ports_file.write_text(f"{controller_port} {internal_port}")
        (folder / "log4j2.properties").write_text(LOG4J2)
        java, classpath = _java(), _kafka_classpath()
        shared = jvm_archive.archive_options("kafka", jars_dir("kafka"), java)
        if not (log_dir / "meta.properties").exists():
            cluster_id = _new_cluster_id()
            result = subprocess.run(
                [java, *shared, *settings.jvm_options(), "-cp", classpath,
                 f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}",
                 "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props),
                 *(self.material.format_arguments() if self.material else [])],
                capture_output=True, text=True, timeout=120)
            if result.returncode != 0:
                raise ClusterError(f"cluster {alias}: formatting the KRaft log dir failed: "
                                   f"{(result.stderr or result.stdout).strip()[-500:]}")
        heap = dev_settings.broker_heap()
        archive = shared if self.java_options is None else self.java_options
        return [java, *archive,
                *settings.jvm_options_over([f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC"]),
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}",
                "-cp", classpath, "kafka.Kafka", str(props)]

    # --- verbs ---------------------------------------------------------------------------

    def up(self, timeout: float | None = None) -> dict[str, str]:
        """Start every broker not already running; return ``{alias: bootstrap}``. ``timeout``:
        seconds to wait for each (default ``$OFFSET_LEDGER_BROKER_START_TIMEOUT``)."""
        if timeout is None:
            timeout = dev_settings.broker_start_timeout()
        started: list[str] = []
        procs: dict[str, subprocess.Popen] = {}
        restarts = dict.fromkeys(self.aliases, 0)
        try:
            for alias in self.aliases:
                if self.pid(alias) is not None:
                    continue
                self._chosen.pop(alias, None)
                procs[alias] = self._launch(alias)
                started.append(alias)
            deadline = time.monotonic() + timeout
            pending = list(self.aliases)
            while pending:
                for alias in list(pending):
                    proc = procs.get(alias)
                    if proc is not None and proc.poll() is not None:
                        if restarts[alias] < PORT_RACE_RESTARTS and self._lost_port_race(alias):
                            restarts[alias] += 1
                            procs[alias] = self._launch(alias)
                            continue
                        raise ClusterError(f"cluster {alias}: broker exited with code "
                                           f"{proc.returncode}: {self._log_tail(alias)}")
                    client = self.client_config(alias)
                    if broker_answers(self.bootstrap(alias), 2.0, client) and \
                            coordinator_ready(self.bootstrap(alias), client=client):
                        pending.remove(alias)
                if pending and time.monotonic() > deadline:
                    raise ClusterError(f"clusters {', '.join(pending)} did not answer metadata "
                                       f"requests within {timeout:.0f}s: "
                                       f"{self._log_tail(pending[0])}")
                if pending:
                    time.sleep(0.3)
        except BaseException:
            for alias in started:
                self.stop(alias, hard=True)
            raise
        return {alias: self.bootstrap(alias) for alias in self.aliases}

    def _launch(self, alias: str) -> subprocess.Popen:
        cmd = self._prepare(alias)
        log = open(self._dir(alias) / "broker.log", "ab")
        self._log_start[alias] = log.tell()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                cwd=self._dir(alias),
                                preexec_fn=die_with_parent if self.tied_to_parent else None)
        log.close()
        self._pid_file(alias).write_text(str(proc.pid))
        return proc

    def _lost_port_race(self, alias: str) -> bool:
        """Whether ``alias``'s broker, just started on a fresh log dir, exited because another
        process bound a controller or inter-broker port between :func:`free_port` choosing it
        and the broker binding it. Its state is then forgotten, so that the next
        :meth:`_prepare` chooses new ports and formats anew (the broker never ran: nothing is
        lost). The configured broker port is the user's: a clash on it is an error."""
        chosen = self._chosen.get(alias)
        if not chosen:
            return False
        try:
            with open(self._dir(alias) / "broker.log", "rb") as log:
                log.seek(self._log_start.get(alias, 0))
                text = log.read().decode(errors="replace")
        except FileNotFoundError:
            return False
        clashes = {int(port) for port in _BIND_CLASH.findall(text)}
        if not clashes or not clashes <= chosen:
            return False
        (self._dir(alias) / "controller.port").unlink(missing_ok=True)
        shutil.rmtree(self._dir(alias) / "data", ignore_errors=True)
        return True

    def bootstrap(self, alias: str) -> str:
        host, port = _host_port(self.config.cluster(alias))
        return f"{host}:{port}"

    def status(self) -> list[BrokerStatus]:
        out = []
        for alias in self.aliases:
            pid = self.pid(alias)
            answering = pid is not None and broker_answers(self.bootstrap(alias), 2.0,
                                                           self.client_config(alias))
            out.append(BrokerStatus(alias, self.bootstrap(alias), pid, pid is not None,
                                    answering))
        return out

    def stop(self, alias: str, hard: bool = False, timeout: float = 30.0) -> bool:
        """Stop ``alias``'s broker (SIGTERM, or SIGKILL with ``hard``); True if one ran."""
        pid = self.pid(alias)
        if pid is None:
            self._pid_file(alias).unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL if hard else signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            # Reap our own child so no zombie is left (not our child: nothing to reap).
            os.waitpid(pid, 0)
        self._pid_file(alias).unlink(missing_ok=True)
        return True

    def down(self) -> list[str]:
        return [alias for alias in self.aliases if self.stop(alias)]

    def _log_tail(self, alias: str, lines: int = 8) -> str:
        try:
            text = (self._dir(alias) / "broker.log").read_text(errors="replace")
        except FileNotFoundError:
            return "(no broker log)"
        interesting = [ln for ln in text.splitlines() if "ERROR" in ln or "Exception" in ln]
        return " | ".join((interesting or text.splitlines())[-lines:])[-1200:]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["up", "status", "down"])
    parser.add_argument("--data-dir", help="broker state folder (default: embedded.data.dir)")
    parser.add_argument("--alias", action="append",
                        help="only this cluster alias (repeatable; default: all)")
    parser.add_argument("--security", choices=SECURITY_MODES, default=None,
                        help="secured brokers (with up): sasl_ssl (SCRAM-SHA-512 over TLS) or "
                             "mtls (client certificates); a CA made at setup, StandardAuthorizer, "
                             "users admin (super user), replicator and app, whose client "
                             "settings are written to <data dir>/security/clients/")


def run(args: argparse.Namespace, config: Config) -> int:
    clusters = EmbeddedClusters(config, args.alias, args.data_dir,
                                security=getattr(args, "security", None))
    if args.action == "up":
        bootstraps = clusters.up()
        for alias, bootstrap in bootstraps.items():
            print(f"{alias}: bootstrap.servers={bootstrap}  (pid {clusters.pid(alias)})")
        if clusters.material is not None:
            folder = clusters.material.write_client_files(bootstraps)
            print(f"security {clusters.security}: CA {clusters.material.ca}; each user's "
                  f"client settings (secrets inside, mode 0600) in {folder}/<user>.yaml for "
                  "users admin (super user: setup and ACLs only), replicator, app; grant ACLs "
                  "as in docs/security.md")
        return 0
    if args.action == "status":
        statuses = clusters.status()
        for status in statuses:
            print(status.line())
        return 0 if all(s.answering for s in statuses) else 3
    stopped = clusters.down()
    print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="offset-ledger clusters")
    parser.add_argument("--config")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args, load_config(args.config))
    except OffsetLedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
