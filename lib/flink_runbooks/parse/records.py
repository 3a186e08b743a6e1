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

from flink_runbooks.parse.layouts import parse_header, strip_prefix

MAX_CHAIN = 40
MAX_FRAMES = 40
MAX_BODY = 400

_CAUSED = re.compile(r"^(Caused by|Suppressed):\s*(.*)$")
_MORE = re.compile(r"^\.\.\. \d+ (?:more|common frames omitted)")
# Hadoop's RemoteException names the remote class in brackets: RemoteException(java.io.IOException): msg
_EXC = re.compile(r"^((?:[a-zA-Z_$][\w$]*\.)+(?:[A-Z][\w$]*)?(?:Exception|Error|Throwable|Failure)\b[\w$]*)(?:\([\w$.]+\))?(?::\s?(.*))?$")
_UNCAUGHT = re.compile(r'^Exception in thread "[^"]*" ')  # the JVM's report of an uncaught exception
_WRAPPERS = ("org.apache.flink.util.SerializedThrowable",)


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
    """
    m = _EXC.match(_UNCAUGHT.sub("", text.strip()))
    if not m:
        return None
    cls, msg = m.group(1), (m.group(2) or "").strip()
    while cls in _WRAPPERS and msg:
        inner = _EXC.match(msg)
        if not inner:
            break
        cls, msg = inner.group(1), (inner.group(2) or "").strip()
    return cls, msg


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

    def add_exception(self, cls: str, message: str, kind: str) -> None:
        if len(self.chain) < MAX_CHAIN:
            self.chain.append({"cls": cls, "message": message, "kind": kind})

    def append_text(self, text: str) -> None:
        """A kept line that continues the previous one (a wrapped message)."""
        if self.chain:
            last = self.chain[-1]
            last["message"] = (last["message"] + " " + text).strip()
        elif len(self.body) < MAX_BODY:
            self.body.append(text)


class RecordAssembler:
    """Feed lines in file order; completed records come out of :meth:`feed` and :meth:`close`."""

    def __init__(self) -> None:
        self.current: RawRecord | None = None

    def feed(self, index: int, is_header: bool, text: str | None) -> RawRecord | None:
        if is_header:
            done = self._flush()
            if text is not None:
                self.current = self._start(index, text)
            return done
        if text is None:
            return None
        line = strip_prefix(text).strip()
        if not line:
            return None
        caused = _CAUSED.match(line)
        if caused:
            rec = self.current or self._orphan(index)
            parsed = parse_exception_line(caused.group(2))
            kind = "caused_by" if caused.group(1) == "Caused by" else "suppressed"
            if parsed:
                rec.add_exception(parsed[0], parsed[1], kind)
            else:
                rec.add_exception(caused.group(2).split(":", 1)[0].strip(), "", kind)
            return self._swap(rec)
        if _MORE.match(line):
            if self.current:
                self.current.truncated = True
            return None
        if line.startswith("at "):
            if self.current and len(self.current.frames) < MAX_FRAMES:
                self.current.frames.append(line)
            return None
        parsed = parse_exception_line(line)
        if parsed:
            done = None
            if self.current is None or any(c["kind"] == "top" for c in self.current.chain):
                # A second top-level exception starts a new record (bare stack traces pasted back to back).
                done = self._flush()
                self.current = self._orphan(index)
            self.current.add_exception(parsed[0], parsed[1], "top")
            return done
        rec = self.current or self._orphan(index)
        self.current = rec
        if re.match(r"^[a-z][\w.-]*\s?=", line) or not rec.chain:
            if len(rec.body) < MAX_BODY:
                rec.body.append(line)
        else:
            rec.append_text(line)
        return None

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
            sub = RecordAssembler()
            sub.current = rec
            for line in header.exception_text.splitlines():
                sub.feed(index, False, line)
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
            out.append(done)
    last = asm.close()
    if last:
        out.append(last)
    return out
