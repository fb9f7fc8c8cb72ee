"""The expectations of each ledger table, by stable check name.

Every suite also checks the table's columns against ``ledger.schemas.TABLES`` (the one
definition): ``columns_match_definition`` (names and order; Delta enforces the types), and the
string columns it names are those ``no_configured_secret`` searches.

Cross-table checks query temporary views named ``offset_ledger_gx_<table>`` (every ledger
table, registered by the runner) and ``offset_ledger_gx_secrets`` (one ``secret`` column);
``{batch}`` is the table under validation.
"""

from __future__ import annotations

from collections.abc import Callable

from ledger.schemas import (
    ACL_SYNCS,
    CHECKPOINTS,
    GROUP_OFFSETS,
    NATURAL_KEYS,
    OFFSET_SYNC_SPANS,
    OFFSET_SYNCS,
    OPERATION_CHECKPOINTS,
    OPERATION_RUNS,
    OPERATIONS,
    REPLICATION_PROGRESS,
    RESUME_POINTS,
    STRING,
    STRINGS,
    TABLES,
)

# Checks that hold of every table by construction (Delta enforces the schema on write): a row
# appended to a table cannot break them, only a table created otherwise can.
SCHEMA_CHECKS = ("columns_match_definition",)

VIEW_PREFIX = "offset_ledger_gx_"
SECRETS_VIEW = f"{VIEW_PREFIX}secrets"


def view(table: str) -> str:
    return f"{VIEW_PREFIX}{table}"


def _gxe():
    import great_expectations.expectations as gxe

    return gxe


def _between(check: str, column: str, min_value: int, description: str):
    return _gxe().ExpectColumnValuesToBeBetween(
        column=column, min_value=min_value, meta={"check": check}, description=description)


def _in_set(check: str, column: str, values: list[str]):
    return _gxe().ExpectColumnValuesToBeInSet(
        column=column, value_set=values, meta={"check": check},
        description=f"{column} is one of {', '.join(values)}")


def _rows(check: str, query: str, description: str):
    return _gxe().UnexpectedRowsExpectation(
        unexpected_rows_query=query, meta={"check": check}, description=description)


def _q(column: str) -> str:
    return f"`{column}`"


def _unique_key(table: str):
    keys = ", ".join(_q(k) for k in NATURAL_KEYS[table])
    return _rows(
        "natural_key_unique",
        f"SELECT t.* FROM {{batch}} t JOIN (SELECT {keys} FROM {{batch}} GROUP BY {keys} "
        f"HAVING count(*) > 1) d USING ({keys})",
        f"no two rows share the natural key ({', '.join(NATURAL_KEYS[table])})")


def _columns(table: str):
    return _gxe().ExpectTableColumnsToMatchOrderedList(
        column_list=TABLES[table].column_names, meta={"check": "columns_match_definition"},
        description="the columns, in order, of ledger/schemas.py")


def _no_secrets(table: str):
    conditions = []
    for column in TABLES[table].columns:
        if column.type == STRING:
            conditions.append(f"instr(t.{_q(column.name)}, s.secret) > 0")
        elif column.type == STRINGS:
            conditions.append(f"exists(t.{_q(column.name)}, x -> instr(x, s.secret) > 0)")
    condition = " OR ".join(conditions) or "false"
    return _rows(
        "no_configured_secret",
        f"SELECT t.* FROM {{batch}} t LEFT SEMI JOIN {SECRETS_VIEW} s ON ({condition})",
        "no string column holds a secret value of the configuration")


def _run_shape(what: str) -> list:
    """A run's (or a span's) length and offsets."""
    return [
        _between("length_positive", "length", 1, f"every {what} holds at least one record"),
        _between("upstream_offset_non_negative", "upstream_offset", 0, "u >= 0"),
        _between("downstream_offset_non_negative", "downstream_offset", 0, "d >= 0"),
    ]


