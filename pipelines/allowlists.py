"""``offset-ledger topics|groups|reverse-checkpointed-topics``: ``srm-control``-style allowlists.

``--source X --target Y (--add NAME... | --remove NAME... | --list)`` edits the flow ``X->Y`` in
the configuration file (``config.path``) in place, with ruamel.yaml's round-trip mode, so every
comment, key order, quoting style and indentation of the file survives the edit.

* ``topics`` / ``groups`` edit ``flows["X->Y"].topics`` / ``.groups``: regexes, full match. When
  the key is absent the effective allowlist is the default ``[".*"]``; the first ``--add``
  replaces that implicit default with the explicit list ``[NAME]`` (as in SRM, an allowlist names
  what is replicated) and says so.
* ``reverse-checkpointed-topics`` edits ``flows["X->Y"]["reverse.checkpointed.topics"]``, SRM's
  ``srm-control reverse-checkpointed-topics --source B --target P --add P.Payments``: the source
  holds the replica, the target the original, and NAME is the replica's name on the source.

Invariants:
    * The file is only ever replaced whole and atomically (temporary file in the same folder,
      then ``os.replace``), and only after the would-be text has been parsed and validated by
      :func:`ledger.config.config_from_mapping` (which runs
      :func:`ledger.config.check_reverse_checkpointing`). A refused edit leaves the file
      byte-for-byte unchanged; so does a no-op (adding a name already present).
    * A flow written ``X->Y: true`` (or ``false``) becomes ``{enabled: <same>, <key>: [...]}``;
      its enabled state never changes, and no other key of the file is touched.
    * Every refusal is a :class:`~ledger.config.ConfigError` (``error: ...``, exit code 2).
    * Nothing here prints a property value other than the allowlist entries themselves, so secrets
      never reach the terminal (parse errors are reported by line, without the offending text).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
import tempfile
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, MarkedYAMLError, YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString
from ruamel.yaml.tokens import CommentToken
from ruamel.yaml.util import load_yaml_guess_indent

from ledger.config import Config, ConfigError, config_from_mapping, parse_flow

# verb -> (flow key, default allowlist when the key is absent, what the names are).
VERBS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "topics": ("topics", (".*",), "topics"),
    "groups": ("groups", (".*",), "consumer groups"),
    "reverse-checkpointed-topics": ("reverse.checkpointed.topics", (),
                                    "reverse-checkpointed topics"),
}


def add_arguments(parser: argparse.ArgumentParser, verb: str = "topics") -> None:
    what = VERBS[verb][2]
    parser.add_argument("--source", required=True, metavar="ALIAS",
                        help="source cluster alias of the flow"
                             + (" (the cluster holding the replica topic)"
                                if verb == "reverse-checkpointed-topics" else ""))
    parser.add_argument("--target", required=True, metavar="ALIAS",
                        help="target cluster alias of the flow"
                             + (" (the cluster holding the original topic)"
                                if verb == "reverse-checkpointed-topics" else ""))
    action = parser.add_mutually_exclusive_group(required=True)
    example = "P.Payments" if verb == "reverse-checkpointed-topics" else "Payments"
    if verb == "reverse-checkpointed-topics":
        add_help = ("add a replica topic on the source, named <target><separator><topic>, whose "
                    "group offsets are translated back to the target, e.g. P.Payments; repeatable")
    else:
        add_help = f"add a regex (full match) to the flow's {what}, e.g. {example}; repeatable"
    action.add_argument("--add", action="append", metavar="NAME", help=add_help)
    action.add_argument("--remove", action="append", metavar="NAME",
                        help=f"remove an entry from the flow's {what}; repeatable")
    action.add_argument("--list", action="store_true",
                        help=f"print the flow's effective {what}, one per line")


def run(args: argparse.Namespace, config: Config) -> int:
    verb = getattr(args, "_verb", "topics")
    key, default, what = VERBS[verb]
    source, target = config.cluster(args.source).alias, config.cluster(args.target).alias
    if source == target:
        raise ConfigError(f"--source and --target are both {source!r}; a flow needs two clusters")
    if config.path is None:
        raise ConfigError("the configuration was not loaded from a file; nothing to edit")
    path = Path(os.path.realpath(config.path))
    text = path.read_text()
    rt = _round_trip_yaml(text)
    doc = _load(rt, text, path)
    flows, flow_key = _find_flow(doc, source, target)
    where = f"flows.{source}->{target}.{key}"
    spec = flows[flow_key]
    current = _current(spec, key, where)

    if args.list:
        if current is None:
            for name in default:
                print(f"{name} (default)")
            if not default:
                print(f"note: {where} is empty", file=sys.stderr)
        else:
            for name in current:
                print(name)
            if not current:
                print(f"note: {where} is empty", file=sys.stderr)
        return 0

    effective = list(default) if current is None else list(current)
    if args.add:
        names = _dedupe(args.add)
        for name in names:
            _check_regex(where, name)
        new = [n for n in names if n not in effective]
        for name in names:
            if name in effective:
                how = " (by default)" if current is None else ""
                print(f"{name!r} is already in {where}{how}; nothing to add")
        if not new:
            return 0
        seq = _editable_seq(flows, flow_key, key, where, rt)
        width = _flow_width(rt, seq)
        for name in new:
            seq.append(_styled(seq, name))
        _keep_comment_gap(flows[flow_key], key, rt, seq, width)
        _commit(rt, doc, path, config)
        for name in new:
            print(f"added {name!r} to {where}")
        if current is None and default:
            print(f"note: {where} was not set, so the default {list(default)} allowed all "
                  f"{what}; it now lists only {new} (add more with --add)", file=sys.stderr)
        elif ".*" in seq and default:
            print(f"note: {where} still contains '.*', which matches every name; "
                  "remove it with --remove '.*' to restrict the flow", file=sys.stderr)
        return 0

    names = _dedupe(args.remove)
    missing = [n for n in names if n not in effective]
    if missing:
        shown = ", ".join(repr(n) for n in missing)
        listing = ", ".join(repr(n) for n in effective) or "nothing"
        marker = " (the default)" if current is None and effective else ""
        raise ConfigError(f"{where}: {shown} not present (it lists {listing}{marker}); "
                          "nothing changed")
    seq = _editable_seq(flows, flow_key, key, where, rt)
    width = _flow_width(rt, seq)
    for name in names:
        for i in reversed(range(len(seq))):
            if str(seq[i]) == name:
                del seq[i]
    _keep_comment_gap(flows[flow_key], key, rt, seq, width)
    _commit(rt, doc, path, config)
    for name in names:
        print(f"removed {name!r} from {where}")
    if not seq:
        consequence = {"topics": "the flow replicates no topics",
                       "groups": "no consumer group is checkpointed on this flow",
                       }.get(verb, "no group offsets are reverse-checkpointed on this flow")
        print(f"note: {where} is now empty: {consequence}", file=sys.stderr)
    return 0


# --- YAML round trip -----------------------------------------------------------------------


def _round_trip_yaml(text: str) -> YAML:
    """A round-trip dumper that writes the file's own indentation back."""
    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 4096  # never re-wrap long lines
    mapping = _guess_mapping_indent(text)
    try:  # ruamel's guess is about block sequences: the item indent and the dash offset
        _, sequence, offset = load_yaml_guess_indent(text)
    except YAMLError:
        sequence, offset = None, None
    if offset is None or not sequence:  # no block sequence in the file
        sequence, offset = mapping, 0
    rt.indent(mapping=mapping, sequence=sequence, offset=offset)
    return rt


