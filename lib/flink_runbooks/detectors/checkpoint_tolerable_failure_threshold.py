"""``FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold``: which failures exhausted it, and why."""
from __future__ import annotations

import re

from flink_runbooks.evidence.checkpoints import THRESHOLD, CheckpointAttempt, checkpoint_history, failed_streak_before, last_completed_before
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.parse.units import format_duration
from flink_runbooks.detectors.base import Detector

DEFAULT_TOLERABLE = 3  # the seed's value: rides out isolated failures, still fails on a real outage
TOLERABLE_KEY = "execution.checkpointing.tolerable-failed-checkpoints"

# (cause, pattern over the failing checkpoint's evidence), most specific first.
_REASONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("storage-unwritable", re.compile(
        r"Mkdirs failed|Permission denied|AccessDenied|Access Denied|Read-only file system|No space left|"
        r"Quota|quota exceeded|not writable|Operation not permitted", re.I)),
    ("finalize-failure", re.compile(r"Failure to finalize checkpoint|_metadata already exists")),
    ("checkpoint-expired", re.compile(r"expired before completing")),
    ("storage-io-error", re.compile(
        r"IO-problem detected|Could not flush (?:to file )?and close the file system output stream|"
        r"All datanodes .* are bad|could only be (?:written|replicated) to \d+ of the \d+ minReplication|"
        r"Could not open output stream|UnknownHostException|Connection refused|SocketTimeoutException|"
        r"Read timed out|Unable to execute HTTP request|FileNotFoundException")),
    ("async-phase-failure", re.compile(r"Asynchronous task checkpoint failed|Could not materialize checkpoint")),
    ("declined", re.compile(r"Checkpoint was declined|Decline checkpoint")),
)


