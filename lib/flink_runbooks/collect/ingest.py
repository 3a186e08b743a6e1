"""Read an incident's logs and configs through Spark and turn them into an :class:`~flink_runbooks.model.Incident`.

Pipeline (one pass over the log bytes, no shuffle):

1. List the inputs (files, directories, globs, Hadoop URIs) and sort them into logs, Flink config files and
   skipped files.
2. Spark reads every log line; each file split is one partition and reaches a Python worker in order, as Arrow
   batches. The worker evaluates the pre-filter with RE2: a line is *kept* when it is a record header at
   WARN/ERROR or matching a signature, or a continuation line that is part of an exception, a config dump or a
   frame some detector asked for. Only kept lines become Python strings; the others only count for record
   boundaries and line numbers, which stay exact.
3. :class:`~flink_runbooks.parse.records.RecordAssembler` turns the kept lines of each file block into records; per block
   statistics (lines, headers, binary lines) travel back with them.
4. The driver receives only records and statistics, derives roles, version and the effective configuration.
"""
from __future__ import annotations

import collections
import functools
import json
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

from flink_runbooks.parse import layouts
from flink_runbooks.parse.config import ConfigError, ConfigSource, EffectiveConfig, detect_conf_format, parse_flat_conf, parse_yaml_conf
from flink_runbooks.model import ChainLink, Event, Incident, InputFile
from flink_runbooks.parse.redact import redact_text, redact_value

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
# Characters that make a line binary when they are more than 30 % of it: replacement characters and C0 controls
# other than tab, line feed, form feed and carriage return.
BINARY_CHARS_JAVA = "[\uFFFD\u0001-\u0008\u000B\u000E-\u001F]"
LOG_NAME = re.compile(r"(?i)(\.(log|out|err|txt|json|jsonl|ndjson)(\.\d+)?|\.log\.\d{4}-\d{2}-\d{2}[\w.-]*|\.\d+)(\.gz)?$|^[^.]+$")
CONFIG_NAMES = ("flink-conf.yaml", "flink-conf.yml", "config.yaml", "config.yml")
# An example incident's own description of what it should diagnose: reading it as a log would be cheating.
METADATA_NAMES = ("expected.json",)

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
)
_WARN_OR_WORSE = r"(?:^|[\s\]\"])(?:WARN|WARNING|ERROR|FATAL|SEVERE)[\s\"]"
_DIST_JAR_JAVA = r"flink-dist(?:_2\.1[0-9])?-(\d+\.\d+(?:\.\d+)?(?:-[\w.]+)?)\.jar"

_FILE_ROLE = (
    (re.compile(r"(?i)standalonesession|jobmanager|job-manager|\bjm\b|clusterentrypoint|-jm-|historyserver"), "jobmanager"),
    (re.compile(r"(?i)taskexecutor|taskmanager|task-manager|\btm\b|-tm-"), "taskmanager"),
    (re.compile(r"(?i)client|sql-gateway|cli"), "client"),
)
_BANNER_ROLE = (
    (re.compile(r"Starting (?:TaskManager|\w*TaskExecutorRunner)"), "taskmanager"),
    (re.compile(r"Starting \w*(?:ClusterEntrypoint|ClusterEntryPoint|JobManager)"), "jobmanager"),
    (re.compile(r"Starting Command Line Client|Starting SQL Gateway"), "client"),
)
_FLINK_DAEMON_NAME = re.compile(
    r"flink-[^-]+-(?:standalonesession|taskexecutor|client|historyserver|sql-gateway|zookeeper)-(?:\d+-)?(?P<host>.+?)\.(?:log|out)"
)


class InputError(Exception):
    """Bad input that stops ingestion (missing path, nothing to read); the message is one line for the user."""


@dataclass
class ListedInputs:
    logs: list[tuple[str, int]] = field(default_factory=list)  # (uri, size)
    configs: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # one per file that cannot be read, named


# ------------------------------------------------------------------------------------------------ pre-filter

def prefilter(detectors: Sequence | None = None) -> tuple[str, str]:
    """The union of every detector's line signatures and frame signatures, as two regexes."""
    if detectors is None:
        from flink_runbooks.detectors import all_detectors

        detectors = all_detectors()
    lines = list(BASE_SIGNATURES)
    frames: list[str] = []
    for d in detectors:
        lines.extend(d.signatures)
        frames.extend(d.frames)
    union = "|".join(f"(?:{s})" for s in dict.fromkeys(lines))
    frame_union = r"^(?:" + layouts.PREFIX + r")?\s*at .*(?:" + "|".join(f"(?:{s})" for s in dict.fromkeys(frames)) + ")" if frames else r"(?!)"
    return union, frame_union


