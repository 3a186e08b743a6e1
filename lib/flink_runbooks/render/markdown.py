"""Triage's ``report.md``: the diagnosis, the patch files and the runbooks executed, as Markdown."""
from __future__ import annotations

import os
import pathlib
from typing import TYPE_CHECKING

from flink_runbooks.parse.redact import redact_text

if TYPE_CHECKING:
    from flink_runbooks.apps.triage import TriageReport


def render_markdown(report: "TriageReport") -> str:
    d = report.diagnosis
    inc = d.incident
    lines = ["# Triage report", "",
             f"Flink {inc.flink_version or 'version unknown'}; {len(inc.inputs)} input file(s), "
             f"{len(inc.events)} records kept.", ""]
    for w in list(inc.warnings) + list(d.errors):
        lines.append(f"- warning: {w}")
    if not d.findings:
        lines += ["", "No known failure found."]
    for f in d.findings:
        lines += ["", f"## {'Primary: ' if f.primary else ''}{f.title} (`{f.runbook}`)", "",
                  f"**Root cause:** `{f.root_cause.slug}`: {f.root_cause.summary} (confidence {f.confidence:.0%})", "",
                  f.summary, "", "Evidence:", ""]
        for e in f.evidence:
            lines.append(f"- `{e.file}:{e.line}` {e.ts or ''} {('— ' + e.note) if e.note else ''}")
            lines += ["", "  ```", *["  " + (redact_text(t) or t) for t in e.text.splitlines()[:6]], "  ```"]
        if f.patches:
            lines += ["", "Proposed changes (nothing was modified):", ""]
            for p in f.patches:
                value = p.proposed if p.proposed is not None else (p.snippet or "").splitlines()[0] if p.snippet else "—"
                lines.append(redact_text(f"- `{p.key}`: {p.current or '—'} → **{value}** ({p.reason})"))
    if report.patches:
        lines += ["", "## Patch files", ""] + [f"- {k}: `{v}`" for k, v in report.patches.items()]
        diff_path = report.patches.get("config_diff")
        if diff_path:
            lines += ["", "```diff", pathlib.Path(diff_path).read_text().rstrip("\n"), "```"]
    if report.runbooks:
        lines += ["", "## Runbooks executed", "", "| runbook | status | seconds | notebook | error |", "|---|---|---|---|---|"]
        for r in report.runbooks:
            link = f"[html]({os.path.relpath(r.html, report.out)})" if r.html else "—"
            lines.append(f"| `{r.runbook}` | {r.status} | {r.duration_s:.1f} | {link} | {r.error or ''} |")
    return "\n".join(lines) + "\n"
