"""Configuration values and keys a Flink release cannot use: a value it cannot parse, a key it no longer reads, a
file it no longer reads (2.x reads only ``config.yaml``), a key no option declares.

Which keys a release declares comes from the release's own option classes (:mod:`flink_runbooks.vocabulary.options`, generated from
flink-dist) and from the renames of :mod:`flink_runbooks.vocabulary.keys`; a misspelling is an unknown key whose closest
declared key (``difflib``) is one typo away.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field

from flink_runbooks.vocabulary.options import KEYS as OPTION_KEYS, RELEASES, option_type
from flink_runbooks.evidence.memory import options as memory_options
from flink_runbooks.model import Event, Incident
from flink_runbooks.vocabulary import keys
from flink_runbooks.vocabulary.units import _DURATION_UNITS_MS, _SIZE_UNITS
from flink_runbooks.vocabulary.versions import minor_text

# Flink's own words for a value it cannot parse (ConfigurationUtils / Configuration, every release since 1.10).
COULD_NOT_PARSE = re.compile(r"Could not parse value '(?P<value>[^']*)' for key '(?P<key>[^']+)'")
# What the deepest cause says about the expected type.
EXPECTS_NUMBER = re.compile(r"NumberFormatException: For input string: \"(?P<value>[^\"]*)\"")
DURATION_UNIT = re.compile(r"Time interval unit label '(?P<unit>[^']*)' does not match")
SIZE_UNIT = re.compile(r"Memory size unit '(?P<unit>[^']*)' does not match")
NOT_A_NUMBER_START = re.compile(r"text does not start with a number|[Aa]rgument is an empty- or whitespace-only string")
BOOLEAN = re.compile(r"Unrecognized option for boolean: (?P<value>\S+)")
ENUM = re.compile(r"Value for config option (?P<key>\S+) must be one of (?P<values>\[[^\]]*\])|"
                  r"No enum constant (?P<cls>[\w.$]+)\.(?P<value>\S+)")
LOADING = re.compile(r"Loading configuration property: (?P<key>[^,]+), (?P<value>.*)$")
DEPRECATED_KEY = re.compile(r"Config uses deprecated configuration key '(?P<old>[^']+)' instead of proper key '(?P<new>[^']+)'")
# Keys under these prefixes are the user's own names (reporters, connectors, plugins): never "misspelled".
_OPEN_NAMESPACES = ("metrics.reporter.", "metrics.reporters", "security.", "kubernetes.", "yarn.", "containerized.",
                    "s3.", "fs.", "hadoop.", "env.", "high-availability.", "properties.", "table.", "sql-gateway.",
                    "state.backend.rocksdb.", "state.backend.forst.", "historyserver.", "python.", "flink.hadoop.",
                    "flink.yarn.", "pipeline.global-job-parameters", "external-resource.", "akka.", "pekko.",
                    "log.", "zookeeper.", "plugin.", "heartbeat.rpc-failure-threshold")
# Keys Flink's own Docker image configuration has long carried although no option reads them (queryable state reads
# query.server.ports): harmless, and not what anyone set.
HARMLESS_UNREAD = frozenset({"query.server.port"})
MEMORY_MODEL_KEYS = ("taskmanager.memory.", "jobmanager.memory.", "taskmanager.heap.", "jobmanager.heap.",
                     "taskmanager.network.numberOfBuffers", "taskmanager.network.memory.")
# Removed keys whose replacement takes another shape of value (the setting must be rewritten, not renamed).
REWRITE_AS = {
    "pipeline.registered-kryo-types": ("pipeline.serialization-config", "{type: kryo}"),
    "pipeline.registered-pojo-types": ("pipeline.serialization-config", "{type: pojo}"),
    "pipeline.default-kryo-serializers": ("pipeline.serialization-config", "{type: kryo, kryo-type: default, class: <serializer>}"),
}
# A key this close (difflib ratio) to a declared one, and not itself declared, is a typo.
TYPO_RATIO = 0.9


@dataclass
class ParseFailure:
    """Flink refused a value: the key, the value, what the release expected and the record that says so."""

    event: Event
    key: str
    value: str
    expects: str  # "number" | "duration" | "memory size" | "boolean" | "enum" | "unknown"
    detail: str
    files: set[str] = field(default_factory=set)  # every log or output file that reports it


def parse_failures(incident: Incident) -> list[ParseFailure]:
    """Every key whose value Flink could not parse, first record per key."""
    out: dict[str, ParseFailure] = {}
    for ev in incident.events:
        if not ev.chain and not COULD_NOT_PARSE.search(ev.message):
            continue
        m = COULD_NOT_PARSE.search(ev.text)
        if not m:
            continue
        if m["key"] in out:
            out[m["key"]].files.add(os.path.basename(ev.file))
            continue
        out[m["key"]] = ParseFailure(ev, m["key"], m["value"], *_expected(ev.text), files={os.path.basename(ev.file)})
    return list(out.values())


def _expected(text: str) -> tuple[str, str]:
    if m := DURATION_UNIT.search(text):
        return "duration", f"the unit '{m['unit'].strip()}' is not a duration unit (whole numbers with d, h, min, s, ms)"
    if m := SIZE_UNIT.search(text):
        return "memory size", f"the unit '{m['unit'].strip()}' is not a size unit (whole numbers with b, k, m, g, t)"
    if m := BOOLEAN.search(text):
        return "boolean", "the option takes true or false"
    if m := ENUM.search(text):
        return "enum", "the option takes one of its named values" + (f": {m['values']}" if m["values"] else "")
    if EXPECTS_NUMBER.search(text):
        return "number", "this release reads the option as a plain number (no unit)"
    if NOT_A_NUMBER_START.search(text):
        return "size or duration", "the value must start with a whole number"
    return "unknown", "the deepest cause does not say which format the option takes"


def corrected_value(failure: ParseFailure) -> str | None:
    """The value in the format the release expects, or None when it cannot be derived from the value alone."""
    value = failure.value.strip().strip("'\"")
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Zµ]*)\s*$", value)
    if failure.expects == "number" and m and m.group(2).lower() in _DURATION_UNITS_MS and m.group(2):
        # A duration written with a unit where the release still reads milliseconds (e.g. heartbeat.timeout <= 1.18).
        return str(int(float(m.group(1)) * _DURATION_UNITS_MS[m.group(2).lower()]))
    if failure.expects in ("duration", "size or duration") and m and m.group(2).lower() in _DURATION_UNITS_MS:
        ms = float(m.group(1)) * _DURATION_UNITS_MS[m.group(2).lower()]
        return _whole_duration(ms)
    if failure.expects in ("memory size", "size or duration") and m and m.group(2).lower() in _SIZE_UNITS:
        size = float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
        return _whole_size(size)
    if failure.expects in ("memory size",) and m:
        unit = m.group(2).lower().rstrip("s")
        for spoken, flink in (("gigabyte", "gb"), ("megabyte", "mb"), ("kilobyte", "kb"), ("terabyte", "tb"),
                              ("gib", "gb"), ("mib", "mb"), ("kib", "kb")):
            if unit == spoken:
                return _whole_size(float(m.group(1)) * _SIZE_UNITS[flink])
    if failure.expects == "boolean" and value.lower() in ("yes", "on", "1", "enabled", "no", "off", "0", "disabled"):
        return "true" if value.lower() in ("yes", "on", "1", "enabled") else "false"
    return None


_VALUE = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[a-zA-Zµ]*)\s*$")
# How a failure's expected format reads as an option type of the release's declarations.
_TYPE_OF_EXPECTED = {"number": "number", "duration": "duration", "memory size": "memory size"}


def value_problem(value: str, option: str | None) -> str | None:
    """What keeps an option of this type from reading ``value``: "unit on a number" (a duration written where the
    release reads plain milliseconds), "fraction" (durations and sizes take whole numbers), "spelled unit" (a size
    unit Flink does not know, such as "gigabytes"), or None when it reads it (or the shape is not one of these)."""
    m = _VALUE.match(value.strip().strip("'\""))
    if not m or option is None:
        return None
    number, unit = m["number"], m["unit"].lower()
    if option == "number":
        return "unit on a number" if unit and unit in _DURATION_UNITS_MS else None
    if option == "duration":
        return "fraction" if "." in number and unit in _DURATION_UNITS_MS else None
    if option == "memory size":
        if "." in number and unit in _SIZE_UNITS:
            return "fraction"
        return "spelled unit" if unit and unit not in _SIZE_UNITS else None
    return None


def same_problem(incident: Incident, failure: ParseFailure) -> list[ParseFailure]:
    """The other configured keys this release reads as the same type as the refused one and whose values it would
    refuse for the same reason: Flink stops at the first value it cannot parse, so each of them would fail the next
    start. One per key, in the order of their lines, with the line that sets it as its record."""
    version = incident.version_tuple
    option = option_type(failure.key, version) or _TYPE_OF_EXPECTED.get(failure.expects)
    problem = value_problem(failure.value, option)
    if problem is None:
        return []
    out = []
    for key, configured in incident.config.items():
        if key == failure.key or option_type(key, version) != option:
            continue
        value = configured.value.strip().strip("'\"")
        if value_problem(value, option) != problem:
            continue
        event = _source_event(incident, key, value, configured.source)
        if event is None:
            continue
        out.append(ParseFailure(event, key, value, failure.expects, failure.detail))
    return sorted(out, key=lambda f: (f.event.file, f.event.line))


def _whole_duration(ms: float) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{int(ms // size)} {unit}"
    return f"{int(ms)} ms"


def _whole_size(num: float) -> str:
    for unit, size in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if num >= size and num % size == 0:
            return f"{int(num // size)}{unit}"
    return f"{int(num)}b"


@dataclass
class KeyProblem:
    """A key the release does not read: misspelled, removed, or in a file the release ignores."""

    key: str
    value: str
    kind: str  # "misspelled" | "removed" (not read by this release) | "file-not-read"
    replacement: str | None  # the key the release reads instead (None: no one-to-one replacement)
    where: str  # file:line or log file:line
    event: Event
    rewrite: str | None = None  # the setting in the replacement's own format, when it is not the same value


def declared_keys(version: tuple[int, ...] | None) -> set[str]:
    """Keys the option classes of the nearest release at hand declare, plus every spelling keys.py knows that the
    version reads, plus the memory model's options."""
    release = _nearest_release(version)
    declared = {k for k, rels in OPTION_KEYS.items() if release in rels}
    for concept in keys.CONCEPTS:
        for kn in concept.names:
            if version is None or kn.valid_in(version):
                declared.add(kn.name)
    declared.update(_memory_keys(version))
    return declared


