"""Files and rows a Spark query read: its file scans' SQL metrics after it ran (data skipping)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


@dataclass(frozen=True)
class ScanStats:
    files: int
    rows: int
    scans: int


def _nodes(node):
    """Every node of an executed plan, through adaptive plans and their query stages."""
    name = node.nodeName()
    if name == "AdaptiveSparkPlan":
        yield from _nodes(node.executedPlan())
        return
    yield node
    if name.endswith("QueryStage"):
        yield from _nodes(node.plan())
        return
    children = node.children()
    for i in range(children.size()):
        yield from _nodes(children.apply(i))


def scan_stats(df: DataFrame) -> ScanStats:
    """Run ``df`` (reduced to one row on the executors, never collected) and sum its file
    scans' ``numFiles`` and ``numOutputRows`` (rows read before row-level filters)."""
    reduced = df.select(F.hash(*df.columns).alias("h")).agg(F.max("h"))
    reduced.collect()
    files = rows = scans = 0
    for node in _nodes(reduced._jdf.queryExecution().executedPlan()):
        metrics = node.metrics()
        if node.nodeName().startswith("Scan") and metrics.contains("numFiles"):
            scans += 1
            files += int(metrics.apply("numFiles").value())
            rows += int(metrics.apply("numOutputRows").value())
    return ScanStats(files, rows, scans)
