"""``offset-ledger validate``: the Great Expectations suites of ``expectations/`` on the ledger."""
