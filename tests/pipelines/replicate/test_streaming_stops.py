"""The streaming driver's stop of its copy tasks when the target (the runs channel's cluster)
is away.

Found by hand on 2026-12-02 (both brokers of a ``replicate`` killed, then SIGTERM): the stop
request to the tasks is a message on the channel, on the target. With the target away it was
never delivered, yet the driver waited the whole ``STOP_TIMEOUT_S`` (60 s) for tasks that could
not hear it, after the request's own 30 s flush: a SIGTERM took 93 s to end the job, past
systemd's default stop timeout of 90 s. An undelivered request now ends the tasks at once, as
the deadline would have (on real brokers: 33 s from SIGTERM to the last line, exit 0;
docs/reliability.md, F20).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipelines.replicate.streaming import StreamingReplicator

pytestmark = pytest.mark.unit


class Workers:
    """Local copy workers that end ``after`` polls of the driver (never, with None)."""

    def __init__(self, after: int | None):
        self.after, self.polls, self.waited = after, 0, []

    def alive(self, task: str) -> bool:
        return self.after is None or self.polls < self.after

    def wait(self, tasks: list[str], timeout: float) -> None:
        self.waited.append((tuple(tasks), timeout))

    def finished(self) -> list:
        return []


def driver(heard: bool, workers: Workers) -> tuple[StreamingReplicator, list]:
    d = StreamingReplicator.__new__(StreamingReplicator)
    d.r = SimpleNamespace(flow=SimpleNamespace(name="P->B", target="B"))
    d.tasks = {"t0": SimpleNamespace(slot=0, stopping=False)}
    sent: list = []

    def send_control(value: bytes) -> bool:
        sent.append(value)
        return heard

    d.channel = SimpleNamespace(send_control=send_control)
    d.workers = workers  # what the driver's _workers() hands out once started

    def poll(timeout: float) -> None:
        workers.polls += 1

    d._poll = poll
    d._settle = lambda slots: sent.append(("settled", tuple(slots)))
    return d, sent


def test_an_undelivered_stop_request_ends_the_tasks_at_once(caplog):
    workers = Workers(after=None)  # they never hear it
    d, sent = driver(heard=False, workers=workers)
    d._stop_tasks(["t0"])
    assert workers.polls == 0, "waited for tasks that cannot read the request"
    assert workers.waited == [(("t0",), 1.0)]  # ended as at the deadline
    assert sent[-1] == ("settled", (0,)) and d.tasks == {}
    assert "the stop request did not reach the copy tasks (the runs channel on B is not " \
           "writable): ending them now" in caplog.text


def test_a_delivered_stop_request_waits_for_the_tasks_to_report():
    workers = Workers(after=3)
    d, sent = driver(heard=True, workers=workers)
    d._stop_tasks(["t0"])
    assert workers.polls == 3  # read the channel until the task ended
    assert sent[-1] == ("settled", (0,)) and d.tasks == {}
