"""Detector rocksdb-restore-corruption: where the corrupt file was read from decides the cause and the advice."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.vocabulary.keys import canonical
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.render.patches import render_config_diff
from flink_runbooks.evidence.rocksdb import common_dir, instance_base, split_dirs, strip_scheme

SLUG = "rocksdb-restore-corruption"
JOB = "1807ce3de9b569721463e999800e2432"
OP = "org.apache.flink.contrib.streaming.state.restore.RocksDBIncrementalRestoreOperation"
BUILDER = "org.apache.flink.contrib.streaming.state.RocksDBKeyedStateBackendBuilder"
INSTANCE = f"/data/rocksdb/job_{JOB}_op_StreamMap_857e9877747f27b5e758680f3644828a__1_1__uuid_8a10e29f-e3de-442c-a70f-246bb1b572fb"
MAGIC = f"Bad table magic number: expected 9863518390377041911, found 17223112372431451250 in {INSTANCE}/db/000210.sst"

BLOG_TRACE = """\
2023-06-14 23:42:46
java.lang.Exception: Exception while creating StreamOperatorStateContext.
    at org.apache.flink.streaming.api.operators.StreamTaskStateInitializerImpl.streamOperatorStateContext(StreamTaskStateInitializerImpl.java:256)
Caused by: org.apache.flink.util.FlinkException: Could not restore keyed state backend for WindowOperator_e86e186b46037831968ebb9b688675bc_(1/2) from any of the 1 provided restore options.
    at org.apache.flink.streaming.api.operators.BackendRestorerProcedure.createAndRestore(BackendRestorerProcedure.java:160)
    ... 11 more
Caused by: org.apache.flink.runtime.state.BackendBuildingException: Caught unexpected exception.
    at org.apache.flink.contrib.streaming.state.RocksDBKeyedStateBackendBuilder.build(RocksDBKeyedStateBackendBuilder.java:405)
    ... 13 more
Caused by: java.io.IOException: Error while opening RocksDB instance.
    at org.apache.flink.contrib.streaming.state.RocksDBOperationUtils.openDB(RocksDBOperationUtils.java:92)
    at org.apache.flink.contrib.streaming.state.restore.RocksDBIncrementalRestoreOperation.restoreFromLocalState(RocksDBIncrementalRestoreOperation.java:243)
    at org.apache.flink.contrib.streaming.state.restore.RocksDBIncrementalRestoreOperation.restoreFromRemoteState(RocksDBIncrementalRestoreOperation.java:222)
    at org.apache.flink.contrib.streaming.state.restore.RocksDBIncrementalRestoreOperation.restoreWithoutRescaling(RocksDBIncrementalRestoreOperation.java:189)
    ... 18 more
Caused by: org.rocksdb.RocksDBException: Bad table magic number: expected 9863518390377041911, found 17223112372431451250 in /tmp/tm_10.9.2.0:6122-c46d5f/tmp/job_000000006e6b13320000000000000000_op_WindowOperator_e86e186b46037831968ebb9b688675bc__1_2__uuid_78923e7c-9777-40d9-a5c5-fd7f0d2ee983/db/000210.sst
    at org.rocksdb.RocksDB.open(Native Method)
    ... 25 more
