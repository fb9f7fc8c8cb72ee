{#-
  The ledger table `name`, optionally time travelled.

  * version given: `<source> VERSION AS OF <version>` (Delta syntax: Spark and Databricks).
  * otherwise var('as_of_versions')[name] when the audit was asked for an --as-of point.
  * otherwise the current version.
-#}
{% macro ledger_relation(name, version=none) -%}
  {%- set as_of = var('as_of_versions', {}) -%}
  {%- if version is none and as_of is mapping and name in as_of -%}
    {%- set version = as_of[name] -%}
  {%- endif -%}
  {{ source('ledger', name) }}{% if version is not none %} VERSION AS OF {{ version | int }}{% endif %}
{%- endmacro %}
