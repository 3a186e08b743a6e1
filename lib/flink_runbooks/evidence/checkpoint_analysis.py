"""Checkpoint evidence beyond the per-attempt history: job states over time, job runs and what they restored
from, completed-checkpoint statistics and trigger aborts because tasks were not running.

Shared by the ``checkpoint-expired``, ``checkpoint-metadata-already-exists`` and
``checkpoint-declined-task-not-ready`` runbooks. Everything here reads an :class:`Incident` and returns plain data.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from flink_runbooks.evidence.checkpoints import CheckpointAttempt
from flink_runbooks.model import Event, Incident
from flink_runbooks.parse.timestamps import parse_ts
from flink_runbooks.vocabulary.lifecycle import (
    CHECKPOINT_DECLINED, CHECKPOINT_DISCARDED, CHECKPOINT_TRIGGER_FAILED, JOB_STATE)

JOB_ID = r"[0-9a-f]{32}"

# "Received JobGraph submission 'name' (jid)." (1.12+) and "Received JobGraph submission jid (name)." (older).
SUBMISSION = re.compile(r"Received JobGraph submission '?(?P<a>.*?)'? \((?P<b>[^()]*)\)\.?$")
RESTORED_CHECKPOINT = re.compile(
    rf"Restoring job (?P<job>{JOB_ID}) from (?:latest valid checkpoint: )?(?:Checkpoint|Savepoint) (?P<id>\d+) @ \d+"
    rf"(?: for {JOB_ID})?(?: located at (?P<path>\S+?))?\.?$")
STARTED_FROM_SAVEPOINT = re.compile(rf"Starting job (?P<job>{JOB_ID}) from savepoint (?P<path>\S+)")
COUNTER_RESET = re.compile(rf"Reset the checkpoint ID of job (?P<job>{JOB_ID}) to (?P<id>\d+)")
NO_CHECKPOINT_ON_RESTORE = re.compile(r"No checkpoint found during restore")
NOT_DISCARDED = re.compile(r"Checkpoint with ID (?P<id>\d+) at '(?P<path>[^']+)' not discarded")

# Trigger aborts because tasks are not running, every generation's wording (verified against 1.14 – 2.0 classes;
# the 1.9 – 1.13 and ≤ 1.8 wordings are the ones quoted in the reference catalogue and a Flink 1.8 user report).
NOT_RUNNING_STATE = re.compile(
    r"Checkpoint triggering task (?P<task>.+?) of job (?P<job>[0-9a-f]{32}|\S+) is not in state RUNNING but "
    r"(?P<state>[A-Z_]+) instead")
NOT_BEING_EXECUTED = re.compile(
    r"(?:Checkpoint triggering task|task) (?P<task>.+?) of job (?P<job>[0-9a-f]{32}|\S+) is not being executed at the moment")
FINISHED_NOT_ENABLED = re.compile(
    r"Some tasks of the job have already finished and checkpointing with finished tasks is not enabled")
DECLINED_NOT_READY = re.compile(
    r"CheckpointDeclineTaskNotReadyException(?:: Task (?P<task>.+?) was not running)?|"
    r"Checkpoint was declined \(tasks not ready\)")
NOT_ALL_RUNNING = re.compile(r"Not all required tasks are currently running")

# Application mode gives the job a fixed id: all zeros without HA, new JobID(clusterId.hashCode(), 0) with HA.
APPLICATION_MODE_JOB_ID = re.compile(r"^(?:0{32}|[0-9a-f]{16}0{16})$")


@dataclass
class JobStateChange:
    ts: str | None
    job: str
    name: str
    old: str
    new: str
    event: Event


def job_state_changes(incident: Incident) -> list[JobStateChange]:
    out = []
    for ev in incident.events:
        m = JOB_STATE.search(ev.message)
        if m:
            out.append(JobStateChange(ev.ts, m["job"], m["name"], m["from"], m["to"], ev))
    return out


def job_state_at(changes: list[JobStateChange], job: str | None, ts: str | None) -> str | None:
    """The job's state right after the last change at or before ``ts`` (None when unknown)."""
    if ts is None:
        return None
    state = None
    for c in changes:
        if (job is None or c.job == job) and c.ts is not None and c.ts <= ts:
            state = c.new
    return state


