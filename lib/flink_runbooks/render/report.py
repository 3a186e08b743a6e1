"""Renderers: the diagnosis as JSON (the CLI contract) and as terminal text (triage writes its Markdown report).

Secrets are masked where values enter the model (ingestion, :mod:`~flink_runbooks.parse.redact`); findings pass
:func:`redact_data` once more as values, before serialisation. Finished text is never redacted: a pattern run over
serialised JSON can eat a closing quote, and one run over a warning can mangle a file name.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from flink_runbooks.model import Diagnosis
from flink_runbooks.model import Finding
from flink_runbooks.render.patches import render_config_diff, render_flinkdeployment_patch, render_kafka_properties
from flink_runbooks.parse.redact import redact_data, redact_text
from flink_runbooks.vocabulary.versions import FlinkVersion
from flink_runbooks.render.terminal import printable


def diagnosis_dict(diagnosis: Diagnosis) -> dict[str, Any]:
    inc = diagnosis.incident
    return {
        "flink_version": inc.flink_version,
        "version_source": inc.version_source,
        "inputs": {
            "files": [asdict(f) for f in inc.inputs],
            # records read (kept and folded repeats): the same whatever the folding keeps
            "events": inc.records_read,
            "config_keys": len(inc.config),
            "config_file": inc.config.file_path,
        },
        "findings": [redact_data(f.to_dict()) for f in diagnosis.findings],
        "warnings": list(inc.warnings) + list(diagnosis.errors),
    }


def to_json(diagnosis: Diagnosis) -> str:
    return json.dumps(diagnosis_dict(diagnosis), indent=2, sort_keys=False)


def patch_outputs(finding: Finding, diagnosis: Diagnosis) -> dict[str, Any]:
    """Every rendering of a finding's patches that applies: config diff, FlinkDeployment patch, Kafka, code."""
    inc = diagnosis.incident
    version = FlinkVersion.parse(inc.flink_version)
    flink = [p for p in finding.patches if p.target == "flink"]
    out: dict[str, Any] = {}
    if flink:
        out["config_diff"] = render_config_diff(flink, inc.config, version)
        out["flinkdeployment"] = render_flinkdeployment_patch(flink, version)
    kafka = [p for p in finding.patches if p.target == "kafka"]
    if kafka:
        out["kafka"] = render_kafka_properties(kafka)
    code = [p for p in finding.patches if p.target in ("code", "ops")]
    if code:
        out["actions"] = [{"what": p.key, "why": p.reason, "snippet": p.snippet} for p in code]
    return out


def to_text(diagnosis: Diagnosis, *, color: bool = False) -> str:
    """The diagnosis for a terminal. Everything that came from the input passes :func:`printable`, so no control
    character or escape sequence from a log reaches the terminal; a file name or a warning stays on its line."""
    inc = diagnosis.incident
    lines: list[str] = []
    bold_lines: set[int] = set()
    # what must stay on one line: a file name, a warning; below the head, masked before it is escaped (see below)
    one_line = lambda value: printable(value, newlines=False)  # noqa: E731
    masked_line = lambda value: one_line(redact_text(str(value)) or value)  # noqa: E731
    version = one_line(inc.flink_version or "unknown")
    logs = sum(1 for f in inc.inputs if f.kind == "log")
    lines.append(f"Flink {version}" + (f" ({one_line(inc.version_source)})" if inc.version_source else "")
                 + f"; {logs} log file(s), {inc.records_summary()}, {len(inc.config)} config keys")
    for w in list(inc.warnings) + list(diagnosis.errors):
        lines.append(f"warning: {one_line(w)}")
    if not diagnosis.findings:
        lines.append("")
        lines.append("No known failure found.")
        return "\n".join(printable(line) for line in lines) + "\n"
    head = len(lines)  # version line and warnings: our own words and file names, shown as they are
    for f in diagnosis.findings:
        lines.append("")
        tag = "PRIMARY" if f.primary else ("also" if f.severity == "failure" else "warning")
        bold_lines.add(len(lines))
        lines.append(f"[{tag}] {f.runbook}: {masked_line(f.title)}")
        lines.append(f"  root cause: {f.root_cause.slug} — {f.root_cause.summary} (confidence {f.confidence:.0%})")
        lines.append(f"  {f.summary}")
        if f.would_change:
            lines.append(f"  would change the verdict: {f.would_change}")
        if f.evidence:
            lines.append("  evidence:")
            for e in f.evidence:
                where = masked_line(f"{e.file}:{e.line}" + (f" {e.ts}" if e.ts else ""))
                lines.append(f"    {where}" + (f"  ({masked_line(e.note)})" if e.note else ""))
                for t in e.text.split("\n")[:4]:
                    lines.append(f"      {masked_line(t[:240])}")
        if f.primary and f.patches:
            outs = patch_outputs(f, diagnosis)
            if "config_diff" in outs:
                lines.append("  proposed config change (not applied):")
                lines += ["    " + line for line in outs["config_diff"].rstrip("\n").splitlines()]
            if "kafka" in outs:
                lines.append("  Kafka client properties:")
                lines += ["    " + line for line in outs["kafka"].get("properties", "").rstrip("\n").splitlines()]
            for a in outs.get("actions", []):
                lines.append(f"  action: {a['what']}: {a['why']}")
                if a["snippet"]:
                    lines += ["    " + line for line in a["snippet"].splitlines()]
        elif f.patches:
            lines.append(f"  {len(f.patches)} proposed change(s): run `flink-runbooks diagnose --format json` or the runbook")
    # masked first, on the text as logged: an escape written out (``\x19``) would glue itself to a value that the
    # masking patterns find by its boundary
    shown = lines[:head] + [redact_text(line) or line for line in lines[head:]]
    shown = [printable(line) for line in shown]
    bold = (lambda s: f"\033[1m{s}\033[0m") if color else (lambda s: s)
    return "\n".join(bold(line) if i in bold_lines else line for i, line in enumerate(shown)) + "\n"
