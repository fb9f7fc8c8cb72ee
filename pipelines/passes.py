"""The loop of a long-running pass job (``checkpoint``, ``ingest mm2``): signals and faults.

    pass -> wait the interval (or a stop) -> pass -> ...
    SIGTERM / Ctrl-C     the pass in flight ends, then the job exits 0 (a second signal: at once)
    a transient fault    (a broker restarting, a leader moving: unreachable or unclassified)
                         the pass is skipped with one warning line, the next one runs on time
    a native crash       (librdkafka aborts on an assertion when a broker vanishes under a
                         request): :func:`supervise` runs the loop in a child process and starts
                         it again, with one warning line naming the signal it died of

Invariants:
    * A fault that configuration must fix (credentials, TLS, a missing ACL, an unknown topic)
      is never ridden out: it ends the job with its ``error:`` line, exit 2.
    * ``--once`` runs one pass and never rides a fault out: its caller wants the answer.
    * Only a death by a signal nobody sent is restarted; an exit code (an ``error:`` line was
      printed) or a stop asked for ends the supervisor with the child's code. The child dies
      with the supervisor (``PR_SET_PDEATHSIG``): a ``kill -9`` leaves no job behind.
    * Each pass has admin clients of its own (``kafka_admin.clients(fresh=True)``): a client
      that lived through a broker restart keeps stale metadata, and librdkafka may abort on a
      request it had in flight to the broker that went away.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from ledger import settings
from ledger.errors import first_line
from pipelines import stops
from pipelines.edge import kafka_admin, kafka_errors

log = logging.getLogger(__name__)


COPY_WINDOW_S = 5.0
"""In a supervised child, the stop signal again within this long is the supervisor's copy."""


def stop_on_signals(stop: stops.StopEvent, how: str) -> Callable[[], None]:
    """SIGTERM/SIGINT end a continuous run after recording what it did (a second signal
    stops at once); returns the function restoring the previous handlers.

    A supervised child (:func:`supervise`) stopped through its process group (a terminal's
    Ctrl-C, ``kill -INT -PGID``) gets the signal twice: the group's, and the copy its
    supervisor forwards, which may come while the child's interpreter is already ending
    (torture history 28009 eos: a ``KeyboardInterrupt`` traceback in ``threading._shutdown``).
    There the same signal within ``COPY_WINDOW_S`` of the first is that copy: it changes
    nothing, before or after ``restore``; another signal still stops at once (while the job
    runs) or ends the stopped process quietly (after ``restore``).
    """
    supervised = settings.supervised_child()
    first: list[tuple[int, float]] = []

    def copy_of_first(signum: int) -> bool:
        return supervised and bool(first) and first[0][0] == signum \
            and time.monotonic() - first[0][1] < COPY_WINDOW_S

    def handle(signum: int, frame: Any) -> None:
        if stop.is_set():
            if copy_of_first(signum):
                return
            raise KeyboardInterrupt
        first.append((signum, time.monotonic()))
        log.warning("signal %s: stopping, %s", signum, how)
        stop.set()

    def after_stop(signum: int, frame: Any) -> None:
        if copy_of_first(signum):
            return
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)  # the job has stopped: nothing left to record

    installed = {sig: signal.signal(sig, handle) for sig in stops.SIGNALS}
    unwake = stop.wake_on_signals()
    early, held = stops.take()  # one that came while the command started stops it now
    previous = held or installed
    if early is not None:
        first.append((early, time.monotonic()))
        log.warning("signal %s (while the job started): stopping, %s", early, how)
        stop.set()

    def restore() -> None:
        unwake()
        for sig, handler in previous.items():
            signal.signal(sig, after_stop if supervised and first else handler)

    return restore


def run_passes(name: str, one_pass: Callable[[int], None], *, every_s: float, once: bool,
               max_passes: int | None = None) -> int:
    """Run ``one_pass(n)`` every ``every_s`` until a signal (or ``once``/``max_passes``)."""
    stop = stops.StopEvent()
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


MAX_RESTART_DELAY_S = 30.0


