"""The scan: the pre-filter every worker evaluates and the Spark pass that turns the lines of each file block into
records and per-block statistics (one pass over the bytes, no shuffle).
"""
from __future__ import annotations

import collections
import functools
import json
import re
from dataclasses import dataclass
from typing import Sequence
from flink_runbooks.parse import layouts
from flink_runbooks.collect.listing import MAX_LINE_BYTES, SPARK_LINE_BYTES, _for_spark

MAX_LINE_CHARS = 4096  # longer kept lines are cut
# A line that is a whole JSON record (a JSON logging layout, a JSON-escaped trace pasted from a ticket) holds a
# stack trace in one line, so it keeps up to this much.
MAX_RECORD_LINE_CHARS = 64 * 1024


def line_limit(text: str) -> int:
    """How much of a kept line the records read (the Spark projection cuts the same way, see :func:`_cut_lines`)."""
    return MAX_RECORD_LINE_CHARS if text[:1] == "{" else MAX_LINE_CHARS


def _cut_lines(text, value):
    """Spark column: ``text`` cut before it reaches a worker, judged on the raw line ``value``. Lines beyond a few
    kilobytes (a binary file has few line breaks) are cut so no single line can swamp a worker; JSON records keep
    :data:`MAX_RECORD_LINE_CHARS`."""
    from pyspark.sql import functions as F

    return (F.when(value.startswith("{"), F.when(F.octet_length(value) > MAX_RECORD_LINE_CHARS,
                                                 F.substring(text, 1, MAX_RECORD_LINE_CHARS)).otherwise(text))
            .when(F.octet_length(value) > 4 * MAX_LINE_CHARS, F.substring(text, 1, MAX_LINE_CHARS))
            .otherwise(text))


# Terminal colours (ESC [ ... m and the other CSI sequences) that coloured layouts write, e.g. the Kubernetes
# operator's %highlight/%style log4j pattern: taken out before any line is matched, so a coloured record reads as
# the plain one; no line feed is touched, so line numbers stay those of the file.
ANSI_ESCAPE = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
ANSI_ESCAPE_JAVA = "\u001b\\[[0-9;?]*[A-Za-z]"
# Characters that make a line binary when they are more than 30 % of it: replacement characters and C0 controls
# other than tab, line feed, form feed and carriage return.
BINARY_CHARS_JAVA = "[\uFFFD\u0001-\u0008\u000B\u000E-\u001F]"

# Lines every incident needs whatever the detectors are: version banner, configuration, checkpoint lifecycle
# (the timeline), job and task state changes (episodes), TaskManager identity and memory layout.
BASE_SIGNATURES = (
    r"Starting \w+.* \(Version: ",
    r"Loading (?:dynamic )?configuration property: ",
    r"^\s*(?:dynamic_configs|jvm_params): ",
    r"(?:INFO|\]) +- {4,}-D$",
    r"(?:INFO|\]) +- {4,}[a-z][\w.-]+=",
    r"Using (?:standard|legacy) YAML parser",
    r"Final (?:TaskExecutor|Master|JobManager) Memory configuration",
    r" - {2,}(?:Total (?:Process|Flink|JVM Heap|Off-heap|JVM Direct) Memory|Framework|Task|Managed|Network|JVM Metaspace|JVM Overhead|JVM Heap|Off-heap):",
    r"(?:Consumer|Producer|AdminClient)Config values:",
    r"Starting TaskManager with ResourceID: ",
    r"Triggering (?:checkpoint|savepoint) \d+",
    r"Completed checkpoint \d+",
    r"Checkpoint \d+ of job \w+ expired",
    r"Decline checkpoint \d+",
    r"Failed to trigger (?:or complete )?checkpoint",
    r"switched from state \w+ to \w+",
    r"switched from \w+ to (?:FAILED|CANCELING|CANCELED)",
    r"Trying to recover from a global failure",
    r"Restoring job \w+ from",
    # a stack trace escaped inside one JSON document (a log store's export), whatever level the document names
    r"\\n\\t?at [\w$.]+\(",
)
_WARN_OR_WORSE = r"(?:^|[\s\]\"])(?:WARN|WARNING|ERROR|FATAL|SEVERE)[\s\"]"
_LEVEL_WORDS = "WARN|ERROR|FATAL|SEVERE"  # what every line WARN_OR_WORSE matches holds
_DIST_JAR_JAVA = r"flink-dist(?:_2\.1[0-9])?-(\d+\.\d+(?:\.\d+)?(?:-[\w.]+)?)\.jar"


# ------------------------------------------------------------------------------------------------ pre-filter

