"""The streaming driver's hold on its runs channel, on a fake channel (``fake_channel``).

The lease (taken, refused, lost and taken back, usurped by a newer driver), the drain to a sync
mark, the order and once-only hand-over of reports across a rebuilt consumer, the hint, and the
driver's catch-up after a crash between a channel commit and a Delta commit.
"""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError

from ledger.config import ClusterConfig
from ledger.translation import Run
from pipelines.edge.kafka_errors import KafkaAccessError
from pipelines.replicate import channel
from pipelines.replicate.lease import LeaseError, RunsChannel, StoppedWhileAway
from pipelines.replicate.plan import RecordedTail
from pipelines.replicate.streaming import StreamingReplicator
from tests.pipelines.replicate.fake_channel import FakeClients, FakeTopic

pytestmark = pytest.mark.unit

ME = "offset-ledger-replicate.run-new"


def runs_channel(clients: FakeClients, **timeouts: float) -> RunsChannel:
    return RunsChannel("P->B", ClusterConfig("B", {"bootstrap.servers": "127.0.0.1:1"}),
                       "offset-ledger-runs.P-B.internal", "offset-ledger-replicate.P-B", ME,
                       clients, **{"lease_timeout_s": 0.3, "grace_s": 0.05, **timeouts})


def part(start: int, upstream: int, downstream: int, length: int, task: str = "run/0/1",
         partition: int = 0) -> channel.Delivered:
    return channel.Delivered("T", "P.T", partition, start, (Run(upstream, downstream, length),),
                             upstream + length, length, 10 * length, None, 0, 1, 1, task)


def report(*parts: channel.Delivered) -> bytes:
    return channel.encode_runs(parts[0].task, list(parts))


# --- the lease --------------------------------------------------------------------------------


def test_taking_the_lease_announces_this_driver_after_what_the_channel_holds():
    clients = FakeClients()
    clients.topic.append(0, channel.encode_lease("offset-ledger-replicate.run-old"))
    clients.topic.append(0, report(part(0, 0, 0, 5)))
    ch = runs_channel(clients)
    ch.take()
    assert ch.announced_at == 2
    assert channel.lease_holder(channel.decode(clients.topic.partitions[0][2])) == ME
    # The predecessor's lease message does not end this driver; its report is read once.
    drained = ch.drain()
    assert [channel.lease_holder(m) for m in drained] == ["offset-ledger-replicate.run-old",
                                                         None, ME]
    assert drained[1] == [part(0, 0, 0, 5)]
    assert ch.consumed_to == 4  # past the sync mark the drain wrote
    assert ch.drain() == []  # nothing new: nothing handed over twice


def test_a_flow_streamed_by_another_job_is_refused_naming_the_group_and_the_channel():
    clients = FakeClients(FakeTopic(held_by_other=True))
    with pytest.raises(LeaseError, match=r"flow P->B is streamed by another replicate job "
                       r"\(client.id offset-ledger-replicate.run-other on /127.0.0.1\): "
                       r"consumer group offset-ledger-replicate.P-B on B holds its runs "
                       r"channel offset-ledger-runs.P-B.internal; stop that job first"):
        runs_channel(clients).take()
    assert clients.topic.partitions[0] == []  # no lease message written


def test_a_missing_group_acl_is_named_not_taken_for_another_job():
    clients = FakeClients(FakeTopic(held_by_other=True))
    ch = runs_channel(clients)
    ch.clients = SimpleNamespace(consumer=lambda *cbs: _with_error(clients.consumer(*cbs)),
                                 probe=clients.probe, producer=clients.producer)
    with pytest.raises(KafkaAccessError, match=r"offset-ledger-replicate\.P-B") as err:
        ch.take()
    assert err.value.kind == "authorization"


def _with_error(consumer):
    consumer.errors.append(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))
    return consumer


