"""Triage's ``report.md``: the diagnosis, the patch files and the runbooks executed, as Markdown; and that Markdown
as an HTML page (``serve``'s ``/runs/<id>/report.html``).

Our own words are prose; everything that came from the incident (log text, file names, messages, config keys and
values, summaries that quote them) is set in a code span or a fenced block that its content cannot close, so no
raw HTML, link or ``javascript:`` URL from a log renders, whatever Markdown viewer opens the report. Control
characters are shown as escapes (:func:`~flink_runbooks.render.terminal.printable`), as in the terminal.
"""
from __future__ import annotations

import html
import os
import pathlib
import re
from typing import TYPE_CHECKING

from flink_runbooks.parse.redact import redact_text
from flink_runbooks.render.notebook_html import CONTENT_SECURITY_POLICY
from flink_runbooks.render.terminal import printable

if TYPE_CHECKING:
    from flink_runbooks.apps.triage import TriageReport

_BACKTICKS = re.compile(r"`+")


def _longest_backtick_run(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def code_span(value: object) -> str:
    """``value`` as one inline code span on one line: its delimiter is longer than any backtick run inside it."""
    text = printable(value, newlines=False)
    if not text:
        return "—"
    ticks = "`" * (_longest_backtick_run(text) + 1)
    # a span whose text starts or ends with a backtick (or with spaces at both ends) needs a space inside each end
    pad = " " if text[0] == "`" or text[-1] == "`" or (text[0] == " " and text[-1] == " ") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def code_block(text: object, *, info: str = "", indent: str = "") -> list[str]:
    """``text`` as a fenced code block (lines prefixed with ``indent``, to stay inside a list item): the fence is
    longer than any backtick run inside, so no line of the text can close it."""
    lines = [printable(line) for line in str(text).removesuffix("\n").split("\n")] or [""]
    fence = "`" * max(3, _longest_backtick_run("\n".join(lines)) + 1)
    return [f"{indent}{fence}{info}", *[f"{indent}{line}" if line else indent.rstrip() for line in lines],
            f"{indent}{fence}"]


def render_markdown(report: "TriageReport") -> str:
    d = report.diagnosis
    inc = d.incident
    version = f"Flink {code_span(inc.flink_version)}" if inc.flink_version else "Flink version unknown"
    lines = ["# Triage report", "",
             f"{version}; {len(inc.inputs)} input file(s), {inc.records_summary()}.", ""]
    for w in list(inc.warnings) + list(d.errors):
        lines.append(f"- warning: {code_span(w)}")
    if not d.findings:
        lines += ["", "No known failure found."]
    for f in d.findings:
        lines += ["", f"## {'Primary: ' if f.primary else ''}{f.title} ({code_span(f.runbook)})", "",
                  f"**Root cause:** {code_span(f.root_cause.slug)}: {f.root_cause.summary} "
                  f"(confidence {f.confidence:.0%})", "",
                  f"Summary: {code_span(redact_text(f.summary) or f.summary)}", "", "Evidence:", ""]
        for e in f.evidence:
            where = code_span(f"{e.file}:{e.line}") + (f" at {code_span(e.ts)}" if e.ts else "")
            lines.append(f"- {where}" + (f": {code_span(e.note)}" if e.note else ""))
            lines += ["", *code_block("\n".join(redact_text(t) or t for t in e.text.split("\n")[:6]), indent="  ")]
        if f.patches:
            lines += ["", "Proposed changes (nothing was modified):", ""]
            for p in f.patches:
                value = p.proposed if p.proposed is not None else (p.snippet or "").splitlines()[0] if p.snippet else "—"
                lines.append(f"- {code_span(redact_text(p.key))}: {code_span(redact_text(p.current or '—'))} → "
                             f"**{code_span(redact_text(str(value)))}** ({code_span(redact_text(p.reason))})")
    if report.patches:
        lines += ["", "## Patch files", ""] + [f"- {k}: {code_span(v)}" for k, v in report.patches.items()]
        diff_path = report.patches.get("config_diff")
        if diff_path:
            lines += ["", *code_block(pathlib.Path(diff_path).read_text().rstrip("\n"), info="diff")]
    if report.runbooks:
        lines += ["", "## Runbooks executed", "", "| runbook | status | seconds | notebook |", "|---|---|---|---|"]
        for r in report.runbooks:
            # the page sits in our own output folder, named after the runbook: a link we made, not one from the input
            link = f"[html](<{os.path.relpath(r.html, report.out)}>)" if r.html else "—"
            lines.append(f"| {code_span(r.runbook)} | {r.status} | {r.duration_s:.1f} | {link} |")
        failed = [r for r in report.runbooks if r.error]
        if failed:
            lines += ["", "Errors:", ""] + [f"- {code_span(r.runbook)}: {code_span(r.error)}" for r in failed]
    return "\n".join(lines) + "\n"


PAGE_STYLE = ("body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; "
              "line-height: 1.45 } pre { background: #f4f4f4; padding: .6rem; overflow-x: auto; white-space: pre-wrap } "
              "code { background: #f4f4f4 } table { border-collapse: collapse } td, th { border: 1px solid #ccc; "
              "padding: .2rem .5rem }")


def markdown_page(markdown: str, title: str = "Triage report") -> str:
    """A report written by :func:`render_markdown` as a standalone HTML page. What came from the incident is in
    code spans and fenced blocks, which become escaped ``<code>`` and ``<pre>``; raw HTML anywhere in the text is
    escaped too, links to ``javascript:`` and the like are dropped, and the page's Content-Security-Policy forbids
    every script, so nothing read from a log runs."""
    import mistune

    body = mistune.create_markdown(escape=True, plugins=["table"])(markdown)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CONTENT_SECURITY_POLICY)}">\n'
            f"<title>{html.escape(title)}</title><style>{PAGE_STYLE}</style></head>\n<body>\n{body}</body></html>\n")
