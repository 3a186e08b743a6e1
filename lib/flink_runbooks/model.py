"""The plain data that flows between ingestion, detectors and renderers.

Ingestion (Spark) produces an :class:`Incident`; detectors read it and return :class:`Finding` objects; renderers
format findings. Nothing here touches files or Spark.
"""
from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator

from flink_runbooks.parse.config import EffectiveConfig
from flink_runbooks.vocabulary.versions import FlinkVersion


@dataclass(frozen=True)
class ChainLink:
    """One exception of a stack trace: the top one, a ``Caused by:`` or a ``Suppressed:``."""

    cls: str
    message: str
    kind: str = "top"  # top | caused_by | suppressed

    @property
    def simple_name(self) -> str:
        return self.cls.rsplit(".", 1)[-1]


@dataclass
class Event:
    """One log record: a header line and whatever belongs to it (stack trace, config dump lines)."""

    file: str
    line: int
    ts: str | None = None  # "YYYY-MM-DD HH:MM:SS.mmm" when the layout has one
    level: str | None = None
    logger: str | None = None
    thread: str | None = None
    message: str = ""
    chain: list[ChainLink] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)  # only frames some detector asked for
    body: list[str] = field(default_factory=list)  # other kept continuation lines (config dumps, wrapped text)
    truncated: bool = False  # the trace ends in "... N more" or was cut off
    role: str = "unknown"  # jobmanager | taskmanager | client | unknown
    host: str | None = None

    @property
    def root_cause(self) -> ChainLink | None:
        """The deepest ``Caused by`` (or the top exception when there is none)."""
        causes = [c for c in self.chain if c.kind != "suppressed"]
        return causes[-1] if causes else None

    @functools.cached_property
    def text(self) -> str:
        """Header message plus every exception of the chain: what signatures are matched against (built once:
        detectors match it a hundred times; events are not changed after ingestion)."""
        parts = [self.message]
        parts += [f"{c.cls}: {c.message}" if c.message else c.cls for c in self.chain]
        parts += self.body
        parts += self.frames
        return "\n".join(p for p in parts if p)

    def search(self, pattern: str | re.Pattern[str]) -> re.Match[str] | None:
        return search(re.compile(pattern) if isinstance(pattern, str) else pattern, self.text)

    def has_exception(self, name: str) -> bool:
        """True when a class of the chain is ``name`` (fully qualified or simple name)."""
        return any(c.cls == name or c.simple_name == name for c in self.chain)

    def location(self) -> str:
        return f"{self.file}:{self.line}"

    def excerpt(self, limit: int = 600) -> str:
        head = " ".join(p for p in (self.ts, self.level, self.logger) if p)
        lines = [f"{head} - {self.message}" if head else self.message]
        lines += [("Caused by: " if c.kind == "caused_by" else "Suppressed: " if c.kind == "suppressed" else "")
                  + (f"{c.cls}: {c.message}" if c.message else c.cls) for c in self.chain]
        out = "\n".join(line for line in lines if line)
        return out if len(out) <= limit else out[: limit - 1] + "…"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["chain"] = [asdict(c) for c in self.chain]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Event":
        d = dict(d)
        d["chain"] = [ChainLink(**c) for c in d.get("chain") or []]
        for k in ("frames", "body"):
            d[k] = list(d.get(k) or [])
        return cls(**d)


@dataclass
class InputFile:
    path: str
    role: str = "unknown"
    host: str | None = None
    tm_id: str | None = None
    layout: str | None = None
    lines: int = 0
    bytes: int | None = None
    kind: str = "log"  # log | config


@functools.lru_cache(maxsize=1024)
def required_literal(rx: re.Pattern[str]) -> str | None:
    """The longest run of literal characters that every match of ``rx`` contains (at its top level, outside groups,
    repeats and alternatives), or None. A substring test with it skips most texts before the regex runs.

    >>> required_literal(re.compile(r"Completed checkpoint (\\d+) for job"))
    'Completed checkpoint '
    >>> required_literal(re.compile(r"OOMKilled|exitCode=137")) is None
    True
    """
    from re import _constants, _parser

    if rx.flags & re.IGNORECASE:
        return None
    best, run = "", ""
    for op, arg in _parser.parse(rx.pattern, rx.flags):
        if op is _constants.LITERAL:
            run += chr(arg)
            continue
        best, run = max(best, run, key=len), ""
    best = max(best, run, key=len)
    return best if len(best) >= 3 else None