def _offset_syncs() -> list:
    # Write order per flow partition: (written_at, batch_id, downstream_offset). A run below the
    # previous run's end starts a new epoch (truncated replica), which cannot happen inside one
    # micro-batch: there it means two runs of one epoch share downstream offsets.
    overlap = (
        "SELECT * FROM (SELECT r.*, "
        "lag(downstream_offset + length) OVER w AS previous_end, "
        "lag(run_id) OVER w AS previous_run_id, lag(batch_id) OVER w AS previous_batch_id "
        "FROM {batch} r WINDOW w AS (PARTITION BY flow, topic, `partition` "
        "ORDER BY written_at, batch_id, downstream_offset, upstream_offset)) "
        "WHERE downstream_offset < previous_end AND run_id = previous_run_id "
        "AND batch_id = previous_batch_id")
    return [
        *_run_shape("run"),
        _rows("flow_matches_clusters",
              "SELECT * FROM {batch} WHERE flow <> concat(source_cluster, '->', target_cluster)",
              "flow is source_cluster->target_cluster"),
        _rows("epoch_runs_disjoint_downstream", overlap,
              "runs of one flow partition and epoch never share a downstream offset"),
    ]


def _checkpoint_status() -> list:
    """A checkpoint row's status and direction, and NULL exactly when untranslatable."""
    return [
        _in_set("status_known", "status", ["translated", "untranslatable", "held"]),
        _in_set("direction_known", "direction", ["forward", "reverse"]),
        _rows("untranslatable_iff_null",
              "SELECT * FROM {batch} WHERE (status = 'untranslatable') <> "
              "(target_offset IS NULL)",
              "target_offset is NULL exactly when status is 'untranslatable'"),
    ]


def _checkpoints() -> list:
    backwards = (
        "SELECT * FROM (SELECT c.*, last(target_offset, true) OVER (PARTITION BY direction, "
        "flow, group_id, source_cluster, source_topic, `partition` ORDER BY checkpointed_at, "
        "checkpoint_id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS previous_target "
        "FROM {batch} c) WHERE target_offset < previous_target AND NOT group_rewound")
    return [
        _between("source_offset_non_negative", "source_offset", 0, "committed offsets >= 0"),
        _between("target_offset_non_negative", "target_offset", 0,
                 "translated offsets >= 0 (NULL when untranslatable, never -1)"),
        *_checkpoint_status(),
        _rows("never_backwards_unless_rewound", backwards,
              "checkpoints never move backwards per group partition unless the group rewound"),
    ]


def _group_offsets() -> list:
    return [_between("committed_offset_non_negative", "committed_offset", 0,
                     "committed offsets >= 0")]


def _resume_points() -> list:
    unmatched = (
        f"SELECT r.* FROM {{batch}} r LEFT ANTI JOIN {view(CHECKPOINTS)} c "
        "ON c.checkpoint_id = r.checkpoint_id AND c.group_id = r.group_id "
        "AND c.`partition` = r.`partition` AND c.target_cluster = r.cluster "
        "AND c.target_topic = r.topic AND c.target_offset = r.`offset` "
        "WHERE r.checkpoint_id IS NOT NULL")
    return [
        _between("offset_non_negative", "offset", 0, "written offsets >= 0"),
        _between("previous_offset_non_negative", "previous_offset", 0, "previous offsets >= 0"),
        _in_set("reason_known", "reason", ["group_offset_sync", "failover", "failback"]),
        _rows("matches_a_checkpoint", unmatched,
              "every resume point with a checkpoint_id matches that checkpoint's translation"),
    ]


def _operations() -> list:
    versions = ("offset_syncs_version", "checkpoints_version", "group_offsets_version",
                "resume_points_version")
    missing = " OR ".join(f"{v} IS NULL OR {v} < 0" for v in versions)
    return [
        _in_set("kind_known", "kind", ["failover", "failback"]),
        _in_set("status_known", "status", ["completed", "failed"]),
        _between("seconds_to_ready_non_negative", "seconds_to_ready", 0,
                 "seconds_to_ready >= 0"),
        _rows("ready_after_start", "SELECT * FROM {batch} WHERE ready_at < started_at",
              "ready_at is not before started_at"),
        _rows("completed_records_versions",
              f"SELECT * FROM {{batch}} WHERE status = 'completed' AND ({missing})",
              "a completed operation records the ledger versions it used"),
    ]


def _replication_progress() -> list:
    return [
        _between("lag_non_negative", "lag", 0, "lag >= 0"),
        _between("next_upstream_offset_non_negative", "next_upstream_offset", 0,
                 "next_upstream_offset >= 0"),
        _rows("next_is_last_plus_one",
              "SELECT * FROM {batch} WHERE next_upstream_offset <> last_upstream_offset + 1",
              "next_upstream_offset = last_upstream_offset + 1"),
    ]


