"""Developer tools: what the demo, the tests and the benchmarks start, never a production job.

    clusters          the embedded KRaft clusters (``offset-ledger clusters up|down|status``)
    cluster_security  their secured variants (SASL_SSL with SCRAM, mTLS) and ACLs
    workload          plain confluent-kafka producers and consumers of the reference scenario
    demo              ``offset-ledger demo``: the reference failover/failback scenario

Invariants:
    * A production verb never imports these; the CLI reaches them only for ``clusters`` and
      ``demo``.
"""