def line_patterns(detectors: Sequence | None = None) -> dict[str, str]:
    """What the workers evaluate on every line, in RE2 syntax: whether it starts a record, whether its first 160
    characters show WARN or worse, and whether it is worth keeping in any case (a signature, part of an exception, a
    config dump or a frame some detector asked for; the last three are anchored at continuation-line starts that a
    record header never has)."""
    signatures, frames = prefilter(detectors)
    kept = "|".join(f"(?:{p})" for p in (signatures, layouts.EXCEPTION_LINE_JAVA, layouts.CONFIG_LINE_JAVA, frames))
    return {"header": layouts.re2(layouts.HEADER_JAVA), "warn": _WARN_OR_WORSE, "kept": layouts.re2(kept)}


# ------------------------------------------------------------------------------------------------ listing

def _to_uri(path: str) -> str:
    if re.match(r"^[a-zA-Z][\w+.-]*://", path) or path.startswith("file:"):
        return path
    return "file://" + os.path.abspath(os.path.expanduser(path))


def _display(uri: str) -> str:
    """Paths as the user knows them: local files without the ``file:`` scheme, credentials in a URL masked."""
    if uri.startswith("file://"):
        return uri[len("file://"):]
    if uri.startswith("file:"):
        return uri[len("file:"):]
    return redact_text(uri) or uri


def _is_remote(raw: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][\w+.-]*:", raw)) and not raw.startswith("file:")


def _local(raw: str) -> str:
    return os.path.expanduser(re.sub(r"^file:(//)?", "", raw))


def _local_matches(raw: str) -> list[str]:
    """An existing path is taken literally, even when its name holds glob characters; otherwise it is a glob."""
    import glob

    local = _local(raw)
    if os.path.lexists(local):
        return [local]
    if any(c in local for c in "*?["):
        return sorted(glob.glob(local))
    return []


def check_local_paths(paths: Iterable[str]) -> None:
    """Fail fast, before Spark starts, on local paths that do not exist (URIs are checked when listed)."""
    for raw in paths:
        if not _is_remote(raw) and not _local_matches(raw):
            raise InputError(f"no such file or directory: {raw}")


def list_inputs(spark, paths: Iterable[str]) -> ListedInputs:
    """Expand files, directories (recursively), globs and Hadoop URIs.

    Local paths are listed here (Python), Hadoop URIs with Hadoop's FileSystem API. A file reached twice (a link, an
    input given twice) is read once; a link inside an input directory is followed only when it stays inside that
    directory (a link given as an input itself is followed wherever it leads).
    """
    listed = ListedInputs()
    seen: set[str] = set()
    jvm = getattr(spark, "_jvm", None)
    for raw in paths:
        if not _is_remote(raw):
            _list_local(raw, listed, seen)
        elif jvm is None:
            raise InputError(f"cannot list {_display(raw)} through Spark Connect: give a local path or a file: URI")
        else:
            _list_hadoop(spark, raw, listed)
    return listed


def _list_hadoop(spark, raw: str, listed: ListedInputs) -> None:
    jvm = spark._jvm
    try:
        hpath = jvm.org.apache.hadoop.fs.Path(raw)
        fs = hpath.getFileSystem(spark._jsc.hadoopConfiguration())
        statuses = fs.globStatus(hpath)
        if statuses is None or len(statuses) == 0:
            raise InputError(f"no such file or directory: {_display(raw)}")
        for st in statuses:
            if st.isDirectory():
                it = fs.listFiles(st.getPath(), True)
                found = []
                while it.hasNext():
                    f = it.next()
                    found.append((str(f.getPath().toString()), f.getLen()))
                # The file system's own order differs between file systems; sorted, every mode lists alike.
                for uri, size in sorted(found):
                    _classify(uri, size, listed, explicit=False)
                if not found:
                    listed.skipped.append(_display(str(st.getPath().toString())) + "/ (empty directory)")
            else:
                _classify(str(st.getPath().toString()), st.getLen(), listed, explicit=True)
    except InputError:
        raise
    except Exception as exc:  # Py4JJavaError: unreachable name node, unknown scheme, missing bucket, no permission
        raise InputError(f"cannot read {_display(raw)}: {_java_reason(exc)}") from None


