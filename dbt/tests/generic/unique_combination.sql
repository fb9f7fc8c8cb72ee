{#- No two rows share the values of `columns` (the model's grain). -#}
{% test unique_combination(model, columns) %}

select {{ columns | join(', ') }}, count(*) as row_count
from {{ model }}
group by {{ columns | join(', ') }}
having count(*) > 1

{% endtest %}
