"""Which lines match any of several hundred signatures, in one pass over the bytes.

The detectors declare about three hundred line signatures. As one RE2 alternation they exceed RE2's DFA memory and
RE2 falls back to its slow engine (about 80 µs per line, 57 s for 20 MB). Hyperscan compiles them into one automaton
and scans a whole block at hundreds of megabytes per second; only the end of each match comes back to Python, and a
binary search over the line ends turns it into a line number.

The lines of a block are scanned as one buffer, joined with line feeds, in multi-line mode: ``^`` and ``$`` match at
line boundaries. Classes that could match a line feed are rewritten so no match runs from one line into the next.
Without Hyperscan (a platform without its wheel) the signatures are evaluated in RE2 groups small enough for its
DFA: slower, the same lines.
"""
from __future__ import annotations

import functools
import threading
from typing import Sequence

# Signatures per RE2 alternation when Hyperscan is missing: small enough to stay within RE2's DFA memory.
_RE2_GROUP = 12
_WHITESPACE_NO_NEWLINE = r"\t\x0b\x0c\r "


def single_line(pattern: str) -> str:
    """``pattern`` (RE2 syntax) rewritten so it cannot match across a line feed: ``\\s`` and negated classes leave
    the line feed out, ``\\W`` and ``\\D`` become classes without it.

    >>> single_line(r"a\\s+[^)]*\\W")
    'a[\\\\t\\\\x0b\\\\x0c\\\\r ]+[^\\\\n)]*[^\\\\w\\\\n]'
    """
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            pair = pattern[i:i + 2]
            if pair == r"\s":
                out.append(_WHITESPACE_NO_NEWLINE if in_class else f"[{_WHITESPACE_NO_NEWLINE}]")
            elif pair in (r"\W", r"\D") and not in_class:
                out.append(f"[^\\{pair[1].lower()}\\n]")
            else:
                out.append(pair)
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            if pattern.startswith("[^", i):
                out.append("[^\\n")
                i += 2
                continue
            out.append(c)
            # a ']' right after '[' or '[^' is a literal
            if pattern.startswith("]", i + 1):
                out.append("]")
                i += 1
        elif c == "]" and in_class:
            in_class = False
            out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


class SignatureMatcher:
    """``lines(texts)``: a boolean per line of an Arrow string array, true where any signature matches."""

    def __init__(self, signatures: Sequence[str]) -> None:
        from flink_runbooks.parse.layouts import re2

        self.signatures = tuple(re2(s) for s in signatures)
        self._lock = threading.Lock()  # a Hyperscan scratch space serves one scan at a time
        self._database = None
        try:
            import hyperscan
        except ImportError:
            hyperscan = None
        if hyperscan is not None and self.signatures:
            self._database = _compiled(hyperscan, [single_line(s) for s in self.signatures])
        self._groups = ["|".join(f"(?:{s})" for s in self.signatures[i:i + _RE2_GROUP])
                        for i in range(0, len(self.signatures), _RE2_GROUP)]

    @property
    def engine(self) -> str:
        return "hyperscan" if self._database is not None else "re2"

    def lines(self, texts):
        import numpy as np

        n = len(texts)
        if n == 0 or not self.signatures:
            return np.zeros(n, dtype=bool)
        if self._database is None:
            return self._lines_re2(texts)
        import pyarrow as pa
        import pyarrow.compute as pc

        texts = texts.fill_null("")
        # line i ends (its line feed) at ends[i] in the joined buffer
        ends = np.cumsum(pc.binary_length(texts).to_numpy(zero_copy_only=False).astype(np.int64) + 1) - 1
        joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), texts), "\n")[0].as_buffer()
        match_ends: list[int] = []

        def on_match(_id, _start, end, _flags, _context):
            match_ends.append(end)

        with self._lock:
            self._database.scan(memoryview(joined) if joined is not None else b"", match_event_handler=on_match)
        keep = np.zeros(n, dtype=bool)
        if match_ends:
            # the last character of a match is at end - 1; an empty match at a line start counts for that line
            at = np.asarray(match_ends, dtype=np.int64) - 1
            keep[np.minimum(np.searchsorted(ends, np.maximum(at, 0), side="left"), n - 1)] = True
        return keep

    def _lines_re2(self, texts):
        import numpy as np
        import pyarrow.compute as pc

        keep = np.zeros(len(texts), dtype=bool)
        for group in self._groups:
            keep |= pc.match_substring_regex(texts, group).fill_null(False).to_numpy(zero_copy_only=False)
        return keep


def _flags(hyperscan) -> int:
    """Multi-line, and leftmost start of match: without it Hyperscan (0.9.1's 5.4) loses matches of some sets of
    patterns, e.g. ``^\s+\(none\)\s*$`` beside ``^\s*(?:transactional\.id|...) = `` on a line after one of 20
    characters or more; computing the start costs about a third more scan time on this part of the pass."""
    return hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_SOM_LEFTMOST


def _compiled(hyperscan, expressions: list[str]):
    """The Hyperscan database for ``expressions``: compiling takes about half a second, which a pasted stack trace
    would pay at every run, so the compiled form is kept in the user's cache directory (rebuilt when missing,
    unreadable or made by another version of the signatures or of Hyperscan)."""
    import hashlib
    import os
    import pathlib
    import tempfile

    key = hashlib.sha256("\n".join([getattr(hyperscan, "__version__", ""), str(_flags(hyperscan))] + expressions)
                         .encode()).hexdigest()[:32]
    cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "flink-runbooks"
    path = cache / f"signatures-{key}.hsdb"
    try:
        database = hyperscan.loadb(path.read_bytes(), hyperscan.HS_MODE_BLOCK)
        database.scratch = hyperscan.Scratch(database)  # a loaded database comes without one
        return database
    except Exception:  # missing, truncated or from another build: compile it again
        pass
    database = hyperscan.Database()
    database.compile(expressions=[e.encode() for e in expressions], ids=list(range(len(expressions))),
                     flags=[_flags(hyperscan)] * len(expressions))
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache, delete=False) as fh:
            fh.write(hyperscan.dumpb(database))
        os.replace(fh.name, path)  # whole or not at all, whatever runs at the same time
    except OSError:  # a read-only home: compile at every run
        pass
    return database


@functools.lru_cache(maxsize=8)
def signature_matcher(signatures: tuple[str, ...]) -> SignatureMatcher:
    """One compiled matcher per set of signatures and process (compiling takes about half a second)."""
    return SignatureMatcher(signatures)
