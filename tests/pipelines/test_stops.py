"""pipelines.stops: a stop signal while a command starts is handed on, never lost.

Torture history 23001 eos: the history's final SIGTERM reached a `replicate` job it had just
restarted, still importing its modules: it died of the signal's default action (rc -15, no
line) where a stop must end a continuous job with exit 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from pipelines import stops
from pipelines.passes import run_passes

pytestmark = pytest.mark.unit

# The verb's modules are imported in build_parser: the signal comes meanwhile.
STARTING = """
import os, signal, sys
from pipelines import cli
real = cli.build_parser
def importing(verbs):
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    return real(verbs)
cli.build_parser = importing
sys.exit(cli.main(sys.argv[2:]))
"""


def _run(tmp_path, sig: str, *argv: str) -> subprocess.CompletedProcess:
    config = tmp_path / "offset-ledger.yaml"
    config.write_text("clusters:\n  P: {bootstrap.servers: '127.0.0.1:9'}\n"
                      "  B: {bootstrap.servers: '127.0.0.1:9'}\nflows:\n  P->B: true\n"
                      f"ledger:\n  location: {tmp_path / 'ledger'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFSET_LEDGER_")}
    return subprocess.run([sys.executable, "-c", STARTING, sig, *argv, "--config", str(config)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_continuous_job_stopped_while_it_starts_exits_0(tmp_path, sig):
    done = _run(tmp_path, sig, "checkpoint", "--flow", "P->B")
    assert done.returncode == 0, done.stderr
    assert "while the job started: stopped before its first pass" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_one_shot_verb_stopped_while_it_starts_ends_as_interrupted(tmp_path):
    done = _run(tmp_path, "SIGTERM", "ledger", "init")
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "interrupted" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "ledger").exists()  # nothing was done


def test_a_pass_loop_takes_a_signal_that_came_before_it(caplog):
    before = signal.getsignal(signal.SIGTERM)
    stops.hold()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        passes: list[int] = []
        assert run_passes("checkpoint", passes.append, every_s=0.01, once=False) == 0
    finally:
        stops.release()
    # The stop came before the loop: no pass ran, and the handlers are the ones before.
    assert passes == [] and signal.getsignal(signal.SIGTERM) is before
    assert "while the job started" in caplog.text


def test_a_second_signal_while_held_ends_at_once_and_release_hands_the_first_on():
    before = signal.getsignal(signal.SIGINT)
    stops.hold()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0)  # let the handler run
    finally:
        assert stops.release() == signal.SIGINT
    assert signal.getsignal(signal.SIGINT) is before
    assert stops.release() is None  # nothing held any more


def test_nothing_is_held_outside_the_main_thread():
    held: list[bool] = []

    def in_a_thread() -> None:
        stops.hold()
        held.append(bool(stops._previous))
        stops.release()

    t = threading.Thread(target=in_a_thread)
    t.start()
    t.join()
    assert held == [False]


# A signal handler runs in the main thread between two lines of whatever it was running: here
# it is made to run before each line of a wait in turn (a line trace), which is every place a
# SIGTERM can land. With threading.Event the handler's set() waits for the lock its own thread
# holds inside Event.wait, forever (reliability F23); the program runs apart so that such a
# hang fails the test instead of the suite.
EVERY_LINE = """
import sys, time
from pipelines.stops import StopEvent

def lines_of_a_wait(at, timeout):
    stop, times, set_at = StopEvent(), [], []
    def trace(frame, event, arg):
        if event == "line":
            times.append(time.monotonic())
            if len(times) == at:
                set_at.append(times[-1])
                stop.set()  # the handler's whole body: what a SIGTERM runs here
        return trace
    started = time.monotonic()
    sys.settrace(trace)
    woke = stop.wait(timeout)
    sys.settrace(None)
    return [t - started for t in times], woke, time.monotonic() - set_at[0] if set_at else None

# The lines a wait runs before it blocks: those of a 0.5 s wait that come before 0.25 s.
times, woke, _ = lines_of_a_wait(0, 0.5)
before = sum(t < 0.25 for t in times)
assert 0 < before < len(times) and not woke
for at in range(1, before + 1):  # the stop set before each of them: the wait ends at once
    _, woke, after_set = lines_of_a_wait(at, 30)
    assert woke and after_set < 5, (at, after_set)
print("handled before each of", before, "lines", flush=True)
"""


def test_a_stop_set_by_a_signal_handler_anywhere_in_a_wait_ends_the_wait():
    done = subprocess.run([sys.executable, "-c", EVERY_LINE], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("handled before each of")


def test_a_stop_wakes_every_waiting_thread_and_stays_set():
    stop = stops.StopEvent()
    woke: list[bool] = []
    waiters = [threading.Thread(target=lambda: woke.append(stop.wait(30))) for _ in range(3)]
    for t in waiters:
        t.start()
    assert not stop.wait(0.01) and not stop.is_set()
    stop.set()
    stop.set()  # idempotent
    for t in waiters:
        t.join(10)
    assert woke == [True, True, True] and stop.is_set() and stop.wait(0)


@pytest.mark.parametrize("to_a_thread", [False, True])
def test_a_signal_stops_a_pass_loop_waiting_its_interval(caplog, to_a_thread):
    """The loop waits 60 s between passes; the SIGTERM ends that wait, not the interval.

    The kernel gives a process's signal to any of its threads that does not block it; in
    another thread it used not to interrupt the main thread's wait at all (F23)."""
    passes: list[int] = []

    def signal_from_a_thread() -> None:
        if to_a_thread:  # delivered to this thread, as the kernel may choose
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        else:
            os.kill(os.getpid(), signal.SIGTERM)

    def one_pass(n: int) -> None:
        passes.append(n)
        threading.Timer(0.2, signal_from_a_thread).start()

    before = signal.getsignal(signal.SIGTERM)
    t0 = time.monotonic()
    assert run_passes("checkpoint", one_pass, every_s=60, once=False) == 0
    assert passes == [0] and time.monotonic() - t0 < 30
    assert signal.getsignal(signal.SIGTERM) is before
    assert "stopping, after the pass in flight" in caplog.text