def _guess_mapping_indent(text: str) -> int:
    """How far a nested mapping key is indented under its parent (2 when nothing is nested)."""
    parent: int | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped in ("---", "..."):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if parent is not None and indent > parent and not stripped.startswith("-"):
            return indent - parent
        content = stripped.split(" #", 1)[0].rstrip()
        parent = indent if content.endswith(":") and not stripped.startswith("-") else None
    return 2


def _load(rt: YAML, text: str, path: Path) -> CommentedMap:
    try:
        doc = rt.load(text)
    except YAMLError as exc:
        # The exception text can quote the offending line (a password, say): name only the line.
        mark = getattr(exc, "problem_mark", None) if isinstance(exc, MarkedYAMLError) else None
        line = f" near line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: cannot be edited in place ({type(exc).__name__}{line}); "
                          "fix the file by hand") from None
    if not isinstance(doc, CommentedMap):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return doc


def _find_flow(doc: CommentedMap, source: str, target: str) -> tuple[CommentedMap, Any]:
    flows = doc.get("flows")
    if isinstance(flows, CommentedMap):
        for name in flows:
            try:
                if parse_flow(str(name)) == (source, target):
                    return flows, name
            except ConfigError:
                continue
    raise ConfigError(f"flow {source}->{target} is not configured; add `{source}->{target}: true` "
                      "under flows")


def _lookup(mapping: Any, key: str) -> tuple[MutableMapping[Any, Any], str] | None:
    """Where a dotted key lives in a mapping written flat, nested or half-nested."""
    if not isinstance(mapping, MutableMapping):
        return None
    parts = key.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in mapping:
            if i == len(parts):
                return mapping, head
            found = _lookup(mapping[head], ".".join(parts[i:]))
            if found is not None:
                return found
    return None


def _current(spec: Any, key: str, where: str) -> list[str] | None:
    """The explicit list under ``key``, or None when the key is absent (the default applies)."""
    found = _lookup(spec, key)
    if found is None:
        return None
    value = found[0][found[1]]
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value]
    raise ConfigError(f"{where}: expected a list of regexes; edit it by hand")