def _memory_keys(version: tuple[int, ...] | None) -> set[str]:
    """The TaskManager memory model's options (and their deprecated names) as the memory runbooks know them."""
    opts = memory_options._tm_options(tuple(version[:3]) if version else memory_options.DEFAULT_VERSION)
    out: set[str] = set()
    for opt in vars(opts).values():
        if opt is not None:
            out.add(opt.key)
            out.update(getattr(opt, "deprecated", ()) or ())
    return out


def _nearest_release(version: tuple[int, ...] | None) -> str:
    if not version:
        return RELEASES[-1]
    wanted = tuple(version[:2])
    parsed = [tuple(int(p) for p in r.split(".")) for r in RELEASES]
    older = [r for r in parsed if r <= wanted]
    best = older[-1] if older else parsed[0]
    return ".".join(map(str, best))


def keys_by_prefix(declared: set[str]) -> dict[str, list[str]]:
    """The declared keys grouped by their first segment, built once per incident for :func:`closest_key`."""
    index: dict[str, list[str]] = {}
    for k in declared:
        index.setdefault(k.split(".", 1)[0], []).append(k)
    return index


def closest_key(key: str, declared: set[str], by_prefix: dict[str, list[str]] | None = None) -> str | None:
    """The declared key this one is a typo of, or None."""
    if key in declared or key.startswith(_OPEN_NAMESPACES) or "." not in key:
        return None
    if key in OPTION_KEYS or keys.concept_of(key) or keys.removed_in(key):
        return None  # a real key of some release: not a typo (removed or renamed keys are judged as such)
    by_prefix = by_prefix if by_prefix is not None else keys_by_prefix(declared)
    prefix = key.split(".", 1)[0]
    # A typo in the first segment is looked for among the keys whose first segment is close to it, not among every
    # option: a configuration of thousands of unknown keys must not cost a comparison with each option each.
    candidates = by_prefix.get(prefix) or [k for near in difflib.get_close_matches(prefix, by_prefix, n=3, cutoff=0.75)
                                           for k in by_prefix[near]]
    best = difflib.get_close_matches(key, candidates, n=1, cutoff=TYPO_RATIO)
    if not best or best[0] == key or best[0].lower() == key.lower() and best[0] in declared and key in declared:
        return None
    return best[0]


