"""Checkpoints aborted because tasks were not running: still restoring after a (re)start, already finished, or a
job that keeps restarting."""
from __future__ import annotations

import collections
import re

from flink_runbooks.evidence.checkpoint_analysis import (NotReadyAbort, ceil_duration_ms, job_state_at,
                                   job_state_changes, not_ready_aborts)
from flink_runbooks.evidence.checkpoints import checkpoint_history
from flink_runbooks.evidence.episodes import episodes, fault_text
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.units import format_duration
from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.parse.timestamps import span_ms
from flink_runbooks.vocabulary.units import human_duration
from flink_runbooks.vocabulary.lifecycle import JOB_RUNNING, TASK_FINISHED, TASK_RUNNING
from flink_runbooks.vocabulary.wordings import Wording

FLIP147_KEY = "execution.checkpointing.checkpoints-after-tasks-finish"
INTERVAL_KEY = "execution.checkpointing.interval"
LOCAL_RECOVERY_KEY = "execution.state-recovery.from-local"
REPEATED = 3  # aborts before a transient start-up condition is worth a finding
# ≤ 1.8: a failed asynchronous snapshot of the declined (and so discarded) checkpoint fails the task.
MATERIALIZE_FAILED = re.compile(r"Could not materialize checkpoint (?P<id>\d+)")


