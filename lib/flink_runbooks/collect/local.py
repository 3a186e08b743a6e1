"""Local files read in this process: the same partition code as the Spark pass, fed from here.

Starting Spark costs about ten seconds, which is all of the time a pasted stack trace or one small log file needs.
Below :data:`LOCAL_LIMIT_BYTES` of local, plain or gzipped files, :func:`scan_locally` builds the Arrow batches
Spark would hand a Python worker (one partition per file: text, binary flag, file and block on the first row,
the flink-dist version, each line's size) and runs :func:`~flink_runbooks.collect.scan._assemble_partition` over
them, so records, statistics and line numbers are the ones the Spark pass gives. Spark stays the engine for
anything larger, for other file systems and compressions, and whenever a master or a Spark Connect server is named;
the few local files Spark cannot read line by line (a name the JVM cannot spell, a line longer than
:data:`~flink_runbooks.collect.listing.MAX_LINE_BYTES`) are read here in any mode.

Files are read in chunks, never whole, and a line longer than ``MAX_LINE_BYTES`` is never held whole: only its
start is kept (more than any kept line is read) and its full length is counted, so memory stays bounded whatever
the file holds.
"""
from __future__ import annotations

import codecs
import gzip
import os
import re
from typing import BinaryIO, Iterator, Sequence
from urllib.parse import quote

from flink_runbooks.collect.listing import MAX_LINE_BYTES, _from_spark, local_path
from flink_runbooks.collect.spark import _SESSION_SETTINGS

__all__ = ["LOCAL_LIMIT_BYTES", "fits_locally", "local_path", "read_configs_locally", "read_lines", "scan_locally"]

# Small inputs stay in this process below this many bytes; anything larger goes to Spark.
LOCAL_LIMIT_BYTES = int(os.environ.get("FLINK_RUNBOOKS_LOCAL_LIMIT_BYTES", 16 * 1024 * 1024))
_READABLE = re.compile(r"(?i)\.gz$|^(?!.*\.(bz2|zst|lz4|snappy|deflate|xz|zip)$)")
# What is kept of a line longer than MAX_LINE_BYTES: enough for the 64 Ki characters a JSON record line keeps.
LONG_LINE_HEAD_BYTES = 256 << 10
_CHUNK_BYTES = 4 << 20
# Rows per batch as Spark hands them to a Python worker.
ARROW_BATCH_ROWS = int(_SESSION_SETTINGS["spark.sql.execution.arrow.maxRecordsPerBatch"])
# A Flink configuration file is a few kilobytes; past this the rest of a file is not read (a warning says so).
MAX_CONFIG_FILE_BYTES = 4 << 20


def fits_locally(log_uris: Sequence[tuple[str, int]], config_uris: Sequence[str]) -> bool:
    """Whether every input is a local file this process can read and all logs together stay under the limit."""
    paths = [local_path(u) for u, _ in log_uris] + [local_path(u) for u in config_uris]
    if any(p is None or not _READABLE.search(p) for p in paths):
        return False
    # A gzipped file's size on disk says little about its lines: count it ten times.
    total = sum(size * (10 if u.lower().endswith(".gz") else 1) for u, size in log_uris)
    return total <= LOCAL_LIMIT_BYTES


def _open(path: str) -> BinaryIO:
    return gzip.open(path, "rb") if path.lower().endswith(".gz") else open(path, "rb")


def read_configs_locally(uris: Sequence[str]) -> Iterator[tuple[str, str, bool]]:
    """``(uri, text, cut)`` per config file: at most :data:`MAX_CONFIG_FILE_BYTES` of it (``cut`` when it had more)."""
    for uri in uris:
        with _open(local_path(uri)) as fh:
            data = fh.read(MAX_CONFIG_FILE_BYTES + 1)
        cut = len(data) > MAX_CONFIG_FILE_BYTES
        if cut:  # whole lines only
            data = data[:data.rfind(b"\n", 0, MAX_CONFIG_FILE_BYTES) + 1]
        yield uri, data.decode("utf-8", errors="replace"), cut


def _grow(pieces: list[bytes], held: int, cut: bool, data: bytes) -> tuple[list[bytes], int, bool]:
    """Add ``data`` to the line being read; past MAX_LINE_BYTES only its head stays in memory."""
    held += len(data)
    if cut:
        return pieces, held, cut
    pieces.append(data)
    if held <= MAX_LINE_BYTES:
        return pieces, held, cut
    head, room = [], LONG_LINE_HEAD_BYTES
    for piece in pieces:
        head.append(piece[:room])
        room -= len(head[-1])
        if room <= 0:
            break
    return [b"".join(head)], held, True


