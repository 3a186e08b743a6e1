"""Small local inputs without a JVM: the same partition code as the Spark pass, fed from this process.

Starting Spark costs about ten seconds, which is all of the time a pasted stack trace or one small log file needs.
Below :data:`LOCAL_LIMIT_BYTES` of local, plain or gzipped files, :func:`scan_locally` builds the Arrow batches
Spark would hand a Python worker (one partition per file: text, binary flag, file and block on the first row,
the flink-dist version) and runs :func:`~flink_runbooks.collect.scan._assemble_partition` over them, so records,
statistics and line numbers are the ones the Spark pass gives. Spark stays the engine for anything larger, for
other file systems and compressions, and whenever a master or a Spark Connect server is named.
"""
from __future__ import annotations

import gzip
import os
import re
from typing import Iterator, Sequence
from urllib.parse import unquote, urlsplit

# Whole files are held in memory here, so the limit also bounds this process's memory.
LOCAL_LIMIT_BYTES = int(os.environ.get("FLINK_RUNBOOKS_LOCAL_LIMIT_BYTES", 16 * 1024 * 1024))
_READABLE = re.compile(r"(?i)\.gz$|^(?!.*\.(bz2|zst|lz4|snappy|deflate|xz|zip)$)")


def local_path(uri: str) -> str | None:
    """The local file behind a ``file:`` URI or plain path; None for any other file system."""
    if re.match(r"^[a-zA-Z][\w+.-]*://", uri) and not uri.startswith("file:"):
        return None
    if uri.startswith("file:"):
        return unquote(urlsplit(uri).path)
    return os.path.abspath(os.path.expanduser(uri))


def fits_locally(log_uris: Sequence[tuple[str, int]], config_uris: Sequence[str]) -> bool:
    """Whether every input is a local file this process can read and all logs together stay under the limit."""
    paths = [local_path(u) for u, _ in log_uris] + [local_path(u) for u in config_uris]
    if any(p is None or not _READABLE.search(p) for p in paths):
        return False
    # A gzipped file's size on disk says little about its lines: count it ten times.
    total = sum(size * (10 if u.lower().endswith(".gz") else 1) for u, size in log_uris)
    return total <= LOCAL_LIMIT_BYTES


def _read_bytes(path: str) -> bytes:
    if path.lower().endswith(".gz"):
        with gzip.open(path, "rb") as fh:
            return fh.read(LOCAL_LIMIT_BYTES * 4 + 1)
    with open(path, "rb") as fh:
        return fh.read()


def read_configs_locally(uris: Sequence[str]) -> Iterator[tuple[str, str]]:
    for uri in uris:
        yield uri, _read_bytes(local_path(uri)).decode("utf-8", errors="replace")


def _partition(uri: str, data: bytes):
    """One file as Spark's text source and the scan's projection would hand it to a worker."""
    import pyarrow as pa

    from flink_runbooks.collect.scan import _DIST_JAR_JAVA, BINARY_CHARS_JAVA, MAX_LINE_CHARS, MAX_RECORD_LINE_CHARS

    dist_jar = re.compile(_DIST_JAR_JAVA)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":  # a final newline ends the last line; it does not start another
        lines.pop()
    texts, binary, bad, dist = [], [], [], []
    junk = re.compile(BINARY_CHARS_JAVA)
    for raw in lines:
        try:
            text = raw.decode("utf-8")
            is_binary, is_bad = "\x00" in text, False
        except UnicodeDecodeError:
            # as the Spark pass decides: binary on a NUL byte or mostly replacement/control characters
            text = raw.decode("utf-8", errors="replace")
            is_binary = "\x00" in text or len(junk.findall(text)) * 10 > len(text) * 3
            is_bad = not is_binary
        if raw[:1] == b"{":
            text = text[:MAX_RECORD_LINE_CHARS] if len(raw) > MAX_RECORD_LINE_CHARS else text
        elif len(raw) > 4 * MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS]
        texts.append(text)
        binary.append(is_binary)
        bad.append(is_bad)
        if "flink-dist" in text:
            m = dist_jar.search(text)
            dist.append(m.group(1) if m else "")
        else:
            dist.append(None)
    n = len(texts)
    return pa.RecordBatch.from_pydict({
        "text": pa.array(texts, pa.string()),
        "bin": pa.array(binary, pa.bool_()),
        "bad": pa.array(bad, pa.bool_()),
        "file": pa.array([uri] + [None] * (n - 1), pa.string()),
        "block": pa.array([0] + [None] * (n - 1), pa.int64()),
        "dist": pa.array(dist, pa.string()),
    })


def scan_locally(log_uris: Sequence[str], detectors: Sequence | None = None) -> list[dict]:
    """Rows of the scan (records and per-block statistics), as ``scan_logs(...).toArrow().to_pylist()`` gives them."""
    from flink_runbooks.collect.scan import _assemble_partition, line_patterns

    import pyarrow as pa

    patterns = line_patterns(detectors)
    rows: list[dict] = []
    pending: list = []

    def assemble() -> None:
        # Many small files go through in one batch: each batch compiles the patterns again (milliseconds), which
        # thousands of rolled files would pay thousands of times. Every file's first row still starts its block.
        if pending:
            merged = pa.Table.from_batches(pending).combine_chunks().to_batches()
            pending.clear()
            for out in _assemble_partition(merged, patterns):
                rows.extend(out.to_pylist())

    size = 0
    for uri in log_uris:
        spark_uri = "file:" + local_path(uri)  # as Spark names a local file
        batch = _partition(spark_uri, _read_bytes(local_path(uri)))
        if batch.num_rows == 0:
            continue  # Spark yields no partition rows for a file without lines
        pending.append(batch)
        size += batch.num_rows
        if size >= 50_000:
            assemble()
            size = 0
    assemble()
    return rows
