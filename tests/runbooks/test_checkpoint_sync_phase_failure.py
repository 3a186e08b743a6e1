"""Detector checkpoint-sync-phase-failure: what failed under 'Could not perform checkpoint', told apart; the task
always fails; more specific runbooks (HDFS datanodes, RocksDB hard links) win the primary slot."""
from __future__ import annotations

from corpus import INCIDENT_REPORTS, example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.model import Finding, RootCause

SLUG = "checkpoint-sync-phase-failure"
# An issue report, verbatim
HDFS_SNAPSHOT_FAILURE = INCIDENT_REPORTS / "hdfs-snapshot-failure-restart.txt"
OP = "KeyedProcess -> Sink: out (2/2)#0"


def detect(text, config=None, version=None):
    return get_detector(SLUG).detect(incident_from_text(text, config, version))


def task_failure(n, *causes, frames=(), ts="2024-03-11 06:42:36,217"):
    """A 1.10+ synchronous-phase failure as the TaskManager logs it, with the given deepest causes and frames."""
    lines = [f"{ts} WARN  org.apache.flink.runtime.taskmanager.Task                    [] - {OP} (4b9c_0_0) switched from RUNNING to FAILED with failure cause:",
             f"java.io.IOException: Could not perform checkpoint {n} for operator {OP}.",
             "\tat org.apache.flink.streaming.runtime.tasks.StreamTask.triggerCheckpointOnBarrier(StreamTask.java:1238) ~[flink-dist-1.16.3.jar:1.16.3]",
             f"Caused by: org.apache.flink.runtime.checkpoint.CheckpointException: Could not complete snapshot {n} for operator {OP}. Failure reason: Checkpoint was declined.",
             "\tat org.apache.flink.streaming.api.operators.StreamOperatorStateHandler.snapshotState(StreamOperatorStateHandler.java:269) ~[flink-dist-1.16.3.jar:1.16.3]"]
    for cause in causes:
        lines.append(f"Caused by: {cause}")
    lines += [f"\tat {f}" for f in frames]
    return "\n".join(lines)


USER_FRAMES = ("com.acme.billing.InvoiceDedupFunction.snapshotState(InvoiceDedupFunction.java:87) ~[invoice-dedup-2.4.1.jar:?]",
               "org.apache.flink.streaming.util.functions.StreamingFunctionUtils.trySnapshotFunctionState(StreamingFunctionUtils.java:118)",
               "org.apache.flink.streaming.api.operators.AbstractUdfStreamOperator.snapshotState(AbstractUdfStreamOperator.java:87)")


def test_reported_hdfs_pipeline_failure_defers_to_the_datanode_runbook():
    inc = incident_from_text(HDFS_SNAPSHOT_FAILURE.read_text())
    diagnosis = run_detectors(inc)
    mine = next(f for f in diagnosis.findings if f.runbook == SLUG)
    assert mine.root_cause.slug == "hdfs-datanodes-bad" and mine.severity == "failure" and not mine.primary
    assert diagnosis.primary.runbook == "hdfs-datanode-failure"
    assert mine.details["failed_checkpoints"] == [45843]
    assert "restarted" in mine.summary and "catch up" in mine.summary
    # the version is unknown (a pasted trace): the pre-1.9 switch is offered, labelled as such
    code = next(p for p in mine.patches if p.target == "code")
    assert "setFailOnCheckpointingErrors(false)" in code.snippet and "1.8" in code.reason


def test_user_code_in_snapshot_state_is_named_with_its_frame():
    [finding] = detect(task_failure(5, "java.lang.NullPointerException", frames=USER_FRAMES), version="1.16.3")
    assert finding.root_cause.slug == "user-code-failure" and finding.confidence >= 0.85
    assert finding.details["failing_code"] == "com.acme.billing.InvoiceDedupFunction.snapshotState(InvoiceDedupFunction.java:87)"
    assert "tolerable-failed-checkpoints does not apply" in finding.summary
    fix = next(p for p in finding.patches if p.key == "job code")
    assert "InvoiceDedupFunction.snapshotState" in fix.reason and "NullPointerException" in fix.reason
    assert not any(p.target == "code" for p in finding.patches), "no pre-1.9 switch on 1.16"


def test_programming_error_without_a_kept_user_frame_is_still_user_code_but_less_sure():
    [finding] = detect(task_failure(5, "java.lang.IllegalStateException: buffer holds records of two customers"),
                       version="1.17.2")
    assert finding.root_cause.slug == "user-code-failure" and finding.confidence < 0.85


def test_object_store_denial_in_a_sink_is_a_storage_write_failure():
    denied = ("java.nio.file.AccessDeniedException: s3a://acme-datalake/events/dt=2022-03-05/.part-1-47.inprogress.8c0e: "
              "uploadPart on events/dt=2022-03-05/.part-1-47.inprogress.8c0e: com.amazonaws.services.s3.model."
              "AmazonS3Exception: Access Denied (Service: Amazon S3; Status Code: 403; Error Code: AccessDenied)")
    text = task_failure(31, "java.io.IOException: Uploading parts failed", denied, frames=(
        "org.apache.flink.streaming.api.functions.sink.filesystem.Buckets.snapshotState(Buckets.java:235)",
        "org.apache.flink.streaming.api.functions.sink.filesystem.StreamingFileSink.snapshotState(StreamingFileSink.java:491)",
        "org.apache.flink.streaming.util.functions.StreamingFunctionUtils.trySnapshotFunctionState(StreamingFunctionUtils.java:118)"))
    [finding] = detect(text, version="1.13.6")
    assert finding.root_cause.slug == "storage-write-failure"
    assert finding.details["failing_code"].startswith("org.apache.flink.streaming.api.functions.sink.filesystem.StreamingFileSink.snapshotState")
    fix = next(p for p in finding.patches if p.key == "storage write permissions")
    assert "acme-datalake/events/dt=2022-03-05" in fix.reason
    assert "aws s3 cp" in fix.snippet


