"""The moves of a history: ``status`` polled, then ``failover``/``failback`` (continuous,
cutoff, or disaster), each outcome kept as evidence for the checker.

Invariants:
    * ``status`` is polled before every controlled move (``--groups-only`` for a continuous
      one) for at most ``STATUS_BOUND_S``; the move then runs with ``--timeout MOVE_TIMEOUT_S``.
      Their two verdicts are compared: ready/not ready the other way round is
      ``status_disagrees``; a move that fails after status said nothing or not ready within the
      bound is ``not_ready``.
    * A disaster stops the producers (what they wrote is acknowledged on P's disk), records each
      group's real commits on P, kills P's broker, moves with ``--disaster`` (never
      ``--group-regex``: P cannot be asked), then starts P again on its data. A move refused
      because P died before any commit of a group was recorded (the checker's own read of
      ``group_offsets`` agrees) is the documented answer, not ``not_ready``.
    * A failed move leaves the groups where they were; the history goes on from there.
"""

from __future__ import annotations

import json
import time

from bench.torture import ops
from bench.torture.readers import groups_with_recorded_commits
from bench.torture.workload import committed_offsets

MOVE_TIMEOUT_S = 90  # a move's --timeout once every fault is healed
STATUS_BOUND_S = 60  # how long status may say "not ready" before a move


class Moves:
    """Mixed into :class:`bench.torture.run.HistoryRun` (its state: config, calls, counts)."""

    def move(self, phase) -> bool:
        """Status until ready (bounded), then the move; True if the groups moved."""
        groups = [g.name for g in self.h.groups]
        flow = f"{phase.source}->{phase.target}"
        cutoff = phase.move.startswith("cutoff")
        named = [a for g in groups for a in ("--group", g)]
        status_argv = ["--flow", flow, *named, "--format", "json"]
        if not cutoff:
            status_argv.append("--groups-only")
        self.count(self.operations, "status")
        started = time.monotonic()
        status = ops.wait_status(status_argv, self.config, self.workdir, STATUS_BOUND_S,
                                 self.calls)
        status_ready = status.returncode == 0
        verb = "failover" if "failover" in phase.move else "failback"
        select = ["--group-regex", f"{self.h.prefix}-g.*"] if phase.by_regex else named
        argv = [verb, *select, "--from", phase.source, "--to", phase.target,
                "--timeout", str(MOVE_TIMEOUT_S), "--format", "json"]
        if phase.catch_up:
            argv.append("--catch-up")
        if cutoff:
            argv.append("--cutoff")
        call = ops.cli(argv, self.config, self.workdir, timeout=MOVE_TIMEOUT_S + 120)
        self.calls.append(call)
        self.count(self.operations, phase.move)
        last = " | ".join((call.stdout + call.stderr).strip().splitlines()[-2:])[-300:]
        waited = f"status {'ready' if status_ready else 'not ready'} after " \
                 f"{time.monotonic() - started - call.seconds:.0f}s"
        if call.returncode == 0 and not status_ready:
            self.readiness.append(f"status_disagrees: {verb} {flow} ready, {waited}: "
                                  f"{status.stdout[-300:]}")
        elif call.returncode in (3, 4) and status_ready:  # not ready / cannot translate
            self.readiness.append(f"status_disagrees: {waited}, {verb} {flow} rc "
                                  f"{call.returncode}: {last}")
        elif call.returncode != 0:
            self.readiness.append(f"not_ready: {verb} {flow} rc {call.returncode} ({waited}): "
                                  f"{last}")
        return call.returncode == 0

    def disaster(self, phase) -> str:
        """P's broker killed (its producers stopped first: what they wrote is on P's disk);
        ``failover --disaster`` from the commits ``checkpoint`` recorded; P started again."""
        groups = [g.name for g in self.h.groups]
        for p in self.producers:
            p.move_to(None)
        at_disaster = {g: committed_offsets(self.bootstraps["P"], g) for g in groups}
        self.clusters.stop("P", hard=True)
        self.count(self.faults, "disaster_kill_P")
        recorded = groups_with_recorded_commits(self.workdir / "ledger", "P")
        unrecorded = [g for g in groups if g not in recorded]
        self.count(self.operations, "status")
        self.calls.append(ops.cli(["status", "--flow", "P->B", "--format", "json"],
                                  self.config, self.workdir))
        named = [a for g in groups for a in ("--group", g)]
        argv = ["failover", *named, "--from", "P", "--to", "B", "--disaster", "--timeout",
                str(MOVE_TIMEOUT_S), "--format", "json"]
        call = ops.cli(argv, self.config, self.workdir, timeout=MOVE_TIMEOUT_S + 120)
        self.calls.append(call)
        self.count(self.operations, phase.move)
        if call.returncode == 4:
            # Documented for a disaster: a commit on a partition never replicated before P
            # died cannot be translated (exit 4, nothing written); the runbook's answer is
            # --allow-untranslatable (those partitions then start at their log start on B).
            self.count(self.operations, "disaster_allow_untranslatable")
            call = ops.cli([*argv, "--allow-untranslatable"], self.config, self.workdir,
                           timeout=MOVE_TIMEOUT_S + 120)
            self.calls.append(call)
        self.clusters.up()
        refused = f"error: group(s) {', '.join(unrecorded)} have no committed offsets on P " \
                  f"recorded in the ledger"
        if call.returncode == 2 and unrecorded and refused in call.stderr:
            # The documented answer, never a guess: P died before any commit of these groups
            # was recorded (the checker's own read of group_offsets says so). The move is not
            # made; the history goes on from P.
            self.count(self.operations, "disaster_refused_unrecorded_group")
        elif call.returncode != 0:
            last = " | ".join((call.stdout + call.stderr).strip().splitlines()[-2:])[-300:]
            self.readiness.append(f"not_ready: failover --disaster rc {call.returncode}: {last}")
        if call.returncode != 0:
            for p in self.producers:
                p.move_to("P")
            return "P"
        doc = json.loads(call.stdout)
        for op in doc.get("operations", [doc]):
            self.disasters.append((op["group"], op["operation_id"], at_disaster[op["group"]]))
        for p in self.producers:
            p.move_to("B")
        return "B"
