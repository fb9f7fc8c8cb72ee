"""``pipelines.passes``: a long-running pass job rides transient faults out and stops on a
signal after its pass; a fault configuration must fix still ends it."""

from __future__ import annotations

import os
import signal

import pytest

from pipelines import kafka_errors
from pipelines.kafka_errors import KafkaAccessError
from pipelines.passes import run_passes

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
