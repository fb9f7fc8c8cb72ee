"""Where a process's metrics go: ``/metrics`` on an address, a Pushgateway, a textfile.

All three are off unless configured (``metrics.address``, ``metrics.pushgateway``,
``metrics.textfile`` in the YAML; ``--metrics-address``, ``--metrics-pushgateway``,
``--metrics-textfile`` on the command line win). A long-running job serves ``/metrics`` (and may
also push or write, e.g. on Databricks where no scraper reaches the driver's port); a ``--once``
job pushes or writes when it ends.

Invariants:
    * The HTTP server listens on loopback unless an address names another host.
    * A textfile is replaced atomically (written beside it, then renamed): node exporter never
      reads half a file.
    * A push or write that fails is logged (and counted in ``offset_ledger_errors_total``); it
      never stops replication. Pushes replace the job's group (``PUT``), so a series that is
      gone from the process is gone from the Pushgateway.
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client import generate_latest, push_to_gateway, start_http_server, write_to_textfile

from ledger.config import ConfigError, parse_address
from ledger.errors import first_line

log = logging.getLogger(__name__)

DEFAULT_PUSH_EVERY_S = 15.0


@dataclass(frozen=True)
class Settings:
    address: tuple[str, int] | None = None
    pushgateway: str | None = None
    textfile: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.address or self.pushgateway or self.textfile)


def add_arguments(parser: argparse.ArgumentParser, *, serve: bool = True) -> None:
    """The ``--metrics-*`` options of a job (``serve``: it can run long enough to scrape)."""
    if serve:
        parser.add_argument("--metrics-address", default=None, metavar="HOST:PORT",
                            help="serve Prometheus metrics on http://HOST:PORT/metrics (a bare "
                                 "PORT listens on 127.0.0.1; default: metrics.address, off)")
    parser.add_argument("--metrics-pushgateway", default=None, metavar="URL",
                        help="push the metrics to this Prometheus Pushgateway (at the end of a "
                             "--once run, else every 15 s; default: metrics.pushgateway)")
    parser.add_argument("--metrics-textfile", default=None, metavar="PATH.prom",
                        help="write the metrics to this node-exporter textfile, atomically "
                             "(default: metrics.textfile)")


def settings(args: argparse.Namespace, config: Any) -> Settings:
    """The command line's ``--metrics-*`` over the configuration's ``metrics.*``."""
    address = getattr(args, "metrics_address", None) or config.metrics_address
    textfile = getattr(args, "metrics_textfile", None) or config.metrics_textfile
    if textfile is not None and not textfile.endswith(".prom"):
        raise ConfigError(f"--metrics-textfile {textfile}: expected a path ending in .prom "
                          "(node exporter's textfile collector reads only *.prom files)")
    try:
        parsed = None if address is None else parse_address(address)
    except ValueError as exc:
        raise ConfigError(f"--metrics-address: {exc}") from None
    return Settings(parsed, getattr(args, "metrics_pushgateway", None) or
                    config.metrics_pushgateway, textfile)


class Exporter:
    """Serves, pushes and writes one registry as its :class:`Settings` say."""

    def __init__(self, settings: Settings, registry: Any, *, job: str,
                 grouping_key: dict[str, str] | None = None,
                 push_every_s: float = DEFAULT_PUSH_EVERY_S) -> None:
        self.settings = settings
        self.registry = registry
        self.job = job
        self.grouping_key = grouping_key or {}
        self.push_every_s = push_every_s
        self._server: Any = None
        self._last_publish = float("-inf")

    def start(self) -> Exporter:
        """Start serving ``/metrics`` (when an address is set); a port in use is a clear error."""
        if self.settings.address is not None and self._server is None:
            host, port = self.settings.address
            try:
                self._server, _ = start_http_server(port, addr=host, registry=self.registry)
            except OSError as exc:
                raise ConfigError(f"metrics address {host}:{port}: cannot listen: "
                                  f"{exc.strerror or exc}") from None
            log.info("serving metrics on http://%s:%s/metrics", host, self.port)
        return self

    @property
    def port(self) -> int | None:
        """The port served (the real one when 0 asked the OS for a free port)."""
        return None if self._server is None else self._server.server_address[1]

    def publish(self, final: bool = False) -> None:
        """Push and write now if due (every ``push_every_s``), or at once with ``final``."""
        if not (self.settings.pushgateway or self.settings.textfile):
            return
        now = time.monotonic()
        if not final and now - self._last_publish < self.push_every_s:
            return
        self._last_publish = now
        if self.settings.textfile:
            try:
                write_to_textfile(self.settings.textfile, self.registry)
            except OSError as exc:
                log.error("metrics textfile %s not written: %s", self.settings.textfile, exc)
        if self.settings.pushgateway:
            try:
                push_to_gateway(self.settings.pushgateway, job=self.job, registry=self.registry,
                                grouping_key=self.grouping_key, timeout=10)
            except Exception as exc:  # URLError, HTTPError, timeouts: never stop the job
                log.error("metrics not pushed to %s: %s", self.settings.pushgateway,
                          first_line(exc))

    def close(self) -> None:
        """A last push/write, then stop serving."""
        try:
            self.publish(final=True)
        finally:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
                self._server = None

    def __enter__(self) -> Exporter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def exposition(registry: Any) -> str:
    """The text exposition of ``registry``, families without samples left out."""
    return generate_latest(_NonEmpty(registry)).decode()


class _NonEmpty:
    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def collect(self) -> list[Any]:
        return [m for m in self.registry.collect() if m.samples]


class JobMetrics:
    """A job's :class:`~pipelines.metrics.definitions.Metrics` and :class:`Exporter`, as a
    context: started on entry (server up, logged errors counted), closed on exit (last push or
    write, server down)."""

    def __init__(self, job: str, settings: Settings, source: str, target: str) -> None:
        from pipelines.metrics.definitions import Metrics

        self.metrics = Metrics(job)
        self.exporter = Exporter(settings, self.metrics.registry, job=f"offset-ledger-{job}",
                                 grouping_key={"source": source, "target": target})

    def __enter__(self) -> JobMetrics:
        self.exporter.start()
        self.metrics.count_logged_errors()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.exporter.close()
        finally:
            self.metrics.close()


def job_metrics(job: str, args: argparse.Namespace, config: Any, source: str, target: str,
                once: bool = False) -> JobMetrics | None:
    """The job's metrics when any ``metrics.*`` / ``--metrics-*`` is set, else ``None``
    (``once``: a single pass serves no address, it pushes or writes when it ends)."""
    chosen = settings(args, config)
    if once:
        if getattr(args, "metrics_address", None):
            log.warning("a --once run serves no /metrics (nothing would scrape it in time): "
                        "use --metrics-pushgateway or --metrics-textfile")
        chosen = Settings(None, chosen.pushgateway, chosen.textfile)
    return JobMetrics(job, chosen, source, target) if chosen.enabled else None