def key_problems(incident: Incident) -> list[KeyProblem]:
    """Keys set in the configuration (file or logged at start-up) that this release does not read."""
    version = incident.version_tuple
    declared = declared_keys(version)
    by_prefix = keys_by_prefix(declared)
    out: list[KeyProblem] = []
    seen: set[str] = set()
    ignored_files = _files_not_read(incident)
    for key in incident.config:
        history = incident.config.history(key)
        if not history or key in seen:
            continue
        # Flink's own "Loading configuration property" line proves the key reached it; else the config file's line.
        shown = next((cv for cv in history if cv.source.kind == "log"), history[0])
        source = shown.source
        event = _source_event(incident, key, shown.value, source)
        if event is None:
            continue
        where = f"{os.path.basename(source.path or '')}:{source.line}" if source.line else str(source)
        file_source = history[0].source
        if file_source.path and file_source.path in ignored_files and all(cv.source.path == file_source.path
                                                                          for cv in history):
            out.append(KeyProblem(key, history[0].value, "file-not-read", key, where, event))
            seen.add(key)
            continue
        if key in HARMLESS_UNREAD:
            continue
        if key.startswith(MEMORY_MODEL_KEYS) and keys.removed_in(key):
            continue  # the memory model's removed keys (legacy heap sizes) are tm-memory-misconfiguration's
        removed = keys.removed_in(key)
        if version and _newer_than_release(key, version):
            # a spelling a later release introduced: this one does not read it yet
            out.append(KeyProblem(key, history[0].value, "removed", _replacement(key, version), where, event))
            seen.add(key)
            continue
        if version and removed and tuple(version[:2]) >= removed:
            replacement = _replacement(key, version)
            out.append(KeyProblem(key, history[0].value, "removed", replacement, where, event))
            seen.add(key)
            continue
        if version and _dropped_by_release(key, version):
            out.append(KeyProblem(key, history[0].value, "removed", _replacement(key, version), where, event))
            seen.add(key)
            continue
        typo = closest_key(key, declared, by_prefix)
        if typo:
            out.append(KeyProblem(key, history[0].value, "misspelled", typo, where, event))
            seen.add(key)
    for problem in out:
        if problem.kind == "removed" and problem.key in REWRITE_AS:
            target, shape = REWRITE_AS[problem.key]
            entries = "\n".join(f"  - {cls.strip()}: {shape}" for cls in re.split(r"[;,]", problem.value)
                                 if cls.strip())
            problem.replacement, problem.rewrite = target, f"{target}:\n{entries}"
    return out


