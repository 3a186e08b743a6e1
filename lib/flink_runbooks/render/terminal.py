"""Text from an incident made safe for a terminal: control characters are shown as escapes, never sent.

A log line can carry escape sequences (a window title, a screen clear, a hyperlink that shows one address and opens
another) or bidirectional overrides that reorder what is displayed: printed as they are, they hide or spoof what the
engineer reads.
"""
from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass
from typing import Sequence

from flink_runbooks.model import Diagnosis, Finding, Patch
from flink_runbooks.parse.redact import redact_text
from flink_runbooks.render.patches import render_config_diff, render_kafka_properties
from flink_runbooks.vocabulary.versions import FlinkVersion

# C0 controls but tab and newline, DEL, C1 controls (0x9b alone starts a sequence on some terminals), and the Unicode
# bidirectional embeddings, overrides and isolates.
_UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\r": "\\r", "\n": "\\n", "\x1b": "\\x1b"}


def _escape(match: re.Match) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def printable(text: object, *, newlines: bool = True) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``, ``\\r``, ``\\u202e``).

    Tabs stay; newlines stay unless ``newlines`` is false (for what must stay on one line: a file name, a warning).
    """
    s = "" if text is None else str(text)
    if newlines:
        return _UNPRINTABLE.sub(lambda m: "\n" if m.group() == "\n" else _escape(m), s)
    return _UNPRINTABLE.sub(_escape, s)


# ====================================================================================================== the answer


def confidence_words(confidence: float, cause: str) -> str:
    """A finding's confidence as the on-call engineer reads it: ``high``, ``medium`` or ``undetermined``."""
    if cause == "undetermined" or confidence < 0.5:
        return "undetermined"
    return "high" if confidence >= 0.75 else "medium"


# A terminal narrower than this still gets readable lines; wrapping below it makes a column of single words.
MIN_WIDTH = 60
# The default form shows this many lines of a log excerpt per evidence line; --verbose shows all of them.
SHORT_EXCERPT_LINES = 2
SHORT_EVIDENCE_ITEMS = 4
SHORT_SKIPPED_NAMES = 3
_SKIPPED = re.compile(r"skipped (\d+) file\(s\) that are neither logs nor Flink config files: (.*)", re.DOTALL)
_MORE = re.compile(r" and (\d+) more$")


@dataclass(frozen=True)
class ShownInput:
    """An input as the reader gave it: ``path`` (absolute, or a URI) is shown as ``label``, a file under it as
    ``label/rest``, or as ``rest`` alone when ``relative`` (the one directory given)."""

    path: str
    label: str
    relative: bool = False


def shown_inputs(given: Sequence[tuple[str, str]]) -> list[ShownInput]:
    """``(path as read, name to show)`` pairs of the inputs given, the shortest names that stay unambiguous: paths
    under the one directory given are shown relative to it; with several inputs, each keeps the name typed."""
    roots = [(path.rstrip("/") or path, label.rstrip("/") or label) for path, label in given]
    if len(roots) == 1 and _is_directory(roots[0][0]):
        return [ShownInput(*roots[0], relative=True)]
    return [ShownInput(path, label) for path, label in roots]


def _is_directory(path: str) -> bool:
    return "://" not in path and os.path.isdir(path)


def _relative_to_inputs(text: str, inputs: Sequence[ShownInput]) -> str:
    """``text`` with each input's absolute path written as the reader gave it (the longest path first)."""
    for shown in sorted(inputs, key=lambda s: len(s.path), reverse=True):
        if not shown.path or shown.path not in text:
            continue
        text = text.replace(shown.path + "/", "" if shown.relative else shown.label + "/")
        text = text.replace(shown.path, shown.label)
    return text


def _wrap(text: str, width: int, indent: str, *, first: str | None = None, max_lines: int | None = None,
          whole_words: bool = False) -> list[str]:
    """``text`` wrapped at word boundaries to ``width`` (a word longer than a line is split, nothing else, unless
    ``whole_words``: a file name must stay one word to be copied, even past the width); a cut (``max_lines``) ends on
    a whole word and an ellipsis."""
    first = indent if first is None else first
    out: list[str] = []
    for paragraph in text.split("\n") or [""]:
        out += textwrap.wrap(paragraph, width=width, initial_indent=first if not out else indent,
                             subsequent_indent=indent, break_on_hyphens=False, break_long_words=not whole_words,
                             drop_whitespace=True) or [(first if not out else indent).rstrip()]
    if max_lines is not None and len(out) > max_lines:
        kept = out[:max_lines]
        last = kept[-1]
        while len(last) + 2 > width and " " in last.strip():
            last = last.rsplit(" ", 1)[0]
        # a word longer than the line (a class name, an id) is already split: it is cut like one
        kept[-1] = last.rstrip()[: width - 2] + " …"
        return kept
    return out


