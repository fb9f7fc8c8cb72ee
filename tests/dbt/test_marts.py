"""The dbt project on real Spark and Delta: build (models, data tests, unit tests) and marts.

The reference ledger (tests/dbt/ledger_rows.py) is written once; one ``dbt build`` runs every
model, data test and unit test, and the marts are compared with the scenario's numbers,
including Delta time travel (resume_audit at each operation's versions, --as-of-version).
"""

from __future__ import annotations

import pytest

from pipelines.audit.audit import run_audit
from pipelines.audit.dbt_runner import MARTS, build_marts, read_mart
from tests.dbt.ledger_rows import config_for, reference_ledger

pytestmark = [pytest.mark.spark, pytest.mark.dbt]

UNIT_TESTS = {"forward_translation_edge_cases", "forward_translation_reasons",
              "reverse_translation_edge_cases", "epochs_after_truncation",
              "group_position_is_latest_observation"}


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    info = reference_ledger(spark, str(tmp_path_factory.getbasetemp()))
    result = build_marts(spark, info["ledger"], command="build")
    return info, result, {mart: read_mart(spark, mart) for mart in MARTS}


def by(rows, **where):
    return [r for r in rows if all(r.get(k) == v for k, v in where.items())]


def test_build_runs_models_data_tests_and_unit_tests(built):
    _, result, _ = built
    assert result.success, result.failures
    assert UNIT_TESTS <= set(result.statuses)
    assert {result.statuses[t] for t in UNIT_TESTS} == {"pass"}
    assert set(MARTS) <= set(result.statuses)
    assert not [n for n, s in result.statuses.items() if s in ("error", "fail", "warn")]


def test_translation_marts_on_the_reference_ledger(built):
    _, _, marts = built
    forward = marts["forward_translations"]
    # G's latest commit on P's Payments p0 is 15; runs (.., (12, 10, 3), (15, 13, 5)) -> 13
    (p0,) = by(forward, flow="P->B", group_id="G", partition_id=0)
    assert (p0["source_offset"], p0["target_offset"], p0["status"]) == (15, 13, "translated")
    assert (p0["run_upstream_offset"], p0["run_downstream_offset"], p0["run_length"]) == (
        15, 13, 5)
    (bp,) = by(forward, flow="B->P", group_id="G")
    assert (bp["target_topic"], bp["target_offset"], bp["candidate_kind"]) == (
        "B.Payments", 4, "run_end")
    reverse = marts["reverse_translations"]
    (r0,) = by(reverse, group_id="G", partition_id=0)
    assert (r0["source_cluster"], r0["source_topic"], r0["source_offset"]) == (
        "B", "P.Payments", 13)
    assert (r0["target_cluster"], r0["target_topic"], r0["target_offset"]) == (
        "P", "Payments", 15)


def test_translations_is_both_directions_written_once(built, spark):
    """``translations`` holds every row of the two stable marts, each under its direction,
    and nothing else."""
    _, _, marts = built
    both = read_mart(spark, "translations")
    assert {r["direction"] for r in both} == {"forward", "reverse"}

    def key(row):
        return tuple(sorted((k, str(v)) for k, v in row.items() if k != "direction"))

    for direction in ("forward", "reverse"):
        half = sorted(key(r) for r in both if r["direction"] == direction)
        assert half and half == sorted(key(r) for r in marts[f"{direction}_translations"])


def test_resume_audit_reads_each_operation_at_its_versions(built):
    info, _, marts = built
    audit = marts["resume_audit"]
    assert sorted(r["resume_point_id"] for r in audit) == ["rp-1", "rp-2", "rp-3", "rp-4",
                                                           "rp-5"]
    assert all(r["checkpoint_found"] and r["matches_retranslation"] for r in audit)
    assert all(r["present_at_recorded_version"] for r in audit)
    (failover,) = by(audit, resume_point_id="rp-1")
    assert failover["offset_syncs_version"] == info["syncs_v1"]
    # at the failover's offset_syncs version only (0,0,5) and (5,5,5) existed on p0
    assert (failover["resume_offset"], failover["epoch_run_count"]) == (8, 2)
    assert (failover["run_upstream_offset"], failover["run_downstream_offset"]) == (5, 5)
    (failback,) = by(audit, resume_point_id="rp-3")
    # the run (15, 13, 5) written after the failback is not visible at its version
    assert failback["offset_syncs_version"] == info["syncs_v2"]
    assert (failback["resume_offset"], failback["retranslated_offset"]) == (15, 15)
    assert (failback["epoch_run_count"], failback["run_upstream_offset"]) == (3, 12)
    assert (failback["checkpoint_source_offset"], failback["checkpoint_target_offset"]) == (
        13, 15)


def test_failback_duplicates_avoided(built):
    _, _, marts = built
    rows = marts["failback_duplicates_avoided"]
    (p0,) = by(rows, partition_id=0)
    # read on B below 13: records 0..9 and 12..14; without reverse checkpointing G restarts
    # at 8 on P and re-reads 8, 9, 12, 13, 14; with it, at 15: nothing.
    assert p0["offset_without_reverse_checkpointing"] == 8
    assert p0["offset_with_reverse_checkpointing"] == 15
    assert p0["duplicates_without_reverse_checkpointing"] == 5
    assert p0["duplicates_with_reverse_checkpointing"] == 0
    assert p0["duplicates_avoided"] == 5
    (p1,) = by(rows, partition_id=1)
    assert (p1["duplicates_without_reverse_checkpointing"],
            p1["duplicates_with_reverse_checkpointing"]) == (1, 0)


def test_run_audit_as_of_an_earlier_operations_version(built, spark, tmp_path):
    info, _, _ = built
    config = config_for(info["location"])
    before_failback = info["operations_version"] - 1
    marts = run_audit(spark, config, as_of_version=before_failback, group="G")
    assert {r["operation_id"] for r in marts["resume_audit"]} == {"op-failover"}
    assert marts["failback_duplicates_avoided"] == []
    # group offsets as of then: G had committed 8 on P's Payments p0
    (p0,) = by(marts["forward_translations"], flow="P->B", partition_id=0)
    assert (p0["source_offset"], p0["target_offset"]) == (8, 8)
