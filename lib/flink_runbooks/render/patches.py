"""Render :class:`~flink_runbooks.model.Patch` proposals: config diffs, FlinkDeployment merge patches, Kafka properties.

Nothing here writes the user's files; every function returns text (or a dict) to show. Key names follow
:func:`keys.name_for` for the incident's Flink version, and values of sensitive keys are printed as ``******``.
"""
from __future__ import annotations

import difflib
import json
import os
from typing import Iterable, Sequence

import yaml

from flink_runbooks.vocabulary import keys
from flink_runbooks.parse.config import (ConfigError, EffectiveConfig, YamlEntry, detect_conf_format, line_end, line_start,
                     parse_flat_conf, yaml_layout)
from flink_runbooks.model import Finding, Patch
from flink_runbooks.vocabulary.versions import FlinkVersion
from flink_runbooks.parse.redact import REDACTED, is_sensitive_key, redact_text, redact_value

FLINK_DEPLOYMENT_API = "flink.apache.org/v1beta1"
STANDARD_YAML_SINCE = (1, 19)

VersionLike = tuple[int, ...] | str | None


def _of_target(patches: Iterable[Patch], target: str) -> list[Patch]:
    return [p for p in patches if p.target == target]


# --------------------------------------------------------------------------------------------------------------------
# value spelling per file format


def flat_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be written to a legacy flink-conf.yaml line, or None when it can."""
    if "\n" in value or "\r" in value:
        return "it spans several lines"
    if "#" in value:
        return "it contains '#', which starts a comment for Flink's legacy parser"
    if not value.strip():
        return "it is empty, and Flink skips keys with empty values"
    if value != value.strip():
        return "Flink trims the surrounding whitespace"
    return None


_YAML11_BOOLEANS = frozenset({"y", "n", "yes", "no", "on", "off"})


def yaml_scalar(value: str) -> str:
    """``value`` as a YAML scalar that Flink's standard-YAML parser reads back as exactly ``value``."""
    # YAML 1.1 booleans are quoted although Flink's YAML 1.2 reads them as strings: other tools may not.
    if value and value[0] not in "[{" and value.isprintable() and value.lower() not in _YAML11_BOOLEANS:
        probe_text = f"k: {value}\n"
        try:
            probe = yaml_layout(probe_text, "probe")
        except ConfigError:
            probe = None
        if probe is not None and len(probe.entries) == 1:
            entry = probe.entries[0]
            # plain (unquoted, untagged) and read back unchanged
            if entry.value == value and entry.value_start is not None and \
                    probe_text[entry.value_start:entry.value_end] == value:
                return value
    if "\n" in value or "\r" in value or not value.isprintable():
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar
    return "'" + value.replace("'", "''") + "'"


# --------------------------------------------------------------------------------------------------------------------
# editing a config text