"""


def log(at: str, level: str, logger: str, message: str) -> str:
    return f"2026-11-22 02:59:{at} {level:<5} {logger:<60} [] - {message}\n"


def open_failure(at: str, message: str, frames: str = "restoreFromLocalState") -> str:
    return (log(at, "ERROR", BUILDER, "Caught unexpected exception.")
            + "java.io.IOException: Error while opening RocksDB instance.\n"
            + f"\tat {OP}.{frames}(RocksDBIncrementalRestoreOperation.java:304) ~[flink-dist-1.20.3.jar:1.20.3]\n"
            + f"Caused by: org.rocksdb.RocksDBException: {message}\n"
            + "\tat org.rocksdb.RocksDB.open(Native Method) ~[flink-dist-1.20.3.jar:1.20.3]\n\t... 28 more\n")


def gave_up(at: str, options: int = 1, message: str = MAGIC) -> str:
    return (log(at, "WARN", "org.apache.flink.runtime.taskmanager.Task",
                "stateful-map (1/1)#1 (a702_857e_0_1) switched from INITIALIZING to FAILED with failure cause:")
            + "java.lang.Exception: Exception while creating StreamOperatorStateContext.\n"
            + "Caused by: org.apache.flink.util.FlinkException: Could not restore keyed state backend for "
              f"StreamMap_857e9877747f27b5e758680f3644828a_(1/1) from any of the {options} provided restore options.\n"
            + "Caused by: org.apache.flink.runtime.state.BackendBuildingException: Caught unexpected exception.\n"
            + "Caused by: java.io.IOException: Error while opening RocksDB instance.\n"
            + f"Caused by: org.rocksdb.RocksDBException: {message}\n")


def restored(at: str, checkpoint: int = 3) -> str:
    return log(at, "INFO", "org.apache.flink.runtime.checkpoint.CheckpointCoordinator",
               f"Restoring job {JOB} from Checkpoint {checkpoint} @ 1795316327469 for {JOB} located at "
               f"file:/data/ckpt/{JOB}/chk-{checkpoint}.")


def remote_restore(attempts: int = 2) -> str:
    text = ""
    for i in range(attempts):
        s = 10 + 5 * i
        text += restored(f"{s:02d},000")
        text += log(f"{s:02d},100", "INFO", "org.apache.flink.runtime.state.TaskLocalStateStoreImpl",
                    f"Did not find registered local state for checkpoint 3 in subtask ({JOB} - "
                    "857e9877747f27b5e758680f3644828a - 0)")
        text += log(f"{s:02d},200", "INFO", OP, "Starting RocksDB incremental recovery in operator "
                    "StreamMap_857e9877747f27b5e758680f3644828a_(1/1) target key-group range [0, 127]. Use IngestDB=false, "
                    "Use AsyncCompaction=false, State Handles=[IncrementalRemoteKeyedStateHandle{privateState=[], "
                    f"sharedState=[HandleAndLocalPath{{handle=File State: file:/data/ckpt/{JOB}/shared/2f32f38e [1280119 bytes], "
                    "localPath='000210.sst'}]}]")
        text += log(f"{s:02d},210", "INFO", OP, "Start downloading remote state to local directory in operator "
                    "StreamMap_857e9877747f27b5e758680f3644828a_(1/1) for target key-group range [0, 127].")
        text += open_failure(f"{s:02d},300", MAGIC)
        text += gave_up(f"{s:02d},320")
    return text


def local_restore(remote_fails: bool = False) -> str:
    local = f"/flink-local/localState/aid_6b0c/jid_{JOB}/vtx_857e_sti_0/chk_3/6c1b"
    text = restored("10,000")
    text += log("10,200", "INFO", OP, "Starting to restore from state handle: IncrementalLocalKeyedStateHandle"
                f"{{metaDataState=File State: file:{local}/metadata [10218 bytes]}} DirectoryKeyedStateHandle"
                f"{{directoryStateHandle=DirectoryStateHandle{{directory={local}}}}} without rescaling.")
    text += open_failure("10,300", MAGIC, "restoreWithoutRescaling")
    text += (log("10,310", "WARN", "org.apache.flink.streaming.api.operators.BackendRestorerProcedure",
                 "Exception while restoring keyed state backend for StreamMap_857e9877747f27b5e758680f3644828a_(1/1) "
                 "from alternative (1/2), will retry while more alternatives are available.")
             + "org.apache.flink.runtime.state.BackendBuildingException: Caught unexpected exception.\n"
             + "Caused by: java.io.IOException: Error while opening RocksDB instance.\n"
             + f"Caused by: org.rocksdb.RocksDBException: {MAGIC}\n")
    text += log("10,400", "INFO", OP, "Starting to restore from state handle: IncrementalRemoteKeyedStateHandle"
                "{checkpointId=3, sharedState={...}} without rescaling.")
    if remote_fails:
        text += open_failure("11,300", "block checksum mismatch: expected 2914551310, got 1150298014  in "
                             f"{INSTANCE}/db/000211.sst offset 0 size 4011", "restoreWithoutRescaling")
        text += gave_up("11,320", options=2)
    else:
        text += log("50,400", "INFO", OP, "Finished restoring from state handle: IncrementalRemoteKeyedStateHandle"
                    "{checkpointId=3} without rescaling.")
    return text


def detect(text: str, config: dict | None = None, version: str | None = None):
    return get_detector(SLUG).detect(incident_from_text(text, config, version, file="taskmanager.log"))


# ------------------------------------------------------------------------------------------------ causes


def test_download_from_the_checkpoint_storage_means_the_checkpoint_is_corrupt():
    [finding] = detect(remote_restore(), {"execution.state-recovery.from-local": "true"})
    assert finding.root_cause.slug == "remote-checkpoint-corrupt"
    assert finding.severity == "failure" and finding.confidence == 0.9
    assert finding.details["restore_attempts_failed"] == 2
    assert finding.details["attempts_by_source"] == {"remote": 2}
    assert finding.details["remote copy of 000210.sst"] == f"file:/data/ckpt/{JOB}/shared/2f32f38e (1280119 bytes)"
    assert "no task-local copy" in finding.summary


def test_the_blog_posts_trace_downloads_before_it_opens():
    [finding] = detect(BLOG_TRACE, version="1.16.1")
    assert finding.root_cause.slug == "remote-checkpoint-corrupt" and finding.confidence == 0.9
    assert finding.details["corrupt_files"] == ["000210.sst"]
    assert "Bad table magic number" in finding.summary


def test_a_bare_rocksdb_line_is_diagnosed_with_less_confidence():
    [finding] = detect(f"org.rocksdb.RocksDBException: {MAGIC}\n")
    # which copy is bad is not in the logs: no cause is named, the safe way back and what to collect are
    assert finding.root_cause.slug == "undetermined" and finding.confidence < 0.5
    assert "do not show whether" in finding.summary and "Collect next: the failing TaskManager's log" in finding.summary
    assert not [p for p in finding.patches if canonical(p.key) == "execution.state-recovery.from-local"]


def test_the_restore_from_local_state_frame_alone_does_not_mean_local_state():
    # 1.16 and 1.20 open downloaded files through restoreFromLocalState too: only the log lines around it tell
    text = open_failure("10,300", MAGIC) + gave_up("10,320")
    [finding] = detect(text, {"execution.state-recovery.from-local": "true"}, version="1.20.0")
    assert finding.root_cause.slug == "undetermined" and finding.confidence < 0.5
    assert finding.details["attempts_by_source"] == {"unknown": 1}


def test_local_recovery_is_not_proposed_blindly_for_unaligned_checkpoints():
    [finding] = detect(remote_restore(), {"execution.checkpointing.unaligned": "true"}, version="1.18.1")
    local = next(p for p in finding.patches if canonical(p.key) == "execution.state-recovery.from-local")
    assert "enables unaligned checkpoints" in local.reason


def test_a_corrupt_task_local_copy_that_flink_survived_is_a_warning():
    [finding] = detect(local_restore(), {"state.backend.local-recovery": "true",
                                        "state.checkpoints.num-retained": "1",
                                        "taskmanager.state.local.root-dirs": "/flink-local"}, version="1.17.2")
    assert finding.root_cause.slug == "local-state-corrupt"
    assert finding.severity == "warning"
    assert "restored from the checkpoint storage and the job went on" in finding.summary
    wipe = next(p for p in finding.patches if p.key == "wipe the task-local state")
    assert f"rm -rf /flink-local/localState*/aid_*/jid_{JOB}" in wipe.snippet
    assert not any(p.key == "restart from an older snapshot" for p in finding.patches)
    local = next(p for p in finding.patches if canonical(p.key) == "execution.state-recovery.from-local")
    assert (local.current, local.proposed) == ("true", "false")


def test_when_both_the_local_copy_and_the_checkpoint_fail_the_checkpoint_is_corrupt():
    [finding] = detect(local_restore(remote_fails=True), {"state.backend.local-recovery": "true"})
    assert finding.root_cause.slug == "remote-checkpoint-corrupt"
    assert finding.details["attempts_by_source"] == {"local": 1, "remote": 1}
    assert finding.severity == "failure"


def test_disk_full_during_the_download():
    text = restored("10,000") + (
        log("12,000", "WARN", "org.apache.flink.runtime.taskmanager.Task", "KeyedProcess (3/8)#0 (18032e) switched "
            "from INITIALIZING to FAILED with failure cause: java.lang.Exception: Exception while creating "
            "StreamOperatorStateContext.")
        + "java.lang.Exception: Exception while creating StreamOperatorStateContext.\n"
        + "Caused by: org.apache.flink.util.FlinkException: Could not restore keyed state backend for "
          "KeyedProcessOperator_ccf5_(3/8) from any of the 1 provided restore options.\n"
        + "Caused by: org.apache.flink.runtime.state.BackendBuildingException: Caught unexpected exception.\n"
        + "Caused by: java.io.IOException: No space left on device\n"
        + "\tat org.apache.flink.contrib.streaming.state.RocksDBStateDownloader.downloadDataForStateHandle(RocksDBStateDownloader.java:142)\n")
    [finding] = detect(text, version="1.14.6")
    assert finding.root_cause.slug == "disk-full"
    ops = next(p for p in finding.patches if p.key == "free the RocksDB disk")
    assert ops.snippet == "df -h /tmp; du -sh /tmp/*"
    [finding] = detect(text, {"state.backend.rocksdb.localdir": "/mnt/ssd1/rocksdb,/mnt/ssd2/rocksdb"})
    ops = next(p for p in finding.patches if p.key == "free the RocksDB disk")
    assert ops.snippet.splitlines() == ["df -h /mnt/ssd1/rocksdb; du -sh /mnt/ssd1/rocksdb/*",
                                        "df -h /mnt/ssd2/rocksdb; du -sh /mnt/ssd2/rocksdb/*"]


def test_a_missing_sst_reported_by_rocksdb_is_this_runbook():
    missing = (f"IO error: No such file or directory: While open a file for random read: {INSTANCE}/db/000212.sst: "
               "No such file or directory")
    [finding] = detect(restored("09,000") + open_failure("10,000", missing) + gave_up("10,010", message=missing))
    assert finding.details["corrupt_files"] == ["000212.sst"]


# ------------------------------------------------------------------------------------------------ not this runbook


@pytest.mark.parametrize("text", [
    # a remote checkpoint file is gone: state-restore-files-missing, not corruption
    gave_up("10,000", message="x").replace(
        "Caused by: java.io.IOException: Error while opening RocksDB instance.\nCaused by: org.rocksdb.RocksDBException: x\n",
        f"Caused by: java.io.FileNotFoundException: /data/ckpt/{JOB}/shared/2f32f38e (No such file or directory)\n"),
    # a restore that worked
    remote_restore(1).split("2026-11-22 02:59:10,300")[0],
    # corruption while the job runs, not on restore
    log("10,000", "WARN", "org.apache.flink.runtime.taskmanager.Task", "map (1/1)#0 (a_b_0_0) switched from RUNNING "
        "to FAILED with failure cause:") + "org.apache.flink.util.FlinkRuntimeException: Error while retrieving data "
        "from RocksDB.\nCaused by: org.rocksdb.RocksDBException: block checksum mismatch: expected 1, got 2  in "
        f"{INSTANCE}/db/000300.sst offset 0 size 4011\n",
])
def test_no_finding(text):
    assert detect(text) == []


# ------------------------------------------------------------------------------------------------ patches


def test_restart_from_the_previous_retained_checkpoint():
    [finding] = detect(remote_restore(), {"state.checkpoints.num-retained": "3"})
    restart = next(p for p in finding.patches if p.key == "restart from an older snapshot")
    assert restart.snippet == f"flink run -s file:/data/ckpt/{JOB}/chk-2 <your job arguments>"
    assert not any(canonical(p.key) == "execution.checkpointing.num-retained" for p in finding.patches)


def test_with_one_retained_checkpoint_the_way_back_is_a_savepoint():
    [finding] = detect(remote_restore())
    restart = next(p for p in finding.patches if p.key == "restart from an older snapshot")
    assert "only one retained" in restart.reason and "<latest savepoint path>" in restart.snippet
    retained = next(p for p in finding.patches if canonical(p.key) == "execution.checkpointing.num-retained")
    assert (retained.current, retained.proposed) == (None, "3")


def test_local_recovery_key_is_rendered_for_the_version():
    [finding] = detect(remote_restore(), {"state.checkpoints.num-retained": "1"})
    local = next(p for p in finding.patches if canonical(p.key) == "execution.state-recovery.from-local")
    assert local.proposed == "true" and "aligned checkpoints" in local.reason
    old = render_config_diff(finding.patches, None, "1.17.2")
    new = render_config_diff(finding.patches, None, "2.0.0")
    assert "+state.backend.local-recovery: true" in old and "+state.checkpoints.num-retained: 3" in old
    assert "+execution.state-recovery.from-local: true" in new and "+execution.checkpointing.num-retained: 3" in new


# ------------------------------------------------------------------------------------------------ helpers


def test_rocksdb_path_helpers():
    assert split_dirs("/a,/b:/c") == ["/a", "/b", "/c"]
    assert split_dirs("file:///a") == ["file:///a"]
    assert strip_scheme("file:///mnt/x") == ("file", "/mnt/x") and strip_scheme("s3://b/x") == ("s3", "b/x")
    assert common_dir("/data/flink/vfat/rocksdb", "/data/flink/vfat/checkpoints") == "/data/flink/vfat"
    assert instance_base(f"{INSTANCE}/db/000210.sst") == "/data/rocksdb"
    assert instance_base(f"/tmp/flink-io-5f0a/job_{JOB}_op_X__1_1__uuid_8a10e29f-e3de-442c-a70f-246bb1b572fb/db") == "/tmp"


# ------------------------------------------------------------------------------------------------ example incidents


def test_genuine_corrupt_checkpoint(spark):
    inc = ingest([str(example(SLUG, "remote-checkpoint-corrupt-v1.20"))], spark)
    assert any("_db_LOG" in w for w in inc.warnings)  # RocksDB's own LOG file is not read as a Flink log
    primary = run_detectors(inc).primary
    assert primary.runbook == SLUG and primary.root_cause.slug == "remote-checkpoint-corrupt"
    assert primary.details["restore_attempts_failed"] == 3
    assert primary.details["restored_checkpoint"].startswith("checkpoint 3 at file:/data/flink/rocksdb-corrupt-1.20.3/ckpt/")


@pytest.mark.parametrize("name", ["near-miss-clean-restore-2.0", "healthy-incremental-1.19"])
def test_clean_restores_give_nothing_from_any_runbook(spark, name):
    assert run_detectors(ingest([str(example(SLUG, name))], spark)).findings == []
