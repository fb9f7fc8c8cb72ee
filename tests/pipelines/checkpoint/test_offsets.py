"""The startingOffsets JSON shape of ``translate --offsets`` (pure: no Spark, no Kafka)."""

from __future__ import annotations

import pytest

from ledger.records import CheckpointRecord
from pipelines.checkpoint import offsets

pytestmark = [pytest.mark.unit]


def test_parse_and_dumps_round_trip_in_sparks_compact_shape():
    text = '{"Payments": {"1": 800, "0": 1000, "10": 5}, "Audit": {"0": 0}}'
    parsed = offsets.parse(text)
    assert parsed == {("Payments", 0): 1000, ("Payments", 1): 800, ("Payments", 10): 5,
                      ("Audit", 0): 0}
    # Topics in order, partitions in numeric order, no spaces (as Spark writes it).
    assert offsets.dumps(parsed) == '{"Audit":{"0":0},"Payments":{"0":1000,"1":800,"10":5}}'
    assert offsets.parse(offsets.dumps(parsed)) == parsed


@pytest.mark.parametrize(("text", "message"), [
    ("not json", "not JSON"),
    ("[]", 'expected {"topic": {"partition": offset}}'),
    ("{}", 'expected {"topic": {"partition": offset}}'),
    ('{"T": 5}', "topic 'T' needs"),
    ('{"T": {"x": 5}}', "'T' partition 'x' is not a partition number"),
    ('{"T": {"-1": 5}}', "'T' partition '-1' is not a partition number"),
    ('{"T": {"0": "5"}}', "T[0] offset '5' is not an integer"),
    ('{"T": {"0": 1.5}}', "T[0] offset 1.5 is not an integer"),
    ('{"T": {"0": true}}', "T[0] offset True is not an integer"),
    ('{"T": {"0": -2}}', "T[0] is -2 (earliest), Spark's symbol, not a position"),
    ('{"T": {"0": -1}}', "T[0] is -1 (latest), Spark's symbol, not a position"),
    ('{"T": {"0": -7}}', "T[0] offset -7 is negative"),
])
def test_bad_shapes_are_named(text, message):
    with pytest.raises(offsets.OffsetsFormatError, match=None) as info:
        offsets.parse(text, "--offsets f.json")
    assert str(info.value).startswith("--offsets f.json: ")
    assert message in str(info.value)
    assert info.value.exit_code == 2


def _checkpoint(partition: int, target: int | None, reason: str | None = None):
    import datetime as dt

    return CheckpointRecord(
        checkpoint_id="c", flow="P->B", direction="forward", group_id="(offsets)",
        source_cluster="P", source_topic="Payments", partition=partition, source_offset=10,
        target_cluster="B", target_topic="P.Payments", target_offset=target,
        status="translated" if target is not None else "untranslatable", reason=reason,
        group_rewound=False, offset_syncs_version=3, checkpointed_at=dt.datetime(2026, 1, 1))


def test_translated_and_untranslatable_stay_apart():
    cps = [_checkpoint(0, 7), _checkpoint(1, None, "no offset-syncs for Payments[1]")]
    assert offsets.translated(cps) == {("P.Payments", 0): 7}
    assert offsets.describe_untranslatable(cps) == [
        "P:Payments[1] offset 10 (forward): no offset-syncs for Payments[1]"]
