"""Detector state-restore-files-missing: why a snapshot's files are gone, and where to restore from instead."""
from __future__ import annotations

from corpus import example, incident_from_files, incident_from_text
from corpus import line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.patches import render_config_diff

SLUG = "state-restore-files-missing"
JOB = "3f1c9e0a7b2d4c6e8f0a1b2c3d4e5f60"
NEW = "9a8b7c6d5e4f30211203948576afbecd"
CHK = f"/var/flink/checkpoints/{JOB}/chk-12"


def _tm_failure(missing: str, ts: str = "10:05:00,000") -> str:
    return "\n".join([
        line(ts, "counter -> Sink: sink (1/1)#0 (a_b_0_0) switched from INITIALIZING to FAILED with failure cause:",
             level="WARN", logger="org.apache.flink.runtime.taskmanager.Task"),
        "java.lang.Exception: Exception while creating StreamOperatorStateContext.",
        "Caused by: org.apache.flink.util.FlinkException: Could not restore keyed state backend for "
        "KeyedProcessOperator_0da08f51eaa85fc298e176a139b3649a_(1/1) from any of the 1 provided restore options.",
        "Caused by: org.apache.flink.runtime.state.BackendBuildingException: Failed when trying to restore heap backend",
        f"Caused by: java.io.FileNotFoundException: {missing} (No such file or directory)",
        "\tat java.base/java.io.FileInputStream.open0(Native Method)",
    ])


def _completed(chk: int, job: str = JOB) -> str:
    return line("10:00:00,000", f"Completed checkpoint {chk} for job {job} (2107 bytes, checkpointDuration=35 ms, "
                "finalizationTime=2 ms).", logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator")


def _registered(host: str) -> str:
    return line("09:59:00,000", f"Registering TaskManager with ResourceID {host}:35211-7ad2c1 (pekko.tcp://flink@{host}:"
                "35211/user/rpc/taskmanager_0) at ResourceManager",
                logger="org.apache.flink.runtime.resourcemanager.StandaloneResourceManager")


def test_a_local_checkpoint_dir_on_several_hosts_is_not_shared():
    text = "\n".join([_registered("worker-1"), _registered("worker-2"), _completed(12),
                      _tm_failure(f"{CHK}/4b1e2c3d-5f60-4a7b-8c9d-0e1f2a3b4c5d")])
    conf = {"state.checkpoints.dir": "file:///var/flink/checkpoints", "jobmanager.rpc.address": "flink-jm-1"}
    [f] = get_detector(SLUG).detect(incident_from_text(text, conf, "1.18.1"))
    assert f.root_cause.slug == "checkpoint-dir-not-shared"
    assert f.details["taskmanager_hosts"] == ["worker-1", "worker-2"]
    patch = next(p for p in f.patches if p.target == "flink")
    assert patch.key == "state.checkpoints.dir" and patch.current == "file:///var/flink/checkpoints"  # 1.18 spelling
    assert "state.checkpoints.dir: s3://" in render_config_diff(f.patches, None, "1.18.1")


def test_the_same_local_dir_on_one_host_is_files_deleted_not_a_sharing_problem():
    text = "\n".join([_registered("localhost"), _completed(12), _tm_failure(f"{CHK}/4b1e2c3d")])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {"execution.checkpointing.dir": "file:///var/flink/checkpoints"},
                                                       "1.20.3"))
    assert f.root_cause.slug == "files-deleted"
    assert f.details["completed_in_these_logs"] == "yes"
    assert any(p.key == "execution.checkpointing.num-retained" and p.proposed == "3" for p in f.patches)


def test_a_missing_shared_file_names_incremental_checkpoints():
    text = _tm_failure(f"/var/flink/checkpoints/{JOB}/shared/4b1e2c3d-5f60-4a7b-8c9d-0e1f2a3b4c5d")
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3"))
    assert f.root_cause.slug == "files-deleted" and "shared/" in f.details["what_is_missing"]
    stop = next(p for p in f.patches if p.key == "stop deleting files the checkpoints still use")
    assert "shared/" in stop.reason


