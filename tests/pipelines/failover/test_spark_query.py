"""``failover --spark-checkpoint`` refusals: a running query, an untranslatable partition, bad
arguments. Each is a clear error and writes nothing: no file beside the checkpoint, no ledger
row. (The full move of a real query: tests/e2e/test_spark_query_failover.py.)"""

from __future__ import annotations

import pytest

from ledger.schemas import CHECKPOINTS, OPERATIONS, RESUME_POINTS
from ledger.tables import Ledger
from pipelines import cli
from pipelines.failover.mover import Mover
from tests.pipelines.failover.test_spark_checkpoint import META, write_checkpoint

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.spark]
def nothing_written(spark, config, checkpoint):
    assert sorted(p.name for p in checkpoint.parent.iterdir()) == [checkpoint.name]
    ledger = Ledger(spark, config.ledger_location)
    assert all(ledger.read(name).count() == 0 for name in (CHECKPOINTS, OPERATIONS,
                                                           RESUME_POINTS))


def failover(config, checkpoint, *extra):
    return cli.main(["failover", "--spark-checkpoint", str(checkpoint), "--from", "P", "--to",
                     "B", "--disaster", "--quiet-seconds", "1", *extra,
                     "--config", config.path])


def test_a_running_query_and_an_untranslatable_partition_are_refused(
        spark, make_config, tmp_path, capsys, monkeypatch):
    config = make_config(flows={"P->B": {"topics": ["Payments"]}, "B->P": True})
    checkpoint = write_checkpoint(tmp_path / "checkpoints" / "payments",
                                  {0: ['{"Payments":{"0":10}}']}, committed=[0])
    check_source = Mover.check_source

    def query_plans_a_batch(self, source, options):
        # The query is still running: it plans batch 1 after the move read the checkpoint.
        (checkpoint / "offsets" / "1").write_text(f'v1\n{META}\n{{"Payments":{{"0":12}}}}')
        return check_source(self, source, options)

    with monkeypatch.context() as patch:
        patch.setattr(Mover, "check_source", query_plans_a_batch)
        assert failover(config, checkpoint) == 2
    err = capsys.readouterr().err
    assert f"checkpoint {checkpoint} changed while the move ran (newest batch 0 -> 1" in err
    assert "the query is running" in err and "nothing was written" in err
    nothing_written(spark, config, checkpoint)

    # Batch 1 is committed now; it also read a topic that P->B does not replicate.
    (checkpoint / "offsets" / "2").write_text(
        f'v1\n{META}\n{{"Payments":{{"0":14}},"Audit":{{"0":9}}}}')
    (checkpoint / "commits" / "2").write_text('v1\n{"nextBatchWatermarkMs":0}')
    assert failover(config, checkpoint) == 4
    err = capsys.readouterr().err
    assert "2 partition(s) cannot be translated P -> B; nothing was guessed or written" in err
    assert "P:Audit[0] offset 9: flow P->B neither replicates Audit" in err
    assert "P:Payments[0] offset 14 (forward): no offset-syncs for Payments[0]" in err
    nothing_written(spark, config, checkpoint)


@pytest.mark.parametrize(("extra", "message"), [
    (["--group", "G"], "give --spark-checkpoint or --group/--group-regex, not both"),
    (["--cutoff"], "--cutoff and --allow-untranslatable do not apply to --spark-checkpoint"),
])
def test_arguments_that_do_not_apply_are_refused(make_config, tmp_path, capsys, extra,
                                                 message):
    config = make_config()
    with pytest.raises(SystemExit):
        failover(config, tmp_path / "q", *extra)
    assert message in capsys.readouterr().err
