"""Listing an incident's inputs: files, directories, globs and Hadoop URIs sorted into logs, Flink config files
and skipped files, each bad file (unreadable, broken gzip, a link out of the input) named in a warning.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Iterable
from flink_runbooks.parse.redact import redact_text


LOG_NAME = re.compile(r"(?i)(\.(log|out|err|txt|json|jsonl|ndjson)(\.\d+)?|\.log\.\d{4}-\d{2}-\d{2}[\w.-]*|\.\d+)(\.gz)?$|^[^.]+$")
CONFIG_NAMES = ("flink-conf.yaml", "flink-conf.yml", "config.yaml", "config.yml")
# Other names a Flink configuration is attached under (prod-flink-conf.yaml, flink-conf.yaml.txt, config.yaml.bak):
# such a file is read as configuration when its content is Flink's keys (see _is_renamed_flink_config).
_RENAMED_CONFIG_NAME = re.compile(r"(?i)\.(ya?ml|txt|bak|orig|old|save|copy|conf|cfg|properties|\d+)$|conf|config")
# Namespaces only Flink's options use (with the keys its releases declare, vocabulary.options).
_FLINK_NAMESPACES = ("jobmanager.", "taskmanager.", "state.", "execution.", "restart-strategy", "high-availability",
                     "heartbeat.", "pipeline.", "parallelism.", "akka.", "pekko.", "blob.", "classloader.",
                     "io.tmp.dirs", "rest.", "web.", "slot.", "cluster.", "metrics.reporter", "env.java.opts",
                     "kubernetes.", "historyserver.", "resourcemanager.", "table.exec.", "sql-gateway.")
_CONFIG_SNIFF_BYTES = 1 << 20
# How a configuration's first setting starts: a key and its colon (a log record starts with its time stamp instead).
_SETTING_START = re.compile(r"^[\w.$-]+\s*:")
# An example incident's own description of what it should diagnose: reading it as a log would be cheating.
METADATA_NAMES = ("expected.json",)
# No log line is this long: a longer one (a file of NUL bytes, a dump without line breaks) is cut to its start on
# every ingestion path, so a single line can never exhaust memory.
MAX_LINE_BYTES = 64 << 20
# Spark's line reader is told to skip lines longer than this (the JVM's heap holds a few such rows per task, not
# rows of hundreds of megabytes); a local file that has one is read in process instead, where it is read whole up to
# MAX_LINE_BYTES.
SPARK_LINE_BYTES = 8 << 20


class InputError(Exception):
    """Bad input that stops ingestion (missing path, nothing to read); the message is one line for the user."""


@dataclass
class ListedInputs:
    logs: list[tuple[str, int]] = field(default_factory=list)  # (uri, size)
    configs: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # one per file that cannot be read, named
    # (version, where) of folders pulled from a running cluster: what its REST API said it runs
    pulled_versions: list[tuple[str, str]] = field(default_factory=list)



# ------------------------------------------------------------------------------------------------ listing

# Control characters (a line break in a file name) and bytes that are not UTF-8 (decoded by Python as lone
# surrogates) would break a one-line warning, a terminal or a JSON encoder.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\udc80-\udcff]")


def shown_path(path: str) -> str:
    """A file name as it is shown in warnings, evidence and reports: control characters and undecodable bytes
    escaped the way Python writes them (``\\n``, ``\\x1b``, ``\\xff``), everything else as it is."""
    def escape(m: re.Match) -> str:
        c = m.group(0)
        if "\udc80" <= c <= "\udcff":
            return f"\\x{ord(c) - 0xDC00:02x}"
        return repr(c)[1:-1]

    return _UNPRINTABLE.sub(escape, path)


def _display(uri: str) -> str:
    """Paths as the user knows them: local files without the ``file:`` scheme, credentials in a URL masked,
    unprintable characters escaped (:func:`shown_path`)."""
    if uri.startswith("file:"):
        path = re.sub(r"^file:(//)?", "", uri)
        return shown_path(_derived.get(path, path))
    return shown_path(redact_text(uri) or uri)


# A URI names its scheme and a path (``hdfs://nn/logs``, ``s3a://bucket/x``, ``hdfs:/logs``); ``file:`` URIs are
# local paths. Anything else is a local path whatever characters it holds (``?``, ``#``, ``%``, ``:``).
_URI = re.compile(r"^[a-zA-Z][\w+.-]+:/")


def _is_remote(raw: str) -> bool:
    """Whether ``raw`` is read through Hadoop's file systems: a URI with a scheme other than ``file:`` that does not
    name an existing local path."""
    return not raw.startswith("file:") and bool(_URI.match(raw)) and not os.path.lexists(raw)


def _local(raw: str) -> str:
    """The local path behind a plain path or a ``file:`` URI, taken literally (no query, fragment or %-escape)."""
    return os.path.expanduser(re.sub(r"^file:(//)?", "", raw))


def local_path(uri: str) -> str | None:
    """The absolute local path behind a listed URI or a plain path; None for another file system."""
    if _is_remote(uri):
        return None
    return os.path.abspath(_local(uri))


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
            raise InputError(f"no such file or directory: {shown_path(raw)}")


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
        raise InputError(f"no such file or directory: {shown_path(raw)}")
    for m in matches:
        if os.path.isdir(m):
            _walk(m, listed, seen)
        elif os.path.lexists(m) and not os.path.exists(m):
            listed.warnings.append(f"{shown_path(m)} is a broken link; skipped")
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
            listed.warnings.append(f"{shown_path(current)} cannot be listed ({exc.strerror or exc}); skipped")
            continue
        subdirs = []
        # A folder pulled from a cluster (collect.rest) keeps its REST documents beside the logs: they are not logs.
        pulled = _is_pulled_bundle(current)
        if pulled:
            version = _pulled_version(current)
            if version:
                listed.pulled_versions.append((version, f"the cluster's REST API ({shown_path(current)}/manifest.json)"))
        for entry in reversed(entries):
            path = entry.path
            if entry.name.startswith((".", "_")) or (pulled and entry.name in PULLED_DOCUMENTS):
                continue
            if entry.is_symlink():
                real = os.path.realpath(path)
                if not os.path.exists(real):
                    listed.warnings.append(f"{shown_path(path)} is a broken link; skipped")
                    continue
                if real != tree and not real.startswith(tree + os.sep):
                    listed.warnings.append(f"{shown_path(path)} links to {shown_path(real)}, outside "
                                           f"{shown_path(top)}; not followed "
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


PULL_MANIFEST = "manifest.json"
PULLED_DOCUMENTS = (PULL_MANIFEST, "rest")


def _is_pulled_bundle(folder: str) -> bool:
    """The folder was written by ``flink-runbooks pull``: its manifest names the cluster it came from."""
    manifest = os.path.join(folder, PULL_MANIFEST)
    try:
        if os.path.getsize(manifest) > 16 << 20:
            return False
        with open(manifest, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and "source" in doc and "requests" in doc


def _is_flink_resource(path: str) -> bool:
    from flink_runbooks.parse.config import flink_resource_kind

    try:
        with open(path, "rb") as fh:
            head = fh.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return False
    return flink_resource_kind(head) is not None


# Kubernetes documents (events, pods, `kubectl describe pod`, a FlinkDeployment's status) are read as log records:
# converted here, once, into a log file of their facts (parse.kubernetes), which the scan reads like any other log.
# Evidence names the document itself: its facts stand on the document's own lines.
_KUBERNETES_NAME = re.compile(r"(?i)(\.(json|ya?ml|txt|log|out|describe)|^[^.]+)$")
_derived: dict[str, str] = {}  # converted file -> the document it came from
_derived_folder: list[str] = []


def _kubernetes_document(path: str, size: int, listed: ListedInputs) -> bool:
    """Whether ``path`` is a Kubernetes document (then it is listed: its records as a log, a Flink resource also as
    configuration, or a warning when it cannot be read); False for anything else."""
    from flink_runbooks.parse import kubernetes
    from flink_runbooks.parse.config import flink_resource_kind

    name = os.path.basename(path)
    if not _KUBERNETES_NAME.search(name) or name.lower() in CONFIG_NAMES + METADATA_NAMES:
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(kubernetes.HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return False
    kind = kubernetes.document_kind(head)
    if kind is None:
        return False
    uri = "file://" + os.path.abspath(path)
    resource = kind == "yaml" and flink_resource_kind(head) is not None
    if resource:  # its spec.flinkConfiguration is the configuration; its status, if any, becomes records below
        listed.configs.append(uri)
    if size > kubernetes.MAX_DOCUMENT_BYTES:
        listed.warnings.append(f"{shown_path(path)} looks like a Kubernetes document of {size / (1 << 20):,.1f} MiB, "
                               f"more than the {kubernetes.MAX_DOCUMENT_BYTES >> 20} MiB one incident's events, pods "
                               f"or resource take; skipped (select fewer objects, e.g. --field-selector)")
        return True
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8", errors="replace")
        lines, _ = kubernetes.records_of(text, shown_path(path), kind)
    except kubernetes.DocumentError as exc:
        if not resource:
            listed.warnings.append(f"{exc}; skipped")
        return True
    except OSError as exc:
        listed.warnings.append(f"{shown_path(path)} cannot be read ({exc.strerror or exc}); skipped")
        return True
    if any(lines):
        derived = _write_derived(path, lines)
        listed.logs.append(("file://" + derived, os.path.getsize(derived)))
    elif not resource:
        listed.skipped.append(shown_path(path) + " (a Kubernetes document without events, pods or status)")
    return True


def _write_derived(path: str, lines: list[str]) -> str:
    """The records of a document as a file in this process's own temporary folder (removed when it exits), named
    after the document so its role (jobmanager, taskmanager) reads from the name as for any log."""
    import atexit
    import hashlib
    import shutil
    import tempfile

    if not _derived_folder:
        folder = tempfile.mkdtemp(prefix="flink-runbooks-kubernetes-")
        atexit.register(shutil.rmtree, folder, True)
        _derived_folder.append(folder)
    data = ("\n".join(lines) + "\n").encode("utf-8", errors="surrogateescape")
    digest = hashlib.sha256(os.path.abspath(path).encode("utf-8", errors="surrogateescape") + b"\0" + data)
    safe = re.sub(r"[^\w.-]", "_", os.path.basename(path))[:100]
    derived = os.path.join(_derived_folder[0], f"{digest.hexdigest()[:16]}-{safe}.records.log")
    if not os.path.exists(derived):
        with open(derived, "wb") as fh:
            fh.write(data)
    _derived[derived] = os.path.abspath(path)
    return derived


def _pulled_version(folder: str) -> str | None:
    try:
        with open(os.path.join(folder, PULL_MANIFEST), encoding="utf-8") as fh:
            version = json.load(fh).get("flink_version")
    except (OSError, ValueError, AttributeError):
        return None
    return version if isinstance(version, str) and re.fullmatch(r"\d+\.\d+[\w.-]*", version) else None


def _add_local_file(path: str, listed: ListedInputs, seen: set[str], explicit: bool) -> None:
    import stat as _stat

    real = os.path.realpath(path)
    if real in seen:
        return
    seen.add(real)
    try:
        st = os.stat(path)
    except OSError as exc:
        listed.warnings.append(f"{shown_path(path)} cannot be read ({exc.strerror or exc}); skipped")
        return
    if not _stat.S_ISREG(st.st_mode):
        if explicit or LOG_NAME.search(os.path.basename(path)) or os.path.basename(path).lower() in CONFIG_NAMES:
            listed.warnings.append(f"{shown_path(path)} is not a regular file (a pipe, socket or device); skipped")
        return
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
    except OSError as exc:
        listed.warnings.append(f"{shown_path(path)} cannot be read ({exc.strerror or exc}); skipped")
        return
    uri = "file://" + os.path.abspath(path)
    if _kubernetes_document(path, st.st_size, listed):
        return
    if path.lower().endswith((".yaml", ".yml")) and os.path.basename(path).lower() not in CONFIG_NAMES:
        if _is_flink_resource(path):  # a FlinkDeployment: its spec.flinkConfiguration is the configuration
            listed.configs.append(uri)
            return
    if (_RENAMED_CONFIG_NAME.search(os.path.basename(path)) and os.path.basename(path).lower() not in CONFIG_NAMES
            and not path.lower().endswith(".gz") and _is_renamed_flink_config(path)):
        listed.configs.append(uri)
        return
    if path.lower().endswith(".gz") and (explicit or LOG_NAME.search(os.path.basename(path))):
        problem = gzip_problem(path, head)
        if problem:
            listed.warnings.append(f"{shown_path(path)} {problem}; skipped")
            return
    _classify(uri, st.st_size, listed, explicit=explicit)


def _is_renamed_flink_config(path: str) -> bool:
    """A file under another name than Flink's whose content is a Flink configuration: nearly every line a setting
    (legacy ``key: value`` lines or standard YAML), and most of the keys Flink's own (declared by a release at hand,
    a spelling of keys.py, or one of Flink's namespaces), at least two of them. A log, a pasted trace or a YAML file
    of another program's keys is none."""
    from flink_runbooks.parse.config import ConfigError, parse_conf
    from flink_runbooks.vocabulary import keys
    from flink_runbooks.vocabulary.options import KEYS as OPTION_KEYS

    try:
        if os.path.getsize(path) > _CONFIG_SNIFF_BYTES:
            return False
        with open(path, "rb") as fh:
            # the first setting decides cheaply for the many rolled logs (taskmanager.log.1) the name admits
            start = fh.read(4096)
            first = next((line for line in start.decode("utf-8", errors="replace").splitlines()
                          if line.split("#", 1)[0].strip() not in ("", "---")), "")
            if not _SETTING_START.match(first):
                return False
            raw = start + fh.read(_CONFIG_SNIFF_BYTES)
    except OSError:
        return False
    if b"\0" in raw:
        return False
    text = raw.decode("utf-8", errors="replace")
    meaningful = [line for line in text.splitlines() if line.split("#", 1)[0].strip()]
    if not meaningful:
        return False
    try:
        entries = parse_conf(text, path, None, [])
    except ConfigError:
        return False
    if len(entries) < 0.8 * len([line for line in meaningful if not line[:1].isspace()]):
        return False  # lines that are no settings: a log or a trace
    flink = [key for key, _value, _line in entries
             if key in OPTION_KEYS or keys.concept_of(key) or key.startswith(_FLINK_NAMESPACES)]
    return len(flink) >= 2 and len(flink) >= 0.5 * len(entries)


