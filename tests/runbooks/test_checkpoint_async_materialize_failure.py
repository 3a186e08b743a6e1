"""Detector checkpoint-async-materialize-failure: causes told apart, when it fires (task failed / job kept running)
and when it stays silent (reported by the tolerable threshold, a blip, an already ended checkpoint, a cancel)."""
from __future__ import annotations

from corpus import INCIDENT_REPORTS, example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.render.patches import render_config_diff

SLUG = "checkpoint-async-materialize-failure"
JOB = "0123456789abcdef0123456789abcdef"
# A Flink 1.8 issue report, verbatim
DECLINE_DISCARDS_DIRECTORY = INCIDENT_REPORTS / "checkpoint-decline-discards-directory.txt"
CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator   "


def detect(text, config=None, version=None):
    return get_detector(SLUG).detect(incident_from_text(text, config, version))


def trigger(n, minute):
    return f"2024-03-01 10:{minute:02d}:00,000 INFO  {CC} [] - Triggering checkpoint {n} (type=CHECKPOINT) @ {n} for job {JOB}."


def completed(n, minute):
    return (f"2024-03-01 10:{minute:02d}:01,000 INFO  {CC} [] - Completed checkpoint {n} for job {JOB} (1000 bytes, "
            f"checkpointDuration=900 ms, finalizationTime=3 ms).")


def declined(n, minute, cause):
    """A 1.9+ asynchronous failure as the JobManager logs it: the task declined the checkpoint."""
    return f"""2024-03-01 10:{minute:02d}:30,000 INFO  {CC} [] - Decline checkpoint {n} by task abc of job {JOB} at tm-1.
org.apache.flink.util.SerializedThrowable: org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task checkpoint failed.
Caused by: org.apache.flink.util.SerializedThrowable: java.lang.Exception: Could not materialize checkpoint {n} for operator Map (1/2)#0.
Caused by: org.apache.flink.util.SerializedThrowable: java.io.IOException: Could not flush to file and close the file system output stream to s3://bucket/ckpt/{JOB}/chk-{n}/f in order to obtain the stream state handle
Caused by: org.apache.flink.util.SerializedThrowable: {cause}"""


def history(outcomes, cause="java.net.SocketTimeoutException: Read timed out"):
    """One checkpoint per minute: 'ok' completes, 'async' is declined by an asynchronous failure."""
    lines = []
    for i, outcome in enumerate(outcomes, start=1):
        lines.append(trigger(i, i))
        lines.append(completed(i, i) if outcome == "ok" else declined(i, i, cause))
    return "\n".join(lines)


LEGACY_QUOTA = f"""2020-02-03 21:29:40,407 INFO  org.apache.flink.runtime.taskmanager.Task                     - Window (2/2) (8d4f) switched from RUNNING to FAILED.
org.apache.flink.streaming.runtime.tasks.AsynchronousException: java.lang.Exception: Could not materialize checkpoint 43 for operator Window (2/2).
Caused by: java.lang.Exception: Could not materialize checkpoint 43 for operator Window (2/2).
Caused by: java.util.concurrent.ExecutionException: java.io.IOException: Could not flush and close the file system output stream to hdfs://hdp/user/flink/checkpoints/{JOB}/chk-43/0f3d in order to obtain the stream state handle
Caused by: java.io.IOException: Could not flush and close the file system output stream to hdfs://hdp/user/flink/checkpoints/{JOB}/chk-43/0f3d in order to obtain the stream state handle
Caused by: org.apache.hadoop.hdfs.protocol.DSQuotaExceededException: The DiskSpace quota of /user/flink is exceeded: quota = 5497558138880 B = 5 TB but diskspace consumed = 5497602124672 B = 5.00 TB
"""


def test_reported_discarded_checkpoint_fails_the_task_on_1_8():
    [finding] = detect(DECLINE_DISCARDS_DIRECTORY.read_text())
    assert finding.root_cause.slug == "checkpoint-discarded-while-writing"
    assert finding.severity == "failure" and finding.confidence >= 0.9
    assert finding.details["failed_checkpoints"] == [1389046] and finding.details["task_failures"] == 1
    # the decline by another task comes first: it is why chk-1389046 no longer existed
    assert "Discarding checkpoint 1389046" in finding.evidence[0].text
    assert "CheckpointDeclineTaskNotReadyException" in finding.evidence[0].text
    first = next(p for p in finding.patches if p.key == "the first failure of the checkpoint")
    assert "checkpoint-declined-task-not-ready" in first.reason
    assert "Path doesn't exist" in finding.details["deepest_cause"]
    code = next(p for p in finding.patches if p.target == "code")
    assert "setFailOnCheckpointingErrors(false)" in code.snippet
    assert "setFailTaskOnCheckpointError(false)" in code.snippet
    assert any(p.key == "upgrade to Flink 1.9 or later" for p in finding.patches)


