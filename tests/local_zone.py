"""The process's local time zone, set for one test: what a machine outside UTC sees.

PySpark's ``createDataFrame`` and ``collect()`` read and give naive datetimes in this zone
(``time.tzset``), while the Spark session's zone stays UTC (``pipelines.spark``): a naive UTC
time written by the product is then off by the zone's offset.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

# Five hours behind UTC in November (four in summer): far enough that a shifted time shows.
NEW_YORK = "America/New_York"


@contextmanager
def local_zone(name: str = NEW_YORK) -> Iterator[None]:
    """Run the block with ``TZ=name``; the zone before it is restored (``tzset`` again)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()
