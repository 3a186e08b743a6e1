"""``FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold``: which failures exhausted it, and why."""
from __future__ import annotations

import re

from flink_runbooks.evidence.episodes import find_with_history
from flink_runbooks.evidence.checkpoints import CheckpointAttempt, checkpoint_history, failed_streak_before, last_completed_before
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.units import format_duration
from flink_runbooks.detectors.base import Detector
from flink_runbooks.vocabulary.lifecycle import TOLERABLE_FAILURES_EXCEEDED
from flink_runbooks.vocabulary.wordings import Wording

# Rides out isolated failures, still fails on a real outage (a production Flink 1.16 deployment settled on 3).
DEFAULT_TOLERABLE = 3
TOLERABLE_KEY = "execution.checkpointing.tolerable-failed-checkpoints"
# Failures that come and go: tolerating a few of them is a mitigation. A store that refuses writes, a finalize
# collision or an unknown reason is not transient, and tolerance would only hide it until the next failover.
TRANSIENT = ("checkpoint-expired", "storage-io-error", "async-phase-failure", "declined")
# Spacing checkpoints out so they stop piling up: the interval and minimum pause a production deployment that hit
# this threshold on Flink 1.16 settled on.
SPACED_INTERVAL_MS = 240_000
SPACED_MIN_PAUSE_MS = 60_000
_TOLERANCE = "flink:" + TOLERABLE_KEY
_TOLERANCE_CODE = "code:CheckpointConfig#setTolerableCheckpointFailureNumber"

