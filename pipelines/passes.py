"""The loop of a long-running pass job (``checkpoint``, ``ingest mm2``): signals and faults.

    pass -> wait the interval (or a stop) -> pass -> ...
    SIGTERM / Ctrl-C     the pass in flight ends, then the job exits 0 (a second signal: at once)
    a transient fault    (a broker restarting, a leader moving: unreachable or unclassified)
                         the pass is skipped with one warning line, the next one runs on time

Invariants:
    * A fault that configuration must fix (credentials, TLS, a missing ACL, an unknown topic)
      is never ridden out: it ends the job with its ``error:`` line, exit 2.
    * ``--once`` runs one pass and never rides a fault out: its caller wants the answer.
    * Each pass has admin clients of its own (``kafka_admin.clients(fresh=True)``): a client
      that lived through a broker restart keeps stale metadata, and librdkafka may abort on a
      request it had in flight to the broker that went away.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from ledger.errors import first_line
from pipelines import kafka_admin, kafka_errors

log = logging.getLogger(__name__)


def stop_on_signals(stop: threading.Event, how: str) -> Callable[[], None]:
    """SIGTERM/SIGINT end a continuous run after recording what it did (a second signal
    stops at once); returns the function restoring the previous handlers."""
    def handle(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        log.warning("signal %s: stopping, %s", signum, how)
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def run_passes(name: str, one_pass: Callable[[int], None], *, every_s: float, once: bool,
               max_passes: int | None = None) -> int:
    """Run ``one_pass(n)`` every ``every_s`` until a signal (or ``once``/``max_passes``)."""
    stop = threading.Event()
    restore = None if once else stop_on_signals(stop, "after the pass in flight")
    passes = 0
    try:
        while not stop.is_set():
            started = time.monotonic()
            with kafka_admin.clients(fresh=True):
                try:
                    one_pass(passes)
                except kafka_errors.KafkaAccessError as exc:
                    if once or exc.kind not in kafka_errors.TRANSIENT:
                        raise
                    log.warning("%s: pass skipped, tried again in %.0fs: %s", name, every_s,
                                first_line(exc))
            passes += 1
            if once or (max_passes is not None and passes >= max_passes):
                break
            stop.wait(max(0.0, every_s - (time.monotonic() - started)))  # the interval
    finally:
        if restore is not None:
            restore()
    return 0
