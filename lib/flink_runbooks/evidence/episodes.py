"""Failure episodes and their first fault.

An episode runs from the first failure after the job was RUNNING to the job being RESTARTING again, FAILED, or
recovered. Within an episode the *first fault* is the earliest failure whose cause is not a known secondary
symptom: when a TaskManager dies, its peers log ``RemoteTransportException`` and ``Buffer pool is destroyed`` and
every cancelled task logs interruption noise; none of that is why the job failed.

A pulled bundle's exception history (``GET /jobs/:jobid/exceptions``) says it exactly: each entry is one failure
the JobManager handled, with its root cause, time, task, TaskManager and failure labels, and the failures beside
it. When the incident has one, a job's episodes are its entries; each failure is the log's own record of it when
the log has one (so nothing is counted twice), else a record made from the entry. Episodes the history does not
reach (it keeps the newest entries) still come from the log.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import datetime

from flink_runbooks.model import ChainLink, Event, Incident, RestFailure, RestFailureEntry, RestJob
from flink_runbooks.parse.records import assemble
from flink_runbooks.vocabulary.lifecycle import (COORDINATOR_FAILOVER, GLOBAL_FAILURE, JOB_STATE, RECOVERY_SUPPRESSED,
                                                 TASK_FAILED)


# Causes that are consequences of another fault (a peer died, the task was cancelled, the job is shutting down).
SECONDARY_SYMPTOMS = re.compile(
    r"Buffer pool is destroyed|PartitionNotFoundException|CancelTaskException|TaskNotRunningException|"
    r"java\.lang\.InterruptedException|Task was cancelled|Task .* was canceled|"
    r"Connection unexpectedly closed by remote task manager|RemoteTransportException|"
    r"LocalTransportException|Lost connection to task manager|PartitionException|"
    r"ExecutionGraphException: The execution attempt|FlinkJobNotFoundException|"
    r"Producer is closed forcefully|Failing this task because|Job was cancelled|"
    r"JobCancellationException|RecipientUnreachableException|the job is being cancelled|"
    r"Received cancel|Discarding the results produced by task execution"
)
# A failure line of this kind counts as a fault: a task failed, a global failure, the job leaving RUNNING, or a
# source's split enumerator on the JobManager failing the job over (its exception is the fault, as a task's is).
FAILURE_LINE = re.compile(rf"{TASK_FAILED.pattern}|{GLOBAL_FAILURE.pattern}|{COORDINATOR_FAILOVER.pattern}|"
                          r"switched from state RUNNING to (?:FAILING|RESTARTING|FAILED)")


@dataclass
class Episode:
    job: str | None
    start: str | None
    end: str | None = None
    outcome: str = "open"  # restarting | failed | recovered | open
    failures: list[Event] = field(default_factory=list)  # failure events in time order
    suppressed: Event | None = None  # the "Recovery is suppressed" event when restarts ran out
    recovered: bool = False  # the job was RUNNING again after this episode's restart
    root: Event | None = None  # the root cause the JobManager named (from the exception history)
    # the failure labels (1.18+) of each failure that has any, by the place of its record (file, line)
    labels: dict[tuple[str, int], dict[str, str]] = field(default_factory=dict)

    @property
    def first_fault(self) -> Event | None:
        """The root cause the exception history names unless it is a secondary symptom, else the earliest failure
        whose cause is not one (the earliest failure when all are)."""
        if self.root is not None and not is_secondary(self.root):
            return self.root
        for ev in self.failures:
            if not is_secondary(ev):
                return ev
        return self.failures[0] if self.failures else None


def is_secondary(event: Event) -> bool:
    """True when the event's deepest cause is a known consequence of another fault."""
    causes = [c for c in event.chain if c.kind != "suppressed"]
    if not causes:
        return bool(SECONDARY_SYMPTOMS.search(event.message))
    deepest = causes[-1]
    return bool(SECONDARY_SYMPTOMS.search(f"{deepest.cls}: {deepest.message}"))


def fault_text(event: Event) -> str:
    """``Class: message`` of the deepest cause, skipping Flink's wrappers (what to name as the fault)."""
    causes = [c for c in event.chain if c.kind != "suppressed" and not RECOVERY_SUPPRESSED.search(c.message)]
    if not causes:
        return event.message
    deepest = causes[-1]
    return f"{deepest.cls}: {deepest.message}" if deepest.message else deepest.cls


def episodes(incident: Incident) -> list[Episode]:
    """The failure episodes, in time order: from the exception history where a pulled bundle has one, else from
    the JobManager's failure lines."""
    jobs = [job for snapshot in incident.rest for job in snapshot.jobs if job.history]
    if not jobs:
        return _log_episodes(incident)
    return incident.derived("history_episodes", lambda inc: _history_episodes(inc, jobs, _log_episodes(inc)))


