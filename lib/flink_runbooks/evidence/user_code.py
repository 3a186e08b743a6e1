"""The job's own code failing: each attempt's fault thrown by user code, where it was thrown, and how long the job
had run (and checkpointed) before it.

Three readings tell the causes apart. A fault from the job's code that recurs at the same frame with the same
message (numbers aside) after the job restored a checkpoint replays one record into the same code: a poison record.
A fault on the first records of a freshly submitted job, before it completed any checkpoint, is the release's own
bug. Timeouts and refused connections from an external call in the job's code, that differ from one attempt to the
next or go away after a restart, are a dependency that was briefly unavailable.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.evidence.checkpoints import checkpoint_history
from flink_runbooks.evidence.episodes import Episode, episodes, failure_events, is_excerpt, is_secondary
from flink_runbooks.evidence.faults import ENVIRONMENT_MESSAGE, Fault, read_fault
from flink_runbooks.model import Event, Incident
from flink_runbooks.parse.timestamps import seconds_between
from flink_runbooks.vocabulary.lifecycle import JOB_STATE

# An exception that says an external call failed: the network, a timeout, a refused or reset connection.
EXTERNAL_CALL = re.compile(
    r"SocketTimeoutException|ConnectException|Connection (?:refused|reset)|UnknownHostException|"
    r"NoRouteToHostException|HttpTimeoutException|TimeoutException|timed out|SSLException|"
    r"ServiceUnavailable|503 Service Unavailable|Too Many Requests|\b429\b")
# How soon after a fresh job started a fault still counts as failing "from its first records".
FIRST_RECORDS_WINDOW_S = 60
# Numbers, ids and quoted values differ between attempts of the same fault.
_VOLATILE = re.compile(r"\b[0-9a-f]{8,}\b|\d+(?:\.\d+)?|@[0-9a-f]+")


@dataclass
class UserFault:
    """One attempt's first fault, thrown by the job's own code."""

    event: Event
    fault: Fault
    episode: Episode | None
    external: bool  # an external call from the job's code failed (network, timeout)

    @property
    def top_frame(self) -> str | None:
        """The innermost frame of the job's code: where the fault was thrown (line number kept)."""
        return _short(self.fault.user_frames[0]) if self.fault.user_frames else None

    @property
    def shape(self) -> str:
        """The fault without what changes between attempts, plus where it was thrown."""
        return f"{_VOLATILE.sub('#', self.fault.text)} @ {self.top_frame or '?'}"

    @property
    def recovered(self) -> bool:
        return bool(self.episode and self.episode.recovered)


def thrown_by_user_code(event: Event) -> Fault | None:
    """The fault of ``event`` when the job's own code threw it: a class of the job, a generic JDK exception whose
    first frame is the job's, or a network/timeout exception from a call the job's code made."""
    fault = read_fault(event)
    if fault.component == "user code":
        return fault
    if fault.component == "the environment" and fault.user_frames:
        return fault
    return None


def is_external(fault: Fault) -> bool:
    text = fault.text
    return fault.component == "the environment" or bool(EXTERNAL_CALL.search(text) or ENVIRONMENT_MESSAGE.search(text))


def user_faults(incident: Incident) -> list[UserFault]:
    """The first fault of every failure episode that the job's code threw, in time order (from an excerpt or a
    client's output, which have no episodes: the failures they show)."""
    out: list[UserFault] = []
    eps = [ep for ep in episodes(incident) if ep.failures]
    for ep in eps:
        ev = ep.first_fault
        fault = thrown_by_user_code(ev) if ev is not None and not is_secondary(ev) else None
        if fault is not None:
            out.append(UserFault(ev, fault, ep, is_external(fault)))
    if eps:
        return out
    for ev in failure_events(incident):
        fault = thrown_by_user_code(ev)
        if fault is not None and not is_secondary(ev):
            out.append(UserFault(ev, fault, None, is_external(fault)))
            break  # a client's output repeats one failure several times
    return out


@dataclass
class JobRun:
    """What the logs show of the job before its first fault."""

    job: str | None
    name: str | None
    started: str | None  # the job's first CREATED -> RUNNING
    seconds_to_first_fault: float | None
    checkpoints_before: int  # completed before the first fault
    restored_before: bool  # the first attempt restored a checkpoint or savepoint
    earlier_run: str | None  # an earlier job of the same name that ran without this fault (the previous release)


def job_run(incident: Incident, first: UserFault) -> JobRun:
    ep_job = first.episode.job if first.episode else None
    states = [(ev, m) for ev in incident.events for m in [JOB_STATE.search(ev.message)] if m]
    # The job that was running when the fault came: the last one to change state before it.
    before = [m["job"] for ev, m in states if ev.ts and first.event.ts and ev.ts <= first.event.ts]
    job = ep_job or (before[-1] if before else None)
    name = next((m["name"] for _, m in states if m["job"] == job), None)
    started = next((ev.ts for ev, m in states if m["job"] == job and m["to"] == "RUNNING"), None)
    ts = first.event.ts
    completed = [a for a in checkpoint_history(incident) if a.outcome == "completed" and (a.job in (None, job))
                 and a.finished and ts and a.finished <= ts and (not started or a.finished >= started)]
    restored = any(re.search(rf"Restoring job {job} from|Starting job {job} from savepoint", ev.message)
                   for ev in incident.events if job and ev.ts and ts and ev.ts <= ts)
    earlier = next((m["job"] for ev, m in states if name and m["name"] == name and m["job"] != job
                    and m["to"] in ("CANCELED", "FINISHED") and ev.ts and started and ev.ts <= started), None)
    return JobRun(job, name, started, seconds_between(started, ts) if started and ts else None, len(completed),
                  restored, earlier)


def excerpt(incident: Incident) -> bool:
    return is_excerpt(incident)


def _short(frame: str) -> str:
    """``at com.acme.Foo.bar(Foo.java:12) ~[job.jar:?]`` -> ``com.acme.Foo.bar(Foo.java:12)``."""
    return re.sub(r"\s+[~\[].*$", "", frame.strip().removeprefix("at "))
