"""Savepoints as the CLI and the JobManager tell them (shared by the savepoint and RPC runbooks): the requests the
CLI reported as failed and whether it only stopped waiting, the savepoint attempts of the checkpoint history, and
whether the JobManager had started the savepoint while the client was still waiting for it.

The CLI's words (``CliFrontend``): ``Triggering savepoint for job <id>.`` / ``Triggering stop-with-savepoint for job
<id>.`` when it sends the request; ``Failed to trigger a savepoint for the job <id>.`` (1.19+; ``Triggering a savepoint
for the job <id> failed.`` before) and ``Could not stop with a savepoint job "<id>".`` when it fails, caused by a bare
``java.util.concurrent.TimeoutException`` when it waited longer than ``client.timeout``. The JobManager logs the same
``Triggering [stop-with-]savepoint for job <id>.`` (SchedulerBase) once the request reached it, then the
CheckpointCoordinator's ``Triggering checkpoint N (type=SavepointType{…})`` and ``Completed checkpoint N for job
…``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.evidence.checkpoints import CheckpointAttempt, checkpoint_history
from flink_runbooks.model import Event, Incident
from flink_runbooks.parse.timestamps import seconds_between

CLI_SAVEPOINT_FAILED = re.compile(
    r"(?:Failed to trigger a savepoint for the job|Triggering a (?:detached )?savepoint for the job) "
    r"(?P<job>[0-9a-f]{32})")
CLI_STOP_FAILED = re.compile(r'Could not stop with a (?:detached )?savepoint job "(?P<job>[0-9a-f]{32})"')
# Logged by the CLI when it sends the request and by the JobManager when the request reaches it.
SAVEPOINT_REQUESTED = re.compile(r"Triggering (?P<stop>stop-with-)?savepoint for job (?P<job>[0-9a-f]{32})")
# The CheckpointCoordinator's trigger line of a savepoint: SavepointType{name='Savepoint' | 'Suspend Savepoint' |
# 'Terminate Savepoint', …} since 1.15; SAVEPOINT, SAVEPOINT_SUSPEND, SAVEPOINT_TERMINATE or SYNC_SAVEPOINT before.
SAVEPOINT_TYPE = re.compile(r"type=(?:SavepointType\{|SYNC_SAVEPOINT|SAVEPOINT)")
_REST_SAVEPOINT = re.compile(r"^Savepoint \d+ of job ")


@dataclass
class ClientFailure:
    """A savepoint or stop-with-savepoint the CLI reported as failed."""

    event: Event
    job: str
    action: str  # "savepoint" | "stop"
    timed_out: bool  # the client stopped waiting: a bare TimeoutException, not an answer from the JobManager
    requested: Event | None = None  # the CLI's own "Triggering … for job" line (with its time, from the client log)

    @property
    def command(self) -> str:
        return f"flink {self.action}"


def client_failures(incident: Incident) -> list[ClientFailure]:
    """One entry per failed CLI request. The same failure printed by the CLI (no timestamps) and logged in the client
    log counts once, the logged one kept."""
    found: list[ClientFailure] = []
    for ev in incident.events:
        m = CLI_SAVEPOINT_FAILED.search(ev.text) or CLI_STOP_FAILED.search(ev.text)
        if not m or ev.role == "jobmanager":
            continue
        action = "stop" if m.re is CLI_STOP_FAILED else "savepoint"
        timed_out = any(c.simple_name == "TimeoutException" and not c.message.strip() for c in ev.chain)
        found.append(ClientFailure(ev, m["job"], action, timed_out, _requested_by_client(incident, ev, m["job"])))
    timed = {(f.job, f.action) for f in found if f.event.ts}
    return [f for f in found if f.event.ts or (f.job, f.action) not in timed]


def _requested_by_client(incident: Incident, failure: Event, job: str) -> Event | None:
    lines = [ev for ev in incident.events if ev.role != "jobmanager" and ev.file == failure.file and ev.ts
             and failure.ts and ev.ts <= failure.ts and (m := SAVEPOINT_REQUESTED.search(ev.message))
             and m["job"] == job]
    return lines[-1] if lines else None


def is_savepoint(attempt: CheckpointAttempt) -> bool:
    return any(SAVEPOINT_TYPE.search(ev.message) or (ev.line == 0 and _REST_SAVEPOINT.search(ev.message))
               for ev in attempt.events)


def savepoint_attempts(incident: Incident, job: str | None = None) -> list[CheckpointAttempt]:
    """The savepoint attempts of the checkpoint history (of ``job`` when given), in time order."""
    return [a for a in checkpoint_history(incident) if is_savepoint(a) and not (job and a.job and a.job != job)]


def jobmanager_requests(incident: Incident, job: str | None = None) -> list[Event]:
    """The JobManager's ``Triggering [stop-with-]savepoint for job`` lines: the request reached it."""
    return [ev for ev in incident.events if ev.role == "jobmanager" and (m := SAVEPOINT_REQUESTED.search(ev.message))
            and (job is None or m["job"] == job)]


def started_while_waiting(incident: Incident, failure: ClientFailure) -> Event | None:
    """The JobManager's line showing it had taken up the request before the client gave up (its request line, or the
    savepoint's trigger line), or None: then it never answered while the client waited, or its log is not here."""
    if not failure.event.ts:
        # Without times (a paste stripped of them) the order is unknown: a savepoint of that job that the
        # CheckpointCoordinator triggered and that completed or runs on shows a JobManager at work all the same.
        working = [a for a in savepoint_attempts(incident, failure.job)
                   if a.events and a.outcome in ("completed", "in progress")]
        return working[0].events[0] if working else None
    since = failure.requested.ts if failure.requested else None
    candidates = jobmanager_requests(incident, failure.job) + [
        a.events[0] for a in savepoint_attempts(incident, failure.job) if a.triggered and a.events]
    within = sorted((ev for ev in candidates
                     if ev.ts and ev.ts <= failure.event.ts and (since is None or ev.ts >= since)), key=lambda e: e.ts)
    return within[0] if within else None


def attempt_after(incident: Incident, job: str, ts: str | None) -> CheckpointAttempt | None:
    """The first savepoint attempt of ``job`` triggered at or after ``ts`` (the request's time)."""
    attempts = [a for a in savepoint_attempts(incident, job) if a.triggered and (ts is None or a.triggered >= ts)]
    return attempts[0] if attempts else None


def jobmanager_lines(incident: Incident) -> list[Event]:
    return incident.derived("savepoints.jm_lines", lambda inc: [ev for ev in inc.events
                                                               if ev.role == "jobmanager" and ev.ts])


def jobmanager_silence(incident: Incident, ts: str | None) -> float | None:
    """Seconds the JobManager's log was silent across ``ts``: its last line before to its first line after."""
    if not ts:
        return None
    lines = jobmanager_lines(incident)
    before = [ev for ev in lines if ev.ts <= ts]
    after = [ev for ev in lines if ev.ts > ts]
    if not before or not after:
        return None
    return seconds_between(before[-1].ts, after[0].ts)
