{#- Every row satisfies the boolean SQL `expression` (rows where it is false or NULL fail). -#}
{% test expression_holds(model, expression, column_name=none) %}

select *
from {{ model }}
where not coalesce({{ expression }}, false)

{% endtest %}
