"""``pipelines.passes``: a long-running pass job rides transient faults out and stops on a
signal after its pass; a fault configuration must fix still ends it."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from pipelines.edge import kafka_errors
from pipelines.edge.kafka_errors import KafkaAccessError
from pipelines.passes import run_passes, supervise, wants_supervisor

pytestmark = pytest.mark.unit


def test_a_transient_fault_skips_one_pass_and_the_job_goes_on(caplog):
    done = []

    def one_pass(n: int) -> None:
        if n == 1:
            raise KafkaAccessError("cluster B is unreachable at 127.0.0.1:1",
                                   kafka_errors.UNREACHABLE)
        done.append(n)

    assert run_passes("checkpoint", one_pass, every_s=0, once=False, max_passes=3) == 0
    assert done == [0, 2]
    assert "checkpoint: pass skipped, tried again in 0s: cluster B is unreachable" in caplog.text


@pytest.mark.parametrize("kind", [kafka_errors.AUTHENTICATION, kafka_errors.AUTHORIZATION,
                                  kafka_errors.TLS])
def test_a_fault_to_fix_in_the_configuration_ends_the_job(kind):
    def one_pass(n: int) -> None:
        raise KafkaAccessError("cluster B: refused", kind)

    with pytest.raises(KafkaAccessError):
        run_passes("checkpoint", one_pass, every_s=0, once=False, max_passes=3)


def test_once_never_rides_a_fault_out():
    def one_pass(n: int) -> None:
        raise KafkaAccessError("cluster B is unreachable", kafka_errors.UNREACHABLE)

    with pytest.raises(KafkaAccessError):
        run_passes("checkpoint", one_pass, every_s=0, once=True)


def test_sigterm_ends_the_loop_after_the_pass_in_flight():
    passes = []

    def one_pass(n: int) -> None:
        passes.append(n)
        if n == 1:  # a signal in the middle of the second pass: it still completes
            os.kill(os.getpid(), signal.SIGTERM)
            passes.append("completed")

    before = signal.getsignal(signal.SIGTERM)
    assert run_passes("checkpoint", one_pass, every_s=0.01, once=False) == 0
    assert passes == [0, 1, "completed"]
    assert signal.getsignal(signal.SIGTERM) is before


CRASH_ONCE = """
import os, signal, sys
marker = sys.argv[1]
assert os.environ["OFFSET_LEDGER_SUPERVISED_CHILD"] == "1"
if not os.path.exists(marker):
    open(marker, "w").close()
    os.kill(os.getpid(), signal.SIGABRT)  # as librdkafka's failed assertion does
print("pass done", flush=True)
sys.exit(int(sys.argv[2]))
"""


def test_a_crashed_child_is_started_again_and_its_exit_code_is_the_jobs(tmp_path, capfd):
    program = [sys.executable, "-c", CRASH_ONCE]
    assert supervise("checkpoint", [str(tmp_path / "crashed"), "0"], program) == 0
    err = capfd.readouterr().err
    assert "warning: checkpoint: the job's process died of SIGABRT" in err
    assert "(1 restart(s))" in err
    # An exit code means an error line was printed: never restarted, handed on.
    assert supervise("checkpoint", [str(tmp_path / "crashed"), "2"], program) == 2
    assert "died of" not in capfd.readouterr().err


STOPPING = """
import os, signal, sys, time
crash = sys.argv[2] == "crash"
if crash:  # a native fault while stopping, as librdkafka's under a broker going away
    signal.signal(signal.SIGTERM, lambda *a: os.kill(os.getpid(), signal.SIGSEGV))
open(sys.argv[1], "w").close()
while True:
    time.sleep(0.05)