def test_a_newer_driver_s_lease_message_ends_this_one():
    clients = FakeClients()
    ch = runs_channel(clients)
    ch.take()
    clients.topic.append(0, channel.encode_lease("offset-ledger-replicate.run-newer"))
    handled = []
    with pytest.raises(LeaseError, match=r"lease was taken by another replicate job "
                       r"\(offset-ledger-replicate.run-newer"):
        ch.poll(0.01, handled.append)
    assert handled == [channel.decode(clients.topic.partitions[0][0])]  # its own lease only


def test_fenced_with_no_newer_driver_the_lease_is_taken_back_and_nothing_read_twice(caplog):
    clients = FakeClients()
    ch = runs_channel(clients)
    ch.take()
    clients.topic.append(0, report(part(0, 0, 0, 5)))
    handled: list = []
    ch.poll(0.01, handled.append)
    ch.poll(0.01, handled.append)
    assert len(handled) == 2  # the lease message, the report
    ch.commit_hint(all_recorded=False)  # the report is pending: the hint does not move
    assert clients.topic.committed is None
    clients.topic.append(0, report(part(5, 5, 5, 5)))
    clients.current.fence()  # librdkafka's static member fenced by its own rejoin
    ch.poll(0.01, handled.append)
    assert ch.fenced and len(handled) == 2
    with caplog.at_level(logging.WARNING):
        ch.keep(time.monotonic())
    assert "lost the lease (fenced by its own rejoin) and no other job took it: taking it " \
           "back" in caplog.text
    assert len(clients.consumers) == 2 and clients.consumers[0].closed and not ch.fenced
    # The rebuilt member starts from the group's hint (offset 0): the lease message and the
    # first report come again, and are not handed over twice.
    for _ in range(5):
        ch.poll(0.01, handled.append)
    assert handled[2:] == [[part(5, 5, 5, 5)]]
    ch.keep(time.monotonic())
    assert len(clients.consumers) == 2  # held again: nothing more to do


def test_a_superseded_member_s_close_does_not_unsettle_its_successor():
    """F21 (torture history 43001 eos): the closed member's revoke and fencing, served by its
    close, were taken for the new member's, so each rebuild set off the next one."""
    closing = threading.Event()  # the dead member's close ends after its successor joined
    clients = FakeClients(FakeTopic(close_reports=True, close_blocks=closing))
    ch = runs_channel(clients, drain_timeout_s=5.0)
    ch.take()
    clients.topic.append(0, report(part(0, 0, 0, 5)))
    clients.current.fence()
    assert ch.drain()[1:] == [[part(0, 0, 0, 5)]]
    closing.set()
    deadline = time.monotonic() + 5
    while not clients.consumers[0].closed and time.monotonic() < deadline:
        time.sleep(0.01)  # the dead member is closed aside, on a thread of its own
    assert clients.consumers[0].closed
    ch.keep(time.monotonic() + 60)
    assert len(clients.consumers) == 2 and not ch.fenced  # the successor still holds the lease


def test_fenced_by_a_newer_driver_this_one_stops():
    clients = FakeClients()
    ch = runs_channel(clients, grace_s=0.5)
    ch.take()
    clients.current.fence()
    clients.topic.append(0, channel.encode_lease("offset-ledger-replicate.run-newer"))
    with pytest.raises(LeaseError, match="taken by another replicate job"):
        ch.keep(time.monotonic())
    assert len(clients.consumers) == 1  # not rebuilt: the newer job keeps the lease


def test_a_lease_that_cannot_be_taken_back_in_time_ends_the_driver():
    clients = FakeClients()
    ch = runs_channel(clients, retake_s=5.0)
    ch.take()
    clients.topic.held_by_other = True
    clients.current.revoke_runs()
    now = time.monotonic()
    ch.keep(now)  # revoked just now: a rebalance may give it back
    assert len(clients.consumers) == 1
    ch.keep(now + 1.0)  # away longer than the lease timeout: taken back (a new member)
    assert len(clients.consumers) == 2
    with pytest.raises(LeaseError, match=r"could not be taken back within 5s: stopping"):
        ch.keep(now + 7.0)


