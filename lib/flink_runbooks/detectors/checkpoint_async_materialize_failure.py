"""``Could not materialize checkpoint N for operator``: the asynchronous part of a task's snapshot failed.

When it fires: the async failure failed a task (Flink ≤ 1.8, ``AsynchronousException``) → a failure; the async
failures only declined checkpoints and the job kept running (1.9+) → a warning, unless they were one short run after
which checkpoints completed again (a blip the job rode out).

When it stays silent: for failed checkpoints whose run ended in ``Exceeded checkpoint tolerable failure threshold``
(``checkpoint-tolerable-failure-threshold`` reports them, with the same storage cause, as the reason the job failed
over), and, since 1.9, for checkpoints that had already expired or been declined by another task (the JobManager
ignores those failures; the runbook of the first end applies).
"""
from __future__ import annotations

import re
from collections import Counter

from flink_runbooks.evidence.checkpoints import checkpoint_history
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.evidence.snapshot_failures import (FLUSH_CLOSE, HDFS_FAILURE, OPEN_STREAM, STORAGE_CLIENT, TOLERABLE_KEY,
                                 SnapshotFailure, checkpoint_dir, decline_instead_of_fail_patch, is_legacy,
                                 longest_failed_streak, prior_discard, snapshot_failures, storage_actions,
                                 storage_error, threshold_covered_ids, tolerance_patches, transient_blip)
from flink_runbooks.detectors.base import Detector
from flink_runbooks.vocabulary.wordings import Wording

# Deepest causes that come from serializing the state rather than from writing it.
SERIALIZATION = re.compile(
    r"ConcurrentModificationException|KryoException|NullPointerException|ClassCastException|"
    r"IndexOutOfBoundsException|StackOverflowError|NotSerializableException|InvalidClassException")


