"""The reading edge: Spark Kafka connector options for a flow's source cluster.

The cluster is configured with librdkafka property names (the project's one configuration
language); the connector takes the Java client's, prefixed ``kafka.``. This module maps the
ones that differ.

Invariants:
    * The result holds secrets (``sasl.password`` inside ``kafka.sasl.jaas.config``): it is
      handed to the connector only, never logged or put in an error.
    * Records are read ``read_committed`` from the earliest offsets, headers included: aborted
      records are never copied, and transaction markers show up as upstream gaps (split runs).
"""

from __future__ import annotations

from ledger.config import ClusterConfig

_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def source_options(cluster: ClusterConfig, subscribe: list[str]) -> dict[str, str]:
    """Spark Kafka connector options for a cluster (secrets included: never log the result).

    librdkafka names are mapped to the Java client's: ``sasl.username``/``sasl.password``
    become a ``sasl.jaas.config`` for PLAIN or SCRAM; ``ssl.ca.location`` a PEM truststore.
    """
    props = cluster.client_config()
    opts = {
        "kafka.bootstrap.servers": props["bootstrap.servers"],
        "subscribe": ",".join(subscribe),
        "startingOffsets": "earliest",
        "includeHeaders": "true",
        "failOnDataLoss": "false",
        # Aborted records are not copied; commit markers leave upstream gaps (split runs).
        "kafka.isolation.level": "read_committed",
        # Larger fetches than the Java client's defaults (the plain-loop baseline's settings).
        "kafka.fetch.max.bytes": "52428800",
        "kafka.max.partition.fetch.bytes": "10485760",
        # The Java client's default of 500 records per poll costs ~10% at small record sizes.
        "kafka.max.poll.records": "10000",
    }
    if "security.protocol" in props:
        opts["kafka.security.protocol"] = props["security.protocol"].upper()
    mechanism = props.get("sasl.mechanism") or props.get("sasl.mechanisms")
    if mechanism:
        opts["kafka.sasl.mechanism"] = mechanism.upper()
    if "sasl.username" in props and mechanism and mechanism.upper() in _JAAS_MODULES:
        opts["kafka.sasl.jaas.config"] = (
            f"{_JAAS_MODULES[mechanism.upper()]} required "
            f"username={_jaas_quote(props['sasl.username'])} "
            f"password={_jaas_quote(props.get('sasl.password', ''))};")
    if "ssl.ca.location" in props:
        opts["kafka.ssl.truststore.type"] = "PEM"
        opts["kafka.ssl.truststore.location"] = props["ssl.ca.location"]
    if props.get("ssl.endpoint.identification.algorithm", "").lower() == "none":
        opts["kafka.ssl.endpoint.identification.algorithm"] = ""
    return opts
