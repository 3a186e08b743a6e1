"""Checkpoint history reconstructed from the JobManager's checkpoint lifecycle lines (shared by the checkpoint runbooks),
completed by a pulled bundle's ``GET /jobs/:jobid/checkpoints``: the checkpoints the logs do not reach (rolled over,
or no JobManager log at all) and the durations, sizes and failure messages the log lines lack."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flink_runbooks.model import Event, Incident
from flink_runbooks.vocabulary.lifecycle import (
    CHECKPOINT_COMPLETED, CHECKPOINT_DECLINED, CHECKPOINT_EXPIRED, CHECKPOINT_FAILED, CHECKPOINT_TRIGGERED)

@dataclass
class CheckpointAttempt:
    checkpoint_id: int
    job: str | None
    triggered: str | None = None
    outcome: str = "in progress"  # completed | expired | declined | failed | in progress
    finished: str | None = None
    duration_ms: int | None = None
    size_bytes: int | None = None
    failure: str | None = None  # the reason (deepest cause) of a failed attempt
    events: list[Event] = field(default_factory=list)


def checkpoint_history(incident: Incident) -> list[CheckpointAttempt]:
    """One entry per checkpoint id (and job), in time order, with its outcome and the events that tell it."""
    return list(incident.derived("checkpoint_history", _checkpoint_history))


def _checkpoint_history(incident: Incident) -> list[CheckpointAttempt]:
    attempts: list[CheckpointAttempt] = []
    latest: dict[tuple[str | None, int], CheckpointAttempt] = {}

    def get(cid: str, job: str | None, trigger: bool = False) -> CheckpointAttempt:
        key = (job, int(cid))
        if key not in latest and job is None:
            # Decline lines before 1.15 do not always name the job: attach to the attempt with that id.
            for (_j, i), att in latest.items():
                if i == int(cid):
                    return att
        known = latest.get(key)
        # A job id reused by a new run counts its checkpoints from 1 again: a new trigger of a finished id is a
        # new attempt, not the old one.
        if known is None or (trigger and known.outcome != "in progress"):
            known = latest[key] = CheckpointAttempt(int(cid), job)
            attempts.append(known)
        return known

    for ev in incident.events:
        msg = ev.message
        if m := CHECKPOINT_TRIGGERED.search(msg):
            att = get(m["id"], m["job"], trigger=True)
            att.triggered = att.triggered or ev.ts
            att.events.append(ev)
        elif m := CHECKPOINT_COMPLETED.search(msg):
            att = get(m["id"], m["job"])
            att.outcome, att.finished = "completed", ev.ts
            att.size_bytes = int(m["bytes"]) if m["bytes"] else None
            dur = m["dur"] or m["dur_old"]
            att.duration_ms = int(dur) if dur else None
            att.events.append(ev)
        elif m := CHECKPOINT_EXPIRED.search(msg):
            att = get(m["id"], m["job"])
            att.outcome, att.finished, att.failure = "expired", ev.ts, "Checkpoint expired before completing."
            att.events.append(ev)
        elif m := CHECKPOINT_DECLINED.search(msg):
            att = get(m["id"], m["job"])
            if att.outcome == "in progress":
                att.outcome, att.finished = "declined", ev.ts
            att.failure = att.failure or _deepest(ev)
            att.events.append(ev)
        elif m := CHECKPOINT_FAILED.search(msg):
            att = get(m["id"], m["job"])
            if att.outcome in ("in progress", "declined"):
                att.outcome = "failed" if att.outcome == "in progress" else att.outcome
                att.finished = att.finished or ev.ts
            att.failure = att.failure or _deepest(ev)
            att.events.append(ev)
    _add_rest_history(incident, attempts, latest)
    return sorted(attempts, key=lambda a: (a.triggered or a.finished or "", a.checkpoint_id))


REST_SOURCE = "REST checkpoint history"
_EXPIRED = re.compile(r"expired before completing", re.IGNORECASE)


def _add_rest_history(incident: Incident, attempts: list[CheckpointAttempt],
                      known: dict[tuple[str | None, int], CheckpointAttempt]) -> None:
    from flink_runbooks.evidence.episodes import stamp_of_millis, wall_seconds

    for snapshot in incident.rest:
        for job in snapshot.jobs:
            # the logs' time zone, from a checkpoint both tell (the REST API counts in UTC)
            offsets = [round((wall_seconds(known[(job.jid, c.checkpoint_id)].triggered) - c.trigger_ms / 1000) / 900) * 900
                       for c in job.checkpoints if (job.jid, c.checkpoint_id) in known and c.trigger_ms
                       and wall_seconds(known[(job.jid, c.checkpoint_id)].triggered) is not None]
            offset = max(set(offsets), key=offsets.count) if offsets else 0
            for c in job.checkpoints:
                outcome = {"COMPLETED": "completed", "IN_PROGRESS": "in progress"}.get(c.status, "failed")
                if outcome == "failed" and _EXPIRED.search(c.failure_message or ""):
                    outcome = "expired"
                att = known.get((job.jid, c.checkpoint_id))
                if att is None:
                    finished_ms = c.failure_ms or ((c.trigger_ms + c.end_to_end_ms) if c.trigger_ms is not None
                                                   and c.end_to_end_ms is not None and outcome == "completed" else None)
                    att = known[(job.jid, c.checkpoint_id)] = CheckpointAttempt(
                        c.checkpoint_id, job.jid, triggered=stamp_of_millis(c.trigger_ms, offset), outcome=outcome,
                        finished=stamp_of_millis(finished_ms, offset), failure=c.failure_message)
                    kind = "savepoint" if c.savepoint else "checkpoint"
                    what = f"{c.status}" + (f" after {c.end_to_end_ms} ms" if c.end_to_end_ms is not None else "")
                    att.events.append(Event(
                        file=job.documents.get("checkpoints", "checkpoints.json"), line=0,
                        ts=att.finished or att.triggered, level="INFO" if outcome == "completed" else "WARN",
                        logger=REST_SOURCE, role="jobmanager",
                        message=f"{kind.capitalize()} {c.checkpoint_id} of job {job.name or job.jid} ({job.jid}): "
                                f"{what}" + (f": {c.failure_message}" if c.failure_message else "") + "."))
                    attempts.append(att)
                # what the log lines do not say
                if att.duration_ms is None and outcome == "completed":
                    att.duration_ms = c.end_to_end_ms
                if att.size_bytes is None and outcome == "completed":
                    att.size_bytes = c.checkpointed_size if c.checkpointed_size is not None else c.state_size
                att.failure = att.failure or c.failure_message


def _deepest(ev: Event) -> str | None:
    rc = ev.root_cause
    if rc is None:
        return None
    return f"{rc.cls}: {rc.message}" if rc.message else rc.cls


def history_frame(history: list[CheckpointAttempt]):
    """The history as a pandas DataFrame (for tables and the timeline plot)."""
    import pandas as pd

    rows = [{
        "checkpoint": a.checkpoint_id,
        "job": a.job,
        "triggered": pd.to_datetime(a.triggered) if a.triggered else pd.NaT,
        "finished": pd.to_datetime(a.finished) if a.finished else pd.NaT,
        "outcome": a.outcome,
        "duration_ms": a.duration_ms,
        "size_bytes": a.size_bytes,
        "failure": a.failure,
    } for a in history]
    return pd.DataFrame(rows, columns=["checkpoint", "job", "triggered", "finished", "outcome", "duration_ms",
                                       "size_bytes", "failure"])


def failed_streak_before(history: list[CheckpointAttempt], event: Event) -> list[CheckpointAttempt]:
    """The consecutive failed attempts that ended in ``event`` (newest last). On a session cluster other jobs'
    checkpoints interleave: only the job of the latest failure counts."""
    before = [a for a in history if (a.finished or a.triggered or "") <= (event.ts or "~")]
    failing_job = next((a.job for a in reversed(before) if a.outcome not in ("completed", "in progress")), None)
    streak: list[CheckpointAttempt] = []
    for att in reversed(before):
        if failing_job and att.job and att.job != failing_job:
            continue
        if att.outcome == "completed":
            break
        if att.outcome != "in progress":
            streak.append(att)
    return list(reversed(streak))


def last_completed_before(history: list[CheckpointAttempt], ts: str | None, job: str | None = None) -> CheckpointAttempt | None:
    """The latest checkpoint that completed at or before ``ts`` (of ``job`` when given)."""
    done = [a for a in history if a.outcome == "completed" and (a.finished or "") <= (ts or "~")
            and not (job and a.job and a.job != job)]
    return done[-1] if done else None
