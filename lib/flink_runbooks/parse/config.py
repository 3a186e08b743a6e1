"""Flink configuration files and the effective configuration of an incident, with the provenance of every value.

Two file generations exist (reference §1.1): the legacy ``flink-conf.yaml`` read by Flink's own line parser (≤ 1.18,
and 1.19/1.20 when a legacy file is present) and the standard-YAML ``config.yaml`` (1.19+, the only one in 2.x) whose
nested maps are flattened with ``.``. Both parsers return ``(key, value, line)`` tuples in file order; when a key
occurs twice the later tuple wins, as it does in Flink.

Values of a standard-YAML file are rendered the way Flink 1.19+ logs them in ``Loading configuration property``
(``ConfigurationUtils.convertToString`` → ``YamlParserUtils.toYAMLString``): strings as they are, booleans as
``true``/``false``, integers in decimal, floats in their shortest form and lists/maps as YAML flow text (``[a, b]``).
Scalars are resolved with the YAML 1.2 core schema that Flink uses (``yes``, ``on`` and dates stay strings).

:class:`EffectiveConfig` merges what a bundle reveals, lowest to highest precedence: the configuration file, the
``Loading configuration property`` lines a process logged (what it actually loaded), dynamic properties (``-D``,
``Loading dynamic configuration property``) and user overrides (reference §2.3).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterator

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from flink_runbooks.vocabulary import keys
from flink_runbooks.parse.redact import REDACTED, is_sensitive_key, redact_lines, redact_text, redact_value
from flink_runbooks.vocabulary.units import parse_duration_ms, parse_memory_size

# A pulled job's REST documents say what it ran with (its own code's settings included): above file, log and -D.
SOURCE_RANKS = {"file": 0, "log": 1, "dynamic": 2, "rest": 3, "override": 4}


class ConfigError(ValueError):
    """A configuration file Flink itself would refuse to load."""


# A Flink configuration holds a few hundred keys at most (Flink itself has about a thousand options). Past this many
# the rest of a file is ignored with a warning, so parsing, masking and judging a file stay bounded in time.
MAX_CONFIG_KEYS = 10_000
# Keys of the effective configuration from every source together (file, logged, -D); a log that prints endless
# "Loading configuration property" lines adds no more.
MAX_EFFECTIVE_KEYS = 2 * MAX_CONFIG_KEYS


def _flat_key_line(line: str) -> bool:
    """Whether Flink's legacy line parser reads a key from this line (see :func:`parse_flat_conf`)."""
    kv = line.split("#", 1)[0].strip().split(": ", 1)
    return len(kv) == 2 and bool(kv[0].strip()) and bool(kv[1].strip())


def _yaml_key_lines(text: str) -> Iterator[int]:
    """0-based line of every mapping key of a YAML text, from libyaml's scanner (C, linear); nothing when the
    scanner refuses the text (the composer then says why)."""
    try:
        loader = getattr(pyyaml, "CSafeLoader", pyyaml.SafeLoader)
        for token in pyyaml.scan(text, Loader=loader):
            if isinstance(token, pyyaml.KeyToken):
                yield token.start_mark.line
    except pyyaml.YAMLError:
        return


def limit_config_keys(text: str, path: str, fmt: str, warnings: list[str] | None = None) -> str:
    """``text`` cut before the line of its key number ``MAX_CONFIG_KEYS + 1`` (whole lines kept), with a warning
    naming that line; unchanged when it has fewer keys."""
    if fmt == "flat":
        key_lines = (n for n, line in enumerate(text.split("\n")) if _flat_key_line(line))
    else:
        key_lines = _yaml_key_lines(text)
    for count, line in enumerate(key_lines, 1):
        if count > MAX_CONFIG_KEYS:
            _warn(warnings, f"{path}:{line + 1}: more than {MAX_CONFIG_KEYS:,} configuration keys; the rest of the "
                            f"file is ignored")
            return "\n".join(text.split("\n")[:line]) + "\n"
    return text