@dataclass(frozen=True)
class Prefilter:
    """What the scan keeps besides :data:`BASE_SIGNATURES`: line signatures (regexes of header or continuation lines)
    and stack-frame signatures. The catalogue hands its own (``flink_runbooks.detectors.prefilter()``); the scan never
    asks the detectors."""

    signatures: tuple[str, ...] = ()
    frames: tuple[str, ...] = ()

    @classmethod
    def of(cls, detectors: Sequence) -> "Prefilter":
        """Every signature, wording and frame the detectors declare, each once."""
        lines = [s for d in detectors for s in (*d.signatures, *(w.pattern for w in d.wordings))]
        return cls(tuple(dict.fromkeys(lines)), tuple(dict.fromkeys(f for d in detectors for f in d.frames)))

    def signature_list(self) -> tuple[str, ...]:
        """Every line signature once: the base ones, then the catalogue's."""
        return tuple(dict.fromkeys((*BASE_SIGNATURES, *self.signatures)))

    def unions(self) -> tuple[str, str]:
        """The line signatures and the frame signatures, as two regexes."""
        union = "|".join(f"(?:{s})" for s in self.signature_list())
        frame_union = (r"^(?:" + layouts.PREFIX + r")?\s*at .*(?:" + "|".join(f"(?:{s})" for s in self.frames) + ")"
                       if self.frames else r"(?!)")
        return union, frame_union


def line_patterns(prefilter: Prefilter) -> dict:
    """What the workers evaluate on every line, in RE2 syntax: whether it starts a record (``header``), whether its
    first 160 characters show WARN or worse (``warn``), and whether it is worth keeping in any case (``kept``: a
    signature, part of an exception, a config dump or a frame some detector asked for; the last three, ``structure``,
    are anchored at continuation-line starts that a record header never has). The workers match ``signatures`` (the
    tuple of them) in one pass with :mod:`.matcher` and ``structure`` in RE2; ``kept`` is their union in one
    expression, for other engines (grep, Python's ``re``)."""
    return dict(_line_patterns(prefilter))


@functools.lru_cache(maxsize=8)
def _line_patterns(prefilter: Prefilter) -> tuple[tuple[str, object], ...]:
    signatures, frames = prefilter.unions()
    structure = "|".join(f"(?:{p})" for p in (layouts.EXCEPTION_LINE_JAVA, layouts.CONFIG_LINE_JAVA,
                                              layouts.PYTHON_FRAME_JAVA, frames))
    kept = "|".join(f"(?:{p})" for p in (signatures, structure))
    return (("header", layouts.re2(layouts.HEADER_JAVA)), ("warn", _WARN_OR_WORSE), ("kept", layouts.re2(kept)),
            # what the workers evaluate: the structure of exceptions and dumps in RE2, the signatures in one pass
            ("structure", layouts.re2(structure)), ("signatures", prefilter.signature_list()))


# ------------------------------------------------------------------------------------------------ the Spark pass



def _line_masks(texts, patterns: dict[str, str], bounds: list[int] | None = None):
    """Which lines of an Arrow batch start a record and which are kept. RE2 is linear in the line length whatever
    the number of signatures; Java's backtracking alternation tries every signature at every position."""
    import numpy as np
    import pyarrow.compute as pc

    def match(array, pattern):
        return pc.match_substring_regex(array, pattern).to_numpy(zero_copy_only=False)

    from flink_runbooks.collect.matcher import signature_matcher

    header = match(texts, patterns["header"])
    # WARN or worse counts on record starts only; the exact test runs where a level word appears at all.
    warn = layouts.matches_at(texts, patterns["warn"], np.flatnonzero(header & match(texts, _LEVEL_WORDS)),
                              within=160)
    kept = (header & warn) | match(texts, patterns["structure"]) | signature_matcher(patterns["signatures"]).lines(texts)
    if bounds is None:
        return header, layouts.widen_kept(texts, header, kept)
    # Widening looks at neighbouring lines and at the block as a whole: never across two files of one batch.
    widened = kept.copy()
    for lo, hi in zip(bounds, bounds[1:]):
        if hi > lo:
            widened[lo:hi] = layouts.widen_kept(texts.slice(lo, hi - lo), header[lo:hi], kept[lo:hi])
    return header, widened


