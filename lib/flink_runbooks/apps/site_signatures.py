"""The detectors' signatures for the browser: Java/Python regexes translated to JavaScript for the "paste a
stack trace" page, and the words of a signature for search."""
from __future__ import annotations

import re
from typing import Sequence
from flink_runbooks.catalogue import Runbook


# How much one matched pattern counts on the stack-trace page before it is shared out among the runbooks that
# declare it: Flink's own wording of a failure names it, a signature or an exception class points at it, frames
# only locate it (they support a match, never make one).
PATTERN_WEIGHT = {"wording": 1.0, "signature": 1.0, "exception": 1.0, "frame": 0.5}

# The runbook for failures outside the catalogue: on the stack-trace page it is where "no match" points, never a match.
UNRECOGNISED = "unrecognised-failure"


class UnsupportedRegex(ValueError):
    """A signature uses syntax that has no JavaScript equivalent here."""


_POSIX_CLASSES = {
    "Lower": "a-z", "Upper": "A-Z", "ASCII": "\\x00-\\x7F", "Alpha": "a-zA-Z", "Digit": "0-9", "Alnum": "a-zA-Z0-9",
    "Punct": "!-\\/:-@\\[-`{-~", "Graph": "!-~", "Print": " -~", "Blank": " \\t", "Cntrl": "\\x00-\\x1F\\x7F",
    "XDigit": "0-9a-fA-F", "Space": " \\t\\n\\x0B\\f\\r",
}
_HORIZONTAL_SPACE = " \\t\\xA0\\u1680\\u180E\\u2000-\\u200A\\u202F\\u205F\\u3000"
_GLOBAL_FLAGS = re.compile(r"^\(\?([imsx]+)\)")


def to_js_regex(pattern: str) -> tuple[str, str]:
    """A signature (the regex syntax Java and Python share) as a JavaScript ``(source, flags)`` pair.

    Converted: leading ``(?i)``/``(?s)``/``(?m)`` to flags, scoped ``(?i:…)`` by spelling both cases out (older
    browsers lack regex modifiers), ``\\A``/``\\Z``/``\\z``, ``\\Q…\\E``, ``\\h``/``\\H``, POSIX ``\\p{Alpha}``
    classes and ``\\e``/``\\a``. Syntax that would change meaning (possessive quantifiers, atomic groups, class
    intersections, inline flags mid-pattern, Python-only groups) raises :class:`UnsupportedRegex`.
    """
    flags = ""
    m = _GLOBAL_FLAGS.match(pattern)
    if m:
        if "x" in m.group(1):
            raise UnsupportedRegex(f"{pattern!r}: verbose mode (?x)")
        flags = "".join(sorted(set(m.group(1))))
        pattern = pattern[m.end():]
    out: list[str] = []
    fold: list[bool] = []  # per open group: does it fold case?
    i, n = 0, len(pattern)

    def folding() -> bool:
        return any(fold)

    def literal(ch: str) -> str:
        if folding() and ch.isalpha() and ch.lower() != ch.upper():
            return f"[{ch.lower()}{ch.upper()}]"
        return ch

    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise UnsupportedRegex(f"{pattern!r}: trailing backslash")
            e = pattern[i + 1]
            if e == "Q":
                end = pattern.find("\\E", i + 2)
                text = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
                out.append("".join(literal(ch) if ch.isalnum() else re.escape(ch) if not ch.isspace() else ch
                                   for ch in text))
                i = n if end < 0 else end + 2
                continue
            if e in "pP" and pattern.startswith("{", i + 2):
                end = pattern.index("}", i + 2)
                name = pattern[i + 3:end].removeprefix("Is")
                if name not in _POSIX_CLASSES:
                    raise UnsupportedRegex(f"{pattern!r}: \\{e}{{{name}}}")
                out.append(("[^" if e == "P" else "[") + _POSIX_CLASSES[name] + "]")
                i = end + 1
                continue
            simple = {"A": "^", "Z": "$", "z": "$", "h": f"[{_HORIZONTAL_SPACE}]", "H": f"[^{_HORIZONTAL_SPACE}]",
                      "e": "\\x1B", "a": "\\x07"}
            if e in simple:
                out.append(simple[e])
            elif e == "x" and pattern.startswith("{", i + 2) or e in "GRXK":
                raise UnsupportedRegex(f"{pattern!r}: \\{e}")
            else:
                out.append("\\" + e)
            i += 2
            continue
        if c == "[":
            end, cls = _char_class(pattern, i, folding())
            out.append(cls)
            i = end
            continue
        if c == "(":
            if pattern.startswith("(?", i):
                rest = pattern[i + 2:]
                if rest.startswith(("P<", "P=", "P>")):
                    raise UnsupportedRegex(f"{pattern!r}: Python-only group (?P")
                if rest.startswith(">"):
                    raise UnsupportedRegex(f"{pattern!r}: atomic group (?>")
                scoped = re.match(r"([a-zA-Z-]+)([:)])", rest)
                if scoped:
                    if scoped.group(2) == ")" or scoped.group(1) != "i":
                        raise UnsupportedRegex(f"{pattern!r}: inline flags (?{scoped.group(1)}{scoped.group(2)}")
                    fold.append(True)
                    out.append("(?:")
                    i += 2 + len(scoped.group(0))
                    continue
            fold.append(False)
            out.append(c)
            i += 1
            continue
        if c == ")":
            if fold:
                fold.pop()
            out.append(c)
            i += 1
            continue
        if c in "*+?}" and i + 1 < n and pattern[i + 1] == "+":
            raise UnsupportedRegex(f"{pattern!r}: possessive quantifier {c}+")
        out.append(literal(c) if c.isalpha() else c)
        i += 1
    return "".join(out), flags


