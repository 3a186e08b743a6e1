"""Detector checkpoint-tolerable-failure-threshold: each root cause told apart, patches from current values."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest

SLUG = "checkpoint-tolerable-failure-threshold"
JOB = "0123456789abcdef0123456789abcdef"


def _log(failure_lines: str, exceeded_reason: str | None = "Asynchronous task checkpoint failed.") -> str:
    suffix = (f" The latest checkpoint failed due to {exceeded_reason}, view the Checkpoint History tab or the Job "
              f"Manager log to find out why continuous checkpoints failed.") if exceeded_reason else ""
    return f"""\
2024-03-01 10:00:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Triggering checkpoint 1 (type=CheckpointType{{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}}) @ 1 for job {JOB}.
2024-03-01 10:00:01,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Completed checkpoint 1 for job {JOB} (1000 bytes, checkpointDuration=900 ms, finalizationTime=3 ms).
2024-03-01 10:01:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Triggering checkpoint 2 (type=CheckpointType{{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}}) @ 2 for job {JOB}.
{failure_lines}
2024-03-01 10:11:00,100 INFO  org.apache.flink.runtime.jobmaster.JobMaster                 [] - Trying to recover from a global failure.
org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.{suffix}
\tat org.apache.flink.runtime.checkpoint.CheckpointFailureManager.checkFailureAgainstCounter(CheckpointFailureManager.java:212) ~[flink-dist-1.18.1.jar:1.18.1]
"""


EXPIRED = f"""2024-03-01 10:11:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Checkpoint 2 of job {JOB} expired before completing.
2024-03-01 10:11:00,010 WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger or complete checkpoint 2 for job {JOB}. (0 consecutive failed attempts so far)
org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing."""
FINALIZE = f"""2024-03-01 10:11:00,010 WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger or complete checkpoint 2 for job {JOB}. (0 consecutive failed attempts so far)
org.apache.flink.runtime.checkpoint.CheckpointException: Failure to finalize checkpoint.
Caused by: java.io.IOException: Target file file:/opt/flink/pm/checkpoint/{JOB}/chk-2/_metadata already exists."""
HDFS_IO = f"""2024-03-01 10:11:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Decline checkpoint 2 by task abc of job {JOB} at tm-1.
org.apache.flink.util.SerializedThrowable: org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task checkpoint failed.
Caused by: org.apache.flink.util.SerializedThrowable: java.io.IOException: Could not flush and close the file system output stream to hdfs://nn/flink/ckpt/chk-2/x in order to obtain the stream state handle
Caused by: org.apache.flink.util.SerializedThrowable: java.net.SocketTimeoutException: 60000 millis timeout while waiting for channel to be ready for read"""
DECLINED = f"""2024-03-01 10:11:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Decline checkpoint 2 by task abc of job {JOB} at tm-1.
org.apache.flink.util.SerializedThrowable: org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint was declined.
Caused by: org.apache.flink.util.SerializedThrowable: java.lang.IllegalStateException: lookup cache not ready"""
PERMISSION = f"""2024-03-01 10:11:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Decline checkpoint 2 by task abc of job {JOB} at tm-1.
org.apache.flink.util.SerializedThrowable: org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task checkpoint failed.
Caused by: org.apache.flink.util.SerializedThrowable: java.nio.file.AccessDeniedException: /mnt/ckpt/{JOB}/chk-2"""

# Flink 2.3.0 on a local file system whose job checkpoint folder was replaced by a file (the live tier's incident).
FOLDER_IS_A_FILE = f"""2024-03-01 10:11:00,010 WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger or complete checkpoint 2 for job {JOB}. (0 consecutive failed attempts so far)
org.apache.flink.runtime.checkpoint.CheckpointException: An Exception occurred while triggering the checkpoint. IO-problem detected.
Caused by: java.nio.file.FileAlreadyExistsException: /mnt/ckpt/{JOB}"""


@pytest.mark.parametrize("failure,reason,cause", [
    (EXPIRED, "Checkpoint expired before completing.", "checkpoint-expired"),
    (FINALIZE, "Failure to finalize checkpoint.", "finalize-failure"),
    (HDFS_IO, None, "storage-io-error"),
    (DECLINED, "Checkpoint was declined.", "declined"),
    (PERMISSION, "Asynchronous task checkpoint failed.", "storage-unwritable"),
    (FOLDER_IS_A_FILE, "An Exception occurred while triggering the checkpoint. IO-problem detected.",
     "storage-unwritable"),
])
def test_each_reason_is_told_apart_by_its_evidence(failure, reason, cause):
    inc = incident_from_text(_log(failure, reason), {"execution.checkpointing.interval": "1 min"})
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == cause
    assert finding.details["failed_streak"] == [2]
    notes = [e.note for e in finding.evidence]
    assert any("checkpoint 2 failed" in n for n in notes)
    assert any("last completed checkpoint before the failure: 1" in n for n in notes)


def test_expired_checkpoints_get_a_longer_timeout_from_the_current_one():
    inc = incident_from_text(_log(EXPIRED), {"execution.checkpointing.timeout": "5 min",
                                             "execution.checkpointing.interval": "1 min"})
    [finding] = get_detector(SLUG).detect(inc)
    patches = {p.key: p for p in finding.patches if p.target == "flink"}
    assert patches["execution.checkpointing.timeout"].current == "5 min"
    assert patches["execution.checkpointing.timeout"].proposed == "10 min"
    # spaced out the way a production deployment hitting this threshold did: 4 min apart, 1 min pause
    assert patches["execution.checkpointing.interval"].proposed == "4 min"
    assert patches["execution.checkpointing.min-pause"].proposed == "1 min"
    assert patches["execution.checkpointing.tolerable-failed-checkpoints"].proposed == "3"


def test_tolerance_already_at_the_default_is_not_ratcheted_up():
    inc = incident_from_text(_log(DECLINED), {"execution.checkpointing.tolerable-failed-checkpoints": "5"})
    [finding] = get_detector(SLUG).detect(inc)
    assert not [p for p in finding.patches if "olerable" in p.key]


@pytest.mark.parametrize("failure,reason", [(PERMISSION, "Asynchronous task checkpoint failed."),
                                            (FINALIZE, "Failure to finalize checkpoint.")])
def test_no_tolerance_for_a_store_that_refuses_writes_or_a_finalize_collision(failure, reason):
    [finding] = get_detector(SLUG).detect(incident_from_text(_log(failure, reason)))
    assert not [p for p in finding.patches if "olerable" in p.key]
    assert [p for p in finding.patches if p.target == "ops"]


def test_transient_storage_errors_get_tolerance_as_a_mitigation():
    [finding] = get_detector(SLUG).detect(incident_from_text(_log(HDFS_IO, None)))
    tol = next(p for p in finding.patches if p.key == "execution.checkpointing.tolerable-failed-checkpoints")
    assert tol.proposed == "3" and "A mitigation, not a fix" in tol.reason


def test_permission_fix_gives_the_flink_user_access_not_the_owner():
    inc = incident_from_text(_log(PERMISSION), {"state.checkpoints.dir": "file:///mnt/ckpt"}, version="1.16.2")
    [finding] = get_detector(SLUG).detect(inc)
    ops = next(p for p in finding.patches if p.key == "checkpoint storage permissions")
    assert "chmod" not in ops.snippet
    assert "chown -R <flink-user>:<flink-group> /mnt/ckpt" in ops.snippet and "setfacl" in ops.snippet
    hdfs = incident_from_text(_log(PERMISSION), {"state.checkpoints.dir": "hdfs://nn/flink/ckpt"}, version="1.16.2")
    assert "hdfs dfs -chown -R <flink-user> hdfs://nn/flink/ckpt" in get_detector(SLUG).detect(hdfs)[0].patches[0].snippet


def test_threshold_without_its_failures_is_reported_with_lower_confidence():
    inc = incident_from_text("org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.\n"
                             "    at org.apache.flink.runtime.checkpoint.CheckpointFailureManager.checkFailureAgainstCounter")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "undetermined" and finding.confidence < 0.5
    assert "Collect next: the JobManager log around the first occurrence" in finding.summary
    assert finding.patches == []  # nothing to tolerate or tune without knowing why checkpoints failed


def test_failed_checkpoints_without_the_threshold_are_not_this_runbook():
    text = _log(DECLINED).split("2024-03-01 10:11:00,100")[0]
    assert get_detector(SLUG).detect(incident_from_text(text)) == []


def test_genuine_incident_storage_permission(spark):
    inc = ingest([str(example(SLUG, "storage-permission-denied"))], spark)
    diagnosis = run_detectors(inc)
    primary = diagnosis.primary
    assert primary.runbook == SLUG and primary.root_cause.slug == "storage-unwritable"
    assert "Mkdirs failed" in primary.summary
    assert any(p.target == "ops" for p in primary.patches)


def test_genuine_healthy_incident(spark):
    inc = ingest([str(example(SLUG, "healthy"))], spark)
    assert get_detector(SLUG).detect(inc) == []


def test_threshold_tripped_while_finalizing_is_read_from_its_own_frames():
    inc = incident_from_text(
        "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.\n"
        "    at org.apache.flink.runtime.checkpoint.CheckpointFailureManager.checkFailureAgainstCounter(CheckpointFailureManager.java:206)\n"
        "    at org.apache.flink.runtime.checkpoint.CheckpointCoordinator.abortPendingCheckpoint(CheckpointCoordinator.java:2104)\n"
        "    at org.apache.flink.runtime.checkpoint.CheckpointCoordinator.finalizeCheckpoint(CheckpointCoordinator.java:1375)\n")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "finalize-failure" and finding.confidence < 0.8


def test_another_jobs_checkpoints_on_a_session_cluster_do_not_cut_the_streak_or_stand_in_as_last_completed():
    other = "fedcba9876543210fedcba9876543210"
    interleaved = f"""\
