"""Topic naming, as MirrorMaker 2's ``DefaultReplicationPolicy`` and ``IdentityReplicationPolicy``.

Invariants:
    * Under the default (prefix) policy the replica of ``Payments`` from ``P`` is ``P.Payments``
      (alias + separator + name), and ``upstream_topic(remote_topic(t)) == t``.
    * A topic whose name says it came from the target cluster is never replicated back there:
      :meth:`ReplicationPolicy.would_loop` is the single cycle-prevention test.
    * Internal topics (``__*``, ``*.internal``, ``*-internal``, the project's own) are never
      replicated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ledger.config import Config

INTERNAL_TOPIC = re.compile(r"(__.*|.*[.-]internal|.*\.replica|offset-ledger-.*|_schemas)")


@dataclass(frozen=True)
class ReplicationPolicy:
    """Names replica topics and tells where a topic came from."""

    separator: str = "."
    prefixless: bool = False

    @classmethod
    def from_config(cls, config: Config) -> ReplicationPolicy:
        return cls(config.replication_policy_separator, config.prefixless)

    def remote_topic(self, source_alias: str, topic: str) -> str:
        """The replica's name on the target: ``P.Payments`` for ``Payments`` from ``P``."""
        return topic if self.prefixless else f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias a replica came from (``P`` for ``P.Payments``); None for an original."""
        if self.prefixless or self.separator not in topic:
            return None
        return topic.split(self.separator, 1)[0]

    def upstream_topic(self, topic: str) -> str | None:
        """The name one hop upstream (``Payments`` for ``P.Payments``); None for an original."""
        if self.topic_source(topic) is None:
            return None
        return topic.split(self.separator, 1)[1]

    def original_topic(self, topic: str) -> str:
        """The name at the origin, however many hops away."""
        upstream = self.upstream_topic(topic)
        return topic if upstream is None else self.original_topic(upstream)

    def is_internal(self, topic: str) -> bool:
        return bool(INTERNAL_TOPIC.fullmatch(topic))

    def would_loop(self, topic: str, target_alias: str) -> bool:
        """Whether copying ``topic`` to ``target_alias`` would send records back where they began.

        Any hop in the name counts: ``B.X.Payments`` never goes back to ``B``.
        """
        name = topic
        while (source := self.topic_source(name)) is not None:
            if source == target_alias:
                return True
            name = self.upstream_topic(name) or name
        return False

    def replicable(self, topic: str, target_alias: str) -> bool:
        return not self.is_internal(topic) and not self.would_loop(topic, target_alias)
