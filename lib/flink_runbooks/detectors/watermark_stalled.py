"""Event-time windows that never fire: the watermark reaching the window operator does not advance.

There is no exception: the job runs, reads records and writes nothing. The evidence is the watermarks, which only a
live pull of the cluster brings (``GET /jobs/:jobid/vertices/:vertexid/watermarks`` and the subtasks' metrics, see
``evidence.watermarks``) or a user attaches (the pulled folder, the REST JSON or the web UI's watermark table pasted
in a ticket). An operator's watermark is the minimum over its inputs, so the causes are told apart by the source
subtasks:

- a source subtask that read no record has no watermark (Long.MIN_VALUE) while the others advance, and no idleness
  is configured: fewer partitions or splits than source subtasks, or a partition without data
  (``idle-source-subtask``; the fix is ``withIdleness`` in code, ``table.exec.source.idle-timeout`` in SQL);
- subtasks read records but no watermark was ever emitted, with ``pipeline.auto-watermark-interval: 0``: periodic
  watermarks are switched off (``periodic-watermarks-off``);
- every subtask has a watermark but one is far behind the others while it still reads: its event time stopped or
  its partition lags (``watermark-behind``);
- otherwise the readings at hand do not tell (``undetermined``): pull the cluster.
"""
from __future__ import annotations

import datetime

from flink_runbooks.detectors.base import Detector, signature
from flink_runbooks.evidence.watermarks import (PASTED_ROW, PASTED_VALUE, SourceSubtask, VertexReading, Watermarks,
                                                read_watermarks)
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.units import format_duration
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "watermark-stalled"
# A subtask this far behind the most advanced one holds every window downstream back by as much.
BEHIND_MS = 5 * 60_000
IDLE_TIMEOUT = "table.exec.source.idle-timeout"
INTERVAL = "pipeline.auto-watermark-interval"
DEFAULT_INTERVAL = "200 ms"  # PipelineOptions.AUTO_WATERMARK_INTERVAL, 1.20.3 and 2.3.0
PROPOSED_IDLE_TIMEOUT = "1 min"


