"""Assemble multi-line log records from the lines that survived Spark's pre-filter.

The Spark worker sees every line of a file block in order, but only the *kept* lines reach the assembler as text;
for the others it only learns whether a record header went by. That is enough to know where each record starts, so a
``Caused by:`` is never attached to a record it does not belong to, while the bulk of the lines (stack frames, chatty
INFO lines) never becomes a Python string.

This module is pure Python: the Spark job calls :class:`RecordAssembler` inside ``mapInArrow`` and the tests call it
directly on inline samples.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import html

from flink_runbooks.vocabulary.wordings import qualify
from flink_runbooks.parse.layouts import (SHORTEST_WRAPPED, WRAP_MIN, WRAP_WIDTHS, docker_json_line, parse_header,
                                          strip_prefix)
from flink_runbooks.parse.layouts import is_header as is_header_line

MAX_CHAIN = 40
MAX_FRAMES = 40
MAX_BODY = 400

_CAUSED = re.compile(r"^(Caused by|Suppressed):\s*(.*)$")
_MORE = re.compile(r"^\.\.\. \d+ (?:more|common frames omitted)")
# Hadoop's RemoteException names the remote class in brackets: RemoteException(java.io.IOException): msg
_EXC = re.compile(r"^((?:[a-zA-Z_$][\w$]*\.)+(?:[A-Z][\w$]*)?(?:Exception|Error|Throwable|Failure)\b[\w$]*)(?:\([\w$.]+\))?(?::\s?(.*))?$")
# A class without its package, as people paste it: "RemoteTransportException: ...", "OutOfMemoryError:Metaspace".
_SIMPLE_EXC = re.compile(r"^([A-Z][\w$]*(?:Exception|Error|Throwable))(?:\s?:\s?(.*)|\[(.*)\])?$")
_UNCAUGHT = re.compile(r'^Exception in thread "[^"]*" ')  # the JVM's report of an uncaught exception
# Escaped line breaks of a trace pasted from JSON ("...\n\tat ...") or a string literal.
_ESCAPED_TRACE = re.compile(r"\\n(?:\\t|\s)*(?:at |Caused by:|Suppressed:|\.\.\. \d+ more)")
_HTML_ENTITY = re.compile(r"&(?:quot|lt|gt|amp|apos|#\d+|#x[0-9a-fA-F]+);")
MAX_MESSAGE = 8000
# Where a line of its own starts (a kernel, syslog or journal time stamp): never the rest of a wrapped one.
_LINE_START = re.compile(r"^(?:\[[^\]]{0,40}\d{2}:\d{2}:\d{2}[^\]]{0,20}\]|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}"
                         r"|\d{4}-\d{2}-\d{2}[ T]\d{2}:|\d{2}:\d{2}:\d{2}[.,]\d{3} )")
# A line that is only a qualified name: the first half of a class name a wrap cut in two.
_CUT_NAME = re.compile(r"^(?:[a-z_$][\w$]*\.){2,}[\w$]+$")
# What is left of a stack frame cut by a wrap: "java:753)", "(StreamTask.java:753) ~[flink-dist-1.20.3.jar:1.20.3]".
_FRAME_TAIL = re.compile(r"^[\w$.<>/()-]*(?:\.(?:java|scala|kt)(?::\d+)?|Native Method|Unknown Source|:\d+)\)(?:\s*~?\[[^\]]*\]?)?$|^~?\[[^\]]*\.jar[^\]]*\]$")
_WRAPPERS = ("org.apache.flink.util.SerializedThrowable",)
# A Python traceback inside a Java trace (PyFlink: the worker's error as the message of a Java exception, or logged
# by the worker itself): its frames and code lines are kept as the record's body lines, the exception that ends it as
# a link of kind "python" of the chain, so it neither starts a record of its own nor is read as a Java class.
PY_TRACEBACK = "Traceback (most recent call last):"
PY_FRAME = re.compile(r'^File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S.*)$')
_PY_EXCEPTION = re.compile(r"^(?P<cls>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?::\s?(?P<message>.*))?$")
_PY_MARKERS = re.compile(r"^[\s~^]+$")  # the markers Python 3.11 prints under the failing expression
PY_CODE_INDENT = "    "  # a code line of a traceback, as kept in the body (its frame's line is not indented)
# A whole stack frame printed without "at" (Task's "stuck in method:" dump): a module or class-loader prefix, a
# qualified class, a method and its place.
_BARE_FRAME = re.compile(r"^(?:[\w.-]+@[\w.-]+/|[\w.-]+//)?(?:[A-Za-z_$][\w$]*\.){2,}[\w$<>]+"
                         r"\((?:[\w$]+\.(?:java|scala|kt):\d+|Native Method|Unknown Source)\)$")


def first_word_did_not_fit(previous_length: int, line: str) -> bool:
    """Whether ``line`` looks wrapped from a shorter line before it: its first word would not have fitted on that
    line at any common wrap width (a tool wraps before a long id or path, leaving the line before it short).

    >>> first_word_did_not_fit(55, "7d2c9e4b1a3f5c6e8d0a2b4c6e8f0a1b_0a448493b4782967b150582570326227_3_0 of job")
    True
    >>> first_word_did_not_fit(55, "of job 7d2c9e4b1a3f5c6e8d0a2b4c6e8f0a1b")
    False
    """
    first = len(line.split(" ", 1)[0])
    return previous_length >= SHORTEST_WRAPPED and any(previous_length <= w < previous_length + 1 + first for w in WRAP_WIDTHS)


def parse_exception_line(text: str) -> tuple[str, str] | None:
    """``"java.io.IOException: Mkdirs failed"`` -> ``("java.io.IOException", "Mkdirs failed")``.

    Flink ships remote exceptions as ``SerializedThrowable: <original class>: <message>``; the wrapper is dropped
    so the chain shows the original class.

    >>> parse_exception_line("org.apache.flink.util.SerializedThrowable: java.io.IOException: Mkdirs failed to create file:/ckpt/chk-3")
    ('java.io.IOException', 'Mkdirs failed to create file:/ckpt/chk-3')
    >>> parse_exception_line("org.apache.kafka.common.errors.DisconnectException: null")
    ('org.apache.kafka.common.errors.DisconnectException', 'null')
    >>> parse_exception_line("Checkpoint 3 failed") is None
    True
    >>> parse_exception_line('"RemoteTransportException: Connection unexpectedly closed by remote task manager')[0]
    'org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException'
    >>> parse_exception_line("OutOfMemoryError:Metaspce. The metaspace out-of-memory error has occurred.")
    ('java.lang.OutOfMemoryError', 'Metaspce. The metaspace out-of-memory error has occurred.')
    """
    text = _UNCAUGHT.sub("", unquote(text.strip()))
    m = _EXC.match(text)
    if not m:
        simple = _SIMPLE_EXC.match(text)
        if not simple:
            return None
        return qualify(simple.group(1)), (simple.group(2) or simple.group(3) or "").strip()
    cls, msg = m.group(1), (m.group(2) or "").strip()
    while cls in _WRAPPERS and msg:
        inner = _EXC.match(msg)
        if not inner:
            break
        cls, msg = inner.group(1), (inner.group(2) or "").strip()
    return cls, msg


def unquote(text: str) -> str:
    """A line pasted inside quotes (``"...``, ``'...'``, a mail quote ``> ``) without them."""
    text = re.sub(r"^(?:>\s?)+", "", text)
    if text[:1] in ("\"", "'", "`") and text[1:2] not in ("", " "):
        text = text[1:]
        if text[-1:] in ("\"", "'", "`"):
            text = text[:-1]
    return text


def expand_escaped(text: str) -> list[str]:
    r"""One pasted line that holds a whole trace, JSON- or HTML-escaped, as the lines it stands for.

    >>> expand_escaped('"java.lang.IllegalStateException: boom\\n\\tat com.acme.A.b(A.java:1)\\nCaused by: java.io.IOException: x"')
    ['java.lang.IllegalStateException: boom', '\tat com.acme.A.b(A.java:1)', 'Caused by: java.io.IOException: x']
    >>> expand_escaped("Caused by: java.lang.IllegalStateException: &quot;sku&quot; is null&lt;br&gt;")
    ['Caused by: java.lang.IllegalStateException: "sku" is null']
    """
    if _HTML_ENTITY.search(text):
        text = html.unescape(text)
        text = re.sub(r"<br\s*/?>", "\n", text)
        text = re.sub(r"</?(?:p|div|span|pre|code|td|tr|font)[^>]*>", "", text)
    if _ESCAPED_TRACE.search(text):
        text = text.strip().strip('",')
        text = text.replace("\\r\\n", "\n").replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"').replace("\\\\", "\\")
    return [part for part in text.split("\n") if part.strip()] if "\n" in text else [text]


@dataclass
class RawRecord:
    """A record as assembled on a worker (plain types only, so it can cross into Arrow)."""

    line_index: int  # 0-based line within the file block
    ts: str | None = None
    level: str | None = None
    logger: str | None = None
    thread: str | None = None
    message: str = ""
    layout: str | None = None
    chain: list[dict] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    truncated: bool = False
    # Further records the same line held (a JSON record whose stack trace field holds two traces one after the
    # other): emitted right after this one.
    followers: list["RawRecord"] = field(default_factory=list)

    def add_exception(self, cls: str, message: str, kind: str) -> None:
        if len(self.chain) < MAX_CHAIN:
            self.chain.append({"cls": cls, "message": message, "kind": kind})

    def append_text(self, text: str) -> None:
        """A kept line that continues the previous one (a wrapped message)."""
        if self.chain:
            last = self.chain[-1]
            last["message"] = (last["message"] + " " + text).strip()[:MAX_MESSAGE]
        elif len(self.body) < MAX_BODY:
            self.body.append(text)


_CONFIG_ENTRY = re.compile(r"^[a-z][\w.-]*\s?=")


class RecordAssembler:
    """Feed lines in file order; completed records come out of :meth:`feed` and :meth:`close`."""

    def __init__(self) -> None:
        self.current: RawRecord | None = None
        # The previous kept line: its index, what it added (header, exception, frame) and its length, so a line
        # that a ticket or chat tool wrapped onto the next one is joined back.
        self._last: tuple[int, str, int] | None = None
        self._cut_text: str | None = None  # the text of a record start cut after its level
        self._text: str | None = None  # a line that may be the first half of a cut class name
        self._text_kind = "top"
        self._cut_token = self._prev_cut_token = False
        self._tail = ""  # the last word of the previous kept line (where a wrap may have cut a long token)
        self._widest = 0  # the longest kept line so far: a wrap cuts inside a token only at the width
        self._python = False  # inside a Python traceback: its frames and code lines, up to its exception

    def feed(self, index: int, is_header: bool, text: str | None) -> RawRecord | None:
        if text is not None and text.startswith('{"log"'):
            # A container runtime's JSON record wraps one line of the process's output: judge that line.
            inner = docker_json_line(text)
            if inner is not None and "\n" not in inner:  # several lines (a shipper joined a trace) are read as JSON
                text, is_header = inner, is_header_line(inner)
        if is_header:
            done = self._flush()
            self._python = text is not None and text.rstrip().endswith(PY_TRACEBACK)
            if text is not None:
                self.current = self._start(index, text)
                if self._python:
                    self._add_body(self.current, PY_TRACEBACK)
                self._last = (index, "header", len(text.rstrip()))
                self._tail = text.rstrip().rsplit(" ", 1)[-1]
                self._widest = max(self._widest, len(text.rstrip()))
                self._cut_text = strip_prefix(text).strip() if self.current.layout in ("unknown", "cut") else None
            else:
                self._last = None
            return done
        if text is None:
            return None
        pieces = expand_escaped(text) if ("\\n" in text or "&" in text) else [text]
        if len(pieces) == 1:
            return self._python_line(index, pieces[0], len(text.rstrip()))
        done = None
        for piece in pieces:  # one pasted line holding a whole trace: its records never split mid-line
            out = self._python_line(index, piece, 0)
            done = done or out
            if out is not None and out is not done:
                self.current.chain[:0] = out.chain  # pragma: no cover - two traces in one escaped line
        return done

    def _python_line(self, index: int, text: str, length: int) -> RawRecord | None:
        """A line of a Python traceback into the current record (see :data:`PY_TRACEBACK`); any other line as usual."""
        unprefixed = strip_prefix(text)
        line = unprefixed.strip()
        if self._python and line:
            indented = unprefixed[:1].isspace()
            rec = self.current or self._orphan(index)
            self.current = rec
            if PY_FRAME.match(line):
                self._add_body(rec, line)
                self._last = (index, "python", length)
                return None
            if indented and self._last and self._last[1] == "python":
                if not _PY_MARKERS.match(line):
                    self._add_body(rec, PY_CODE_INDENT + line)
                self._last = (index, "python", length)
                return None
            self._python = False
            exception = _PY_EXCEPTION.match(line)
            if not indented and exception and any(PY_FRAME.match(b) for b in rec.body[-MAX_BODY:]):
                rec.add_exception(exception["cls"], (exception["message"] or "").strip(), "python")
                self._last = None
                return None
        done = self._line(index, text, length)
        if line.endswith(PY_TRACEBACK) and self.current is not None:
            self._python = True
            self._add_body(self.current, PY_TRACEBACK)  # where each traceback starts, when a record holds several
        return done

    @staticmethod
    def _add_body(rec: RawRecord, line: str) -> None:
        if len(rec.body) < MAX_BODY:
            rec.body.append(line)

    def _line(self, index: int, text: str, length: int) -> RawRecord | None:
        if text[:1] in ("\t", " ") and (frame := text.strip()).startswith("at "):
            # An indented frame, most of what a kept stack trace is: no prefix starts with a blank and a wrapping tool
            # does not indent, so it is a frame of the current record and nothing else (the steps below agree).
            self._last, self._tail = None, frame.rsplit(" ", 1)[-1]
            self._widest = max(self._widest, length)
            self._cut_token, self._prev_cut_token = False, self._cut_token
            if self.current and len(self.current.frames) < MAX_FRAMES:
                self.current.frames.append(frame)
                self._last = (index, "frame", length)
            return None
        unprefixed = strip_prefix(text)
        line = unprefixed.strip()
        if not line:
            return None
        last, self._last = self._last, None
        tail, self._tail = self._tail, line.rsplit(" ", 1)[-1]
        widest, self._widest = self._widest, max(self._widest, length)
        # A line that is one long token was cut inside that token (a path, a class name): join without a space.
        self._cut_token, self._prev_cut_token = (" " not in line and length in WRAP_WIDTHS and length >= widest,
                                                 self._cut_token)
        # Flink indents its own continuation lines (frames, config dumps); a wrapping tool does not.
        cut_header = (bool(last) and last[1] == "header" and self.current is not None
                      and self.current.layout in ("unknown", "cut"))
        wrapped = (bool(last) and last[0] == index - 1
                   and (last[2] >= WRAP_MIN or cut_header
                        # a new exception is not the rest of the line before, unless that line ends where its
                        # message should start ("...SerializedThrowable:" / "org.apache...CheckpointException: ...")
                        or (first_word_did_not_fit(last[2], line) and (tail.endswith(":") or not parse_exception_line(line))))
                   and not unprefixed[:1].isspace() and not _LINE_START.match(line))
        caused = _CAUSED.match(line)
        if caused and _CUT_NAME.match(caused.group(2)) and not parse_exception_line(caused.group(2)):
            self._text, self._text_kind = caused.group(2), "caused_by" if caused.group(1) == "Caused by" else "suppressed"
            self._last = (index, "text", length)
            self.current = self.current or self._orphan(index)
            return None
        if caused:
            rec = self.current or self._orphan(index)
            parsed = parse_exception_line(caused.group(2))
            kind = "caused_by" if caused.group(1) == "Caused by" else "suppressed"
            if parsed:
                rec.add_exception(parsed[0], parsed[1], kind)
            else:
                rec.add_exception(caused.group(2).split(":", 1)[0].strip(), "", kind)
            self._last = (index, "exception", length)
            return self._swap(rec)
        if wrapped and last[1] == "text" and self._text is not None and text.strip() != line:
            # The rest of a class name cut in two, read before any prefix is stripped: "heckedExecutionException: "
            # is not a prefix but the end of the name on the line before.
            joined = parse_exception_line(self._text + text.strip())
            if joined:
                self._last = (index, "exception", length)
                return self._exception(index, joined, self._text_kind)
        if _MORE.match(line):
            if self.current:
                self.current.truncated = True
            return None
        if line.startswith("at "):
            if self.current and len(self.current.frames) < MAX_FRAMES:
                self.current.frames.append(line)
                self._last = (index, "frame", length)
            return None
        if self.current and _BARE_FRAME.match(line):
            # A thread's stack as Flink prints it for a task stuck while cancelled: frames without "at", each on its
            # own line (read as frames, not as the wrapped rest of the line before).
            if len(self.current.frames) < MAX_FRAMES:
                self.current.frames.append("at " + line)
            self._last = (index, "frame", length)
            return None
        if wrapped and self.current and self._join(last, line, tail, widest):
            self._last = (index, last[1], length)
            return None
        if _FRAME_TAIL.match(line):
            return None  # the rest of a wrapped frame whose start was not kept
        parsed = parse_exception_line(line)
        if parsed:
            self._last = (index, "exception", length)
            return self._exception(index, parsed, "top")
        if wrapped and last[1] == "text" and self._text is not None:
            # A class name cut in two by a wrap ("...NotReadyExcepti" / "on: Task ... was not running").
            joined = parse_exception_line(self._text + line)
            if joined:
                self._last = (index, "exception", length)
                return self._exception(index, joined, self._text_kind)
        if _CUT_NAME.match(line):
            self._text, self._text_kind = line, "top"
            self._last = (index, "text", length)
            return None
        done = None
        if (self.current is not None and self.current.layout == "excerpt" and last
                and (last[1] == "frame"
                     or (last[1] == "header" and not self.current.chain and not unprefixed[:1].isspace()))
                and not _CONFIG_ENTRY.match(line)):
            # In a pasted excerpt a message after a stack trace, or after another message it does not continue (an
            # indented line does), is the next record's ("Job ... switched from RUNNING to FAILED." between traces).
            done = self._flush()
        rec = self.current or self._orphan(index)
        self.current = rec
        if rec.layout == "excerpt" and not rec.message and not rec.chain and not rec.body and not _CONFIG_ENTRY.match(line):
            # The first line of a record pasted without its header columns is its message.
            rec.message = line[:MAX_MESSAGE]
            self._last = (index, "header", length)
        elif _CONFIG_ENTRY.match(line) or not rec.chain:
            if len(rec.body) < MAX_BODY:
                rec.body.append(line)
                self._last = (index, "body", length)
        else:
            rec.append_text(line)
        return done

    def _exception(self, index: int, parsed: tuple[str, str], kind: str) -> RawRecord | None:
        self._text = None
        done = None
        if self.current is None or (kind == "top" and any(c["kind"] == "top" for c in self.current.chain)):
            # A second top-level exception starts a new record (bare stack traces pasted back to back).
            done = self._flush()
            self.current = self._orphan(index)
        self.current.add_exception(parsed[0], parsed[1], kind)
        return done

    def _join(self, last: tuple[int, str, int], line: str, tail: str = "", widest: int = 0) -> bool:
        """Join ``line`` to what the previous (long) line added, as the tool that wrapped it had cut it."""
        rec, kind = self.current, last[1]
        # A long token (a path, an id) that a wrap cut at exactly the width goes on without a space: only a token
        # longer than the line it was cut from is cut inside ("... of job" / "1b7e3a..." was cut at a space), and
        # only at the wrap width (no kept line so far was longer).
        first = len(line.split(" ", 1)[0])
        sep = "" if self._prev_cut_token or (last[2] in WRAP_WIDTHS and last[2] >= widest and first >= 25
                                             and len(tail) + first > last[2]) else " "
        if kind == "frame" and rec.frames and rec.frames[-1].endswith((")", "]")) and not line.startswith(("~[", "[")):
            return False  # a complete frame: what follows is not its rest
        if kind == "frame" and rec.frames:
            # A frame has no space before its closing parenthesis: the cut fell inside a name.
            rec.frames[-1] = rec.frames[-1] + ("" if ")" not in rec.frames[-1] else " ") + line
        elif kind == "exception" and rec.chain:
            last_link = rec.chain[-1]
            last_link["message"] = (last_link["message"] + sep + line).strip()[:MAX_MESSAGE]
            if last_link["cls"] in _WRAPPERS:  # "SerializedThrowable:" / "<original class>: ..." on the next line
                unwrapped = parse_exception_line(f"{last_link['cls']}: {last_link['message']}")
                if unwrapped:
                    last_link["cls"], last_link["message"] = unwrapped
        elif kind == "body" and rec.body and not parse_exception_line(line):
            rec.body[-1] = (rec.body[-1] + sep + line)[:MAX_MESSAGE]
        elif kind == "header" and rec.layout in ("unknown", "cut") and not rec.chain and not rec.body and not parse_exception_line(line):
            # A record start cut after its level or logger: read it again with its rest.
            start = self._cut_text or rec.message
            header = parse_header(start + " " + line)
            if header is None:
                rec.message = (rec.message + " " + line)[:MAX_MESSAGE]
            else:
                rec.ts, rec.level, rec.logger, rec.thread = header.ts, header.level, header.logger, header.thread
                rec.message, rec.layout = header.message, header.layout
        elif (kind == "header" and not rec.chain and not rec.body and not parse_exception_line(line)
              and not _CUT_NAME.match(line) and not self._next_message(rec, last, line)):
            rec.message = (rec.message + sep + line)[:MAX_MESSAGE]
        else:
            return False
        return True

    @staticmethod
    def _next_message(rec: RawRecord, last: tuple[int, str, int], line: str) -> bool:
        """In a pasted excerpt, a line after a finished sentence is the next message, unless its first word could
        not have fitted on the line before (a tool wrapped it there)."""
        return (rec.layout == "excerpt" and rec.message.endswith(".") and line[:1].isupper()
                and not first_word_did_not_fit(last[2], line))

    def close(self) -> RawRecord | None:
        return self._flush()

    def _swap(self, rec: RawRecord) -> None:
        self.current = rec
        return None

    def _flush(self) -> RawRecord | None:
        done, self.current = self.current, None
        return done

    @staticmethod
    def _orphan(index: int) -> RawRecord:
        """A record whose header was not kept (or that never had one: a pasted stack trace)."""
        return RawRecord(line_index=index, layout="excerpt")

    @staticmethod
    def _start(index: int, text: str) -> RawRecord:
        header = parse_header(text)
        if header is None:
            return RawRecord(line_index=index, message=text.strip(), layout="unknown")
        rec = RawRecord(index, header.ts, header.level, header.logger, header.thread, header.message, header.layout)
        if header.exception_text:
            # The field is read as a paste: its own message lines and traces, one record each.
            sub = RecordAssembler()
            sub.current, rec.layout = rec, "excerpt"
            done = [sub.feed(index, False, line) for line in header.exception_text.splitlines()] + [sub.close()]
            rec.layout = header.layout
            for other in done:
                if other is not None and other is not rec:
                    other.ts, other.level, other.logger, other.thread = rec.ts, rec.level, rec.logger, rec.thread
                    other.layout = header.layout
                    rec.followers.append(other)
        return rec


def assemble(lines: list[str], is_header=None, keep=None) -> list[RawRecord]:
    """Assemble records from a list of lines (tests and small excerpts); every line is kept unless ``keep`` says no."""
    from flink_runbooks.parse.layouts import is_header as _is_header

    out = []
    asm = RecordAssembler()
    for i, line in enumerate(lines):
        hdr = is_header(line) if is_header else _is_header(line)
        kept = keep(line) if keep else True
        done = asm.feed(i, hdr, line if kept else None)
        if done:
            out += [done, *done.followers]
    last = asm.close()
    if last:
        out += [last, *last.followers]
    return out