def _assemble_partition(batches, patterns: dict[str, str]):
    """mapInArrow body: the lines of one file block in order -> records + one statistics row per block.

    Only kept lines become Python strings. A header line that is not kept still ends the record before it, so
    between two kept lines the assembler is told whether any header went by.
    """
    import numpy as np
    import pyarrow as pa

    from flink_runbooks.collect.fold import DROPPED, Folder, fingerprint
    from flink_runbooks.parse.records import RecordAssembler, parse_exception_line

    names = _arrow_schema().names
    state = {"file": None, "block": None, "asm": RecordAssembler(), "index": 0, "lines": 0, "headers": 0,
             "exc": 0, "binary": 0, "invalid": 0, "layouts": collections.Counter(), "dist": collections.Counter(),
             "header_pending": False, "bytes": 0, "long": 0, "first_long": None, "kept": 0}
    out: list[dict] = []

    folder = Folder()

    def emit(rec) -> None:
        if rec is None:
            return
        row = {"kind": "record", "file": state["file"], "block": state["block"], "line_index": rec.line_index,
               "ts": rec.ts, "level": rec.level, "logger": rec.logger, "thread": rec.thread,
               "message": rec.message, "layout": rec.layout, "chain": rec.chain, "frames": rec.frames,
               "body": rec.body, "truncated": rec.truncated}
        row["fingerprint"] = fingerprint(row)
        folder.add(row)
        if rec.layout:
            state["layouts"][rec.layout] += 1
        for follower in rec.followers:
            emit(follower)

    def close_block() -> None:
        if state["file"] is None:
            return
        emit(state["asm"].close())
        out.append({"kind": "stats", "file": state["file"], "block": state["block"], "lines": state["lines"],
                    "headers": state["headers"], "exception_lines": state["exc"], "binary_lines": state["binary"],
                    "invalid_lines": state["invalid"],
                    "layouts": json.dumps(state["layouts"]), "dist_versions": json.dumps(state["dist"]),
                    "bytes": state["bytes"], "long_lines": state["long"], "first_long_line": state["first_long"],
                    "kept_lines": state["kept"]})
        state.update(asm=RecordAssembler(), index=0, lines=0, headers=0, exc=0, binary=0, invalid=0,
                     layouts=collections.Counter(), dist=collections.Counter(), header_pending=False, bytes=0,
                     long=0, first_long=None, kept=0)

    def flush_out():
        rows = {n: [r.get(n) for r in out] for n in names}
        out.clear()
        return pa.RecordBatch.from_pydict(rows, schema=_arrow_schema())

    def feed(texts, header, keep, binary, dist, sizes, invalid=None) -> None:
        """Lines of one block (a slice of a batch) into the assembler."""
        base = state["index"]
        state["lines"] += len(texts)
        state["binary"] += int(binary.sum())
        # Bytes read as lines (line breaks included) tell the driver whether the reader left any out; lines longer
        # than MAX_LINE_BYTES arrive cut (read here) or not at all (Spark's reader).
        state["bytes"] += int(sizes.sum()) + len(texts)
        long = np.flatnonzero(sizes > MAX_LINE_BYTES)
        if len(long):
            state["long"] += len(long)
            if state["first_long"] is None:
                state["first_long"] = base + int(long[0])
        state["invalid"] += int(invalid.sum()) if invalid is not None else 0
        for version in dist.drop_null().to_pylist():
            if version:
                state["dist"][version] += 1
        kept = np.flatnonzero(keep)
        state["kept"] += len(kept)
        headers_before = np.cumsum(header)  # headers at or before each line
        previous = -1
        for position, text in zip(kept.tolist(), texts.take(kept).to_pylist()):
            passed = headers_before[position - 1] - (headers_before[previous] if previous >= 0 else 0) if position else 0
            if passed or (previous < 0 and state["header_pending"]):
                emit(state["asm"].feed(base + position - 1, True, None))
            text = text[:line_limit(text)]
            is_header = bool(header[position])
            # Exception lines only tell an excerpt from an unknown layout in a file without any record header.
            if not state["headers"] and not is_header and parse_exception_line(
                    layouts.strip_prefix(text).strip().removeprefix("Caused by: ")):
                state["exc"] += 1
            emit(state["asm"].feed(base + position, is_header, text))
            previous = position
        after = headers_before[-1] - (headers_before[previous] if previous >= 0 else 0) if len(texts) else 0
        state["header_pending"] = bool(after) or (previous < 0 and state["header_pending"])
        state["headers"] += int(header.sum())
        state["index"] = base + len(texts)

    for batch in batches:
        texts = batch.column("text")
        # A block starts at the rows that carry their file name (the first row of each partition, or of each file
        # when small files share one).
        files = batch.column("file")
        starts = np.flatnonzero(files.is_valid().to_numpy(zero_copy_only=False)).tolist()
        bounds = ([0] if not starts or starts[0] != 0 else []) + starts + [len(texts)]
        header, keep = _line_masks(texts, patterns, bounds)
        binary = batch.column("bin").to_numpy(zero_copy_only=False)
        # lines that were not valid UTF-8 (read with replacement characters) but are text
        invalid = batch.column("bad").to_numpy(zero_copy_only=False) if "bad" in batch.schema.names else None
        blocks, dist = batch.column("block"), batch.column("dist")
        sizes = batch.column("size").to_numpy(zero_copy_only=False)
        for lo, hi in zip(bounds, bounds[1:]):
            if lo == hi:
                continue
            if lo in starts:
                close_block()
                state["file"], state["block"] = files[lo].as_py(), blocks[lo].as_py()
            feed(texts.slice(lo, hi - lo), header[lo:hi], keep[lo:hi], binary[lo:hi], dist.slice(lo, hi - lo),
                 sizes[lo:hi], invalid[lo:hi] if invalid is not None else None)
        if len(out) >= 5000:
            yield flush_out()
    close_block()
    # the partition's records, folded: its first and last ones of each fingerprint and a count of the others
    out.extend(folder.records())
    out.extend(folder.repeat_rows())
    if folder.dropped:
        out.append({"kind": "repeat", "fingerprint": DROPPED, "count": folder.dropped})
    rows = list(out)
    out.clear()
    for start in range(0, len(rows), 5000):
        out.extend(rows[start:start + 5000])
        yield flush_out()


