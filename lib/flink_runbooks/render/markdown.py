"""Triage's ``report.md``: the diagnosis, the patch files and the runbooks executed, as Markdown; and that Markdown
as an HTML page (``serve``'s ``/runs/<id>/report.html``). :func:`finding_markdown` / :func:`finding_html` are the one
rendering of a finding (verdict, what to do now, configuration change, evidence) the report and the pages share.

Log text, file names, config keys and values are set in a code span or a fenced block that its content cannot
close; sentences (the catalogue's words, summaries and reasons that quote the incident) are prose with every Markdown
punctuation character escaped and URLs set as code (:func:`prose`). So no raw HTML, link or ``javascript:`` URL from
a log renders, and a placeholder like ``<name>`` stays visible, whatever Markdown viewer opens the report. Control
characters are shown as escapes (:func:`~flink_runbooks.render.terminal.printable`), as in the terminal.
"""
from __future__ import annotations

import html
import os
import pathlib
import re
from typing import TYPE_CHECKING, Sequence

from flink_runbooks.model import Finding, Patch
from flink_runbooks.parse.redact import redact_text
from flink_runbooks.render.patches import fix_and_hardening, is_action
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


# Words many viewers turn into links by themselves (URLs, www. names, mail addresses): set as code instead.
_LINKABLE = re.compile(r"(\S*(?::/|www\.|@)\S*)", re.IGNORECASE)
# Markdown's punctuation, written as text: no emphasis, link, raw HTML, table cell or entity can form from it, and a
# placeholder such as <name> stays visible instead of being taken for a tag.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_\[\]<>|&!#~])")


def prose(value: object) -> str:
    """``value`` as Markdown text on one line, every character shown as it is (our catalogue's words, which quote
    placeholders like ``<name>`` and may name a path from the incident): masked, then escaped."""
    text = printable(redact_text(str(value)) or str(value), newlines=False)
    parts = _LINKABLE.split(text)
    return "".join(code_span(part) if i % 2 else _MARKDOWN_PUNCTUATION.sub(r"\\\1", part)
                   for i, part in enumerate(parts) if part)


def confidence_words(finding: Finding) -> str:
    """How sure the verdict is, in words: an undetermined cause or a weak match is never shown as a strong one."""
    if finding.root_cause.slug == "undetermined" or finding.confidence < 0.5:
        return "undetermined"
    return "high" if finding.confidence >= 0.75 else "medium"


def verdict_line(finding: Finding) -> str:
    """The finding in one line: runbook, cause, confidence in words."""
    return (f"{code_span(finding.runbook)}: {prose(finding.root_cause.summary)} "
            f"(cause {code_span(finding.root_cause.slug)}, confidence {confidence_words(finding)}, "
            f"{finding.confidence:.0%})")


def action_lines(patches: Sequence[Patch], *, numbered: bool = True) -> list[str]:
    """Operations and code actions as a list: what to do, why, and the command or code it takes."""
    lines: list[str] = []
    for i, p in enumerate(patches, 1):
        bullet = f"{i}." if numbered else "-"
        lines.append(f"{bullet} **{prose(p.key)}**: {prose(p.reason)}")
        if p.snippet:
            lines += ["", *code_block(redact_text(p.snippet) or p.snippet, indent=" " * (len(bullet) + 1)), ""]
    return lines


def config_change_lines(patches: Sequence[Patch]) -> list[str]:
    """Configuration changes as a list: the key, its current value, the proposed one and why."""
    lines = []
    for p in patches:
        proposed = "remove" if p.proposed is None else code_span(redact_text(p.proposed) or p.proposed)
        current = code_span(redact_text(p.current) or p.current) if p.current is not None else "not set"
        where = f" ({'Kafka client' if p.target == 'kafka' else 'Flink'})"
        lines.append(f"- {code_span(redact_text(p.key) or p.key)}{where}: {current} → **{proposed}**: {prose(p.reason)}")
    return lines


