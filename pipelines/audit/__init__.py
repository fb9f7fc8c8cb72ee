"""``offset-ledger audit``: the dbt marts over the ledger, printed or written as a report."""
