"""Local files read in this process, and the reading code Spark's tasks share (:mod:`.ranges`).

Starting Spark costs about ten seconds, which is all of the time a pasted stack trace or one small log file needs.
Below :data:`LOCAL_LIMIT_BYTES` of local, plain or gzipped files, :func:`scan_locally` reads the files here and runs
:func:`~flink_runbooks.collect.scan._assemble_partition` over them, so records, statistics and line numbers are the
ones the Spark pass gives. Spark stays the engine for anything larger, for other file systems and compressions, and
whenever a master or a Spark Connect server is named.

Files are read in blocks of whole lines (:func:`line_blocks`), never whole, and each block becomes an Arrow batch
without a Python object per line (:func:`_lines_batch`). A line longer than ``MAX_LINE_BYTES`` is never held whole:
only its start is kept (more than any kept line is read) and its full length is counted, so memory stays bounded
whatever the file holds.
"""
from __future__ import annotations

import codecs
import gzip
import os
import re
from typing import BinaryIO, Iterator, Sequence
from urllib.parse import quote

from flink_runbooks.collect.listing import MAX_LINE_BYTES, local_path, row_files_from_spark
from flink_runbooks.collect.spark import _SESSION_SETTINGS

__all__ = ["LOCAL_LIMIT_BYTES", "fits_locally", "line_blocks", "local_path", "read_configs_locally", "scan_locally"]

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


def line_blocks(stream: BinaryIO, start: int = 0, end: int | None = None,
                chunk_bytes: int = _CHUNK_BYTES) -> Iterator[tuple[bytes, dict[int, int]]]:
    """Blocks of whole lines of a byte stream, each block one buffer: lines end in a line feed except the file's
    last line when the file has none. With ``start``/``end`` only the lines that start in ``[start, end)`` are read,
    as Hadoop's line reader splits a file: a split after the first skips the line it starts inside of, and the last
    line of a split runs past ``end`` to its line feed, so the splits of a file hold each of its lines once.

    Each block comes with the lines in it that were longer than MAX_LINE_BYTES: ``{index in the block: full
    length}``; of those only the first LONG_LINE_HEAD_BYTES are in the block."""
    pos = start
    if start:
        stream.seek(start - 1)
        pos = start - 1 + _skip_line(stream, chunk_bytes)
    pieces: list[bytes] = []  # the line being read when it continues past a chunk
    held, cut = 0, False
    done = end is not None and pos >= end
    while not done and (chunk := stream.read(chunk_bytes)):
        chunk_start, pos = pos, pos + len(chunk)
        if end is not None and pos >= end:
            # the split's last line is the one that holds byte end - 1
            stop = chunk.find(b"\n", max(end - 1 - chunk_start, 0))
            if stop >= 0:
                chunk, done = chunk[:stop + 1], True
        first_break = chunk.find(b"\n")
        if first_break < 0:
            pieces, held, cut = _grow(pieces, held, cut, chunk)
            continue
        pieces, held, cut = _grow(pieces, held, cut, chunk[:first_break])
        long = {0: held} if cut else {}
        last_break = chunk.rfind(b"\n")
        middle = chunk[first_break:last_break + 1]
        if len(middle) > MAX_LINE_BYTES:  # only then can a whole line inside one chunk be too long
            lines = middle[1:-1].split(b"\n") if len(middle) > 1 else []
            for index, line in enumerate(lines):
                if len(line) > MAX_LINE_BYTES:
                    long[1 + index], lines[index] = len(line), line[:LONG_LINE_HEAD_BYTES]
            middle = b"\n" + b"\n".join(lines) + b"\n" if lines else middle
        block = b"".join(pieces) + middle
        tail = chunk[last_break + 1:]
        pieces, held, cut = _grow([], 0, False, tail) if tail else ([], 0, False)
        yield block, long
    if pieces or cut:
        yield b"".join(pieces), ({0: held} if cut else {})


def _skip_line(stream: BinaryIO, chunk_bytes: int) -> int:
    """Read past the next line feed (or to the end); returns how many bytes that was and leaves the stream there."""
    consumed = 0
    while chunk := stream.read(chunk_bytes):
        found = chunk.find(b"\n")
        if found >= 0:
            stream.seek(found + 1 - len(chunk), os.SEEK_CUR)
            return consumed + found + 1
        consumed += len(chunk)
    return consumed


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


