"""A savepoint or stop-with-savepoint failed, expired, or outlived the client that waited for it.

Causes told apart: the CLI stopped waiting after ``client.timeout`` while the JobManager, answering, went on with the
savepoint (it completed later or is still running); the savepoint could not start because tasks were not running
(``Not all required tasks are currently running``: initialising, restarting or finished); it expired on the checkpoint
timeout; no savepoint directory was configured or given; the directory could not be created. A client timeout while
the JobManager itself was stalled (it took the request up only after the client gave up) is the rpc-timeout
runbook's.
"""
from __future__ import annotations

import math
import re

from flink_runbooks.detectors.base import Detector, version_key
from flink_runbooks.evidence import savepoints
from flink_runbooks.evidence.checkpoints import CheckpointAttempt, checkpoint_history
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.parse.timestamps import seconds_between
from flink_runbooks.vocabulary.lifecycle import CHECKPOINT_TRIGGER_FAILED, JOB_STATE
from flink_runbooks.vocabulary.units import parse_duration_ms
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "savepoint-trigger-failure"
# CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING, and the DefaultCheckpointPlanCalculator's message naming
# the task (1.14+; the same words in 1.17.2, 1.20.3 and 2.3.0).
NOT_RUNNING = re.compile(
    r"(?:Checkpoint triggering )?task (?P<task>.+?) of job (?P<job>[0-9a-f]{32}) is not being executed at the moment"
    r"|Not all required tasks are currently running")
EXPIRED = re.compile(r"Checkpoint expired before completing")
EXPIRED_LINE = re.compile(r"expired before completing")
# StopWithSavepointTerminationManager#checkSavepointActionPreconditions (the JobManager refuses the request), and
# AbstractFsCheckpointStorageAccess#initializeLocationForSavepoint.
# The REST handler's own check comes first for requests without a target (SavepointHandlers, the same words in
# 1.17.2, 1.20.3 and 2.3.0; the property is target-directory for a savepoint, targetDirectory for a stop).
NO_DIRECTORY = re.compile(r"No savepoint directory configured|No savepoint location given and no default location "
                          r"configured|Config key \[[\w.-]+\] is not set\. Property \[target-?[dD]irectory\] must be "
                          r"provided")
DIRECTORY_FAILED = re.compile(r"Failed to create savepoint directory at (?P<path>\S+?)\.?(?:\s|$)")
DENIED = re.compile(r"AccessDeniedException|Permission denied|AccessControlException|\b403\b.*Forbidden")
_TASK_STATE = r"switched from (?P<from>[A-Z_]+) to (?P<to>[A-Z_]+)"
_CLIENT_TIMEOUT = "client.timeout"
_CHECKPOINT_TIMEOUT = "execution.checkpointing.timeout"
_SAVEPOINT_DIR = "execution.checkpointing.savepoint-dir"
_CHECKPOINT_DIR = "execution.checkpointing.dir"
_DETACHED_SINCE = (1, 19)  # CliFrontendParser: the -detached option of savepoint and stop (absent in 1.18.1)
_TRIGGER_FAILED_WITHIN_S = 10  # a trigger failure this soon after a savepoint request is that request's


