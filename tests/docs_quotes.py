"""The output lines the README's runbooks quote, and how a test compares one with what a verb
printed (``tests/e2e/test_runbook_lines.py`` runs the verbs; ``tests/test_docs.py`` checks
that the README still quotes each line word for word).

In a quote, ``G`` is the group and ``Payments`` the topic (the test's own unique names),
``<operation id>`` any id, ``...`` any text to the end, and ``2.1s`` any duration.
"""

from __future__ import annotations

import re

QUOTES = {
    "ready to fail over": "group G, flow P->B: ready to fail over P -> B",
    "cutoff ready": "cutoff: ready once producers to P have stopped (group read everything, "
                    "replication caught up)",
    "failover line": "failover <operation id> (continuous): group G P -> B, ready in 2.1s",
    "subscribe on B": "subscribe on B: P.Payments, Payments",
    "ready to fail back": "group G, flow B->P: ready to fail back B -> P",
    "failback line": "failback <operation id> (continuous): group G B -> P, ready in ...",
    "subscribe on P": "subscribe on P: B.Payments, Payments",
    "P lost": "flow P->B: unknown: cluster P is unreachable at ...",
    "disaster mode": "disaster mode (--disaster): P is not contacted; ...",
    "disaster failover": "failover <operation id> (disaster): ...",
    "active members": "group G has N active member(s) on cluster P",
}


def pattern(quote: str, group: str, topic: str) -> re.Pattern[str]:
    """The regular expression a printed line must match for ``quote``."""
    holes = {"<operation id>": r"\S+", "...": r".*", "2.1s": r"[0-9.]+s"}
    words = {"N": r"[0-9]+", "G": re.escape(group), "Payments": re.escape(topic)}
    parts = re.split(r"(<operation id>|\.\.\.|\b2\.1s|\bN\b|\bG\b|\bPayments\b)", quote)
    return re.compile("".join(holes.get(part) or words.get(part) or re.escape(part)
                              for part in parts))


def assert_printed(key: str, output: str, group: str, topic: str) -> None:
    """``output`` has a line that contains the README's quote ``key`` (names filled in)."""
    regex = pattern(QUOTES[key], group, topic)
    assert any(regex.search(line) for line in output.splitlines()), (
        f"the README quotes {QUOTES[key]!r}; the verb printed:\n{output}")