@dataclass
class JobRun:
    """One start of a job master for a job id (a submission, an HA recovery or a cluster restart)."""

    job: str
    name: str | None
    started: str | None
    start_event: Event | None
    submitted: Event | None = None
    restored_from: int | None = None  # checkpoint/savepoint id the run restored from
    restore_event: Event | None = None
    restore_path: str | None = None
    counter_reset_to: int | None = None
    fresh: bool | None = None  # True: "No checkpoint found during restore"
    fresh_event: Event | None = None
    restarts: int = 0
    ended: str | None = None


def job_runs(incident: Incident) -> list[JobRun]:
    """Every run of every job id, in time order, with what each run restored from.

    A run starts with a submission or with the job switching from CREATED to RUNNING (the first time after a
    submission); restores, counter resets and "No checkpoint found" lines attach to the open run of their job.
    """
    runs: list[JobRun] = []
    open_run: dict[str, JobRun] = {}
    names: dict[str, str] = {}

    def current(job: str, ev: Event) -> JobRun:
        run = open_run.get(job)
        if run is None:
            run = JobRun(job, names.get(job), ev.ts, ev)
            runs.append(run)
            open_run[job] = run
        return run

    for ev in incident.events:
        msg = ev.message
        if m := SUBMISSION.search(msg):
            a, b = m["a"], m["b"]
            job, name = (b, a) if re.fullmatch(JOB_ID, b) else (a, b) if re.fullmatch(JOB_ID, a) else (None, None)
            if job:
                names[job] = name
                run = open_run.get(job)
                if run is not None and run.restored_from is None and run.fresh is None and run.submitted is None:
                    run.submitted = ev
                else:
                    run = JobRun(job, name, ev.ts, ev, submitted=ev)
                    runs.append(run)
                    open_run[job] = run
            continue
        if m := JOB_STATE.search(msg):
            job = m["job"]
            names.setdefault(job, m["name"])
            if m["from"] == "CREATED" and m["to"] == "RUNNING":
                run = open_run.get(job)
                if run is None or run.ended is not None:
                    run = JobRun(job, m["name"], ev.ts, ev)
                    runs.append(run)
                    open_run[job] = run
                run.name = run.name or m["name"]
            elif m["from"] == "RESTARTING" and m["to"] == "RUNNING":
                current(job, ev).restarts += 1
            elif m["to"] in ("FINISHED", "CANCELED", "FAILED", "SUSPENDED"):
                run = open_run.pop(job, None)
                if run is not None:
                    run.ended = ev.ts
            continue
        if m := RESTORED_CHECKPOINT.search(msg):
            run = current(m["job"], ev)
            if run.restored_from is None:
                run.restored_from, run.restore_event, run.restore_path = int(m["id"]), ev, m["path"]
        elif m := STARTED_FROM_SAVEPOINT.search(msg):
            run = current(m["job"], ev)
            run.restore_event = run.restore_event or ev
            run.restore_path = run.restore_path or m["path"]
            sid = re.search(r"chk-(\d+)|savepoint-\w+-(\d+)?", m["path"])
            if sid and sid.group(1) and run.restored_from is None:
                run.restored_from = int(sid.group(1))
        elif m := COUNTER_RESET.search(msg):
            run = current(m["job"], ev)
            run.counter_reset_to = int(m["id"])
            if run.restored_from is None:
                run.restored_from = int(m["id"]) - 1
        elif NO_CHECKPOINT_ON_RESTORE.search(msg):
            # The line does not name the job: attach it to the run that started last.
            if runs and runs[-1].fresh is None and runs[-1].restored_from is None:
                runs[-1].fresh, runs[-1].fresh_event = True, ev
    return runs


def run_at(runs: list[JobRun], job: str | None, ts: str | None) -> JobRun | None:
    """The run of ``job`` that was open at ``ts``."""
    candidates = [r for r in runs if (job is None or r.job == job) and (r.started or "") <= (ts or "~")]
    return candidates[-1] if candidates else None