@dataclass(frozen=True)
class ConfigSource:
    kind: str  # "file" | "log" | "dynamic" | "rest" | "override"
    path: str | None = None
    line: int | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_RANKS:
            raise ValueError(f"unknown config source kind {self.kind!r} (expected one of {', '.join(SOURCE_RANKS)})")

    @property
    def rank(self) -> int:
        return SOURCE_RANKS[self.kind]

    def _where(self, path: str | None) -> str:
        if path is None:
            return ""
        return f"{path}:{self.line}" if self.line is not None else path

    def __str__(self) -> str:
        """``flink-conf.yaml:12``, ``log /x/jm.log:109``, ``-D on /x/tm.log:80``, ``REST /x/checkpoints-config.json``,
        ``--set override``.

        ``detail`` is shown only when there is no path to point at (``-D (FLINK_PROPERTIES)``).
        """
        if self.kind == "override":
            return "--set override"
        if self.path:
            if self.kind == "file":
                return self._where(os.path.basename(self.path))
            prefix = {"log": "log", "dynamic": "-D on", "rest": "REST"}[self.kind]
            return f"{prefix} {self._where(self.path)}"
        text = {"file": "config file", "log": "log", "dynamic": "-D", "rest": "REST"}[self.kind]
        return f"{text} ({self.detail})" if self.detail else text


@dataclass(frozen=True)
class ConfigValue:
    key: str
    value: str
    source: ConfigSource


def unquote(value: str) -> str:
    """``'true'`` → ``true``: YAML quoting that the legacy line parser keeps verbatim in the value."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        if value[0] == "'":
            return inner.replace("''", "'")
        return inner.replace('\\"', '"').replace("\\\\", "\\")
    return value


def _warn(warnings: list[str] | None, message: str) -> None:
    if warnings is not None:
        warnings.append(message)


# --------------------------------------------------------------------------------------------------------------------
# legacy flink-conf.yaml


def parse_flat_conf(text: str, path: str, warnings: list[str] | None = None) -> list[tuple[str, str, int]]:
    """Flink's legacy line parser (``GlobalConfiguration.loadYAMLResource``), reproduced literally.

    Per line: everything from the first ``#`` on is a comment (even inside quotes), the rest is split at the first
    ``": "``; key and value are trimmed and neither may be empty. Quotes are kept as part of the value (Flink does not
    strip them; :func:`unquote` does, for lookups). Lines Flink would skip are reported in ``warnings`` (never raised).

    >>> parse_flat_conf("# comment\\nstate.backend: rocksdb  # inline\\nbad:line\\n", "flink-conf.yaml")
    [('state.backend', 'rocksdb', 2)]
    """
    entries: list[tuple[str, str, int]] = []
    seen: dict[str, int] = {}
    text = limit_config_keys(text, path, "flat", warnings)
    for lineno, line in enumerate(text.splitlines(), 1):
        conf = line.split("#", 1)[0].strip()
        if not conf:
            continue
        kv = conf.split(": ", 1)
        if len(kv) == 1:
            _warn(warnings, f"{path}:{lineno}: skipped, not a 'key: value' pair (missing space after ':'?)")
            continue
        key, value = kv[0].strip(), kv[1].strip()
        if not key or not value:
            _warn(warnings, f"{path}:{lineno}: skipped, key or value is empty")
            continue
        if key in seen:
            _warn(warnings, f"{path}:{lineno}: {key} set again, overrides line {seen[key]}")
        if unquote(value) != value:
            _warn(warnings, f"{path}:{lineno}: the value of {key} is quoted; Flink's legacy parser keeps the quotes")
        seen[key] = lineno
        entries.append((key, value, lineno))
    return entries


# --------------------------------------------------------------------------------------------------------------------
# standard YAML config.yaml

_YAML_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_YAML_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_YAML_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_YAML_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                         r"|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$")


def _core_type(node: ScalarNode) -> str:
    """The YAML 1.2 core-schema type of a scalar: ``str``, ``null``, ``bool``, ``int`` or ``float``.

    ruamel's resolver knows more implicit types than the core schema Flink uses (timestamps, ``0b`` and ``1_000``
    integers); those stay strings.
    """
    if node.style is not None:
        return "str"
    kind = str(node.tag).rsplit(":", 1)[-1]
    pattern = {"null": _YAML_NULL, "bool": _YAML_BOOL, "int": _YAML_INT, "float": _YAML_FLOAT}.get(kind)
    return kind if pattern is not None and pattern.match(node.value) else "str"


def _native(node: Node) -> Any:
    if isinstance(node, ScalarNode):
        kind, value = _core_type(node), node.value
        if kind == "null":
            return None
        if kind == "bool":
            return value.lower() == "true"
        if kind == "int":
            return int(value, 0) if value[:2] in ("0o", "0x") else int(value)
        if kind == "float":
            low = value.lower().lstrip("+")
            return float("nan") if low == ".nan" else float(low.replace(".inf", "inf"))
        return value
    if isinstance(node, SequenceNode):
        return [_native(item) for item in node.value]
    return {str(_native(k)): _native(v) for k, v in node.value}


MAX_YAML_VALUE_NODES = 10_000


def _expanded_size(node: Node, memo: dict[int, int]) -> int:
    """How many nodes ``node`` becomes once aliases are expanded (computed once per distinct node)."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 1  # a recursive alias counts once instead of looping
    if isinstance(node, SequenceNode):
        size = 1 + sum(_expanded_size(item, memo) for item in node.value)
    elif isinstance(node, MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    else:
        size = 1
    memo[id(node)] = min(size, 1 << 62)
    return memo[id(node)]


def render_yaml_value(node: Node) -> str | None:
    """A YAML node as the string Flink 1.19+ stores and logs for it (None for a null)."""
    if isinstance(node, (SequenceNode, MappingNode)) and _expanded_size(node, {}) > MAX_YAML_VALUE_NODES:
        raise ConfigError(f"broken YAML line {node.start_mark.line + 1}: a value that expands to more than "
                          f"{MAX_YAML_VALUE_NODES:,} nodes through aliases")
    value = _native(node)
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, float):
        return {"inf": ".inf", "-inf": "-.inf", "nan": ".nan"}.get(repr(value), repr(value))
    return pyyaml.safe_dump(value, default_flow_style=True, width=1 << 30, sort_keys=False).strip()


