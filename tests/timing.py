"""Committed per-test durations, and the order they give the suite's files.

``tests/durations.json`` maps a test's node id to its seconds (setup, call and teardown) in
a full run of the suite. :func:`longest_first` sorts the collected tests by their file's
total, longest first, so that ``--dist loadfile`` hands the two workers the longest files
first and they finish together (greedy longest-processing-time). A file the table does not
know (a new one) counts as :data:`UNKNOWN_FILE_SECONDS`, and a test as
:data:`UNKNOWN_TEST_SECONDS`.

Refresh the table from a full run's JUnit XML after the suite changes shape::

    .venv/bin/python -m pytest -n 2 --dist loadfile --junitxml=/tmp/junit.xml
    .venv/bin/python -m tests.timing /tmp/junit.xml

Invariants:
    * Ordering never drops or duplicates a test, and tests of one file keep their collected
      order (module fixtures are built once per file either way).
    * The table only orders: no test is skipped or selected by it.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

DURATIONS = Path(__file__).with_name("durations.json")
UNKNOWN_TEST_SECONDS = 2.0
UNKNOWN_FILE_SECONDS = 30.0


class _Item(Protocol):
    nodeid: str


def load(path: Path = DURATIONS) -> dict[str, float]:
    """The committed durations (empty when the file is absent)."""
    try:
        return {str(k): float(v) for k, v in json.loads(path.read_text()).items()}
    except FileNotFoundError:
        return {}


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def file_totals(nodeids: Sequence[str], durations: dict[str, float]) -> dict[str, float]:
    """Each file's expected seconds: the sum of its tests' committed durations."""
    known = {file_of(n) for n in durations}
    totals: dict[str, float] = defaultdict(float)
    for nodeid in nodeids:
        path = file_of(nodeid)
        if path not in known:
            totals[path] = UNKNOWN_FILE_SECONDS
        else:
            totals[path] += durations.get(nodeid, UNKNOWN_TEST_SECONDS)
    return dict(totals)


def longest_first(items: list[_Item], durations: dict[str, float]) -> list[_Item]:
    """``items`` grouped by file, the files with the largest expected total first."""
    totals = file_totals([i.nodeid for i in items], durations)
    first_seen = {}
    for index, item in enumerate(items):
        first_seen.setdefault(file_of(item.nodeid), index)
    return sorted(items, key=lambda i: (-totals[file_of(i.nodeid)],
                                        first_seen[file_of(i.nodeid)]))


def from_junit(xml_path: Path) -> dict[str, float]:
    """Node id -> seconds from pytest's JUnit XML (``classname`` is the dotted module path,
    plus the class for tests in a class)."""
    durations: dict[str, float] = {}
    root = Path(__file__).resolve().parent.parent
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        parts = classname.split(".")
        # The module is the longest dotted prefix that is a file under tests/.
        for cut in range(len(parts), 0, -1):
            module = Path(*parts[:cut]).with_suffix(".py")
            if (root / module).is_file():
                nodeid = "::".join([module.as_posix(), *parts[cut:], name])
                durations[nodeid] = round(float(case.get("time", 0.0)), 2)
                break
    return durations


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tests.timing JUNIT_XML", file=sys.stderr)
        return 2
    durations = from_junit(Path(args[0]))
    if not durations:
        print(f"error: no test cases in {args[0]}", file=sys.stderr)
        return 2
    DURATIONS.write_text(json.dumps(dict(sorted(durations.items())), indent=0) + "\n")
    print(f"{len(durations)} tests, {sum(durations.values()):.0f} s in total -> {DURATIONS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
