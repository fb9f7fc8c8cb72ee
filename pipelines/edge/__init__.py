"""The Kafka edge: everything the jobs ask of a cluster other than copying records.

    kafka_errors    every librdkafka error classified once (unreachable, authentication,
                    TLS, authorization, ...), secrets never in a message
    kafka_admin     admin work (topics, configs, groups, ACLs), one client per cluster per
                    command; every failure a classified ``KafkaAdminError``
    kafka_offsets   every offset read (earliest, latest, committed, by time)
    preflight       the checks an operator verb makes before anything starts

Invariants:
    * Imports only ``ledger`` and each other (errors <- admin <- offsets, preflight): never a
      job, the CLI or Spark.
    * Not named ``kafka``: kafka-python is imported by that name.
"""