def search(rx: re.Pattern[str], text: str) -> re.Match[str] | None:
    """``rx.search(text)``, skipped when ``text`` lacks the literal every match contains (detectors run dozens of
    patterns over hundreds of thousands of records on a big incident)."""
    literal = required_literal(rx)
    if literal is not None and literal not in text:
        return None
    return rx.search(text)


@dataclass
class Folded:
    """Records that repeated one kept in ``events`` (``sample``, its location) and were counted instead of kept:
    ``count`` of them, from ``first`` to ``last`` (``file:line``, with their times)."""

    sample: str
    count: int
    first: str | None = None
    first_ts: str | None = None
    last: str | None = None
    last_ts: str | None = None


@dataclass
class RestFailure:
    """One exception of a job's exception history (``GET /jobs/:jobid/exceptions``): a failure with its exact time
    and place, as the JobManager recorded it. ``task`` is None for a global failure."""

    exception: str  # the class Flink names (``exceptionName``)
    stacktrace: str  # the whole trace, Flink's own text (capped)
    timestamp_ms: int | None = None
    task: str | None = None  # "Map (1/2) - execution #0" as Flink names it
    location: str | None = None  # host:port of the TaskManager (``endpoint`` since 1.19, ``location`` before)
    taskmanager: str | None = None  # the TaskManager's resource id
    labels: dict[str, str] = field(default_factory=dict)  # failure enrichers' labels (1.18+)
    line: int | None = None  # the line of its trace in the document, for evidence


@dataclass
class RestFailureEntry:
    """One failure the JobManager handled (a restart or the final failure): its root cause and the failures that
    happened beside it."""

    root: RestFailure
    concurrent: list[RestFailure] = field(default_factory=list)


# Long.MIN_VALUE: how Flink's REST API says a subtask has no watermark yet (the web UI shows "No Watermark")
NO_WATERMARK = -(1 << 63)


@dataclass
class RestVertex:
    name: str
    status: str | None = None
    parallelism: int | None = None
    tasks: dict[str, int] = field(default_factory=dict)  # subtasks per execution state
    start_ms: int | None = None
    duration_ms: int | None = None
    id: str | None = None
    # GET /jobs/:jobid/vertices/:vertexid/watermarks: subtask index -> currentInputWatermark (epoch ms;
    # Long.MIN_VALUE while no watermark has arrived); a source vertex has none (no input)
    watermarks: dict[str, int] = field(default_factory=dict)
    # GET /jobs/:jobid/vertices/:vertexid/subtasks/:subtaskindex/metrics: subtask index -> metric id -> value, the
    # few metrics that tell an idle subtask from a stopped one (records in and out, output watermarks, source lags)
    subtask_metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    documents: dict[str, str] = field(default_factory=dict)  # what -> path of the document read (for evidence)


@dataclass
class RestCheckpoint:
    """One checkpoint of ``GET /jobs/:jobid/checkpoints``' history."""

    checkpoint_id: int
    status: str  # COMPLETED | FAILED | IN_PROGRESS
    savepoint: bool = False
    trigger_ms: int | None = None
    ack_ms: int | None = None  # the latest acknowledgement
    end_to_end_ms: int | None = None
    state_size: int | None = None
    checkpointed_size: int | None = None  # incremental size (1.15+; older releases only have state_size)
    failure_ms: int | None = None
    failure_message: str | None = None
    acknowledged: int | None = None
    subtasks: int | None = None


@dataclass
class RestCheckpointConfig:
    """``GET /jobs/:jobid/checkpoints/config``: what the job's checkpointing ran with (the job's own code included)."""

    mode: str | None = None
    interval_ms: int | None = None  # None when checkpointing is off
    timeout_ms: int | None = None
    min_pause_ms: int | None = None
    max_concurrent: int | None = None
    tolerable_failed: int | None = None
    unaligned: bool | None = None
    externalized: bool | None = None
    state_backend: str | None = None
    checkpoint_storage: str | None = None