def _same_version_as_operation(column: str):
    # Evidence is written before its operations row: a row whose operation is missing is a
    # crash between the two (no audit reads it), never a mismatch.
    return _rows(
        "version_matches_operation",
        f"SELECT e.* FROM {{batch}} e JOIN {view(OPERATIONS)} o USING (operation_id) "
        f"WHERE e.{column} <> o.{column}",
        f"evidence was recorded at the {column} its operation records")


def _spans_of_one_epoch(key: str, what: str):
    overlap = (
        "SELECT * FROM (SELECT r.*, lag(downstream_offset + length) OVER (PARTITION BY "
        f"{key}, flow, topic, `partition` ORDER BY batch_id, downstream_offset) "
        "AS previous_end "
        "FROM {batch} r) WHERE downstream_offset < previous_end")
    return _rows("spans_of_one_epoch", overlap,
                 f"{what} spans of a flow partition are one epoch: they never go back "
                 "downstream")


def _operation_runs() -> list:
    return [
        *_run_shape("span"),
        _spans_of_one_epoch("operation_id", "an operation's"),
        _same_version_as_operation("offset_syncs_version"),
    ]


def _offset_sync_spans() -> list:
    mixed = ("SELECT s.* FROM {batch} s JOIN (SELECT flow FROM {batch} GROUP BY flow HAVING "
             "count(DISTINCT offset_syncs_version) > 1 OR count(DISTINCT covered_until) > 1) m "
             "USING (flow)")
    beyond = (
        "SELECT s.* FROM {batch} s LEFT JOIN (SELECT flow, topic, `partition`, "
        "max(downstream_offset + length) AS recorded_end "
        f"FROM {view(OFFSET_SYNCS)} GROUP BY flow, topic, `partition`) r "
        "USING (flow, topic, `partition`) "
        "WHERE r.recorded_end IS NULL OR s.downstream_offset + s.length > r.recorded_end")
    unseekable = (
        "SELECT * FROM {batch} WHERE (seek_upstream_offset IS NULL) <> "
        "(seek_downstream_offset IS NULL) OR (seek_downstream_offset IS NOT NULL AND "
        "(batch_id = 0 OR seek_downstream_offset >= downstream_offset "
        "OR seek_upstream_offset > upstream_offset))")
    return [
        *_run_shape("span"),
        _spans_of_one_epoch("offset_syncs_version", "a snapshot's"),
        _rows("one_snapshot_per_flow", mixed,
              "all spans of a flow come from one offset_syncs version and one covered_until"),
        _rows("within_recorded_runs", beyond,
              "every span lies within the runs offset_syncs records for its flow partition"),
        _rows("seek_floors_below_the_window", unseekable,
              "a windowed partition's seek floors lie below every span of its window, on both "
              "sides or on neither; a partition held whole has none"),
    ]


def _operation_checkpoints() -> list:
    return [
        *_checkpoint_status(),
        _same_version_as_operation("checkpoints_version"),
    ]


def _acl_syncs() -> list:
    return [
        _in_set("action_known", "action", ["added", "removed"]),
        _in_set("permission_known", "permission_type", ["ALLOW", "DENY"]),
        _in_set("pattern_known", "pattern_type", ["LITERAL", "PREFIXED"]),
    ]


SUITES: dict[str, Callable[[], list]] = {
    OFFSET_SYNCS: _offset_syncs,
    CHECKPOINTS: _checkpoints,
    GROUP_OFFSETS: _group_offsets,
    RESUME_POINTS: _resume_points,
    OPERATIONS: _operations,
    REPLICATION_PROGRESS: _replication_progress,
    OPERATION_RUNS: _operation_runs,
    OPERATION_CHECKPOINTS: _operation_checkpoints,
    OFFSET_SYNC_SPANS: _offset_sync_spans,
    ACL_SYNCS: _acl_syncs,
}


def expectations_for(table: str) -> list:
    """The table's expectations: its columns, its own checks, natural-key uniqueness, no
    secrets."""
    return [_columns(table), *SUITES[table](), _unique_key(table), _no_secrets(table)]


def check_names(table: str) -> list[str]:
    return [e.meta["check"] for e in expectations_for(table)]