def _newer_than_release(key: str, version: tuple[int, ...]) -> bool:
    """A spelling this exact release's own option classes do not declare, which a later release at hand does."""
    minor = minor_text(version)
    releases = OPTION_KEYS.get(key)
    if minor not in RELEASES or not releases or minor in releases:
        return False
    return all(tuple(int(p) for p in r.split(".")) > tuple(version[:2]) for r in releases)


def _dropped_by_release(key: str, version: tuple[int, ...]) -> bool:
    """Declared by an older release at hand, not by this version's (nor renamed in keys.py): removed."""
    release = _nearest_release(version)
    releases = OPTION_KEYS.get(key)
    if not releases or release in releases or key.startswith(_OPEN_NAMESPACES):
        return False
    return all(tuple(int(p) for p in r.split(".")) < tuple(version[:2]) for r in releases)


def _replacement(key: str, version: tuple[int, ...]) -> str | None:
    name = keys.name_for(key, version)
    if name != key:
        return name
    return None


def _files_not_read(incident: Incident) -> set[str]:
    """Config files the release ignores: ``flink-conf.yaml`` on 2.x (only ``config.yaml`` is read)."""
    version = incident.version_tuple
    if not version or version[0] < 2:
        return set()
    return {f.path for f in incident.inputs if f.kind == "config" and os.path.basename(f.path) == "flink-conf.yaml"}


def _source_event(incident: Incident, key: str, value: str, source) -> Event | None:
    """The record that shows ``key`` being set: the logged property, else the config file's line."""
    if source.kind in ("log", "dynamic") and source.path:
        for ev in incident.events:
            if ev.file == source.path and ev.line == source.line:
                return ev
    if source.kind in ("file", "rest") and source.path:
        return Event(file=source.path, line=source.line or 0, message=f"{key}: {value}", role="config")
    return None


def deprecation_warnings(incident: Incident) -> list[Event]:
    return [ev for ev in incident.events if DEPRECATED_KEY.search(ev.message)]
