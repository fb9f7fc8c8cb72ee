"""``offset-ledger status``: replication lag per flow partition and group readiness to move."""
