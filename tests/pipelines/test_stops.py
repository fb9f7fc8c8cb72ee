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
