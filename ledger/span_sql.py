"""The spans of a flow's runs in SQL, for a delta-rs (DataFusion) load: no run reaches Python.

:func:`spans_sql` is :func:`ledger.span_spark.spans` (the Spark plan) written as one SQL
statement, step for step, so that a JVM-free load (:meth:`ledger.store.OffsetSyncStore.load_direct`)
receives a few spans per partition instead of every run written since the last snapshot and
coalescing them row by row in Python (about 15 us a run: 0.85 s for 56,000 runs, a load that
``status``, ``translate`` and each move repeat)::

    runs (write order: written_at, batch_id, d)
      -> epoch starts (d below the previous run's downstream end), the last epoch kept
      -> per run A: the epoch's upstream ends in (A.u, A.u + A.n]  ("inside": ends, A.u and
         A.e sorted together, a running count of ends; an end sorts before a bound it equals)
      -> islands: B continues A's span when contiguous on both sides and A's inside is 1
      -> one row per span: the first run's u and d, the summed n

Invariants:
    * The same spans as :func:`ledger.spans.coalesce` over :func:`ledger.translation.
      current_epoch` of the runs in write order, partition by partition (a property test
      compares them on random histories with rewinds, gaps, markers and epochs).
    * The input is any ``SELECT`` giving ``topic, {partition}, replica_topic, upstream_offset,
      downstream_offset, length, written_at, batch_id`` (``offset_syncs`` rows, or
      ``offset_sync_spans`` rows standing for spans, which order before the runs after them).
    * The output is ordered by topic, partition and write order; ``replica_topic`` is the
      partition's last run's, as the Python path takes it.
"""

from __future__ import annotations

__all__ = ["RUN_COLUMNS", "spans_sql"]

RUN_COLUMNS = ("topic, {partition}, replica_topic, upstream_offset, downstream_offset, length, "
               "written_at, batch_id")
"""What the input ``SELECT`` gives (``{partition}`` is quoted by ``ledger.engine``)."""

_UPTO = "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"


def spans_sql(runs: str, limit: int | None = None) -> str:
    """One statement: the current epoch's spans of every partition of ``runs``.

    Args:
        runs: a ``SELECT`` of :data:`RUN_COLUMNS` (may be a ``UNION ALL``).
        limit: at most this many spans come back (a caller that must know "more than N" asks
            for N + 1).

    Returns:
        SQL giving ``topic, partition, replica_topic, u, d, n, first_rn`` in topic, partition
        and write order; ``first_rn`` is the span's first run's position among all of the
        partition's input rows (1: the current epoch starts with the first row).
    """
    return f"""
WITH r AS ({runs}),
o AS (
  SELECT topic, {{partition}} AS p, replica_topic, upstream_offset AS u,
         downstream_offset AS d, length AS n,
         ROW_NUMBER() OVER w AS rn,
         CASE WHEN LAG(downstream_offset + length) OVER w IS NULL
                   OR downstream_offset < LAG(downstream_offset + length) OVER w
              THEN 1 ELSE 0 END AS start
  FROM r
  WINDOW w AS (PARTITION BY topic, {{partition}} ORDER BY written_at, batch_id,
                                                           downstream_offset)
),
e AS (
  SELECT *, SUM(start) OVER (PARTITION BY topic, p ORDER BY rn {_UPTO}) AS epoch FROM o
),
l AS (SELECT *, MAX(epoch) OVER (PARTITION BY topic, p) AS last_epoch FROM e),
c AS (SELECT topic, p, replica_topic, u, d, n, rn FROM l WHERE epoch = last_epoch),
pts AS (
  SELECT topic, p, rn, u + n AS at, 0 AS kind FROM c
  UNION ALL SELECT topic, p, rn, u AS at, 1 AS kind FROM c
  UNION ALL SELECT topic, p, rn, u + n AS at, 2 AS kind FROM c
),
b AS (
  SELECT topic, p, rn, kind,
         SUM(CASE WHEN kind = 0 THEN 1 ELSE 0 END)
           OVER (PARTITION BY topic, p ORDER BY at, kind {_UPTO}) AS below
  FROM pts
),
i AS (
  SELECT topic, p, rn, SUM(CASE WHEN kind = 2 THEN below ELSE -below END) AS inside
  FROM b WHERE kind > 0 GROUP BY topic, p, rn
),
k AS (
  SELECT c.topic, c.p, c.replica_topic, c.u, c.d, c.n, c.rn,
         CASE WHEN c.u = LAG(c.u + c.n) OVER v AND c.d = LAG(c.d + c.n) OVER v
                   AND LAG(i.inside) OVER v = 1 THEN 0 ELSE 1 END AS new_span
  FROM c JOIN i ON c.topic = i.topic AND c.p = i.p AND c.rn = i.rn
  WINDOW v AS (PARTITION BY c.topic, c.p ORDER BY c.rn)
),
s AS (
  SELECT *, SUM(new_span) OVER (PARTITION BY topic, p ORDER BY rn {_UPTO}) AS span FROM k
),
final AS (
  SELECT topic, p, span, MIN(rn) AS first_rn, MIN(u) AS u, MIN(d) AS d, SUM(n) AS n,
         LAST_VALUE(replica_topic ORDER BY rn) AS replica_topic
  FROM s GROUP BY topic, p, span
)
SELECT topic, p AS {{partition}}, replica_topic, u, d, n, first_rn FROM final
ORDER BY topic, p, first_rn{'' if limit is None else f' LIMIT {int(limit)}'}
"""