def _log_episodes(incident: Incident) -> list[Episode]:
    """Split the JobManager's failure lines into episodes, in time order."""
    out: list[Episode] = []
    current: Episode | None = None
    for ev in incident.events:
        state = JOB_STATE.search(ev.message)
        is_failure = bool(FAILURE_LINE.search(ev.message)) or (ev.chain and ev.level in ("ERROR", "WARN") and
                                                                 TASK_FAILED.search(ev.message) is not None)
        if state and state["to"] in ("RESTARTING", "FAILED", "FAILING"):
            if current is None:
                current = Episode(state["job"], ev.ts)
                out.append(current)
            if ev.chain:
                current.failures.append(ev)
            sup = next((c for c in ev.chain if RECOVERY_SUPPRESSED.search(c.message)), None)
            if sup or RECOVERY_SUPPRESSED.search(ev.text):
                current.suppressed = current.suppressed or ev
            if state["to"] in ("RESTARTING", "FAILED"):
                current.outcome = "restarting" if state["to"] == "RESTARTING" else "failed"
                current.end = ev.ts
                current = None
            continue
        if state and state["to"] == "RUNNING":
            if out and current is None and out[-1].outcome == "restarting":
                out[-1].recovered = True
            continue
        if is_failure:
            if current is None:
                current = Episode(None, ev.ts)
                out.append(current)
            current.failures.append(ev)
    return out


# A process or a client that saw the job or a JVM end: fatal errors of a TaskManager/JobManager, the CLI's
# "program finished with the following exception", the job result a client received.
FATAL_OR_CLIENT_FAILURE = re.compile(
    r"FatalExitExceptionHandler|produced an uncaught exception|Fatal error occurred in|"
    r"Exception in thread \"|Terminating the (?:TaskManager|JVM)|Shutting (?:down )?TaskManager.* due to|"
    r"The program finished with the following exception|Job execution failed|JobExecutionException|"
    r"Job (?:failed|has failed)|ProgramInvocationException|JobSubmissionException|Could not start the JobMaster")
# Lines that only exist in a full log of a running cluster: their absence marks an excerpt.
LIFECYCLE = re.compile(JOB_STATE.pattern + r"|Triggering checkpoint \d+|Completed checkpoint \d+|\(Version: ")


def is_excerpt(incident: Incident) -> bool:
    """True when the incident is a pasted excerpt rather than a process's log: no job state changes, no
    checkpoint lifecycle, no start-up banner (so a failure cannot be read from the job's states)."""
    return not any(incident.find(LIFECYCLE))


def failure_events(incident: Incident) -> list[Event]:
    """Records that show a job or task ended by a fault, in time order (the first one first).

    From a full log: the failures of every episode (a task FAILED, the job FAILING/RESTARTING/FAILED, a global
    failure), then fatal errors of a process and client-side job failures. From an excerpt, which has none of the
    job's state changes: any exception logged at ERROR or without a level (a pasted stack trace) whose deepest
    cause is not a known consequence of another fault.
    """
    found: list[Event] = []
    for ep in episodes(incident):
        found.extend(ep.failures)
        if not ep.failures and ep.outcome in ("restarting", "failed"):
            found.extend(ev for ev in incident.events if ev.ts == ep.end and JOB_STATE.search(ev.message))
    seen = {id(ev) for ev in found}
    for ev in incident.events:
        if id(ev) in seen:
            continue
        if (ev.chain or ev.level in ("ERROR", "FATAL")) and FATAL_OR_CLIENT_FAILURE.search(ev.text):
            found.append(ev)
            seen.add(id(ev))
    if not found and is_excerpt(incident):
        found = [ev for ev in incident.events
                 if ev.chain and ev.level in (None, "ERROR", "FATAL") and not is_secondary(ev)]
        found = found or [ev for ev in incident.events if ev.chain and ev.level in (None, "ERROR", "FATAL")]
    order = {id(ev): i for i, ev in enumerate(incident.events)}
    return sorted(found, key=lambda ev: order.get(id(ev), 0))


def first_fault(incident: Incident) -> Event | None:
    """The first fault of the first failure episode (or of the excerpt): not a secondary symptom when avoidable."""
    eps = [ep for ep in episodes(incident) if ep.failures]
    if eps:
        return eps[0].first_fault
    events = failure_events(incident)
    # A pasted excerpt may hold the restart strategy's verdict or a wrapper without its cause first.
    named = [ev for ev in events if any(c.kind != "suppressed" and not RECOVERY_SUPPRESSED.search(c.message)
                                        for c in ev.chain)]
    return next((ev for ev in named + events if not is_secondary(ev)), events[0] if events else None)


# ------------------------------------------------------------------------------------------ the exception history

