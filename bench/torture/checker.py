"""The independent checker: judges one history from what the clusters hold, what the groups
read and committed, the ledger's runs as stored, and the outputs and exits of every job.

Anomaly kinds (each a count per history, with details):
    lost             a record committed on a source never processed by a group that moved
    duplicate        a record processed twice by a group with no duplicate copy in a replica
                     to explain it (documented bound: 0 with reverse checkpointing; after a
                     disaster failover, what the group processed on P whose copy on B lies
                     at or after the resume point written there: README, disaster), or
                     duplicate copies in a replica above the documented bound: 0 exactly-once
                     (read_committed), at-least-once one commit interval of the flow's records
                     per crash of the replicator (kill -9, SIGINT to its group, broker fault)
    aborted_read     a read_committed reader (a group, or the checker on a replica) saw a copy
                     of a record whose source transaction aborted
    out_of_order     within one partition a group read a record before one written earlier
    bad_run          a run maps u+k to a replica record that is not the copy of record u+k, or
                     to an aborted copy; runs overlap; or they leave a hole where the source has
                     committed records (the tail included, once replication caught up)
    not_ready        a move refused or waited out its bound although every fault was healed;
                     replication not caught up within the bound after the faults stopped
    status_disagrees status said ready and the move said not ready (exit 3) or could not
                     translate (exit 4), or status never said ready and the move succeeded
    silent_exit      a job or verb exited nonzero (not by our kill -9) without an error: line
    traceback        a Python traceback in any job's or verb's output
    job_died         a long-running job ended by itself (it must outlive transient faults)
    unclean_stop     SIGTERM or SIGINT did not end a job with exit 0
"""

from __future__ import annotations

import signal
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from bench.torture.faults import Exit
from bench.torture.ops import Call
from bench.torture.readers import (
    Run,
    end_offsets,
    read_resume_points,
    read_runs,
    read_topic,
)
from bench.torture.workload import Read, record_n

KINDS = ("lost", "duplicate", "aborted_read", "out_of_order", "bad_run", "not_ready",
         "status_disagrees", "silent_exit", "traceback", "job_died", "unclean_stop")
CRASH_FAULTS = ("kill9_replicate", "sigint_replicate_group", "sigstop_broker",
                "broker_restart")


@dataclass
class Evidence:
    """Everything the run of a history hands to the checker."""

    topics: list[str]
    bootstraps: dict[str, str]
    ledger: Path
    mode: str
    commit_interval_s: float
    rate: float  # records/s of all producers together
    reads: dict[str, list[list[Read]]]  # group -> its sessions' reads, in order
    processed: dict[str, list[Read]]  # group -> what it read and committed past
    faults: list[tuple[str, str]]  # (kind, target)
    exits: list[Exit]
    calls: list[Call]
    readiness: list[str] = field(default_factory=list)  # not_ready / disagreement details
    # (group, operation id, the group's commits on P when P was killed) per disaster failover
    disasters: list[tuple[str, str, dict[tuple[str, int], int]]] = field(default_factory=list)


@dataclass
class Report:
    anomalies: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    details: list[str] = field(default_factory=list)
    produced: int = 0
    aborted: int = 0

    def add(self, kind: str, detail: str, count: int = 1) -> None:
        self.anomalies[kind] += count
        self.details.append(f"{kind}: {detail}")


def committed_ids(bootstraps: dict[str, str], topics: list[str]) -> set[str]:
    """Every record committed on an original topic (either cluster): what each group must
    have processed once at the end."""
    return {i for alias in ("P", "B") for topic in topics
            for part in read_topic(bootstraps[alias], topic, committed=True).values()
            for i in part.values()}


