{#-
  The DESIGN.md translation rule in SQL; ledger/translation.py is the reference and
  tests/dbt/test_translation_property.py checks that both agree.

  runs_with_epochs(relation, extra_keys): the runs of `relation` (staging columns of
  offset_syncs) with write_seq (write order within the flow partition: written_at, batch_id,
  downstream_offset), starts_epoch (d below the previous run's end, or the first run),
  epoch (running count of epoch starts) and is_current_epoch.

  forward_translate / reverse_translate(positions, runs, join_on, position_keys, offset_column):
  one row per position (a group's committed offset, `offset_column`), with the run columns of
  the deciding candidate (run_*), candidate_kind, candidate_offset, translated_offset
  (NULL when not translatable: never -1), translation_status ('translated' |
  'untranslatable') and translation_reason. `join_on` pairs (position column, run column)
  select the position's flow partition; `position_keys` identify a position.

  forward(x): untranslatable unless a run of the current epoch has u <= x; else the smallest of
    first_record  d + max(0, x - u)     for runs with u + n > x
    run_end       d + n                 for runs with u + n <= x and no run starting in
                                        [u + n, x], i.e. max{u' : u' <= x} < u + n
  reverse(c): over current-epoch runs with d <= c the largest u + min(c - d, n) (next_unread);
    untranslatable when there is none.
  Ties go to the latest-written run.
-#}

{% macro runs_with_epochs(relation, extra_keys=[]) -%}
  {%- set part = (extra_keys + ['flow', 'topic', 'partition_id']) | join(', ') -%}
    select
        numbered.*,
        numbered.epoch = max(numbered.epoch) over (partition by {{ part }}) as is_current_epoch
    from (
        select
            flagged.*,
            sum(case when flagged.starts_epoch then 1 else 0 end) over (
                partition by {{ part }} order by flagged.write_seq
                rows between unbounded preceding and current row
            ) as epoch
        from (
            select
                sequenced.*,
                coalesce(
                    sequenced.downstream_offset < lag(
                        sequenced.downstream_offset + sequenced.run_length
                    ) over (partition by {{ part }} order by sequenced.write_seq),
                    true
                ) as starts_epoch
            from (
                select
                    runs.*,
                    row_number() over (
                        partition by {{ part }}
                        order by written_at, batch_id, downstream_offset, upstream_offset
                    ) as write_seq
                from {{ relation }} as runs
            ) as sequenced
        ) as flagged
    ) as numbered
{%- endmacro %}


{% macro _join_position_runs(positions, runs, join_on, position_keys, offset_column) -%}
  {%- set part = [] -%}
  {%- for key in position_keys -%}{%- do part.append('positions.' ~ key) -%}{%- endfor -%}
            select
                positions.*,
                runs.upstream_offset as run_upstream_offset,
                runs.downstream_offset as run_downstream_offset,
                runs.run_length as run_length,
                runs.run_id as run_id,
                runs.batch_id as run_batch_id,
                runs.written_at as run_written_at,
                runs.write_seq as run_write_seq,
                runs.epoch as run_epoch,
                max(case when runs.upstream_offset <= positions.{{ offset_column }}
                         then runs.upstream_offset end)
                    over (partition by {{ part | join(', ') }}) as max_start_at_or_below,
                count(runs.upstream_offset)
                    over (partition by {{ part | join(', ') }}) as epoch_run_count
            from {{ positions }} as positions
            left join (
                select * from {{ runs }} where is_current_epoch
            ) as runs
                on {% for pos_col, run_col in join_on -%}
                positions.{{ pos_col }} = runs.{{ run_col }}{{ " and " if not loop.last }}
                {%- endfor %}
{%- endmacro %}


{% macro forward_translate(positions, runs, join_on, position_keys, offset_column) -%}
  {%- set x = 'joined.' ~ offset_column -%}
  {%- set candidates -%}
                case
                    when joined.run_upstream_offset + joined.run_length > {{ x }}
                        then 'first_record'
                    when joined.max_start_at_or_below
                         < joined.run_upstream_offset + joined.run_length
                        then 'run_end'
                end as candidate_kind,
                case
                    when joined.run_upstream_offset + joined.run_length > {{ x }}
                        then joined.run_downstream_offset
                             + greatest(0, {{ x }} - joined.run_upstream_offset)
                    when joined.max_start_at_or_below
                         < joined.run_upstream_offset + joined.run_length
                        then joined.run_downstream_offset + joined.run_length
                end as candidate_offset
  {%- endset -%}
  {{ _best_candidate(positions, runs, join_on, position_keys, offset_column, candidates,
                     best='asc', translatable='ranked.max_start_at_or_below is not null') }}
{%- endmacro %}


{% macro reverse_translate(positions, runs, join_on, position_keys, offset_column) -%}
  {%- set c = 'joined.' ~ offset_column -%}
  {%- set candidates -%}
                case when joined.run_downstream_offset <= {{ c }}
                     then 'next_unread' end as candidate_kind,
                case when joined.run_downstream_offset <= {{ c }}
                     then joined.run_upstream_offset
                          + least({{ c }} - joined.run_downstream_offset, joined.run_length)
                end as candidate_offset
  {%- endset -%}
  {{ _best_candidate(positions, runs, join_on, position_keys, offset_column, candidates,
                     best='desc', translatable='ranked.candidate_offset is not null') }}
{%- endmacro %}


{#- Both directions: every run's candidate for the position (`candidates`: the select list
    of candidate_kind and candidate_offset over `joined`), the best one kept (`best`: the
    smallest, 'asc', or the largest, 'desc'; ties to the latest-written run), and the
    position translated when `translatable` holds of it. -#}
{% macro _best_candidate(positions, runs, join_on, position_keys, offset_column, candidates,
                         best, translatable) -%}
    select
        ranked.*,
        case when {{ translatable }} then ranked.candidate_offset end as translated_offset,
        case when {{ translatable }}
             then 'translated' else 'untranslatable' end as translation_status,
        case
            when ranked.epoch_run_count = 0 then 'no runs recorded for the partition'
            when not ({{ translatable }})
                then 'offset before the first run of the current epoch'
        end as translation_reason
    from (
        select
            candidates.*,
            row_number() over (
                partition by {{ position_keys | join(', ') }}
                order by
                    case when candidates.candidate_offset is null then 1 else 0 end,
                    candidates.candidate_offset {{ best }},
                    candidates.run_write_seq desc
            ) as candidate_rank
        from (
            select
                joined.*,
{{ candidates }}
            from (
                {{ _join_position_runs(positions, runs, join_on, position_keys, offset_column) }}
            ) as joined
        ) as candidates
    ) as ranked
    where ranked.candidate_rank = 1
{%- endmacro %}