class CheckpointAsyncMaterializeFailure(Detector):
    slug = "checkpoint-async-materialize-failure"
    title = "Could not materialize checkpoint (asynchronous snapshot failed)"
    category = "checkpointing"
    meaning = ("A task could not finish writing its state to the checkpoint storage in the asynchronous part of a "
               "checkpoint: up to Flink 1.8 this fails the task, since 1.9 it declines the checkpoint.")
    exception_classes = ("org.apache.flink.streaming.runtime.tasks.AsynchronousException",
                         "org.apache.flink.runtime.taskmanager.AsynchronousException",
                         "org.apache.flink.runtime.checkpoint.CheckpointException")
    versions = "1.x, 2.x (fails the task up to 1.8; declines the checkpoint since 1.9, FLINK-11662)"
    layer = 1  # wraps a storage fault; hdfs-datanode-failure is the more specific runbook for datanode trouble
    collect_next = ("the storage error under the failed snapshot and whether checkpoints kept failing (the "
        "TaskManager and JobManager logs)")
    config_keys = (
        "execution.checkpointing.tolerable-failed-checkpoints",
        "execution.checkpointing.dir",
        "execution.checkpointing.interval",
        "execution.checkpointing.timeout",
        "state.backend.type",
    )
    signatures = (
        r"Could not materialize checkpoint \d+",
        r"asynchronous part of checkpoint \d+ could not be completed",
        r"Asynchronous task checkpoint failed",
        r"Could not flush (?:to file )?and close the file system output stream",
        r"Ignore decline of checkpoint \d+ as task is not running",
        r"Discarding checkpoint \d+ of job",
    )
    root_causes = (
        RootCause("checkpoint-discarded-while-writing",
                  "The JobManager had already discarded the checkpoint (another task declined it, or it expired) "
                  "and deleted chk-N while this task was still writing into it.",
                  "A decline/expiry/discard of the same checkpoint id precedes the failure, and the storage says the "
                  "file is gone ('Path doesn't exist', FileNotFoundException, 'No lease on').",
                  patches=("code:CheckpointConfig#setFailOnCheckpointingErrors",
                           "ops:the first failure of the checkpoint", "ops:upgrade to Flink 1.9 or later",
                           "flink:execution.checkpointing.tolerable-failed-checkpoints",
                           "code:CheckpointConfig#setTolerableCheckpointFailureNumber"),
                  versions="fails the task up to 1.8 (FLINK-11662); 1.9+ only declines the checkpoint"),
        RootCause("storage-unwritable",
                  "The checkpoint storage refused the write: permissions, a quota or a full disk.",
                  "AccessControlException / 'Permission denied' / 'Mkdirs failed', DSQuotaExceededException, "
                  "'No space left on device' under the materialize failure.",
                  patches=("ops:checkpoint storage quota", "ops:storage write permissions")),
        RootCause("storage-io-error",
                  "Writing to the checkpoint storage failed with an I/O error: timeouts, lost connections, an "
                  "unavailable storage service.",
                  "SocketTimeoutException / 'Connection reset' / other storage-client errors under 'Could not flush "
                  "and close the file system output stream'.",
                  patches=("flink:execution.checkpointing.tolerable-failed-checkpoints",
                           "code:CheckpointConfig#setTolerableCheckpointFailureNumber",
                           "ops:checkpoint storage reachability")),
        RootCause("hdfs-datanodes-bad",
                  "The HDFS write pipeline ran out of datanodes (see the hdfs-datanode-failure runbook).",
                  "'All datanodes ... are bad' / 'could only be written to 0 of the N minReplication nodes' under "
                  "the materialize failure.",
                  patches=("flink:execution.checkpointing.tolerable-failed-checkpoints",
                           "code:CheckpointConfig#setTolerableCheckpointFailureNumber", "ops:HDFS datanodes")),
        RootCause("state-serialization-failure",
                  "Serializing the state snapshot failed: state objects were changed while the asynchronous "
                  "snapshot read them, or their serializer cannot handle them.",
                  "A non-I/O deepest cause under the materialize failure: ConcurrentModificationException, "
                  "KryoException, NullPointerException or ClassCastException from a serializer.",
                  patches=("ops:state objects and serializers",)),
        RootCause("undetermined",
                  "The logs show the materialize failure but not what failed underneath.",
                  "The trace stops at 'Could not materialize checkpoint' (an excerpt, or the TaskManager log is "
                  "missing).",
                  next_evidence="the TaskManager log of the failing task around the checkpoint (the 'Caused by' "
                                "lines under 'Could not materialize checkpoint N'), and whether the same checkpoint "
                                "was declined or expired in the JobManager log "
                                "(`grep -n \"checkpoint N\" jobmanager*.log`)."),
    )

    wordings = (
        Wording("checkpoint-async-materialize-failure", r"Could not materialize checkpoint \d+ for operator .+",
                "1.3 – 2.x", "AsyncCheckpointRunnable (\"Could not materialize checkpoint \" + checkpointId + \" for operator \" + taskName + '.')",
                "java.lang.Exception: Could not materialize checkpoint 12 for operator KeyedProcess (2/4)."),
        Wording("checkpoint-async-materialize-failure", r"Asynchronous task checkpoint failed\.",
                "1.9 – 2.x", "CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION",
                "org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task checkpoint failed."),
    )

    templates = {
        "task failed head": "The asynchronous snapshot{operator} for checkpoint(s) {ids} failed and failed the task, "
                            "so the job restarted from its last completed checkpoint. ",
        "declined head": "{count} checkpoint(s) ({ids}) failed in the asynchronous phase and were declined; the job "
                         "kept running (tolerable-failed-checkpoints={tolerable}, longest run of failed checkpoints "
                         "{streak}). ",
        "of operator": " of {operator}",
        "why": "Why: {cause}{more}",
        "ended first by": " It was ended first by: {first}",
        "deepest cause": " Deepest cause: {deepest}",
        "ended note": "checkpoint {checkpoint} was already ended by this, before the write failed",
        "write failed note": "checkpoint {checkpoint}: the asynchronous write failed{outcome}",
        "and failed the task": " and failed the task",
        "and was declined": ", the checkpoint was declined",
        "same way note": "checkpoint {checkpoint} failed the same way",
        "first failure": "The write failed only because the checkpoint had already been abandoned: fix what ended it "
                         "first ({ended}).",
        "ended unseen": "not in these logs; see checkpoint-expired or checkpoint-declined-task-not-ready",
        "ended expired": "it expired; see checkpoint-expired",
        "ended not ready": "{exception}; see checkpoint-declined-task-not-ready",
        "ended declined": "{exception}; see the runbook of that decline",
        "ended by another task": "a decline by another task; see the runbook of that decline",
        "upgrade": "Since 1.9 (FLINK-11662) the CheckpointCoordinator ignores failures of checkpoints it already "
                   "discarded, so this race no longer restarts the job.",
        "state objects": "The asynchronous snapshot serializes state while the task keeps running: {deepest}. Do not "
                         "mutate objects after putting them into state (update them through state.update with a new "
                         "or copied object) and give state types a Flink serializer (POJO/Avro) instead of Kryo.",
        "HDFS datanodes": "The checkpoint write failed in the HDFS pipeline: follow the hdfs-datanode-failure runbook "
                          "for the datanode and client-side fixes.",
        "decline instead of fail": "Flink <= 1.8 (what the task failure here shows): a failed snapshot then declines "
                                   "the checkpoint instead of failing the task and restarting the job. Deprecated in "
                                   "1.9, removed in 2.0; from 1.9 on this is the default behaviour.",
        "tolerate": "Since 1.9 asynchronous failures count against this threshold; up to {streak} checkpoint(s) "
                    "failed in a row here. Tolerating a few more keeps isolated storage hiccups from failing the job "
                    "over.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = snapshot_failures(incident, "async")
        if not failures:
            return []
        history = checkpoint_history(incident)
        covered = threshold_covered_ids(incident, history)
        failing = [f for f in failures if f.failed_task]
        outcome = {a.checkpoint_id: a.outcome for a in history}
        declined = [f for f in failures if not f.failed_task and f.checkpoint_id not in covered
                    and self._ended_by_it(incident, f, outcome.get(f.checkpoint_id))]
        if not failing and declined and transient_blip(history, {f.checkpoint_id for f in declined}):
            return []
        subject = failing or declined
        if not subject:
            return []
        judged = [(f, *self._cause(incident, f)) for f in subject]
        lead, cause, prior, confidence = next((j for j in judged if j[1] != "undetermined"), judged[0])
        severity = "failure" if failing else "warning"
        legacy = is_legacy(incident, [ev for f in subject for ev in f.events])
        streak = longest_failed_streak(history)
        tolerable = incident.config.get_int(TOLERABLE_KEY)
        directory = checkpoint_dir(lead.text) or incident.config.get("execution.checkpointing.dir")

        evidence: list[Event] = []
        notes: dict[int, str] = {}
        if prior is not None:
            notes[len(evidence)] = self.say("ended note", checkpoint=lead.checkpoint_id)
            evidence.append(prior)
        culprit = max(lead.events, key=lambda e: len(e.chain))
        notes[len(evidence)] = self.say(
            "write failed note", checkpoint=lead.checkpoint_id,
            outcome=self.say("and failed the task") if lead.failed_task else self.say("and was declined"))
        evidence.append(culprit)
        for f in subject:
            if f is not lead:
                evidence.append(max(f.events, key=lambda e: len(e.chain)))
                notes[len(evidence) - 1] = self.say("same way note", checkpoint=f.checkpoint_id)
        details = {
            "failed_checkpoints": [f.checkpoint_id for f in subject],
            "task_failures": len(failing),
            "declined_only": len(declined),
            "reported_by_tolerable_threshold": sorted(covered & {f.checkpoint_id for f in failures}),
            "operators": sorted({f.operator for f in subject if f.operator}),
            "causes": dict(Counter(c for _, c, _, _ in judged)),
            "deepest_cause": lead.cause,
            "checkpoint_dir": directory,
            "tolerable_failed_checkpoints": tolerable if tolerable is not None else "unset (0)",
            "longest_failed_streak": streak,
            "behaviour": ("fails the task (Flink <= 1.8)" if legacy else
                          "declines the checkpoint (Flink 1.9+)" if legacy is False else "version unknown"),
        }
        ids = ", ".join(str(f.checkpoint_id) for f in subject[:6]) + (" …" if len(subject) > 6 else "")
        operator = self.say("of operator", operator=lead.operator) if lead.operator else ""
        if severity == "failure":
            summary = self.say("task failed head", operator=operator, ids=ids)
        else:
            summary = self.say("declined head", count=len(subject), ids=ids,
                               tolerable=tolerable if tolerable is not None else 0, streak=streak)
        if cause == "checkpoint-discarded-while-writing" and prior is not None:
            first = ((prior.root_cause.simple_name + ": " + prior.root_cause.message) if prior.root_cause
                     else prior.message)
            more = self.say("ended first by", first=first)
        elif lead.cause:
            more = self.say("deepest cause", deepest=lead.cause)
        else:
            more = ""
        summary += self.say("why", cause=self.cause(cause).summary, more=more)
        return [self.finding(
            cause, summary, evidence,
            confidence=confidence, severity=severity, notes=notes, details=details,
            patches=self._patches(incident, cause, lead, prior, legacy, streak, directory, severity),
        )]

    @staticmethod
    def _ended_by_it(incident: Incident, failure: SnapshotFailure, outcome: str | None) -> bool:
        """Whether this declined snapshot is what failed its checkpoint (since 1.9 a failure on a checkpoint that
        already expired or was declined by another task is ignored by the JobManager)."""
        if outcome == "expired" or prior_discard(incident, failure) is not None:
            return False
        return any(ev.chain for ev in failure.events) or outcome in ("declined", "failed")

    def _cause(self, incident: Incident, failure: SnapshotFailure) -> tuple[str, Event | None, float]:
        text = failure.text
        if HDFS_FAILURE.search(text):
            return "hdfs-datanodes-bad", None, 0.85
        error = storage_error(text)
        prior = prior_discard(incident, failure)
        if prior is not None and (error is None or error[0] == "path-gone"):
            return "checkpoint-discarded-while-writing", prior, 0.9
        if error and error[0] == "path-gone":
            return "checkpoint-discarded-while-writing", None, 0.6
        if error and error[0] in ("space", "permission"):
            return "storage-unwritable", None, 0.9
        if error or FLUSH_CLOSE.search(text) or OPEN_STREAM.search(text) or STORAGE_CLIENT.search(text):
            return "storage-io-error", None, 0.8
        if SERIALIZATION.search(failure.cause or ""):
            return "state-serialization-failure", None, 0.8
        return "undetermined", None, 0.5

    def _patches(self, incident: Incident, cause: str, lead: SnapshotFailure, prior: Event | None,
                 legacy: bool | None, streak: int, directory: str | None, severity: str):
        patches = []
        if cause == "checkpoint-discarded-while-writing":
            if prior is None:
                ended = self.say("ended unseen")
            elif "expired" in prior.message:
                ended = self.say("ended expired")
            elif prior.root_cause is None:
                ended = self.say("ended by another task")
            elif "NotReady" in prior.root_cause.simple_name:
                ended = self.say("ended not ready", exception=prior.root_cause.simple_name)
            else:
                ended = self.say("ended declined", exception=prior.root_cause.simple_name)
            patches.append(self.ops_patch("the first failure of the checkpoint",
                                          self.say("first failure", ended=ended)))
            if legacy is not False:
                patches.append(self.ops_patch("upgrade to Flink 1.9 or later", self.say("upgrade"), urgent=False))
        elif cause in ("storage-unwritable", "storage-io-error"):
            kind = (storage_error(lead.text) or ("io", ""))[0]
            patches += storage_actions(self, kind, lead.text, directory)
        elif cause == "state-serialization-failure":
            patches.append(self.ops_patch("state objects and serializers",
                                          self.say("state objects", deepest=lead.cause)))
        elif cause == "hdfs-datanodes-bad":
            patches.append(self.ops_patch("HDFS datanodes", self.say("HDFS datanodes")))
        # Declining instead of failing suits transient causes; with a storage that refuses every write it would only
        # hide that no checkpoint completes any more.
        if legacy is not False and lead.failed_task and cause != "storage-unwritable":
            patches.append(decline_instead_of_fail_patch(self, self.say("decline instead of fail")))
        # Tolerance only for failures that come and go: never for a store that refuses writes, a serializer that
        # fails on the same state every time, or a reason the logs do not show.
        if legacy is not True and cause in ("storage-io-error", "hdfs-datanodes-bad", "checkpoint-discarded-while-writing"):
            patches += tolerance_patches(self, incident, streak, self.say("tolerate", streak=streak))
        return patches
