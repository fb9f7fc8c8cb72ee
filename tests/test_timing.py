"""The committed durations order the suite's files longest first, and nothing else."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tests import timing

pytestmark = pytest.mark.unit


@dataclass
class Item:
    nodeid: str


def test_files_go_longest_first_and_keep_their_tests_in_order():
    items = [Item("a.py::x"), Item("b.py::y"), Item("a.py::z"), Item("c.py::w")]
    durations = {"a.py::x": 1.0, "a.py::z": 2.0, "b.py::y": 10.0}
    ordered = [i.nodeid for i in timing.longest_first(items, durations)]
    # c.py is unknown: it counts as UNKNOWN_FILE_SECONDS (30 s), ahead of b.py's 10 s.
    assert ordered == ["c.py::w", "b.py::y", "a.py::x", "a.py::z"]
    assert sorted(ordered) == sorted(i.nodeid for i in items)


def test_a_new_test_in_a_known_file_counts_as_the_default():
    totals = timing.file_totals(["a.py::x", "a.py::new"], {"a.py::x": 1.0})
    assert totals == {"a.py": 1.0 + timing.UNKNOWN_TEST_SECONDS}


def test_junit_xml_becomes_node_ids(tmp_path):
    xml = tmp_path / "junit.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_timing" name="test_x[a-1]" time="1.234"/>'
        '<testcase classname="tests.test_timing.TestThing" name="test_y" time="0.5"/>'
        '<testcase classname="tests.no_such_module" name="test_z" time="9"/>'
        "</testsuite></testsuites>")
    assert timing.from_junit(xml) == {"tests/test_timing.py::test_x[a-1]": 1.23,
                                      "tests/test_timing.py::TestThing::test_y": 0.5}


def test_the_committed_table_names_collected_tests():
    durations = timing.load()
    assert durations, "tests/durations.json is missing: python -m tests.timing JUNIT_XML"
    assert all(v >= 0 for v in durations.values())
    assert any(k.startswith("tests/e2e/") for k in durations)
    json.dumps(durations)