def _char_class(pattern: str, start: int, fold: bool) -> tuple[int, str]:
    """Copy the character class at ``start``; returns the index after it and its JavaScript spelling."""
    i = start + 1
    out = ["["]
    if i < len(pattern) and pattern[i] == "^":
        out.append("^")
        i += 1
    if i < len(pattern) and pattern[i] == "]":  # a leading ] is literal in Java and Python
        out.append("\\]")
        i += 1
    items: list[str] = []
    while i < len(pattern) and pattern[i] != "]":
        c = pattern[i]
        if c == "[":
            raise UnsupportedRegex(f"{pattern!r}: nested character class (Java union)")
        if pattern.startswith("&&", i):
            raise UnsupportedRegex(f"{pattern!r}: character class intersection &&")
        if c == "\\":
            e = pattern[i + 1]
            if e in "pP" and pattern.startswith("{", i + 2):
                end = pattern.index("}", i + 2)
                name = pattern[i + 3:end].removeprefix("Is")
                if e == "P" or name not in _POSIX_CLASSES:
                    raise UnsupportedRegex(f"{pattern!r}: \\{e}{{{name}}} inside a class")
                items.append(_POSIX_CLASSES[name])
                i = end + 1
                continue
            if e in "hH":
                if e == "H":
                    raise UnsupportedRegex(f"{pattern!r}: \\H inside a class")
                items.append(_HORIZONTAL_SPACE)
            elif e == "e":
                items.append("\\x1B")
            else:
                items.append("\\" + e)
            i += 2
            continue
        if i + 2 < len(pattern) and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            lo, hi = c, pattern[i + 2]
            items.append(f"{lo}-{hi}")
            if fold and lo.isalpha() and hi.isalpha() and lo.islower() == hi.islower():
                other = (lo.upper(), hi.upper()) if lo.islower() else (lo.lower(), hi.lower())
                items.append(f"{other[0]}-{other[1]}")
            i += 3
            continue
        items.append(c)
        if fold and c.isalpha() and c.lower() != c.upper():
            items.append(c.swapcase())
        i += 1
    if i >= len(pattern):
        raise UnsupportedRegex(f"{pattern!r}: unterminated character class")
    return i + 1, "".join(out) + "".join(items) + "]"


