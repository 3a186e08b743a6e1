"""Read an incident's logs and configs through Spark and turn them into an :class:`~flink_runbooks.model.Incident`.

Pipeline (one pass over the log bytes, no shuffle):

1. List the inputs (:mod:`.listing`: files, directories, globs, Hadoop URIs) and sort them into logs, Flink config
   files and skipped files.
2. The scan. Local files are cut into byte ranges that Spark's tasks read as whole buffers (:mod:`.ranges`); files on
   other file systems come through Spark's text source (:mod:`.scan`); small local inputs are read in this process
   with the same code, without a JVM (:mod:`.local`). Each buffer is scanned once: the detectors' signatures in one
   Hyperscan pass (:mod:`.matcher`), record starts and the structure of stack traces in RE2. Only kept lines become
   Python strings; the others only count for record boundaries and line numbers, which stay exact.
3. :class:`~flink_runbooks.parse.records.RecordAssembler` turns the kept lines of each file block into records, and
   repeated records fold (:mod:`.fold`): the first and last of each kind are kept, the others counted. Per block
   statistics (lines, headers, binary lines) travel back with them.
4. The driver (this module) receives the folded records a slice at a time, folds them again, and derives roles,
   version and the effective configuration: what it holds is bounded whatever the size of the logs.
"""
from __future__ import annotations

import collections
import json
import re
from typing import Callable, Iterator, Sequence

from flink_runbooks.parse.config import (MAX_EFFECTIVE_KEYS, ConfigError, ConfigSource, EffectiveConfig,
                                         detect_conf_format, flink_resource_kind, limit_config_keys, parse_flat_conf,
                                         parse_flink_resource, parse_yaml_conf)
from flink_runbooks.model import ChainLink, ClusterSnapshot, Event, Folded, Incident, InputFile
from flink_runbooks.parse.redact import redact_lines, redact_text, redact_value
from flink_runbooks.collect.listing import (MAX_LINE_BYTES, SPARK_LINE_BYTES, InputError, _display, _for_spark,
                                            _from_spark, _norm_uri, list_inputs, local_path, row_files_from_spark,
                                            shown_path)
from flink_runbooks.collect.fold import Folder
from flink_runbooks.collect.rest import read_bundle
from flink_runbooks.collect.scan import Prefilter, is_small_file, scan_logs, scan_small_files, stream_rows

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


# ------------------------------------------------------------------------------------------------ driver side