HISTORY_SOURCE = "REST exception history"
# A log and the REST API tell the same failure at the same millisecond, the log in its cluster's time zone (whole
# quarter hours away from UTC): what is left over is how far apart two records of one failure may be.
_SAME_FAILURE_S = 0.5
_ZONE_STEP_S = 900


def history_event(job: RestJob, failure: RestFailure, offset_s: float = 0.0) -> Event:
    """A record of one failure of the exception history, shaped like the JobManager's log record of it (its trace
    read by the same parser), placed in the exceptions document, its time shifted to the logs' time zone."""
    lines = [line for line in failure.stacktrace.splitlines() if line.strip()][:400]
    chain: list[ChainLink] = []
    frames: list[str] = []
    for record in assemble(lines)[:1]:
        chain = [ChainLink(c["cls"], c["message"], c["kind"]) for c in record.chain]
        frames = list(record.frames)
    if not chain and failure.exception:
        chain = [ChainLink(failure.exception, "")]
    where = failure.location or failure.taskmanager
    what = (f"{failure.task} on {where or 'an unknown TaskManager'} failed" if failure.task
            else "the job failed (global failure)")
    labels = "".join(f" [{k}: {v}]" for k, v in sorted(failure.labels.items()))
    message = f"Job {job.name or 'job'} ({job.jid}): {what}.{labels}"
    return Event(file=job.documents.get("exceptions", "exceptions.json"), line=failure.line or 0,
                 ts=stamp_of_millis(failure.timestamp_ms, offset_s), level="ERROR", logger=HISTORY_SOURCE, message=message,
                 chain=chain, frames=frames, role="jobmanager")


def stamp_of_millis(ms: int | None, offset_s: float) -> str | None:
    if ms is None:
        return None
    t = datetime.datetime.fromtimestamp(ms / 1000 + offset_s, datetime.timezone.utc)
    return f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond // 1000:03d}"


def wall_seconds(ts: str | None) -> float | None:
    """A log's wall-clock time read as if it were UTC (the offset of its zone is learnt from the pairs)."""
    from flink_runbooks.parse.timestamps import parse_ts

    t = parse_ts(ts)
    return t.replace(tzinfo=datetime.timezone.utc).timestamp() if t else None


def _cause_key(chain: list[ChainLink]) -> tuple[str, str] | None:
    causes = [c for c in chain if c.kind != "suppressed" and not RECOVERY_SUPPRESSED.search(c.message)]
    if not causes:
        return None
    deepest = causes[-1]
    return deepest.cls.rsplit(".", 1)[-1], deepest.message[:200]


def _task_key(name: str | None) -> tuple[str, int | None] | None:
    """``Map (1/2) - execution #3`` (the history) is ``("Map (1/2)", 3)``."""
    m = re.match(r"(?P<task>.*? \(\d+/\d+\))(?: - execution #(?P<attempt>\d+))?", name or "")
    return (m["task"].strip(), int(m["attempt"]) if m["attempt"] else None) if m else None


# "Map (1/2)#3 (attempt id) switched from RUNNING to FAILED": the attempt number is "#3", or (1.16+) the last part
# of the attempt id "<graph>_<vertex>_<subtask>_<attempt>"; older attempt ids do not tell it.
_LOGGED_TASK = re.compile(r"(?P<task>[^\s(][^()]*? \(\d+/\d+\))(?:#(?P<attempt>\d+))?"
                          r"(?: \((?:[0-9a-f]+_){3}(?P<number>\d+)\)| \([0-9a-f_]+\))? switched from \w+ to FAILED")


def _log_task(ev: Event) -> tuple[str, int | None] | None:
    m = _LOGGED_TASK.search(ev.message)
    if not m:
        return None
    attempt = m["attempt"] or m["number"]
    return m["task"].strip(), int(attempt) if attempt else None


def _same_task(history: tuple[str, int | None] | None, logged: tuple[str, int | None] | None) -> bool:
    if history is None or logged is None:
        return history is None and logged is None  # a global failure is not a task's
    return history[0] == logged[0] and None in (history[1], logged[1]) or history == logged