class WatermarkStalled(Detector):
    slug = SLUG
    title = "Event-time windows never fire: the watermark is stalled"
    category = "job-code"
    meaning = ("The watermark reaching an event-time window operator does not advance (a source subtask without "
               "data, periodic watermarks switched off, or one partition far behind), so windows never fire and "
               "the job writes nothing while it runs.")
    versions = "1.x, 2.x"
    signatures = (
        r"\d\.currentInputWatermark",
        r"No Watermark \(Watermarks are only available if EventTime is used\)",
        signature(PASTED_VALUE),
        signature(PASTED_ROW),
    )
    wordings = (
        Wording(SLUG, r"\d+\.currentInputWatermark\"\s*,\s*\"value\"\s*:\s*\"-9223372036854775808\"", "1.20 – 2.x",
                "org.apache.flink.runtime.rest.handler.job.metrics.JobVertexWatermarksHandler (GET /jobs/:jobid/"
                "vertices/:vertexid/watermarks; read in 1.20.3 and 2.3.0): Long.MIN_VALUE is no watermark yet",
                '[{"id":"0.currentInputWatermark","value":"-9223372036854775808"},'
                '{"id":"1.currentInputWatermark","value":"-9223372036854775808"}]'),
        Wording(SLUG, r"No Watermark \(Watermarks are only available if EventTime is used\)", "1.20 – 2.x",
                "flink-runtime-web's humanizeWatermark pipe (the web UI's Watermarks tab; read in the web bundle of "
                "flink-dist 1.20.3 and 2.3.0)",
                "0\tNo Watermark (Watermarks are only available if EventTime is used)"),
    )
    config_keys = (INTERVAL, IDLE_TIMEOUT)
    collect_next = ("the watermarks of the running job: `flink-runbooks diagnose http://<jobmanager>:8081` (or "
                    "`flink-runbooks pull URL --out DIR --job NAME`) pulls, per vertex, GET /jobs/:jobid/vertices/"
                    ":vertexid/watermarks and the subtasks' records and watermark metrics; or attach that page's JSON "
                    "and the web UI's Watermarks tab of the source and window vertices")
    root_causes = (
        RootCause("idle-source-subtask",
                  "A source subtask reads no records (fewer partitions or splits than source subtasks, or a partition "
                  "without data) and, with no idleness configured, never emits a watermark: the minimum over the "
                  "inputs stays at Long.MIN_VALUE and no window downstream fires.",
                  "A source subtask with no watermark (Long.MIN_VALUE, 'No Watermark') while other subtasks read "
                  "records and advance theirs, and no idle timeout in the configuration.",
                  patches=("code:WatermarkStrategy.withIdleness", f"flink:{IDLE_TIMEOUT}",
                           "ops:source parallelism at most the partitions"),
                  would_change="If the subtask without a watermark read records, its watermarks would be the "
                               "problem, not idleness; if every subtask had a watermark, one behind the others would "
                               "be (watermark-behind)."),
        RootCause("periodic-watermarks-off",
                  "pipeline.auto-watermark-interval is 0: periodic watermark generators (a DataStream "
                  "WatermarkStrategy such as forBoundedOutOfOrderness) are never asked for a watermark, so subtasks "
                  "that read records emit none and event-time windows never fire. (SQL's watermark assigner emits "
                  "one with every record instead: a SQL job is not stalled by it.)",
                  "pipeline.auto-watermark-interval: 0 in the configuration, and source subtasks that read records "
                  "without emitting any watermark.",
                  patches=(f"flink:{INTERVAL}",),
                  would_change="A watermark emitted by a subtask would show the interval is not what holds them "
                               "back."),
        RootCause("watermark-behind",
                  "Every subtask has a watermark, but one is far behind the others while it still reads records: "
                  "the event timestamps of its partition stopped advancing or its partition lags, and it holds every "
                  "window downstream back by as much.",
                  "The watermarks of the subtasks of one vertex (or of the source subtasks) spread by more than "
                  "5 min, the lowest one's subtask still reading records.",
                  patches=("code:event timestamps of the lagging partition", "ops:the producer of the lagging "
                                                                              "partition"),
                  would_change="A subtask without any watermark would point at an idle source subtask."),
        RootCause("undetermined",
                  "Windows wait on a watermark, but the readings at hand do not say which subtask holds it back or "
                  "why.",
                  "Watermarks that show no subtask advancing (or a pasted table only), without the source subtasks' "
                  "records and watermarks.",
                  next_evidence="the running job's watermarks and source metrics: `flink-runbooks diagnose "
                                "http://<jobmanager>:8081` pulls GET /jobs/:jobid/vertices/:vertexid/watermarks and "
                                "the subtasks' numRecordsOut and currentOutputWatermark; or attach that page's JSON "
                                "for the source and the window vertex."),
    )

    templates = {
        "idle-source-subtask": "Source subtask{s} {idle} of {vertex} read no records and emit{verb} no watermark "
                               "(Long.MIN_VALUE) while subtask{s_active} {active} read {records} records and reached "
                               "{reached}: every window downstream waits on the minimum, which stays at "
                               "Long.MIN_VALUE, so no window fires.{configured}",
        "idle-source-subtask pasted": "Subtask{s} {idle} of the pasted watermark table {have} no watermark "
                                      "(Long.MIN_VALUE, 'No Watermark') while subtask{s_active} {active} reached "
                                      "{reached}: an input without data holds the minimum, so windows downstream "
                                      "never fire.{configured}",
        "idle timeout configured": " An idle timeout of {timeout} is configured ({key}), yet the subtask holds the "
                                   "watermark: the timeout applies to SQL sources only; a DataStream source needs "
                                   "withIdleness in its WatermarkStrategy.",
        "periodic-watermarks-off": "{key} is {value} ({source}): periodic watermarks are switched off. Source "
                                   "subtask{s} {subtasks} of {vertex} read {records} records without emitting any "
                                   "watermark, so no event-time window fires.",
        "watermark-behind": "Subtask {subtask} of {vertex} is at {lowest}, {lag} behind subtask {ahead} ({highest})"
                            "{reading}: it holds every window downstream back by {lag}.{alignment}",
        "still reading": " after reading {records} records",
        "alignment": " Watermark alignment is on (drift {drift}): splits ahead of the group are paused until it "
                     "catches up.",
        "undetermined": "Windows downstream of {vertex} wait on a watermark: {what}. These readings do not say "
                        "which source subtask holds it back.",
        "none anywhere": "no subtask has one (Long.MIN_VALUE on {count} subtask{s})",
        # evidence notes
        "watermarks note": "the watermark each subtask of {vertex} received",
        "sources note": "records and emitted watermark per source subtask of {vertex}",
        "pasted note": "the pasted watermark table",
        # patches
        "with idleness": "Mark a source subtask without data idle, so the watermark advances without it: in the "
                         "job's WatermarkStrategy (every source, DataStream API).",
        "sql idle timeout": "For a SQL or Table API job: a source subtask without records for this long is marked "
                            "idle and no longer holds the watermark (default 0: never; read by 1.20 and 2.x).",
        "parallelism": "Subtask{s} {idle} of {vertex} got no data: give the source no more subtasks than the topic "
                       "has partitions (or files splits), or spread the data over every partition.",
        "interval": "Periodic watermarks need a positive interval; Flink's default is {default} (1.x and 2.x).",
        "event timestamps": "Look at the records of subtask {subtask}'s partition or split: their event timestamps "
                            "stay at {lowest} while the others reached {highest} (a producer replaying old data, a "
                            "clock or timestamp field that stopped, or a partition far behind in its backlog).",
        "producer": "Check the producer and the consumer lag of the partition read by subtask {subtask} of {vertex}.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        readings = read_watermarks(incident)
        if not readings.any:
            return []
        return self._pulled(incident, readings) or self._pasted(incident, readings)

    # --------------------------------------------------------------------------------------------- a pulled job

    def _pulled(self, incident: Incident, readings: Watermarks) -> list[Finding]:
        for job in readings.pulled_jobs:
            if any(v.status not in (None, "RUNNING") for v in job.vertices):
                continue  # tasks deploying, restarting or finishing: their watermarks are not yet (or no longer) kept
            vertices = [v for v in readings.vertices if v.jid == job.jid]
            sources = [v for v in vertices if v.sources]
            windows = [v for v in vertices if v.received]
            stalled = [v for v in windows if v.without_watermark]
            sql = any("WatermarkAssigner" in v.vertex or "WindowAggregate" in v.vertex for v in vertices)
            for vertex in sources:
                idle = [s for s in vertex.sources if not s.records and s.watermark is None]
                active = [s for s in vertex.sources if s.records and s.watermark is not None]
                reading = [s for s in vertex.sources if s.records]
                # an idle subtask holds nothing back once it is marked idle: only windows that wait tell
                if idle and active and stalled:
                    return [self._idle(incident, vertex, idle, active, stalled, sql)]
                interval = incident.config.get_duration_ms(INTERVAL)
                if (reading and interval == 0 and (stalled or not windows)
                        and not any(s.watermark is not None for s in vertex.sources)):
                    return [self._interval_off(incident, vertex, reading, stalled)]
                behind = _behind({s.subtask: s.watermark for s in vertex.sources})
                if behind:
                    lagging = next(s for s in vertex.sources if s.subtask == behind[0])
                    return [self._behind(incident, vertex, behind, lagging, windows)]
            for vertex in windows:
                behind = _behind(vertex.received)
                if behind:
                    return [self._behind(incident, vertex, behind, None, [])]
            if job.history:
                continue  # the job failed and restarted: windows without a watermark yet say nothing of a stall
            if stalled and not (sources and all(s.records == 0 for v in sources for s in v.sources)):
                # a source that read nothing at all is no stall of the watermark: there is nothing to window
                vertex = stalled[0]
                return [self._undetermined(vertex, [self._event(vertex)], 0.4)]
        return []

    def _idle(self, incident: Incident, vertex: VertexReading, idle: list[SourceSubtask], active: list[SourceSubtask],
              stalled: list[VertexReading], sql: bool) -> Finding:
        configured, patches = self._idleness(incident, vertex.vertex, [s.subtask for s in idle], sql)
        summary = self.say(
            "idle-source-subtask", s=_s(idle), idle=_names(s.subtask for s in idle), vertex=vertex.vertex,
            verb="" if len(idle) > 1 else "s", s_active=_s(active), active=_names(s.subtask for s in active),
            records=f"{int(sum(s.records or 0 for s in active)):,}",
            reached=_when(max(s.watermark for s in active if s.watermark is not None)), configured=configured)
        events = [self._event(vertex, sources=True)] + [self._event(v) for v in stalled[:2]]
        return self.finding("idle-source-subtask", summary, events, confidence=0.9, patches=patches,
                            notes=self._notes(events), details=_details(vertex, stalled))

    def _idleness(self, incident: Incident, vertex: str, idle: list[int], sql: bool | None):
        timeout = incident.config.get_duration_ms(IDLE_TIMEOUT)
        configured = ""
        if timeout:
            configured = self.say("idle timeout configured", timeout=format_duration(timeout), key=IDLE_TIMEOUT)
        patches = [self.code_patch("WatermarkStrategy.withIdleness",
                                   "WatermarkStrategy.<Event>forBoundedOutOfOrderness(Duration.ofSeconds(5))\n"
                                   "    .withIdleness(Duration.ofMinutes(1))", self.say("with idleness"))]
        if sql is not False and not timeout:
            patches.append(self.flink_patch(incident, IDLE_TIMEOUT, PROPOSED_IDLE_TIMEOUT,
                                            self.say("sql idle timeout")))
        patches.append(self.ops_patch("source parallelism at most the partitions",
                                      self.say("parallelism", s=_s(idle), idle=_names(idle), vertex=vertex or "the "
                                               "source"), urgent=False))
        return configured, patches

    def _interval_off(self, incident: Incident, vertex: VertexReading, reading: list[SourceSubtask],
                      stalled: list[VertexReading]) -> Finding:
        current = incident.config.lookup(INTERVAL)
        summary = self.say("periodic-watermarks-off", key=current.key if current else INTERVAL,
                           value=current.value if current else "0", source=str(current.source) if current else "config",
                           s=_s(reading), subtasks=_names(s.subtask for s in reading), vertex=vertex.vertex,
                           records=f"{int(sum(s.records or 0 for s in reading)):,}")
        patch = self.flink_patch(incident, INTERVAL, DEFAULT_INTERVAL, self.say("interval", default=DEFAULT_INTERVAL))
        events = [self._event(vertex, sources=True)] + [self._event(v) for v in stalled[:2]]
        return self.finding("periodic-watermarks-off", summary, events, confidence=0.85, patches=[patch],
                            notes=self._notes(events), details=_details(vertex, stalled))

    def _behind(self, incident: Incident, vertex: VertexReading, behind: tuple[int, int, int, int],
                lagging: SourceSubtask | None, stalled: list[VertexReading]) -> Finding:
        subtask, lowest, ahead, highest = behind
        drift = lagging.alignment_drift_ms if lagging else None
        reading = self.say("still reading", records=f"{int(lagging.records):,}") if lagging and lagging.records else ""
        lag = format_duration(highest - lowest)
        summary = self.say("watermark-behind", subtask=subtask, vertex=vertex.vertex or "the pasted table",
                           lowest=_when(lowest), lag=lag, ahead=ahead, highest=_when(highest), reading=reading,
                           alignment=self.say("alignment", drift=format_duration(abs(drift))) if drift else "")
        patches = [self.code_patch("event timestamps of the lagging partition", None,
                                   self.say("event timestamps", subtask=subtask, lowest=_when(lowest),
                                            highest=_when(highest))),
                   self.ops_patch("the producer of the lagging partition",
                                  self.say("producer", subtask=subtask, vertex=vertex.vertex or "the source"))]
        events = [self._event(vertex, sources=bool(vertex.sources))] + [self._event(v) for v in stalled[:1]]
        return self.finding("watermark-behind", summary, events, confidence=0.75 if lagging else 0.6,
                            patches=patches, notes=self._notes(events), details=_details(vertex, stalled))

    def _undetermined(self, vertex: VertexReading, events: list[Event], confidence: float) -> Finding:
        none = vertex.without_watermark
        what = self.say("none anywhere", count=len(none), s=_s(none))
        summary = self.say("undetermined", vertex=vertex.vertex or "the vertex of the pasted watermark table",
                           what=what)
        return self.finding("undetermined", summary, events, confidence=confidence, notes=self._notes(events),
                            details=_details(vertex, []))

    # --------------------------------------------------------------------------------------------- pasted tables

    def _pasted(self, incident: Incident, readings: Watermarks) -> list[Finding]:
        for table in readings.pasted:
            idle, active = table.without_watermark, table.with_watermark
            events = [table.event] if table.event else []
            if idle and active:
                configured, patches = self._idleness(incident, "", idle, None)
                summary = self.say("idle-source-subtask pasted", s=_s(idle), idle=_names(idle),
                                   have="have" if len(idle) > 1 else "has", s_active=_s(active),
                                   active=_names(active), reached=_when(max(active.values())), configured=configured)
                return [self.finding("idle-source-subtask", summary, events, confidence=0.6, patches=patches,
                                     notes={0: self.say("pasted note")}, details=_details(table, []))]
            behind = _behind(table.received)
            if behind:
                return [self._behind(incident, table, behind, None, [])]
            if idle:
                return [self._undetermined(table, events, 0.3)]
        return []

    # --------------------------------------------------------------------------------------------- evidence

    def _event(self, vertex: VertexReading, sources: bool = False) -> Event:
        """The reading as an evidence record pointing at the REST document it comes from."""
        if sources:
            parts = [f"subtask {s.subtask}: {_count(s.records)} records, "
                     + (f"watermark {_when(s.watermark)}" if s.watermark is not None else _when(None))
                     + (f", idle for {format_duration(s.idle_ms)}" if s.idle_ms is not None else "")
                     for s in vertex.sources]
            logger, where = "sources", vertex.metrics_document
        else:
            parts = [f"subtask {s}: {_when(w)}" for s, w in sorted(vertex.received.items())]
            logger, where = "watermarks", vertex.document
        return Event(file=where or vertex.document or "rest", line=1, logger=logger, thread=vertex.vertex,
                     role="jobmanager", message=f"{vertex.vertex}: " + "; ".join(parts))

    def _notes(self, events: list[Event]) -> dict[int, str]:
        return {i: self.say("sources note", vertex=ev.thread) if ev.logger == "sources" else
                self.say("watermarks note", vertex=ev.thread) if ev.logger == "watermarks" else self.say("pasted note")
                for i, ev in enumerate(events)}


def _behind(watermarks: dict[int, int | None]) -> tuple[int, int, int, int] | None:
    """(lowest subtask, its watermark, highest subtask, its watermark) when every subtask has a watermark and they
    spread by BEHIND_MS or more."""
    if len(watermarks) < 2 or any(w is None for w in watermarks.values()):
        return None
    low = min(watermarks, key=lambda s: watermarks[s])
    high = max(watermarks, key=lambda s: watermarks[s])
    if watermarks[high] - watermarks[low] < BEHIND_MS:
        return None
    return low, watermarks[low], high, watermarks[high]


def _details(vertex: VertexReading, stalled: list[VertexReading]) -> dict:
    return {"vertex": vertex.vertex, "job": vertex.job,
            "watermarks": {str(s): w for s, w in sorted(vertex.received.items())},
            "sources": [{"subtask": s.subtask, "records": s.records, "watermark": s.watermark,
                         "idle_ms": s.idle_ms} for s in vertex.sources],
            "downstream_vertices": [v.vertex for v in stalled]}


def _when(ms: int | None) -> str:
    if ms is None:
        return "no watermark (Long.MIN_VALUE)"
    try:
        at = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return f"{at:%Y-%m-%d %H:%M:%S} UTC ({ms})"


def _count(value: float | None) -> str:
    return "?" if value is None else f"{int(value):,}"


def _names(subtasks) -> str:
    return ", ".join(str(s) for s in subtasks)


def _s(items) -> str:
    return "s" if len(list(items)) > 1 else ""