def _join(lines: list[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


def _spelling(key: str, version: tuple[int, ...] | None, present: list[str]) -> str:
    """Known version: what it expects. Unknown: keep the spelling the file already uses (the effective one)."""
    if version is not None or not present:
        return keys.name_for(key, version)
    return present[-1]


def _effective_index(names_in_order: list[str], key: str, version: tuple[int, ...] | None) -> int:
    """Index (into ``names_in_order``) of the occurrence Flink uses: newest spelling the version understands, last."""
    spellings = keys.aliases(key)
    if version is not None and any(keys.is_valid_in(n, version) for n in names_in_order):
        spellings = tuple(n for n in spellings if keys.is_valid_in(n, version))
    for name in spellings:
        if name in names_in_order:
            return len(names_in_order) - 1 - names_in_order[::-1].index(name)
    return len(names_in_order) - 1


def _rewrite_flat_line(line: str, content: str) -> str:
    """Replace the ``key: value`` part of a legacy line, keeping its indentation and trailing comment."""
    body = line.split("#", 1)[0]
    comment = line[len(body):]
    indent = body[: len(body) - len(body.lstrip())]
    gap = body[len(body.rstrip()):] or (" " if comment else "")
    return indent + content + (gap + comment if comment else "")


def _apply_flat(text: str, path: str, patch: Patch, version: tuple[int, ...] | None, notes: list[str]) -> str:
    lines = text.splitlines()
    hits = [(k, ln) for k, _, ln in parse_flat_conf(text, path) if k in keys.aliases(patch.key)]
    if patch.proposed is None:
        drop = {ln for _, ln in hits}
        return _join([line for i, line in enumerate(lines, 1) if i not in drop])
    name = _spelling(patch.key, version, [hits[_effective_index([k for k, _ in hits], patch.key, version)][0]]
                     if hits else [])
    problem = flat_value_problem(patch.proposed)
    if problem:
        notes.append(f"# {name} cannot be set in {os.path.basename(path)} because {problem}; pass it as -D{name}=...")
        return text
    content = f"{name}: {patch.proposed}"
    if not hits:
        return _join(lines + [content])
    keep = hits[_effective_index([k for k, _ in hits], patch.key, version)][1]
    lines[keep - 1] = _rewrite_flat_line(lines[keep - 1], content)
    drop = {ln for _, ln in hits if ln != keep}  # shadowed duplicates and old spellings would only confuse
    return _join([line for i, line in enumerate(lines, 1) if i not in drop])


def _splice(text: str, start: int, end: int, replacement: str) -> str:
    return text[:start] + replacement + text[end:]


def _remove_entry(text: str, entry: YamlEntry) -> str | None:
    """Delete an entry's lines; a parent map left empty goes too (an empty parent would read as a null value)."""
    target = entry
    while target.parent.owner is not None and len(target.parent.entries) == 1 and not target.parent.flow:
        target = target.parent.owner
    if target.parent.flow:
        return None
    return _splice(text, line_start(text, target.line - 1), line_start(text, target.last_line + 1), "")


def _insert_entry(text: str, path: str, name: str, rendered: str) -> str | None:
    """Add ``name`` under the deepest block map whose prefix it extends, else as a dotted key at the end."""
    layout = yaml_layout(text, path)
    parents = [m for m in layout.maps if m.prefix and not m.flow and m.entries and name.startswith(m.prefix + ".")]
    if parents:
        parent = max(parents, key=lambda m: len(m.prefix))
        assert parent.owner is not None
        line = " " * parent.indent + f"{name[len(parent.prefix) + 1:]}: {rendered}\n"
        at = line_start(text, parent.owner.last_line + 1)
        if at == len(text) and text and not text.endswith("\n"):
            line = "\n" + line
        return _splice(text, at, at, line)
    if layout.root is not None and layout.root.flow:
        return None
    return text + ("" if not text or text.endswith("\n") else "\n") + f"{name}: {rendered}\n"


def _edit_entry(text: str, entry: YamlEntry, name: str, rendered: str) -> str | None:
    """Set the value of ``entry`` in place, renaming its key to ``name`` when the parent map allows it."""
    prefix = entry.parent.prefix
    if not prefix:
        label = name
    elif name.startswith(prefix + "."):
        label = name[len(prefix) + 1:]
    else:
        return None
    if entry.value_start is not None and entry.value_end is not None:
        if text.count("\n", entry.key_end, entry.value_start):  # block list under the key: pull it onto one line
            text = _splice(text, entry.key_end, entry.value_end, f": {rendered}")
        else:
            text = _splice(text, entry.value_start, entry.value_end, rendered)
    else:
        text = _splice(text, entry.key_end, line_end(text, entry.line - 1), f": {rendered}")
    return _splice(text, entry.key_start, entry.key_end, label) if label != entry.label else text


def _alias_leaves(text: str, path: str, key: str) -> list[YamlEntry]:
    names = keys.aliases(key)
    return [e for e in yaml_layout(text, path).leaves() if e.key in names]


def _remove_leaves(text: str, path: str, key: str, keep: str | None, notes: list[str]) -> str:
    """Remove every spelling of ``key``, except the last occurrence of the spelling ``keep``.

    Works bottom-up and re-reads the layout after each removal, because removing a parent map shifts what follows.
    Entries that cannot be removed (inside flow mappings) are reported in ``notes``; they stay at the end of the list.
    """
    blocked = 0
    while True:
        hits = _alias_leaves(text, path, key)
        kept = max((i for i, e in enumerate(hits) if e.key == keep), default=None)
        doomed = [e for i, e in enumerate(hits) if i != kept]
        if len(doomed) <= blocked:
            return text
        entry = doomed[len(doomed) - blocked - 1]
        removed = _remove_entry(text, entry)
        if removed is None:
            notes.append(f"# remove {entry.key} (line {entry.line}, inside a flow mapping)")
            blocked += 1
        else:
            text = removed


def _apply_nested(text: str, path: str, patch: Patch, version: tuple[int, ...] | None, notes: list[str]) -> str:
    if patch.proposed is None:
        return _remove_leaves(text, path, patch.key, None, notes)
    hits = _alias_leaves(text, path, patch.key)
    target = hits[_effective_index([e.key for e in hits], patch.key, version)] if hits else None
    name = _spelling(patch.key, version, [target.key] if target else [])
    rendered = yaml_scalar(patch.proposed)
    edited = _edit_entry(text, target, name, rendered) if target else None
    if edited is None:
        if target is not None:
            removed = _remove_entry(text, target)
            text = removed if removed is not None else text
        edited = _insert_entry(text, path, name, rendered)
        if edited is None:
            shown = REDACTED if is_sensitive_key(name) else rendered
            notes.append(f"# {name}: {shown}  (could not be placed: the document is a flow mapping)")
            return text
    # Other spellings and shadowed duplicates go: they would only hide which line is in effect.
    return _remove_leaves(edited, path, patch.key, name, notes)


def _redacted_lines(text: str, fmt: str, path: str) -> list[str]:
    """The file as lines with the values of sensitive keys masked (diff context lines included)."""
    if fmt == "flat":
        lines = text.splitlines()
        for key, _, ln in parse_flat_conf(text, path):
            if is_sensitive_key(key):
                lines[ln - 1] = _rewrite_flat_line(lines[ln - 1], f"{key}: {REDACTED}")
    else:
        try:
            entries = yaml_layout(text, path).leaves()
        except ConfigError:
            entries = []
        for e in sorted(entries, key=lambda e: e.value_start or 0, reverse=True):
            if is_sensitive_key(e.key) and e.value_start is not None and e.value_end is not None:
                text = _splice(text, e.value_start, e.value_end, REDACTED)
        lines = text.splitlines()
    return [redact_text(line) or line for line in lines]


def _target_file(config: EffectiveConfig | None, version: tuple[int, ...] | None) -> tuple[str, str, str]:
    """(file name, current text, format) of the file the diff applies to."""
    if config is not None and config.file_path:
        name = os.path.basename(config.file_path)
        text = config.file_text or ""
        return name, text, config.file_format or detect_conf_format(text, name)
    if version is not None and tuple(version[:2]) >= STANDARD_YAML_SINCE:
        return "config.yaml", "", "nested"
    return "flink-conf.yaml", "", "flat"


def apply_patches_to_text(patches: Iterable[Patch], text: str, path: str, fmt: str,
                          version: VersionLike = None) -> tuple[str, list[str]]:
    """The config text after the ``flink`` patches, plus comment lines for values the format cannot hold."""
    v = FlinkVersion.parse(version)
    notes: list[str] = []
    for patch in _of_target(patches, "flink"):
        apply = _apply_flat if fmt == "flat" else _apply_nested
        text = apply(text, path, patch, v, notes)
    return text, notes


def render_config_diff(patches: Iterable[Patch], config: EffectiveConfig | None, version: VersionLike, *,
                       after: Iterable[Patch] = ()) -> str:
    """A unified diff of the ``flink`` patches against the user's config file (or an empty one); "" when no change.

    Without a known file the diff creates ``flink-conf.yaml`` (version < 1.19 or unknown) or ``config.yaml``.
    ``after``: changes made first (the fix), so that this diff (hardening) applies on top of theirs.
    """
    flink = _of_target(patches, "flink")
    if not flink:
        return ""
    v = FlinkVersion.parse(version)
    name, old, fmt = _target_file(config, v)
    path = config.file_path if config is not None and config.file_path else name
    if _of_target(after, "flink"):
        old, _ = apply_patches_to_text(_of_target(after, "flink"), old, path, fmt, v)
    new, notes = apply_patches_to_text(flink, old, path, fmt, v)
    new_lines = _redacted_lines(new, fmt, path) + notes
    diff = difflib.unified_diff(_redacted_lines(old, fmt, path), new_lines,
                                fromfile=f"a/{name}", tofile=f"b/{name}", lineterm="")
    out = "\n".join(diff)
    return out + "\n" if out else ""


# --------------------------------------------------------------------------------------------------------------------
# Kubernetes operator


def render_flinkdeployment_patch(patches: Iterable[Patch], version: VersionLike,
                                 name: str = "<your-deployment>") -> str:
    """A merge patch for a Flink Kubernetes Operator ``FlinkDeployment`` (``kubectl patch --type merge``).

    ``spec.flinkConfiguration`` is a string map, so every value is a YAML string. A removal nulls every spelling of
    the key, whichever one the deployment uses. "" when there are no ``flink`` patches.
    """
    flink = _of_target(patches, "flink")
    if not flink:
        return ""
    v = FlinkVersion.parse(version)
    conf: dict[str, str | None] = {}
    for patch in flink:
        key = keys.name_for(patch.key, v)
        if patch.proposed is None:
            conf.update({alias: None for alias in keys.aliases(patch.key)})
        else:
            conf[key] = redact_value(key, patch.proposed)
    doc = {
        "apiVersion": FLINK_DEPLOYMENT_API,
        "kind": "FlinkDeployment",
        "metadata": {"name": name},
        "spec": {"flinkConfiguration": conf},
    }
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1 << 30, allow_unicode=True)


# --------------------------------------------------------------------------------------------------------------------
# Kafka clients

# Client properties only one side understands (the rest, e.g. reconnect.*, request.timeout.ms, security.*, go to both).
PRODUCER_ONLY = frozenset({
    "acks", "batch.size", "buffer.memory", "compression.type", "delivery.timeout.ms", "enable.idempotence",
    "linger.ms", "max.block.ms", "max.in.flight.requests.per.connection", "max.request.size", "retries",
    "transaction.timeout.ms", "transactional.id", "partitioner.class",
})
CONSUMER_ONLY = frozenset({
    "auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms", "group.id", "group.instance.id",
    "fetch.min.bytes", "fetch.max.bytes", "fetch.max.wait.ms", "max.partition.fetch.bytes", "max.poll.records",
    "max.poll.interval.ms", "session.timeout.ms", "heartbeat.interval.ms", "isolation.level",
    "default.api.timeout.ms", "partition.assignment.strategy",
    # KafkaSource options passed as properties
    "commit.offsets.on.checkpoint", "client.id.prefix", "partition.discovery.interval.ms",
    "register.consumer.metrics",
})


def _java_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def render_kafka_properties(patches: Iterable[Patch]) -> dict[str, str]:
    """The ``kafka`` patches as a DataStream snippet, SQL ``WITH`` options and plain properties; {} when none.

    Patch keys are Kafka client property names (a ``properties.`` prefix is accepted and dropped).
    """
    props: dict[str, str | None] = {}
    for patch in _of_target(patches, "kafka"):
        key = patch.key.removeprefix("properties.")
        props.pop(key, None)
        props[key] = redact_value(key, patch.proposed)
    if not props:
        return {}
    source = {k: v for k, v in props.items() if k not in PRODUCER_ONLY}
    sink = {k: v for k, v in props.items() if k not in CONSUMER_ONLY}

    java: list[str] = []
    if source:
        java += ["KafkaSource<String> source = KafkaSource.<String>builder()",
                 "        // ... bootstrap servers, topics, deserializer as before"]
        for k, v in source.items():
            if v is None:
                continue
            if k == "auto.offset.reset":
                # KafkaSourceBuilder overrides this property with its OffsetsInitializer's reset strategy.
                java += ["        .setStartingOffsets(OffsetsInitializer.committedOffsets(OffsetResetStrategy."
                         f"{v.upper()}))  // a KafkaSource takes auto.offset.reset from its starting offsets"]
            else:
                java.append(f"        .setProperty({_java_str(k)}, {_java_str(v)})")
        java += [f"        // and drop .setProperty({_java_str(k)}, ...)" for k, v in source.items() if v is None]
        java += ["        .build();"]
    if sink:
        java += [""] if java else []
        java += ["Properties producerConfig = new Properties();"]
        java += [f"producerConfig.setProperty({_java_str(k)}, {_java_str(v)});"
                 for k, v in sink.items() if v is not None]
        java += [f"// and do not set {_java_str(k)}" for k, v in sink.items() if v is None]
        java += ["KafkaSink<String> sink = KafkaSink.<String>builder()",
                 "        // ... bootstrap servers, record serializer as before",
                 "        .setKafkaProducerConfig(producerConfig)",
                 "        .build();"]

    def sql_str(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    sql = ",\n".join(f"{sql_str('properties.' + k)} = {sql_str(v)}" for k, v in props.items() if v is not None)
    sql_drops = [f"-- remove {sql_str('properties.' + k)}" for k, v in props.items() if v is None]
    plain = [f"{k}={v.replace(chr(92), chr(92) * 2)}" for k, v in props.items() if v is not None]
    plain += [f"# remove {k}" for k, v in props.items() if v is None]
    return {
        "datastream": "\n".join(java),
        "sql": "\n".join(([sql] if sql else []) + sql_drops),
        "properties": "\n".join(plain),
    }


# --------------------------------------------------------------------------------------------------------------------
# re-checking a patched configuration


def apply_to_config(patches: Iterable[Patch], config: EffectiveConfig) -> dict[str, str]:
    """The effective ``{key: value}`` after the ``flink`` patches, sorted by key.

    Every spelling of a patched key is dropped and the proposed value is stored under ``patch.key`` as written.
    """
    flat = config.as_flat_dict()
    for patch in _of_target(patches, "flink"):
        for alias in keys.aliases(patch.key):
            flat.pop(alias, None)
        if patch.proposed is not None:
            flat[patch.key] = patch.proposed
    return dict(sorted(flat.items()))


# --------------------------------------------------------------------------------------------------------------------
# fixes and hardening

CONFIG_TARGETS = ("flink", "kafka")  # a key set to a value: rendered as a diff, a merge patch or properties
ACTION_TARGETS = ("ops", "code")  # something to do (a command, a change to the job's code): rendered as an action


def is_action(patch: Patch) -> bool:
    """An operations or code action: its ``key`` says what to do, its ``snippet`` how; it has no value to set."""
    return patch.target in ACTION_TARGETS


def fix_and_hardening(findings: Sequence[Finding]) -> tuple[list[Patch], list[tuple[Finding, Patch]]]:
    """The primary finding's proposals (the fix, as the finding orders them) and every other finding's (hardening:
    worth doing once the incident is over, never mistaken for the fix), one per ``(target, key)``: a key the fix sets
    is not repeated as hardening, and among other findings the first to propose a key keeps it."""
    primary = next((f for f in findings if f.primary), None)
    fix = list(primary.patches) if primary is not None else []
    taken = {(p.target, p.key) for p in fix}
    hardening: list[tuple[Finding, Patch]] = []
    for finding in findings:
        if finding is primary:
            continue
        for patch in finding.patches:
            if (patch.target, patch.key) not in taken:
                taken.add((patch.target, patch.key))
                hardening.append((finding, patch))
    return fix, hardening