def test_a_snapshot_claimed_earlier_and_deleted():
    text = "\n".join([
        line("10:00:00,000", f"Starting job {NEW} from savepoint file:{CHK} ()",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
        line("10:00:00,100", f"Restoring job {NEW} from Savepoint 12 @ 0 for {NEW} located at file:{CHK}.",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
        line("10:10:00,000", f"Starting job 5c5e1a2b3c4d5e6f708192a3b4c5d6e7 from savepoint file:{CHK} ()",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
        line("10:10:00,050", "Job 5c5e1a2b3c4d5e6f708192a3b4c5d6e7 reached terminal state FAILED.",
             logger="org.apache.flink.runtime.dispatcher.StandaloneDispatcher"),
        "org.apache.flink.runtime.client.JobInitializationException: Could not start the JobMaster.",
        f"Caused by: java.io.FileNotFoundException: Cannot find checkpoint or savepoint file/directory 'file:{CHK}' on "
        "file system 'file'.",
    ])
    inc = incident_from_text(text, {"execution.state-recovery.claim-mode": "CLAIM"}, "2.0.0")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "claim-mode-deleted" and f.confidence > 0.6
    assert "CLAIM mode" in f.evidence[0].note and NEW in f.evidence[0].text
    claim = next(p for p in f.patches if p.target == "flink")
    assert (claim.key, claim.current, claim.proposed) == ("execution.state-recovery.claim-mode", "CLAIM", "NO_CLAIM")
    newest = next(p for p in f.patches if p.key == "restore the claiming job's newest checkpoint")
    assert NEW in newest.snippet
    # 1.15 - 1.19 spell the setting execution.savepoint-restore-mode
    [g] = get_detector(SLUG).detect(incident_from_text(text, {"execution.savepoint-restore-mode": "CLAIM"}, "1.17.2"))
    assert next(p for p in g.patches if p.target == "flink").key == "execution.savepoint-restore-mode"


def test_a_missing_metadata_pasted_from_a_ticket(tmp_path):
    text = ("java.io.FileNotFoundException: Cannot find meta data file '_metadata' in directory "
            "'/data/flink/savepoints/savepoint-a1b2c3-0123456789ab'. Please try to load the checkpoint/savepoint "
            "directly from the metadata file instead of the directory.\n"
            "\tat org.apache.flink.runtime.state.filesystem.AbstractFsCheckpointStorageAccess.resolveCheckpointPointer"
            "(AbstractFsCheckpointStorageAccess.java:290)\n")
    primary = run_detectors(incident_from_files(tmp_path, {"ticket.txt": text}, "1.19.1")).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "files-deleted")
    assert primary.confidence < 0.8  # an excerpt


def test_the_job_checkpoint_directory_is_not_a_snapshot():
    text = "\n".join([
        line("10:10:00,000", f"Job x ({NEW}) reached terminal state FAILED.",
             logger="org.apache.flink.runtime.dispatcher.StandaloneDispatcher"),
        f"Caused by: java.io.FileNotFoundException: Cannot find meta data file '_metadata' in directory "
        f"'hdfs://nn:8020/flink/checkpoints/{JOB}'. Please try to load the checkpoint/savepoint directly from the "
        "metadata file instead of the directory."])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3"))
    assert f.root_cause.slug == "not-a-snapshot-path" and "Nothing was deleted" in f.summary
    [p] = f.patches
    assert f"/flink/checkpoints/{JOB}/chk-" in p.snippet


def test_a_path_never_seen_before_is_undetermined():
    text = "\n".join([
        line("10:10:00,000", f"Job x ({NEW}) reached terminal state FAILED.",
             logger="org.apache.flink.runtime.dispatcher.StandaloneDispatcher"),
        f"Caused by: java.io.FileNotFoundException: Cannot find checkpoint or savepoint file/directory 'file:{CHK}' on "
        "file system 'file'."])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3"))
    assert f.root_cause.slug == "undetermined" and "Collect next" in f.summary


def test_a_file_not_found_outside_a_restore_is_not_this_runbook():
    text = "\n".join([
        line("10:05:00,000", "enrich (1/1)#0 (a_b_0_0) switched from RUNNING to FAILED with failure cause:",
             level="WARN", logger="org.apache.flink.runtime.taskmanager.Task"),
        "java.io.FileNotFoundException: /etc/acme/rules.json (No such file or directory)",
        "\tat com.acme.Enrich.open(Enrich.java:31)"])
    assert get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3")) == []


def test_genuine_metadata_deleted(spark):
    from flink_runbooks.diagnose import ingest

    primary = run_detectors(ingest([str(example(SLUG, "metadata-deleted-hashmap-1.20.3"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "files-deleted")
    assert primary.details["what_is_missing"] == "the snapshot's _metadata file"
    assert "Flink never deletes a savepoint" in primary.summary
    assert not any(p.key == "execution.checkpointing.num-retained" for p in primary.patches)  # not a checkpoint
    assert [e.note for e in primary.evidence][-1] == "the snapshot directory has no _metadata"


def test_genuine_incremental_checkpoint_without_its_shared_files(spark):
    from flink_runbooks.diagnose import ingest

    diagnosis = run_detectors(ingest([str(example(SLUG, "shared-file-deleted-rocksdb-1.20.3"))], spark))
    primary = diagnosis.primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "files-deleted")
    assert primary.details["restore_attempts_failed"] == 3 and primary.details["completed_in_these_logs"] == "yes"
    assert primary.details["snapshot"].endswith("/chk-4")
    assert "Incremental checkpoints keep referencing files under shared/" in primary.summary
    retained = next(p for p in primary.patches if p.key == "execution.checkpointing.num-retained")
    assert retained.proposed == "3"
    assert not any(f.runbook == "rocksdb-restore-corruption" for f in diagnosis.findings)  # missing, not corrupt


def test_a_local_checkpoint_dir_on_a_three_machine_cluster(spark):
    from flink_runbooks.diagnose import ingest

    primary = run_detectors(ingest([str(example(SLUG, "local-checkpoint-dir-two-hosts-1.20"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "checkpoint-dir-not-shared")
    assert primary.details["taskmanager_hosts"] == ["10.0.1.21", "10.0.1.22"]
    [dir_patch] = [p for p in primary.patches if p.target == "flink"]
    assert (dir_patch.key, dir_patch.current) == ("execution.checkpointing.dir", "file:///var/lib/flink/checkpoints")


def test_a_rollback_to_a_checkpoint_another_deployment_claimed(spark):
    from flink_runbooks.diagnose import ingest

    primary = run_detectors(ingest([str(example(SLUG, "claimed-checkpoint-rollback-1.20"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "claim-mode-deleted")
    assert primary.details["what_is_missing"] == "the whole snapshot directory"
    newest = next(p for p in primary.patches if p.target == "ops")
    assert "b81f3d5a7c9e4b2d8f0a1c3e5b7d9f2a/chk-" in newest.snippet  # the job that claimed it owns its successors


def test_a_checkpoint_restored_from_where_it_was_moved_is_relocated_not_deleted():
    moved = f"s3://flink-prod-eu/checkpoints/{JOB}/chk-12"
    text = "\n".join([
        line("10:04:59,000", f"Restoring job {NEW} from Savepoint 12 @ 1709287500000 for {NEW} located at {moved}.",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
        # the copy's _metadata still names the files where the checkpoint was written
        _tm_failure(f"hdfs://nn-old:8020/flink/checkpoints/{JOB}/shared/4b1e2c3d-5f60-4a7b-8c9d-0e1f2a3b4c5d")])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {"state.checkpoints.dir": "s3://flink-prod-eu/checkpoints"},
                                                       "1.18.1"))
    assert f.root_cause.slug == "checkpoint-relocated"
    assert f.details["original_location"] == f"hdfs://nn-old:8020/flink/checkpoints/{JOB}"
    assert "Checkpoints cannot be relocated; only savepoints can" in f.summary and moved in f.summary
    assert f.evidence[0].note == "the restore reads the checkpoint at its new place"
    original, savepoint = f.patches
    assert original.key == "restore from the checkpoint's original location"
    assert f"flink run -s hdfs://nn-old:8020/flink/checkpoints/{JOB}/chk-12" in original.snippet
    assert savepoint.key == "move state with a savepoint" and "savepoint" in savepoint.reason
    assert not any(p.key == "execution.checkpointing.num-retained" for p in f.patches)  # nothing to retain longer


def test_a_missing_file_inside_the_restored_checkpoint_tree_stays_files_deleted():
    text = "\n".join([
        line("10:04:59,000", f"Restoring job {NEW} from Savepoint 12 @ 1709287500000 for {NEW} located at "
             f"file:{CHK}.", logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
        _tm_failure(f"/var/flink/checkpoints/{JOB}/shared/4b1e2c3d-5f60-4a7b-8c9d-0e1f2a3b4c5d")])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3"))
    assert f.root_cause.slug == "files-deleted"


def test_genuine_checkpoint_moved_to_another_directory(spark):
    from flink_runbooks.diagnose import ingest

    primary = run_detectors(ingest([str(example(SLUG, "checkpoint-relocated-rocksdb-1.20.3"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "checkpoint-relocated")
    assert "/ckpt-moved/" in primary.details["snapshot"] and primary.details["snapshot"].endswith("/chk-4")
    assert primary.details["original_location"].endswith("/ckpt/77dc4435cb04e38fceb61b1960c72a54")
    assert "Checkpoints cannot be relocated; only savepoints can" in primary.summary
    assert not any(p.key == "stop deleting files the checkpoints still use" for p in primary.patches)
    restore = next(p for p in primary.patches if p.key == "restore from the checkpoint's original location")
    assert "/ckpt/77dc4435cb04e38fceb61b1960c72a54/chk-4" in restore.snippet


def test_the_submission_alone_names_the_relocated_checkpoint():
    moved = f"s3://flink-prod-eu/checkpoints/{JOB}/chk-12"
    text = "\n".join([
        line("10:04:58,000", f"Starting job {NEW} from savepoint {moved} ()",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
        _tm_failure(f"hdfs://nn-old:8020/flink/checkpoints/{JOB}/chk-12/4b1e2c3d-5f60-4a7b-8c9d-0e1f2a3b4c5d")])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.16.3"))
    assert f.root_cause.slug == "checkpoint-relocated"
    assert f.details["original_location"] == f"hdfs://nn-old:8020/flink/checkpoints/{JOB}"