def _arrow_schema():
    """What the scan hands back per file block: records and one statistics row (``kind``); the one definition of
    that shape, for the workers (Arrow) and for Spark (:func:`_spark_schema`)."""
    import pyarrow as pa

    link = pa.struct([("cls", pa.string()), ("message", pa.string()), ("kind", pa.string())])
    return pa.schema([
        ("kind", pa.string()), ("file", pa.string()), ("block", pa.int64()), ("line_index", pa.int64()),
        ("ts", pa.string()), ("level", pa.string()), ("logger", pa.string()), ("thread", pa.string()),
        ("message", pa.string()), ("layout", pa.string()), ("chain", pa.list_(link)),
        ("frames", pa.list_(pa.string())), ("body", pa.list_(pa.string())), ("truncated", pa.bool_()),
        ("lines", pa.int64()), ("headers", pa.int64()), ("exception_lines", pa.int64()),
        ("binary_lines", pa.int64()), ("invalid_lines", pa.int64()), ("layouts", pa.string()),
        ("dist_versions", pa.string()), ("bytes", pa.int64()), ("long_lines", pa.int64()),
        ("first_long_line", pa.int64()), ("kept_lines", pa.int64()),
        # folded records (kind "repeat", see collect/fold.py): how many, the first (file, block, line_index, ts
        # above) and the last of them
        ("fingerprint", pa.string()), ("count", pa.int64()), ("last_file", pa.string()), ("last_block", pa.int64()),
        ("last_line_index", pa.int64()), ("last_ts", pa.string()),
    ])


# Rows the driver fetches at a time from the scan's results.
FETCH_ROWS = 20_000