class CheckpointDeclinedTaskNotReady(Detector):
    slug = "checkpoint-declined-task-not-ready"
    title = "Checkpoint aborted: tasks not running"
    category = "checkpointing"
    meaning = ("A checkpoint could not start because some task was not RUNNING (still deploying or restoring, "
               "already finished, or being restarted), so Flink aborted it; checkpoints resume once every task runs.")
    exception_classes = ("org.apache.flink.runtime.checkpoint.decline.CheckpointDeclineTaskNotReadyException",
                         "org.apache.flink.runtime.checkpoint.CheckpointException")
    versions = ("1.x, 2.x ('was not running' declines up to 1.8, 'is not in state RUNNING but X instead' 1.9 – 1.13, "
                "'is not being executed at the moment' since 1.14)")
    layer = 0
    collect_next = ("how many checkpoint triggers were aborted and whether the tasks were still deploying or "
        "restoring (the JobManager log around the declines)")
    config_keys = (
        "execution.checkpointing.interval",
        "execution.checkpointing.checkpoints-after-tasks-finish",
        "execution.state-recovery.from-local",
        "execution.checkpointing.tolerable-failed-checkpoints",
        "restart-strategy.type",
    )
    signatures = (
        r"is not in state RUNNING but [A-Z_]+ instead",
        r"is not being executed at the moment",
        r"Some tasks of the job have already finished and checkpointing with finished tasks is not enabled",
        r"CheckpointDeclineTaskNotReadyException",
        r"Checkpoint was declined \(tasks not ready\)",
        r"Discarding checkpoint \d+ of job",
        r"switched from (?:DEPLOYING|INITIALIZING) to RUNNING",
        r"switched from RUNNING to FINISHED",
        r"Could not materialize checkpoint \d+",
    )
    root_causes = (
        RootCause("tasks-restoring",
                  "Checkpoints were triggered while tasks were still deploying or restoring state after a (re)start.",
                  "Aborts right after the job switched to RUNNING, naming DEPLOYING/INITIALIZING tasks or tasks 'not "
                  "being executed'; they stop once every task is RUNNING. Up to 1.8 the decline discards the "
                  "checkpoint under other tasks' snapshots and can fail them: a restart loop.",
                  patches=("flink:execution.state-recovery.from-local",
                           "code:ExecutionConfig#setFailTaskOnCheckpointError",
                           "code:StreamExecutionEnvironment#enableCheckpointing", "ops:nothing to change if it stops")),
        RootCause("tasks-finished",
                  "Some tasks had FINISHED (bounded or idle sources) and this version or configuration does not "
                  "checkpoint with finished tasks (FLIP-147).",
                  "'not in state RUNNING but FINISHED', 'Some tasks of the job have already finished and "
                  "checkpointing with finished tasks is not enabled', tasks switching to FINISHED while the job runs.",
                  patches=("flink:execution.checkpointing.checkpoints-after-tasks-finish",
                           "ops:upgrade for checkpoints after tasks finish"),
                  versions="up to 1.13 always; from 1.14 only with checkpoints-after-tasks-finish off "
                           "(on by default from 1.15)"),
        RootCause("restart-loop",
                  "The job keeps restarting for another reason, so its tasks are never all running long enough to "
                  "checkpoint.",
                  "Several restart episodes whose first fault is something else; aborts between them and no "
                  "completed checkpoint.",
                  patches=("ops:fix the first fault",)),
        RootCause("undetermined",
                  "Triggers were aborted because tasks were not running, but the lines carry no time stamps: whether "
                  "the aborts were the normal few seconds after a start or lasted cannot be told.",
                  "A pasted excerpt with one or two aborts and no time stamps.",
                  next_evidence="the JobManager log from the job's (re)start to its first completed checkpoint, with "
                                "time stamps: how long the aborts lasted and which task states they named"),
    )

    wordings = (
        Wording("checkpoint-declined-task-not-ready", r"CheckpointDeclineTaskNotReadyException(?::\s*Task .+ was not running)?",
                "1.3 – 1.8", "o.a.f.runtime.checkpoint.decline.CheckpointDeclineTaskNotReadyException (Task#triggerCheckpointBarrier)",
                "org.apache.flink.runtime.checkpoint.decline.CheckpointDeclineTaskNotReadyException: Task Source: Custom Source (2/4) was not running"),
        Wording("checkpoint-declined-task-not-ready", r"Checkpoint triggering task .+ of job [0-9a-f]+ is not in state RUNNING but [A-Z]+ instead",
                "1.9 – 1.13", "CheckpointCoordinator#triggerCheckpoint (\"Checkpoint triggering task {} of job {} is not in state {} but {} instead. Aborting checkpoint.\")",
                "Checkpoint triggering task Source: Kafka (1/2) of job 0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c is not in state RUNNING but DEPLOYING instead. Aborting checkpoint."),
        Wording("checkpoint-declined-task-not-ready", r"task .+ of job [0-9a-f]+ is not being executed at the moment\. Aborting checkpoint\.",
                "1.9 – 2.x", "CheckpointCoordinator up to 1.13, DefaultCheckpointPlanCalculator since 1.14 (\"Checkpoint triggering task %s of job %s is not being executed at the moment. Aborting checkpoint.\")",
                "Checkpoint triggering task Source: orders (1/2) of job 0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c is not being executed at the moment. Aborting checkpoint. Failure reason: Not all required tasks are currently running."),
        Wording("checkpoint-declined-task-not-ready", r"Some tasks of the job have already finished and checkpointing with finished tasks is not enabled",
                "1.14 – 2.x", "DefaultCheckpointPlanCalculator (FLIP-147 switched off)",
                "Failed to trigger checkpoint for job 0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c since Some tasks of the job have already finished and checkpointing with finished tasks is not enabled. Failure reason: Not all required tasks are currently running.."),
        Wording("checkpoint-declined-task-not-ready", r"Checkpoint was declined \(tasks not ready\)",
                "1.9 – 2.x", "CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY",
                "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint was declined (tasks not ready)"),
    )

    templates = {
        "head": "{count} checkpoint trigger(s) were aborted because tasks were not running{ignored}. ",
        "ignored": " ({count} more during failovers not counted)",
        "tasks-finished": "Why: {why} Finished tasks{names} block every checkpoint from then on: no checkpoint "
                          "completes, so offsets and two-phase-commit sinks are never committed.",
        "names": " ({names})",
        "restart-loop": "Why: {why} The job went through {episodes} restart episode(s), first fault: {fault}. Fix "
                        "that; the aborted checkpoints are its symptom.",
        "longest": " Tasks needed up to {duration} after a start before all were running.",
        "tasks failing": "Why: {why}{longest} Each decline discarded the checkpoint while other tasks were still "
                         "writing it, and {failures} task(s) failed on that (up to 1.8 a checkpoint error fails the "
                         "task): the job restarts, restores again, and loops.",
        "undetermined": "These lines carry no time stamps, so whether the aborts were the normal few seconds after a "
                        "(re)start or went on while tasks stayed DEPLOYING or INITIALIZING (a slow restore) cannot be "
                        "told.",
        "tasks-restoring": "Why: {why}{longest} This is transient while state is restored and is not counted against "
                           "tolerable-failed-checkpoints; {completed} checkpoint(s) completed in these logs.",
        "first fault note": "what started the restarts: {fault}",
        "repeated": " ({count} such aborts)",
        "latest note": "latest abort: {abort}",
        "task": "task {task}",
        "a task": "a task",
        "finished not enabled": "tasks had finished and checkpointing with finished tasks is not enabled",
        "in state": "{task} was {state}, not RUNNING",
        "declined": "{task} declined: not running yet",
        "not running": "{task} was not running yet",
        "start note": "the job had (re)started here; its tasks were not all running yet",
        "finished note": "{task} finished while the job kept running",
        "discarded note": "a task failed because the declined checkpoint was discarded under its asynchronous "
                          "snapshot",
        "upgrade": "Flink checkpoints with finished tasks since 1.14 (FLIP-147, on by default since 1.15). Until then "
                   "keep sources from finishing: e.g. legacy FlinkKafkaConsumer subtasks without a partition finish, "
                   "so keep source parallelism at or below the number of partitions.",
        "after tasks finish": "Let checkpoints continue after some tasks finished (FLIP-147): finished tasks are "
                              "skipped instead of aborting every checkpoint.",
        "fail task on error": "Up to 1.8 a checkpoint error fails the task that hit it; with this a discarded "
                              "checkpoint no longer fails tasks and the restart loop stops (from 1.9 on use "
                              "setTolerableCheckpointFailureNumber instead).",
        "interval": "Tasks needed up to {duration} to be running after a start: an interval longer than that lets the "
                    "first checkpoint find them ready.",
        "local recovery": "Restoring after a failover took up to {duration}, longer than the {interval} checkpoint "
                          "interval: local recovery restores from the TaskManagers' local copy instead of downloading "
                          "the state again.",
        "nothing to change": "Aborts while tasks restore are not counted against tolerable-failed-checkpoints (since "
                             "1.9); act only if they go on long after the job started (then look at what slows the "
                             "restore).",
        "fix the first fault": "The job restarts before its tasks are all running; the runbook of the first fault "
                               "says what to change. Checkpoint settings do not help here.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        aborts = not_ready_aborts(incident)
        if not aborts:
            return []
        changes = job_state_changes(incident)
        # Triggers that race a failover already under way (job RESTARTING/FAILING/CANCELLING) are its echo.
        during_failover = [a for a in aborts if job_state_at(changes, a.job, a.event.ts) not in (None, "RUNNING")]
        relevant = [a for a in aborts if a not in during_failover]
        if not relevant:
            return []
        history = checkpoint_history(incident)
        finished = [a for a in relevant if a.kind == "finished-not-enabled" or a.state == "FINISHED"]
        eps = [e for e in episodes(incident) if e.failures]
        task_failures = _failures_from_discarded_checkpoints(incident, relevant)
        other_faults = [e for e in eps if e.first_fault is not None and e.first_fault not in task_failures
                        and not _is_not_ready(e.first_fault)]

        if finished:
            cause, group, severity = "tasks-finished", finished, "warning"
        elif task_failures:
            cause, group, severity = "tasks-restoring", relevant, "failure"
        elif len(eps) >= 2 and other_faults and len(relevant) >= 2:
            cause, group, severity = "restart-loop", relevant, "warning"
        elif len(relevant) >= REPEATED:
            cause, group, severity = "tasks-restoring", relevant, "warning"
        elif not any(ev.ts for ev in incident.events):
            # A paste of the aborts alone: a healthy start prints them too, so say what is unknown, at low confidence.
            cause, group, severity = "undetermined", relevant, "warning"
        else:
            return []

        restore = _restore_times(incident, changes, relevant)
        details = {
            "aborted_triggers": len(relevant),
            "during_failover_ignored": len(during_failover),
            "by_wording": dict(collections.Counter(a.kind for a in relevant)),
            "task_states_named": dict(collections.Counter(a.state for a in relevant if a.state)),
            "tasks": sorted({a.task for a in group if a.task})[:10],
            "restart_episodes": len(eps),
            "completed_checkpoints": sum(a.outcome == "completed" for a in history),
            "longest_not_ready_after_start": human_duration(max(ms for ms, _ in restore)) if restore else None,
            "task_failures_from_discarded_checkpoints": len(task_failures),
            "first_fault": fault_text(other_faults[0].first_fault) if cause == "restart-loop" else None,
        }
        evidence, notes = self._evidence(cause, group, task_failures, other_faults, eps, incident)
        summary = self.say("head", count=len(relevant),
                           ignored=self.say("ignored", count=len(during_failover)) if during_failover else "")
        why = self.cause(cause).summary
        longest = self.say("longest", duration=human_duration(max(ms for ms, _ in restore))) if restore else ""
        if cause == "tasks-finished":
            tasks = sorted({a.task for a in group if a.task})
            summary += self.say(cause, why=why, names=self.say("names", names=", ".join(tasks[:3])) if tasks else "")
        elif cause == "restart-loop":
            summary += self.say(cause, why=why, episodes=len(eps), fault=fault_text(other_faults[0].first_fault))
        elif task_failures:
            summary += self.say("tasks failing", why=why, longest=longest, failures=len(task_failures))
        elif cause == "undetermined":
            summary += self.say(cause)
        else:
            summary += self.say(cause, why=why, longest=longest,
                                completed=sum(a.outcome == "completed" for a in history))
        return [self.finding(
            cause, summary, evidence,
            confidence=(0.3 if cause == "undetermined"
                        else 0.85 if cause != "tasks-restoring" or task_failures or restore else 0.7),
            patches=self._patches(incident, cause, relevant, restore),
            severity=severity,
            notes=notes,
            details={k: v for k, v in details.items() if v not in (None, [], {})},
        )]

    # -- presentation

    def _evidence(self, cause, group: list[NotReadyAbort], task_failures, other_faults, eps, incident):
        evs, notes, add = evidence_trail()

        if cause == "restart-loop":
            first = other_faults[0].first_fault
            add(first, self.say("first fault note", fault=fault_text(first)))
        described = []
        for a in (group[0], group[-1]):
            task = self.say("task", task=a.task) if a.task else self.say("a task")
            if a.kind == "finished-not-enabled":
                described.append(self.say("finished not enabled"))
            elif a.state:
                described.append(self.say("in state", task=task, state=a.state))
            elif a.kind == "declined-not-ready":
                described.append(self.say("declined", task=task))
            else:
                described.append(self.say("not running", task=task))
        add(group[0].event, described[0] + (self.say("repeated", count=len(group)) if len(group) > 1 else ""))
        start = _job_start_before(incident, group[0].event)
        if start is not None and cause != "tasks-finished":
            add(start, self.say("start note"))
        if cause == "tasks-finished":
            for ev, m in incident.find(TASK_FINISHED):
                if (ev.ts or "") <= (group[0].event.ts or "~"):
                    add(ev, self.say("finished note", task=m["task"]))
                    break
        for ev in task_failures[:2]:
            add(ev, self.say("discarded note"))
        if len(group) > 1:
            add(group[-1].event, self.say("latest note", abort=described[1]))
        return evs, notes

    # -- patches

    def _patches(self, incident: Incident, cause: str, relevant: list[NotReadyAbort], restore: list[int]):
        cfg = incident.config
        version = incident.version_tuple
        old_api = (version is not None and version < (1, 9)) or \
            any(a.kind == "declined-not-ready" and "CheckpointDeclineTaskNotReadyException" in a.event.text
                for a in relevant)
        patches = []
        if cause == "tasks-finished":
            flag = cfg.get_bool(FLIP147_KEY)
            if version is not None and version < (1, 14):
                patches.append(self.ops_patch(
                    "upgrade for checkpoints after tasks finish",
                    self.say("upgrade"), urgent=False))
            elif flag is not True:
                patches.append(self.flink_patch(
                    incident, FLIP147_KEY, "true",
                    self.say("after tasks finish")))
        if cause == "tasks-restoring":
            interval = cfg.get_duration_ms(INTERVAL_KEY)
            longest = max((ms for ms, _ in restore), default=None)
            after_failover = max((ms for ms, kind in restore if kind == "restart"), default=None)
            if old_api:
                patches.append(self.code_patch(
                    "ExecutionConfig#setFailTaskOnCheckpointError",
                    "env.getConfig().setFailTaskOnCheckpointError(false);",
                    self.say("fail task on error")))
                if longest:
                    wanted = ceil_duration_ms(max(1.5 * longest, interval or 0))
                    patches.append(self.code_patch(
                        "StreamExecutionEnvironment#enableCheckpointing",
                        f"env.enableCheckpointing({wanted}L); // {format_duration(wanted)}",
                        self.say("interval", duration=human_duration(longest))))
            elif after_failover and interval and after_failover > interval and not cfg.get_bool(LOCAL_RECOVERY_KEY):
                # Local copies exist only for a restart on the same TaskManagers, not for a fresh deployment.
                patches.append(self.flink_patch(
                    incident, LOCAL_RECOVERY_KEY, "true",
                    self.say("local recovery", duration=human_duration(after_failover),
                             interval=format_duration(interval))))
            if not old_api:
                patches.append(self.ops_patch(
                    "nothing to change if it stops",
                    self.say("nothing to change")))
        if cause == "restart-loop":
            patches.append(self.ops_patch(
                "fix the first fault",
                self.say("fix the first fault")))
        return patches


def _is_not_ready(ev: Event) -> bool:
    return bool(re.search(r"not being executed|not in state RUNNING|CheckpointDeclineTaskNotReady", ev.text))


def _failures_from_discarded_checkpoints(incident: Incident, aborts: list[NotReadyAbort]) -> list[Event]:
    """Task failures on the asynchronous snapshot of a checkpoint that a not-ready decline had discarded."""
    declined = {a.checkpoint_id for a in aborts if a.checkpoint_id is not None}
    out = []
    for ev in incident.events:
        if "FAILED" not in ev.message:
            continue
        m = MATERIALIZE_FAILED.search(ev.text)
        if m and int(m["id"]) in declined:
            out.append(ev)
    return out


def _job_start_before(incident: Incident, event: Event) -> Event | None:
    starts = [ev for ev in incident.events if JOB_RUNNING.search(ev.message) and (ev.ts or "") <= (event.ts or "~")]
    return starts[-1] if starts else None


def _restore_times(incident: Incident, changes, aborts: list[NotReadyAbort]) -> list[tuple[int, str]]:
    """Per (re)start followed by aborts: how long until every task ran (or at least until the last abort), and
    whether it was a ``start`` or a ``restart`` after a failover."""
    starts = [c for c in changes if c.new == "RUNNING" and c.old in ("CREATED", "RESTARTING") and c.ts]
    ready = [ev.ts for ev in incident.events if ev.ts and TASK_RUNNING.search(ev.message)]
    out = []
    for i, start in enumerate(starts):
        end = starts[i + 1].ts if i + 1 < len(starts) else "~"
        inside = [a.event.ts for a in aborts if a.event.ts and start.ts <= a.event.ts < end]
        if not inside:
            continue
        ready_in = [t for t in ready if start.ts <= t < end]
        last = max(ready_in + inside) if ready_in else max(inside)
        ms = span_ms(start.ts, last)
        if ms:
            out.append((ms, "restart" if start.old == "RESTARTING" else "start"))
    return out
