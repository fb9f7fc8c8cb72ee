{#-
  How the audit reads the ledger as each operation saw it.

  * time travel: the ledger table read at the Delta version the operation recorded
    (operation_reads), for operations int_audited_operations marks 'time_travel';
  * recorded evidence: the rows the operation recorded with itself (evidence_reads, tables
    operation_runs and operation_checkpoints), for operations past the time-travel horizon.

  Both give the staging columns of the table, preceded by the operation's id (column `tag`)
  and read_version, so a model unions them. The audit runner decides which operations are
  audited and which read evidence (vars audit_operations and evidence_operations).
-#}

{#- `column in (ids)` with literal ids (so Delta skips other operations' files); `false` for
    no ids. -#}
{% macro id_in(column, ids) -%}
  {%- if ids | length == 0 -%}
    false
  {%- else -%}
    {{ column }} in ({% for id in ids %}'{{ id | replace("'", "''") }}'{{ ", " if not loop.last }}{% endfor %})
  {%- endif -%}
{%- endmacro %}


{#- The operations being audited (var audit_operations): `true` when all are. -#}
{% macro audited_filter(column) -%}
  {%- set ids = var('audit_operations', none) -%}
  {{ 'true' if ids is none else id_in(column, ids) }}
{%- endmacro %}


{#-
  The ledger table `table` read at the Delta version each time-travelled operation recorded
  in `version_column`; an operation that recorded no version reads the current (or --as-of)
  version. `own_rows` ({staging column: operations column}) keeps only the operation's own
  rows (e.g. its group's), as literal predicates that Delta pushes down. The versions are
  fetched with run_query when the model runs, so the SQL carries literal VERSION AS OF
  clauses: one read per audited operation, none for the others.
-#}
{% macro operation_reads(table, version_column, tag='operation_id', own_rows={}) -%}
  {%- set operations_relation = ref('int_audited_operations') -%}
  {%- set reads = [] -%}
  {%- if execute -%}
    {%- set result = run_query(
        "select operation_id, " ~ version_column ~ " as version"
        ~ ((', ' ~ (own_rows.values() | join(', '))) if own_rows else '')
        ~ " from " ~ operations_relation
        ~ " where audit_source = 'time_travel' order by operation_id") -%}
    {%- for row in result.rows -%}
      {%- do reads.append(row) -%}
    {%- endfor -%}
  {%- endif -%}
  {%- if reads | length == 0 %}
    select
        cast(null as string) as {{ tag }},
        cast(null as bigint) as read_version,
        staged.*
    from (
        {{ staging_select(table, ledger_relation(table)) }}
    ) as staged
    where 1 = 0
  {%- else -%}
    {%- for row in reads %}
    {%- set version = row[1] %}
    select
        '{{ row[0] | replace("'", "''") }}' as {{ tag }},
        cast({{ 'null' if version is none else version | int }} as bigint) as read_version,
        staged.*
    from (
        {{ staging_select(table, ledger_relation(table, version)) }}
    ) as staged
    where true
    {%- for column in own_rows %}
        and staged.{{ column }} = '{{ row[2 + loop.index0] | replace("'", "''") }}'
    {%- endfor %}
    {{ "union all" if not loop.last }}
    {%- endfor -%}
  {%- endif -%}
{%- endmacro %}


{#-
  The evidence an operation recorded in `evidence_table` (operation_runs: spans with the
  columns of offset_syncs; operation_checkpoints: checkpoint rows), as the staging columns of
  `table`, for the operations audited from recorded evidence.
-#}
{% macro evidence_reads(table, evidence_table, version_column, tag='operation_id') -%}
    select
        evidence.operation_id as {{ tag }},
        cast(evidence.{{ version_column }} as bigint) as read_version,
    {%- for column, name, type in staging_spec(table) %}
        cast(evidence.{{ adapter.quote(column) }} as {{ type }}) as {{ name }}{{ "," if not loop.last }}
    {%- endfor %}
    from {{ ledger_relation(evidence_table) }} as evidence
    inner join {{ ref('int_audited_operations') }} as audited
        on evidence.operation_id = audited.operation_id
    where audited.audit_source = 'recorded_evidence'
        and {{ audited_filter('evidence.operation_id') }}
{%- endmacro %}