def check(ev: Evidence) -> Report:
    rep = Report()
    other = {"P": "B", "B": "P"}
    committed: dict[str, set[str]] = {}
    aborted: set[str] = set()
    source: dict[tuple[str, str], dict[int, dict[int, str]]] = {}
    for alias in ("P", "B"):
        for topic in ev.topics:
            every = read_topic(ev.bootstraps[alias], topic, committed=False)
            good = read_topic(ev.bootstraps[alias], topic, committed=True)
            source[(alias, topic)] = every
            ids = {i for part in good.values() for i in part.values()}
            committed[f"{alias}:{topic}"] = ids
            aborted |= {i for part in every.values() for i in part.values()} - ids
    expected = set().union(*committed.values())
    rep.produced, rep.aborted = len(expected), len(aborted)
    replica_dups: set[str] = set()
    on_p: dict[str, dict[int, dict[int, str]]] = {t: source[("P", t)] for t in ev.topics}
    on_b: dict[str, dict[int, dict[int, str]]] = {t: source[("B", t)] for t in ev.topics}
    runs = read_runs(ev.ledger)
    for alias in ("P", "B"):
        flow = f"{alias}->{other[alias]}"
        extra = 0
        for topic in ev.topics:
            target = ev.bootstraps[other[alias]]
            every = read_topic(target, f"{alias}.{topic}", committed=False)
            good = read_topic(target, f"{alias}.{topic}", committed=True)
            (on_p if other[alias] == "P" else on_b)[f"{alias}.{topic}"] = every
            counts = Counter(i for part in good.values() for i in part.values())
            replica_dups |= {i for i, c in counts.items() if c > 1}
            extra += sum(c - 1 for c in counts.values())
            seen_aborted = set(counts) & aborted
            if seen_aborted:
                rep.add("aborted_read", f"replica {alias}.{topic} on {other[alias]} holds "
                        f"{len(seen_aborted)} aborted record(s) for read_committed readers, "
                        f"e.g. {sorted(seen_aborted)[:3]}", len(seen_aborted))
            starts = {p: o for (_, p), o in
                      end_offsets(ev.bootstraps[alias], [topic], low=True).items()}
            _check_runs(rep, flow, topic, [r for r in runs if r.flow == flow and
                                           r.topic == topic],
                        source[(alias, topic)], every, good, committed[f"{alias}:{topic}"],
                        starts)
        crashes = sum(1 for kind, target in ev.faults if kind in CRASH_FAULTS and
                      target in (flow, "P", "B"))
        bound = 0 if ev.mode == "eos" else int(crashes * ev.rate * ev.commit_interval_s)
        if extra > bound:
            rep.add("duplicate", f"{flow}: {extra} duplicate copies visible to read_committed "
                    f"readers, bound {bound} ({ev.mode}, {crashes} crash(es))", extra - bound)
    for group, processed in ev.processed.items():
        allowed = replica_dups | _disaster_rereads(ev, group, on_b)
        _check_group(rep, group, processed, ev.reads[group], expected, aborted, allowed)
    for detail in ev.readiness:
        kind, _, text = detail.partition(": ")
        rep.add(kind, text)
    _check_outputs(rep, ev)
    return rep


def _disaster_rereads(ev: Evidence, group: str,
                      on_b: dict[str, dict[int, dict[int, str]]]) -> set[str]:
    """The documented re-reads of a disaster failover (README, "Failover on disaster": only
    what was replicated, and recorded by ``checkpoint``, before P died can be resumed from):
    every record the group processed on P below its real commit when P died whose copy on B
    lies at or after the offset the failover wrote there (``resume_points``; a partition with
    no row, as ``--allow-untranslatable`` leaves it, from its log start)."""
    ids: set[str] = set()
    for g, operation, committed in ev.disasters:
        if g != group:
            continue
        # from the group's own reads (a log start moved later may have deleted them on P)
        below = {r.rid for r in ev.processed.get(group, []) if r.cluster == "P"
                 and r.offset < committed.get((r.topic, r.partition), 0)}
        resume = {(r["topic"], r["partition"]): r["offset"]
                  for r in read_resume_points(ev.ledger, operation) if r["cluster"] == "B"}
        for topic, parts in on_b.items():
            for part, records in parts.items():
                start = resume.get((topic, part), 0)
                ids |= {i for o, i in records.items() if o >= start and i in below}
    return ids


def _check_runs(rep: Report, flow: str, topic: str, runs: list[Run],
                src: dict[int, dict[int, str]], every: dict[int, dict[int, str]],
                good: dict[int, dict[int, str]], committed: set[str],
                starts: dict[int, int] | None = None) -> None:
    """``starts``: each source partition's log start (records below it were deleted: the
    runs' mapping of them can no longer be checked, and they are no hole)."""
    by_part: dict[int, list[Run]] = defaultdict(list)
    for r in runs:
        by_part[r.partition].append(r)
    for part, records in src.items():
        prs = sorted(by_part.get(part, []), key=lambda r: r.u)
        where = f"{flow} {topic}[{part}]"
        start = (starts or {}).get(part, 0)
        for r in prs:
            for k in range(max(0, start - r.u), r.n):
                want = records.get(r.u + k)
                got = every.get(part, {}).get(r.d + k)
                if want is None or got != want or (r.d + k) not in good.get(part, {}):
                    rep.add("bad_run", f"{where} run u={r.u} d={r.d} n={r.n}: upstream "
                            f"{r.u + k} is {want}, downstream {r.d + k} is {got}"
                            f"{'' if (r.d + k) in good.get(part, {}) else ' (not committed)'}")
                    break
        end, floor = min([*records, start]) if records else start, 0
        for r in prs:
            if r.u < floor:
                rep.add("bad_run", f"{where}: run u={r.u} n={r.n} overlaps upstream below {floor}")
            hole = [o for o in range(end, r.u) if records.get(o) in committed]
            if hole:
                rep.add("bad_run", f"{where}: hole {end}..{r.u - 1} holds {len(hole)} "
                        f"committed record(s) no run maps")
            end = max(end, r.u + r.n)
            floor = max(floor, r.u + r.n)
        tail = [o for o in records if o >= end and records[o] in committed]
        if tail:
            rep.add("bad_run", f"{where}: {len(tail)} committed record(s) from offset "
                    f"{min(tail)} never covered by a run (after replication caught up)")


