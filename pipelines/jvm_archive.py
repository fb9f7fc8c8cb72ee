"""Class-data sharing archives: the JVMs offset-ledger starts map their classes in, ready.

A cold JVM of a local Spark session spends about a third of its first 25 seconds reading,
parsing and verifying some 20,000 classes, an embedded broker about a third of its 6. A
dynamic CDS archive (JDK 13+, ``-XX:ArchiveClassesAtExit``) holds them parsed and verified;
a JVM started with ``-XX:SharedArchiveFile`` maps them instead (a session with Delta 25 s ->
17 s, a broker pair 12 s -> 8.5 s on 2 cores). ``python -m pipelines.devtools.jvm_archives``
(run by ``make setup``) makes them; this module only decides whether a JVM may use one.

    <jars>/cds/<kind>.jsa   the archive (``spark``: the local driver; ``kafka``: the brokers)
    <jars>/cds/<kind>.key   the key it was made for (see :func:`archive_key`)

Invariants:
    * An archive only ever makes a start faster. Its options are given only when its key
      matches the JVM about to start (the java binary, the JDK's class image, and every jar
      of the class path: name, size and modification time); a JVM that still cannot map it
      starts without it and says nothing (``-Xshare:auto``, CDS logging off), so a stale or
      missing archive never changes what a program does or prints.
    * Nothing here writes: a missing folder or file means no options.
    * ``$OFFSET_LEDGER_JVM_ARCHIVES=false`` turns every archive off.
    * Only the JVMs offset-ledger launches itself use one: under spark-submit or on
      Databricks the launcher's JVM options are never touched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from ledger import settings

# -Xshare:auto is the default, said explicitly: an unusable archive is skipped, never fatal.
# The cds logging is off so that its one warning line never reaches a program's output.
QUIET = ("-Xshare:auto", "-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def java_binary() -> str | None:
    """The ``java`` a launcher runs: ``$JAVA_HOME/bin/java``, else the PATH's (as
    ``spark-class`` and the embedded brokers choose it), or ``None``."""
    home = settings.java_home()
    if home and (home / "bin" / "java").exists():
        return str(home / "bin" / "java")
    return shutil.which("java")


def archive_dir(jars: Path) -> Path:
    """The archives' folder beside a jars folder's kinds (``jars/spark`` -> ``jars/cds``)."""
    return jars.parent / "cds"


def _jars(folders: Iterable[Path]) -> list[Path]:
    return sorted(p for folder in folders if folder.is_dir() for p in folder.glob("*.jar"))


def archive_key(java: str, class_path: Iterable[Path]) -> str:
    """A digest of what an archive is valid for: the java binary, its JDK's class image
    (``lib/modules``) and each jar of ``class_path`` (folders): name, size, mtime."""
    digest = hashlib.sha256()
    real = Path(java).resolve()
    parts = [str(real)]
    modules = real.parent.parent / "lib" / "modules"
    for path in ([modules] if modules.exists() else []) + _jars(class_path):
        stat = path.stat()
        parts.append(f"{path}|{stat.st_size}|{stat.st_mtime_ns}")
    digest.update("\n".join(parts).encode())
    return digest.hexdigest()


def class_path(kind: str, jars: Path) -> list[Path]:
    """Every folder whose jars ``kind``'s JVM loads (an archive's key covers all of them):
    the local Spark driver loads pyspark's jars and ours, a broker its own."""
    if kind == "spark":
        return [p for p in (pyspark_jars(), jars) if p is not None]
    return [jars]


def archive_options(kind: str, jars: Path, java: str | None = None) -> list[str]:
    """JVM options mapping ``kind``'s archive, or ``[]`` when there is none that matches.

    Args:
        kind: ``spark`` or ``kafka``.
        jars: the kind's jars folder (``jars/<kind>``); the archive lives beside it.
        java: the java binary (default :func:`java_binary`).
    """
    if not settings.jvm_archives():
        return []
    folder = archive_dir(jars)
    archive, key_file = folder / f"{kind}.jsa", folder / f"{kind}.key"
    java = java or java_binary()
    if java is None or not archive.is_file() or not key_file.is_file():
        return []
    try:
        if key_file.read_text().strip() != archive_key(java, class_path(kind, jars)):
            return []
    except OSError:
        return []
    return [f"-XX:SharedArchiveFile={archive}", *QUIET]


def pyspark_jars() -> Path | None:
    """The jars folder of the installed pyspark (the local driver's class path), or None."""
    try:
        import pyspark
    except ImportError:
        return None
    folder = Path(os.path.dirname(pyspark.__file__)) / "jars"
    return folder if folder.is_dir() else None