@dataclass
class RestJob:
    jid: str
    name: str | None = None
    state: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    state_times: dict[str, int] = field(default_factory=dict)  # first time the job reached each state
    vertices: list[RestVertex] = field(default_factory=list)
    history: list[RestFailureEntry] = field(default_factory=list)  # oldest first
    history_truncated: bool = False
    has_history: bool = False  # the exception history was read (an empty one says "no failure")
    checkpoint_counts: dict[str, int] = field(default_factory=dict)
    checkpoints: list[RestCheckpoint] = field(default_factory=list)  # oldest first
    checkpoint_config: RestCheckpointConfig | None = None
    documents: dict[str, str] = field(default_factory=dict)  # what -> path of the document read (for evidence)


@dataclass
class RestThread:
    """One thread of a TaskManager's thread dump: its name and its stack as the JVM prints it, where it is written."""

    name: str
    text: str
    file: str | None = None
    line: int | None = None


@dataclass
class RestTaskManager:
    """``GET /taskmanagers/:id``: the memory sizes the TaskManager runs with, its host and its JVM's usage."""

    id: str
    memory: dict[str, int] = field(default_factory=dict)  # memoryConfiguration, bytes (1.12+)
    hardware: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)  # heapUsed, directUsed, mappedUsed, ... (bytes)
    document: str | None = None
    threads: list[RestThread] = field(default_factory=list)  # its thread dump, when the pull took one