def _java_reason(exc: Exception) -> str:
    """The first line of a Java exception's message, without the stack trace."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return redact_text(first)[:300]


def _list_local(raw: str, listed: ListedInputs, seen: set[str] | None = None) -> None:
    """Local paths and ``file:`` URIs: links followed inside the input tree only, every real file listed once."""
    seen = set() if seen is None else seen
    matches = _local_matches(raw)
    if not matches:
        raise InputError(f"no such file or directory: {raw}")
    for m in matches:
        if os.path.isdir(m):
            _walk(m, listed, seen)
        elif os.path.lexists(m) and not os.path.exists(m):
            listed.warnings.append(f"{m} is a broken link; skipped")
        else:
            _add_local_file(m, listed, seen, explicit=True)


def _walk(top: str, listed: ListedInputs, seen: set[str]) -> None:
    tree = os.path.realpath(top)
    if tree in seen:
        return
    seen.add(tree)
    stack = [top]
    while stack:
        current = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name, reverse=True)
        except OSError as exc:
            listed.warnings.append(f"{current} cannot be listed ({exc.strerror or exc}); skipped")
            continue
        subdirs = []
        for entry in reversed(entries):
            path = entry.path
            if entry.name.startswith((".", "_")):
                continue
            if entry.is_symlink():
                real = os.path.realpath(path)
                if not os.path.exists(real):
                    listed.warnings.append(f"{path} is a broken link; skipped")
                    continue
                if real != tree and not real.startswith(tree + os.sep):
                    listed.warnings.append(f"{path} links to {real}, outside {top}; not followed "
                                           f"(give the target as an input to read it)")
                    continue
            if entry.is_dir():
                real = os.path.realpath(path)
                if real in seen:
                    continue  # a link loop or a second way into a directory already read
                seen.add(real)
                subdirs.append(path)
            else:
                _add_local_file(path, listed, seen, explicit=False)
        stack.extend(reversed(subdirs))


def _add_local_file(path: str, listed: ListedInputs, seen: set[str], explicit: bool) -> None:
    import stat as _stat

    real = os.path.realpath(path)
    if real in seen:
        return
    seen.add(real)
    try:
        st = os.stat(path)
    except OSError as exc:
        listed.warnings.append(f"{path} cannot be read ({exc.strerror or exc}); skipped")
        return
    if not _stat.S_ISREG(st.st_mode):
        if explicit or LOG_NAME.search(os.path.basename(path)) or os.path.basename(path).lower() in CONFIG_NAMES:
            listed.warnings.append(f"{path} is not a regular file (a pipe, socket or device); skipped")
        return
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
    except OSError as exc:
        listed.warnings.append(f"{path} cannot be read ({exc.strerror or exc}); skipped")
        return
    uri = "file://" + os.path.abspath(path)
    if path.lower().endswith(".gz") and (explicit or LOG_NAME.search(os.path.basename(path))):
        problem = gzip_problem(path, head)
        if problem:
            listed.warnings.append(f"{path} {problem}; skipped")
            return
    _classify(uri, st.st_size, listed, explicit=explicit)


# A gzipped log decompresses to 5-20 times its size; far beyond that it is a decompression bomb, not a log.
GZIP_MAX_RATIO = 200
GZIP_MAX_LINE_BYTES = 64 << 20


def gzip_problem(path: str, head: bytes | None = None) -> str | None:
    """Why a ``.gz`` file cannot be read as a log (not gzip, truncated, corrupt, a bomb, a line too long), or None.

    Reading it through once here costs about a second per 300 MB decompressed and saves the scan from a Java error
    (truncated or corrupt data) or a heap exhausted by a single endless line."""
    import zlib

    if head is None:
        with open(path, "rb") as fh:
            head = fh.read(2)
    if head != b"\x1f\x8b":
        return "is named .gz but is not gzip-compressed"
    size = max(os.path.getsize(path), 1)
    out_total, line = 0, 0
    try:
        with open(path, "rb") as fh:
            d = zlib.decompressobj(zlib.MAX_WBITS | 16)
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                while chunk:
                    data = d.decompress(chunk, 8 << 20)
                    chunk = d.unconsumed_tail
                    out_total += len(data)
                    nl = data.rfind(b"\n")
                    line = line + len(data) if nl < 0 else len(data) - nl - 1
                    if out_total > (64 << 20) and out_total > GZIP_MAX_RATIO * size:
                        return (f"decompresses to more than {GZIP_MAX_RATIO} times its size "
                                f"(a decompression bomb, not a log)")
                    if line > GZIP_MAX_LINE_BYTES:
                        return f"holds a line longer than {GZIP_MAX_LINE_BYTES >> 20} MiB once decompressed"
                    if d.eof and d.unused_data:
                        # concatenated gzip members, as logrotate may leave them
                        chunk, d = d.unused_data + chunk, zlib.decompressobj(zlib.MAX_WBITS | 16)
            if not d.eof:
                return "is truncated (the gzip stream ends early)"
    except zlib.error as exc:
        return f"is corrupt ({exc})"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None


def _classify(uri: str, size: int, listed: ListedInputs, explicit: bool) -> None:
    name = uri.rsplit("/", 1)[-1]
    if name.startswith(".") or name.startswith("_"):
        return
    if name.lower() in METADATA_NAMES and not explicit:
        listed.skipped.append(_display(uri))
    elif name.lower() in CONFIG_NAMES:
        listed.configs.append(uri)
    elif explicit or LOG_NAME.search(name):
        listed.logs.append((uri, size))
    else:
        listed.skipped.append(_display(uri))


# ------------------------------------------------------------------------------------------------ the Spark pass

_RECORD_SCHEMA = (
    "kind string, file string, block long, line_index long, ts string, level string, logger string, "
    "thread string, message string, layout string, "
    "chain array<struct<cls:string,message:string,kind:string>>, frames array<string>, body array<string>, "
    "truncated boolean, lines long, headers long, exception_lines long, binary_lines long, invalid_lines long, "
    "layouts string, dist_versions string"
)


def _line_masks(texts, patterns: dict[str, str], bounds: list[int] | None = None):
    """Which lines of an Arrow batch start a record and which are kept. RE2 is linear in the line length whatever
    the number of signatures; Java's backtracking alternation tries every signature at every position."""
    import pyarrow.compute as pc

    def match(array, pattern):
        return pc.match_substring_regex(array, pattern).to_numpy(zero_copy_only=False)

    header = match(texts, patterns["header"])
    warn = match(pc.utf8_slice_codeunits(texts, 0, 160), patterns["warn"])
    kept = (header & warn) | match(texts, patterns["kept"])
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

    from flink_runbooks.parse.records import RecordAssembler, parse_exception_line

    names = [f.split(" ")[0] for f in _RECORD_SCHEMA.split(", ") if " " in f]
    state = {"file": None, "block": None, "asm": RecordAssembler(), "index": 0, "lines": 0, "headers": 0,
             "exc": 0, "binary": 0, "invalid": 0, "layouts": collections.Counter(), "dist": collections.Counter(),
             "header_pending": False}
    out: list[dict] = []

    def emit(rec) -> None:
        if rec is None:
            return
        out.append({"kind": "record", "file": state["file"], "block": state["block"], "line_index": rec.line_index,
                    "ts": rec.ts, "level": rec.level, "logger": rec.logger, "thread": rec.thread,
                    "message": rec.message, "layout": rec.layout, "chain": rec.chain, "frames": rec.frames,
                    "body": rec.body, "truncated": rec.truncated})
        if rec.layout:
            state["layouts"][rec.layout] += 1

    def close_block() -> None:
        if state["file"] is None:
            return
        emit(state["asm"].close())
        out.append({"kind": "stats", "file": state["file"], "block": state["block"], "lines": state["lines"],
                    "headers": state["headers"], "exception_lines": state["exc"], "binary_lines": state["binary"],
                    "invalid_lines": state["invalid"],
                    "layouts": json.dumps(state["layouts"]), "dist_versions": json.dumps(state["dist"])})
        state.update(asm=RecordAssembler(), index=0, lines=0, headers=0, exc=0, binary=0, invalid=0,
                     layouts=collections.Counter(), dist=collections.Counter(), header_pending=False)

    def flush_out():
        rows = {n: [r.get(n) for r in out] for n in names}
        out.clear()
        return pa.RecordBatch.from_pydict(rows, schema=_arrow_schema())

    def feed(texts, header, keep, binary, dist, invalid=None) -> None:
        """Lines of one block (a slice of a batch) into the assembler."""
        base = state["index"]
        state["lines"] += len(texts)
        state["binary"] += int(binary.sum())
        state["invalid"] += int(invalid.sum()) if invalid is not None else 0
        for version in dist.drop_null().to_pylist():
            if version:
                state["dist"][version] += 1
        kept = np.flatnonzero(keep)
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
        for lo, hi in zip(bounds, bounds[1:]):
            if lo == hi:
                continue
            if lo in starts:
                close_block()
                state["file"], state["block"] = files[lo].as_py(), blocks[lo].as_py()
            feed(texts.slice(lo, hi - lo), header[lo:hi], keep[lo:hi], binary[lo:hi], dist.slice(lo, hi - lo),
                 invalid[lo:hi] if invalid is not None else None)
        if len(out) >= 5000:
            yield flush_out()
    close_block()
    if out:
        yield flush_out()


