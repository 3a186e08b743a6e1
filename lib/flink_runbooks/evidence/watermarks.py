"""Watermarks: how far event time got in each subtask of a job, read from a pulled (or attached) cluster's REST
documents and from the copies people paste into tickets (the web UI's watermark table, the REST JSON).

Windows on event time fire when the watermark that reaches their operator passes their end; an operator's watermark
is the minimum over its input channels, so one source subtask that never emits a watermark (Long.MIN_VALUE, the web
UI's "No Watermark") holds back every window downstream of it. What this module reads, per job vertex:

- the watermark each subtask received (``GET /jobs/:jobid/vertices/:vertexid/watermarks``, ``<subtask>.
  currentInputWatermark``; a source vertex has no input and lists none);
- per subtask, the records its source read and the watermark its chain emitted (``numRecordsOut`` of the source
  operator, ``currentOutputWatermark`` of each operator), the FLIP-33 source metrics (``sourceIdleTime``,
  ``currentEmitEventTimeLag``, ``watermarkAlignmentDrift``) and the records a window operator emitted.

It measures and never judges: the detector decides what the readings mean.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flink_runbooks.model import NO_WATERMARK, Event, Incident, RestJob, RestVertex

# A REST metric id is "<operator>.<metric>" for operator metrics, "<metric>" for the task's own.
_SOURCE_OPERATOR = re.compile(r"^Source__")
_WINDOW_OPERATOR = re.compile(r"Window", re.IGNORECASE)

# The REST JSON of the watermarks page as pasted (compact, one metric per line, or the whole array on one line):
#   {"id":"0.currentInputWatermark","value":"-9223372036854775808"}
PASTED_JSON = re.compile(r'"id"\s*:\s*"(?P<subtask>\d+)\.currentInputWatermark"\s*,\s*"value"\s*:\s*"?(?P<value>-?\d+)')
# Pretty-printed, the id and the value are on two lines.
PASTED_ID = re.compile(r'"id"\s*:\s*"(?P<subtask>\d+)\.currentInputWatermark"\s*,?\s*$')
PASTED_VALUE = re.compile(r'^\s*"value"\s*:\s*"(?P<value>-?\d{10,19})"')
# The web UI's watermark table (flink-runtime-web's humanizeWatermark pipe, 1.x and 2.x), copied row by row:
#   0   No Watermark (Watermarks are only available if EventTime is used)
#   1   1773453718000   2026-03-14 02:01:58
NO_WATERMARK_TEXT = "No Watermark (Watermarks are only available if EventTime is used)"
PASTED_ROW = re.compile(r"^\s*(?P<subtask>\d{1,4})\s+(?:(?P<none>No Watermark \(Watermarks are only available if "
                        r"EventTime is used\))|(?P<value>-?\d{13}))(?:\s|$)")
# The same rows anywhere in a record: a paste read as plain text joins its lines into one.
PASTED_ROWS = re.compile(r"(?<![\w./:-])" + PASTED_ROW.pattern.removeprefix(r"^\s*"))


@dataclass
class SourceSubtask:
    """One subtask of a source vertex: what it read and how far the watermark it emitted got."""

    subtask: int
    records: float | None  # records the source operator emitted (numRecordsOut)
    watermark: int | None  # the furthest currentOutputWatermark of its chain; None: no watermark yet
    idle_ms: float | None = None  # sourceIdleTime (FLIP-33)
    emit_lag_ms: float | None = None  # currentEmitEventTimeLag (FLIP-33)
    alignment_drift_ms: float | None = None  # watermarkAlignmentDrift (FLIP-182)


@dataclass
class VertexReading:
    """What one vertex of a job says about event time."""

    job: str
    jid: str | None
    vertex: str
    received: dict[int, int | None] = field(default_factory=dict)  # subtask -> input watermark; None: none yet
    sources: list[SourceSubtask] = field(default_factory=list)  # when it is a source vertex with metrics
    window_records_out: float | None = None  # records its window operators emitted (windows fired)
    document: str | None = None  # where the watermarks come from
    metrics_document: str | None = None  # where the subtasks' metrics come from
    event: Event | None = None  # a pasted line it comes from

    @property
    def without_watermark(self) -> list[int]:
        return sorted(s for s, w in self.received.items() if w is None)

    @property
    def with_watermark(self) -> dict[int, int]:
        return {s: w for s, w in sorted(self.received.items()) if w is not None}


@dataclass
class Watermarks:
    """The watermark readings of an incident: per vertex of each pulled job, and pasted tables."""

    vertices: list[VertexReading] = field(default_factory=list)
    pasted: list[VertexReading] = field(default_factory=list)
    pulled_jobs: list[RestJob] = field(default_factory=list)  # running jobs whose watermarks were pulled

    @property
    def any(self) -> bool:
        return bool(self.vertices or self.pasted)


def watermark_of(value: int | float | None) -> int | None:
    """A watermark as epoch milliseconds, None for Long.MIN_VALUE (no watermark yet) or no value."""
    if value is None or int(value) <= NO_WATERMARK:
        return None
    return int(value)


def read_watermarks(incident: Incident) -> Watermarks:
    """The watermarks of every job vertex a pull brought (or a user attached), and those pasted in the logs."""
    out = Watermarks()
    for snapshot in incident.rest:
        for job in snapshot.jobs:
            readings = [_vertex_reading(job, v) for v in job.vertices if v.watermarks or v.subtask_metrics]
            if readings:
                out.pulled_jobs.append(job)
                out.vertices += readings
    out.pasted = pasted_watermarks(incident.events)
    return out


def _vertex_reading(job: RestJob, vertex: RestVertex) -> VertexReading:
    reading = VertexReading(job=job.name or job.jid, jid=job.jid, vertex=vertex.name,
                            received={int(s): watermark_of(w) for s, w in vertex.watermarks.items()},
                            document=vertex.documents.get("watermarks"),
                            metrics_document=vertex.documents.get("subtask-metrics"))
    if not reading.received:
        # the page is [] until the JobManager's metric fetcher has answered once; the subtasks' own metric may not be
        reading.received = {int(s): watermark_of(m["currentInputWatermark"]) for s, m in vertex.subtask_metrics.items()
                            if "currentInputWatermark" in m}
        if reading.received:
            reading.document = reading.metrics_document
    window_out = []
    for index, metrics in sorted(vertex.subtask_metrics.items(), key=lambda kv: int(kv[0])):
        source_ops = {name.rsplit(".", 1)[0] for name in metrics if _SOURCE_OPERATOR.match(name)}
        if source_ops:
            reading.sources.append(_source_subtask(int(index), metrics, source_ops))
        window_out += [v for name, v in metrics.items() if name.endswith(".numRecordsOut")
                       and _WINDOW_OPERATOR.search(name.rsplit(".", 1)[0])]
    if window_out:
        reading.window_records_out = sum(window_out)
    return reading


def _source_subtask(index: int, metrics: dict[str, float], source_ops: set[str]) -> SourceSubtask:
    def of_source(metric: str) -> float | None:
        values = [metrics[f"{op}.{metric}"] for op in sorted(source_ops) if f"{op}.{metric}" in metrics]
        return sum(values) if values else None

    emitted = [watermark_of(v) for name, v in metrics.items() if name.endswith(".currentOutputWatermark")]
    emitted = [w for w in emitted if w is not None]
    return SourceSubtask(subtask=index, records=of_source("numRecordsOut"), watermark=max(emitted) if emitted else None,
                         idle_ms=_positive(of_source("sourceIdleTime")),
                         emit_lag_ms=_positive(of_source("currentEmitEventTimeLag")),
                         alignment_drift_ms=of_source("watermarkAlignmentDrift"))


def _positive(value: float | None) -> float | None:
    return value if value is not None and value >= 0 else None  # -1: the source does not report it


def pasted_watermarks(events: list[Event]) -> list[VertexReading]:
    """The watermark tables pasted in the logs (REST JSON or the web UI's rows): one reading per run of rows that
    restarts at subtask 0, each pointing at its first line."""
    rows: list[tuple[Event, int, int | None]] = []
    pending: tuple[Event, int] | None = None
    for ev in events:
        for text in [line for block in [ev.message, *ev.body] for line in block.split("\n")]:
            for m in PASTED_JSON.finditer(text):
                rows.append((ev, int(m["subtask"]), watermark_of(int(m["value"]))))
            for m in PASTED_ROWS.finditer(text):
                rows.append((ev, int(m["subtask"]), None if m["none"] else watermark_of(int(m["value"]))))
            if m := PASTED_ID.search(text):
                pending = (ev, int(m["subtask"]))
            elif pending and (m := PASTED_VALUE.match(text)):
                rows.append((pending[0], pending[1], watermark_of(int(m["value"]))))
                pending = None
    tables: list[VertexReading] = []
    for ev, subtask, value in rows:
        if not tables or subtask in tables[-1].received:
            tables.append(VertexReading(job="", jid=None, vertex="", document=ev.file, event=ev))
        tables[-1].received[subtask] = value
    return tables
