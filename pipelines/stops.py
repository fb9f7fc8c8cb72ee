"""Stop signals that arrive while a command starts, before a continuous job handles its own.

A job's modules take seconds to import on a loaded machine; a SIGTERM (systemd, a supervisor,
a scheduler) or a Ctrl-C in that window used to end it by the signal's default action: exit
-15 with no line, or a ``KeyboardInterrupt`` traceback (torture histories 19013 eos, 23001
eos). The CLI's ``main`` holds them from its first line::

    main() ── hold(): SIGTERM/SIGINT recorded ── verb parsed ──┬── one-shot verb: release();
                                                               │   one recorded: exit 128 + it
                                                               └── continuous job: take() in
                                                                   stop_on_signals / supervise:
                                                                   it stops at once, exit 0

Invariants:
    * Importing this module imports nothing beyond the standard library: ``main`` holds the
      signals before any verb module is imported.
    * A signal is never lost while held: :func:`release` and :func:`take` hand on the first
      one recorded; a second one while held ends the command at once (``KeyboardInterrupt``,
      which ``main`` turns into exit 130), as a second signal stops a running job.
    * Outside the main thread (a test calling ``main`` from a worker thread) nothing is held.
    * A job's stop request is a :class:`StopEvent`, never a ``threading.Event`` (reliability
      F23): a stop signal ends the job's wait as it arrives, wherever it lands.

Why ``threading.Event`` may miss a signal, and why :class:`StopEvent` cannot::

    a signal's C handler only marks it pending; its Python handler runs later, in the main
    thread, between two bytecodes:

    Event.wait      with cond's Lock ──► the handler: Event.set: with Lock: waits for its
                                         own thread, forever
    Event.wait      the signal lands just before the blocking call, or in another thread
                    (the job's own threads): the handler waits until the timeout ends
    StopEvent.wait  poll(stop pipe, wakeup pipe): the C handler writes the wakeup pipe at
                    once (signal.set_wakeup_fd); the loop's jump back runs the handler,
                    whose set() (a flag and a byte, no lock) ends every waiter
"""

from __future__ import annotations

import math
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)

_received: list[int] = []
_previous: dict[int, Any] = {}


def _record(signum: int, frame: Any) -> None:
    if _received:
        raise KeyboardInterrupt
    _received.append(signum)


def hold() -> None:
    """Record SIGTERM/SIGINT instead of acting on them, until :func:`release` or :func:`take`."""
    if _previous or threading.current_thread() is not threading.main_thread():
        return
    _received.clear()
    for sig in SIGNALS:
        _previous[sig] = signal.signal(sig, _record)


def take() -> tuple[int | None, dict[int, Any]]:
    """End the hold after the caller installed its own handlers: ``(the signal recorded or
    None, the handlers the hold replaced)``, to restore when the caller is done; ``(None, {})``
    without a hold (the caller restores what its own installation replaced)."""
    previous = dict(_previous)
    _previous.clear()
    received = _received[0] if _received else None
    _received.clear()
    return received, previous


def release() -> int | None:
    """End the hold, the previous handlers back; the signal recorded meanwhile, if any."""
    received, previous = take()
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    return received


class StopEvent:
    """A stop request that a signal handler may set: ``threading.Event``'s ``set``,
    ``is_set`` and ``wait``, without a lock; in the main thread, once :meth:`wake_on_signals`
    was called, a wait runs a signal's handler as the signal arrives (see the module docstring).

    Every thread may wait on it; once set it stays set. Its pipes are not inherited by
    children and are closed when it is collected.
    """

    def __init__(self) -> None:
        self._flag = False
        self._read, self._write = _pipe()  # set() -> every waiter; never read
        self._signals, self._signalled = _pipe()  # the C handler -> the main thread's wait

    def is_set(self) -> bool:
        """Whether a stop was asked."""
        return self._flag

    def set(self) -> None:
        """Ask for the stop and wake every waiter; safe in a signal handler, idempotent."""
        if self._flag:
            return
        self._flag = True
        try:
            os.write(self._write, b"s")
        except BlockingIOError:  # the pipe is full of earlier bytes: they wake the waiters
            pass

    def wake_on_signals(self) -> Callable[[], None]:
        """Make every signal with a Python handler end the main thread's :meth:`wait` as it
        arrives (``signal.set_wakeup_fd``), whichever thread the kernel gives it to; returns
        the function putting the previous wakeup descriptor back. Main thread only."""
        previous = signal.set_wakeup_fd(self._signalled, warn_on_full_buffer=False)
        return lambda: signal.set_wakeup_fd(previous)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the stop is asked or ``timeout`` seconds pass; whether it was asked."""
        deadline = None if timeout is None else time.monotonic() + timeout
        poller, main = self._poller(self._read)
        while not self._flag:  # the loop's jump back runs a handler a signal left pending
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            poller.poll(None if left is None else math.ceil(left * 1000))
            if main:
                _drain(self._signals)
        return self._flag

    def wait_readable(self, fd: int) -> None:
        """Wait until ``fd`` is readable (a child's pidfd: it ended); in the main thread the
        handler of every signal runs as the signal arrives, not once the wait is over. A stop
        does not end this wait: the caller's handler acts on it (forwards it to the child)."""
        poller, main = self._poller(fd)
        while not any(ready == fd for ready, _ in poller.poll()):
            if main:  # the loop's jump back runs the handler of what woke it
                _drain(self._signals)

    def _poller(self, fd: int) -> tuple[select.poll, bool]:
        """A poll of ``fd`` and, in the main thread (then ``True``), of the wakeup pipe; the
        caller drains that pipe after each wake-up."""
        poller = select.poll()  # not select(): no FD_SETSIZE limit in a busy process
        poller.register(fd, select.POLLIN)
        main = threading.current_thread() is threading.main_thread()
        if main:
            poller.register(self._signals, select.POLLIN)
        return poller, main

    def __del__(self) -> None:
        for name in ("_read", "_write", "_signals", "_signalled"):
            fd = getattr(self, name, -1)
            if fd >= 0:
                os.close(fd)


def _pipe() -> tuple[int, int]:
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    return read, write


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


Stop = StopEvent | threading.Event
"""What a job's loops wait on: a :class:`StopEvent` wherever a signal handler sets it; a
``threading.Event`` only where a thread does (tests, code embedding a job)."""