def _arrow_schema():
    import pyarrow as pa

    link = pa.struct([("cls", pa.string()), ("message", pa.string()), ("kind", pa.string())])
    return pa.schema([
        ("kind", pa.string()), ("file", pa.string()), ("block", pa.int64()), ("line_index", pa.int64()),
        ("ts", pa.string()), ("level", pa.string()), ("logger", pa.string()), ("thread", pa.string()),
        ("message", pa.string()), ("layout", pa.string()), ("chain", pa.list_(link)),
        ("frames", pa.list_(pa.string())), ("body", pa.list_(pa.string())), ("truncated", pa.bool_()),
        ("lines", pa.int64()), ("headers", pa.int64()), ("exception_lines", pa.int64()),
        ("binary_lines", pa.int64()), ("invalid_lines", pa.int64()), ("layouts", pa.string()),
        ("dist_versions", pa.string()),
    ])


def scan_logs(spark, log_uris: Sequence[str], detectors: Sequence | None = None, split_bytes: int | None = None):
    """The Spark plan: read in the JVM, pre-filter and assemble records on the workers. Returns a DataFrame."""
    from pyspark.sql import functions as F

    from flink_runbooks.collect.spark import SPLIT_BYTES

    for key in ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes"):
        spark.conf.set(key, str(split_bytes or SPLIT_BYTES))
    patterns = line_patterns(detectors)
    value = F.col("value")
    df = spark.read.option("lineSep", "\n").text([_for_spark(u) for u in log_uris])
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
    )
    return projected.mapInArrow(functools.partial(_assemble_partition, patterns=patterns), _RECORD_SCHEMA)


