"""Detector rocksdb-hardlink-not-supported: where RocksDB's directory lives, and a local one proposed."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.render.patches import render_config_diff, render_flinkdeployment_patch

SLUG = "rocksdb-hardlink-not-supported"

# a vendor knowledge-base article's trace and configuration (Flink 1.8, RocksDB on NFS)
ARTICLE_TRACE = """\
2019-10-15 12:33:53,699 INFO org.apache.flink.streaming.api.operators.AbstractStreamOperator [] - Could not complete snapshot 1 for operator testOperator (1/2).
org.rocksdb.RocksDBException: while link file to /mnt/checkpoints/job/<path>/chk-1.tmp/000022.sst: /mnt/checkpoints/job/<path>/db/000022.sst: Not supported
at org.rocksdb.Checkpoint.createCheckpoint(Native Method)
at org.rocksdb.Checkpoint.createCheckpoint(Checkpoint.java:51)
at org.apache.flink.contrib.streaming.state.snapshot.RocksIncrementalSnapshotStrategy.takeDBNativeCheckpoint(RocksIncrementalSnapshotStrategy.java:243)
at org.apache.flink.streaming.runtime.tasks.StreamTask.triggerCheckpointOnBarrier(StreamTask.java:586)
"""
ARTICLE_CONFIG = {"state.backend": "rocksdb", "state.backend.incremental": "'true'",
                  "state.checkpoints.dir": "'file:///mnt/checkpoints'",
                  "state.backend.rocksdb.localdir": "/mnt/checkpoints/job"}


def link_failure(localdir: str, checkpoint: int = 7, error: str = "Operation not supported") -> str:
    inst = f"{localdir}/job_6fe21f8a81281f773b439e97a2c3d82f_op_WindowOperator_e096__2_4__uuid_a165438a-9e9f-dbbb-6b03-2c4e97a1b0f2"
    return (f"2024-02-01 10:00:{checkpoint:02d},000 WARN  org.apache.flink.runtime.taskmanager.Task [] - window (2/4)#0 "
            f"(a_b_1_0) switched from RUNNING to FAILED with failure cause:\n"
            f"java.io.IOException: Could not perform checkpoint {checkpoint} for operator window (2/4)#0.\n"
            f"Caused by: org.apache.flink.runtime.checkpoint.CheckpointException: Could not complete snapshot "
            f"{checkpoint} for operator window (2/4)#0. Failure reason: Checkpoint was declined.\n"
            f"Caused by: org.rocksdb.RocksDBException: while link file to {inst}/chk-{checkpoint}.tmp/000045.sst: "
            f"{inst}/db/000045.sst: {error}\n")


def detect(text: str, config: dict | None = None, version: str | None = None):
    return get_detector(SLUG).detect(incident_from_text(text, config, version, file="taskmanager.log"))


def test_the_articles_localdir_inside_the_checkpoint_directory():
    [finding] = detect(ARTICLE_TRACE, ARTICLE_CONFIG, "1.8.2")
    assert finding.root_cause.slug == "localdir-on-checkpoint-storage" and finding.confidence == 0.9
    assert finding.details["same_mount_as_checkpoints"] == "inside"
    assert finding.details["error"] == "Not supported"
    assert "inside the checkpoint directory file:///mnt/checkpoints" in finding.summary
    localdir = next(p for p in finding.patches if p.key == "state.backend.rocksdb.localdir")
    assert (localdir.current, localdir.proposed) == ("/mnt/checkpoints/job", "/tmp/rocksdb")
    assert finding.severity == "failure"


def test_siblings_on_one_mount_are_the_checkpoint_storage():
    config = {"state.checkpoints.dir": "file:///data/flink/share/checkpoints",
              "state.backend.rocksdb.localdir": "/data/flink/share/rocksdb", "io.tmp.dirs": "/data/flink/tmp"}
    [finding] = detect(link_failure("/data/flink/share/rocksdb", error="Operation not permitted"), config)
    assert finding.root_cause.slug == "localdir-on-checkpoint-storage"
    assert finding.details["same_mount_as_checkpoints"] == "/data/flink/share"
    # io.tmp.dirs is off the failing mount: RocksDB goes next to it
    assert next(p for p in finding.patches if p.key == "state.backend.rocksdb.localdir").proposed == "/data/flink/tmp/rocksdb"


def test_a_parent_that_also_holds_local_directories_is_not_a_mount():
    config = {"state.checkpoints.dir": "file:///opt/flink/checkpoints", "state.backend.rocksdb.localdir": "/opt/flink/rocksdb",
              "io.tmp.dirs": "/opt/flink/tmp"}
    [finding] = detect(link_failure("/opt/flink/rocksdb"), config)
    assert finding.root_cause.slug == "localdir-on-network-fs"


def test_localdir_on_a_share_while_checkpoints_go_to_s3():
    config = {"state.checkpoints.dir": "s3://bucket/checkpoints", "state.backend.rocksdb.localdir": "/mnt/azurefiles/rocksdb"}
    [finding] = detect(link_failure("/mnt/azurefiles/rocksdb", 7) + link_failure("/mnt/azurefiles/rocksdb", 8), config)
    assert finding.root_cause.slug == "localdir-on-network-fs" and finding.confidence == 0.8
    assert finding.details["checkpoints_failed"] == [7, 8]
    assert finding.details["path_suggests"] == "azure"
    assert "Checkpoints can stay where they are" in finding.summary


def test_io_tmp_dirs_is_the_rocksdb_directory_when_localdir_is_unset():
    config = {"state.checkpoints.dir": "hdfs://nn/flink/checkpoints", "io.tmp.dirs": "/mnt/nas-smb/flink-tmp"}
    [finding] = detect(link_failure("/mnt/nas-smb/flink-tmp/flink-io-47aedf4b-170b-2c90-2c07-45a3adc64a06"), config)
    assert finding.details["rocksdb_localdir"] == "/mnt/nas-smb/flink-tmp (from io.tmp.dirs)"
    localdir = next(p for p in finding.patches if p.key == "state.backend.rocksdb.localdir")
    assert (localdir.current, localdir.proposed) == (None, "/tmp/rocksdb")


def test_without_configuration_the_path_in_the_message_is_used():
    [finding] = detect(link_failure("/mnt/gcs-fuse/rocksdb"))
    assert finding.root_cause.slug == "localdir-on-network-fs" and finding.confidence < 0.7
    assert "/mnt/gcs-fuse/rocksdb" in finding.details["rocksdb_localdir"]


@pytest.mark.parametrize("version,key", [("1.18.1", "state.backend.incremental"),
                                         ("1.20.0", "execution.checkpointing.incremental")])
def test_stopgap_names_the_incremental_key_of_the_version(version, key):
    [finding] = detect(ARTICLE_TRACE, ARTICLE_CONFIG, version)
    stopgap = next(p for p in finding.patches if p.key == "stopgap without a local disk")
    assert stopgap.snippet == f"{key}: false"


def test_the_patch_renders_for_flink_conf_and_for_the_operator():
    [finding] = detect(ARTICLE_TRACE, ARTICLE_CONFIG, "1.18.1")
    diff = render_config_diff(finding.patches, None, "1.18.1")
    assert "+++ b/flink-conf.yaml" in diff and "+state.backend.rocksdb.localdir: /tmp/rocksdb" in diff
    assert "state.backend.rocksdb.localdir: /tmp/rocksdb" in render_flinkdeployment_patch(finding.patches, "2.0.0")


def test_other_snapshot_failures_are_not_this_runbook():
    text = link_failure("/data/rocksdb").replace(
        "org.rocksdb.RocksDBException: while link file to", "java.io.IOException: Could not open output stream for")
    assert detect(text) == []


def test_genuine_incident_localdir_on_the_checkpoint_mount(spark):
    inc = ingest([str(example(SLUG, "localdir-on-checkpoint-mount-v1.20"))], spark)
    primary = run_detectors(inc).primary
    assert primary.runbook == SLUG and primary.root_cause.slug == "localdir-on-checkpoint-storage"
    assert primary.details["checkpoints_failed"] == [1, 2, 3]
    assert primary.details["same_mount_as_checkpoints"] == "/data/flink/rocksdb-vfat-1.20.3/vfat"


def test_near_miss_full_snapshots_on_the_share_give_nothing(spark):
    assert run_detectors(ingest([str(example(SLUG, "near-miss-full-snapshots-on-share-1.18"))], spark)).findings == []