2024-03-01 10:05:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Triggering checkpoint 900 (type=CheckpointType{{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}}) @ 3 for job {other}.
2024-03-01 10:05:01,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Completed checkpoint 900 for job {other} (1000 bytes, checkpointDuration=900 ms, finalizationTime=3 ms).
{EXPIRED}"""
    finding = get_detector(SLUG).detect(incident_from_text(_log(interleaved), version="1.18.1"))[0]
    notes = " | ".join(e.note or "" for e in finding.evidence)
    assert "checkpoint 2 failed" in notes
    assert "last completed checkpoint before the failure: 1" in notes and "900" not in notes


def test_hdfs_with_every_datanode_full_is_a_store_that_refuses_writes():
    full = (f"2024-03-01 10:11:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - "
            f"Decline checkpoint 2 by task abc of job {JOB} at tm-1.\n"
            "org.apache.flink.util.SerializedThrowable: org.apache.flink.runtime.checkpoint.CheckpointException: "
            "Asynchronous task checkpoint failed.\n"
            "Caused by: org.apache.flink.util.SerializedThrowable: org.apache.hadoop.ipc.RemoteException(java.io.IOException): "
            "File /flink/ckpt/chk-2/x could only be written to 0 of the 1 minReplication nodes. There are 4 "
            "datanode(s) running and no node(s) are excluded in this operation.")
    [finding] = get_detector(SLUG).detect(incident_from_text(_log(full), version="1.18.1"))
    assert finding.root_cause.slug == "storage-unwritable"
    assert not [p for p in finding.patches if "olerable" in p.key]


def test_unknown_checkpoint_ids_or_failure_are_said_to_be_unknown_never_a_placeholder():
    frames_only = incident_from_text(
        "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.\n"
        "    at org.apache.flink.runtime.checkpoint.CheckpointFailureManager.checkFailureAgainstCounter(CheckpointFailureManager.java:206)\n"
        "    at org.apache.flink.runtime.checkpoint.CheckpointCoordinator.finalizeCheckpoint(CheckpointCoordinator.java:1375)\n")
    [neither] = get_detector(SLUG).detect(frames_only)
    assert neither.root_cause.slug == "finalize-failure"
    assert "?" not in neither.summary and "failed with" not in neither.summary
    assert neither.summary.endswith("These logs show neither which checkpoints failed nor with what.")

    reason_only = incident_from_text(
        "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold. The latest "
        "checkpoint failed due to Checkpoint expired before completing., view the Checkpoint History tab or the Job "
        "Manager log to find out why continuous checkpoints failed.\n")
    [failure] = get_detector(SLUG).detect(reason_only)
    assert failure.root_cause.slug == "checkpoint-expired" and "?" not in failure.summary
    assert ("These logs do not show which checkpoints failed; the threshold names the latest failure: Checkpoint "
            "expired before completing.") in failure.summary

    [known] = get_detector(SLUG).detect(incident_from_text(_log(EXPIRED, "Checkpoint expired before completing.")))
    assert "Checkpoint(s) 2 failed with: Checkpoint expired before completing." in known.summary


def test_the_pasted_finalize_ticket_says_what_it_does_not_show():
    primary = run_detectors(ingest([str(example(SLUG, "ticket-excerpt-finalize-1.16"))])).primary
    assert primary.runbook == SLUG and primary.root_cause.slug == "finalize-failure"
    assert "Checkpoint(s) ?" not in primary.summary
    assert "These logs show neither which checkpoints failed nor with what." in primary.summary