class SavepointTriggerFailure(Detector):
    slug = SLUG
    title = "Savepoint or stop-with-savepoint failed or timed out"
    category = "checkpointing"
    meaning = ("A savepoint (flink savepoint, flink stop, the REST API) did not complete for the caller: the CLI "
               "stopped waiting after client.timeout while the savepoint went on, or the savepoint could not start "
               "(tasks not running), expired on the checkpoint timeout, or had no writable directory.")
    versions = ("1.x, 2.x (the CLI's 'Failed to trigger a savepoint' since 1.19, 'Triggering a savepoint … failed' "
                "before; -detached since 1.19)")
    exception_classes = ("org.apache.flink.util.FlinkException", "java.util.concurrent.TimeoutException",
                         "org.apache.flink.runtime.checkpoint.CheckpointException")
    config_keys = (
        "client.timeout",
        "execution.checkpointing.savepoint-dir",
        "execution.checkpointing.timeout",
        "execution.checkpointing.dir",
        "execution.checkpointing.interval",
    )
    collect_next = ("the JobManager log from the request on (its 'Triggering savepoint for job' line and the "
                    "savepoint's 'Completed checkpoint' or failure line) and GET /jobs/<job id>/checkpoints")
    signatures = (
        r"Failed to trigger a savepoint for the job|Triggering a (?:detached )?savepoint for the job",
        r'Could not stop with a (?:detached )?savepoint job "',
        r"Triggering (?:stop-with-)?savepoint for job",
        r"type=(?:SavepointType\{|SYNC_SAVEPOINT|SAVEPOINT)",
        r"is not being executed at the moment|Not all required tasks are currently running",
        r"No savepoint directory configured|No savepoint location given and no default location configured",
        r"Config key \[[\w.-]+\] is not set\. Property \[target-?[dD]irectory\] must be provided",
        r"Failed to create savepoint directory at",
        r"Checkpoint expired before completing",
        r"Savepoint completed\. Path:",
        # a task still initialising when a savepoint could not start (one line per deployment: RUNNING and
        # FINISHED are kept for the checkpoint runbooks already)
        r"\) switched from DEPLOYING to INITIALIZING",
    )
    wordings = (
        Wording(SLUG, r"Failed to trigger a savepoint for the job [0-9a-f]{32}",
                "1.19 – 2.x",
                "CliFrontend#triggerSavepoint (FlinkException; a bare TimeoutException cause: client.timeout)",
                "org.apache.flink.util.FlinkException: Failed to trigger a savepoint for the job "
                "c54f5bb507fe7c946b5ed66554c3a028."),
        Wording(SLUG, r"Triggering a savepoint for the job [0-9a-f]{32} failed",
                "1.5 – 1.18", "CliFrontend#triggerSavepoint (FlinkException; the 1.17.2 and 1.18.1 jars)",
                "org.apache.flink.util.FlinkException: Triggering a savepoint for the job "
                "c54f5bb507fe7c946b5ed66554c3a028 failed."),
        Wording(SLUG, r'Could not stop with a (?:detached )?savepoint job "[0-9a-f]{32}"',
                "1.9 – 2.x", "CliFrontend#stopWithSavepoint (FlinkException; the words checked in the 1.17.2, "
                "1.18.1, 1.19.3, 1.20.3 and 2.3.0 jars)",
                'org.apache.flink.util.FlinkException: Could not stop with a savepoint job '
                '"668684ac1809e0a4da0701bc372cbbe8".'),
        Wording(SLUG, r"No savepoint directory configured\. You can either specify a directory",
                "1.9 – 2.x", "StopWithSavepointTerminationManager#checkSavepointActionPreconditions "
                "(IllegalStateException; the words checked in the 1.17.2, 1.20.3 and 2.3.0 jars)",
                "java.lang.IllegalStateException: No savepoint directory configured. You can either specify a "
                "directory via configure a cluster-wide default via key 'execution.checkpointing.savepoint-dir' or "
                "specify a directory in the command line, like -s :targetDirectory for cancelling, -p "
                ":targetDirectory for stopping or :targetDirectory for purely taking savepoint."),
        Wording(SLUG, r"Config key \[[\w.-]+\] is not set\. Property \[target-?[dD]irectory\] must be provided",
                "1.5 – 2.x", "SavepointHandlers (RestHandlerException: the REST API's check of a request without a "
                "target directory; the CLI shows it in a RestClientException; the words checked in the 1.17.2, "
                "1.20.3 and 2.3.0 jars)",
                "org.apache.flink.runtime.rest.util.RestClientException: [org.apache.flink.runtime.rest.handler."
                "RestHandlerException: Config key [execution.checkpointing.savepoint-dir] is not set. Property "
                "[target-directory] must be provided."),
        Wording(SLUG, r"Failed to create savepoint directory at \S+",
                "1.5 – 2.x", "AbstractFsCheckpointStorageAccess#initializeLocationForSavepoint (IOException; the "
                "words checked in the 1.17.2, 1.20.3 and 2.3.0 jars)",
                "java.io.IOException: Failed to create savepoint directory at /shared/savepoints"),
    )
    root_causes = (
        RootCause("client-timeout", "The client stopped waiting, not the savepoint: the CLI gave up after "
                  "client.timeout while the JobManager, which had taken the request up, went on with the savepoint.",
                  "The CLI's 'Failed to trigger a savepoint' / 'Could not stop with a savepoint job' caused by a bare "
                  "java.util.concurrent.TimeoutException, while the JobManager logged the savepoint's trigger before "
                  "the client gave up and its completion (or nothing yet) after.",
                  patches=("ops:confirm the savepoint before triggering again", "flink:client.timeout",
                           "ops:trigger the savepoint without waiting"),
                  would_change="The JobManager taking the request up only after the client gave up, its log silent "
                               "meanwhile (a stalled JobManager: rpc-timeout), or the savepoint failing on the "
                               "JobManager (then that failure is the cause)."),
        RootCause("tasks-not-running", "The savepoint could not start: not every task of the job was RUNNING "
                  "(still deploying or restoring state, restarting after a failure, or finished).",
                  "'Not all required tasks are currently running' / 'task … is not being executed at the moment' "
                  "right after the savepoint request.",
                  patches=("ops:trigger once every task is running",)),
        RootCause("savepoint-expired", "The savepoint took longer than the checkpoint timeout and was aborted: large "
                  "or slow state, or backpressure slowing the barriers.",
                  "The savepoint's attempt 'expired before completing' (or the CLI's CheckpointException saying so).",
                  patches=("flink:execution.checkpointing.timeout", "ops:find what slows the snapshot")),
        RootCause("directory-not-configured", "No savepoint directory was given with the request and none is "
                  "configured: the JobManager refused the savepoint.",
                  "'No savepoint directory configured' or 'No savepoint location given and no default location "
                  "configured'.",
                  patches=("flink:execution.checkpointing.savepoint-dir", "ops:pass a target directory")),
        RootCause("directory-not-writable", "The savepoint directory could not be created or written: permissions "
                  "or credentials of the JobManager's user on that path.",
                  "'Failed to create savepoint directory at …' or an access-denied error in the savepoint's failure.",
                  patches=("ops:make the savepoint directory writable",)),
        RootCause("undetermined", "A savepoint failed for the caller, but these logs do not say whether the "
                  "JobManager took it up, nor how it ended.",
                  "A CLI failure without the JobManager's log of the savepoint.",
                  patches=("ops:confirm the savepoint before triggering again",),
                  next_evidence="the JobManager log from the request on (its 'Triggering savepoint for job' line and "
                                "the savepoint's 'Completed checkpoint' or failure line) and GET /jobs/<job id>/"
                                "checkpoints, which lists the savepoint with its status."),
    )
    templates = {
        # client-timeout
        "client-timeout": "`{command}` gave up after its client.timeout of {client_timeout} (a bare "
                          "java.util.concurrent.TimeoutException), but the JobManager was answering: it had started "
                          "savepoint {savepoint} of job {job} {started}{outcome}. The savepoint did not fail; the "
                          "client stopped waiting.{stop_note}",
        "completed later": " and completed it {late:.0f} s after the CLI gave up ({duration:.0f} s in all)",
        "completed untimed": " and completed it (these logs have no times to say when)",
        "completed untimed note": "savepoint {savepoint} completed",
        "still running": " and logged neither its completion nor a failure afterwards: it is probably still running",
        "finished note": " The stop went on as well: the job reached {state} after the savepoint.",
        "client gave up note": "the CLI stopped waiting after client.timeout {client_timeout}",
        "job state note": "the job reached {state} after the stop's savepoint",
        "requested note": "the JobManager took the request up before the client gave up",
        "triggered note": "savepoint {savepoint} triggered",
        "completed note": "savepoint {savepoint} completed {late:.0f} s after the CLI gave up",
        "confirm reason": "The savepoint may have completed or still be running: look for it before triggering "
                          "another (a second one doubles the load; a stop that completed already ended the job).",
        "confirm reason undetermined": "Whether the JobManager took the request up, and how it ended, is not in "
                                       "these logs: look for the savepoint before triggering another.",
        "client timeout reason": "Longer than the savepoint takes ({needed}): the CLI then waits for the result "
                                 "instead of failing while the savepoint goes on.",
        "detached reason": "Prevention: a request that does not wait. {how}",
        "detached how": "Since 1.19 the CLI returns the trigger id at once with -detached (one dash: --detached "
                        "is refused, and -d means dispose for flink savepoint); poll the trigger id through the "
                        "REST API.",
        "rest how": "This release's CLI has no -detached (it came in 1.19): trigger through the REST API, which "
                    "returns a trigger id at once, and poll it.",
        # tasks-not-running
        "tasks-not-running": "The savepoint of job {job} could not start: {task} was not running ({why}), and a "
                             "savepoint needs every task RUNNING.",
        "why initializing": "it was {state}, still deploying or restoring its state",
        "why restarting": "it was {state}, the job failing over",
        "why finished": "it had {state}",
        "why unknown": "its state at that moment is not in these logs",
        "not running note": "the savepoint's trigger failed: a task was not running",
        "task state note": "the task's last state change before the request",
        "wait reason": "Trigger the savepoint again once every task is RUNNING (the REST API lists them); {advice}",
        "advice initializing": "a long initialisation means large state to restore or a slow open().",
        "advice restarting": "a job that keeps restarting needs its failure fixed first.",
        "advice finished": "finished tasks take part in checkpoints only while "
                           "execution.checkpointing.checkpoints-after-tasks-finish (….enabled before 1.20) is on, "
                           "as it is by default.",
        "advice unknown": "the job's state at the request tells which.",
        # savepoint-expired
        "savepoint-expired": "Savepoint {savepoint} of job {job} expired before completing: it took longer than "
                             "the checkpoint timeout of {timeout}{checkpoints}. Large or slow state, or backpressure "
                             "delaying the barriers, makes a savepoint slow; savepoints are always aligned.",
        "checkpoints": "; the job's checkpoints took up to {longest} s",
        "expired note": "the savepoint expired on the checkpoint timeout",
        "timeout reason": "Room for the savepoint: it expired at {timeout}; the timeout covers checkpoints too.",
        "slow reason": "Backpressure (busy or backpressured tasks in the web UI), the state's size and the "
                       "storage's throughput decide how long a savepoint takes (the checkpoint-expired runbook "
                       "measures them).",
        # directories
        "directory-not-configured": "The savepoint of job {job} was refused: no target directory was given with "
                                    "the request and {key} is not configured.",
        "no directory note": "no savepoint directory given or configured",
        "savepoint dir reason": "A cluster-wide default for savepoints without a target directory{derived}.",
        "derived": ", beside the checkpoint directory",
        "target reason": "Or name the directory in the request.",
        "directory-not-writable": "The savepoint of job {job} failed: its directory {path} could not be "
                                  "created{denied}.",
        "denied": " (access denied)",
        "not writable note": "the savepoint directory could not be created",
        "writable reason": "Let the JobManager's and TaskManagers' user create and write {path} (permissions, "
                           "credentials or a bucket policy), or point the savepoint at a directory they can write.",
        # undetermined
        "undetermined": "`{command}` for job {job} failed{timeout}, and these logs do not show whether the "
                        "JobManager took the savepoint up nor how it ended.",
        "failed otherwise": "`{command}` for job {job} stopped waiting, and savepoint {savepoint} failed on the "
                            "JobManager as well: {failure}. That failure, not the client's wait, is what to fix; "
                            "this runbook does not tell its cause apart.",
        "failed note": "the savepoint failed on the JobManager",
        "undetermined timeout": " when the client stopped waiting (a bare TimeoutException after client.timeout)",
        "failure note": "the CLI's failure",
        "excerpt": " Unknown from this excerpt: the JobManager's log of the savepoint.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = savepoints.client_failures(incident)
        client_events = [f.event for f in failures]
        jm_failures = [ev for ev in incident.events if ev.role != "client" and (
            NO_DIRECTORY.search(ev.text) or DIRECTORY_FAILED.search(ev.text))]
        for finder in (self._no_directory, self._not_writable):
            finding = finder(incident, client_events + jm_failures)
            if finding:
                return [finding]
        expired = [a for a in savepoints.savepoint_attempts(incident) if a.outcome == "expired"]
        expired_cli = [f for f in failures if EXPIRED.search(f.event.text)]
        if expired or expired_cli:
            return [self._expired(incident, expired, expired_cli)]
        not_running = self._not_running_events(incident, client_events)
        if not_running:
            return [self._not_running(incident, not_running)]
        for failure in failures:
            if not failure.timed_out:
                continue
            started = savepoints.started_while_waiting(incident, failure)
            if started is None:
                continue
            attempt = savepoints.attempt_after(incident, failure.job, started.ts)
            if attempt and attempt.outcome in ("failed", "declined"):
                return [self._failed_otherwise(incident, failure, attempt)]
            return [self._client_timeout(incident, failure, started)]
        # A client that timed out while the JobManager never took the request up: the rpc-timeout runbook judges
        # the JobManager's stall when its log shows one; without that log nothing tells the two apart.
        undecided = [f for f in failures if not any(ev.role == "jobmanager" for ev in incident.events)]
        if undecided:
            return [self._undetermined(incident, undecided[0])]
        return []

    # -- the client stopped waiting -------------------------------------------------------------------------------

    def _client_timeout(self, incident: Incident, failure: savepoints.ClientFailure, started: Event) -> Finding:
        client_ms = parse_duration_ms(incident.config.get(_CLIENT_TIMEOUT)) or 60000
        attempt = savepoints.attempt_after(incident, failure.job, started.ts)
        events = [failure.event, started]
        notes = {0: self.say("client gave up note", client_timeout=_seconds(client_ms)),
                 1: self.say("requested note")}
        if attempt and attempt.events and attempt.events[0] is not started:
            events.append(attempt.events[0])
            notes[len(events) - 1] = self.say("triggered note", savepoint=attempt.checkpoint_id)
        late = seconds_between(failure.event.ts, attempt.finished) if attempt and attempt.finished else None
        duration = (attempt.duration_ms / 1000 if attempt and attempt.duration_ms
                    else seconds_between(attempt.triggered, attempt.finished) if attempt and attempt.finished else None)
        if attempt and attempt.outcome == "completed":
            done = next((ev for ev in attempt.events if "Completed" in ev.message or ev.line == 0), attempt.events[-1])
            events.append(done)
            if late is not None:
                notes[len(events) - 1] = self.say("completed note", savepoint=attempt.checkpoint_id, late=late)
                outcome = self.say("completed later", late=late, duration=duration or 0)
            else:
                notes[len(events) - 1] = self.say("completed untimed note", savepoint=attempt.checkpoint_id)
                outcome = self.say("completed untimed")
        else:
            outcome = self.say("still running")
        end_state = _job_state_after(incident, failure.job, failure.event.ts) if failure.action == "stop" else None
        summary = self.say(
            "client-timeout", command=failure.command, client_timeout=_seconds(client_ms),
            savepoint=attempt.checkpoint_id if attempt else "?", job=failure.job,
            started=f"at {_clock(started.ts)}" if started.ts else "while the client waited",
            outcome=outcome, stop_note=self.say("finished note", state=end_state[0]) if end_state else "")
        if end_state:
            events.append(end_state[1])
            notes[len(events) - 1] = self.say("job state note", state=end_state[0])
        needed_s = duration or (seconds_between(started.ts, _last_ts(incident)) or client_ms / 1000)
        patches = [
            self.ops_patch("confirm the savepoint before triggering again", self.say("confirm reason"),
                           snippet=_confirm_snippet(failure.job, attempt)),
            self.flink_patch(incident, _CLIENT_TIMEOUT, f"{_minutes_for(needed_s, client_ms)} min",
                             self.say("client timeout reason", needed=_seconds(needed_s * 1000) if duration
                                      else f"more than {_seconds(needed_s * 1000)}")),
            self.ops_patch("trigger the savepoint without waiting", self.say(
                "detached reason", how=self.say("detached how") if _has_detached(incident) is not False
                else self.say("rest how")), snippet=_detached_snippet(incident, failure), urgent=False),
        ]
        details = {"command": failure.command, "client_timeout": _seconds(client_ms), "job": failure.job,
                   "savepoint": attempt.checkpoint_id if attempt else None,
                   "savepoint_outcome": attempt.outcome if attempt else "not logged",
                   "completed_after_client_gave_up": f"{late:.0f} s" if late is not None else None,
                   "savepoint_duration": f"{duration:.0f} s" if duration else None,
                   "job_state_after": end_state[0] if end_state else None}
        confidence = 0.85 if attempt and attempt.outcome == "completed" else 0.75
        if not started.ts:
            confidence = min(confidence, 0.7)
        return self.finding("client-timeout", summary, events, notes=notes, confidence=confidence, patches=patches,
                            details={k: v for k, v in details.items() if v is not None})

    # -- tasks not running ----------------------------------------------------------------------------------------

    def _not_running_events(self, incident: Incident, cli: list[Event]) -> list[Event]:
        """CLI failures saying so, and the JobManager's trigger failures right after a savepoint request."""
        found = [ev for ev in cli if NOT_RUNNING.search(ev.text)]
        requests = savepoints.jobmanager_requests(incident)
        for ev in incident.events:
            if ev.role == "client" or not NOT_RUNNING.search(ev.text) or ev in found:
                continue
            m = CHECKPOINT_TRIGGER_FAILED.search(ev.message)
            job = m["job"] if m else None
            if any(_within(seconds_between(r.ts, ev.ts), _TRIGGER_FAILED_WITHIN_S)
                   and (job is None or savepoints.SAVEPOINT_REQUESTED.search(r.message)["job"] == job)
                   for r in requests):
                found.append(ev)
        return sorted(found, key=lambda e: e.ts or "~")

    def _not_running(self, incident: Incident, found: list[Event]) -> Finding:
        first = next((ev for ev in found if ev.role == "jobmanager"), found[0])
        m = next((m for ev in found for m in [NOT_RUNNING.search(ev.text)] if m and m["job"]), None)
        job = m["job"] if m else _job_of(first) or "?"
        task = m["task"] if m else None
        state, state_event = _task_state_before(incident, task, job, first.ts)
        kind = ("initializing" if state in ("DEPLOYING", "INITIALIZING", "SCHEDULED", "CREATED")
                else "restarting" if state in ("RESTARTING", "FAILING", "CANCELING", "FAILED", "CANCELED")
                else "finished" if state == "FINISHED" else "unknown")
        why = self.say(f"why {kind}", **({"state": state} if kind != "unknown" else {}))
        events = found[:3]
        notes = {i: self.say("not running note") for i in range(len(events))}
        if state_event is not None:
            events.append(state_event)
            notes[len(events) - 1] = self.say("task state note")
        summary = self.say("tasks-not-running", job=job, task=task or "a task", why=why)
        patches = [self.ops_patch("trigger once every task is running",
                                  self.say("wait reason", advice=self.say(f"advice {kind}")),
                                  snippet=f"curl -s http://<jobmanager>:8081/jobs/{job} | jq '.vertices[] | "
                                          "{name, status}'")]
        details = {"job": job, "task": task, "task_state": state or "not in these logs",
                   "failures": len(found)}
        confidence = 0.85 if state else 0.7
        if is_excerpt(incident):
            confidence = min(confidence, 0.5)
        return self.finding("tasks-not-running", summary, events, notes=notes, confidence=confidence,
                            patches=patches, details={k: v for k, v in details.items() if v is not None})

    # -- expired ----------------------------------------------------------------------------------------------------

    def _expired(self, incident: Incident, expired: list[CheckpointAttempt], cli) -> Finding:
        attempt = expired[0] if expired else None
        job = attempt.job if attempt and attempt.job else cli[0].job
        timeout_ms = parse_duration_ms(incident.config.get(_CHECKPOINT_TIMEOUT)) or 600000
        events: list[Event] = []
        notes: dict[int, str] = {}
        if attempt:
            for ev in attempt.events[:2]:
                events.append(ev)
                notes[len(events) - 1] = (self.say("expired note") if EXPIRED_LINE.search(ev.message)
                                          else self.say("triggered note", savepoint=attempt.checkpoint_id))
        if cli:
            events.append(cli[0].event)
            notes[len(events) - 1] = self.say("failure note")
        checkpoints = [a for a in checkpoint_history(incident) if a.outcome == "completed" and a.duration_ms
                       and not savepoints.is_savepoint(a) and (not a.job or a.job == job)]
        longest = max((a.duration_ms for a in checkpoints), default=0) / 1000
        summary = self.say("savepoint-expired", savepoint=attempt.checkpoint_id if attempt else "?", job=job,
                           timeout=_seconds(timeout_ms),
                           checkpoints=self.say("checkpoints", longest=f"{longest:.0f}") if checkpoints else "")
        patches = [self.flink_patch(incident, _CHECKPOINT_TIMEOUT, f"{_minutes_for(timeout_ms / 1000, timeout_ms)} min",
                                    self.say("timeout reason", timeout=_seconds(timeout_ms))),
                   self.ops_patch("find what slows the snapshot", self.say("slow reason"),
                                  snippet=f"curl -s http://<jobmanager>:8081/jobs/{job}/checkpoints | jq "
                                          "'.history[] | {id, is_savepoint, status, end_to_end_duration, state_size}'")]
        details = {"job": job, "savepoint": attempt.checkpoint_id if attempt else None,
                   "checkpoint_timeout": _seconds(timeout_ms),
                   "longest_checkpoint": f"{longest:.0f} s" if checkpoints else None}
        confidence = 0.85 if attempt else 0.7
        if is_excerpt(incident):
            confidence = min(confidence, 0.5)
        return self.finding("savepoint-expired", summary, events, notes=notes, confidence=confidence,
                            patches=patches, details={k: v for k, v in details.items() if v is not None})

    # -- directories ------------------------------------------------------------------------------------------------

    def _no_directory(self, incident: Incident, events: list[Event]) -> Finding | None:
        found = [ev for ev in events if NO_DIRECTORY.search(ev.text)]
        if not found:
            return None
        found.sort(key=lambda e: e.ts or "~")
        first = found[0]
        job = _job_of(first) or next((_job_of(ev) for ev in found if _job_of(ev)), None) or "?"
        checkpoint_dir = incident.config.get(_CHECKPOINT_DIR) or incident.config.get("state.checkpoints.dir")
        derived = checkpoint_dir.rstrip("/").rsplit("/", 1)[0] + "/savepoints" if checkpoint_dir else None
        key = version_key(incident, _SAVEPOINT_DIR)
        summary = self.say("directory-not-configured", job=job, key=key)
        patches = [self.flink_patch(incident, _SAVEPOINT_DIR, derived or "s3://<bucket>/flink/savepoints",
                                    self.say("savepoint dir reason", derived=self.say("derived") if derived else "")),
                   self.ops_patch("pass a target directory", self.say("target reason"),
                                  snippet=f"flink savepoint {job} <durable directory>\nflink stop --savepointPath "
                                          f"<durable directory> {job}")]
        return self.finding("directory-not-configured", summary, found[:3],
                            notes={i: self.say("no directory note") for i in range(min(3, len(found)))},
                            confidence=0.9, patches=patches,
                            details={"job": job, "configured": "none"})

    def _not_writable(self, incident: Incident, events: list[Event]) -> Finding | None:
        found = [(ev, m) for ev in events for m in [DIRECTORY_FAILED.search(ev.text)] if m]
        if not found:
            return None
        found.sort(key=lambda f: f[0].ts or "~")
        first, m = found[0]
        job = _job_of(first) or next((_job_of(ev) for ev, _ in found if _job_of(ev)), None) or "?"
        path = m["path"]
        summary = self.say("directory-not-writable", job=job, path=path,
                           denied=self.say("denied") if any(DENIED.search(ev.text) for ev, _ in found) else "")
        patches = [self.ops_patch("make the savepoint directory writable", self.say("writable reason", path=path),
                                  snippet=_inspect_directory(path))]
        return self.finding("directory-not-writable", summary, [ev for ev, _ in found][:3],
                            notes={i: self.say("not writable note") for i in range(min(3, len(found)))},
                            confidence=0.85, patches=patches,
                            details={"job": job, "path": path})

    # -- undetermined -------------------------------------------------------------------------------------------------

    def _failed_otherwise(self, incident: Incident, failure: savepoints.ClientFailure,
                          attempt: CheckpointAttempt) -> Finding:
        """The client stopped waiting, but the savepoint also failed on the JobManager, for a reason none of the
        causes above names: that failure, not the client's wait, is what to fix."""
        summary = self.say("failed otherwise", command=failure.command, job=failure.job,
                           savepoint=attempt.checkpoint_id, failure=attempt.failure or "no reason logged")
        events = [failure.event] + attempt.events[-1:]
        patches = [self.ops_patch("confirm the savepoint before triggering again",
                                  self.say("confirm reason undetermined"),
                                  snippet=_confirm_snippet(failure.job, attempt))]
        return self.finding("undetermined", summary, events,
                            notes={0: self.say("failure note"), 1: self.say("failed note")},
                            confidence=0.5, patches=patches,
                            details={"command": failure.command, "job": failure.job,
                                     "savepoint": attempt.checkpoint_id, "savepoint_outcome": attempt.outcome,
                                     "savepoint_failure": attempt.failure})

    def _undetermined(self, incident: Incident, failure: savepoints.ClientFailure) -> Finding:
        summary = self.say("undetermined", command=failure.command, job=failure.job,
                           timeout=self.say("undetermined timeout") if failure.timed_out else "")
        if is_excerpt(incident):
            summary += self.say("excerpt")
        patches = [self.ops_patch("confirm the savepoint before triggering again",
                                  self.say("confirm reason undetermined"),
                                  snippet=_confirm_snippet(failure.job, None))]
        return self.finding("undetermined", summary, [failure.event], notes={0: self.say("failure note")},
                            confidence=0.4, patches=patches,
                            details={"command": failure.command, "job": failure.job,
                                     "client_timed_out": failure.timed_out})


def _within(gap: float | None, limit: float) -> bool:
    return gap is not None and 0 <= gap <= limit


def _seconds(ms: float) -> str:
    s = ms / 1000
    if s >= 120 and s % 60 == 0:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"


def _minutes_for(needed_s: float, current_ms: float) -> int:
    """Twice what was needed, in whole minutes, at least 5 and more than the current value."""
    return max(5, math.ceil(2 * needed_s / 60), math.floor(current_ms / 60000) + 1)


def _clock(ts: str | None) -> str:
    return ts[11:19] if ts and len(ts) >= 19 else (ts or "an unknown time")


def _last_ts(incident: Incident) -> str | None:
    lines = savepoints.jobmanager_lines(incident)
    return lines[-1].ts if lines else None


def _job_of(ev: Event) -> str | None:
    m = re.search(r"\b([0-9a-f]{32})\b", ev.text)
    return m.group(1) if m else None


def _job_state_after(incident: Incident, job: str, ts: str | None) -> tuple[str, Event] | None:
    """The job's terminal state reached after ``ts`` (a stop that went on after the client gave up)."""
    for ev in incident.events:
        m = JOB_STATE.search(ev.message)
        if m and m["job"] == job and ev.ts and ts and ev.ts >= ts and m["to"] in ("FINISHED", "CANCELED", "FAILED"):
            return m["to"], ev
    return None


def _task_state_before(incident: Incident, task: str | None, job: str,
                       ts: str | None) -> tuple[str | None, Event | None]:
    """The last state of ``task`` (or of the job) before ``ts``, from the JobManager's state-change lines."""
    last: tuple[str | None, Event | None] = (None, None)
    for ev in savepoints.jobmanager_lines(incident):
        if ts and ev.ts > ts:
            break
        if task and ev.message.startswith(task.split(" (")[0]) and (m := re.search(_TASK_STATE, ev.message)):
            last = (m["to"], ev)
        elif not task and (m := JOB_STATE.search(ev.message)) and m["job"] == job:
            last = (m["to"], ev)
    if last[0] is None:
        for ev in savepoints.jobmanager_lines(incident):
            if ts and ev.ts > ts:
                break
            if (m := JOB_STATE.search(ev.message)) and m["job"] == job and m["to"] != "RUNNING":
                last = (m["to"], ev)
    return last


def _has_detached(incident: Incident) -> bool | None:
    version = incident.version_tuple
    return None if version is None else tuple(version[:2]) >= _DETACHED_SINCE


def _confirm_snippet(job: str, attempt: CheckpointAttempt | None) -> str:
    grep = (f"grep -n -E 'Completed checkpoint {attempt.checkpoint_id} for job {job}|"
            f"Checkpoint {attempt.checkpoint_id} of job {job} expired' <jobmanager log>" if attempt
            else f"grep -n -E 'savepoint for job {job}|Completed checkpoint [0-9]+ for job {job}' <jobmanager log>")
    return (f"curl -s http://<jobmanager>:8081/jobs/{job}/checkpoints | jq '.latest.savepoint, "
            f"[.history[] | select(.is_savepoint)][0]'\n{grep}")


def _detached_snippet(incident: Incident, failure: savepoints.ClientFailure) -> str:
    body = "stop -d '{\"drain\": false}'" if failure.action == "stop" else "savepoints -d '{\"cancel-job\": false}'"
    rest = (f"curl -s -X POST http://<jobmanager>:8081/jobs/{failure.job}/{body}"
            + f"\ncurl -s http://<jobmanager>:8081/jobs/{failure.job}/savepoints/<request-id>")
    cli = f"flink {failure.action} -detached {failure.job}"
    detached = _has_detached(incident)
    return rest if detached is False else cli if detached else f"{cli}   # 1.19+\n{rest}"


def _inspect_directory(path: str) -> str:
    """How to see who may write in the savepoint directory (Flink creates savepoint-<job>-<random> inside it)."""
    if path.startswith(("hdfs:", "viewfs:")):
        return f"hdfs dfs -ls -d {path}"
    if path.startswith(("s3:", "s3a:", "s3p:", "gs:", "abfs:", "abfss:", "oss:")):
        return f"# the bucket policy and the credentials of the JobManager's and TaskManagers' pods for {path}"
    local = re.sub(r"^file:(?://)?", "", path.rstrip("/")) or "/"
    return f"ls -ld {local}   # as the user running Flink: sudo -u <flink user> touch {local}/probe"
