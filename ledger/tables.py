"""Where the ledger's Delta tables live and the idempotent ways to write them.

Invariants:
    * The location is either a filesystem/object-store path (tables at ``<path>/<name>``) or a
      catalog schema (``catalog.schema`` or ``schema``; tables ``<schema>.<name>``), as
      :func:`ledger.config.is_catalog_schema` alone decides.
    * :meth:`Ledger.init` creates missing tables and never alters existing ones: running it
      twice adds no Delta version.
    * Appends carry a Delta ``txnAppId``/``txnVersion`` pair: a re-run of the same
      (app, version) writes nothing. Upserts MERGE on the table's natural key.
    * A missing or corrupt table raises :class:`LedgerError` naming the table and the fix,
      never an empty result.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ledger import commits, direct
from ledger.config import is_catalog_schema
from ledger.errors import OffsetLedgerError, first_line
from ledger.schemas import DERIVED, NATURAL_KEYS, TABLES, spark_schema

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # importing this module imports no pyspark (a delta-rs verb names Ledger)
    from pyspark.sql import Column, DataFrame, SparkSession

_INITIALIZED: set[tuple[int, str]] = set()


class LedgerError(OffsetLedgerError):
    """The ledger is missing, corrupt or cannot be written."""


def _is_path(location: str) -> bool:
    return not is_catalog_schema(location)


@dataclass(frozen=True)
class Ledger:
    """The ledger tables at one location, in one Spark session."""

    spark: SparkSession
    location: str

    @property
    def path_based(self) -> bool:
        return _is_path(self.location)

    def table_path(self, name: str) -> str:
        return f"{self.location.rstrip('/')}/{name}"

    def identifier(self, name: str) -> str:
        """How SQL names the table: ``delta.`/path/name``` or ``schema.name``."""
        if name not in TABLES:
            raise LedgerError(f"unknown ledger table {name!r} (known: {', '.join(TABLES)})")
        if self.path_based:
            return f"delta.`{self.table_path(name)}`"
        return f"{self.location}.{name}"

    # --- lifecycle -----------------------------------------------------------------------

    def init(self) -> dict[str, bool]:
        """Create every missing table; return ``{name: created}``.

        Checked once per session and location: jobs call this at every start, and the schema
        checks cost a Delta log read per table.
        """
        key = (id(self.spark), self.location)
        if key in _INITIALIZED:
            return dict.fromkeys(TABLES, False)
        created = self._init()
        _INITIALIZED.add(key)
        return created

    def _init(self) -> dict[str, bool]:
        created = {}
        if not self.path_based:
            self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {self.location}")
        # A local path's missing tables are created by delta-rs: the same tables (the columns
        # and types of ``ledger.schemas``, protocol 1/2) in milliseconds, where Spark takes a
        # second or more per table. An object store or a catalog goes through Spark.
        by_delta_rs = (commits.create_missing_tables(self.location)
                       if self.path_based and self._spark_reads_local_paths() else None)
        made = set(by_delta_rs) if isinstance(by_delta_rs, list) else set()
        for name in TABLES:  # the answer in the tables' order, whoever created them
            if name in made:
                created[name] = True
                continue
            schema = spark_schema(name)
            if self.exists(name):
                self._check_schema(name)
                created[name] = False
                continue
            empty = self.spark.createDataFrame([], schema)
            writer = empty.write.format("delta").mode("errorifexists")
            if self.path_based:
                writer.save(self.table_path(name))
            else:
                writer.saveAsTable(self.identifier(name))
            created[name] = True
        return created

    def _spark_reads_local_paths(self) -> bool:
        """Whether this session resolves the location where delta-rs writes: an explicit
        ``file://``, or a schemeless path under a local default filesystem (not one set by
        ``spark.hadoop.fs.defaultFS`` to HDFS, say)."""
        if self.location.startswith("file://"):
            return True
        try:
            default_fs = self.spark.sparkContext._jsc.hadoopConfiguration().get("fs.defaultFS")
        except Exception:  # no JVM gateway here (Spark Connect): ask Spark to create them
            return False
        return str(default_fs or "file:///").startswith("file:")

    def exists(self, name: str) -> bool:
        if self.path_based:
            from delta.tables import DeltaTable

            path = self.table_path(name)
            if "://" not in path and not Path(path).exists():
                return False
            try:
                return DeltaTable.isDeltaTable(self.spark, path)
            except Exception as exc:  # the log exists but cannot be replayed
                raise damaged(self.location, name, exc) from exc
        return self.spark.catalog.tableExists(self.identifier(name))

    def _check_schema(self, name: str) -> None:
        expected = {f.name: f.dataType for f in spark_schema(name).fields}
        actual = {f.name: f.dataType for f in self.read(name).schema.fields}
        missing = [c for c in expected if c not in actual]
        wrong = [c for c in expected if c in actual and actual[c] != expected[c]]
        if missing or wrong:
            raise LedgerError(
                f"ledger table {name} at {self.location} does not match the ledger schema "
                f"(missing columns: {missing or 'none'}, wrong types: {wrong or 'none'}); "
                "point ledger.location at a fresh path or repair the table")

    def require(self, *names: str, verify: bool = False) -> None:
        """Fail clearly unless every named table exists and its Delta log reads.

        Checked once per session and location unless ``verify`` asks again.
        """
        # A derived table (a cache) is never required: a ledger from before it reads without it.
        names = names or tuple(n for n in TABLES if n not in DERIVED)
        if not verify and (id(self.spark), self.location) in _INITIALIZED:
            return  # created or verified earlier in this session
        missing = [n for n in names if not self.exists(n)]
        if missing:
            raise LedgerError(
                f"ledger tables missing at {self.location}: {', '.join(missing)} "
                "(run `offset-ledger ledger init`)")
        for name in names:
            try:  # DESCRIBE DETAIL rebuilds the table state, so a corrupt log fails here
                self.spark.sql(f"DESCRIBE DETAIL {self.identifier(name)}").collect()
            except Exception as exc:
                raise damaged(self.location, name, exc) from exc
        if set(names) | DERIVED >= set(TABLES) and all(self.exists(n) for n in DERIVED):
            _INITIALIZED.add((id(self.spark), self.location))

    # --- reads ---------------------------------------------------------------------------

    def read(self, name: str, version: int | None = None,
             timestamp: str | None = None) -> DataFrame:
        """The table, optionally as of a Delta version or timestamp (time travel)."""
        try:
            reader = self.spark.read.format("delta")
            if version is not None:
                reader = reader.option("versionAsOf", int(version))
            if timestamp is not None:
                reader = reader.option("timestampAsOf", timestamp)
            if self.path_based:
                return reader.load(self.table_path(name))
            return reader.table(self.identifier(name))
        except Exception as exc:
            raise LedgerError(
                f"cannot read ledger table {name} at {self.location}: "
                f"{first_line(exc)} (run `offset-ledger ledger init` if it is missing)"
            ) from exc

    def version(self, name: str) -> int:
        """The table's current Delta version."""
        local = self._local_log(name)
        if local is not None:
            # A local table's version is its newest commit file: no Spark job needed.
            newest = direct.newest_commit(local)
            if newest is not None:
                return newest
        row = self.spark.sql(f"DESCRIBE HISTORY {self.identifier(name)} LIMIT 1").first()
        if row is None:
            raise LedgerError(f"ledger table {name} has no history at {self.location}")
        return int(row["version"])

    def _local_log(self, name: str) -> Path | None:
        if not self.path_based or "://" in self.location:
            return None
        log = Path(self.table_path(name)) / "_delta_log"
        return log if log.is_dir() else None

    # --- writes --------------------------------------------------------------------------

    def append(self, name: str, df: DataFrame, txn_app_id: str | None = None,
               txn_version: int | None = None) -> None:
        """Append rows; with a txn pair, a repeat of the same pair writes nothing."""
        df = self._conform(name, df)
        writer = df.write.format("delta").mode("append")
        if txn_app_id is not None and txn_version is not None:
            writer = writer.option("txnAppId", txn_app_id).option("txnVersion", int(txn_version))
        if self.path_based:
            writer.save(self.table_path(name))
        else:
            writer.saveAsTable(self.identifier(name))

    def replace(self, name: str, df: DataFrame, where: Column) -> None:
        """Replace the rows matching ``where`` with ``df``'s, in one Delta commit."""
        self._conform(name, df).writeTo(self.identifier(name)).overwrite(where)

    def merge(self, name: str, df: DataFrame, keys: tuple[str, ...] | None = None,
              update: bool = True) -> None:
        """Upsert on the natural key; with ``update=False`` existing rows are left alone."""
        from delta.tables import DeltaTable

        keys = keys or NATURAL_KEYS[name]
        df = self._conform(name, df)
        target = (DeltaTable.forPath(self.spark, self.table_path(name)) if self.path_based
                  else DeltaTable.forName(self.spark, self.identifier(name)))
        cond = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)
        for attempt in range(commits.MERGE_CONFLICT_ATTEMPTS):
            builder = target.alias("t").merge(df.alias("s"), cond)
            if update:
                builder = builder.whenMatchedUpdateAll()
            try:
                builder.whenNotMatchedInsertAll().execute()
                return
            except Exception as exc:  # another writer's commit: the upsert runs again
                if not commits.merge_conflict(exc) \
                        or attempt == commits.MERGE_CONFLICT_ATTEMPTS - 1:
                    raise
                log.info("MERGE into %s met a concurrent commit: run again (%d)", name,
                         attempt + 1)
                commits.conflict_pause(attempt)

    def _conform(self, name: str, df: DataFrame) -> DataFrame:
        schema = spark_schema(name)
        missing = [f.name for f in schema.fields if f.name not in df.columns]
        if missing:
            raise LedgerError(f"rows for {name} lack columns {missing}")
        return df.select(*[df[f.name].cast(f.dataType).alias(f.name) for f in schema.fields])


