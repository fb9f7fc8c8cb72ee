"""Replication of a flow's topics with an exact offset-sync ledger (``offset-ledger replicate``).

The public entry points live in :mod:`pipelines.replicate.job`: ``replicate_once`` for code
(failover, the demo, tests) and ``main`` for the CLI, ``spark-submit`` and Databricks.
"""