class CheckpointTolerableFailureThreshold(Detector):
    slug = "checkpoint-tolerable-failure-threshold"
    title = "Exceeded checkpoint tolerable failure threshold"
    category = "checkpointing"
    meaning = ("More checkpoints failed in a row than execution.checkpointing.tolerable-failed-checkpoints allows, "
               "so Flink failed the job over; the reason is whatever made those checkpoints fail.")
    exception_classes = ("org.apache.flink.util.FlinkRuntimeException", "org.apache.flink.runtime.checkpoint.CheckpointException")
    versions = "1.9 – 2.x (the message names the last failure reason since 1.17)"
    layer = 1
    # The threshold's own stack says which phase tripped it when nothing else in the excerpt does.
    frames = (r"CheckpointCoordinator\.finalizeCheckpoint",)
    signatures = (
        r"Exceeded checkpoint tolerable failure threshold",
        r"Failure to finalize checkpoint",
        r"Asynchronous task checkpoint failed",
        r"IO-problem detected",
        r"Checkpoint was declined",
        r"Mkdirs failed to create",
    )
    root_causes = (
        RootCause("storage-unwritable", "The checkpoint storage refused writes (permissions, read-only or full).",
                  "Failed checkpoints end in IOException 'Mkdirs failed' / 'Permission denied' / quota errors."),
        RootCause("storage-io-error", "Writing to the checkpoint storage failed (file system or network errors).",
                  "Failed checkpoints end in I/O errors of the storage (HDFS datanodes, connection, stream close)."),
        RootCause("checkpoint-expired", "Checkpoints took longer than execution.checkpointing.timeout.",
                  "'Checkpoint N of job X expired before completing' for the failing checkpoints."),
        RootCause("finalize-failure", "The JobManager could not finalize the checkpoint (e.g. _metadata already exists).",
                  "'Failure to finalize checkpoint' on the JobManager."),
        RootCause("async-phase-failure", "The asynchronous part of a task's snapshot failed.",
                  "'Asynchronous task checkpoint failed' / 'Could not materialize checkpoint' without a storage error."),
        RootCause("declined", "Tasks declined the checkpoints.",
                  "'Decline checkpoint N by task' with a cause that is not a storage error."),
        RootCause("unknown-reason", "The logs show the threshold but not the failures that led to it.",
                  "Only the FlinkRuntimeException is present (an excerpt, or the JobManager log is missing)."),
    )

    def detect(self, incident: Incident) -> list[Finding]:
        exceeded = [ev for ev, _ in incident.find(THRESHOLD)]
        if not exceeded:
            return []
        history = checkpoint_history(incident)
        first = exceeded[0]
        streak = failed_streak_before(history, first)
        reason_text = _stated_reason(exceeded)
        cause = _classify(streak, reason_text)
        if cause == "unknown-reason" and any("finalizeCheckpoint" in f for ev in exceeded for f in ev.frames):
            cause = "finalize-failure"
        tolerable = incident.config.get_int(TOLERABLE_KEY)
        evidence: list[Event] = [first]
        notes = {0: "the threshold was exceeded: the job fails over"}
        if streak:
            culprit = next((e for e in streak[0].events if e.root_cause), streak[0].events[-1])
            evidence.append(culprit)
            notes[1] = f"checkpoint {streak[0].checkpoint_id} failed: {streak[0].failure or streak[0].outcome}"
        last_ok = last_completed_before(history, first.ts, streak[0].job if streak else None)
        if last_ok and last_ok.events:
            evidence.append(last_ok.events[-1])
            notes[len(evidence) - 1] = f"last completed checkpoint before the failure: {last_ok.checkpoint_id}"
        evidence += [ev for ev in exceeded[1:3]]
        summary = self._summary(cause, exceeded, streak, tolerable, reason_text)
        return [self.finding(
            cause, summary, evidence,
            confidence=0.6 if cause == "unknown-reason" or not streak else 0.9,
            patches=self._patches(incident, cause, streak),
            notes=notes,
            details={
                "threshold_exceeded": len(exceeded),
                "tolerable_failed_checkpoints": tolerable if tolerable is not None else "unset (0)",
                "failed_streak": [a.checkpoint_id for a in streak],
                "stated_reason": reason_text,
                "failures": sorted({a.failure for a in streak if a.failure}),
            },
        )]

    def _summary(self, cause, exceeded, streak, tolerable, reason_text) -> str:
        tol = f"tolerable-failed-checkpoints={tolerable}" if tolerable is not None else "tolerable-failed-checkpoints unset (0)"
        head = (f"The checkpoint failure threshold was exceeded {len(exceeded)} time(s) ({tol}), "
                f"so the job failed over. ")
        if cause == "unknown-reason":
            return head + ("The failing checkpoints are not in the given logs; read the JobManager log around the "
                           "first occurrence (or the Checkpoint History tab) for the reason.")
        failure = next((a.failure for a in streak if a.failure), reason_text or "")
        ids = ", ".join(str(a.checkpoint_id) for a in streak[:5])
        what = self.cause(cause).summary
        return head + f"Why: {what} Checkpoint(s) {ids or '?'} failed with: {failure}".rstrip(": ")

    def _patches(self, incident: Incident, cause: str, streak: list[CheckpointAttempt]):
        cfg = incident.config
        patches = []
        if cause == "storage-unwritable":
            ckpt_dir = cfg.get("execution.checkpointing.dir") or cfg.get("state.checkpoints.dir") or "<checkpoint dir>"
            patches.append(self.ops_patch(
                "checkpoint storage permissions",
                f"Make {ckpt_dir} writable for the user Flink runs as (and check free space/quota): no "
                f"configuration change makes checkpoints succeed while the storage refuses writes.",
                snippet=f"# on the storage, as its owner\nchmod -R u+rwX {ckpt_dir.replace('file://', '').replace('file:', '')}"))
        if cause in ("storage-io-error", "finalize-failure"):
            patches.append(self.ops_patch(
                "checkpoint storage health",
                "Fix the checkpoint storage errors shown in the evidence; tolerating a few failures only bridges "
                "short storage outages."))
        tolerable = cfg.get_int(TOLERABLE_KEY) or 0
        proposed_tolerable = max(DEFAULT_TOLERABLE, tolerable + 2) if tolerable >= DEFAULT_TOLERABLE else DEFAULT_TOLERABLE
        patches.append(self.flink_patch(
            incident, TOLERABLE_KEY, str(proposed_tolerable),
            "Let isolated checkpoint failures pass instead of failing the job over on the first one "
            "(consecutive failures still fail it). Job code that calls "
            "setTolerableCheckpointFailureNumber overrides this key."))
        if cause == "checkpoint-expired":
            timeout = cfg.get_duration_ms("execution.checkpointing.timeout") or 600_000
            patches.append(self.flink_patch(
                incident, "execution.checkpointing.timeout", format_duration(timeout * 2),
                "Checkpoints expired: give them more time while the backpressure behind the slow alignment is fixed."))
        if cause in ("checkpoint-expired", "async-phase-failure", "declined", "unknown-reason"):
            interval = cfg.get_duration_ms("execution.checkpointing.interval")
            min_pause = cfg.get_duration_ms("execution.checkpointing.min-pause") or 0
            if interval:
                wanted = max(min_pause, interval // 4, 1000)
                if wanted > min_pause:
                    patches.append(self.flink_patch(
                        incident, "execution.checkpointing.min-pause", format_duration(wanted),
                        "Leave the job time to make progress between checkpoints so they do not pile up."))
        patches.append(self.code_patch(
            "CheckpointConfig#setTolerableCheckpointFailureNumber",
            f"env.getCheckpointConfig().setTolerableCheckpointFailureNumber({proposed_tolerable});",
            "The same setting in job code (it wins over the configuration file when the job sets it)."))
        return patches


def _stated_reason(exceeded: list[Event]) -> str | None:
    for ev in exceeded:
        m = THRESHOLD.search(ev.text)
        if m and m.group("reason"):
            return m.group("reason").strip()
    return None


def _classify(streak: list[CheckpointAttempt], stated: str | None) -> str:
    texts = []
    for att in streak:
        texts += [att.failure or ""] + [ev.text for ev in att.events]
    texts.append(stated or "")
    blob = "\n".join(texts)
    for cause, rx in _REASONS:
        if rx.search(blob):
            return cause
    return "unknown-reason"
