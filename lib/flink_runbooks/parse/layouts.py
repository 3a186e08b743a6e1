"""Log line layouts: which lines start a record, and how to split a header into its fields.

The same patterns serve two places: the Spark workers evaluate the ``*_JAVA`` expressions on every line with
Arrow's RE2 engine (through :func:`re2`, which drops the lookaheads RE2 lacks), and :func:`parse_header` splits the
few lines that are kept with Python's ``re``. They are written in the subset of syntax Java, Python and RE2 share.

Supported layouts (a sample of each is in the docstring of :func:`parse_header` and in the tests):

* ``log4j2``  Flink ≥ 1.11 default: ``%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n`` (``[]`` is the empty ``%x``)
* ``log4j1``  Flink ≤ 1.10 default: the same without ``[]``
* ``thread``  a thread name in brackets before or after the level (``2019-02-16 11:26:29.378 [Checkpoint Timer] INFO ...``)
* ``iso``     ISO-8601 timestamps (``2023-04-10T13:48:39.366Z``, ``+02:00`` offsets)
* ``json``    one JSON object per line (log4j2 JsonLayout / JsonTemplateLayout, AWS Managed Flink)
* ``operator`` the Flink Kubernetes operator's (``2024-05-01 10:02:11,482 o.a.f.k.o.s.AbstractFlinkService [ERROR][ns/name] ...``)
* ``bare``    records printed without a timestamp (``INFO  [] - ...`` from Flink's start-up scripts)
* prefixes    docker-compose (``jobmanager-1  | ``), Kubernetes CRI (``2023-...Z stdout F ``), ``kubectl logs
  --timestamps`` (``2023-...Z ``) and platform tags (``[dinky] ``) in front of any of the above.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import re
from dataclasses import dataclass

LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "SEVERE")

_TS = r"\d{4}[-/]\d{2}[-/]\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2}| [A-Z]{3,4}\b)?"
_LEVEL = r"(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|SEVERE)"
# Prefixes that wrappers put in front of Flink's own layout.
PREFIX = (
    r"(?:\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}) (?:stdout|stderr) [FP] "  # CRI
    # kubectl logs --timestamps, CI runners: an ISO time stamp before a record or a stack-trace line
    r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}) "
    r"(?=\d{4}-\d{2}-\d{2}[ T]|\s|at |Caused by|Suppressed|\.\.\.|Exception in|[a-z_$][\w$]*\.)"
    r"|\d{2}:\d{2}:\d{2} \d{4}/\d{2}/\d{2} +\([^)]*\): ?"  # test runners: "HH:MM:SS yyyy/mm/dd  ():"
    r"|\[pod/[^\]\s]+\] ?"  # kubectl logs --prefix
    # a quote in a chat, a mail or a bug tracker's comment ("> "), of a record or a stack-trace line (as the
    # process or docker compose printed it)
    r"|(?:>[ \t]?)+(?:[A-Za-z0-9][\w.-]*\s*\| ?)?"
    r"(?=\d{4}-\d{2}-\d{2}[ T]|\s|at |Caused by|Suppressed|\.\.\.|Exception in|[a-z_$][\w$]*\.)"
    r"|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} [\w.-]+ [\w./@-]+(?:\[\d+\])?: ?"  # syslog / journald
    r"|[A-Za-z0-9][\w.-]*\s*\| ?"  # docker compose
    r"|\{\"log\":\"(?:\\t)?"  # docker's JSON log driver (the escaped tab of a stack frame included)
    r"|\[[\w.-]+\] (?=\d{4})"  # platform tag
    r")"
)
# Any other constant prefix (a ticket's quote marker, a chat tool's name column, an unknown runner): up to 80
# characters ending in a separator. Only used where structure follows it (an exception, a frame, a timestamp and
# a level), never to decide that a plain line is a record.
GENERIC_PREFIX = r"(?:.{0,80}?(?:[\s|:>\]\"'(,]|&quot;|&#39;|&gt;))"

# What follows a record's time stamp: its level, a thread in brackets, a second time stamp (kubectl), a JSON body,
# ": " or " - ", or nothing. Not a runtime's stream column ("stdout F") nor a stack-trace line: a Kubernetes
# prefix before a frame is not a record start.
_TS_TAIL = (r"(?:\s+(?:" + _LEVEL + r"\b|\[|\d{4}-\d{2}-\d{2}|\{)|:\s|\s+-\s"
            # the Flink Kubernetes operator's layout: a short logger, then the level in brackets
            r"|\s+[a-zA-Z_$][\w$]*(?:\.[\w$]+)+\s+\[" + _LEVEL + r"\s*\])")
# A time stamp alone on its line (the web UI's exception history) starts a record; a runtime's ISO stamp before an
# empty line does not.
_TS_ALONE = r"\d{4}[-/]\d{2}[-/]\d{2} \d{2}:\d{2}:\d{2}(?:[,.]\d{1,3})?\s*$"

PREFIX_JAVA = "^" + PREFIX
# A line that starts a record: a timestamp (after an optional prefix), a bare level followed by " [" or " -"
# (start-up script output), or a JSON object.
HEADER_JAVA = (
    r"^(?:(?:" + PREFIX + r")?(?:\[[^\]]{0,80}\] ?)?(?:" + _TS + _TS_TAIL + r"|" + _TS_ALONE + r"|" + _LEVEL + r"\s+(?:\[[^\]]*\]\s+)?-\s|" + _LEVEL
    + r"\s+[a-zA-Z_$][\w$]*(?:\.[\w$]+)+\s+(?:\[[^\]]*\]\s+)?-\s|\{\s*\"(?:[^l]|l[^o]|lo[^g]|log[^\"]))"
    r"|" + GENERIC_PREFIX + r"\s*" + _TS + r"\s+(?:\[[^\]]*\]\s+)?" + _LEVEL + r"\s)"
)
# Exception classes: qualified (``java.io.IOException``, ``o.a.f.r.JobException``), or a simple name as people
# paste it (``RemoteTransportException: ...``, ``OutOfMemoryError:Metaspace``) when a colon or bracket follows.
_QUALIFIED_CLASS = r"(?:[a-zA-Z_$][\w$]*\.)+(?:[A-Z][\w$]*)?(?:Exception|Error|Throwable|Failure)\b"
_SIMPLE_CLASS = r"[A-Z][\w$]*(?:Exception|Error|Throwable)(?:\s?:|\[)"
# Lines that are part of an exception: a class name with Exception/Error/Throwable, Caused by, Suppressed, and the
# "... N more" / "... N common frames omitted" markers that show where a trace was shortened; behind a known
# prefix, or behind any short prefix ending in a separator (quotes, JSON and HTML escapes included).
EXCEPTION_LINE_JAVA = (
    r"^(?:" + PREFIX + r"|" + GENERIC_PREFIX + r")?\s*(?:Exception in thread \"[^\"]*\" )?"
    r"(?:Caused by:|Suppressed:|\.\.\. \d+ (?:more|common frames omitted)|" + _QUALIFIED_CLASS + r"|" + _SIMPLE_CLASS
    + r"|(?:[a-z_$][\w$]*\.){2,}[\w$]+$)"  # the last: a class name a wrap cut in two
)
# "key = value" lines of a Kafka ConsumerConfig/ProducerConfig dump, "key=value" lines after "-D" on a command line.
CONFIG_LINE_JAVA = r"^(?:" + PREFIX + r")?\s+[a-z][\w.-]*\s?=\s?\S*"
# A frame of a Python traceback (a PyFlink function's error inside a Java trace): ``  File "/job/udf.py", line 12, in f``.
# The lines under it (the code, the markers under it, the exception that ends the traceback) are kept with it
# (:func:`widen_kept`).
PYTHON_FRAME_JAVA = r"^(?:" + PREFIX + r")?\s+File \"[^\"]+\", line \d+, in "

_PREFIX_RE = re.compile(PREFIX_JAVA)
_HEADER_RE = re.compile(HEADER_JAVA)

_LOG4J = re.compile(
    r"^(?P<ts>" + _TS + r")\s+"
    r"(?:\[(?P<thread1>[^\]]*)\]\s+)?"
    r"(?P<level>" + _LEVEL + r")\s+"
    r"(?:\[(?P<thread2>[^\]]*)\]\s+)?"
    r"(?P<logger>[^\s\[]+)"
    r"(?:\s+(?P<lineinfo>\d+ [\w$]+))?"  # some wrappers print "<line> <method>" after the logger
    r"\s*(?P<mdc>\[[^\]]*\])?\s*-\s?(?P<msg>.*)$"
)
# The Flink Kubernetes operator's layout (helm chart, log4j-operator.properties; its colour codes stripped):
# "%d %-30c{1.} [%-5level][%X{resource.namespace}/%X{resource.name}] %msg"
_OPERATOR = re.compile(
    r"^(?P<ts>" + _TS + r")\s+(?P<logger>[a-zA-Z_$][\w$]*(?:\.[\w$]+)+)\s+\[(?P<level>" + _LEVEL + r")\s*\]"
    r"(?P<resource>\[[^\]]*\])?\s?(?P<msg>.*)$"
)
_BARE = re.compile(r"^(?P<level>" + _LEVEL + r")\s+(?P<mdc>\[[^\]]*\])?\s*-\s?(?P<msg>.*)$")
# A record whose time stamp was left out (a paste without the first column): level, logger, optional MDC, " - ".
_NO_TS = re.compile(r"^(?P<level>" + _LEVEL + r")\s+(?P<logger>[a-zA-Z_$][\w$]*(?:\.[\w$]+)+)\s+(?:\[[^\]]*\]\s+)?-\s?(?P<msg>.*)$")
_TS_ONLY = re.compile(r"^(?P<ts>" + _TS + r")\s+(?P<msg>.*)$")
# A record start whose rest was wrapped onto the next line: only the time stamp and level (and maybe the logger).
_CUT = re.compile(r"^(?P<ts>" + _TS + r")\s+(?P<level>" + _LEVEL + r")(?:\s+(?P<logger>[\w$.]+))?\s*$")
_JAVA_CLASS = re.compile(r"^(?:[a-zA-Z_$][\w$]*\.)+(?:[A-Z][\w$]*)?(?:Exception|Error|Throwable|Failure)\b")
_SIMPLE_CLASS_RE = re.compile(_SIMPLE_CLASS)
# A record start recognised only behind an unknown prefix (the generic alternative of HEADER_JAVA).
_GENERIC_ONLY = re.compile(r"^(?!(?:" + PREFIX + r")?(?:\[[^\]]{0,80}\] ?)?(?:" + _TS + r"|" + _LEVEL + r"\s+(?:\[[^\]]*\]\s+)?-\s|\{\s*\"))")


@dataclass
class Header:
    ts: str | None
    level: str | None
    logger: str | None
    thread: str | None
    message: str
    layout: str
    exception_text: str | None = None  # JSON layouts carry the stack trace inside the record


@functools.lru_cache(maxsize=256)
def re2(pattern: str) -> str:
    """``pattern`` in RE2 syntax (Arrow's regex engine): without lookaheads, ``(?!)`` as a class that never matches.

    The only lookaheads here guard the optional wrapper prefixes; without them a prefix also matches in front of
    lines it did not before (a kubectl time stamp before a stack frame), which keeps those lines as it should.

    >>> print(re2(r"^(?:\\[[\\w.-]+\\] (?=\\d{4}))?x(?!)"))
    ^(?:\\[[\\w.-]+\\] )?x[^\\s\\S]
    """
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("(?!)", i):
            out.append(r"[^\s\S]")
            i += 4
        elif pattern.startswith("(?=", i) and (i == 0 or pattern[i - 1] != "\\"):
            depth, j = 1, i + 3
            while depth:
                depth += {"(": 1, ")": -1}.get(pattern[j], 0) if pattern[j - 1] != "\\" else 0
                j += 1
            i = j
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out)


def strip_prefix(line: str) -> str:
    """Remove a docker-compose / Kubernetes / test-runner / syslog / platform prefix, else any constant prefix in
    front of a frame, ``Caused by:``, an exception class or a time stamp with a level (see :func:`strip_any_prefix`)."""
    return strip_any_prefix(line)


_BARE_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})\s*$")


def strip_known_prefix(line: str) -> str:
    """Remove a docker-compose / Kubernetes / test-runner / syslog / platform prefix, if any."""
    if _BARE_RFC3339.match(line):
        return ""  # an empty line of the process's output, behind kubectl's time stamp
    m = _PREFIX_RE.match(line)
    if not m:
        return line
    rest = line[m.end():]
    # A docker-compose service name could be mistaken for the first word of a stack frame; only strip when what
    # follows looks like log content.
    # (A prefix with nothing after it is an empty line of the process's output.)
    return rest if not rest.strip() or rest[:1] in ("\t", " ", "{") or _HEADER_RE.match(rest) or _JAVA_CLASS.match(rest) or _SIMPLE_CLASS_RE.match(rest) or rest.startswith(("Caused by", "Suppressed", "at ", "...", "Exception in thread")) else line


# Where structure starts after an unknown prefix: a frame, Caused by, an exception class, a time stamp and a level.
_STRUCTURE = re.compile(
    r"(?:^|(?<=[\s|:>\]\"'(,]))\s*(?=at [\w$.]+(?:/[\w$.]+)?\(|Caused by:|Suppressed:|\.\.\. \d+ (?:more|common)|"
    r"Exception in thread \"|" + _QUALIFIED_CLASS + r"|" + _SIMPLE_CLASS + r"|" + _TS + r"\s+(?:\[[^\]]*\]\s+)?" + _LEVEL + r"\s)")


def strip_any_prefix(line: str) -> str:
    """:func:`strip_prefix`, else any constant prefix up to 80 characters in front of a frame, ``Caused by:``, an
    exception class or a time stamp with a level (a prefix nobody anticipated: a test runner's, a chat tool's)."""
    stripped = strip_known_prefix(line)
    if stripped is not line or not line or line[:1] in ("\t", " ") or _HEADER_RE.match(line) and not _GENERIC_ONLY.match(line):
        return stripped
    if _JAVA_CLASS.match(line) or line.startswith(("Caused by", "Suppressed", "at ", "...", "Exception in thread")):
        return line
    m = _STRUCTURE.search(line, 0, 120)
    if m and 0 < m.end() <= 100:
        return line[m.end():]
    return line


def normalize_ts(ts: str | None) -> str | None:
    """``2023-04-10 13:48:39,366`` / ``2023-04-10T13:48:39.366Z`` -> ``2023-04-10 13:48:39.366``."""
    if not ts:
        return None
    m = re.match(r"(\d{4})[-/](\d{2})[-/](\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[,.](\d{1,9}))?", ts)
    if not m:
        return ts
    frac = (m.group(5) or "000")[:3].ljust(3, "0")
    return f"{m.group(1)}-{m.group(2)}-{m.group(3)} {m.group(4)}.{frac}"


def is_header(line: str) -> bool:
    return bool(_HEADER_RE.match(line))


def parse_header(line: str) -> Header | None:
    """Split a record's first line into its fields; None when the line is not a record start.

    >>> h = parse_header("2026-11-22 02:54:11,377 WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger or complete checkpoint 3 for job f48410cfc8f27e85a01838c5b64de860. (0 consecutive failed attempts so far)")
    >>> (h.ts, h.level, h.logger.rsplit('.', 1)[-1], h.layout)
    ('2026-11-22 02:54:11.377', 'WARN', 'CheckpointFailureManager', 'log4j2')
    >>> parse_header("2019-02-16 11:26:29.378 [Checkpoint Timer] INFO org.apache.flink.runtime.checkpoint.CheckpointCoordinator - Triggering checkpoint 1389046 @ 1550287589373 for job 599a6ac3c371874d12ebf024978cadbc.").thread
    'Checkpoint Timer'
    >>> parse_header("2020-03-01 10:00:00,001 INFO  org.apache.flink.runtime.taskmanager.Task                     - Source (1/1) switched from RUNNING to FAILED.").layout
    'log4j1'
    >>> parse_header("jobmanager-1  | 2024-05-02T08:15:01.120Z INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - Trying to recover from a global failure.").ts
    '2024-05-02 08:15:01.120'
    >>> parse_header("INFO  [] - Loading configuration property: taskmanager.memory.process.size, 1728m").layout
    'bare'
    >>> parse_header('{"timestamp":"2024-01-01T00:00:00.000Z","level":"ERROR","loggerName":"o.a.f.X","message":"boom"}').level
    'ERROR'
    >>> parse_header("\\tat org.apache.flink.runtime.taskmanager.Task.run(Task.java:550)") is None
    True
    """
    raw = line.rstrip("\r\n")
    if raw.startswith('{"log"'):
        return _parse_json(raw)
    stripped = strip_prefix(raw)
    body = stripped.lstrip()
    if body.startswith("{"):
        return _parse_json(body)
    tag = re.match(r"^\[[\w.-]+\] (?=\d{4})", body)
    if tag:
        body = body[tag.end():]
    m = _LOG4J.match(body)
    if m:
        thread = m.group("thread1") or m.group("thread2")
        layout = "thread" if thread is not None else ("log4j2" if m.group("mdc") is not None else "log4j1")
        if "T" in m.group("ts")[10:11]:
            layout = "iso" if thread is None else layout
        return Header(normalize_ts(m.group("ts")), _level(m.group("level")), m.group("logger"), thread,
                      m.group("msg"), layout)
    m = _OPERATOR.match(body)
    if m:
        # the resource ("[namespace/name]") stays in the message: it names the deployment the record is about
        msg = f"{m.group('resource')} {m.group('msg')}" if m.group("resource") else m.group("msg")
        return Header(normalize_ts(m.group("ts")), _level(m.group("level")), m.group("logger"), None, msg,
                      "operator")
    m = _BARE.match(body)
    if m:
        return Header(None, _level(m.group("level")), None, None, m.group("msg"), "bare")
    m = _NO_TS.match(body)
    if m:
        return Header(None, _level(m.group("level")), m.group("logger"), None, m.group("msg"), "no-timestamp")
    m = _CUT.match(body)
    if m:
        return Header(normalize_ts(m.group("ts")), _level(m.group("level")), m.group("logger"), None, "", "cut")
    m = _TS_ONLY.match(body)
    if m:
        return Header(normalize_ts(m.group("ts")), None, None, None, m.group("msg"), "timestamped")
    return None


def docker_json_line(rec) -> str | None:
    """The line inside a container runtime's JSON log record (docker json-file ``{"log": ..., "stream": ...}``)."""
    if isinstance(rec, str):
        if not rec.startswith('{"log"'):
            return None
        try:
            rec = json.loads(rec)
        except ValueError:
            return None
    if isinstance(rec, dict) and isinstance(rec.get("log"), str) and ("stream" in rec or "time" in rec):
        return rec["log"].rstrip("\r\n")
    return None


def _level(level: str | None) -> str | None:
    if level is None:
        return None
    return {"WARNING": "WARN", "SEVERE": "ERROR"}.get(level.upper(), level.upper())


_JSON_FIELDS = {
    "ts": ("timestamp", "@timestamp", "time", "instant", "date"),
    "level": ("level", "messageType", "severity", "log.level"),
    "logger": ("loggerName", "logger", "logger_name", "log.logger"),
    "thread": ("thread", "threadName", "thread_name"),
    "message": ("message", "msg", "@message", "log", "textPayload", "MESSAGE"),
    "exception": ("throwableInformation", "thrown", "exception", "stack_trace", "stackTrace", "error.stack_trace"),
}
# Exports that wrap the shipped record in an envelope: an Elasticsearch/OpenSearch hit, a Google Cloud Logging entry.
_JSON_ENVELOPES = ("_source", "jsonPayload")


def _json_field(rec: dict, name: str):
    """``rec[name]``, or a dotted name's nested value (``error.stack_trace`` as ``{"error": {"stack_trace": …}}``)."""
    if name in rec:
        return rec[name]
    value = rec
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _embedded_record(text: str) -> Header | None:
    """A whole log line carried in a JSON field (a log shipper's ``log`` or ``message``, a container runtime's line),
    read as the line it is; what was logged under it (its stack trace) on the following lines becomes the record's
    exception text. None when the field's first line is no log record of a known layout."""
    first, _, rest = text.strip("\r\n").partition("\n")
    if first.lstrip().startswith("{"):
        return None
    header = parse_header(first)
    if header is None or header.layout in ("bare", "timestamped"):
        return None
    if rest.strip():
        header = dataclasses.replace(header, exception_text="\n".join(
            t for t in (header.exception_text, rest.rstrip("\r\n")) if t))
    return header


def _loads_cut(text: str):
    r"""A JSON object, or what is left of one whose line was cut short (a line limit, a paste cut off mid-trace):
    the fields read so far, the last string ending where the cut fell; None when it is not JSON at all.

    >>> _loads_cut('{"level": "ERROR", "stack_trace": "java.io.IOException: x\\n\\tat a.B.c(B.java:1)\\n\\tat a.B.d(B.j')
    {'level': 'ERROR', 'stack_trace': 'java.io.IOException: x\n\tat a.B.c(B.java:1)\n\tat a.B.d(B.j'}
    """
    try:
        return json.loads(text)
    except ValueError:
        pass
    if not re.match(r'^\{\s*"', text):
        return None
    # Drop an escape the cut split ("\\", "\\u00"), then close the open string and object.
    body = re.sub(r'\\(?:u[0-9a-fA-F]{0,3})?$', "", text) if re.search(r'(?<!\\)(?:\\\\)*\\(?:u[0-9a-fA-F]{0,3})?$', text) else text
    for tail in ('"}', '}', '":""}'):
        try:
            rec = json.loads(body + tail)
        except ValueError:
            continue
        return rec if isinstance(rec, dict) else None
    return None


def _parse_json(text: str) -> Header | None:
    rec = _loads_cut(text)
    if rec is None:
        return None
    if not isinstance(rec, dict):
        return None
    inner = docker_json_line(rec)
    if inner is not None:
        header = _embedded_record(inner) or parse_header(inner.split("\n", 1)[0])
        return header if header is not None else Header(None, None, None, None, inner.strip(), "json-file")
    for envelope in _JSON_ENVELOPES:
        if isinstance(rec.get(envelope), dict):
            rec = {**{k: v for k, v in rec.items() if k != envelope}, **rec[envelope]}

    def pick(name: str):
        for key in _JSON_FIELDS[name]:
            value = _json_field(rec, key)
            if value not in (None, ""):
                return value
        return None

    message = pick("message")
    embedded = _embedded_record(message) if isinstance(message, str) else None
    if embedded is not None:  # the shipper kept the process's own line: its fields are the record's
        return dataclasses.replace(embedded, layout="json")

    ts = pick("ts")
    if isinstance(ts, dict) and "epochSecond" in ts:  # log4j2 JsonLayout "instant"
        import datetime as _dt
        ts = _dt.datetime.fromtimestamp(ts["epochSecond"] + ts.get("nanoOfSecond", 0) / 1e9, _dt.timezone.utc).isoformat()
    elif isinstance(ts, (int, float)):
        import datetime as _dt
        ts = _dt.datetime.fromtimestamp(ts / 1000 if ts > 1e11 else ts, _dt.timezone.utc).isoformat()
    exc = pick("exception")
    if exc is None:  # a field name nobody anticipated: any value that is a whole stack trace
        exc = next((v for v in rec.values() if isinstance(v, str) and "\n" in v
                    and (_JAVA_CLASS.match(v.lstrip()) or _SIMPLE_CLASS_RE.match(v.lstrip()))), None)
    if exc is None and isinstance(message, str) and "\n" in message.strip("\r\n"):
        # one field holds the record's line and what was logged under it (its trace): read like a log's lines; a
        # field that starts with the exception itself (a pasted trace shipped as one document) is all trace
        text = message.strip("\r\n")
        head = text.split("\n", 1)[0].lstrip()
        if _JAVA_CLASS.match(head) or _SIMPLE_CLASS_RE.match(head):
            message, exc = "", text
        else:
            message, _, exc = text.partition("\n")
    if isinstance(exc, dict):  # log4j2 JsonLayout "thrown": {name, message, extendedStackTrace...}
        parts = [f"{exc.get('name', '')}: {exc.get('message', '')}".strip(": ")]
        exc = "\n".join(parts + [str(v) for k, v in exc.items() if k in ("extendedStackTrace", "stackTrace") and isinstance(v, str)])
    elif isinstance(exc, list):
        exc = "\n".join(str(x) for x in exc)
    level = pick("level")
    return Header(
        normalize_ts(str(ts)) if ts else None,
        _level(str(level)) if level else None,
        str(pick("logger")) if pick("logger") else None,
        str(pick("thread")) if pick("thread") else None,
        str(message or ""),
        "json",
        str(exc) if exc else None,
    )


# A line that starts with whitespace behind any known prefix: Flink's own continuation (a frame, a config dump).
# Widths that ticket and chat tools, terminals and mail clients wrap at: a line that long was probably cut.
WRAP_MIN = 60
WRAP_WIDTHS = (72, 76, 78, 80, 100, 120, 132, 160)
# A wrap before a long word can leave a short line ("because: Container" / "[pid=...,containerID=...] is ...").
SHORTEST_WRAPPED = 12
_INDENTED_JAVA = r"^(?:" + PREFIX + r")?\s"
# A record start cut right after its level or logger (the rest wrapped onto the next line).
_CUT_HEADER_JAVA = r"^(?:" + PREFIX + r")?" + _TS + r"\s+" + _LEVEL + r"(?:\s+[\w$.]+)?\s*$"


def matches_at(texts, pattern: str, rows, default: bool = False, within: int | None = None):
    """Whether ``pattern`` (RE2) matches each line of ``texts`` (Arrow) at ``rows`` (numpy indices), in its first
    ``within`` characters when given; ``default`` elsewhere. Only those lines are evaluated."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    out = np.full(len(texts), default, dtype=bool)
    if len(rows):
        lines = texts.take(pa.array(rows))
        if within is not None:
            lines = pc.utf8_slice_codeunits(lines, 0, within)
        out[rows] = pc.match_substring_regex(lines, pattern).fill_null(default).to_numpy(zero_copy_only=False)
    return out


def widen_kept(texts, header, keep):
    """The pre-filter's ``keep`` mask (numpy, one Arrow batch), widened for pasted and wrapped text.

    * A batch without any record header is an excerpt or a layout nobody anticipated: every line is read, so its
      exceptions are parsed line by line instead of being dropped.
    * A line a ticket or chat tool wrapped onto the next one (a non-indented line after a long one, or after a record
      start cut right after its level) belongs with the line before it: a record start and the lines wrapped from it
      are kept together when any of them is kept, so the assembler can join them back.
    """
    import numpy as np
    import pyarrow.compute as pc

    n = len(texts)
    if n == 0:
        return keep
    if not header.any():
        return np.ones(n, dtype=bool)
    lengths = pc.utf8_length(texts).fill_null(0).to_numpy(zero_copy_only=False)
    # Only a line that is neither a record start nor empty can continue the one before: the two patterns are
    # evaluated on those lines (and the lines before them) alone.
    may_continue = ~header & (lengths > 0)
    indented = matches_at(texts, re2(_INDENTED_JAVA), np.flatnonzero(may_continue), True)
    cut = matches_at(texts, re2(_CUT_HEADER_JAVA), np.flatnonzero(may_continue[1:]), False)
    # A line whose first word would not have fitted on the (shorter) line before it at any common wrap width.
    space = pc.find_substring(texts, " ").fill_null(-1).to_numpy(zero_copy_only=False)
    first = np.where(space < 0, lengths, space)
    widths = np.array(sorted(WRAP_WIDTHS) + [1 << 30])
    next_width = widths[np.searchsorted(widths, lengths, side="left")]
    did_not_fit = (lengths[:-1] >= SHORTEST_WRAPPED) & (next_width[:-1] < lengths[:-1] + 1 + first[1:])
    continues = np.zeros(n, dtype=bool)
    continues[1:] = (lengths[:-1] >= WRAP_MIN) | cut[:-1] | did_not_fit
    continues &= ~header & ~indented & (lengths > 0)
    segment = np.cumsum(~continues)  # a line and the lines wrapped from it share a segment
    kept_segments = np.zeros(int(segment[-1]) + 1, dtype=bool)
    np.logical_or.at(kept_segments, segment, keep)
    # A wrapped record is kept whole: a signature cut in two by the wrap matches neither half.
    wrapped = np.bincount(segment)[segment] >= 2
    return _python_traceback_lines(texts, header, keep | kept_segments[segment] | (wrapped & (continues | header)))


def _python_traceback_lines(texts, header, keep):
    """``keep`` with the lines under each kept Python frame: its code and the markers under the code (indented), up to
    and including the first line that is not indented (the next frame is kept anyway; the exception ends the
    traceback: ``ZeroDivisionError: division by zero``)."""
    import numpy as np

    frames = matches_at(texts, re2(PYTHON_FRAME_JAVA), np.flatnonzero(keep))
    if not frames.any():
        return keep
    n = len(texts)
    reach, out = frames, keep.copy()
    for _ in range(3):  # the code, the markers under it (Python 3.11), then the exception
        following = np.zeros(n, dtype=bool)
        following[1:] = reach[:-1] & ~header[1:]
        if not following.any():
            break
        out |= following
        reach = following & matches_at(texts, re2(_INDENTED_JAVA), np.flatnonzero(following))
    return out