def finding_markdown(finding: Finding, *, level: int = 2, proposals: bool = True, evidence: bool = True,
                     config_diff: str | None = None, input_root: str | None = None) -> list[str]:
    """One finding as Markdown, what to do first: headline, verdict and confidence, the urgent actions ("Do now"),
    the configuration change (with ``config_diff`` when given), what prevents the next incident ("Once the incident
    is over"), then the evidence. The one rendering of a finding that
    report.md and the pages built from it share (:func:`finding_html`). ``proposals`` false leaves the changes out
    (a secondary finding's go under hardening), ``evidence`` false the evidence (a verdict at the top of a page).
    Evidence files under ``input_root`` are named relative to it."""
    h = "#" * level
    label = "Primary: " if finding.primary else ("Also found: " if finding.severity == "failure" else "Warning: ")
    lines = [f"{h} {label}{prose(finding.title)} ({code_span(finding.runbook)})", "",
             f"**Root cause:** {code_span(finding.root_cause.slug)}: {prose(finding.root_cause.summary)} "
             f"(confidence {confidence_words(finding)}, {finding.confidence:.0%})", "",
             prose(finding.summary), ""]
    if finding.would_change:
        lines += [f"What would change the verdict: {prose(finding.would_change)}", ""]
    actions = [p for p in finding.patches if is_action(p) and p.urgent]
    config = [p for p in finding.patches if not is_action(p)]
    prevention = [p for p in finding.patches if is_action(p) and not p.urgent]
    if proposals and actions:
        lines += [f"{h}# Do now", "", *action_lines(actions), ""]
    if proposals and config:
        lines += [f"{h}# Configuration change (a proposal: nothing was modified)", "", *config_change_lines(config), ""]
        if config_diff:
            lines += [*code_block(config_diff.rstrip("\n"), info="diff"), ""]
    if proposals and prevention:
        lines += [f"{h}# Once the incident is over", "", *action_lines(prevention, numbered=False), ""]
    if evidence and finding.evidence:
        lines += [f"{h}# Evidence", ""]
        for e in finding.evidence:
            where = code_span(f"{_shown_path(e.file, input_root)}:{e.line}") + (f" at {code_span(e.ts)}" if e.ts else "")
            lines.append(f"- {where}" + (f": {code_span(e.note)}" if e.note else ""))
            lines += ["", *code_block("\n".join(redact_text(t) or t for t in e.text.split("\n")[:6]), indent="  "), ""]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def input_root(paths: Sequence[str]) -> str | None:
    """The folder every local input lies in (what a reader passed in), or None for remote or unrelated inputs."""
    local = [os.path.dirname(p) for p in paths if "://" not in p and os.path.isabs(p)]
    if not local or len(local) != len(paths):
        return None
    try:
        root = os.path.commonpath(local)
    except ValueError:
        return None
    return root if root != os.sep else None


def _shown_path(path: str, root: str | None) -> str:
    if root and path.startswith(root + os.sep):
        return os.path.relpath(path, root)
    return path


def finding_html(finding: Finding, *, level: int = 2, proposals: bool = True, evidence: bool = True,
                 config_diff: str | None = None, input_root: str | None = None) -> str:
    """:func:`finding_markdown` as an HTML fragment (escaped: raw HTML in it shows as text); the site's runbook
    pages and the triage pages show a finding with it."""
    return markdown_html("\n".join(finding_markdown(finding, level=level, proposals=proposals, evidence=evidence,
                                                     config_diff=config_diff, input_root=input_root)) + "\n")


def _patch_file_lines(patches: dict[str, str], report: "TriageReport") -> list[str]:
    return [f"- {k}: {code_span(os.path.relpath(v, report.out))}" for k, v in patches.items()]