def test_rocksdb_hard_link_is_reported_but_left_to_the_more_specific_runbook():
    link = ("org.rocksdb.RocksDBException: while link file to /data/rocksdb/job_x/chk-1.tmp/000012.sst: "
            "/data/rocksdb/job_x/db/000012.sst: Operation not permitted")
    [finding] = detect(task_failure(1, link), {"state.backend.rocksdb.localdir": "/data/rocksdb"}, version="1.20.3")
    assert finding.root_cause.slug == "rocksdb-native-checkpoint-failure"
    assert "rocksdb-hardlink-not-supported" in finding.patches[0].reason
    # a wrapper runbook: any root-cause runbook (layer 0) that explains the same failure is preferred
    assert get_detector(SLUG).layer > 0

    from flink_runbooks.diagnose import order_findings
    specific = Finding("rocksdb-hardlink-not-supported", "t", RootCause("x", "y"), "s", 0.5,
                       first_seen=finding.first_seen)
    both = [finding, specific]
    order_findings(both)
    assert both[0].runbook == "rocksdb-hardlink-not-supported"


def test_rocksdb_local_disk_full_points_at_the_local_directory():
    full = "org.rocksdb.RocksDBException: While appending to file: /mnt/rocks/db/000231.sst: No space left on device"
    [finding] = detect(task_failure(9, full), {"state.backend.rocksdb.localdir": "/mnt/rocks"}, version="1.15.4")
    assert finding.root_cause.slug == "rocksdb-native-checkpoint-failure"
    assert finding.patches[0].snippet == "df -h /mnt/rocks"


def test_kafka_sink_rejecting_pending_records_is_a_connector_flush_failure():
    kafka = ("org.apache.flink.streaming.connectors.kafka.FlinkKafkaException: Failed to send data to Kafka: "
             "Expiring 14 record(s) for orders-0:120001 ms has passed since batch creation")
    [finding] = detect(task_failure(12, kafka), version="1.14.6")
    assert finding.root_cause.slug == "connector-flush-failure"


def test_cut_off_trace_is_an_unknown_cause():
    text = task_failure(7)
    [finding] = detect(text, version="1.18.1")
    assert finding.root_cause.slug == "undetermined" and finding.confidence == 0.5
    assert "Collect next: the failing task's full stack trace" in finding.summary


def test_debug_line_of_a_cancelled_task_is_not_a_failure():
    text = """2024-05-27 13:22:32,116 DEBUG org.apache.flink.streaming.runtime.tasks.StreamTask         [] - Could not perform checkpoint 57 for operator Source: orders (1/2)#0 while the invokable was not in state running.
org.apache.flink.runtime.checkpoint.CheckpointException: Could not complete snapshot 57 for operator Source: orders (1/2)#0. Failure reason: Checkpoint was declined.
Caused by: java.io.IOException: Cannot register Closeable, registry is already closed. Closing argument."""
    assert detect(text, version="1.18.1") == []


def test_pre_1_9_switch_only_for_pre_1_9_versions():
    text = task_failure(3, "java.io.IOException: Could not flush and close the file system output stream to "
                           "hdfs://nn/flink/chk-3/x in order to obtain the stream state handle")
    legacy = detect(text, version="1.8.3")[0]
    assert any("setFailOnCheckpointingErrors(false)" in (p.snippet or "") for p in legacy.patches)
    assert "Up to Flink 1.8" in legacy.summary
    modern = detect(text, version="1.9.3")[0]
    assert not any(p.target == "code" for p in modern.patches)
    assert modern.details["tolerable_failed_checkpoints_applies"] is False


def test_restart_point_is_the_last_completed_checkpoint():
    job = "3f9a0c5e7b2d4168a9e1c3b5d7f90a2e"
    text = (f"2024-03-11 06:42:06,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Triggering checkpoint 4 (type=CHECKPOINT) @ 1 for job {job}.\n"
            f"2024-03-11 06:42:06,300 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Completed checkpoint 4 for job {job} (3771645 bytes, checkpointDuration=280 ms, finalizationTime=5 ms).\n"
            + task_failure(5, "java.lang.NullPointerException", frames=USER_FRAMES))
    [finding] = detect(text, version="1.16.3")
    assert finding.details["last_completed_checkpoint"] == 4
    assert "from checkpoint 4" in finding.summary
    assert any("last completed checkpoint before the failure: 4" in e.note for e in finding.evidence)


def test_example_incidents(spark):
    inc = ingest([str(example(SLUG, "user-snapshotstate-npe-1.16"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "user-code-failure")
    assert primary.details["failed_checkpoints"] == [5, 6, 7]

    inc = ingest([str(example(SLUG, "s3-sink-access-denied-1.13"))], spark)
    assert inc.flink_version == "1.13.6"
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "storage-write-failure"

    inc = ingest([str(example(SLUG, "debug-log-cancel-1.18"))], spark)
    assert run_detectors(inc).findings == []
