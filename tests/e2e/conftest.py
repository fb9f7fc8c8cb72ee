"""What the end-to-end scenarios share: the README's setup for one topic and one group."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipelines.edge import kafka_admin


@pytest.fixture
def payments(make_config, unique):
    """Both flows (``B->P`` reverse-checkpointing ``P.<topic>``), the topic (a unique
    ``Payments-*`` of 3 partitions) on P and on B, and a group name ``G-*``."""
    topic, group = unique("Payments"), unique("G")
    config = make_config(flows={
        "P->B": {"topics": [topic]},
        "B->P": {"topics": [topic], "reverse.checkpointed.topics": [f"P.{topic}"]}})
    primary, backup = config.cluster("P"), config.cluster("B")
    for cluster in (primary, backup):
        kafka_admin.create_topic(cluster, topic, 3)
    return SimpleNamespace(topic=topic, group=group, config=config, primary=primary,
                           backup=backup)