def test_the_same_failure_on_a_release_that_only_declines_proposes_tolerance():
    """From 1.9 the failure only declines the checkpoint: riding out the run of declines is the change to propose."""
    [finding] = detect(DECLINE_DISCARDS_DIRECTORY.read_text(), version="1.17.2")
    assert finding.root_cause.slug == "checkpoint-discarded-while-writing"
    assert any(p.key == "execution.checkpointing.tolerable-failed-checkpoints" for p in finding.patches)
    assert not any(p.key == "upgrade to Flink 1.9 or later" for p in finding.patches)


def test_expiry_before_the_write_is_the_other_way_a_checkpoint_gets_discarded():
    text = "\n".join([
        trigger(118, 1),
        f"2024-03-01 10:04:00,000 INFO  {CC} - Checkpoint 118 of job {JOB} expired before completing.",
        f"""2024-03-01 10:04:12,000 INFO  org.apache.flink.runtime.taskmanager.Task                     - Sink (4/8) (5e2b) switched from RUNNING to FAILED.
org.apache.flink.streaming.runtime.tasks.AsynchronousException: java.lang.Exception: Could not materialize checkpoint 118 for operator Sink (4/8).
Caused by: java.io.IOException: Could not flush and close the file system output stream to hdfs://ns/flink/{JOB}/chk-118/6f0e in order to obtain the stream state handle
Caused by: org.apache.hadoop.ipc.RemoteException(org.apache.hadoop.hdfs.server.namenode.LeaseExpiredException): No lease on /flink/{JOB}/chk-118/6f0e""",
    ])
    [finding] = detect(text, version="1.8.3")
    assert finding.root_cause.slug == "checkpoint-discarded-while-writing"
    assert "expired before completing" in finding.evidence[0].text
    first = next(p for p in finding.patches if p.key == "the first failure of the checkpoint")
    assert "checkpoint-expired" in first.reason


def test_quota_on_1_8_fails_the_task_and_is_fixed_on_the_storage_not_by_declining():
    [finding] = detect(LEGACY_QUOTA, version="1.6.4")
    assert finding.root_cause.slug == "storage-unwritable" and finding.severity == "failure"
    quota = next(p for p in finding.patches if p.key == "checkpoint storage quota")
    assert "hdfs dfs -count -q -h /user/flink" in quota.snippet
    assert "5 TB" in quota.reason
    # declining instead of failing would only hide that no checkpoint can complete any more
    assert not any(p.target == "code" for p in finding.patches)
    assert finding.details["behaviour"] == "fails the task (Flink <= 1.8)"


def test_hdfs_permission_denied_names_user_and_directory():
    text = LEGACY_QUOTA.replace(
        "org.apache.hadoop.hdfs.protocol.DSQuotaExceededException: The DiskSpace quota of /user/flink is exceeded: "
        "quota = 5497558138880 B = 5 TB but diskspace consumed = 5497602124672 B = 5.00 TB",
        'org.apache.hadoop.security.AccessControlException: Permission denied: user=flink, access=WRITE, '
        'inode="/user/flink/checkpoints":hdfs:supergroup:drwxr-xr-x')
    [finding] = detect(text, version="1.8.3")
    assert finding.root_cause.slug == "storage-unwritable"
    fix = next(p for p in finding.patches if p.key == "storage write permissions")
    assert "hdfs dfs -chown -R flink /user/flink/checkpoints" in fix.snippet


def test_recurring_declines_on_1_9_plus_are_a_warning_with_a_tolerance_from_the_observed_streak():
    text = history(["ok", "async", "ok", "ok", "async", "async", "ok"])
    [finding] = detect(text, {"execution.checkpointing.tolerable-failed-checkpoints": "2"}, version="1.15.4")
    assert finding.severity == "warning"
    assert finding.root_cause.slug == "storage-io-error"
    assert finding.details["failed_checkpoints"] == [2, 5, 6]
    assert finding.details["longest_failed_streak"] == 2
    tol = next(p for p in finding.patches if p.key == "execution.checkpointing.tolerable-failed-checkpoints")
    assert (tol.current, tol.proposed) == ("2", "4")
    assert not any(p.target == "code" and "FailOnCheckpointingErrors" in p.key for p in finding.patches)


def test_tolerance_that_already_rides_out_the_failures_is_left_alone():
    text = history(["ok", "async", "ok", "async", "ok"])
    [finding] = detect(text, {"execution.checkpointing.tolerable-failed-checkpoints": "5"}, version="1.15.4")
    assert not any("tolerable" in p.key.lower() for p in finding.patches)


def test_one_blip_the_job_rode_out_is_not_a_finding():
    text = history(["ok", "async", "async", "ok", "ok"])
    assert detect(text, {"execution.checkpointing.tolerable-failed-checkpoints": "3"}, version="1.19.1") == []