def _editable_seq(flows: CommentedMap, flow_key: Any, key: str, where: str,
                  rt: YAML) -> CommentedSeq:
    """The sequence to edit in place, creating the flow mapping and the key if needed."""
    spec = flows[flow_key]
    trailing = None
    if not isinstance(spec, MutableMapping):
        spec, trailing = _to_mapping(flows, flow_key, spec, where, rt)
    found = _lookup(spec, key)
    if found is not None:
        container, name = found
        value = container[name]
        if isinstance(value, CommentedSeq):
            return value
        seq = _flow_seq([] if value is None else [value])
        container[name] = seq
        return seq
    if key in ("topics", "groups") and isinstance(spec.get(key), MutableMapping):
        # e.g. `topics: {exclude: [...]}`: there is no room for the list under the same key.
        raise ConfigError(f"{where}: written as a nested mapping; write the allowlist as "
                          f"`{key}: [...]` and the exclusions as `{key}.exclude: [...]`")
    seq = _flow_seq([])
    spec[key] = seq
    if trailing:  # comment lines that followed `X->Y: true` stay before the next key
        spec.ca.items[key] = [None, None, CommentToken(trailing, CommentMark(0), None), None]
    return seq


def _to_mapping(flows: CommentedMap, flow_key: Any, spec: Any, where: str,
                rt: YAML) -> tuple[CommentedMap, str | None]:
    """``X->Y: true`` -> ``X->Y: {enabled: true}`` (block style), keeping its comments in place.

    Returns the mapping and the comment lines that followed the flow (to go after its last key).
    """
    if isinstance(spec, bool):
        enabled = spec
    elif isinstance(spec, str) and spec.lower() in ("true", "false"):
        enabled = spec.lower() == "true"
    else:
        raise ConfigError(f"{where}: the flow is neither true/false nor a mapping; fix it by hand")
    mapping = CommentedMap()
    mapping["enabled"] = enabled
    comment = flows.ca.items.pop(flow_key, None)
    flows[flow_key] = mapping
    token = comment[2] if comment and len(comment) > 2 else None
    if token is None:
        return mapping, None
    rest = token.value
    if rest.startswith("#"):  # an end-of-line comment on the flow's line stays on that line
        first, _, rest = rest.partition("\n")
        # Same gap between value and comment: `P->B: true  # c` -> `enabled: true  # c`.
        key_column = flows.lc.key(flow_key)[1]
        value_end = flows.lc.value(flow_key)[1] + len(str(spec).lower())
        gap = max(1, token.column - value_end)
        column = key_column + _mapping_indent(rt) + len(f"enabled: {str(enabled).lower()}") + gap
        mapping.ca.items["enabled"] = [None, None, CommentToken(
            first + "\n", CommentMark(column), None), None]
    if not rest:
        return mapping, None
    return mapping, rest if rest.startswith("\n") else "\n" + rest


def _mapping_indent(rt: YAML) -> int:
    return int(rt.map_indent or 2)


def _flow_width(rt: YAML, seq: CommentedSeq) -> int | None:
    """The printed width of a flow-style list (None for a block list)."""
    if not seq.fa.flow_style():
        return None
    buffer = io.StringIO()
    rt.dump({"k": _flow_seq(list(seq))}, buffer)  # a copy: no comments attached
    return len(buffer.getvalue().rstrip("\n"))


def _keep_comment_gap(container: Any, key: str, rt: YAML, seq: CommentedSeq,
                      width: int | None) -> None:
    """Keep the gap before `  # comment` after a flow-style list that grew or shrank."""
    found = _lookup(container, key)
    after = _flow_width(rt, seq)
    if found is None or width is None or after is None:
        return
    parent, name = found
    entry = getattr(parent, "ca", None) and parent.ca.items.get(name)
    token = entry[2] if entry and len(entry) > 2 else None
    if token is not None and token.value.startswith("#") and token.column is not None:
        token.column = max(0, token.column + after - width)


def _flow_seq(items: list[Any]) -> CommentedSeq:
    seq = CommentedSeq(items)
    seq.fa.set_flow_style()
    return seq


def _styled(seq: CommentedSeq, name: str) -> Any:
    """A new entry quoted like the list's existing entries (ruamel quotes it anyway if needed)."""
    last = seq[-1] if len(seq) else None
    if isinstance(last, DoubleQuotedScalarString):
        return DoubleQuotedScalarString(name)
    if isinstance(last, SingleQuotedScalarString):
        return SingleQuotedScalarString(name)
    return name


def _check_regex(where: str, name: str) -> None:
    if not name:
        raise ConfigError(f"{where}: an empty name matches nothing")
    try:
        re.compile(name)
    except re.error as exc:
        raise ConfigError(f"{where}: invalid regex {name!r}: {exc}") from None


def _dedupe(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _commit(rt: YAML, doc: CommentedMap, path: Path, config: Config) -> None:
    """Validate the would-be file as a whole, then replace the file atomically."""
    buffer = io.StringIO()
    rt.dump(doc, buffer)
    text = buffer.getvalue()
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        raise ConfigError(f"{path}: the edit would not be valid YAML; nothing changed") from None
    # Raises ConfigError (check_reverse_checkpointing among others) before anything is written.
    config_from_mapping(raw, path=config.path)
    _atomic_write(path, text)


def _atomic_write(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