def die_with_parent() -> None:
    """In a child before exec: SIGKILL when the parent dies (Linux ``PR_SET_PDEATHSIG``)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _start_child() -> None:
    """In the supervised child before exec: tied to its parent, and SIGINT held pending (the
    mask survives exec) until the CLI's ``main`` releases it (SIGTERM's default action ends a
    starting child without a word; SIGINT's is a ``KeyboardInterrupt``).

    A terminal's Ctrl-C reaches the whole process group; without the mask a child still
    importing its modules died of it with a ``KeyboardInterrupt`` traceback (torture F12,
    history 19013 eos). Held, the signal arrives where ``main`` turns it into an exit.
    """
    die_with_parent()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def wants_supervisor(args: Any) -> bool:
    """A continuous run (no ``--once``, no ``--max-passes``) of a plain program that is not
    the supervised child already: spark-submit and Databricks supervise their own jobs."""
    return (not args.once and getattr(args, "max_passes", None) is None
            and getattr(args, "_argv", None) is not None
            and not settings.supervised_child() and not settings.under_launcher())


def supervise(name: str, argv: list[str], program: list[str] | None = None) -> int:
    """Run ``offset-ledger ARGV`` in a child until it exits; start it again after a crash.

    ``program`` replaces ``python -m pipelines.cli`` (tests).

    The child inherits stdout and stderr (its lines are the job's); SIGTERM and SIGINT are
    passed on to it and it stops as the job would.
    """
    stop = stops.StopEvent()
    child: subprocess.Popen | None = None
    forwarded: list[int] = []

    def forward(signum: int, frame: object) -> None:
        stop.set()
        forwarded.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    installed = {sig: signal.signal(sig, forward) for sig in stops.SIGNALS}
    early, held = stops.take()
    previous = held or installed
    if early is not None:  # asked to stop while it started: no pass ran, nothing to record
        print(f"warning: {name}: signal {early} while the job started: stopped before its "
              "first pass", file=sys.stderr, flush=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        return 0
    unwake = stop.wake_on_signals()  # a stop during a restart's delay ends the delay
    env = {**os.environ, settings.SUPERVISED_CHILD: "1"}
    crashes = 0
    try:
        while True:
            child = subprocess.Popen([*(program or [sys.executable, "-m", "pipelines.cli"]),
                                      *argv], env=env, preexec_fn=_start_child)
            code = _wait(child, stop)
            if code >= 0:
                return code
            if stop.is_set():
                return _stopped(name, -code, forwarded)
            crashes += 1
            delay = min(MAX_RESTART_DELAY_S, 2.0 ** (crashes - 1))
            print(f"warning: {name}: the job's process died of {signal.Signals(-code).name} "
                  f"(a native fault, e.g. in librdkafka while a broker went away); started "
                  f"again in {delay:.0f}s ({crashes} restart(s))", file=sys.stderr, flush=True)
            if stop.wait(delay):
                return 0
    finally:
        unwake()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait(child: subprocess.Popen, stop: stops.StopEvent) -> int:
    """``child.wait()``, with a stop signal forwarded as it arrives: a plain ``waitpid`` runs
    the handler only once the child has ended, when the signal came just before the call or
    to another thread of the supervisor (F23), and the child would never be told to stop."""
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):  # no pidfd (not Linux 5.3+): waitpid, as before
        return child.wait()
    try:
        stop.wait_readable(pidfd)
    finally:
        os.close(pidfd)
    return child.wait()


def _stopped(name: str, signum: int, forwarded: list[int]) -> int:
    """The supervisor's exit code for a child that died of ``signum`` after a stop was asked
    (``forwarded``): the signal asked for ends it as a shell would say (128 + its number); any
    other (a native crash while stopping) is named in an ``error:`` line, never silent."""
    if signum in forwarded:
        return 128 + signum
    print(f"error: {name}: the job's process died of {signal.Signals(signum).name} while "
          f"stopping (a native fault); the pass in flight was not finished and the next run "
          f"repeats it", file=sys.stderr, flush=True)
    return 128 + signum
