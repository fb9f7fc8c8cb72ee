"""The lean lane takes only files that never use the session's Spark; Spark lanes prefer the
others and take what is left."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from tests import lanes

pytestmark = pytest.mark.unit


@dataclass
class Item:
    nodeid: str
    fixturenames: list[str] = field(default_factory=list)


def test_a_file_is_lean_only_if_none_of_its_tests_uses_spark(tmp_path):
    items = [Item("a.py::x", ["spark", "tmp_path"]), Item("b.py::y", ["kafka_clusters"]),
             Item("a.py::z"), Item("c.py::w"), Item("b.py::v", ["make_config"])]
    assert lanes.lean_files(items) == ["b.py", "c.py"]
    where = tmp_path / "lean.json"
    lanes.write_lean_files(str(where), items)
    assert json.loads(where.read_text()) == ["b.py", "c.py"]
    assert list(tmp_path.iterdir()) == [where]  # the partial file was renamed, not left


def test_the_lean_lane_takes_lean_files_and_the_spark_lanes_prefer_the_others():
    queue = ["spark-long.py", "lean-long.py", "spark-short.py", "lean-short.py"]
    lean = {"lean-long.py", "lean-short.py"}
    assert lanes.pick(queue, lean, lean_lane=True) == "lean-long.py"
    assert lanes.pick(queue, lean, lean_lane=False) == "spark-long.py"
    # No Spark file left: a Spark lane helps with the lean ones.
    assert lanes.pick(["lean-short.py"], lean, lean_lane=False) == "lean-short.py"
    # No lean file left: the lean lane gets nothing (it never starts a session driver).
    assert lanes.pick(["spark-short.py"], lean, lean_lane=True) is None
    assert lanes.pick([], lean, lean_lane=False) is None


def test_workers_are_numbered_as_xdist_names_them():
    assert [lanes.worker_number(w) for w in ("gw0", "gw1", "gw2", "gw10")] == [0, 1, 2, 10]