@dataclass
class YamlMap:
    """A mapping of a config.yaml: its flattened key prefix (``""`` for the document) and layout."""

    prefix: str
    flow: bool
    indent: int  # column of its keys
    entries: list["YamlEntry"] = field(default_factory=list)
    owner: "YamlEntry | None" = None  # the entry whose value this map is


@dataclass
class YamlEntry:
    """One ``key: value`` of a config.yaml with the positions needed to edit it in place (0-based lines)."""

    key: str  # flattened
    label: str  # the key as written (may itself be dotted)
    value: str | None  # rendered like Flink; None for a nested map or a null
    line: int  # 1-based line of the key
    key_start: int  # character offsets into the text
    key_end: int
    value_start: int | None  # None when the value is empty, an alias or a nested map
    value_end: int | None
    last_line: int  # 0-based last line of the entry
    parent: YamlMap
    child: YamlMap | None = None

    @property
    def is_leaf(self) -> bool:
        return self.child is None


@dataclass
class YamlLayout:
    root: YamlMap | None
    entries: list[YamlEntry]  # every entry, in document order
    maps: list[YamlMap]

    def leaves(self) -> list[YamlEntry]:
        return [e for e in self.entries if e.is_leaf]


# Flink's YAML parser (SnakeYAML) refuses more than 50 aliases for collections; a file of nested aliases would
# otherwise expand exponentially (a "billion laughs" document). A config file is a few kilobytes.
MAX_YAML_ALIASES = 50
MAX_CONFIG_BYTES = 4 << 20


def _check_yaml_limits(text: str, path: str) -> None:
    from ruamel.yaml.tokens import AliasToken

    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"broken YAML in {path}: {len(text) >> 20} MiB is too large for a configuration file")
    if "*" not in text:
        return
    aliases = 0
    try:  # libyaml's scanner (C) where it reads the text, ruamel's otherwise
        tokens, alias_token = pyyaml.scan(text, Loader=getattr(pyyaml, "CSafeLoader", pyyaml.SafeLoader)), pyyaml.AliasToken
        tokens = list(tokens)
    except pyyaml.YAMLError:
        tokens, alias_token = YAML(typ="rt").scan(text), AliasToken
    for token in tokens:
        if isinstance(token, alias_token):
            aliases += 1
            if aliases > MAX_YAML_ALIASES:
                raise ConfigError(f"broken YAML in {path} line {token.start_mark.line + 1}: more than "
                                  f"{MAX_YAML_ALIASES} aliases (Flink's YAML parser refuses them too)")


