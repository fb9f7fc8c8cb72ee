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
"""

from __future__ import annotations

import signal
import threading
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
