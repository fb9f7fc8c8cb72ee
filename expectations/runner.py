"""Run the ledger suites with Great Expectations and summarize the results.

``validate_ledger(spark, config)`` reads every ledger table (raising
:class:`ledger.tables.LedgerError` when the ledger is missing), registers the temporary views
the cross-table checks use, validates each table against its suite in an ephemeral GX context
and returns a :class:`ValidationReport`; secrets never appear in it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from expectations.suites import SECRETS_VIEW, expectations_for, view
from ledger.config import MASK, Config, is_secret_key
from ledger.schemas import DERIVED, TABLES, spark_schema
from ledger.tables import Ledger

SAMPLE_ROWS = 3


@dataclass(frozen=True)
class CheckResult:
    """One expectation on one table."""

    table: str
    check: str
    description: str
    success: bool
    unexpected_count: int | None
    samples: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class ValidationReport:
    """Every check of every validated table."""

    location: str
    results: list[CheckResult]

    @property
    def success(self) -> bool:
        return all(r.success for r in self.results)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if not r.success]

    def failed_checks(self, table: str | None = None) -> set[str]:
        return {r.check for r in self.failures if table is None or r.table == table}

    def to_dict(self) -> dict[str, Any]:
        return {"location": self.location, "success": self.success,
                "results": [asdict(r) for r in self.results]}

    def summary(self) -> str:
        lines = [f"ledger {self.location}"]
        for table in dict.fromkeys(r.table for r in self.results):
            rows = [r for r in self.results if r.table == table]
            failed = sum(not r.success for r in rows)
            lines.append(f"== {table}: {len(rows) - failed}/{len(rows)} passed")
            for r in rows:
                count = "" if r.unexpected_count is None else f"  unexpected {r.unexpected_count}"
                lines.append(f"  {'PASS' if r.success else 'FAIL'}  {r.check:34}{count}"
                             f"  ({r.description})")
                if not r.success:
                    lines += [f"        e.g. {_short(s)}" for s in r.samples[:SAMPLE_ROWS]]
        total, failed = len(self.results), len(self.failures)
        lines.append(f"{'OK' if not failed else 'FAILED'}: {total - failed} of {total} "
                     "expectations passed")
        return "\n".join(lines)


def _short(value: Any, width: int = 160) -> str:
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= width else text[: width - 3] + "..."


def configured_secrets(config: Config) -> list[str]:
    """Every non-empty value of a secret-looking property of any cluster."""
    secrets = {str(v) for cluster in config.clusters.values()
               for k, v in cluster.properties.items() if is_secret_key(k) and str(v)}
    return sorted(secrets)


def _mask(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {k: _mask(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_mask(v, secrets) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return value


def _samples(spark: SparkSession, table: str, result: Any) -> tuple[int | None, list[Any]]:
    """The unexpected count and a few sample rows (or values) of one result."""
    data = result.result or {}
    config_ = result.expectation_config
    query = (config_.kwargs or {}).get("unexpected_rows_query") if config_ else None
    if query:  # UnexpectedRowsExpectation: its count; samples by re-running the query
        count = data.get("observed_value")
        samples: list[Any] = []
        if count:
            sql = f"SELECT * FROM ({query.replace('{batch}', view(table))}) LIMIT {SAMPLE_ROWS}"
            samples = [row.asDict(recursive=True) for row in spark.sql(sql).collect()]
        return (int(count) if isinstance(count, int | float) else None), samples
    return data.get("unexpected_count"), list(data.get("partial_unexpected_list") or [])


def validate_ledger(spark: SparkSession, config: Config,
                    tables: Iterable[str] | None = None) -> ValidationReport:
    """Validate the ledger of ``config`` (every table, or ``tables``)."""
    import great_expectations as gx

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    ledger = Ledger(spark, config.ledger_location)
    ledger.require()
    present = [n for n in TABLES if n not in DERIVED or ledger.exists(n)]
    names = list(tables or present)
    # a derived table a ledger predates is validated as empty
    frames = {name: ledger.read(name) if name in present
              else spark.createDataFrame([], spark_schema(name)) for name in TABLES}
    for name, frame in frames.items():
        frame.createOrReplaceTempView(view(name))
    secrets = configured_secrets(config)
    spark.createDataFrame([(s,) for s in secrets], "secret string").createOrReplaceTempView(
        SECRETS_VIEW)

    verbose = logging.getLogger().isEnabledFor(logging.INFO)
    # GX's modules set their own levels: quiet each of them unless -v.
    for name in [n for n in logging.root.manager.loggerDict if n.startswith("great_expectations")]:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.ERROR)
    context = gx.get_context(mode="ephemeral")
    if not verbose:
        # Quiet unless -v: no "Calculating Metrics" bars on stderr for every suite.
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False,
                                                             metric_calculations=False)
    source = context.data_sources.add_spark(name="offset_ledger")
    results: list[CheckResult] = []
    for name in names:
        asset = source.add_dataframe_asset(name=name)
        batch_definition = asset.add_batch_definition_whole_dataframe(f"{name}_all")
        suite = context.suites.add(gx.ExpectationSuite(name=f"{name}_suite"))
        for expectation in expectations_for(name):
            suite.add_expectation(expectation)
        validation = context.validation_definitions.add(
            gx.ValidationDefinition(name=f"{name}_validation", data=batch_definition,
                                    suite=suite))
        outcome = validation.run(batch_parameters={"dataframe": frames[name]},
                                 result_format={"result_format": "SUMMARY",
                                                "partial_unexpected_count": SAMPLE_ROWS})
        for item in outcome.results:
            config_ = item.expectation_config
            meta = (config_.meta or {}) if config_ is not None else {}
            count, samples = _samples(spark, name, item)
            if item.exception_info and item.exception_info.get("raised_exception"):
                message = str(item.exception_info.get("exception_message"))[:300]
                samples = [f"error: {message}"]
            results.append(CheckResult(
                table=name, check=str(meta.get("check", config_.type if config_ else "?")),
                description=str(_mask(getattr(config_, "description", None) or "", secrets)),
                success=bool(item.success), unexpected_count=count,
                samples=_mask(samples[:SAMPLE_ROWS], secrets)))
    return ValidationReport(location=config.ledger_location, results=results)
