"""When an audit may reuse the session's last marts: the key of a ``dbt run`` (pure logic,
with a ledger fake that only knows table versions)."""

from __future__ import annotations

import pytest

from ledger.schemas import OFFSET_SYNC_SPANS, OFFSET_SYNCS, TABLES
from pipelines.audit.dbt_runner import _build_key

pytestmark = pytest.mark.unit


class _Ledger:
    """The one surface the key reads: ``location`` and ``version(name)``."""

    def __init__(self, location: str = "/l", **versions: int) -> None:
        self.location = location
        self.versions = {name: 3 for name in TABLES if name != OFFSET_SYNC_SPANS}
        self.versions.update(versions)

    def version(self, name: str) -> int:
        if name not in self.versions:
            raise LookupError(f"no table {name}")
        return self.versions[name]


def key(ledger=None, as_of=None, command="run", select=None, variables=None):
    return _build_key(ledger or _Ledger(), as_of, command, select, variables)


def test_the_same_audit_of_the_same_versions_has_the_same_key():
    assert key() == key() is not None
    assert key(variables={"a": 1, "b": [2]}) == key(variables={"b": [2], "a": 1})


@pytest.mark.parametrize("changed", [
    {"ledger": _Ledger(**{OFFSET_SYNCS: 4})},          # a table moved on
    {"ledger": _Ledger(**{OFFSET_SYNC_SPANS: 0})},      # a derived table appeared
    {"ledger": _Ledger(location="/other")},
    {"as_of": {OFFSET_SYNCS: 1}},
    {"select": "+resume_audit"},
    {"variables": {"audit_operations": ["op-1"]}},
    {"variables": {"evidence_operations": ["op-1"]}},
])
def test_anything_the_marts_read_changes_the_key(changed):
    assert key(**changed) != key()


def test_the_schemas_and_the_audit_folder_are_part_of_the_key(monkeypatch):
    before = key()
    for name, value in (("OFFSET_LEDGER_DBT_SCHEMA", "other_dbt"),
                        ("OFFSET_LEDGER_SOURCE_SCHEMA", "other_src"),
                        ("OFFSET_LEDGER_AUDIT_DIR", "/shared/audit")):
        with monkeypatch.context() as m:
            m.setenv(name, value)
            assert key() != before, name


def test_dbt_build_and_clock_relative_audits_are_never_reused():
    assert key(command="build") is None
    assert key(variables={"time_travel_days": 30}) is None
    assert key(variables={"time_travel_days": None}) is not None