# (cause, pattern over the failing checkpoint's evidence), most specific first.
_REASONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("storage-unwritable", re.compile(
        r"Mkdirs failed|Permission denied|AccessDenied|Access Denied|Read-only file system|No space left|"
        r"Quota|quota exceeded|not writable|Operation not permitted|"
        # a file where the checkpoint folder should be (Files.createDirectories names only the path; a _metadata
        # collision says "File already exists" and is finalize's): every later checkpoint fails the same way
        r"NotDirectoryException|Not a directory|FileAlreadyExistsException: (?!File already exists)(?!\S*/_metadata)|"
        # HDFS with no datanode up, or every running one refused (full): a broken store, not a flaky one
        r"There are 0 datanode\(s\) running|datanode\(s\) running and no node\(s\) are excluded", re.I)),
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
    collect_next = "which checkpoint failures counted against the threshold (the JobManager log before it)"
    config_keys = (
        "execution.checkpointing.tolerable-failed-checkpoints",
        "execution.checkpointing.interval",
        "execution.checkpointing.min-pause",
        "execution.checkpointing.timeout",
        "execution.checkpointing.dir",
    )
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
                  "Failed checkpoints end in IOException 'Mkdirs failed' / 'Permission denied' / quota errors.",
                  patches=("ops:checkpoint storage permissions",),
                  would_change="If the same path is writable for the user Flink runs as (check with that user, not "
                               "root) and has free space, the refusal came from elsewhere: read the full cause chain "
                               "of the first failed checkpoint."),
        RootCause("storage-io-error", "Writing to the checkpoint storage failed (file system or network errors).",
                  "Failed checkpoints end in I/O errors of the storage (HDFS datanodes, connection, stream close).",
                  patches=("ops:checkpoint storage health", _TOLERANCE, _TOLERANCE_CODE),
                  would_change="If the storage errors go on for every checkpoint (not a few in a row), the store is "
                               "broken, not flaky: tolerance does not help, fix the storage."),
        RootCause("checkpoint-expired", "Checkpoints took longer than execution.checkpointing.timeout.",
                  "'Checkpoint N of job X expired before completing' for the failing checkpoints.",
                  patches=("flink:execution.checkpointing.timeout", "flink:execution.checkpointing.interval",
                           "flink:execution.checkpointing.min-pause", _TOLERANCE, _TOLERANCE_CODE),
                  would_change="If the expired checkpoints were waiting on one task that never acknowledged (a stuck "
                               "or failed task in the TaskManager log), a longer timeout only waits longer: fix that "
                               "task."),
        RootCause("finalize-failure", "The JobManager could not finalize the checkpoint (e.g. _metadata already exists).",
                  "'Failure to finalize checkpoint' on the JobManager, or the threshold's own stack tripping in "
                  "CheckpointCoordinator.finalizeCheckpoint.",
                  patches=("ops:checkpoint storage health",),
                  would_change="If the cause chain says '_metadata already exists', two runs share a checkpoint "
                               "directory (see checkpoint-metadata-already-exists); if it is a storage I/O error, "
                               "this is a storage problem."),
        RootCause("async-phase-failure", "The asynchronous part of a task's snapshot failed.",
                  "'Asynchronous task checkpoint failed' / 'Could not materialize checkpoint' without a storage error.",
                  patches=(_TOLERANCE, _TOLERANCE_CODE),
                  would_change="If the TaskManager log shows a storage error under the asynchronous failure, this "
                               "is a storage problem, and tolerance only hides it."),
        RootCause("declined", "Tasks declined the checkpoints.",
                  "'Decline checkpoint N by task' with a cause that is not a storage error.",
                  patches=(_TOLERANCE, _TOLERANCE_CODE),
                  would_change="If every checkpoint is declined for the same reason (not a few after a restart), "
                               "the decline is the fault to fix; tolerance only postpones the failover."),
        RootCause("undetermined", "The logs show the threshold but not the failures that led to it.",
                  "Only the FlinkRuntimeException is present (an excerpt, or the JobManager log is missing).",
                  would_change="The JobManager log lines 'Failed to trigger or complete checkpoint N' before the "
                               "threshold name the reason.",
                  next_evidence="the JobManager log around the first occurrence ('Failed to trigger or complete "
                                "checkpoint', 'Decline checkpoint', 'expired before completing'), or the job's "
                                "Checkpoint History tab / `curl <jobmanager>:8081/jobs/<job-id>/checkpoints`."),
    )

    wordings = (
        Wording("checkpoint-tolerable-failure-threshold", r"Exceeded checkpoint tolerable failure threshold",
                "1.9 – 2.x", "CheckpointFailureManager.EXCEEDED_CHECKPOINT_TOLERABLE_FAILURE_MESSAGE",
                "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold."),
    )

    templates = {
        "head": "The checkpoint failure threshold was exceeded {count} time(s) ({tolerance}), so the job failed "
                "over. ",
        "tolerance": "tolerable-failed-checkpoints={tolerable}",
        "tolerance unset": "tolerable-failed-checkpoints unset (0)",
        "undetermined": "Root cause undetermined: the failing checkpoints are not in the given logs.",
        "why": "Why: {what} {failed}",
        # what the logs tell of the failed checkpoints; a part they do not show is said to be unknown
        "ids and failure": "Checkpoint(s) {ids} failed with: {failure}",
        "ids only": "Checkpoint(s) {ids} failed; these logs do not show with what.",
        "failure only": "These logs do not show which checkpoints failed; the threshold names the latest "
                        "failure: {failure}",
        "neither": "These logs show neither which checkpoints failed nor with what.",
        "exceeded note": "the threshold was exceeded: the job fails over",
        "failed note": "checkpoint {checkpoint} failed: {failure}",
        "last completed note": "last completed checkpoint before the failure: {checkpoint}",
        "storage permissions": "Make {ckpt_dir} writable for the user Flink runs as (and check free space/quota): no "
                               "configuration change makes checkpoints succeed while the storage refuses writes, and "
                               "tolerating failures would only postpone the failover.",
        "storage health": "Fix the checkpoint storage errors shown in the evidence{tolerating}",
        "bridges outages": "; tolerating a few failures only bridges short storage outages.",
        "finalize repeats": "; a finalize failure repeats on every checkpoint until its cause is gone, so tolerating "
                            "it would only hide it.",
        "longer timeout": "Checkpoints expired: give them more time while the backpressure behind the slow alignment "
                          "is fixed.",
        "spaced interval": "Checkpoint less often so one finishes before the next is due (a production deployment "
                           "hitting this threshold settled on 4 min with a 1 min pause). Costs: more to replay after "
                           "a failover, and exactly-once sinks commit less often.",
        "min pause": "Leave the job time to make progress between checkpoints so they do not pile up.",
        "tolerate": "These failures come and go: let isolated ones pass instead of failing the job over on the first "
                    "(consecutive failures still fail it). A mitigation, not a fix. Job code that calls "
                    "setTolerableCheckpointFailureNumber overrides this key.",
        "tolerate in code": "The same setting in job code (it wins over the configuration file when the job sets it).",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        exceeded = [ev for ev, _ in find_with_history(incident, TOLERABLE_FAILURES_EXCEEDED)]
        if not exceeded:
            return []
        history = checkpoint_history(incident)
        first = exceeded[0]
        streak = failed_streak_before(history, first)
        reason_text = _stated_reason(exceeded)
        cause = _cause(streak, reason_text)
        if cause == "undetermined" and any("finalizeCheckpoint" in f for ev in exceeded for f in ev.frames):
            cause = "finalize-failure"
        tolerable = incident.config.get_int(TOLERABLE_KEY)
        evidence: list[Event] = [first]
        notes = {0: self.say("exceeded note")}
        if streak:
            culprit = next((e for e in streak[0].events if e.root_cause), streak[0].events[-1])
            evidence.append(culprit)
            notes[1] = self.say("failed note", checkpoint=streak[0].checkpoint_id,
                                failure=streak[0].failure or streak[0].outcome)
        last_ok = last_completed_before(history, first.ts, streak[0].job if streak else None)
        if last_ok and last_ok.events:
            evidence.append(last_ok.events[-1])
            notes[len(evidence) - 1] = self.say("last completed note", checkpoint=last_ok.checkpoint_id)
        evidence += [ev for ev in exceeded[1:3]]
        summary = self.say("head", count=len(exceeded), tolerance=self.say("tolerance", tolerable=tolerable)
                           if tolerable is not None else self.say("tolerance unset"))
        if cause == "undetermined":
            summary += self.say(cause)
        else:
            ids = ", ".join(str(a.checkpoint_id) for a in streak[:5])
            failure = next((a.failure for a in streak if a.failure), reason_text or "")
            if ids and failure:
                failed = self.say("ids and failure", ids=ids, failure=failure)
            elif ids:
                failed = self.say("ids only", ids=ids)
            elif failure:
                failed = self.say("failure only", failure=failure)
            else:
                failed = self.say("neither")
            summary += self.say("why", what=self.cause(cause).summary, failed=failed)
        return [self.finding(
            cause, summary, evidence,
            confidence=0.4 if cause == "undetermined" else 0.6 if not streak else 0.9,
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

    def _patches(self, incident: Incident, cause: str, streak: list[CheckpointAttempt]):
        cfg = incident.config
        patches = []
        if cause == "storage-unwritable":
            ckpt_dir = cfg.get("execution.checkpointing.dir") or "<checkpoint dir>"
            patches.append(self.ops_patch(
                "checkpoint storage permissions", self.say("storage permissions", ckpt_dir=ckpt_dir),
                snippet=storage_access_snippet(ckpt_dir)))
        if cause in ("storage-io-error", "finalize-failure"):
            patches.append(self.ops_patch(
                "checkpoint storage health",
                self.say("storage health", tolerating=self.say("bridges outages") if cause == "storage-io-error"
                         else self.say("finalize repeats"))))
        if cause == "checkpoint-expired":
            timeout = cfg.get_duration_ms("execution.checkpointing.timeout") or 600_000
            patches.append(self.flink_patch(
                incident, "execution.checkpointing.timeout", format_duration(timeout * 2),
                self.say("longer timeout")))
            interval = cfg.get_duration_ms("execution.checkpointing.interval")
            min_pause = cfg.get_duration_ms("execution.checkpointing.min-pause") or 0
            spaced = max(interval or 0, SPACED_INTERVAL_MS)
            if interval is not None and interval < SPACED_INTERVAL_MS:
                patches.append(self.flink_patch(
                    incident, "execution.checkpointing.interval", format_duration(SPACED_INTERVAL_MS),
                    self.say("spaced interval")))
            wanted = max(SPACED_MIN_PAUSE_MS, spaced // 4)
            if wanted > min_pause:
                patches.append(self.flink_patch(
                    incident, "execution.checkpointing.min-pause", format_duration(wanted),
                    self.say("min pause")))
        if cause in TRANSIENT:
            tolerable = cfg.get_int(TOLERABLE_KEY) or 0
            # Already tolerant: the failures are not isolated, and raising it again on every incident hides them.
            if tolerable < DEFAULT_TOLERABLE:
                patches.append(self.flink_patch(
                    incident, TOLERABLE_KEY, str(DEFAULT_TOLERABLE),
                    self.say("tolerate")))
                patches.append(self.code_patch(
                    "CheckpointConfig#setTolerableCheckpointFailureNumber",
                    f"env.getCheckpointConfig().setTolerableCheckpointFailureNumber({DEFAULT_TOLERABLE});",
                    self.say("tolerate in code")))
        return patches


def storage_access_snippet(ckpt_dir: str) -> str:
    """Commands that give the Flink user (not the storage's owner) write access to the checkpoint directory."""
    if ckpt_dir.startswith(("hdfs://", "viewfs://")):
        return ("# the user the job runs as (the YARN application user or HADOOP_USER_NAME) needs write access\n"
                f"hdfs dfs -ls -d {ckpt_dir}\n"
                f"hdfs dfs -chown -R <flink-user> {ckpt_dir}\n"
                f"# or keep the owner and grant an ACL: hdfs dfs -setfacl -R -m user:<flink-user>:rwx {ckpt_dir}")
    if ckpt_dir.startswith(("s3://", "s3a://", "s3p://", "gs://", "abfs://", "abfss://", "wasb://", "oss://")):
        return ("# object stores have no directory owner: the identity the pods use (IAM role / service account /\n"
                "# access key) needs put, get, list and delete on the checkpoint prefix\n"
                f"# prefix: {ckpt_dir}")
    path = ckpt_dir.replace("file://", "").replace("file:", "")
    return ("# find the user Flink runs as (the official image uses 'flink', uid 9999)\n"
            "ps -o user=,uid= -p \"$(pgrep -f 'org.apache.flink.runtime' | head -1)\"\n"
            "# give that user the directory, on every host or volume that mounts it (NFS: on the server)\n"
            f"chown -R <flink-user>:<flink-group> {path}\n"
            f"# or keep the owner and add an ACL: setfacl -R -m u:<flink-user>:rwX -m d:u:<flink-user>:rwX {path}\n"
            "# Kubernetes: securityContext.fsGroup of the pod makes a volume group-writable for it")


def _stated_reason(exceeded: list[Event]) -> str | None:
    for ev in exceeded:
        m = TOLERABLE_FAILURES_EXCEEDED.search(ev.text)
        if m and m.group("reason"):
            return m.group("reason").strip()
    return None


def _cause(streak: list[CheckpointAttempt], stated: str | None) -> str:
    texts = []
    for att in streak:
        texts += [att.failure or ""] + [ev.text for ev in att.events]
    texts.append(stated or "")
    blob = "\n".join(texts)
    for cause, rx in _REASONS:
        if rx.search(blob):
            return cause
    return "undetermined"