def _lines_batch(uri: str | None, block: int | None, data: bytes, long: dict[int, int]):
    """The lines of one buffer (whole lines, see :func:`line_blocks`) as the Arrow batch :func:`_batch` gives, built
    without a Python object per line: the line feeds are taken out in one copy and the offsets point into it. A
    buffer with a line that is not UTF-8 or longer than MAX_LINE_BYTES goes through :func:`_batch`."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from flink_runbooks.collect.scan import _DIST_JAR_JAVA, MAX_LINE_CHARS, MAX_RECORD_LINE_CHARS

    raw = np.frombuffer(data, dtype=np.uint8)
    breaks = np.flatnonzero(raw == 10)
    n = len(breaks) + (0 if data.endswith(b"\n") else 1)
    lines_only = raw[raw != 10]
    starts = np.concatenate(([0], breaks[: n - 1] + 1)) - np.arange(n)  # line starts once the line feeds are out
    offsets = np.append(starts, len(lines_only)).astype(np.int32)  # a block is a few megabytes
    texts = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(lines_only))
    try:
        if long:
            raise ValueError("a line longer than MAX_LINE_BYTES")
        texts.validate(full=True)
    except (pa.ArrowInvalid, ValueError):
        lines = data.split(b"\n")
        if data.endswith(b"\n"):
            lines.pop()
        batch = _batch(uri, lines, long)
        return batch if block is None else batch.set_column(4, "block", pa.array([block] + [None] * (n - 1), pa.int64()))
    sizes = np.diff(offsets)
    binary = np.zeros(n, dtype=bool)
    nul = np.flatnonzero(lines_only == 0)
    if len(nul):
        binary[np.searchsorted(offsets, nul, side="right") - 1] = True
    if (sizes > 4 * MAX_LINE_CHARS).any() or (sizes > MAX_RECORD_LINE_CHARS).any():
        # as the Spark projection cuts: a JSON record line keeps more than any other line
        json_line = pc.starts_with(texts, "{").to_numpy(zero_copy_only=False)
        record_cut = json_line & (sizes > MAX_RECORD_LINE_CHARS)
        line_cut = ~json_line & (sizes > 4 * MAX_LINE_CHARS)
        texts = pc.if_else(pa.array(record_cut), pc.utf8_slice_codeunits(texts, 0, MAX_RECORD_LINE_CHARS),
                           pc.if_else(pa.array(line_cut), pc.utf8_slice_codeunits(texts, 0, MAX_LINE_CHARS), texts))
    dist: list[str | None] = [None] * n
    # the lines that name the distribution jar, found in the bytes (a search per line costs more than the scan)
    found, at = [], data.find(b"flink-dist")
    while at >= 0:
        found.append(at)
        at = data.find(b"flink-dist", at + 1)
    named = np.unique(np.searchsorted(breaks, found, side="left")) if found else ()
    if len(named):
        dist_jar = re.compile(_DIST_JAR_JAVA)
        for index, text in zip(named.tolist(), texts.take(pa.array(named)).to_pylist()):
            if "flink-dist" in text:  # not when a long line was cut before it
                m = dist_jar.search(text)
                dist[index] = m.group(1) if m else ""
    return pa.RecordBatch.from_pydict({
        "text": texts,
        "bin": pa.array(binary),
        "bad": pa.array(np.zeros(n, dtype=bool)),
        "file": pa.array([uri] + [None] * (n - 1), pa.string()),
        "block": pa.array([block if uri is not None else None] + [None] * (n - 1), pa.int64()),
        "dist": pa.array(dist, pa.string()),
        "size": pa.array(sizes.astype(np.int64)),
    })


def without_colours(data: bytes) -> bytes:
    """``data`` without terminal colour sequences (a search for the escape byte when there are none)."""
    from flink_runbooks.collect.scan import ANSI_ESCAPE

    return ANSI_ESCAPE.sub(b"", data) if b"\x1b[" in data else data


def spark_name(uri: str) -> str:
    """A local file as Spark names it, percent-encoded: Arrow holds only UTF-8, a file name may hold any byte."""
    return "file:" + quote(local_path(uri), safe="/", errors="surrogateescape")


def _partitions(uri: str, start: int = 0, end: int | None = None):
    """The lines of one file, or of its split ``[start, end)``, as the batches of one Spark partition: the first
    batch starts the block (the file name and the block's first byte on its first row), the others continue it."""
    first = True
    with _open(local_path(uri)) as fh:
        for data, long in line_blocks(fh, start, end):
            yield _lines_batch(spark_name(uri) if first else None, start if first else None, without_colours(data),
                               long)
            first = False


def scan_locally(log_uris: Sequence[str], prefilter) -> Iterator[dict]:
    """Rows of the scan (records, folded repeats and per-block statistics), as the Spark scan gives them, with file
    names decoded as the driver decodes Spark's (``file:/path``)."""
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

    patterns = line_patterns(prefilter)
    for out in _assemble_partition(batches(), patterns):
        for row in out.to_pylist():
            yield row_files_from_spark(row)
