"""Python failures of a PyFlink job, read from inside the Java traces that carry them.

PyFlink runs the job's Python functions in a worker beside the TaskManager, and a failure there reaches the logs as
Java text in two shapes:

- process mode (Beam's SDK harness): the worker's whole traceback is the message of a Java exception, ``Error received
  from SDK harness for instruction N: Traceback (most recent call last):`` followed by its ``File "...", line N, in f``
  frames, their code lines and the exception that ends it. The assembler keeps the frames and code lines as the
  record's body (one ``Traceback (most recent call last):`` line where each traceback starts) and the exception as a
  chain link of kind ``python`` (:mod:`flink_runbooks.parse.records`);
- thread mode (PEMJA, Flink 1.15+): ``pemja.core.PythonException: <class 'ZeroDivisionError'>: division by zero``,
  its Python frames printed as Java frames, ``at /job/udf.unit_price(udf.py:28)``.

Each is read into a :class:`PythonFailure`: the exception, its message and the frames, outermost first as Python
prints them, with the deepest frame of the job's own code (not PyFlink's, Beam's, a library's or the standard
library's).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.model import Event
from flink_runbooks.parse.records import PY_CODE_INDENT, PY_FRAME, PY_TRACEBACK

PYTHON_LINK = "python"  # the chain link kind of the exception that ends a Python traceback
PEMJA_EXCEPTION = "pemja.core.PythonException"
_PEMJA_MESSAGE = re.compile(r"^<class '(?P<cls>[\w.]+)'>:\s?(?P<message>.*)$", re.S)
# PEMJA's Python frame as a Java frame: the module's path (without .py) and the function, then the file and line.
PEMJA_FRAME = re.compile(r"^at (?P<module>.+)\.(?P<function>[^.(]+)\((?P<file>[^():]+\.py|<string>):(?P<line>\d+)\)")
# Code that is not the job's: installed packages, PyFlink's own (also from its pyflink.zip), Beam, the standard
# library, generated code and compiled (Cython) modules.
_FRAMEWORK_FILE = re.compile(r"(?:^|/)(?:site-packages|dist-packages|pyflink|apache_beam|cloudpickle|pemja|py4j)/|^<"
                             r"|\.pyx$|/lib/python\d(?:\.\d+)?/|\.zip/")
MISSING_MODULE = re.compile(r"No module named '(?P<module>[\w.]+)'|cannot import name '\w+' from '(?P<parent>[\w.]+)'")


@dataclass(frozen=True)
class PythonFrame:
    file: str
    line: int
    function: str
    code: str | None = None

    @property
    def is_jobs_code(self) -> bool:
        return not _FRAMEWORK_FILE.search(self.file)

    def where(self) -> str:
        return f'File "{self.file}", line {self.line}, in {self.function}'


@dataclass
class PythonFailure:
    event: Event
    exception: str | None  # "ZeroDivisionError"; None when the traceback was cut off before it
    message: str
    frames: list[PythonFrame]  # outermost first, as Python prints them
    mode: str  # "process" (Beam's worker) or "thread" (PEMJA)

    @property
    def user_frame(self) -> PythonFrame | None:
        """The deepest frame of the job's own code: where its function raised or called what raised."""
        return next((f for f in reversed(self.frames) if f.is_jobs_code), None)

    @property
    def missing_module(self) -> str | None:
        """The module an import could not find (``No module named 'x'``; ``cannot import name 'y' from 'x'``)."""
        if self.exception and self.exception.rsplit(".", 1)[-1] in ("ModuleNotFoundError", "ImportError"):
            m = MISSING_MODULE.search(self.message)
            if m:
                return m["module"] or m["parent"]
        return None

    @property
    def text(self) -> str:
        return f"{self.exception}: {self.message}" if self.message else str(self.exception)


def python_failures(event: Event) -> list[PythonFailure]:
    """The Python failures one record carries, in the order it prints them."""
    out = []
    blocks = _traceback_blocks(event.body)
    links = [c for c in event.chain if c.kind == PYTHON_LINK]
    for i, block in enumerate(blocks):
        link = links[i] if i < len(links) else None
        out.append(PythonFailure(event, link.cls if link else None, link.message if link else "", block, "process"))
    for link in links[len(blocks):]:  # an exception whose frames were not kept
        out.append(PythonFailure(event, link.cls, link.message, [], "process"))
    for link in event.chain:
        # pasted without its package, the class is "PythonException"; PEMJA's message names the Python class
        if link.cls in (PEMJA_EXCEPTION, "PythonException") and _PEMJA_MESSAGE.match(link.message):
            m = _PEMJA_MESSAGE.match(link.message)
            frames = [PythonFrame(f["module"] + (".py" if f["file"].endswith(".py") else ""), int(f["line"]),
                                  f["function"]) for f in map(PEMJA_FRAME.match, event.frames) if f]
            out.append(PythonFailure(event, m["cls"], m["message"].strip(), list(reversed(frames)), "thread"))
    return out


def _traceback_blocks(body: list[str]) -> list[list[PythonFrame]]:
    """The frames of each traceback of a record's body (one block per ``Traceback`` line, kept even when empty: the
    n-th block goes with the n-th Python exception of the chain)."""
    blocks: list[list[PythonFrame]] = []
    for line in body:
        if line == PY_TRACEBACK:
            blocks.append([])
            continue
        frame = PY_FRAME.match(line)
        if frame:
            if not blocks:
                blocks.append([])
            blocks[-1].append(PythonFrame(frame["file"], int(frame["line"]), frame["function"]))
        elif line.startswith(PY_CODE_INDENT) and blocks and blocks[-1] and blocks[-1][-1].code is None:
            last = blocks[-1][-1]
            blocks[-1][-1] = PythonFrame(last.file, last.line, last.function, line.strip())
    return blocks