def _history_episodes(incident: Incident, jobs: list[RestJob], from_log: list[Episode]) -> list[Episode]:
    failures_of = [(job, entry, failure) for job in jobs for entry in job.history
                   for failure in [*entry.concurrent, entry.root]]
    candidates = [ev for ep in from_log for ev in ep.failures] + [
        ev for ev in incident.events if ev.chain and (JOB_STATE.search(ev.message) or TASK_FAILED.search(ev.message)
                                                      or _derived_from_history(ev))]
    matched, offset = _match_log_records(failures_of, candidates)
    out: list[Episode] = []
    covered: set[int] = set()
    for job in jobs:
        for n, entry in enumerate(job.history):
            records = []
            labels = {}
            for failure in [entry.root, *entry.concurrent]:
                ev = matched.get(id(failure)) or history_event(job, failure, offset)
                covered.add(id(ev))
                records.append((failure.timestamp_ms or 0, ev))
                if failure.labels:
                    labels[(ev.file, ev.line)] = dict(failure.labels)
            root = records[0][1]
            failures = [ev for _ms, ev in sorted(records, key=lambda r: r[0])]
            last = n == len(job.history) - 1
            final = last and job.state in ("FAILED", "FAILING")
            episode = Episode(job.jid, failures[0].ts, end=root.ts, outcome="failed" if final else "restarting",
                              failures=failures, root=root, labels=labels,
                              recovered=not last or job.state in ("RUNNING", "FINISHED"))
            suppressed = next((ev for ev in failures if RECOVERY_SUPPRESSED.search(ev.text)), None)
            episode.suppressed = suppressed if final else None
            out.append(episode)
    # what the history does not reach: other jobs' episodes, and the log's episodes older than the history (it keeps
    # the newest entries); an episode of the log that tells a failure of the history is that history's
    since = min((ep.start for ep in out if ep.start), default=None)
    ours = {job.jid for job in jobs}
    for ep in from_log:
        if any(id(ev) in covered for ev in ep.failures):
            continue
        if ep.job in ours or ep.job is None:
            if since is None or (ep.end or ep.start or "~") >= since:
                continue
        out.append(ep)
    return sorted(out, key=lambda ep: ep.start or "")


def _derived_from_history(ev: Event) -> bool:
    """A record the pull wrote from the exception history (no JobManager log could be pulled)."""
    return (ev.logger or "").endswith(".rest.exception-history")


def _match_log_records(failures_of: list[tuple[RestJob, RestFailureEntry, RestFailure]],
                       candidates: list[Event]) -> tuple[dict[int, Event], float]:
    """Each failure of the history paired with the log record of it (same deepest cause, same task attempt, the same
    moment up to the logs' time zone), and the logs' offset from UTC in seconds."""
    matched: dict[int, Event] = {}
    used: set[int] = set()
    offsets: list[float] = []
    for _job, _entry, failure in failures_of:
        key = _cause_key(history_event(_job, failure).chain)
        at = failure.timestamp_ms / 1000 if failure.timestamp_ms is not None else None
        task = _task_key(failure.task)
        best = None
        for ev in candidates:
            if id(ev) in used or key is None or _cause_key(ev.chain) != key:
                continue
            if not _derived_from_history(ev) and not _same_task(task, _log_task(ev)):
                continue
            when = wall_seconds(ev.ts)
            if at is None or when is None:
                continue
            delta = when - at
            off_zone = abs(delta - round(delta / _ZONE_STEP_S) * _ZONE_STEP_S)
            # the JobManager's record first: it is the one that says where the task ran
            rank = (ev.role != "jobmanager", off_zone)
            if off_zone <= _SAME_FAILURE_S and (best is None or rank < best[0]):
                best = (rank, ev, round(delta / _ZONE_STEP_S) * _ZONE_STEP_S)
        if best is not None:
            matched[id(failure)] = best[1]
            used.add(id(best[1]))
            offsets.append(best[2])
    offset = max(set(offsets), key=offsets.count) if offsets else 0.0
    return matched, offset


def with_failure_labels(incident: Incident, findings: list) -> None:
    """Each evidence line that records a failure the exception history labels (failure enrichers, 1.18+) says
    its labels: they are the cluster's own classification of that failure."""
    from dataclasses import replace

    if not any(job.history for snapshot in incident.rest for job in snapshot.jobs):
        return
    labelled = {place: labels for ep in episodes(incident) for place, labels in ep.labels.items()}
    if not labelled:
        return
    for finding in findings:
        for i, evidence in enumerate(finding.evidence):
            labels = labelled.get((evidence.file, evidence.line))
            if labels:
                said = "failure labels: " + ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))
                note = f"{evidence.note}; {said}" if evidence.note else said
                finding.evidence[i] = replace(evidence, note=note)


def find_with_history(incident: Incident, pattern: re.Pattern[str]) -> list[tuple[Event, re.Match[str]]]:
    """Records matching ``pattern``: the logs' own, else (no log tells it, as when no JobManager log was pulled) the
    failures of the exception history that do, in time order."""
    found = list(incident.find(pattern))
    if found or not any(job.history for snapshot in incident.rest for job in snapshot.jobs):
        return found
    out = []
    for ep in episodes(incident):
        for ev in ep.failures:
            m = ev.search(pattern)
            if m and all(ev is not seen for seen, _m in out):
                out.append((ev, m))
    return out