"""


def _signal_once_started(marker, sig: signal.Signals, to_a_thread: bool = False) -> None:
    """Send ``sig`` to this process (the supervisor) once the child wrote ``marker``; with
    ``to_a_thread``, to a thread other than the main one, as the kernel may deliver it."""
    def send() -> None:
        while not marker.exists():
            time.sleep(0.02)  # polls the child's own marker: the condition awaited
        if to_a_thread:
            signal.pthread_kill(threading.get_ident(), sig)
        else:
            os.kill(os.getpid(), sig)

    threading.Thread(target=send, daemon=True).start()


@pytest.mark.parametrize(("how", "code", "said", "to_a_thread"), [
    ("crash", 128 + signal.SIGSEGV, "error: checkpoint: the job's process died of SIGSEGV "
                                    "while stopping (a native fault)", False),
    ("plain", 128 + signal.SIGTERM, None, False),
    # F23: given to another thread, the stop was only handled once the child had ended:
    # never, as nobody told the child.
    ("plain", 128 + signal.SIGTERM, None, True)])
def test_a_child_dying_of_a_signal_after_a_stop_is_named_unless_it_was_the_stop(
        tmp_path, capfd, how, code, said, to_a_thread):
    """Torture history 17004 alo: SIGTERM to a continuous checkpoint, its child died while
    stopping, and the supervisor exited 130 without a word."""
    started = tmp_path / "started"
    _signal_once_started(started, signal.SIGTERM, to_a_thread)
    assert supervise("checkpoint", [str(started), how], [sys.executable, "-c", STOPPING]) \
        == code
    err = capfd.readouterr().err
    assert (said in err) if said else ("error:" not in err)


STARTING = """
import os, signal, sys, time
open(sys.argv[1], "w").close()
while signal.SIGINT not in signal.sigpending():  # still "importing" when the Ctrl-C comes
    time.sleep(0.02)
from pipelines.cli import main
sys.exit(main(["ledger", "init"]))
"""


def test_a_ctrl_c_while_the_child_starts_ends_it_without_a_traceback(tmp_path, capfd):
    """Torture F12 (history 19013 eos): the group's SIGINT reached a supervised child still
    importing its modules: ``KeyboardInterrupt`` and a traceback. The child now starts with
    the stop signals held, and the CLI's ``main`` turns them into exit 130."""
    started = tmp_path / "started"
    _signal_once_started(started, signal.SIGINT)
    assert supervise("checkpoint", [str(started)], [sys.executable, "-c", STARTING]) == 130
    err = capfd.readouterr().err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "interrupted" in err


def test_only_continuous_plain_runs_are_supervised(monkeypatch):
    monkeypatch.delenv("OFFSET_LEDGER_SUPERVISED_CHILD", raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    args = SimpleNamespace(once=False, max_passes=None, _argv=["checkpoint", "--flow", "P->B"])
    assert wants_supervisor(args)
    assert not wants_supervisor(SimpleNamespace(**{**vars(args), "once": True}))
    assert not wants_supervisor(SimpleNamespace(**{**vars(args), "max_passes": 3}))
    monkeypatch.setenv("OFFSET_LEDGER_SUPERVISED_CHILD", "1")
    assert not wants_supervisor(args)


STOPPED_CHILD = """
import signal, sys, threading, time
from pipelines import passes, stops
stops.hold()
stop = stops.StopEvent()
restore = passes.stop_on_signals(stop, "after the pass in flight")
open(sys.argv[1], "w").close()
stop.wait()
time.sleep(0.2)  # the pass in flight ends
restore()
# A client's worker thread that interpreter shutdown still joins when the copy arrives.
threading.Thread(target=lambda: (open(sys.argv[2], "w").close(), time.sleep(1.5))).start()
sys.exit(0)
"""


def _child_stopped_by_its_group(tmp_path, sig: signal.Signals, copies: str) -> tuple[int, str]:
    """A supervised child stopped by ``sig`` to its process group: it gets the group's signal
    and the supervisor's forwarded copy, at once (``copies == "together"``) or once it is
    already ending (``"late"``)."""
    import subprocess

    running, ending = tmp_path / "running", tmp_path / "ending"
    env = {**os.environ, "OFFSET_LEDGER_SUPERVISED_CHILD": "1"}
    child = subprocess.Popen([sys.executable, "-c", STOPPED_CHILD, str(running), str(ending)],
                             env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not running.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # polls the child's own marker: the condition awaited
    child.send_signal(sig)
    if copies == "together":
        child.send_signal(sig)
    else:
        while not ending.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        child.send_signal(sig)
    _, err = child.communicate(timeout=60)
    return child.returncode, err


@pytest.mark.parametrize("copies", ["together", "late"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_supervisors_copy_of_a_group_stop_signal_ends_nothing_twice(tmp_path, sig, copies):
    """Torture history 28009 eos: SIGINT to a continuous checkpoint's process group reached
    its supervised child twice (the group's, then the supervisor's forwarded copy); the copy
    came while the stopped child's interpreter was ending: a ``KeyboardInterrupt`` traceback
    in ``threading._shutdown``. A copy of the stop signal is now no second signal."""
    code, err = _child_stopped_by_its_group(tmp_path, sig, copies)
    assert code == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
