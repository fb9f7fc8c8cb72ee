"""ACLs across a flow: MirrorMaker 2's topic ACL sync (and group ACLs, opt-in) and the
permission check of a move. ``rules`` is pure (plain data in, plain data out); ``sync`` and
``check`` do the Kafka and ledger I/O around it."""