def failovers(events: list[Event]) -> int:
    """How many failovers a list of records reports: one failover is logged several times within a second (the
    global failure, the job switching to RESTARTING/FAILING, FAILED), so count distinct seconds."""
    stamps = sorted(t for t in (parse_ts(ev.ts) for ev in events) if t is not None)
    if not stamps:
        return min(1, len(events))
    return 1 + sum((b - a).total_seconds() > 2 for a, b in zip(stamps, stamps[1:]))


# ------------------------------------------------------------------------------------------------ statistics


@dataclass
class CompletedStats:
    """Durations and sizes of completed checkpoints (in time order)."""

    durations_ms: list[int] = field(default_factory=list)
    sizes_bytes: list[int] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.durations_ms) or len(self.sizes_bytes)

    @property
    def max_ms(self) -> int | None:
        return max(self.durations_ms) if self.durations_ms else None

    @property
    def median_ms(self) -> int | None:
        return int(statistics.median(self.durations_ms)) if self.durations_ms else None

    @property
    def p90_ms(self) -> int | None:
        if not self.durations_ms:
            return None
        ordered = sorted(self.durations_ms)
        return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]

    @property
    def duration_growth(self) -> float | None:
        return growth(self.durations_ms)

    @property
    def size_growth(self) -> float | None:
        return growth(self.sizes_bytes)


def completed_stats(history: list[CheckpointAttempt], job: str | None = None) -> CompletedStats:
    stats = CompletedStats()
    for a in history:
        if a.outcome != "completed" or (job is not None and a.job not in (job, None)):
            continue
        if a.duration_ms is not None:
            stats.durations_ms.append(a.duration_ms)
        if a.size_bytes is not None:
            stats.sizes_bytes.append(a.size_bytes)
    return stats


def growth(values: list[int]) -> float | None:
    """Mean of the last third over the mean of the first third (None with fewer than three values)."""
    if len(values) < 3:
        return None
    third = max(1, len(values) // 3)
    first = statistics.mean(values[:third])
    last = statistics.mean(values[-third:])
    return round(last / first, 2) if first > 0 else None


def ceil_duration_ms(ms: int | float) -> int:
    """Round a proposed duration up to a value people write: whole seconds below 1 min, 10 s steps below 10 min,
    whole minutes above."""
    ms = int(ms)
    step = 1000 if ms < 60_000 else 10_000 if ms < 600_000 else 60_000
    return max(step, -(-ms // step) * step)


# ------------------------------------------------------------------------------------------------ not-ready aborts


@dataclass
class NotReadyAbort:
    """A checkpoint that could not start (or was declined) because a task was not running."""

    event: Event
    kind: str  # state | not-executed | finished-not-enabled | declined-not-ready | not-all-running
    job: str | None
    task: str | None = None
    state: str | None = None  # the task state the message names (FINISHED, DEPLOYING, INITIALIZING, ...)
    checkpoint_id: int | None = None


def not_ready_aborts(incident: Incident) -> list[NotReadyAbort]:
    """Every trigger abort or decline because tasks were not running, one per log record, in time order."""
    out = []
    for ev in incident.events:
        text = ev.text
        job_m = (CHECKPOINT_TRIGGER_FAILED.search(ev.message) or CHECKPOINT_DECLINED.search(ev.message)
                 or CHECKPOINT_DISCARDED.search(ev.message))
        job = job_m["job"] if job_m else None
        cid = int(job_m["id"]) if job_m and job_m["id"] else None
        if m := NOT_RUNNING_STATE.search(text):
            out.append(NotReadyAbort(ev, "state", _job(m["job"]) or job, m["task"], m["state"], cid))
        elif FINISHED_NOT_ENABLED.search(text):
            out.append(NotReadyAbort(ev, "finished-not-enabled", job, None, "FINISHED", cid))
        elif m := NOT_BEING_EXECUTED.search(text):
            out.append(NotReadyAbort(ev, "not-executed", _job(m["job"]) or job, m["task"], None, cid))
        elif m := DECLINED_NOT_READY.search(text):
            out.append(NotReadyAbort(ev, "declined-not-ready", job, m["task"], None, cid))
        elif NOT_ALL_RUNNING.search(text) and (job_m or "CheckpointException" in text):
            out.append(NotReadyAbort(ev, "not-all-running", job, None, None, cid))
    return out


def _job(text: str | None) -> str | None:
    return text if text and re.fullmatch(JOB_ID, text) else None