def _check_group(rep: Report, group: str, processed: list[Read], sessions: list[list[Read]],
                 expected: set[str], aborted: set[str], replica_dups: set[str]) -> None:
    counts = Counter(r.rid for r in processed)
    missing = expected - set(counts)
    if missing:
        rep.add("lost", f"group {group}: {len(missing)} committed record(s) never processed, "
                f"e.g. {sorted(missing, key=record_n)[:5]}", len(missing))
    twice = {i: c for i, c in counts.items() if c > 1 and i not in replica_dups}
    if twice:
        where = [(r.cluster, r.topic, r.partition, r.offset) for r in processed
                 if r.rid in twice][:6]
        rep.add("duplicate", f"group {group}: {len(twice)} record(s) processed twice, e.g. "
                f"{sorted(twice, key=record_n)[:5]} at {where}",
                sum(c - 1 for c in twice.values()))
    bad = {r.rid for s in sessions for r in s if r.rid in aborted}
    if bad:
        rep.add("aborted_read", f"group {group} read {len(bad)} aborted record(s), e.g. "
                f"{sorted(bad)[:3]}", len(bad))
    seen: set[str] = set()
    for session in sessions:
        last: dict[tuple[str, str, int], int] = {}
        for r in session:
            key = (r.cluster, r.topic, r.partition)
            n = record_n(r.rid)
            if n <= last.get(key, -1) and r.rid not in seen:
                rep.add("out_of_order", f"group {group} read {r.rid} at {key} offset "
                        f"{r.offset} after n={last[key]}")
            last[key] = max(n, last.get(key, -1))
            seen.add(r.rid)


def _check_outputs(rep: Report, ev: Evidence) -> None:
    for ended in ev.exits:
        text = Path(ended.log).read_bytes()[ended.log_from:].decode(errors="replace")
        tail = " | ".join(text.strip().splitlines()[-4:])[-600:]
        errors = [line for line in text.splitlines() if line.startswith("error:")]
        has_error = bool(errors)
        said = errors[0][:400] if errors else tail
        # docs/jobs.md: replicate exits 1 when it stops after refusing a topic (that topic's
        # refusal is judged by its runs and readiness, not as a second anomaly here).
        refused = ended.returncode == 1 and all(e.startswith("error: topic ") for e in errors)
        if ended.signal_sent is None:
            rep.add("job_died", f"{ended.job} exited by itself, rc {ended.returncode}: {said}")
        elif ended.signal_sent in ("SIGTERM", "SIGINT") and ended.returncode != 0 \
                and ended.job.startswith("replicate") and not (refused and has_error):
            # docs/jobs.md: a continuous replicate stops on SIGTERM or SIGINT after recording
            # what it copied, exit 0. (checkpoint promises nothing: ended by the signal's
            # default action, -15/-2, is no anomaly; a traceback still is.)
            rep.add("unclean_stop", f"{ended.job} after {ended.signal_sent}: rc "
                    f"{ended.returncode}: {said}")
        sent = getattr(signal, ended.signal_sent or "SIGKILL")
        # killed by the signal we sent, or exited 128 + its number (a shell's convention)
        if ended.returncode not in (0, -9, -sent, 128 + sent) and not has_error:
            rep.add("silent_exit", f"{ended.job} rc {ended.returncode} without an error: line: "
                    f"{tail}")
    for call in ev.calls:
        text = call.stdout + call.stderr
        if call.returncode != 0 and not (call.verb == "status" and call.returncode == 3) \
                and not any(ln.startswith("error:") for ln in call.stderr.splitlines()):
            rep.add("silent_exit", f"{' '.join(call.argv[1:-2])} rc {call.returncode}: "
                    f"{' | '.join(text.strip().splitlines()[-3:])[-400:]}")
        if "Traceback (most recent call last)" in text:
            rep.add("traceback", f"{' '.join(call.argv[1:-2])}: "
                    f"{' | '.join(text.strip().splitlines()[-2:])[-400:]}")
    logs = {e.log for e in ev.exits}
    for log in logs:
        text = Path(log).read_text(errors="replace")
        if "Traceback (most recent call last)" in text:
            rep.add("traceback", f"{Path(log).name}: traceback(s): {text.count('Traceback (')}")