# Files up to this size (on disk; a gzipped one counts eight times) are read whole, many to a partition: one
# partition per file costs a task each (about 0.15 s), which thousands of rolled files turn into minutes.
SMALL_FILE_BYTES = 1 << 20
SMALL_FILE_OPEN_COST = 64 << 10


def is_small_file(uri: str, size: int) -> bool:
    return size * (8 if uri.lower().endswith(".gz") else 1) <= SMALL_FILE_BYTES


def scan_small_files(spark, log_uris: Sequence[str], detectors: Sequence | None = None):
    """Small files through the same workers as :func:`scan_logs`, read whole and many to a partition; each file's
    lines are exploded in order and its first line carries its name, as a block start does in the line scan.
    Returns the rows (this job needs its own file-packing settings)."""
    from pyspark.sql import functions as F

    from flink_runbooks.collect.spark import SPLIT_BYTES

    spark.conf.set("spark.sql.files.maxPartitionBytes", str(SPLIT_BYTES))
    spark.conf.set("spark.sql.files.openCostInBytes", str(SMALL_FILE_OPEN_COST))
    try:
        patterns = line_patterns(detectors)
        whole = spark.read.text([_for_spark(u) for u in log_uris], wholetext=True)
        # A final line break ends the last line, it does not start another (as the line reader counts).
        lines = whole.select(F.col("_metadata.file_path").alias("path"),
                             F.posexplode(F.split(F.regexp_replace("value", "\\n\\z", ""), "\\n", -1)))
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
        )
        return projected.mapInArrow(functools.partial(_assemble_partition, patterns=patterns),
                                    _RECORD_SCHEMA).toArrow().to_pylist()
    finally:
        spark.conf.set("spark.sql.files.openCostInBytes", str(SPLIT_BYTES))


# ------------------------------------------------------------------------------------------------ driver side

