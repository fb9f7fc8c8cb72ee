"""Great Expectations 1.x suites for the ledger tables, and their runner.

Invariants:
    * One suite per ledger table (:data:`expectations.suites.SUITES`); every expectation carries
      ``meta["check"]``, a stable name the summary and the tests use.
    * Suites run code-first in an ephemeral GX context over Spark DataFrames read from the
      ledger; nothing is written anywhere.
    * Per-partition orderings (checkpoints never moving backwards, runs of one epoch never
      sharing a downstream offset) are window queries (``UnexpectedRowsExpectation``): GX's
      "values increasing" expectation does not order rows on Spark.
    * Secret values from the configuration are compared through a temporary view, never put in
      a query text, and are masked in every printed sample.
    * Nothing runs at import time (no SparkSession, no GX context, no configuration).
"""

from expectations.runner import CheckResult, ValidationReport, validate_ledger

__all__ = ["CheckResult", "ValidationReport", "validate_ledger"]
