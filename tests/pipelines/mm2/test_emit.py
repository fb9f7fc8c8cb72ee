"""``checkpoint`` with ``emit.mm2.checkpoints.enabled``: Java's RemoteClusterUtils gets our offsets.

A small Java program (single-file launch against MM2's client jar) calls
``RemoteClusterUtils.translateOffsets``, exactly as a Java consumer of MM2 would, and must print
exactly what ``offset-ledger translate`` prints.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pipelines import cli
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.mm2 import formats
from pipelines.mm2.ingest import Source, read_topic
from pipelines.replicate.job import replicate_once
from pipelines.spark import jars_dir

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]

JAVA = Path(__file__).with_name("TranslateOffsets.java")


def java_translate(bootstrap: str, alias: str, group: str) -> dict[tuple[str, int], int]:
    proc = subprocess.run(
        ["java", "-cp", f"{jars_dir('mm2')}/*", str(JAVA), bootstrap, alias, group],
        capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = {}
    for line in proc.stdout.splitlines():
        topic, partition, offset = line.split("\t")
        out[(topic, int(partition))] = int(offset)
    return out


def test_remote_cluster_utils_reads_our_exact_checkpoints(spark, make_config, unique, capsys):
    config = make_config(flows={"P->B": {"topics": ["emt-.*"]}, "B->P": {"topics": ["emt-.*"]}},
                         emit={"mm2": {"checkpoints": {"enabled": True}}})
    assert config.emit_mm2_checkpoints
    topic, group = unique("emt-topic"), unique("emt-group")
    kafka_admin.create_topic(config.cluster("P"), topic, 2)
    produce(config.cluster("P"), topic, [f"v{i}" for i in range(40)], 2)
    replicate_once(spark, config, "P->B")
    consume(config.cluster("P"), group, [topic], limit=15)
    committed = kafka_offsets.list_offsets(config.cluster("P"), "committed", group=group)

    assert cli.main(["checkpoint", "--flow", "P->B", "--once", "--group", group,
                     "--config", config.path]) == 0
    capsys.readouterr()
    assert cli.main(["translate", "--group", group, "--from", "P", "--to", "B",
                     "--format", "json", "--config", config.path]) == 0
    ours = {(r["target_topic"], r["partition"]): r["offset"]
            for r in json.loads(capsys.readouterr().out)}
    assert len(ours) == len(committed) and all(v is not None for v in ours.values())

    # The records are MM2's wire format, in the topic MM2's checkpoint connector writes.
    records, _ = read_topic(Source(config.cluster("B"), "P.checkpoints.internal"), None)
    decoded = [formats.decode_checkpoint(r.key, r.value) for r in records]
    assert {(c.topic, c.partition): c.downstream_offset for c in decoded
            if c.group == group} == ours

    assert java_translate(config.cluster("B").bootstrap_servers, "P", group) == ours
