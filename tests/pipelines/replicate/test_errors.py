"""Bad input: a clear error, a non-zero exit, and no ledger rows for work not done."""

from __future__ import annotations

import contextlib
import functools
import io

import pytest

from ledger.config import ConfigError
from ledger.schemas import OFFSET_SYNCS
from ledger.tables import Ledger
from pipelines import cli
from pipelines.devtools.clusters import free_port
from pipelines.edge import kafka_admin
from pipelines.edge.kafka_admin import KafkaAdminError
from pipelines.replicate.job import replicate_once
from pipelines.replicate.topics import MissingSourceTopicError

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def run_cli(*argv: str) -> tuple[int, str]:
    """``offset-ledger ARGV`` in this process: exit code and stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, err.getvalue()


def assert_no_ledger_rows(spark, config) -> None:
    ledger = Ledger(spark, config.ledger_location)
    assert not ledger.exists(OFFSET_SYNCS) or ledger.read(OFFSET_SYNCS).count() == 0


def test_unknown_flow_alias(spark, make_config):
    config = make_config()
    with pytest.raises(ConfigError, match="unknown cluster alias 'X'"):
        replicate_once(spark, config, "P->X")
    code, err = run_cli("replicate", "--flow", "P->X", "--once", "--config", config.path)
    assert code == 2 and "unknown cluster alias 'X'" in err
    assert_no_ledger_rows(spark, config)


def test_unreachable_cluster(spark, make_config, kafka_clusters, monkeypatch):
    # A refused port is refused at once: the classification needs no 10-second metadata wait.
    monkeypatch.setattr(kafka_admin, "check_reachable",
                        functools.partial(kafka_admin.check_reachable, timeout=2.0))
    config = make_config(
        clusters={"P": {"bootstrap.servers": kafka_clusters.bootstrap("P")},
                  "C": {"bootstrap.servers": f"127.0.0.1:{free_port()}"}},
        flows={"P->C": True})
    with pytest.raises(KafkaAdminError, match="cluster C is unreachable"):
        replicate_once(spark, config, "P->C")
    assert_no_ledger_rows(spark, config)


def test_missing_source_topic_named_in_the_allowlist(spark, make_config, unique):
    missing = unique("missing")
    config = make_config(flows={"P->B": {"topics": [missing]}})
    with pytest.raises(MissingSourceTopicError, match=missing):
        replicate_once(spark, config, "P->B")
    assert_no_ledger_rows(spark, config)