def ingest(
    paths: Sequence[str],
    spark=None,
    *,
    flink_version: str | None = None,
    prefilter: Prefilter,
    split_bytes: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Incident:
    """Read everything under ``paths`` and return the incident. Raises :class:`InputError` for unusable input.

    ``prefilter`` says which lines are kept besides the ones every incident needs; the catalogue's is
    ``flink_runbooks.diagnose.ingest``'s.

    Without a ``spark`` session, small local inputs are read in this process (:mod:`.local`, the same partition
    code without starting a JVM); anything else starts the default session.
    """
    from flink_runbooks.collect import local
    from flink_runbooks.collect.spark import get_spark

    if not paths:
        raise InputError("no input paths given")
    in_process = False
    listed = None
    if spark is None and all(local_path(p) is not None for p in paths):
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
        raise InputError(f"nothing to read under {', '.join(shown_path(p) for p in paths)}: {reason}")

    config = EffectiveConfig()
    inputs: list[InputFile] = []
    declared_versions: list[tuple[str, str]] = list(listed.pulled_versions)  # (version, where) not printed by Flink
    # why each input could not be used, for "nothing readable" when none could
    unusable: list[str] = [w for w in listed.warnings if w.endswith("skipped")]
    for uri, text, cut in _read_configs(spark if not in_process else None, listed.configs):
        shown = _display(uri)
        inputs.append(InputFile(path=shown, kind="config", lines=text.count("\n") + (1 if text else 0)))
        if cut:
            warnings.append(f"config file {shown} is larger than {local.MAX_CONFIG_FILE_BYTES >> 20} MiB; "
                            f"the rest of it is ignored")
        if not text.strip():
            warnings.append(f"config file {shown} is empty")
            unusable.append(f"config file {shown} is empty")
            continue
        fmt = detect_conf_format(text, shown)
        parser_warnings: list[str] = []
        text = limit_config_keys(text, shown, fmt, parser_warnings)
        resource = flink_resource_kind(text)
        try:
            if resource:
                entries, declared = parse_flink_resource(text, shown, parser_warnings)
                if declared:
                    declared_versions.append((declared, f"{resource} spec.flinkVersion ({shown})"))
            else:
                entries = (parse_yaml_conf(text, shown, parser_warnings) if fmt == "nested"
                           else parse_flat_conf(text, shown, parser_warnings))
        except ConfigError as exc:
            warnings.append(f"{exc} (file ignored; fix the YAML to use its values)")
            unusable.append(str(exc))
            continue
        # Lines Flink skips and keys set twice change what Flink loads: worth a word, a few per file.
        warnings.extend(parser_warnings[:5])
        if len(parser_warnings) > 5:
            warnings.append(f"{shown}: {len(parser_warnings) - 5} more configuration warning(s) like the above")
        for key, val, line in entries:
            config.add(key, redact_value(key, val), ConfigSource("file", shown, line))
        if config.file_path is None and not resource:  # a diff is made against a Flink config file only
            config.set_file(shown, text, fmt)

    sizes = {uri: size for uri, size in listed.logs}
    nonempty = [uri for uri, size in listed.logs if size > 0]
    for uri, size in listed.logs:
        # An empty .out file is the normal state of a daemon's stdout; any other empty input is worth a word.
        if size == 0 and not re.search(r"\.out(\.\d+)?$", uri):
            warnings.append(f"{_display(uri)} is empty")
        if size == 0:
            unusable.append(f"{_display(uri)} is empty")
    # Arrow to the driver: the records are plain data, no Row objects needed.
    total = sum(sizes[uri] for uri in nonempty)
    if progress:
        progress(f"listed {len(listed.logs)} log file(s) ({total / (1 << 20):,.1f} MiB) and "
                 f"{len(listed.configs)} config file(s)")
    if not nonempty:
        rows = iter(())
    elif in_process:
        rows = local.scan_locally(nonempty, prefilter)
    else:
        rows = _scan_with_spark(spark, nonempty, sizes, total, prefilter, split_bytes, progress, warnings)
    # What arrives is folded again as it arrives: the driver holds a bounded number of records whatever the input.
    folder = Folder()
    stats = []
    for r in rows:
        if r["kind"] == "stats":
            stats.append(r)
        else:
            folder.add(r)
    records = list(folder.records())
    if progress:
        progress(f"building the incident from {len(records):,} records")
    files = _file_stats(stats)
    # a few binary lines are noise in a log (a crash's NUL padding); a file of nothing else is not a log
    binary_files = {f for f, s in files.items()
                    if s["binary_lines"] > max(2, 0.05 * s["lines"]) or 0 < s["binary_lines"] == s["lines"]}
    events: list[Event] = []
    sample_of: dict[str, Event] = {}
    for r in records:
        if r["file"] in binary_files:
            continue
        offset = files[r["file"]]["block_offsets"].get(r["block"], 0)
        events.append(_to_event(r, offset))
        sample_of[r["fingerprint"]] = events[-1]

    roles = _roles(files, events)
    for uri in nonempty:
        f = _norm_uri(uri)
        s = files.get(f)
        shown = _display(f)
        if s is None:
            # Spark saw no line at all: only possible for a file that is empty after decompression.
            inputs.append(InputFile(path=shown, kind="log", lines=0, bytes=sizes[uri]))
            warnings.append(f"{shown} has no lines")
            unusable.append(f"{shown} has no lines")
            continue
        role, host, tm_id = roles.get(f, ("unknown", None, None))
        layout = s["layouts"].most_common(1)[0][0] if s["layouts"] else None
        if s["long_lines"]:
            lines = (f"line {s['first_long_line'] + 1} is" if s["long_lines"] == 1 else
                     f"{s['long_lines']} lines (the first at line {s['first_long_line'] + 1}) are")
            warnings.append(f"{shown}: {lines} longer than {MAX_LINE_BYTES >> 20} MiB; only the start was read "
                            f"(no log record is that long)")
        if f in binary_files:
            warnings.append(f"{shown} looks binary ({s['binary_lines']} of {s['lines']} lines are not text); skipped")
            unusable.append(f"{shown} looks binary")
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
    if config.ignored_keys:
        warnings.append(f"more than {MAX_EFFECTIVE_KEYS:,} distinct configuration keys; "
                        f"{config.ignored_keys:,} more were ignored")
    readable = any(f.kind == "log" and f.lines and f.layout != "binary" for f in inputs)
    if not events and not len(config) and not readable:
        # Every input was unusable: that is bad input (exit 2), not an incident without findings.
        skipped = [name if name.endswith("(empty directory)") else f"{name} is neither a log nor a Flink config file"
                   for name in listed.skipped]
        reasons = list(dict.fromkeys(unusable + skipped)) or ["no log or config lines"]
        more = f"; and {len(reasons) - 10} more" if len(reasons) > 10 else ""
        raise InputError("nothing readable: " + "; ".join(reasons[:10]) + more)
    version, version_source = detect_version(events, files)
    if declared_versions and (version_source is None or version_source.startswith("fingerprint")):
        # no start-up banner: what the cluster's REST API or the FlinkDeployment says beats a fingerprint
        version, version_source = declared_versions[0]
    if flink_version:
        printed = version_source is not None and not version_source.startswith("fingerprint")
        if not printed:
            version, version_source = flink_version, "--flink-version"
        elif not (version == flink_version or version.startswith(flink_version + ".")
                  or flink_version.startswith(version + ".")):
            # The logs say what actually ran; a version typed by hand does not silently replace it.
            warnings.append(f"--flink-version {flink_version} ignored: the logs print Flink {version} "
                            f"({version_source})")
    elif version_source is None or version_source.startswith("fingerprint"):
        mentioned = _mentioned_version(events)
        if mentioned:
            warnings.append(f"the text mentions Flink {mentioned[0]} ({mentioned[1]}), but no log line proves the "
                            f"version that ran: pass --flink-version {mentioned[0]} if it is, so keys and advice "
                            f"match it")
    folded = _folded(folder, files, sample_of)
    if folder.dropped:
        warnings.append(f"{folder.dropped:,} records were not kept: the logs hold more than "
                        f"{folder.max_fingerprints:,} different kinds of WARN, ERROR and matching records")
    scan = {"lines": sum(s["lines"] for s in files.values()),
            "kept_lines": sum(s["kept_lines"] for s in files.values()),
            "records_received": folder.received, "records": len(events),
            "folded": sum(f.count for f in folded), "dropped": folder.dropped}
    snapshots = _pulled_snapshots(paths, listed, warnings)
    for snapshot in snapshots:
        _config_from_checkpoint_settings(snapshot, config)
    return Incident(events=events, config=config, flink_version=version, version_source=version_source,
                    inputs=inputs, warnings=warnings, folded=folded, scan=scan, rest=snapshots)


def _pulled_snapshots(paths: Sequence[str], listed, warnings: list[str]) -> list[ClusterSnapshot]:
    """The REST documents of every bundle written by ``flink-runbooks pull`` among the inputs: a folder given, or
    the folder a listed log or config file of a bundle lies in (``log/<process>/<file>``, ``flink-conf.yaml``)."""
    import os

    candidates: list[str] = []
    for path in paths:
        local = local_path(path)
        if local is not None and os.path.isdir(local):
            candidates.append(os.path.normpath(local))
    for uri in [uri for uri, _size in listed.logs] + list(listed.configs):
        local = local_path(uri)
        if local is None:
            continue
        folder = os.path.dirname(os.path.normpath(local))
        for _ in range(3):  # the bundle, log/, log/<process>/
            candidates.append(folder)
            folder = os.path.dirname(folder)
    snapshots, tried = [], set()
    for folder in candidates:
        if folder in tried:
            continue
        tried.add(folder)
        if not os.path.isfile(os.path.join(folder, "manifest.json")):
            continue
        snapshot, problems = read_bundle(folder, _display(folder))
        warnings.extend(problems)
        if snapshot is not None:
            snapshots.append(snapshot)
    return snapshots


# What the REST API says the job's checkpointing ran with, as the configuration keys the runbooks read: it includes
# what the job's own code set, which no configuration file or log line shows.
def _config_from_checkpoint_settings(snapshot: ClusterSnapshot, config: EffectiveConfig) -> None:
    chosen = next((j for j in snapshot.jobs if j.checkpoint_config and j.checkpoint_config.interval_ms), None)
    if chosen is None:
        return
    settings = chosen.checkpoint_config
    source = ConfigSource("rest", chosen.documents.get("checkpoints-config"),
                          detail=f"GET /jobs/{chosen.jid}/checkpoints/config")
    values = {
        "execution.checkpointing.interval": f"{settings.interval_ms} ms",
        "execution.checkpointing.timeout": f"{settings.timeout_ms} ms" if settings.timeout_ms is not None else None,
        "execution.checkpointing.min-pause": f"{settings.min_pause_ms} ms" if settings.min_pause_ms is not None else None,
        "execution.checkpointing.max-concurrent-checkpoints": settings.max_concurrent,
        "execution.checkpointing.tolerable-failed-checkpoints": settings.tolerable_failed,
        "execution.checkpointing.mode": settings.mode.upper() if settings.mode else None,
        "execution.checkpointing.unaligned.enabled": (str(settings.unaligned).lower()
                                                      if settings.unaligned is not None else None),
    }
    for key, value in values.items():
        if value is not None:
            config.add(key, str(value), source)


def _folded(folder: Folder, files: dict[str, dict], sample_of: dict[str, Event]) -> list[Folded]:
    """The folder's counts as the incident shows them: each with a kept record like it, lines counted from 1."""
    def place(file, block, line_index):
        if file not in files or line_index is None:
            return None
        return f"{_display(file)}:{files[file]['block_offsets'].get(block, 0) + line_index + 1}"

    out = []
    for row in folder.repeat_rows():
        sample = sample_of.get(row["fingerprint"])
        if sample is None:  # its records were all in a file judged binary
            continue
        out.append(Folded(sample=sample.location(), count=row["count"],
                          first=place(row["file"], row["block"], row["line_index"]), first_ts=row["ts"],
                          last=place(row["last_file"], row["last_block"], row["last_line_index"]),
                          last_ts=row["last_ts"]))
    return sorted(out, key=lambda f: -f.count)


def _read_configs(spark, uris: Sequence[str]) -> Iterator[tuple[str, str, bool]]:
    """``(uri, text, cut)`` per config file: local ones read here (a few kilobytes, whatever their names),
    others through Spark; at most MAX_CONFIG_FILE_BYTES of each."""
    from flink_runbooks.collect import local

    yield from local.read_configs_locally([u for u in uris if local_path(u) is not None])
    remote = [u for u in uris if local_path(u) is None]
    if not remote:
        return
    from pyspark.sql import functions as F

    limit = local.MAX_CONFIG_FILE_BYTES
    df = spark.read.text([_for_spark(u) for u in remote], wholetext=True).select(
        F.substring("value", 1, limit).alias("value"), (F.length("value") > limit).alias("cut"),
        F.col("_metadata.file_path").alias("f"))
    seen = set()
    for row in df.collect():
        name = _from_spark(row["f"])
        seen.add(name)
        yield name, row["value"], row["cut"]
    for uri in remote:
        if _norm_uri(uri) not in seen:
            yield uri, "", False


# Hadoop's compression codecs, chosen by extension: the bytes on disk are not the bytes of the lines.
_COMPRESSED = re.compile(r"(?i)\.(gz|bz2|zst|lz4|snappy|deflate|xz|zip)$")


def _scan_with_spark(spark, uris: list[str], sizes: dict[str, int], total: int, prefilter, split_bytes, progress,
                     warnings: list[str]) -> Iterator[dict]:
    """Rows of the scan through Spark. Local files (plain or gzipped) are read by the tasks as byte ranges
    (:mod:`.ranges`); files on other file systems through Spark's text source, where a file with a line longer than
    SPARK_LINE_BYTES (which Hadoop's reader skips) gets a warning."""
    from flink_runbooks.collect.progress import watch_spark_scan
    from flink_runbooks.collect.ranges import RANGE_BYTES, readable_here, scan_ranges

    ranged = [uri for uri in uris if readable_here(uri)]
    remote = [uri for uri in uris if not readable_here(uri)]
    small = [uri for uri in remote if is_small_file(uri, sizes[uri])] if split_bytes is None else []
    chosen = frozenset(small)
    large = [uri for uri in remote if uri not in chosen]
    def scans():
        if ranged:
            partitions, ranges = scan_ranges(spark, [(uri, sizes[uri]) for uri in ranged], prefilter,
                                             split_bytes or RANGE_BYTES)
            yield stream_rows(ranges, partitions)
        if large:
            yield stream_rows(scan_logs(spark, large, prefilter, split_bytes))
        if small:
            yield scan_small_files(spark, small, prefilter)

    read: collections.Counter = collections.Counter()
    cut: set[str] = set()
    with watch_spark_scan(spark, total, progress):
        for scanned in scans():
            for r in map(row_files_from_spark, scanned):
                if r["kind"] == "stats":
                    read[r["file"]] += r["bytes"]
                    if r["long_lines"]:
                        cut.add(r["file"])
                yield r
    for uri in large:
        f = _norm_uri(uri)
        # A byte-order mark is not part of the first line; a file still being written may have grown.
        if _COMPRESSED.search(uri) or (f not in cut and sizes[uri] - read[f] <= 3):
            continue
        warnings.append(f"{_display(uri)}: {sizes[uri] - read[f]:,} bytes are in lines longer than "
                        f"{SPARK_LINE_BYTES >> 20} MiB, which were skipped; line numbers after them are too low")


def _file_stats(stats_rows) -> dict[str, dict]:
    files: dict[str, dict] = {}
    for r in stats_rows:
        f = files.setdefault(r["file"], {"lines": 0, "headers": 0, "exception_lines": 0, "binary_lines": 0,
                                         "invalid_lines": 0,
                                         "layouts": collections.Counter(), "dist": collections.Counter(),
                                         "blocks": {}})
        for k in ("lines", "headers", "exception_lines", "binary_lines", "invalid_lines", "long_lines", "kept_lines"):
            f[k] = f.get(k, 0) + (r.get(k) or 0)
        if r.get("first_long_line") is not None:
            f.setdefault("long_at", []).append((r["block"], r["first_long_line"]))
        f["layouts"].update(json.loads(r["layouts"] or "{}"))
        f["dist"].update(json.loads(r["dist_versions"] or "{}"))
        f["blocks"][r["block"]] = f["blocks"].get(r["block"], 0) + r["lines"]
    for f in files.values():
        offset, offsets = 0, {}
        for block in sorted(f["blocks"]):
            offsets[block] = offset
            offset += f["blocks"][block]
        f["block_offsets"] = offsets
        long_at = sorted(f.get("long_at", []))
        f["first_long_line"] = offsets[long_at[0][0]] + long_at[0][1] if long_at else None
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
        body=redact_lines(r["body"] or []),
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


# Flink's processes; not the Kubernetes operator's ("Starting Flink Kubernetes Operator (Version: 1.13.0"), whose
# release numbers are its own.
_BANNER = re.compile(r"Starting (?![\w ]*Operator \()[\w ]+ \(Version: (?P<v>\d+\.\d+(?:\.\d+)?(?:-[\w.]+)?)")


# "Flink 1.18.1", "flink-1.17.2", "Apache Flink v2.0" in a ticket's prose or a path; not a proof of what ran.
_MENTIONED_VERSION = re.compile(r"(?i)\bflink[ _-]v?(?P<v>(?:1\.(?:[0-9]|1[0-9]|20)|2\.[0-9])(?:\.\d+)?)(?![\d.]*\d)")


def _mentioned_version(events: list[Event]) -> tuple[str, str] | None:
    """The Flink version a pasted text names in passing (with where), when the logs themselves do not print one."""
    for ev in events[:5000]:
        m = _MENTIONED_VERSION.search(ev.text)
        if m:
            return m.group("v"), f"{ev.file}:{ev.line}"
    return None


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
    if _LEGACY_NETWORK_KEYS in text:
        # the message prints the keys its release reads (NetworkBufferPool, checked in 1.9.3 and 1.12.5)
        return "1.9", "fingerprint (the network-buffer message names taskmanager.network.memory.*: 1.9 or older)"
    return None, None


_LEGACY_NETWORK_KEYS = "by setting the configuration keys 'taskmanager.network.memory.fraction'"