class _Lines:
    """The answer being written: every value from the incident masked, then escaped, then wrapped to the width."""

    def __init__(self, width: int, inputs: Sequence[ShownInput], color: bool):
        self.width, self.inputs, self.color = max(width, MIN_WIDTH), inputs, color
        self.lines: list[str] = []

    def clean(self, value: object, *, mask: bool = True) -> str:
        """``mask``: text from the logs, masked first, on the text as logged (an escape written out, ``\x19``,
        would glue itself to a value that the masking patterns find by its boundary); not our own words with file
        names (a warning), which the patterns would mangle (``passwd: unknown``)."""
        text = "" if value is None else str(value)
        return printable(_relative_to_inputs((redact_text(text) or text) if mask else text, self.inputs))

    def add(self, text: str = "", *, indent: str = "", first: str | None = None, max_lines: int | None = None,
            style: str = "", whole_words: bool = False) -> None:
        if not text and first is None:
            self.lines.append("")
            return
        wrapped = _wrap(text, self.width, indent, first=first, max_lines=max_lines, whole_words=whole_words)
        self.lines += [self._styled(line, style) for line in wrapped]

    def verbatim(self, text: str, indent: str) -> None:
        """Lines that must keep their shape (a diff, a command): wrapped only past the width, with a mark."""
        for line in text.rstrip("\n").splitlines():
            line = indent + line
            while len(line) > self.width:
                self.lines.append(line[: self.width - 1] + "\\")
                line = indent + "  " + line[self.width - 1:]
            self.lines.append(line)

    def _styled(self, line: str, style: str) -> str:
        codes = {"bold": "1", "warn": "1;33"}
        return f"\033[{codes[style]}m{line}\033[0m" if self.color and style in codes else line

    def text(self) -> str:
        return "\n".join(self.lines).rstrip("\n") + "\n"


def answer(diagnosis: Diagnosis, *, inputs: Sequence[ShownInput] = (), width: int = 100, verbose: bool = False,
           color: bool = False) -> str:
    """The diagnosis for a terminal, the answer first: per finding a headline (runbook, root cause, confidence in
    words), what to do now, the configuration change, then the evidence; what was read and skipped comes last.

    Secondary findings are a headline and their cause unless ``verbose``; ``verbose`` also shows every evidence line
    whole and every warning in full. Everything from the input is masked and shown through :func:`printable`, so no
    escape sequence from a log reaches the terminal."""
    out = _Lines(width, inputs, color)
    if not diagnosis.findings:
        out.add("No known failure found.", style="bold")
    for finding in diagnosis.findings:
        if out.lines:
            out.add()
        _finding(out, finding, diagnosis, full=finding.primary or verbose, verbose=verbose)
    out.add()
    _inputs(out, diagnosis, verbose=verbose)
    return out.text()