def _compose(text: str, path: str) -> Node | None:
    try:
        _check_yaml_limits(text, path)
        return YAML(typ="rt").compose(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"broken YAML in {path}{where}: {problem}") from None
    except YAMLError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else "invalid YAML"
        raise ConfigError(f"broken YAML in {path}: {first_line}") from None


def _last_line(node: Node, text_lines: list[str]) -> int:
    if isinstance(node, (MappingNode, SequenceNode)) and not node.flow_style and node.value:
        last = node.value[-1]
        if isinstance(node, MappingNode):
            key, value = last
            return max(key.end_mark.line, _last_line(value, text_lines)) if not _empty(value) else key.end_mark.line
        return _last_line(last, text_lines)
    end = node.end_mark
    line = end.line - 1 if end.column == 0 and end.line > node.start_mark.line else end.line
    while line > node.start_mark.line and not text_lines[line].strip():
        line -= 1
    return line


def _empty(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.style is None and node.value == ""


def yaml_layout(text: str, path: str) -> YamlLayout:
    """The entries and maps of a standard-YAML config file with their positions; raises :class:`ConfigError`."""
    doc = _compose(text, path)
    if doc is None:
        return YamlLayout(None, [], [])
    if not isinstance(doc, MappingNode):
        raise ConfigError(f"broken YAML in {path} line {doc.start_mark.line + 1}: "
                          "the document must be a mapping of configuration keys")
    text_lines = text.splitlines() or [""]
    # where each line starts, computed once: looking it up per entry would make a large file quadratic
    kept_ends = text.splitlines(keepends=True)
    starts = [0]
    for chunk in kept_ends:
        starts.append(starts[-1] + len(chunk))

    def end_of_line(line: int) -> int:  # as :func:`line_end`
        if line >= len(kept_ends):
            return len(text)
        return starts[line] + len(kept_ends[line].rstrip("\r\n"))

    entries: list[YamlEntry] = []
    maps: list[YamlMap] = []

    def walk(node: MappingNode, prefix: str, owner: YamlEntry | None) -> YamlMap:
        first_key = node.value[0][0] if node.value else None
        ymap = YamlMap(prefix, bool(node.flow_style), first_key.start_mark.column if first_key else 0, owner=owner)
        maps.append(ymap)
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise ConfigError(f"broken YAML in {path} line {key_node.start_mark.line + 1}: "
                                  "configuration keys must be scalars")
            label = key_node.value
            flat = f"{prefix}.{label}" if prefix else label
            is_alias = value_node.start_mark.index < key_node.end_mark.index
            inline = not is_alias and not _empty(value_node) and not (
                isinstance(value_node, MappingNode) and not value_node.flow_style)
            entry = YamlEntry(
                key=flat, label=label,
                value=None if isinstance(value_node, MappingNode) else render_yaml_value(value_node),
                line=key_node.start_mark.line + 1,
                key_start=key_node.start_mark.index, key_end=key_node.end_mark.index,
                value_start=value_node.start_mark.index if inline else None,
                value_end=value_node.end_mark.index if inline else None,
                last_line=key_node.start_mark.line if is_alias or _empty(value_node)
                else max(key_node.start_mark.line, _last_line(value_node, text_lines)),
                parent=ymap,
            )
            if inline and value_node.end_mark.line != value_node.start_mark.line:
                # block scalars and block lists end at the start of the next line: stop at the last content line
                entry.value_end = end_of_line(entry.last_line)
            ymap.entries.append(entry)
            entries.append(entry)
            if isinstance(value_node, MappingNode):
                entry.child = walk(value_node, flat, entry)
        return ymap

    try:
        root = walk(doc, "", None)
    except ConfigError as exc:
        message = str(exc)
        raise ConfigError(message if f" in {path}" in message
                          else message.replace("broken YAML", f"broken YAML in {path}", 1)) from None
    return YamlLayout(root, entries, maps)


def line_start(text: str, line: int) -> int:
    """Character offset where 0-based ``line`` starts (``len(text)`` past the last line)."""
    return sum(len(chunk) for chunk in text.splitlines(keepends=True)[:line])


def line_end(text: str, line: int) -> int:
    """Character offset of the end of 0-based ``line``, before its line break."""
    lines = text.splitlines(keepends=True)
    if line >= len(lines):
        return len(text)
    return line_start(text, line) + len(lines[line].rstrip("\r\n"))


def parse_yaml_conf(text: str, path: str, warnings: list[str] | None = None) -> list[tuple[str, str, int]]:
    """A standard-YAML ``config.yaml`` flattened to ``(key, value, line)``; broken YAML raises :class:`ConfigError`.

    >>> parse_yaml_conf("execution:\\n  checkpointing:\\n    interval: 5s\\njars: [a.jar, b.jar]\\n", "config.yaml")
    [('execution.checkpointing.interval', '5s', 3), ('jars', '[a.jar, b.jar]', 4)]
    """
    result: list[tuple[str, str, int]] = []
    seen: dict[str, int] = {}
    for entry in yaml_layout(limit_config_keys(text, path, "nested", warnings), path).leaves():
        if entry.value is None:
            _warn(warnings, f"{path}:{entry.line}: {entry.key} has no value, skipped")
            continue
        if entry.key in seen:
            _warn(warnings, f"{path}:{entry.line}: {entry.key} set again, overrides line {seen[entry.key]}")
        seen[entry.key] = entry.line
        result.append((entry.key, entry.value, entry.line))
    return result


# A Flink Kubernetes operator resource (`kubectl get flinkdeployment NAME -o yaml`, or the manifest applied).
FLINK_RESOURCE_KIND = re.compile(r"^kind:\s*[\"']?(FlinkDeployment|FlinkSessionJob)[\"']?\s*$", re.M)
_CONFIGURATION = "spec.flinkConfiguration."
# The operator turns the pods' resources into Flink's memory options (FlinkConfigBuilder).
_OPERATOR_RESOURCES = {"spec.jobManager.resource.memory": "jobmanager.memory.process.size",
                       "spec.taskManager.resource.memory": "taskmanager.memory.process.size"}


def flink_resource_kind(text: str) -> str | None:
    """``FlinkDeployment`` or ``FlinkSessionJob`` when the text is such a resource, else None."""
    m = FLINK_RESOURCE_KIND.search(text[:65536])
    return m.group(1) if m else None


def parse_flink_resource(text: str, path: str, warnings: list[str] | None = None
                         ) -> tuple[list[tuple[str, str, int]], str | None]:
    """The Flink configuration a FlinkDeployment (or FlinkSessionJob) gives its pods, as ``(key, value, line)``:
    ``spec.flinkConfiguration`` (flat or nested), and the memory options the operator derives from
    ``spec.jobManager/taskManager.resource.memory`` unless the configuration sets them; plus the Flink version of
    ``spec.flinkVersion`` (``v1_20`` is ``1.20``). Broken YAML raises :class:`ConfigError`."""
    entries: list[tuple[str, str, int]] = []
    version = None
    derived = []
    for key, value, line in parse_yaml_conf(text, path, warnings):
        if key.startswith(_CONFIGURATION):
            entries.append((key[len(_CONFIGURATION):], value, line))
        elif key in _OPERATOR_RESOURCES:
            derived.append((_OPERATOR_RESOURCES[key], value.strip("\"'"), line))
        elif key == "spec.flinkVersion":
            m = re.fullmatch(r"[\"']?v?(\d+)_(\d+)[\"']?", value.strip())
            version = f"{m.group(1)}.{m.group(2)}" if m else None
    configured = {key for key, _, _ in entries}
    entries += [d for d in derived if d[0] not in configured]
    return entries, version


def detect_conf_format(text: str, filename: str) -> str:
    """``"flat"`` for a legacy ``flink-conf.yaml``, ``"nested"`` for a standard-YAML ``config.yaml``.

    The file name decides, as it does for Flink (a ``config.yaml`` of dotted keys only is still standard YAML). Other
    names (ConfigMap dumps, copies) count as standard YAML when they parse as YAML and contain a nested map.
    """
    base = os.path.basename(filename)
    if base == "flink-conf.yaml":
        return "flat"
    if base == "config.yaml":
        return "nested"
    try:
        layout = yaml_layout(text, filename)
    except ConfigError:
        return "flat"
    return "nested" if any(not e.is_leaf for e in layout.entries) else "flat"


def parse_conf(text: str, path: str, fmt: str | None = None,
               warnings: list[str] | None = None) -> list[tuple[str, str, int]]:
    """Parse with the parser for ``fmt`` (detected from name and content when None)."""
    fmt = fmt or detect_conf_format(text, path)
    return parse_yaml_conf(text, path, warnings) if fmt == "nested" else parse_flat_conf(text, path, warnings)


# --------------------------------------------------------------------------------------------------------------------
# effective configuration

_INT = re.compile(r"^[-+]?\d+$")


class EffectiveConfig:
    """Every observed value of every key, and the one Flink would use.

    Lookups (:meth:`get`, :meth:`lookup`, ``in``) are alias-aware through :mod:`keys`: the newest spelling present
    wins over deprecated ones regardless of where each came from, which is how Flink resolves deprecated keys. Looked-up
    values are unquoted; :meth:`history` keeps them as observed.
    """

    def __init__(self) -> None:
        self._effective: dict[str, ConfigValue] = {}
        self._history: dict[str, list[tuple[int, ConfigValue]]] = {}
        self._seq = 0
        self.file_path: str | None = None
        self.file_format: str | None = None  # "flat" | "nested" | None
        self.file_text: str | None = None
        self.warnings: list[str] = []
        self.ignored_keys = 0  # distinct keys past MAX_EFFECTIVE_KEYS, not stored


    # -- building

    def add(self, key: str, value: str, source: ConfigSource) -> None:
        """Record ``key = value``; it becomes effective unless a higher-ranked source already set the same key.

        Secrets are decided here, where every value enters: the value of a sensitive key is masked whole, any other
        value is scrubbed of credential-shaped parts."""
        if key not in self._history and len(self._history) >= MAX_EFFECTIVE_KEYS:
            self.ignored_keys += 1
            return
        cv = ConfigValue(key, redact_value(key, str(value)), source)
        self._seq += 1
        self._history.setdefault(key, []).append((self._seq, cv))
        current = self._effective.get(key)
        if current is None or source.rank >= current.source.rank:
            self._effective[key] = cv

    def set_file(self, path: str | None, text: str | None, format: str | None) -> None:
        """Remember the user's file for diffs, with every secret already masked (diff context lines included)."""
        redacted = redact_config_text(text, path or "", format or detect_conf_format(text, path or "")) if text else text
        self.file_path, self.file_text, self.file_format = path, redacted, format

    def load_file(self, text: str, path: str, fmt: str | None = None) -> None:
        """Parse the user's config file, add its values as ``file`` sources and remember it for diffs."""
        fmt = fmt or detect_conf_format(text, path)
        for key, value, line in parse_conf(text, path, fmt, self.warnings):
            self.add(key, value, ConfigSource("file", path, line))
        self.set_file(path, text, fmt)

    # -- lookups

    def lookup(self, key: str) -> ConfigValue | None:
        """The effective value of ``key`` under any of its spellings (unquoted), or None."""
        for name in keys.resolution_order(key):
            cv = self._effective.get(name)
            if cv is not None:
                return replace(cv, value=unquote(cv.value))
        return None

    def get(self, key: str, default: str | None = None) -> str | None:
        cv = self.lookup(key)
        return cv.value if cv is not None else default

    def history(self, key: str) -> list[ConfigValue]:
        """Every value observed for ``key`` under any spelling, in the order they were added (values as observed)."""
        seen = [item for name in keys.resolution_order(key) for item in self._history.get(name, [])]
        return [cv for _, cv in sorted(seen, key=lambda item: item[0])]

    def get_bool(self, key: str, default: bool | None = None) -> bool | None:
        value = (self.get(key) or "").strip().lower()
        return {"true": True, "false": False}.get(value, default)

    def get_int(self, key: str, default: int | None = None) -> int | None:
        value = (self.get(key) or "").strip()
        return int(value) if _INT.match(value) else default

    def get_float(self, key: str, default: float | None = None) -> float | None:
        try:
            return float((self.get(key) or "").strip())
        except ValueError:
            return default

    def get_bytes(self, key: str, default: int | None = None) -> int | None:
        parsed = parse_memory_size(self.get(key))
        return parsed if parsed is not None else default

    def get_duration_ms(self, key: str, default: int | None = None) -> int | None:
        parsed = parse_duration_ms(self.get(key))
        return parsed if parsed is not None else default

    # -- views

    def items(self) -> list[tuple[str, ConfigValue]]:
        """``(key, ConfigValue)`` of every stored key, sorted by key; values unquoted, keys as spelled."""
        return [(k, replace(cv, value=unquote(cv.value))) for k, cv in sorted(self._effective.items())]

    def as_flat_dict(self) -> dict[str, str]:
        """``{key: value}`` of the effective values, keys as spelled, values unquoted."""
        return {k: cv.value for k, cv in self.items()}

    def to_dict(self, redacted: bool = True) -> dict[str, dict[str, str | None]]:
        return {k: {"value": redact_value(k, cv.value) if redacted else cv.value, "source": str(cv.source)}
                for k, cv in self.items()}

    def __len__(self) -> int:
        return len(self._effective)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.lookup(key) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._effective))

    def __repr__(self) -> str:
        return f"EffectiveConfig({len(self)} keys, file={self.file_path!r})"