def ingest(
    paths: Sequence[str],
    spark=None,
    *,
    flink_version: str | None = None,
    detectors: Sequence | None = None,
    split_bytes: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Incident:
    """Read everything under ``paths`` and return the incident. Raises :class:`InputError` for unusable input.

    Without a ``spark`` session, small local inputs are read in this process (:mod:`.local`, the same partition
    code without starting a JVM); anything else starts the default session.
    """
    from flink_runbooks.collect import local
    from flink_runbooks.collect.spark import get_spark

    if not paths:
        raise InputError("no input paths given")
    in_process = False
    listed = None
    if spark is None and all(local.local_path(p) is not None for p in paths):
        listed = list_inputs(None, paths)
        in_process = local.fits_locally(listed.logs, listed.configs)
    if not in_process:
        spark = spark or get_spark()
        # Local paths are listed the same way with or without a JVM (and .gz files are checked only once).
        listed = listed if listed is not None else list_inputs(spark, paths)
    warnings: list[str] = []
    if listed.skipped:
        shown = ", ".join(listed.skipped[:5]) + (f" and {len(listed.skipped) - 5} more" if len(listed.skipped) > 5 else "")
        warnings.append(f"skipped {len(listed.skipped)} file(s) that are neither logs nor Flink config files: {shown}")
    warnings.extend(listed.warnings)
    if not listed.logs and not listed.configs:
        reason = listed.warnings[0] if listed.warnings else "no log or config files found"
        raise InputError(f"nothing to read under {', '.join(paths)}: {reason}")

    config = EffectiveConfig()
    inputs: list[InputFile] = []
    for uri, text in (local.read_configs_locally(listed.configs) if in_process else _read_configs(spark, listed.configs)):
        shown = _display(uri)
        inputs.append(InputFile(path=shown, kind="config", lines=text.count("\n") + (1 if text else 0)))
        if not text.strip():
            warnings.append(f"config file {shown} is empty")
            continue
        fmt = detect_conf_format(text, shown)
        parser_warnings: list[str] = []
        try:
            entries = (parse_yaml_conf(text, shown, parser_warnings) if fmt == "nested"
                       else parse_flat_conf(text, shown, parser_warnings))
        except ConfigError as exc:
            warnings.append(f"{exc} (file ignored; fix the YAML to use its values)")
            continue
        # Lines Flink skips and keys set twice change what Flink loads: worth a word, a few per file.
        warnings.extend(parser_warnings[:5])
        if len(parser_warnings) > 5:
            warnings.append(f"{shown}: {len(parser_warnings) - 5} more configuration warning(s) like the above")
        for key, val, line in entries:
            config.add(key, redact_value(key, val), ConfigSource("file", shown, line))
        if config.file_path is None:
            config.set_file(shown, text, fmt)

    sizes = {uri: size for uri, size in listed.logs}
    nonempty = [uri for uri, size in listed.logs if size > 0]
    for uri, size in listed.logs:
        # An empty .out file is the normal state of a daemon's stdout; any other empty input is worth a word.
        if size == 0 and not re.search(r"\.out(\.\d+)?$", uri):
            warnings.append(f"{_display(uri)} is empty")
    # Arrow to the driver: the records are plain data, no Row objects needed.
    total = sum(sizes[uri] for uri in nonempty)
    if progress:
        progress(f"listed {len(listed.logs)} log file(s) ({total / (1 << 20):,.1f} MiB) and "
                 f"{len(listed.configs)} config file(s)")
    if not nonempty:
        rows = []
    elif in_process:
        rows = local.scan_locally(nonempty, detectors)
    else:
        from flink_runbooks.collect.progress import watch_spark_scan

        small = [uri for uri in nonempty if is_small_file(uri, sizes[uri])] if split_bytes is None else []
        chosen = frozenset(small)
        large = [uri for uri in nonempty if uri not in chosen]
        with watch_spark_scan(spark, total, progress):
            rows = scan_logs(spark, large, detectors, split_bytes).toArrow().to_pylist() if large else []
            if small:
                rows += scan_small_files(spark, small, detectors)
        for r in rows:
            r["file"] = _from_spark(r["file"])
    if progress:
        progress(f"building the incident from {sum(1 for r in rows if r['kind'] == 'record'):,} records")

    stats = [r for r in rows if r["kind"] == "stats"]
    records = [r for r in rows if r["kind"] == "record"]
    files = _file_stats(stats)
    binary_files = {f for f, s in files.items() if s["binary_lines"] > max(2, 0.05 * s["lines"])}
    events: list[Event] = []
    for r in records:
        if r["file"] in binary_files:
            continue
        offset = files[r["file"]]["block_offsets"].get(r["block"], 0)
        events.append(_to_event(r, offset))

    roles = _roles(files, events)
    for uri in nonempty:
        f = _norm_uri(uri)
        s = files.get(f)
        shown = _display(f)
        if s is None:
            # Spark saw no line at all: only possible for a file that is empty after decompression.
            inputs.append(InputFile(path=shown, kind="log", lines=0, bytes=sizes[uri]))
            warnings.append(f"{shown} has no lines")
            continue
        role, host, tm_id = roles.get(f, ("unknown", None, None))
        layout = s["layouts"].most_common(1)[0][0] if s["layouts"] else None
        if f in binary_files:
            warnings.append(f"{shown} looks binary ({s['binary_lines']} of {s['lines']} lines are not text); skipped")
            layout = "binary"
        elif s["headers"] == 0 and s["exception_lines"] == 0:
            warnings.append(f"{shown}: unknown log layout, no line looks like a Flink log record or a stack trace; "
                            f"its {s['lines']} lines were read line by line as plain text")
            layout = "unknown"
        elif s["headers"] == 0:
            layout = "excerpt"
        elif s["binary_lines"] or s["invalid_lines"]:
            warnings.append(f"{shown}: {s['binary_lines'] + s['invalid_lines']} line(s) are not valid UTF-8 and were "
                            f"read with replacement characters")
        inputs.append(InputFile(path=shown, role=role, host=host, tm_id=tm_id, layout=layout, lines=s["lines"],
                                bytes=sizes.get(uri)))
    for ev in events:
        ev.role, ev.host = roles.get(ev.file, ("unknown", None, None))[:2]
        ev.file = _display(ev.file)
    events = _order(events)

    _config_from_logs(events, config)
    version, version_source = detect_version(events, files)
    if flink_version:
        printed = version_source is not None and not version_source.startswith("fingerprint")
        if not printed:
            version, version_source = flink_version, "--flink-version"
        elif not (version == flink_version or version.startswith(flink_version + ".")
                  or flink_version.startswith(version + ".")):
            # The logs say what actually ran; a version typed by hand does not silently replace it.
            warnings.append(f"--flink-version {flink_version} ignored: the logs print Flink {version} "
                            f"({version_source})")
    return Incident(events=events, config=config, flink_version=version, version_source=version_source,
                    inputs=inputs, warnings=warnings)


def _norm_uri(uri: str) -> str:
    # Spark reports local files as file:/path; Hadoop listing may say file:///path.
    return re.sub(r"^file:/+", "file:/", uri)


def _from_spark(uri: str) -> str:
    """A file name as Spark reports it (a percent-encoded URI: ``a%20b.log``) in the listing's spelling."""
    from urllib.parse import unquote

    return _norm_uri(unquote(uri))


def _for_spark(uri: str) -> str:
    """A listed file for Spark's reader, which expands glob characters: they are escaped, the name is literal."""
    return re.sub(r"([{}\[\]*?\\])", r"\\\1", uri)


def _read_configs(spark, uris: Sequence[str]) -> Iterator[tuple[str, str]]:
    if not uris:
        return
    from pyspark.sql import functions as F

    df = spark.read.text([_for_spark(u) for u in uris], wholetext=True).select(
        "value", F.col("_metadata.file_path").alias("f"))
    seen = set()
    for row in df.collect():
        name = _from_spark(row["f"])
        seen.add(name)
        yield name, row["value"]
    for uri in uris:
        if _norm_uri(uri) not in seen:
            yield uri, ""


def _file_stats(stats_rows) -> dict[str, dict]:
    files: dict[str, dict] = {}
    for r in stats_rows:
        f = files.setdefault(r["file"], {"lines": 0, "headers": 0, "exception_lines": 0, "binary_lines": 0,
                                         "invalid_lines": 0,
                                         "layouts": collections.Counter(), "dist": collections.Counter(),
                                         "blocks": {}})
        for k in ("lines", "headers", "exception_lines", "binary_lines", "invalid_lines"):
            f[k] += r.get(k) or 0
        f["layouts"].update(json.loads(r["layouts"] or "{}"))
        f["dist"].update(json.loads(r["dist_versions"] or "{}"))
        f["blocks"][r["block"]] = f["blocks"].get(r["block"], 0) + r["lines"]
    for f in files.values():
        offset, offsets = 0, {}
        for block in sorted(f["blocks"]):
            offsets[block] = offset
            offset += f["blocks"][block]
        f["block_offsets"] = offsets
    return files


def _to_event(r, offset: int) -> Event:
    return Event(
        file=r["file"],
        line=offset + r["line_index"] + 1,
        ts=r["ts"],
        level=r["level"],
        logger=r["logger"],
        thread=redact_text(r["thread"]),
        message=redact_text(r["message"] or ""),
        chain=[ChainLink(c["cls"], redact_text(c["message"] or ""), c["kind"]) for c in (r["chain"] or [])],
        frames=[redact_text(f) for f in (r["frames"] or [])],
        body=[redact_text(b) for b in (r["body"] or [])],
        truncated=bool(r["truncated"]),
    )


def _roles(files: dict[str, dict], events: list[Event]) -> dict[str, tuple[str, str | None, str | None]]:
    """Role, host and TaskManager id of each file, from its name and, better, from what it says."""
    by_file: dict[str, list[Event]] = collections.defaultdict(list)
    for ev in events:
        by_file[ev.file].append(ev)
    out = {}
    for f in files:
        name = f.rsplit("/", 1)[-1]
        role = "unknown"
        for ev in by_file.get(f, []):
            role = next((r for rx, r in _BANNER_ROLE if rx.search(ev.message)), role)
            if role != "unknown":
                break
        if role == "unknown":
            role = next((r for rx, r in _FILE_ROLE if rx.search(name)), "unknown")
        m = _FLINK_DAEMON_NAME.search(name)
        host = m.group("host") if m else None
        tm_id = None
        for ev in by_file.get(f, []):
            rid = re.search(r"Starting TaskManager with ResourceID: (\S+)", ev.message)
            if rid:
                tm_id = rid.group(1)
        out[f] = (role, host, tm_id)
    return out


def _order(events: list[Event]) -> list[Event]:
    """Time order across files; records without a timestamp keep their place after the previous one in their file."""
    keyed = []
    last_ts: dict[str, str] = {}
    for ev in sorted(events, key=lambda e: (e.file, e.line)):
        ts = ev.ts or last_ts.get(ev.file, "")
        last_ts[ev.file] = ts
        keyed.append(((ts, ev.file, ev.line), ev))
    return [ev for _k, ev in sorted(keyed, key=lambda kv: kv[0])]


_LOADING = re.compile(r"Loading (dynamic )?configuration property: ([^,\s]+), ?(.*)$")
_PROGRAM_ARG = re.compile(r"^\s{2,}([a-z][\w.-]*)=(.*)$")
_DYNAMIC_CONFIGS = re.compile(r"-D\s*([a-z][\w.-]*)=(\S*)")


def _config_from_logs(events: list[Event], config: EffectiveConfig) -> None:
    """Configuration as processes printed it: loaded properties, ``-D`` program arguments, dynamic configs."""
    pending_dash_d: dict[str, bool] = {}
    for ev in sorted(events, key=lambda e: (e.file, e.line)):
        msg = ev.message
        m = _LOADING.search(msg)
        if m:
            kind = "dynamic" if m.group(1) else "log"
            config.add(m.group(2), redact_value(m.group(2), m.group(3).strip()), ConfigSource(kind, ev.file, ev.line))
            continue
        if msg.strip() == "-D":
            pending_dash_d[ev.file] = True
            continue
        if pending_dash_d.pop(ev.file, False):
            pm = _PROGRAM_ARG.match(msg)
            if pm:
                config.add(pm.group(1), redact_value(pm.group(1), pm.group(2)), ConfigSource("dynamic", ev.file, ev.line, "-D"))
            continue
        text = " ".join([msg] + ev.body)
        # The start-up script's line; a reader that joins wrapped lines may have put it after the jvm_params line.
        if re.search(r"(?:^|\s)dynamic_configs: ", text):
            text = re.split(r"(?:^|\s)dynamic_configs: ", text, maxsplit=1)[1]
            for key, val in _DYNAMIC_CONFIGS.findall(text):
                config.add(key, redact_value(key, val), ConfigSource("dynamic", ev.file, ev.line, "-D"))


_BANNER = re.compile(r"Starting [\w ]+ \(Version: (?P<v>\d+\.\d+(?:\.\d+)?(?:-[\w.]+)?)")


def detect_version(events: list[Event], files: dict[str, dict]) -> tuple[str | None, str | None]:
    """Flink version from the start-up banner, else the flink-dist jar name, else coarse fingerprints.

    Cluster processes outrank the client (a CLI of another version can submit to a cluster), and the latest banner
    wins (a cluster restarted after an upgrade runs the new version).
    """
    priority = {"jobmanager": 0, "taskmanager": 1, "unknown": 2, "client": 3}
    banners = [(priority.get(ev.role, 2), ev) for ev in events if _BANNER.search(ev.message)]
    if banners:
        best = min(p for p, _ in banners)
        ev = [e for p, e in banners if p == best][-1]
        return _BANNER.search(ev.message).group("v"), f"start-up banner ({ev.file}:{ev.line})"
    dist: collections.Counter = collections.Counter()
    for f in files.values():
        dist.update(f["dist"])
    if dist:
        return dist.most_common(1)[0][0], "flink-dist jar name"
    text = "\n".join(ev.text for ev in events[:5000])
    if "Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to" in text:
        return "1.17", "fingerprint (tolerable-failure message names the reason: 1.17 or newer)"
    if "pekko" in text:
        return "1.18", "fingerprint (Pekko RPC: 1.18 or newer)"
    return None, None
