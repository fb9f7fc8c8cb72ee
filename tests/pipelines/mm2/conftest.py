"""A real MirrorMaker 2 replicating P->B on the session's embedded clusters, per test module."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ledger.config import config_from_mapping
from tests.pipelines.mm2.mm2_process import MirrorMaker2, mm2_properties, new_run_id

TOPICS = "mm2t-.*"
GROUPS = "mm2g-.*"


@pytest.fixture(scope="module")
def mm2(kafka_clusters, tmp_path_factory):
    """MM2 with P->B enabled for ``mm2t-.*`` topics and ``mm2g-.*`` groups; SIGTERM at the end."""
    workdir = tmp_path_factory.mktemp("mm2")
    props = mm2_properties(kafka_clusters.bootstrap("P"), kafka_clusters.bootstrap("B"),
                           topics=TOPICS, groups=GROUPS, run_id=new_run_id())
    process = MirrorMaker2(workdir, props)
    try:
        yield process.start()
    finally:
        process.stop()


@pytest.fixture
def mm2_config(tmp_path: Path, kafka_clusters):
    """offset-ledger's configuration beside that MM2: both flows, reverse checkpointing of
    ``P.mm2t-*`` on B (failback), a fresh ledger."""
    raw = {
        "clusters": {a: {"bootstrap.servers": kafka_clusters.bootstrap(a)} for a in ("P", "B")},
        "flows": {"P->B": {"topics": [TOPICS]},
                  "B->P": {"topics": [TOPICS], "reverse.checkpointed.topics": ["P.mm2t-.*"]}},
        "ledger": {"location": str(tmp_path / "ledger")},
        "embedded": {"data.dir": str(kafka_clusters.data_dir)},
    }
    path = tmp_path / "offset-ledger.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config_from_mapping(raw, path=str(path))