def render_markdown(report: "TriageReport") -> str:
    """report.md: the verdict first, then the fix (the primary finding: actions, configuration change, evidence),
    the other findings, hardening (their proposals, kept apart from the fix), the patch files, the runbooks
    executed, and what was read."""
    d = report.diagnosis
    inc = d.incident
    lines = ["# Triage report", ""]
    primary = d.primary
    if primary is not None:
        lines += [f"**Verdict:** {verdict_line(primary)}", ""]
    else:
        lines += ["No known failure found.", ""]
    fix_files = {k: v for k, v in report.patches.items() if not k.startswith(HARDENING_PREFIX)}
    hardening_files = {k: v for k, v in report.patches.items() if k.startswith(HARDENING_PREFIX)}
    fix_diff = _read(fix_files.get("config_diff"))
    root = input_root([f.path for f in inc.inputs])
    for f in d.findings:
        lines += [*finding_markdown(f, proposals=f.primary, config_diff=fix_diff if f.primary else None,
                                    input_root=root), ""]
    _, hardening = fix_and_hardening(d.findings)
    if hardening:
        lines += ["## Hardening (not the fix: once the incident is over)", "",
                  "What the other findings propose, to make the next incident less likely or less costly.", ""]
        for finding in [f for i, (f, _) in enumerate(hardening) if all(f is not g for g, _ in hardening[:i])]:
            mine = [p for f, p in hardening if f is finding]
            lines += [f"From {code_span(finding.runbook)}:", ""]
            lines += action_lines([p for p in mine if is_action(p)], numbered=False)
            lines += config_change_lines([p for p in mine if not is_action(p)]) + [""]
        hardening_diff = _read(hardening_files.get(HARDENING_PREFIX + "config_diff"))
        if hardening_diff:
            lines += [*code_block(hardening_diff.rstrip("\n"), info="diff"), ""]
    if report.patches:
        lines += ["## Patch files", ""]
        if fix_files:
            lines += ["The fix:", "", *_patch_file_lines(fix_files, report), ""]
        if hardening_files:
            lines += ["Hardening:", "", *_patch_file_lines(hardening_files, report), ""]
    if report.runbooks:
        lines += ["## Runbooks executed", "", "| runbook | status | seconds | notebook |", "|---|---|---|---|"]
        for r in report.runbooks:
            # the page sits in our own output folder, named after the runbook: a link we made, not one from the input
            link = f"[html](<{os.path.relpath(r.html, report.out)}>)" if r.html else "—"
            lines.append(f"| {code_span(r.runbook)} | {r.status} | {r.duration_s:.1f} | {link} |")
        failed = [r for r in report.runbooks if r.error]
        if failed:
            lines += ["", "Errors:", ""] + [f"- {code_span(r.runbook)}: {code_span(r.error)}" for r in failed]
        lines.append("")
    version = f"Flink {code_span(inc.flink_version)}" if inc.flink_version else "Flink version unknown"
    lines += ["## Input", "", f"{version}; {len(inc.inputs)} input file(s), {inc.records_summary()}."
              + (f" Evidence names files relative to {code_span(root)}." if root else "")]
    warnings = list(inc.warnings) + list(d.errors)
    if warnings:
        lines += ["", *[f"- warning: {code_span(w)}" for w in warnings]]
    return "\n".join(lines) + "\n"


# report.patches' keys for hardening files; the fix's keys have no prefix
HARDENING_PREFIX = "hardening_"


def _read(path: str | None) -> str:
    return pathlib.Path(path).read_text() if path else ""


PAGE_STYLE = ("body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; "
              "line-height: 1.45 } pre { background: #f4f4f4; padding: .6rem; overflow-x: auto; white-space: pre-wrap } "
              "code { background: #f4f4f4 } table { border-collapse: collapse } td, th { border: 1px solid #ccc; "
              "padding: .2rem .5rem }")


def markdown_html(markdown: str) -> str:
    """Markdown we wrote as an HTML fragment; raw HTML in it is escaped, never passed through."""
    import mistune

    return mistune.create_markdown(escape=True, plugins=["table"])(markdown)


def markdown_page(markdown: str, title: str = "Triage report") -> str:
    """A report written by :func:`render_markdown` as a standalone HTML page. What came from the incident is in
    code spans and fenced blocks, which become escaped ``<code>`` and ``<pre>``; raw HTML anywhere in the text is
    escaped too, links to ``javascript:`` and the like are dropped, and the page's Content-Security-Policy forbids
    every script, so nothing read from a log runs."""
    body = markdown_html(markdown)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CONTENT_SECURITY_POLICY)}">\n'
            f"<title>{html.escape(title)}</title><style>{PAGE_STYLE}</style></head>\n<body>\n{body}</body></html>\n")
