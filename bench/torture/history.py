"""The history generator: everything a history does is drawn here, from ``random.Random(seed)``.

Invariants:
    * ``generate(seed, mode)`` is a pure function: the same seed and mode give the same
      :class:`History` (topics, producers, groups, moves, faults, durations), so ``--seed N``
      replays a history. Wall-clock timing inside a run (broker latency, scheduling) is the only
      thing a seed does not fix.
    * Moves alternate direction starting with a failover P -> B (a failback B -> P, then a new
      failover, ...: cycles P -> B -> P -> B), and every move moves every group of the history
      (several groups per move, named by ``--group`` or by ``--group-regex``).
    * Every fault drawn is healed before the phase ends: a move is only ever attempted with both
      brokers up and both replicators and the checkpoint job running, so "not ready" after a
      move's bound is an anomaly, never an expected outcome.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

PRODUCER_KINDS = ("keyed", "unkeyed", "transactional")
MOVE_KINDS = ("continuous_failover", "cutoff_failover", "disaster_failover", "failback",
              "cutoff_failback")
FAULT_KINDS = (
    "kill9_replicate", "sigterm_replicate", "sigint_replicate_group", "kill9_checkpoint",
    "sigterm_checkpoint", "sigint_checkpoint_group", "sigstop_replicate", "sigstop_broker",
    "broker_restart",
)


@dataclass(frozen=True)
class TopicSpec:
    """A topic created with the same name and partition count on P and on B."""

    name: str
    partitions: int
    producer: str  # one of PRODUCER_KINDS
    rate: float  # records per second while producing
    hot: tuple[tuple[int, ...], ...]  # keyed: the partitions used, stretch after stretch


@dataclass(frozen=True)
class GroupSpec:
    name: str
    protocol: str  # "classic" or "consumer" (KIP-848)
    commit_every: int  # commit after about this many records (1 = every record)
    commit_log_end: bool  # commit consumer.position() (passes markers) instead of last + 1


@dataclass(frozen=True)
class Fault:
    kind: str  # one of FAULT_KINDS
    target: str  # "P->B", "B->P", "checkpoint", a cluster alias, or "P/<topic>/<added>"
    delay_s: float  # after the phase's start (or the previous fault's heal)
    hold_s: float  # stopped/down this long before it is healed


@dataclass(frozen=True)
class Phase:
    """Groups consume on their cluster for ``consume_s`` while ``faults`` happen, then move."""

    consume_s: float
    faults: tuple[Fault, ...]
    move: str  # one of MOVE_KINDS
    source: str
    target: str
    by_regex: bool  # --group-regex instead of --group ...
    catch_up: bool
    producers_follow: bool  # producers move to the target after the move


@dataclass(frozen=True)
class History:
    seed: int
    mode: str  # "alo" (at-least-once) or "eos" (exactly-once)
    prefix: str
    topics: tuple[TopicSpec, ...]
    groups: tuple[GroupSpec, ...]
    phases: tuple[Phase, ...]
    final_consume_s: float
    commit_interval_s: float = 2.0
    notes: dict[str, object] = field(default_factory=dict)
    # ``linger.ms`` in both clusters' properties (offset-ledger's clients only; None: the
    # defaults, 2 ms for the replica producer): a throughput setting that holds every produce,
    # the copy tasks' reports included, that long before it is sent (F24)
    linger_ms: int | None = None

    def describe(self) -> str:
        topics = ", ".join(f"{t.name}[{t.partitions}] {t.producer} {t.rate:g}/s"
                           for t in self.topics)
        groups = ", ".join(f"{g.name} ({g.protocol})" for g in self.groups)
        moves = " ; ".join(
            f"{p.move} {p.source}->{p.target}"
            f"{' regex' if p.by_regex else ''}{' catch-up' if p.catch_up else ''}"
            f" faults[{', '.join(f'{f.kind}:{f.target}' for f in p.faults) or '-'}]"
            for p in self.phases)
        settings = "" if self.linger_ms is None else f"; clusters linger.ms {self.linger_ms}"
        return (f"seed {self.seed} mode {self.mode}: topics {topics}; groups {groups}; "
                f"moves {moves}{settings}")


def _hot_partitions(rng: random.Random, partitions: int) -> tuple[tuple[int, ...], ...]:
    """Stretches of a keyed producer: each uses a few partitions and leaves the others empty."""
    stretches = []
    for _ in range(rng.randint(1, 3)):
        k = rng.randint(1, max(1, partitions // 2))
        stretches.append(tuple(sorted(rng.sample(range(partitions), k))))
    return tuple(stretches)


def _fault(rng: random.Random) -> Fault:
    kind = rng.choice(FAULT_KINDS)
    if "checkpoint" in kind:
        target = "checkpoint"
    elif kind in ("sigstop_broker", "broker_restart"):
        target = rng.choice(("P", "B"))
    else:
        target = rng.choice(("P->B", "B->P"))
    hold = rng.uniform(1.0, 6.0) if kind.startswith("sigstop") else rng.uniform(0.0, 2.0)
    return Fault(kind, target, round(rng.uniform(0.5, 4.0), 2), round(hold, 2))


def generate(seed: int, mode: str) -> History:
    """Draw one history. ``mode``: ``alo`` or ``eos`` (``exactly.once.enabled``)."""
    rng = random.Random(seed)
    # Draws added after the first release come from their own stream, so that a seed's
    # earlier draws (and the suite's fixed seeds) stay what they were.
    later = random.Random(seed * 1_000_003 + 17)
    prefix = f"h{seed}"
    topics = []
    for i in range(rng.randint(1, 3)):
        partitions = rng.choice((1, 1, 2, 3, 3, 4, 6, 8, 12))
        kind = rng.choice(PRODUCER_KINDS)
        topics.append(TopicSpec(f"{prefix}-t{i}", partitions, kind,
                                round(rng.uniform(10, 60), 1), _hot_partitions(rng, partitions)))
    groups = []
    for i in range(rng.randint(1, 3)):
        groups.append(GroupSpec(f"{prefix}-g{i}", rng.choice(("classic", "consumer")),
                                rng.choice((1, 5, 20, 50)), rng.random() < 0.5))
    phases = []
    here, there = "P", "B"
    for _ in range(rng.choice((1, 2, 2, 3))):
        cutoff, disaster = rng.random() < 0.3, rng.random() < 0.2
        if here == "P":
            move = "cutoff_failover" if cutoff else "continuous_failover"
            move = "disaster_failover" if disaster else move
        else:
            move = "cutoff_failback" if cutoff else "failback"
        faults = tuple(_fault(rng) for _ in range(rng.choice((0, 1, 1, 2, 3))))
        if later.random() < 0.25:  # partitions added: "<cluster>/<topic index>/<added>"
            faults += (Fault("add_partitions", f"{later.choice(('P', 'B'))}/"
                             f"{later.randrange(3)}/{later.randint(1, 2)}",
                             round(later.uniform(0.5, 3.0), 2), 0.0),)
        if later.random() < 0.25:  # a log start moved (delete_records): "<cluster>/<topic>"
            faults += (Fault("delete_records", f"{later.choice(('P', 'B'))}/"
                             f"{later.randrange(3)}", round(later.uniform(0.5, 3.0), 2), 0.0),)
        phases.append(Phase(round(rng.uniform(4, 10), 1), faults, move, here, there,
                            rng.random() < 0.5, rng.random() < 0.5, rng.random() < 0.6))
        here, there = there, here
    linger_ms = later.choice((None, None, 100, 1000))
    return History(seed, mode, prefix, tuple(topics), tuple(groups), tuple(phases),
                   round(rng.uniform(2, 5), 1), linger_ms=linger_ms)
