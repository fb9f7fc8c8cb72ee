"""A Spark Structured Streaming query's checkpoint, read as files (no JVM), and its successor.

The part of a checkpoint that holds Kafka offsets (Spark 3.x and 4.0, ``HDFSMetadataLog``)::

    <checkpoint>/metadata       {"id":"<query id>"}
    <checkpoint>/offsets/<N>    v1                                                  version line
                                {"batchWatermarkMs":0,"batchTimestampMs":...,"conf":{...}}
                                {"Payments":{"0":1000,"1":800}}     one line per source ("-":
                                                                     none yet), in source order
    <checkpoint>/commits/<N>    v1
                                {"nextBatchWatermarkMs":0}

    offsets/N   written BEFORE batch N runs: where batch N ends (next offsets to read)
    commits/N   written AFTER batch N's sink committed
    offsets/7 + commits/7, offsets/8 alone:  batch 8 is planned, running or was cut short;
                                             the query has processed exactly up to offsets/7

A moved query resumes at the offsets of the newest batch that has a commit. It starts as a new
query (a new checkpoint location, with ``startingOffsets``), because Spark refuses a checkpoint
whose source options changed and would apply P's offsets to B's topics.

Invariants:
    * Reads only; the one write is :func:`write_resume` (a new file, never overwriting one) and
      no file of the query's checkpoint is ever modified.
    * Only a local (or mounted: ``/dbfs``, ``/Volumes``) path or a ``file:`` URI is read; other
      schemes are refused with what to do (docs/spark-queries.md).
    * A source line that is not a Kafka source's offsets, a void source, an unknown log
      version or a checkpoint with no committed batch is an error naming the file: nothing is
      guessed.
    * :meth:`Checkpoint.fingerprint` changes whenever Spark writes a batch or a commit, which is
      how a running query is detected (pipelines/failover/spark_query.py).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import OffsetLedgerError
from pipelines.checkpoint import offsets as offsets_json

LOG_VERSIONS = ("v1",)
"""``offsets/`` log versions this reader knows (Spark 2.x to 4.0 write v1)."""

_SUCCESSOR = re.compile(r"-on-[A-Za-z0-9_]+-\d{8}T\d{6}$")


class SparkCheckpointError(OffsetLedgerError):
    """The path is not a readable Spark checkpoint, or holds something this tool cannot use."""


@dataclass(frozen=True)
class Checkpoint:
    """What a failover needs of a query's checkpoint, read at one moment."""

    path: Path
    query_id: str | None
    batch_id: int                                  # newest batch with a commit
    sources: tuple[offsets_json.Offsets, ...]      # its offsets, one per source
    newest_planned: int                            # newest batch in offsets/
    listing: tuple[tuple[str, int, int], ...]      # (file, size, mtime ns) of the logs

    @property
    def uncommitted(self) -> list[int]:
        """Batches planned after the newest commit (cut short, or the query is running)."""
        return list(range(self.batch_id + 1, self.newest_planned + 1))

    def fingerprint(self) -> tuple[tuple[str, int, int], ...]:
        return self.listing


def local_path(location: str) -> Path:
    """A checkpoint location as a local path; cloud URIs are refused with what to do."""
    if location.startswith("file://"):
        location = location[len("file://"):]
    elif location.startswith("file:"):
        location = location[len("file:"):]
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:/", location):
        scheme = location.split(":", 1)[0]
        raise SparkCheckpointError(
            f"checkpoint {location}: {scheme}: locations are not read directly; give the path "
            "it is mounted at (on Databricks /dbfs/... for dbfs:/, /Volumes/... for a Unity "
            "Catalog volume), or copy offsets/, commits/ and metadata to a local folder "
            "(docs/spark-queries.md)")
    return Path(location).expanduser().absolute()


def _batches(folder: Path) -> dict[int, Path]:
    if not folder.is_dir():
        return {}
    return {int(p.name): p for p in folder.iterdir() if p.name.isdigit() and p.is_file()}


def _listing(path: Path) -> tuple[tuple[str, int, int], ...]:
    entries = []
    for sub in ("offsets", "commits"):
        folder = path / sub
        if folder.is_dir():
            for p in folder.iterdir():
                st = p.stat()
                entries.append((f"{sub}/{p.name}", st.st_size, st.st_mtime_ns))
    return tuple(sorted(entries))


