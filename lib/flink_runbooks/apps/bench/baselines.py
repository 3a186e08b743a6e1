"""What the Spark pipeline is compared with: ``grep -E`` for the same signatures over the same bytes, and a plain
single-process Python reader that extracts the same records."""
from __future__ import annotations

import gzip
import string
import pathlib
import re
import subprocess
import tempfile
import time
from typing import Sequence

from flink_runbooks.parse import layouts
from flink_runbooks.collect.scan import line_patterns
from flink_runbooks.detectors import prefilter
from flink_runbooks.parse.records import RecordAssembler

_CLASS_ESCAPES = {"d": "0-9", "w": "[:alnum:]_", "s": "[:space:]"}
_ERE_SPECIAL = set(".()[]{}*+?|^$\\")
_ESCAPES = {"d": "[0-9]", "w": "[[:alnum:]_]", "s": "[[:space:]]", "S": "[^[:space:]]", "W": "[^[:alnum:]_]"}


def to_ere(pattern: str) -> str:
    """A pattern in the Java/Python/RE2 subset, rewritten for POSIX ERE (GNU grep -E).

    >>> print(to_ere(r'(?:Consumer|Producer)Config \\d+ [^\\]"]+ \\"x\\"'))
    (Consumer|Producer)Config [0-9]+ [^]"]+ "x"
    >>> print(to_ere(r'at [^\\Wabc]'))
    at [defghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_]
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("(?:", i):
            out.append("(")
            i += 3
        elif c == "[":
            i, text = _bracket(pattern, i)
            out.append(text)
        elif c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
            elif nxt == "b" or nxt in _ERE_SPECIAL:
                out.append("\\" + nxt)
            else:  # \" \- \/ ...: plain characters, which GNU grep warns about when escaped
                out.append(nxt)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _bracket(pattern: str, start: int) -> tuple[int, str]:
    """Translate one character class: escapes become POSIX classes or literals, ``]`` goes first, ``-`` last."""
    i = start + 1
    negate = pattern[i:i + 1] == "^"
    i += negate
    if negate and pattern.startswith("\\W", i):
        # [^\Wabc]: a word character other than a, b, c. ERE has no class difference: spell out what is left.
        end = pattern.index("]", i)
        excluded = set(pattern[i + 2:end])
        left = [c for c in string.ascii_letters + string.digits + "_" if c not in excluded]
        return end + 1, "[" + "".join(left) + "]"
    items: list[str] = []
    close = dash = False
    while pattern[i] != "]":
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1]
            if nxt == "]":
                close = True
            elif nxt == "-":
                dash = True
            else:
                items.append(_CLASS_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        if c == "-" and (pattern[i + 1] == "]" or not items):
            dash = True
        else:
            items.append(c)
        i += 1
    return i + 1, "[" + ("^" if negate else "") + ("]" if close else "") + "".join(items) + ("-" if dash else "") + "]"


def grep_patterns() -> list[str]:
    """The pre-filter of the pipeline as grep patterns: every kept-line pattern and WARN-or-worse."""
    patterns = line_patterns(prefilter())
    return [to_ere(patterns["kept"]), to_ere(patterns["warn"])]


def run_grep(files: Sequence[pathlib.Path]) -> tuple[float, int]:
    """``grep -E -c`` over every file (``zcat | grep`` for gzip); returns (seconds, matching lines)."""
    with tempfile.NamedTemporaryFile("w", suffix=".patterns", delete=False) as fh:
        fh.write("\n".join(grep_patterns()) + "\n")
        pattern_file = fh.name
    env = {"LC_ALL": "C", "PATH": "/usr/bin:/bin"}
    plain = [str(f) for f in files if not str(f).endswith(".gz")]
    packed = [str(f) for f in files if str(f).endswith(".gz")]
    started = time.perf_counter()
    matches = 0
    if plain:
        done = subprocess.run(["grep", "-E", "-c", "-h", "-f", pattern_file, *plain], capture_output=True, text=True,
                              env=env)
        if done.returncode > 1:
            raise RuntimeError(f"grep failed: {done.stderr.strip()}")
        matches += sum(int(n) for n in done.stdout.split())
    for f in packed:
        done = subprocess.run(f"zcat {f!r} | grep -E -c -f {pattern_file!r}", shell=True, capture_output=True,
                              text=True, env=env)
        matches += int(done.stdout.strip() or 0)
    seconds = time.perf_counter() - started
    pathlib.Path(pattern_file).unlink()
    return seconds, matches


def python_reader(files: Sequence[pathlib.Path]) -> tuple[float, int]:
    """Single process, line by line, Python's ``re``: the same decisions and the same record assembly as the Spark
    workers. Returns (seconds, records)."""
    patterns = line_patterns(prefilter())
    header = re.compile(layouts.HEADER_JAVA)
    warn = re.compile(patterns["warn"])
    kept = re.compile(patterns["kept"])
    started = time.perf_counter()
    records = 0
    for path in files:
        opener = gzip.open if str(path).endswith(".gz") else open
        assembler = RecordAssembler()
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            for index, line in enumerate(fh):
                line = line.rstrip("\n")
                is_header = header.match(line) is not None
                keep = (is_header and warn.search(line[:160]) is not None) or kept.search(line) is not None
                if assembler.feed(index, is_header, line if keep else None) is not None:
                    records += 1
        if assembler.close() is not None:
            records += 1
    return time.perf_counter() - started, records
