"""Shared analysis of failed task snapshots (lib/flink_runbooks/snapshot_failures.py)."""
from __future__ import annotations

import pytest

from corpus import incident_from_text
from flink_runbooks.evidence.checkpoints import CheckpointAttempt
from flink_runbooks.evidence.snapshot_failures import (checkpoint_dir, datanode_trouble, failure_bursts, is_legacy,
                                              proposed_tolerance, snapshot_failures, storage_error, transient_blip)

JOB = "0123456789abcdef0123456789abcdef"


def attempts(*outcomes):
    return [CheckpointAttempt(i, JOB, outcome=o) for i, o in enumerate(outcomes, start=1)]


@pytest.mark.parametrize("text,kind", [
    ("DSQuotaExceededException: The DiskSpace quota of /user/flink is exceeded", "space"),
    ("java.io.IOException: No space left on device", "space"),
    ("AccessControlException: Permission denied: user=flink, access=WRITE", "permission"),
    ("java.io.IOException: Mkdirs failed to create file:/ckpt/chk-3", "permission"),
    ("RemoteException: java.io.IOException: Path doesn't exist: /flink/chk-1/x", "path-gone"),
    ("LeaseExpiredException): No lease on /flink/chk-1/x", "path-gone"),
    ("java.net.SocketTimeoutException: Read timed out", "network"),
    ("java.lang.NullPointerException", None),
])
def test_storage_errors_are_classified_by_kind(text, kind):
    found = storage_error(text)
    assert (found[0] if found else None) == kind


def test_checkpoint_directory_is_the_parent_of_chk_n():
    assert checkpoint_dir("to hdfs://ns/flink/checkpoints/abc/chk-118/6f0e in order") == "hdfs://ns/flink/checkpoints/abc"
    assert checkpoint_dir("Mkdirs failed to create file:/data/ckpt/abc/chk-3") == "file:/data/ckpt/abc"
    assert checkpoint_dir("no path here") is None


def test_bursts_are_split_by_completed_checkpoints():
    history = attempts("completed", "declined", "declined", "completed", "declined", "completed")
    assert failure_bursts(history, {2, 3, 5}) == [[2, 3], [5]]
    assert not transient_blip(history, {2, 3, 5})
    assert transient_blip(history, {2, 3})
    assert not transient_blip(attempts("completed", "declined", "declined"), {2, 3}), "not recovered yet"


def test_tolerance_rides_out_the_streak_with_room_to_spare():
    assert proposed_tolerance(None, 1) == 3
    assert proposed_tolerance(2, 3) == 5
    assert proposed_tolerance(5, 1) is None


def test_sync_failures_always_fail_the_task_and_debug_lines_of_cancelled_tasks_are_dropped():
    text = """2024-01-01 10:00:00,000 WARN  org.apache.flink.runtime.taskmanager.Task [] - Map (1/1)#0 (a) switched from RUNNING to FAILED with failure cause:
java.io.IOException: Could not perform checkpoint 7 for operator Map (1/1)#0.
Caused by: org.apache.flink.runtime.checkpoint.CheckpointException: Could not complete snapshot 7 for operator Map (1/1)#0. Failure reason: Checkpoint was declined.
2024-01-01 10:01:00,000 DEBUG org.apache.flink.streaming.runtime.tasks.StreamTask [] - Could not perform checkpoint 8 for operator Map (1/1)#0 while the invokable was not in state running."""
    [failure] = snapshot_failures(incident_from_text(text), "sync")
    assert (failure.checkpoint_id, failure.operator, failure.failed_task) == (7, "Map (1/1)#0", True)


def test_legacy_behaviour_from_the_version_or_the_asynchronous_exception():
    assert is_legacy(incident_from_text("", version="1.8.3")) is True
    assert is_legacy(incident_from_text("", version="1.9.0")) is False
    inc = incident_from_text("org.apache.flink.streaming.runtime.tasks.AsynchronousException: java.lang.Exception: "
                             "Could not materialize checkpoint 3 for operator Map (1/1).")
    assert is_legacy(inc, inc.events) is True
    assert is_legacy(incident_from_text("")) is None


def test_datanode_trouble_counts_the_clients_own_records_once():
    msg = ("File /flink/checkpoints/x/chk-9/f could only be written to 0 of the 1 minReplication nodes. There are 3 "
           "datanode(s) running and 3 node(s) are excluded in this operation.")
    text = f"""2024-01-01 10:00:00,000 WARN  org.apache.hadoop.hdfs.DataStreamer [] - DataStreamer Exception
org.apache.hadoop.ipc.RemoteException(java.io.IOException): {msg}
2024-01-01 10:00:00,500 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator [] - Decline checkpoint 9 by task a of job {JOB} at tm.
org.apache.flink.util.SerializedThrowable: org.apache.hadoop.ipc.RemoteException(java.io.IOException): {msg}"""
    trouble = datanode_trouble(incident_from_text(text))
    assert len(trouble.events) == 2 and trouble.min_replication == 1
    assert (trouble.running, trouble.excluded) == (3, 3)
    assert trouble.checkpoint_ids == {9}
