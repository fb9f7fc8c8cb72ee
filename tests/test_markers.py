"""The suite's tiers hold: a test that starts brokers or Spark carries the marker that lets a
tier leave it out (``tests/conftest.py`` refuses the session otherwise)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.conftest import marker_problems

pytestmark = pytest.mark.unit


@dataclass
class Item:
    nodeid: str
    marks: tuple[str, ...] = ()
    fixturenames: tuple[str, ...] = ()

    def iter_markers(self):
        return [pytest.Mark(name, (), {}) for name in self.marks]


def test_a_test_using_the_brokers_without_its_marker_is_refused():
    assert marker_problems([Item("t.py::a", ("e2e",), ("make_config", "kafka_clusters"))]) == [
        "t.py::a: uses kafka without the marker"]
    assert marker_problems([Item("t.py::b", ("kafka",), ("kafka_clusters", "spark"))]) == [
        "t.py::b: uses spark without the marker"]


def test_a_test_without_any_tier_is_refused_and_a_marked_one_passes():
    assert marker_problems([Item("t.py::c")])[0].startswith("t.py::c: no tier marker")
    assert marker_problems([Item("t.py::d", ("kafka", "spark"), ("kafka_clusters", "spark")),
                            Item("t.py::e", ("unit",))]) == []
