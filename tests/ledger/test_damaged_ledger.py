"""A damaged ledger is one clear error on every verb that reads it, and nothing is written.

Two damages, each on a copy of a real ledger (so no Delta state cached in the session applies):
the first commit file of ``offset_syncs`` deleted, and every data file of ``offset_syncs``
truncated. Each verb must exit 2 with one ``error:`` line naming the table and what to do, no
Java stack trace, and no table may gain a Delta version.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ledger.schemas import OFFSET_SYNCS, SCHEMAS
from pipelines import cli
from pipelines.devtools.workload import consume, produce
from pipelines.edge import kafka_admin, kafka_offsets
from pipelines.replicate.job import replicate_once

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]
def _delete_first_commit(table: Path) -> None:
    (table / "_delta_log" / "00000000000000000000.json").unlink()


def _truncate_data_files(table: Path) -> None:
    files = list(table.glob("*.parquet"))
    assert files, "the ledger under test has data files"
    for f in files:
        with f.open("r+b") as fh:
            fh.truncate(100)


DAMAGES = {"first commit deleted": _delete_first_commit,
           "data files truncated": _truncate_data_files}


@pytest.fixture(scope="module")
def healthy(spark, kafka_clusters, tmp_path_factory):
    """A ledger with runs for a replicated topic and a group that committed on P."""
    import uuid

    import yaml

    from ledger.config import config_from_mapping

    base = tmp_path_factory.mktemp("damaged")
    raw = {
        "clusters": {a: {"bootstrap.servers": kafka_clusters.bootstrap(a)} for a in ("P", "B")},
        "flows": {"P->B": {"topics": ["dmg-.*"]}, "B->P": {"topics": ["dmg-.*"]}},
        "ledger": {"location": str(base / "ledger")},
        "embedded": {"data.dir": str(kafka_clusters.data_dir)},
    }
    path = base / "offset-ledger.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    config = config_from_mapping(raw, path=str(path))
    topic, group = f"dmg-{uuid.uuid4().hex[:8]}", f"dmg-g-{uuid.uuid4().hex[:8]}"
    kafka_admin.create_topic(config.cluster("P"), topic, 2)
    produce(config.cluster("P"), topic, [f"v{i}" for i in range(40)], 2)
    consume(config.cluster("P"), group, [topic], limit=15)
    replicate_once(spark, config, "P->B")
    return config, group, base


def _versions(ledger: Path) -> dict[str, int]:
    return {name: len(list((ledger / name / "_delta_log").glob("*.json"))) for name in SCHEMAS}


VERBS = {
    "translate": lambda g: ["translate", "--group", g, "--from", "P", "--to", "B"],
    "failover": lambda g: ["failover", "--group", g, "--from", "P", "--to", "B"],
    "checkpoint": lambda g: ["checkpoint", "--flow", "P->B", "--once", "--group", g],
    "ledger status": lambda g: ["ledger", "status"],
    # Plans from the ledger without a JVM when it can; a damaged table is left to Spark.
    "replicate --once": lambda g: ["replicate", "--flow", "P->B", "--once"],
}


# `ledger status` counts rows from the Delta log's statistics and reads no data file, so only a
# damaged log concerns it.
CASES = [(verb, damage) for verb in VERBS for damage in DAMAGES
         if not (verb == "ledger status" and damage == "data files truncated")]


@pytest.mark.parametrize(("verb", "damage"), CASES)
def test_damaged_offset_syncs_is_one_clear_error(healthy, damage, verb, capfd, tmp_path):
    config, group, _ = healthy
    copy = tmp_path / "ledger"
    shutil.copytree(config.ledger_location, copy)
    DAMAGES[damage](copy / OFFSET_SYNCS)
    before = _versions(copy)
    capfd.readouterr()

    code = cli.main([*VERBS[verb](group), "--config", config.path,
                     "--ledger-location", str(copy)])

    err = capfd.readouterr().err
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert f"ledger table {OFFSET_SYNCS} at {copy} is damaged" in errors[0]
    assert "RESTORE" in errors[0]
    assert "\tat org.apache" not in err and "Traceback" not in err
    assert _versions(copy) == before
    assert kafka_offsets.list_offsets(config.cluster("B"), "committed", group=group) == {}
