"""Prometheus metrics: definitions, the observers jobs call, and where metrics go.

    definitions  the metric families, on one registry per process (``Metrics``)
    observe      what the jobs call: replication batches and measurements, checkpoint passes
    export       /metrics on an address, a Pushgateway, a node-exporter textfile
    status       ``status --format prometheus``

Names, labels and their MirrorMaker 2 counterparts: ``docs/metrics.md``. Importing this
package registers nothing and starts nothing.
"""

from pipelines.metrics.definitions import Metrics
from pipelines.metrics.export import (
    Exporter,
    JobMetrics,
    Settings,
    add_arguments,
    job_metrics,
    settings,
)
from pipelines.metrics.observe import (
    CheckpointObserver,
    Delivery,
    RecordedBatch,
    ReplicationObserver,
)

__all__ = ["CheckpointObserver", "Delivery", "Exporter", "JobMetrics", "Metrics", "RecordedBatch",
           "ReplicationObserver", "Settings", "add_arguments", "job_metrics",
           "settings"]