_DAMAGE_FIX = ("restore the table from a backup or `RESTORE TABLE` it to an earlier version, "
               "or point ledger.location at a fresh path; nothing was written")


def damaged(location: str, name: str, exc: BaseException) -> LedgerError:
    """The one-line error for a ledger table whose log or data files cannot be read."""
    return LedgerError(f"ledger table {name} at {location} is damaged: {_cause(exc)} "
                       f"({_DAMAGE_FIX})")


def damage_from(exc: BaseException, location: str) -> LedgerError | None:
    """A :func:`damaged` error if ``exc`` is a Spark/Delta failure reading a ledger table.

    Reads are lazy, so a truncated data file or a broken log surfaces wherever a caller first
    collects; the CLI passes any such failure through here. The table is recognised by its
    path under the ledger location in the message; ``None`` when the failure is not about the
    ledger (it then keeps its traceback, as a bug would).
    """
    if not _is_spark_failure(exc):
        return None
    text = str(exc)
    root = location.rstrip("/")
    for name in TABLES:
        if f"{root}/{name}/" in text or f"{root}/{name}`" in text or \
                text.rstrip().endswith(f"{root}/{name}") or f"{location}.{name}" in text:
            return damaged(location, name, exc)
    return None


def _is_spark_failure(exc: BaseException) -> bool:
    kinds = {cls.__name__ for cls in type(exc).__mro__}
    return bool(kinds & {"Py4JJavaError", "PySparkException", "CapturedException"})


_CAUSES = (
    ("DELTA_TRUNCATED_TRANSACTION_LOG", "its transaction log is incomplete (a commit file is "
                                        "missing)"),
    ("DELTA_VERSIONS_NOT_CONTIGUOUS", "its transaction log has a gap between versions"),
    ("DELTA_LOG_FILE_NOT_FOUND", "a transaction log file is missing"),
    ("DELTA_FILE_NOT_FOUND", "a data file named in its log is missing"),
    ("FileNotFoundException", "a file named in its log is missing"),
    ("is not a Parquet file", "a data file is not valid Parquet (truncated or overwritten)"),
    ("FAILED_READ_FILE", "a data file cannot be read (truncated or corrupt)"),
    ("CorruptStatistics", "a data file's statistics are corrupt"),
    ("EOFException", "a data file is truncated"),
)


def _cause(exc: BaseException) -> str:
    text = str(exc)
    for marker, meaning in _CAUSES:
        if marker in text:
            return meaning
    return first_line(exc)