def redact_config_text(text: str, path: str, fmt: str) -> str:
    """The config file's text with the values of sensitive keys masked and credential-shaped values scrubbed,
    still parseable by the same parser (a standard-YAML mask is quoted: a bare ``******`` would be an alias)."""
    if fmt == "flat":
        lines = text.split("\n")
        for key, _value, lineno in parse_flat_conf(text, path):
            if is_sensitive_key(key):
                line = lines[lineno - 1]
                at = line.find(": ", line.find(key)) if key in line else -1
                if at >= 0:
                    comment = line.find("#", at)
                    lines[lineno - 1] = line[:at + 2] + REDACTED + (" " + line[comment:] if comment >= 0 else "")
        return "\n".join(redact_lines(lines))
    try:
        entries = yaml_layout(text, path).leaves()
    except ConfigError:
        return "\n".join(redact_lines(text.split("\n")))
    def splice(whole: bool) -> str:
        out = text
        for e in sorted(entries, key=lambda e: e.value_start or 0, reverse=True):
            if e.value_start is None or e.value_end is None:
                continue
            raw = out[e.value_start:e.value_end]
            new = redact_text(raw)
            if is_sensitive_key(e.key) or (new != raw and (whole or raw[:1] in "[{")):
                new = '"' + REDACTED + '"'
            elif new != raw and raw[:1] not in "\"'|>":
                new = '"' + new.replace("\\", "\\\\").replace('"', '\\"') + '"'
            out = out[:e.value_start] + new + out[e.value_end:]
        return out

    masked = splice(False)
    try:
        yaml_layout(masked, path)
    except ConfigError:
        masked = splice(True)
    # Comments and anything the layout does not cover (a secret in a comment, a key inside a list).
    scrubbed = "\n".join(redact_lines(masked.split("\n")))
    if scrubbed != masked:
        try:
            yaml_layout(scrubbed, path)
            return scrubbed
        except ConfigError:
            return "\n".join(redact_text(line) if line.lstrip().startswith("#") else line for line in masked.split("\n"))
    return masked


def config_from_text(text: str, path: str) -> EffectiveConfig:
    """An :class:`EffectiveConfig` holding one configuration file (format detected from name and content)."""
    config = EffectiveConfig()
    config.load_file(text, path)
    return config
