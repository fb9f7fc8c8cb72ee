"""Fixtures: a real Pushgateway (Prometheus itself is started per test, with its targets)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipelines.metrics.servers import Pushgateway


@pytest.fixture
def pushgateway(tmp_path: Path) -> Iterator[Pushgateway]:
    server = Pushgateway(tmp_path / "pushgateway")
    try:
        yield server
    finally:
        server.stop()
