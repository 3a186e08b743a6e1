"""Text from an incident made safe for a terminal: control characters are shown as escapes, never sent.

A log line can carry escape sequences (a window title, a screen clear, a hyperlink that shows one address and opens
another) or bidirectional overrides that reorder what is displayed: printed as they are, they hide or spoof what the
engineer reads.
"""
from __future__ import annotations

import re

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