def test_the_hint_moves_only_when_everything_consumed_is_recorded():
    clients = FakeClients()
    ch = runs_channel(clients)
    ch.take()
    ch.drain()
    ch.commit_hint(all_recorded=True)
    assert clients.topic.committed == ch.consumed_to == 2
    clients.topic.append(0, report(part(0, 0, 0, 5)))
    ch.poll(0.01, lambda m: None)
    ch.commit_hint(all_recorded=False)
    assert clients.topic.committed == 2


def test_the_hint_refused_to_a_fenced_member_marks_it_fenced(caplog):
    clients = FakeClients()
    ch = runs_channel(clients)
    ch.take()
    ch.drain()
    clients.current.fenced = True  # fenced without its error callback having run yet
    ch.commit_hint(all_recorded=True)
    assert ch.fenced
    assert "runs channel offset not committed" in caplog.text


def test_the_control_end_while_the_target_is_away_is_a_classified_error():
    clients = FakeClients()
    ch = runs_channel(clients)
    ch.take()
    clients.topic.append(1, channel.encode_stop(["run/0/1"]))
    assert ch.control_end() == 1
    clients.topic.unreachable = True
    with pytest.raises(KafkaAccessError) as err:
        ch.control_end()
    assert err.value.kind == "unreachable" and clients.probes[-1].closed


# --- the driver's catch-up after a crash -------------------------------------------------------


def crashed_driver(clients: FakeClients, tails: dict) -> tuple[StreamingReplicator, list]:
    """A driver whose ledger says ``tails`` and whose channel is ``clients``'s; its commit
    records what it was given."""
    d = StreamingReplicator.__new__(StreamingReplicator)
    d.channel = runs_channel(clients)
    d.exactly_once = False
    d.pending = []
    flow_state = SimpleNamespace(tails=tails, last_batch=7, newest_written_at=None)
    d.r = SimpleNamespace(flow=SimpleNamespace(name="P->B"), tails={},
                          load_state=lambda touched: flow_state)
    recorded: list = []

    def commit() -> None:
        recorded.extend(d.pending)
        d.pending = []
        d.channel.commit_hint(all_recorded=True)

    d.commit = commit
    return d, recorded


def test_after_a_crash_the_reports_beyond_delta_are_recorded_and_duplicates_are_not():
    clients = FakeClients()
    clients.topic.append(0, channel.encode_lease("offset-ledger-replicate.run-crashed"))
    clients.topic.append(0, report(part(0, 0, 0, 10)))  # in Delta (the tail below)
    clients.topic.append(0, report(part(10, 10, 10, 5)))  # crashed before its Delta commit
    # A task replaced before the crash copied 10.. again: duplicates no run maps.
    clients.topic.append(0, report(part(10, 10, 15, 5, task="run/0/0")))
    clients.topic.append(0, report(part(0, 0, 0, 3, partition=1)))  # a partition new to Delta
    d, recorded = crashed_driver(clients, {("T", 0): RecordedTail(10, 10)})
    d.channel.take()
    d.catch_up()
    assert recorded == [part(10, 10, 10, 5), part(0, 0, 0, 3, partition=1)]
    assert clients.topic.committed == d.channel.consumed_to  # the hint past the catch-up


def test_after_a_clean_stop_the_catch_up_records_nothing_and_moves_the_hint():
    clients = FakeClients()
    clients.topic.append(0, report(part(0, 0, 0, 10)))
    d, recorded = crashed_driver(clients, {("T", 0): RecordedTail(10, 10)})
    d.channel.take()
    d.catch_up()
    assert recorded == [] and d.pending == []
    assert clients.topic.committed == d.channel.consumed_to == 3


# --- the target away (torture history 14004 alo) ------------------------------------------------
# replicate B->P was restarted just as P (its target, holding the runs channel) was killed for a
# disaster failover: the restart passed its start-up probe, then the lease message / sync mark
# could not be written within one 30 s flush and the job exited (rc 2, "cannot write to the runs
# channel ... on P"). The driver now rides the target's absence out, as its tasks do.