# A gzipped log decompresses to 5-20 times its size; far beyond that it is a decompression bomb, not a log.
GZIP_MAX_RATIO = 200
GZIP_MAX_LINE_BYTES = MAX_LINE_BYTES


def gzip_problem(path: str, head: bytes | None = None) -> str | None:
    """Why a ``.gz`` file cannot be read as a log (not gzip, truncated, corrupt, a bomb, a line too long), or None.

    Reading it through once here costs about a second per 300 MB decompressed and saves the scan from a Java error
    (truncated or corrupt data) or a heap exhausted by a single endless line. A line is measured across decompressed
    pieces (one piece is at most 8 MiB, so a longer line always spans pieces)."""
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



def _norm_uri(uri: str) -> str:
    # Spark reports local files as file:/path; Hadoop listing may say file:///path.
    return re.sub(r"^file:/+", "file:/", uri)


def _from_spark(uri: str) -> str:
    """A file name as Spark reports it (a percent-encoded URI: ``a%20b.log``) in the listing's spelling; bytes that
    are not UTF-8 come back as Python spells them in file names (lone surrogates)."""
    from urllib.parse import unquote

    return _norm_uri(unquote(uri, errors="surrogateescape"))


def row_files_from_spark(row: dict) -> dict:
    """A scan row with its file names (``file``, and ``last_file`` of a folded repeat) in the listing's spelling."""
    for key in ("file", "last_file"):
        if row.get(key):
            row[key] = _from_spark(row[key])
    return row


def _for_spark(uri: str) -> str:
    """A listed file for Spark's reader, which expands glob characters: they are escaped, the name is literal."""
    return re.sub(r"([{}\[\]*?\\])", r"\\\1", uri)