def _finding(out: _Lines, f: Finding, diagnosis: Diagnosis, *, full: bool, verbose: bool) -> None:
    cause = f.root_cause.slug
    words = confidence_words(f.confidence, cause)
    tag = "PRIMARY" if f.primary else ("also" if f.severity == "failure" else "warning")
    if words == "undetermined":
        # not a verdict: it must not read like one at a glance
        head = (f"[{tag}] {f.runbook}: cause UNDETERMINED ({f.confidence:.0%}, too little evidence"
                + (" to name one)" if cause == "undetermined" else f"; best guess {cause})"))
        out.add(head, first="", indent="    ", style="warn")
    else:
        out.add(f"[{tag}] {f.runbook}: {cause} (confidence {words})", first="", indent="    ", style="bold")
    out.add(out.clean(f.title) + ". " + out.clean(f.root_cause.summary), indent="  ",
            max_lines=None if full else 2)
    if words == "undetermined" and f.root_cause.next_evidence:
        out.add(out.clean(f.root_cause.next_evidence), first="  Collect next: ", indent="    ")
    actions = [p for p in f.patches if p.target == "ops"]
    code = [p for p in f.patches if p.target == "code"]
    if not full:
        changes = len(f.patches) - len(actions)
        todo = [f"{len(actions)} action(s)"] if actions else []
        todo += [f"{changes} change(s)"] if changes else []
        where = ", ".join(out.clean(f"{e.file}:{e.line}") for e in f.evidence[:3])
        more = f" and {len(f.evidence) - 3} more" if len(f.evidence) > 3 else ""
        if where:
            out.add(where + more, first="  Evidence: ", indent="    ")
        if todo:
            out.add(" and ".join(todo) + " proposed: --verbose shows them", indent="  ")
        return
    # only the primary finding's proposals are the fix; another finding's are hardening, said so in each heading
    apart = "" if f.primary else " (hardening, not the fix)"
    _actions(out, [p for p in actions if p.urgent], "  Do now:" if f.primary else f"  Actions{apart}:")
    flink = [p for p in f.patches if p.target == "flink"]
    if flink:
        inc = diagnosis.incident
        out.add(f"  Configuration change{apart or ' (proposed, not applied)'}:")
        out.verbatim(out.clean(render_config_diff(flink, inc.config, FlinkVersion.parse(inc.flink_version))), "    ")
    kafka = [p for p in f.patches if p.target == "kafka"]
    if kafka:
        out.add(f"  Kafka client properties{apart or ' (proposed, not applied)'}:")
        out.verbatim(out.clean(render_kafka_properties(kafka).get("properties", "")), "    ")
    if code:
        out.add(f"  Job code{apart}:")
        for p in code:
            out.add(f"{out.clean(p.key)}: {out.clean(p.reason)}", first="    - ", indent="      ")
            if p.snippet and verbose:
                out.verbatim(out.clean(p.snippet), "        ")
    # prevention's commands wait for --verbose: they would push the evidence off the first screen
    _actions(out, [p for p in actions if not p.urgent], "  Once the incident is over:", snippets=verbose)
    out.add(out.clean(f.summary), first="  What happened: ", indent="    ", max_lines=None if verbose else 3)
    if f.evidence:
        out.add("  Evidence:")
        shown = f.evidence if verbose else f.evidence[:SHORT_EVIDENCE_ITEMS]
        for e in shown:
            where = out.clean(f"{e.file}:{e.line}") + (f"  {e.ts}" if e.ts else "")
            out.add(where + (f"  {out.clean(e.note)}" if e.note else ""), indent="        ", first="    ",
                    max_lines=None if verbose else 2, whole_words=True)
            lines = [line for line in e.text.split("\n") if line.strip()]
            if not verbose:
                # the record's own line and the deepest exception of its chain
                lines = [_without_head(lines[0], e.ts)] + lines[1:][-1:]
            for line in lines if verbose else lines[:SHORT_EXCERPT_LINES]:
                out.add(out.clean(line), indent="        ", first="      ", max_lines=None if verbose else 2)
        if len(shown) < len(f.evidence):
            out.add(f"    {len(f.evidence) - len(shown)} more: --verbose shows them")
    if f.would_change:
        out.add(out.clean(f.would_change), first="  Would change the verdict: ", indent="    ",
                max_lines=None if verbose else 2)


def _actions(out: _Lines, actions: Sequence[Patch], heading: str, *, snippets: bool = True) -> None:
    if not actions:
        return
    out.add(heading)
    for i, p in enumerate(actions, 1):
        out.add(f"{out.clean(p.key)}: {out.clean(p.reason)}", first=f"    {i}. ", indent="       ")
        if p.snippet and snippets:
            out.verbatim(out.clean(p.snippet), "         ")


def _without_head(line: str, ts: str | None) -> str:
    """A log record's first line without the time already shown beside its location."""
    return line[len(ts):].lstrip() if ts and line.startswith(ts) else line


def _shortened(name: str, limit: int = 40) -> str:
    """A long file name with its middle elided: its folder and its end are what tell files apart."""
    if len(name) <= limit:
        return name
    return name[: limit // 2 - 1] + "…" + name[-(limit // 2):]


def _inputs(out: _Lines, diagnosis: Diagnosis, *, verbose: bool) -> None:
    inc = diagnosis.incident
    logs = sum(1 for f in inc.inputs if f.kind == "log")
    version = out.clean(inc.flink_version or "unknown", mask=False)
    source = out.clean(inc.version_source, mask=False) if inc.version_source else ""
    out.add(f"Read: Flink {version}" + (f" from {source}" if source else "")
            + f"; {logs} log file(s), {inc.records_summary()}, {len(inc.config)} config keys", first="",
            indent="      ")
    relative = next((s.label for s in out.inputs if s.relative), None)
    if relative:
        out.add(f"Paths are relative to {printable(relative, newlines=False)}/", first="", indent="      ",
                whole_words=True)
    for warning in list(inc.warnings) + list(diagnosis.errors):
        text = out.clean(warning, mask=False)
        skipped = _SKIPPED.fullmatch(text)
        if skipped and not verbose:
            count, names = int(skipped.group(1)), skipped.group(2)
            more = _MORE.search(names)
            names = names[: more.start()] if more else names
            listed = [_shortened(name) for name in names.split(", ")[:SHORT_SKIPPED_NAMES]]
            rest = count - len(listed)
            text = (f"{count} file(s), neither logs nor Flink config: {', '.join(listed)}"
                    + (f" and {rest} more (--verbose)" if rest else ""))
            out.add(text, first="Skipped ", indent="      ", max_lines=2)
            continue
        out.add(text, first="warning: ", indent="      ", max_lines=None if verbose else 3, whole_words=True)
