"""Failure episodes and their first fault.

An episode runs from the first failure after the job was RUNNING to the job being RESTARTING again, FAILED, or
recovered. Within an episode the *first fault* is the earliest failure whose cause is not a known secondary
symptom: when a TaskManager dies, its peers log ``RemoteTransportException`` and ``Buffer pool is destroyed`` and
every cancelled task logs interruption noise; none of that is why the job failed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flink_runbooks.model import Event, Incident
from flink_runbooks.vocabulary.lifecycle import GLOBAL_FAILURE, JOB_STATE, RECOVERY_SUPPRESSED, TASK_FAILED


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
# A failure line of this kind counts as a fault.
FAILURE_LINE = re.compile(rf"{TASK_FAILED.pattern}|{GLOBAL_FAILURE.pattern}|switched from state RUNNING to (?:FAILING|RESTARTING|FAILED)")


@dataclass
class Episode:
    job: str | None
    start: str | None
    end: str | None = None
    outcome: str = "open"  # restarting | failed | recovered | open
    failures: list[Event] = field(default_factory=list)  # failure events in time order
    suppressed: Event | None = None  # the "Recovery is suppressed" event when restarts ran out
    recovered: bool = False  # the job was RUNNING again after this episode's restart

    @property
    def first_fault(self) -> Event | None:
        """The earliest failure whose cause is not a secondary symptom (the earliest failure when all are)."""
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
