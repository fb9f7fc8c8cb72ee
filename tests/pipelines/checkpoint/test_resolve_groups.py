"""``--group-regex`` resolution (``Checkpointer.resolve_groups``): a regex never reaches a group
the flow's allowlist excludes. Found by ``bench.failover_scale``: ``failover --group-regex
'.*'`` moved offset-ledger's own runs-channel groups (``offset-ledger-replicate.<S>-<T>``)."""

from __future__ import annotations

import pytest

from ledger.config import config_from_mapping
from ledger.engine import LedgerEngine
from ledger.errors import OffsetLedgerError
from pipelines.checkpoint.engine import Checkpointer

pytestmark = pytest.mark.unit

GROUPS = ["orders", "billing", "offset-ledger-replicate.B-P", "connect-mm2", "__probe",
          "console-consumer-7"]


class RecordedGroups(LedgerEngine):
    """A ledger that answers the recorded-groups query, and nothing else."""

    def __init__(self) -> None:
        pass

    def query(self, sql: str, **tables: str) -> list[dict]:
        assert "DISTINCT group_id" in sql
        return [{"group_id": g} for g in GROUPS]


def checkpointer(**flow) -> Checkpointer:
    config = config_from_mapping({
        "clusters": {"P": {"bootstrap.servers": "p:9092"}, "B": {"bootstrap.servers": "b:9092"}},
        "flows": {"P->B": flow or True}, "ledger": {"location": "/tmp/unused"}})
    return Checkpointer(RecordedGroups(), config)


def test_a_regex_reaches_only_the_groups_the_flow_allows():
    c = checkpointer()
    flow = c.config.flow("P->B")
    assert c.resolve_groups([], ".*", "P", live=False, flow=flow) == ["billing", "orders"]
    narrowed = checkpointer(groups=["ord.*"])
    assert narrowed.resolve_groups(["billing"], ".*", "P", live=False,
                                   flow=narrowed.config.flow("P->B")) == ["billing", "orders"]


def test_nothing_allowed_is_named():
    c = checkpointer()
    with pytest.raises(OffsetLedgerError, match="allowed by flow P->B's group allowlist"):
        c.resolve_groups([], "offset-ledger-.*", "P", live=False, flow=c.config.flow("P->B"))