@pytest.mark.parametrize(("topic", "warned"), [
    # F7: the lease message (and below, a sync mark) not delivered for a while.
    (lambda: FakeTopic(away_flushes=3),
     "cannot write to the runs channel offset-ledger-runs.P-B.internal on B yet; waiting up "
     "to 300s for it"),
    # F10 (torture history 17005 eos): P restarted after a disaster and its group coordinator
    # took longer than the lease timeout to assign; the driver said another job streamed the
    # flow (none did) and exited.
    (lambda: FakeTopic(coordinator_ready_at=time.monotonic() + 0.8),
     "is not assigned after 0s and no other job holds it (the group coordinator may still be "
     "loading); waiting up to 300s")], ids=["write", "coordinator"])
def test_the_lease_is_taken_once_the_target_answers_again(caplog, topic, warned):
    clients = FakeClients(topic())
    ch = runs_channel(clients)
    with caplog.at_level(logging.WARNING):
        ch.take()
    assert ch.announced_at == 0
    assert warned in caplog.text
    clients.topic.away_flushes = 2
    assert ch.drain() == [channel.decode(clients.topic.partitions[0][0])]


def test_a_target_away_longer_than_the_bound_is_named_unreachable():
    clients = FakeClients(FakeTopic(away_flushes=10**9))
    ch = runs_channel(clients, retake_s=0.2)
    with pytest.raises(KafkaAccessError, match=r"flow P->B: cannot write to the runs channel "
                       r"offset-ledger-runs\.P-B\.internal on B within 0s") as err:
        ch.take()
    assert err.value.kind == "unreachable"


def test_the_lease_waits_for_a_target_away_instead_of_blaming_another_job():
    clients = FakeClients(FakeTopic(away=True))
    ch = runs_channel(clients)
    ch.take()
    assert clients.waits == [300.0] and ch.announced_at == 0


def test_a_target_that_stays_away_ends_the_lease_wait_with_its_own_error():
    clients = FakeClients(FakeTopic(away=True, back_on_wait=False))
    with pytest.raises(KafkaAccessError, match="cluster B is unreachable"):
        runs_channel(clients).take()


def test_a_lease_never_assigned_ends_the_driver_naming_that():
    clients = FakeClients(FakeTopic(coordinator_ready_at=time.monotonic() + 3600))
    with pytest.raises(LeaseError, match=r"lease \(group offset-ledger-replicate.P-B on B\) "
                       r"was not assigned within 1s, and no other job holds it"):
        runs_channel(clients, retake_s=1.0).take()


# --- a stop while the target is away (torture history 20011 eos) ------------------------------
# B (the target of P->B) restarted while the driver took its lease back; the driver then hung,
# deaf to SIGTERM for 90 s, until it was killed: a wait for an absent target must end on a stop,
# and closing the dead member must never block the driver.


def test_a_stop_ends_a_wait_for_an_absent_target():
    clients = FakeClients(FakeTopic(away_flushes=10**9))
    ch = runs_channel(clients)
    ch.stop = threading.Event()
    ch.stop.set()
    started = time.monotonic()
    with pytest.raises(StoppedWhileAway, match=r"flow P->B: stopped while waiting for a write "
                       r"to the runs channel on B; what was copied since the last commit is "
                       r"recorded by the next run's catch-up"):
        ch.take()
    assert time.monotonic() - started < 10


def test_a_stop_with_the_target_there_still_drains_to_the_end():
    clients = FakeClients()
    ch = runs_channel(clients)
    ch.take()
    clients.topic.append(0, report(part(0, 0, 0, 5)))
    ch.stop = threading.Event()
    ch.stop.set()
    assert ch.drain()[1:] == [[part(0, 0, 0, 5)]]


def test_taking_the_lease_back_never_waits_on_the_dead_member_s_close():
    release = threading.Event()
    clients = FakeClients(FakeTopic(close_blocks=release))
    ch = runs_channel(clients)
    ch.take()
    clients.current.fence()
    started = time.monotonic()
    ch.keep(time.monotonic())
    assert time.monotonic() - started < 5 and len(clients.consumers) == 2
    release.set()