@dataclass
class ClusterSnapshot:
    """What a pulled bundle's REST documents say (``flink-runbooks pull``), as plain data: the jobs with their
    states, exception histories and checkpoints, and the TaskManagers' memory. Times are epoch milliseconds."""

    bundle: str  # the bundle folder, as shown
    source: str | None = None  # the URL it was pulled from (no credentials)
    pulled_at: str | None = None
    flink_version: str | None = None
    jobs: list[RestJob] = field(default_factory=list)
    taskmanagers: list[RestTaskManager] = field(default_factory=list)

    def job(self, jid: str | None) -> RestJob | None:
        return next((j for j in self.jobs if j.jid == jid), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ClusterSnapshot":
        def failure(f):
            return RestFailure(**f)

        def job(j):
            j = dict(j)
            j["vertices"] = [RestVertex(**v) for v in j.get("vertices") or []]
            j["history"] = [RestFailureEntry(failure(e["root"]), [failure(c) for c in e.get("concurrent") or []])
                            for e in j.get("history") or []]
            j["checkpoints"] = [RestCheckpoint(**c) for c in j.get("checkpoints") or []]
            if j.get("checkpoint_config") is not None:
                j["checkpoint_config"] = RestCheckpointConfig(**j["checkpoint_config"])
            return RestJob(**j)

        d = dict(d)
        d["jobs"] = [job(j) for j in d.get("jobs") or []]
        d["taskmanagers"] = [RestTaskManager(**{**t, "threads": [RestThread(**x) for x in t.get("threads") or []]})
                             for t in d.get("taskmanagers") or []]
        return cls(**d)


@dataclass
class Incident:
    """Everything ingestion learnt about one incident, as plain data."""

    events: list[Event]
    config: EffectiveConfig
    flink_version: str | None = None
    version_source: str | None = None
    inputs: list[InputFile] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # repeated records counted instead of kept (collect/fold.py), the most frequent first
    folded: list[Folded] = field(default_factory=list)
    # what the scan saw: lines read, lines kept by the pre-filter, records received and kept, records folded
    scan: dict[str, int] = field(default_factory=dict)
    # the REST documents of pulled bundles (collect/rest.py), when the incident has any
    rest: list[ClusterSnapshot] = field(default_factory=list)

    def find(self, pattern: str | re.Pattern[str], *, role: str | None = None) -> Iterator[tuple[Event, re.Match[str]]]:
        """Events whose text matches ``pattern``, in time order, with the match."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        for ev in self.events:
            if role and ev.role != role:
                continue
            m = search(rx, ev.text)
            if m:
                yield ev, m

    def derived(self, name: str, compute: Callable[[Incident], Any]) -> Any:
        """``compute(self)``, once per incident: several detectors need the same view of the events."""
        cache = self.__dict__.setdefault("_derived", {})
        if name not in cache:
            cache[name] = compute(self)
        return cache[name]

    def first(self, pattern: str | re.Pattern[str], **kw: Any) -> tuple[Event, re.Match[str]] | None:
        return next(self.find(pattern, **kw), None)

    @property
    def version_tuple(self) -> FlinkVersion | None:
        return FlinkVersion.parse(self.flink_version)

    @property
    def records_read(self) -> int:
        """Records the logs hold that the pre-filter kept: those in ``events`` and the repeats folded into them."""
        return len(self.events) + sum(f.count for f in self.folded)

    def records_summary(self) -> str:
        """``"2,420 records (1,736 repeats folded)"``, for a report's head."""
        folded = self.records_read - len(self.events)
        return f"{self.records_read:,} records" + (f" ({folded:,} repeats folded)" if folded else "")


@dataclass(frozen=True)
class Evidence:
    file: str
    line: int
    ts: str | None
    text: str
    note: str = ""  # why this line matters

    @classmethod
    def of(cls, event: Event, note: str = "", limit: int = 600) -> "Evidence":
        return cls(event.file, event.line, event.ts, event.excerpt(limit), note)


@dataclass(frozen=True)
class Patch:
    """A proposed change: never applied to the user's files, only rendered.

    ``target`` says where the change lives: ``flink`` (the Flink configuration file / FlinkDeployment),
    ``kafka`` (Kafka client properties of a KafkaSource/KafkaSink), ``code`` (job code, see ``snippet``) or
    ``ops`` (an operational action outside configuration).

    ``urgent`` false marks an action that prevents the next incident rather than ending this one (an alert, a
    deployment rule, an upgrade): it is shown once the incident is over, never under "Do now".
    """

    target: str
    key: str
    proposed: str | None
    reason: str
    current: str | None = None
    current_source: str | None = None
    snippet: str | None = None
    urgent: bool = True


@dataclass(frozen=True)
class RootCause:
    """One verdict a detector can reach, declared up front: the decision table is generated from these.

    ``patches`` lists every change a finding with this cause may propose, as ``target:key`` (``flink:`` keys in their
    newest spelling; each finding's keys are spelled for the incident's version). A finding proposing anything
    undeclared is refused, so the declaration and the judgement cannot drift apart.
    """

    slug: str
    summary: str
    evidence_hint: str = ""  # the positive evidence required to name this cause
    patches: tuple[str, ...] = ()  # "flink:<key>", "kafka:<property>", "code:<what>", "ops:<what>"
    would_change: str = ""  # what, if seen, would change the verdict
    versions: str = ""  # the Flink releases the rule applies to; "" = the runbook's versions
    next_evidence: str = ""  # for an undetermined cause or a best guess: what to collect next (log, setting, command)


@dataclass
class Finding:
    runbook: str
    title: str
    root_cause: RootCause
    summary: str
    confidence: float
    evidence: list[Evidence] = field(default_factory=list)
    patches: list[Patch] = field(default_factory=list)
    primary: bool = False
    severity: str = "failure"  # failure: explains a job/task failure; warning: degraded but the job kept running
    first_seen: str | None = None  # timestamp of the earliest evidence (used to order findings)
    details: dict[str, Any] = field(default_factory=dict)  # detector-specific numbers (counts, tables)
    would_change: str = ""  # what the SRE can check that would change the verdict

    def to_dict(self) -> dict[str, Any]:
        return {
            "runbook": self.runbook,
            "title": self.title,
            "root_cause": {"slug": self.root_cause.slug, "summary": self.root_cause.summary},
            "summary": self.summary,
            "confidence": round(self.confidence, 2),
            "primary": self.primary,
            "severity": self.severity,
            "first_seen": self.first_seen,
            "would_change_verdict": self.would_change,
            "evidence": [asdict(e) for e in self.evidence],
            "patches": [asdict(p) for p in self.patches],
            "details": self.details,
        }


@dataclass
class Diagnosis:
    incident: Incident
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # detectors that crashed (reported, never hidden)

    @property
    def primary(self) -> Finding | None:
        return next((f for f in self.findings if f.primary), None)


def earliest_ts(events: Iterable[Event]) -> str | None:
    stamps = [e.ts for e in events if e.ts]
    return min(stamps) if stamps else None