def read_lines(stream: BinaryIO, chunk_bytes: int = _CHUNK_BYTES) -> Iterator[tuple[list[bytes], dict[int, int]]]:
    """The lines of a byte stream, in blocks, without their line breaks (a final line break ends the last line, it
    does not start another, as Spark's line reader counts). Each block comes with the lines in it that were longer
    than MAX_LINE_BYTES: ``{index in the block: full length}``; of those only the first LONG_LINE_HEAD_BYTES are in
    the block."""
    pieces: list[bytes] = []  # the line being read when it continues past a chunk
    held, cut = 0, False
    while chunk := stream.read(chunk_bytes):
        nl = chunk.find(b"\n")
        if nl < 0:
            pieces, held, cut = _grow(pieces, held, cut, chunk)
            continue
        pieces, held, cut = _grow(pieces, held, cut, chunk[:nl])
        lines = [b"".join(pieces)]
        long = {0: held} if cut else {}
        rest = chunk[nl + 1:].split(b"\n")
        tail = rest.pop()
        if len(chunk) > MAX_LINE_BYTES:  # only then can a line inside one chunk be too long
            for index, line in enumerate(rest):
                if len(line) > MAX_LINE_BYTES:
                    long[1 + index], rest[index] = len(line), line[:LONG_LINE_HEAD_BYTES]
        lines.extend(rest)
        pieces, held, cut = _grow([], 0, False, tail) if tail else ([], 0, False)
        yield lines, long
    if pieces or cut:
        yield [b"".join(pieces)], ({0: held} if cut else {})


def _decode_head(head: bytes) -> tuple[str, bool]:
    """The start of a cut line as text, and whether it was valid UTF-8 (a character cut in two at the end is not
    held against it)."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(head, final=False), True
    except UnicodeDecodeError:
        return head.decode("utf-8", errors="replace"), False


def _batch(uri: str | None, lines: list[bytes], long: dict[int, int]):
    """Lines as Spark's text source and the scan's projection would hand them to a worker; ``uri`` on the first row
    when the batch starts a file."""
    import pyarrow as pa

    from flink_runbooks.collect.scan import _DIST_JAR_JAVA, BINARY_CHARS_JAVA, MAX_LINE_CHARS, MAX_RECORD_LINE_CHARS

    dist_jar = re.compile(_DIST_JAR_JAVA)
    junk = re.compile(BINARY_CHARS_JAVA)
    texts, binary, bad, dist, sizes = [], [], [], [], []
    for index, raw in enumerate(lines):
        size = long.get(index, len(raw))
        if index in long:
            text, valid = _decode_head(raw)
        else:
            try:
                text, valid = raw.decode("utf-8"), True
            except UnicodeDecodeError:
                text, valid = raw.decode("utf-8", errors="replace"), False
        if valid:
            is_binary, is_bad = "\x00" in text, False
        else:
            # as the Spark pass decides: binary on a NUL byte or mostly replacement/control characters
            is_binary = "\x00" in text or len(junk.findall(text)) * 10 > len(text) * 3
            is_bad = not is_binary
        if raw[:1] == b"{":
            text = text[:MAX_RECORD_LINE_CHARS] if size > MAX_RECORD_LINE_CHARS else text
        elif size > 4 * MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS]
        texts.append(text)
        binary.append(is_binary)
        bad.append(is_bad)
        sizes.append(size)
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
        "size": pa.array(sizes, pa.int64()),
    })


def _partitions(uri: str):
    """One file as the batches of one Spark partition: as many rows per batch as Spark hands a worker, the first
    batch starting the block (the file name on its first row), the others continuing it."""

    # as Spark names a local file, percent-encoded: Arrow holds only UTF-8, a file name may hold any byte
    spark_uri = "file:" + quote(local_path(uri), safe="/", errors="surrogateescape")
    held: list[bytes] = []
    long: dict[int, int] = {}
    first = True
    with _open(local_path(uri)) as fh:
        for lines, cut in read_lines(fh):
            long.update({len(held) + i: n for i, n in cut.items()})
            held.extend(lines)
            while len(held) >= ARROW_BATCH_ROWS:
                yield _batch(spark_uri if first else None, held[:ARROW_BATCH_ROWS],
                             {i: n for i, n in long.items() if i < ARROW_BATCH_ROWS})
                held = held[ARROW_BATCH_ROWS:]
                long = {i - ARROW_BATCH_ROWS: n for i, n in long.items() if i >= ARROW_BATCH_ROWS}
                first = False
    if held:
        yield _batch(spark_uri if first else None, held, long)


def scan_locally(log_uris: Sequence[str], detectors: Sequence | None = None) -> list[dict]:
    """Rows of the scan (records and per-block statistics), as ``scan_logs(...).toArrow().to_pylist()`` gives them,
    with file names decoded as the driver decodes Spark's (``file:/path``)."""
    from flink_runbooks.collect.scan import _assemble_partition, line_patterns

    import pyarrow as pa

    def batches():
        # Many small files go through in one batch: each batch compiles the patterns again (milliseconds), which
        # thousands of rolled files would pay thousands of times. Every file's first row still starts its block;
        # the batches of one large file are not merged, so its blocks are cut where Spark cuts them.
        pending, size = [], 0
        for uri in log_uris:
            for batch in _partitions(uri):  # none for a file without lines, as Spark yields no rows for it
                if pending and not batch.column("file").is_valid()[0].as_py():
                    yield from pa.Table.from_batches(pending).combine_chunks().to_batches()
                    pending, size = [], 0
                pending.append(batch)
                size += batch.num_rows
                if size >= ARROW_BATCH_ROWS:
                    yield from pa.Table.from_batches(pending).combine_chunks().to_batches()
                    pending, size = [], 0
        if pending:
            yield from pa.Table.from_batches(pending).combine_chunks().to_batches()

    patterns = line_patterns(detectors)
    rows = [row for out in _assemble_partition(batches(), patterns) for row in out.to_pylist()]
    for row in rows:
        row["file"] = _from_spark(row["file"])
    return rows