def test_failures_the_tolerable_threshold_reported_are_left_to_that_runbook():
    text = history(["ok", "async"], cause="java.nio.file.AccessDeniedException: /mnt/ckpt") + """
2024-03-01 10:02:31,000 INFO  org.apache.flink.runtime.jobmaster.JobMaster                 [] - Trying to recover from a global failure.
org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to Asynchronous task checkpoint failed., view the Checkpoint History tab or the Job Manager log to find out why continuous checkpoints failed."""
    inc = incident_from_text(text, version="1.18.1")
    assert get_detector(SLUG).detect(inc) == []
    assert [f.runbook for f in run_detectors(inc).findings] == ["checkpoint-tolerable-failure-threshold"]


def test_a_failure_of_a_checkpoint_that_had_already_expired_is_ignored_since_1_9():
    text = "\n".join([
        trigger(5, 1),
        f"2024-03-01 10:03:00,000 INFO  {CC} [] - Checkpoint 5 of job {JOB} expired before completing.",
        declined(5, 3, "java.net.SocketTimeoutException: Read timed out").replace("10:03:30", "10:03:31"),
        trigger(6, 4), declined(6, 4, "java.net.SocketTimeoutException: Read timed out"), trigger(7, 5), completed(7, 5),
        trigger(8, 6), declined(8, 6, "java.net.SocketTimeoutException: Read timed out"), trigger(9, 7), completed(9, 7),
    ])
    [finding] = detect(text, version="1.16.3")
    assert finding.details["failed_checkpoints"] == [6, 8]


def test_cancelled_task_is_not_a_failure():
    text = f"""{trigger(88, 1)}
2024-03-01 10:01:01,600 INFO  org.apache.flink.streaming.runtime.tasks.AsyncCheckpointRunnable [] - Map (2/4)#0 - asynchronous part of checkpoint 88 could not be completed.
java.util.concurrent.ExecutionException: java.io.IOException: Cannot register Closeable, registry is already closed. Closing argument.
Caused by: java.io.IOException: Cannot register Closeable, registry is already closed. Closing argument.
2024-03-01 10:01:01,601 INFO  org.apache.flink.streaming.runtime.tasks.AsyncCheckpointRunnable [] - Ignore decline of checkpoint 88 as task is not running anymore."""
    assert detect(text, version="1.17.2") == []


def test_state_mutated_during_the_async_snapshot_is_a_serialization_failure():
    text = history(["ok", "async", "ok", "async", "ok"],
                   cause="java.util.ConcurrentModificationException").replace(
        "Caused by: org.apache.flink.util.SerializedThrowable: java.io.IOException: Could not flush", "Ignored: flush")
    [finding] = detect(text, version="1.18.1")
    assert finding.root_cause.slug == "state-serialization-failure"
    assert any("state.update" in p.reason for p in finding.patches)


def test_datanode_trouble_is_left_to_the_more_specific_runbook():
    text = history(["ok", "async", "ok", "async"],
                   cause="java.io.IOException: All datanodes [DatanodeInfoWithStorage[10.0.0.1:9866,DS-1,DISK]] are bad. Aborting...")
    inc = incident_from_text(text, version="1.17.2")
    diagnosis = run_detectors(inc)
    mine = next(f for f in diagnosis.findings if f.runbook == SLUG)
    assert mine.root_cause.slug == "hdfs-datanodes-bad" and not mine.primary
    assert diagnosis.primary.runbook == "hdfs-datanode-failure"


def test_tolerance_key_only_from_1_10_and_the_same_spelling_after():
    text = history(["ok", "async", "ok", "async", "ok"])
    old = detect(text, version="1.9.3")[0]
    assert not [p for p in old.patches if p.target == "flink"], "1.9 has no configuration key, only the API"
    assert any("setTolerableCheckpointFailureNumber(3)" in (p.snippet or "") for p in old.patches)
    assert render_config_diff(old.patches, None, "1.9.3") == ""
    new = detect(text, version="1.20.1")[0]
    diff = render_config_diff(new.patches, None, "1.20.1")
    assert "+++ b/config.yaml" in diff and "tolerable-failed-checkpoints: 3" in diff
    assert "+execution.checkpointing.tolerable-failed-checkpoints: 3" in render_config_diff(new.patches, None, "1.12.7")


def test_genuine_permission_incident_stays_with_the_tolerable_threshold(spark):
    inc = ingest([str(example("checkpoint-tolerable-failure-threshold", "storage-permission-denied"))], spark)
    assert get_detector(SLUG).detect(inc) == []
    assert run_detectors(inc).primary.runbook == "checkpoint-tolerable-failure-threshold"


def test_example_incidents(spark):
    inc = ingest([str(example(SLUG, "expired-checkpoint-lease-1.8"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "checkpoint-discarded-while-writing")
    assert "expired before completing" in primary.summary

    inc = ingest([str(example(SLUG, "s3-read-timeouts-job-kept-running-1.15"))], spark)
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.severity == "warning" and finding.details["failed_checkpoints"] == [411, 419]
    assert finding.details["tolerable_failed_checkpoints"] == 5

    inc = ingest([str(example(SLUG, "cancelled-during-checkpoint-1.17"))], spark)
    assert run_detectors(inc).findings == []
