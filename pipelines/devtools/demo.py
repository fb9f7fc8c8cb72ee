"""``offset-ledger demo``: the reference failover/failback scenario on the embedded clusters.

Phases (real producers and consumers, every record counted by (origin, key, value))::

    1. produce N to P:Payments; G consumes part of it on P and stops
    2. failover P->B: G resumes on B from P.Payments (+ Payments on B)
    3. producers move to B: produce M to B:Payments; G consumes on B and stops
    4. failback B->P: reverse-checkpoint P.Payments -> P:Payments, forward B:Payments ->
       P:B.Payments; G resumes on P and reads to the end
    5. numbers: produced, consumed per phase, lost, read twice, duplicates avoided

A control group C follows exactly G's consumption but fails back with a configuration without
reverse-checkpointed topics: what it reads twice is what reverse checkpointing avoided.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient

from ledger.config import Config, FlowConfig
from ledger.tables import Ledger
from pipelines.devtools.clusters import EmbeddedClusters
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin

TOPIC = "Payments"


@dataclass
class ScenarioNumbers:
    produced_on_primary: int = 0
    produced_on_backup: int = 0
    consumed_before_failover: int = 0
    consumed_after_failover: int = 0
    consumed_after_failback: int = 0
    lost: int = 0
    read_twice: int = 0
    read_twice_without_reverse_checkpointing: int = 0
    duplicates_avoided: int = 0
    failover_seconds_to_ready: float = 0.0
    failback_seconds_to_ready: float = 0.0
    failover_operation: str = ""
    failback_operation: str = ""
    subscribe_after_failover: list[str] = field(default_factory=list)
    subscribe_after_failback: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"{k.replace('_', ' '):42} {v}" for k, v in dataclasses.asdict(self).items()]


def without_reverse_checkpointing(config: Config) -> Config:
    flows = tuple(dataclasses.replace(f, reverse_checkpointed_topics=()) for f in config.flows)
    return dataclasses.replace(config, flows=flows)


def with_reverse_checkpointing(config: Config) -> Config:
    """The scenario needs P.Payments reverse-checkpointed on B->P; add it if missing."""
    sep = config.replication_policy_separator
    flows: list[FlowConfig] = []
    for f in config.flows:
        if (f.source, f.target) == ("B", "P") and f"P{sep}{TOPIC}" not in \
                f.reverse_checkpointed_topics:
            f = dataclasses.replace(f, reverse_checkpointed_topics=(
                *f.reverse_checkpointed_topics, f"P{sep}{TOPIC}"))
        flows.append(f)
    return dataclasses.replace(config, flows=tuple(flows))


def reset(config: Config) -> None:
    """Fresh topics and ledger for a repeatable run (embedded demo clusters only)."""
    sep = config.replication_policy_separator
    for alias, topics in (("P", [TOPIC, f"B{sep}{TOPIC}"]), ("B", [TOPIC, f"P{sep}{TOPIC}"])):
        cluster = config.cluster(alias)
        present = [t for t in topics if t in kafka_admin.list_topics(cluster)]
        if present:
            client = AdminClient(cluster.client_config())
            for future in client.delete_topics(present, operation_timeout=30).values():
                future.result(30)
            deadline = time.monotonic() + 30
            while any(t in kafka_admin.list_topics(cluster) for t in present):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topics {present} still exist on {alias}")
                time.sleep(0.2)
    location = config.ledger_location
    if "://" not in location and Path(location).is_absolute():
        shutil.rmtree(location, ignore_errors=True)


def run_scenario(spark, config: Config, primary_records: int = 3000,
                 backup_records: int = 2000, log=print) -> ScenarioNumbers:
    """Run the reference scenario end to end; return the counted numbers."""
    from pipelines.failover.mover import Mover
    from pipelines.replicate.job import replicate_once
    from pipelines.spark import ledger_engine

    config = with_reverse_checkpointing(config)
    control_config = without_reverse_checkpointing(config)
    sep = config.replication_policy_separator
    run = uuid.uuid4().hex[:6]
    group, control = f"G-{run}", f"C-{run}"
    n = ScenarioNumbers()
    Ledger(spark, config.ledger_location).init()
    for alias in ("P", "B"):
        kafka_admin.create_topic(config.cluster(alias), TOPIC, 3)

    def replicate_both() -> None:
        for flow in ("P->B", "B->P"):
            replicate_once(spark, config, flow)

    log(f"1. producing {primary_records} records to P:{TOPIC}; {group} consumes part of them")
    p_values = [f"P{run}-{i:06d}" for i in range(primary_records)]
    produce(config.cluster("P"), TOPIC, p_values, 3)
    n.produced_on_primary = len(p_values)
    first = primary_records * 3 // 5
    seen = {g: consume(config.cluster("P"), g, [TOPIC], limit=first) for g in (group, control)}
    n.consumed_before_failover = len(seen[group])
    replicate_both()

    log(f"2. failover {group} P -> B")
    # As `offset-ledger failover` moves groups: delta-rs on a path ledger (ledger.engine).
    mover = Mover(ledger_engine(config.ledger_location, "offset-ledger-demo"), config)
    control_mover = Mover(ledger_engine(config.ledger_location, "offset-ledger-demo"),
                          control_config)
    over = mover.move("failover", group, "P", "B")
    control_mover.move("failover", control, "P", "B")
    n.failover_seconds_to_ready = round(over.seconds_to_ready, 2)
    n.failover_operation, n.subscribe_after_failover = over.operation_id, over.subscribe
    log(f"   subscribe on B: {', '.join(over.subscribe)}; ready in {over.seconds_to_ready:.2f}s "
        f"(consumers stopped -> offsets written, ledger through {mover.engine.name})")

    log(f"3. producers move to B: {backup_records} records to B:{TOPIC}; {group} consumes on B")
    backup = config.cluster("B")
    on_b: dict[str, list] = {g: consume(backup, g, over.subscribe) for g in (group, control)}
    b_values = [f"B{run}-{i:06d}" for i in range(backup_records)]
    produce(config.cluster("B"), TOPIC, b_values, 3)
    n.produced_on_backup = len(b_values)
    more = backup_records // 2
    for g in (group, control):
        on_b[g] += consume(config.cluster("B"), g, over.subscribe, limit=more)
    n.consumed_after_failover = len(on_b[group])
    replicate_both()

    log(f"4. failback {group} B -> P (reverse checkpointing {TOPIC} from P{sep}{TOPIC})")
    back = mover.move("failback", group, "B", "P")
    control_mover.move("failback", control, "B", "P")
    n.failback_seconds_to_ready = round(back.seconds_to_ready, 2)
    n.failback_operation, n.subscribe_after_failback = back.operation_id, back.subscribe
    log(f"   subscribe on P: {', '.join(back.subscribe)}; ready in {back.seconds_to_ready:.2f}s "
        f"(consumers stopped -> offsets written, ledger through {mover.engine.name})")
    after = {g: consume(config.cluster("P"), g, back.subscribe) for g in (group, control)}
    n.consumed_after_failback = len(after[group])

    produced = set(p_values) | set(b_values)
    for g in (group, control):
        values = Counter(v for _, v in seen[g] + on_b[g] + after[g])
        lost = len(produced - set(values))
        twice = sum(c - 1 for c in values.values() if c > 1)
        if g == group:
            n.lost, n.read_twice = lost, twice
        else:
            n.read_twice_without_reverse_checkpointing = twice
    n.duplicates_avoided = n.read_twice_without_reverse_checkpointing - n.read_twice
    return n


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--primary-records", type=int, default=3000)
    parser.add_argument("--backup-records", type=int, default=2000)
    parser.add_argument("--keep", action="store_true",
                        help="keep existing topics and ledger (default: start fresh)")
    parser.add_argument("--down", action="store_true", help="stop the clusters at the end")
    parser.add_argument("--format", choices=["table", "json"], default="table")


def run(args: argparse.Namespace, config: Config) -> int:
    from pipelines.spark import get_spark

    clusters = EmbeddedClusters(config)
    print("starting the embedded clusters ...")
    for alias, bootstrap in clusters.up().items():
        print(f"  {alias}: {bootstrap} (pid {clusters.pid(alias)})")
    try:
        if not args.keep:
            reset(config)
        spark = get_spark("offset-ledger-demo")
        ledger = Ledger(spark, config.ledger_location)
        for name, created in ledger.init().items():
            print(f"  ledger table {ledger.identifier(name)}{' (created)' if created else ''}")
        numbers = run_scenario(spark, config, args.primary_records, args.backup_records)
        if args.format == "json":
            print(json.dumps(dataclasses.asdict(numbers), indent=2))
        else:
            print("\nreference scenario:")
            print("\n".join("  " + line for line in numbers.lines()))
            print("\naudit it: offset-ledger audit; stop the clusters: offset-ledger clusters down")
        return 0 if numbers.lost == 0 and numbers.read_twice == 0 else 1
    finally:
        if args.down:
            clusters.down()