def stream_rows(df, partitions: int | None = None):
    """The rows of a scan DataFrame as dicts, a bounded number at a time: computed on every worker at once and held
    there (the folded rows of a partition are few), then fetched in slices of about :data:`FETCH_ROWS`, so no result
    holds everything (``spark.driver.maxResultSize`` bounds each fetch, not the input). A DataFrame of one partition
    (``partitions``, when the caller knows) is fetched as it is computed: one job instead of two."""
    from pyspark import StorageLevel

    if partitions == 1:
        for row in df.toLocalIterator():
            yield row.asDict(recursive=True)
        return
    held = df.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows = held.count()
        # one fetch job per slice (each costs a scheduling round trip): as few as the bound allows (coalescing never
        # makes more partitions than there are)
        for row in held.coalesce(max(1, -(-rows // FETCH_ROWS))).toLocalIterator():
            yield row.asDict(recursive=True)
    finally:
        held.unpersist()



def _spark_schema():
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(_arrow_schema())


def scan_logs(spark, log_uris: Sequence[str], prefilter: Prefilter, split_bytes: int | None = None):
    """The Spark plan: read in the JVM, pre-filter and assemble records on the workers. Returns a DataFrame."""
    from pyspark.sql import functions as F

    from flink_runbooks.collect.spark import SPLIT_BYTES

    for key in ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes"):
        spark.conf.set(key, str(split_bytes or SPLIT_BYTES))
    patterns = line_patterns(prefilter)
    value = F.col("value")
    # Hadoop's line reader skips a line longer than this instead of growing one buffer to hold it (a file of NUL
    # bytes would exhaust the heap); the driver sees the bytes that were not read as lines and reads that file in
    # process (:mod:`.local`). The length counts the line break, hence the two bytes.
    df = (spark.read.option("lineSep", "\n")
          .option("mapreduce.input.linerecordreader.line.maxlength", str(SPARK_LINE_BYTES + 2))
          .text([_for_spark(u) for u in log_uris]))
    first_of_partition = (F.monotonically_increasing_id() % F.lit(1 << 33)) == 0
    invalid = ~F.is_valid_utf8(value)
    # Python decodes strictly: invalid bytes become U+FFFD before they leave the JVM. Lines beyond a few kilobytes
    # (a binary file has few line breaks) are cut there so no single line can swamp a worker.
    text = F.when(invalid, F.make_valid_utf8(value)).otherwise(value)
    # Binary is a NUL byte or a line that is mostly replacement and control characters; a Latin-1 word in a UTF-8
    # log is text read with a replacement character.
    junk = F.length(text) - F.length(F.regexp_replace(text, BINARY_CHARS_JAVA, ""))
    binary = value.contains("\u0000") | F.when(invalid, junk * 10 > F.length(text) * 3).otherwise(F.lit(False))
    projected = df.select(
        _cut_lines(text, value).alias("text"),
        binary.alias("bin"),
        (invalid & ~binary).alias("bad"),
        F.when(first_of_partition, F.col("_metadata.file_path")).alias("file"),
        F.when(first_of_partition, F.col("_metadata.file_block_start")).alias("block"),
        F.when(value.contains("flink-dist"), F.make_valid_utf8(F.regexp_extract(value, _DIST_JAR_JAVA, 1))).alias("dist"),
        F.octet_length(value).cast("long").alias("size"),
    )
    return projected.mapInArrow(functools.partial(_assemble_partition, patterns=patterns), _spark_schema())


# Files up to this size (on disk; a gzipped one counts eight times) are read whole, many to a partition: one
# partition per file costs a task each (about 0.15 s), which thousands of rolled files turn into minutes.
SMALL_FILE_BYTES = 1 << 20
SMALL_FILE_OPEN_COST = 64 << 10


def is_small_file(uri: str, size: int) -> bool:
    return size * (8 if uri.lower().endswith(".gz") else 1) <= SMALL_FILE_BYTES


def scan_small_files(spark, log_uris: Sequence[str], prefilter: Prefilter):
    """Small files through the same workers as :func:`scan_logs`, read whole and many to a partition; each file's
    lines are exploded in order and its first line carries its name, as a block start does in the line scan.
    Yields the rows (this job needs its own file-packing settings while it runs)."""
    from pyspark.sql import functions as F

    from flink_runbooks.collect.spark import SPLIT_BYTES

    spark.conf.set("spark.sql.files.maxPartitionBytes", str(SPLIT_BYTES))
    spark.conf.set("spark.sql.files.openCostInBytes", str(SMALL_FILE_OPEN_COST))
    try:
        patterns = line_patterns(prefilter)
        whole = spark.read.text([_for_spark(u) for u in log_uris], wholetext=True)
        # A final line break ends the last line, it does not start another (as the line reader counts).
        lines = whole.select(F.col("_metadata.file_path").alias("path"),
                             F.posexplode(F.split(F.regexp_replace(F.regexp_replace("value", "\\n\\z", ""),
                                                                   ANSI_ESCAPE_JAVA, ""), "\\n", -1)))
        value = F.col("col")
        # Splitting decodes the text: invalid bytes are already U+FFFD here, so binary is judged on what they left.
        junk = F.length(value) - F.length(F.regexp_replace(value, BINARY_CHARS_JAVA, ""))
        binary = value.contains("\u0000") | (junk * 10 > F.length(value) * 3)
        start = F.col("pos") == 0
        projected = lines.select(
            _cut_lines(value, value).alias("text"),
            binary.alias("bin"),
            (value.contains("\ufffd") & ~binary).alias("bad"),
            F.when(start, F.col("path")).alias("file"),
            F.when(start, F.lit(0).cast("long")).alias("block"),
            F.when(value.contains("flink-dist"), F.regexp_extract(value, _DIST_JAR_JAVA, 1)).alias("dist"),
            # decoded already (see above), so only close to the file's bytes; small files are never checked by it
            F.octet_length(value).cast("long").alias("size"),
        )
        yield from stream_rows(projected.mapInArrow(functools.partial(_assemble_partition, patterns=patterns),
                                                    _spark_schema()))
    finally:
        spark.conf.set("spark.sql.files.openCostInBytes", str(SPLIT_BYTES))