def parse_offsets_log(text: str, where: str) -> tuple[dict, list[offsets_json.Offsets | None]]:
    """``offsets/N``: the batch metadata and, per source, its offsets (``None``: void ``-``)."""
    lines = text.split("\n")
    if not lines or lines[0].strip() not in LOG_VERSIONS:
        raise SparkCheckpointError(f"{where}: log version {lines[0].strip()[:20]!r} is not one "
                                   f"this tool reads ({', '.join(LOG_VERSIONS)})")
    if len(lines) < 2:
        raise SparkCheckpointError(f"{where}: no batch metadata line")
    try:
        metadata = json.loads(lines[1]) if lines[1].strip() else {}
    except json.JSONDecodeError as exc:
        raise SparkCheckpointError(f"{where}: batch metadata is not JSON ({exc})") from None
    sources: list[offsets_json.Offsets | None] = []
    for i, line in enumerate(lines[2:]):
        if not line.strip():
            continue
        if line.strip() == "-":
            sources.append(None)
            continue
        try:
            sources.append(offsets_json.parse(line, f"{where} source {i}"))
        except offsets_json.OffsetsFormatError as exc:
            raise SparkCheckpointError(
                f"{exc}: not a Kafka source's offsets (only Kafka sources can be moved)") from None
    if not sources:
        raise SparkCheckpointError(f"{where}: no source offsets")
    return metadata, sources


def read(location: str | Path) -> Checkpoint:
    """The newest committed batch of the checkpoint at ``location`` and a fingerprint."""
    path = location if isinstance(location, Path) else local_path(location)
    if not path.is_dir():
        raise SparkCheckpointError(f"checkpoint {path}: no such directory")
    listing = _listing(path)  # before the reads: a batch written meanwhile changes it
    offsets, commits = _batches(path / "offsets"), _batches(path / "commits")
    if not offsets:
        raise SparkCheckpointError(
            f"checkpoint {path}: no offsets/ batches (not a streaming query's checkpoint, or "
            "the query never planned a batch)")
    committed = sorted(set(offsets) & set(commits))
    if not committed:
        raise SparkCheckpointError(
            f"checkpoint {path}: no batch has a commit yet (the query never finished a batch); "
            "nothing was processed, so start the query on the other cluster from the beginning")
    batch = committed[-1]
    where = str(offsets[batch])
    try:
        _, sources = parse_offsets_log(offsets[batch].read_text(), where)
    except OSError as exc:
        raise SparkCheckpointError(f"{where}: {exc.strerror or exc}") from None
    void = [i for i, s in enumerate(sources) if s is None]
    if void:
        raise SparkCheckpointError(f"{where}: source(s) {void} have no offsets in batch {batch}")
    query_id = None
    meta = path / "metadata"
    if meta.is_file():
        try:
            query_id = json.loads(meta.read_text().splitlines()[0]).get("id")
        except (json.JSONDecodeError, IndexError, AttributeError):
            raise SparkCheckpointError(f"{meta}: not a query's metadata file") from None
    return Checkpoint(path, query_id, batch, tuple(s for s in sources if s is not None),
                      max(offsets), listing)


def base_name(path: Path) -> str:
    """The query's checkpoint name without the suffix a previous move gave it."""
    return _SUCCESSOR.sub("", path.name)


def successor(path: Path, target: str, now: dt.datetime) -> Path:
    """The new checkpoint location beside ``path``: ``<name>-on-<target>-<UTC stamp>``."""
    return path.parent / f"{base_name(path)}-on-{target}-{now:%Y%m%dT%H%M%S}"


def latest_resume(location: str | Path) -> dict | None:
    """The newest resume document of the query checkpointed at ``location``, else ``None``.

    What the query's own job starts with: ``location`` is its first checkpoint (or any
    successor); the documents of every move sit beside it, named by UTC stamp. ``None``: the
    query never moved, start it as usual.
    """
    path = location if isinstance(location, Path) else local_path(location)
    base = base_name(path)
    named = re.compile(re.escape(base) + r"-on-[A-Za-z0-9_]+-(\d{8}T\d{6})\.json$")
    found = [(m.group(1), p) for p in path.parent.glob(f"{base}-on-*.json")
             if (m := named.match(p.name))]
    return json.loads(max(found)[1].read_text()) if found else None


def resume_document(*, operation_id: str, kind: str, source: str, target: str,
                    checkpoint: Checkpoint, location: Path,
                    subscribe: list[list[str]], starting: list[offsets_json.Offsets],
                    bootstrap: str) -> dict:
    """What the query needs to resume on ``target``: options per source, in source order.

    One source (the usual case) also gets its options at the top level.
    """
    sources = [{"subscribe": ",".join(topics), "startingOffsets": offsets_json.dumps(offsets)}
               for topics, offsets in zip(subscribe, starting, strict=True)]
    doc = {
        "operation_id": operation_id, "kind": kind, "from": source, "to": target,
        "previous_checkpoint": str(checkpoint.path), "previous_query_id": checkpoint.query_id,
        "resumes_after_batch": checkpoint.batch_id,
        "checkpointLocation": str(location),
        "kafka.bootstrap.servers": bootstrap,
        "sources": sources,
    }
    if len(sources) == 1:
        doc.update(sources[0])
    return doc


def write_resume(path: Path, doc: dict) -> None:
    """Write ``doc`` as JSON at ``path`` (a new file: an existing one is never replaced)."""
    try:
        with path.open("x") as out:  # exclusive create: no overwrite, even in a race
            out.write(json.dumps(doc, indent=2) + "\n")
    except FileExistsError:
        raise SparkCheckpointError(f"{path} exists already; nothing was written") from None