def exception_regex(cls: str) -> str:
    """Where an exception class shows in a log: its full name anywhere, or its simple name as an exception line
    (``RocksDBException: …``, ``Caused by: RocksDBException``), never inside another identifier."""
    simple = cls.rsplit(".", 1)[-1]
    return rf"(?<![\w$.])(?:{re.escape(cls)}(?![\w$])|{re.escape(simple)}(?=:|\s*$))"


def pattern_message(kind: str, value: str, wording=None) -> str:
    """What a reader is told matched, in words rather than regex syntax."""
    if kind == "wording":
        return f"Flink's own message for this failure ({wording.source}; Flink {wording.versions})"
    if kind == "exception":
        return f"the exception class {value}"
    if kind == "frame":
        return f"a stack frame this runbook reads ({signature_text(value)})"
    return f"a message this runbook looks for: \u201c{signature_text(value)}\u201d"


def browser_signatures(runbooks: Sequence[Runbook]) -> dict:
    """What the stack-trace page matches: each runbook's wordings (Flink's own messages, as ``diagnose`` recognises
    them), signatures, frames and exception classes as JS regexes, each with the words a reader is shown.

    A pattern's weight is its kind's weight shared out among the runbooks that declare the same pattern, so a line
    every checkpoint runbook looks at counts little and a runbook's own wording counts fully. ``layer`` is the
    detector's (a root cause before a wrapper before an umbrella outcome), as the primary finding of ``diagnose``.
    """
    declared: list[tuple[Runbook, str, str, object]] = []
    for rb in runbooks:
        d = rb.detector
        declared += [(rb, "wording", w.pattern, w) for w in d.wordings]
        declared += [(rb, "signature", s, None) for s in dict.fromkeys(d.signatures)]
        declared += [(rb, "frame", s, None) for s in dict.fromkeys(d.frames)]
        declared += [(rb, "exception", c, None) for c in dict.fromkeys(d.exception_classes)]
    sharing: dict[tuple[str, str], int] = {}
    for _rb, kind, value, _w in declared:
        sharing[(kind, value)] = sharing.get((kind, value), 0) + 1
    entries: dict[str, dict] = {}
    for rb, kind, value, wording in declared:
        entry = entries.setdefault(rb.slug, {"slug": rb.slug, "title": rb.title, "url": rb.page,
                                             "category": rb.category, "versions": rb.detector.versions,
                                             "layer": rb.detector.layer, "patterns": []})
        python = exception_regex(value) if kind == "exception" else value
        try:
            js, flags = to_js_regex(python)
        except UnsupportedRegex as exc:
            raise UnsupportedRegex(f"{rb.slug}: {kind} {exc} cannot run in the browser") from None
        entry["patterns"].append({
            "kind": kind,
            "source": value,
            "message": pattern_message(kind, value, wording),
            "python": python,
            "js": js,
            "flags": flags,
            "shared_by": sharing[(kind, value)],
            "weight": round(PATTERN_WEIGHT[kind] / sharing[(kind, value)], 4),
        })
    fallback = entries.pop(UNRECOGNISED, None)
    return {"format": 2, "frame_line": r"^\s*(?:at |\.\.\. \d+ (?:more|common frames omitted)|File \".*\", line \d+)",
            "runbooks": list(entries.values()),
            "unrecognised": {"title": fallback["title"], "url": fallback["url"]} if fallback else None}


_CHAR_CLASS = re.compile(r"\[(\^?)((?:\\.|[^\]\\])*)\]")


def signature_text(signature: str) -> str:
    """The words of a signature without its regex syntax, for full-text search (``[Ww]hile link file to`` →
    ``While link file to``)."""
    def char_class(m: re.Match[str]) -> str:
        inner = m.group(2)
        return inner[0] if not m.group(1) and inner.isalpha() and len(set(inner.lower())) == 1 else " "

    text = _CHAR_CLASS.sub(char_class, signature)
    text = re.sub(r"\\[A-Za-z]", " ", text)
    text = re.sub(r"\\(.)", r"\1", text)
    text = re.sub(r"\(\?(?:<?[=!]|:)?|[\^$*+?(){}|]", " ", text)
    return " ".join(text.split())
