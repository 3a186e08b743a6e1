"""Detector checkpoint-metadata-already-exists: who else wrote chk-N, told apart from job ids, restores and runs."""
from __future__ import annotations

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.render.patches import render_config_diff

SLUG = "checkpoint-metadata-already-exists"
ZERO = "0" * 32
CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - "
EG = "org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - "
DISP = "org.apache.flink.runtime.dispatcher.StandaloneDispatcher     [] - "


def _collision(ts: str, cid: int, job: str = ZERO, base: str = "file:/ckpt") -> str:
    return f"""{ts} WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger or complete checkpoint {cid} for job {job}. (0 consecutive failed attempts so far)
org.apache.flink.runtime.checkpoint.CheckpointException: Failure to finalize checkpoint.
\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator.finalizeCheckpoint(CheckpointCoordinator.java:1486) ~[flink-dist-1.18.1.jar:1.18.1]
Caused by: java.io.IOException: Target file {base}/{job}/chk-{cid}/_metadata already exists."""


def _start(ts: str, job: str = ZERO, name: str = "payments", restore: str | None = None) -> str:
    restored = (f"{ts} INFO  {CC}Restoring job {job} from Checkpoint {restore} @ 1700000000000 for {job} located at "
                f"file:/ckpt/{job}/chk-{restore}.") if restore else f"{ts} INFO  {CC}No checkpoint found during restore."
    return f"""{ts} INFO  {DISP}Received JobGraph submission '{name}' ({job}).
{restored}
{ts} INFO  {EG}Job {name} ({job}) switched from state CREATED to RUNNING."""


def _completed(ts: str, cid: int, job: str = ZERO) -> str:
    return (f"{ts} INFO  {CC}Completed checkpoint {cid} for job {job} (1000 bytes, checkpointDuration=90 ms, "
            f"finalizationTime=2 ms).")


def _detect(text, config=None, version="1.18.1", file="jobmanager.log"):
    return get_detector(SLUG).detect(incident_from_text(text, config or {}, version, file=file))


def test_fresh_run_of_a_fixed_job_id_is_a_reused_id():
    text = "\n".join([
        _start("2024-01-01 10:00:00,000"),
        _completed("2024-01-01 10:00:10,000", 1),
        f"2024-01-01 10:00:20,000 INFO  {EG}Job payments ({ZERO}) switched from state RUNNING to CANCELED.",
        f"2024-01-01 10:00:20,100 INFO  org.apache.flink.runtime.checkpoint.StandaloneCompletedCheckpointStore [] - Checkpoint with ID 1 at 'file:/ckpt/{ZERO}/chk-1' not discarded.",
        _start("2024-01-01 10:05:00,000"),
        _collision("2024-01-01 10:05:10,000", 1),
    ])
    [f] = _detect(text, {"state.checkpoints.dir": "file:///ckpt"})
    assert f.root_cause.slug == "job-id-reused"
    assert f.details["retained_checkpoints_seen"] == [1] and f.details["runs_of_job_in_logs"] == 2
    assert "application mode without HA" in f.details["job_id_kind"]
    restore = next(p for p in f.patches if p.key == "restore instead of starting over")
    assert f"-s file:/ckpt/{ZERO}/chk-1" in restore.snippet
    ckpt_dir = next(p for p in f.patches if p.key in ("execution.checkpointing.dir", "state.checkpoints.dir"))
    assert (ckpt_dir.current, ckpt_dir.proposed) == ("file:///ckpt", "file:///ckpt/payments")


def test_restore_then_collision_on_the_next_id_is_restored_behind_newer_checkpoints():
    job = "000000006e6b13320000000000000000"
    text = "\n".join([_start("2023-04-11 09:14:05,000", job, "event-executor", restore="5"),
                      _collision("2023-04-11 09:15:05,000", 6, job)])
    [f] = _detect(text, {"state.checkpoints.num-retained": "10", "kubernetes.cluster-id": "event-executor",
                         "kubernetes.namespace": "pm-stage", "state.checkpoints.dir": "file:///opt/flink/pm/checkpoint"},
                  version="1.16.1")
    assert f.root_cause.slug == "restored-behind-newer-checkpoints"
    assert "derives from the HA cluster id" in f.details["job_id_kind"]
    patches = {p.key: p for p in f.patches}
    # 1.16 reads only the state.checkpoints.* spellings: the patches use them
    assert (patches["state.checkpoints.num-retained"].current,
            patches["state.checkpoints.num-retained"].proposed) == ("10", "1")
    assert patches["state.checkpoints.dir"].proposed == "file:///opt/flink/pm/checkpoint/pm-stage-event-executor"
    assert "separate NFS mounts" in patches["one writer per checkpoint directory"].reason
    old = render_config_diff(f.patches, None, (1, 16))
    assert "+state.checkpoints.num-retained: 1" in old and "+state.checkpoints.dir: file:///opt" in old
    new = render_config_diff(f.patches, None, (1, 20))
    assert "num-retained: 1" in new and "state.checkpoints" not in new


def test_collision_after_own_completed_checkpoints_is_a_concurrent_writer():
    job = "fedcba9876543210fedcba9876543210"
    text = "\n".join([_start("2024-01-01 10:00:00,000", job), _completed("2024-01-01 10:00:30,000", 1, job),
                      _completed("2024-01-01 10:01:00,000", 2, job), _collision("2024-01-01 10:01:30,000", 3, job)])
    [f] = _detect(text)
    assert f.root_cause.slug == "concurrent-writers"
    assert "completed 2 checkpoint(s) of its own" in f.details["why"]
    # nothing in these logs tells the two deployments apart: no made-up directory name
    assert not any(p.key == "execution.checkpointing.dir" for p in f.patches)
    assert any(p.key == "checkpoint directory per deployment" and p.snippet for p in f.patches)


def test_old_local_file_system_wording_and_disabled_job_subdirectories():
    text = """2022-05-19 02:14:07,455 WARN  org.apache.flink.runtime.jobmaster.JobMaster                 [] - Error while processing checkpoint acknowledgement message
org.apache.flink.runtime.checkpoint.CheckpointException: Could not finalize the pending checkpoint 112. Failure reason: Failure to finalize checkpoint.
Caused by: java.nio.file.FileAlreadyExistsException: File already exists: /mnt/flink/checkpoints/chk-112/_metadata"""
    [f] = _detect(text, {"state.checkpoints.create-subdir": "false"}, version="1.12.7")
    assert f.root_cause.slug == "shared-dir-without-job-subdir"
    assert f.details["collisions"] == ["chk-112"]
    # 1.12 has no create-subdir option (it came with 1.19): nothing proposes it, each job gets its own directory
    assert "not read by Flink 1.12.7" in f.details["why"]
    assert "create-subdir" not in render_config_diff(f.patches, None, (1, 12))
    [own] = [p for p in f.patches if p.key == "checkpoint directory per job"]
    assert "flink run -D state.checkpoints.dir=/mnt/flink/checkpoints/<job-name>" in own.snippet


def test_hdfs_wording_and_a_path_wrapped_in_a_ticket():
    hdfs = (f"org.apache.hadoop.fs.FileAlreadyExistsException: /flink/ckpt/{ZERO}/chk-7/_metadata for client "
            f"10.1.2.3 already exists")
    [f] = _detect(hdfs, version=None)
    assert f.details["collisions"] == ["chk-7"] and f.details["job_id"] == ZERO
    wrapped = (f"Caused by: java.io.IOException: Target file file:/opt/flink/pm/checkpoint/{ZERO}/chk-1\n"
               f"/_metadata already exists.")
    [g] = _detect(wrapped, version=None)
    assert g.details["collisions"] == ["chk-1"] and g.root_cause.slug == "job-id-reused"


def test_other_already_exists_errors_are_not_this_runbook():
    text = ("java.nio.file.FileAlreadyExistsException: File already exists: /data/out/part-0-7.csv\n"
            "Caused by: java.io.IOException: Target file s3://bucket/savepoints/savepoint-1/other already exists.")
    assert _detect(text) == []


def test_two_jobmanager_logs_running_the_same_id_are_concurrent_writers(spark):
    inc = ingest([str(example(SLUG, "two-clusters-one-directory"))], spark)
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "concurrent-writers"
    assert "inventory-a/jobmanager.log" in f.details["why"]
    assert f.severity == "warning"  # tolerable-failed-checkpoints 10: the job kept running


def test_genuine_fixed_job_id_incident(spark):
    inc = ingest([str(example(SLUG, "fixed-job-id-resubmitted"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug, primary.severity) == (SLUG, "job-id-reused", "failure")
    notes = " ".join(e.note for e in primary.evidence)
    assert "earlier run" in notes and "retained" in notes and "without restoring" in notes
    # the earlier run is in the rolled .log.1 file
    assert any(e.file.endswith(".log.1") for e in primary.evidence)


def test_near_miss_restored_from_the_retained_checkpoint(spark):
    inc = ingest([str(example(SLUG, "near-miss-fixed-id-restored"))], spark)
    assert run_detectors(inc).findings == []


def _unnamed_deployment_collision(version: str, extra: dict | None = None):
    # Collisions mid-run on a shared directory, no namespace or cluster id to name the deployment by.
    text = "\n".join([_start("2024-01-01 10:00:00,000", restore="5"), _completed("2024-01-01 10:01:00,000", 6),
                      _collision("2024-01-01 10:02:00,000", 7)])
    return _detect(text, {"state.checkpoints.num-retained": "10", **(extra or {})}, version=version)


def test_directory_snippet_uses_the_key_the_version_reads():
    [old] = _unnamed_deployment_collision("1.16.1")
    snippet = next(p for p in old.patches if p.key == "checkpoint directory per deployment").snippet
    assert snippet.startswith("state.checkpoints.dir: ") and "execution.checkpointing.dir" not in snippet
    [new] = _unnamed_deployment_collision("1.20.0")
    assert next(p for p in new.patches if p.key == "checkpoint directory per deployment").snippet.startswith(
        "execution.checkpointing.dir: ")


def test_fewer_retained_checkpoints_are_proposed_for_every_cause():
    reused = "\n".join([_start("2024-01-01 10:05:00,000"), _collision("2024-01-01 10:05:10,000", 1)])
    shared = _collision("2024-01-01 10:05:10,000", 3).replace(f"/{ZERO}/chk-3", "/chk-3")
    cases = {"job-id-reused": _detect(reused, {"state.checkpoints.num-retained": "10"}, version="1.16.1"),
             "shared-dir-without-job-subdir": _detect(shared, {"state.checkpoints.num-retained": "10",
                                                               "state.checkpoints.create-subdir": "false"},
                                                      version="1.16.1"),
             "concurrent-writers": _unnamed_deployment_collision("1.16.1")}
    for cause, [finding] in cases.items():
        assert finding.root_cause.slug == cause
        retained = next(p for p in finding.patches if p.key == "state.checkpoints.num-retained")  # 1.16 name
        assert (retained.current, retained.proposed) == ("10", "1")
        assert "narrows the collisions" in retained.reason


def test_without_a_failover_in_the_logs_the_default_threshold_still_fails_the_job_over():
    text = "\n".join([_start("2024-01-01 10:05:00,000"), _collision("2024-01-01 10:05:10,000", 1)])
    [f] = _detect(text)
    assert "kept running" not in f.summary and "fails over on it" in f.summary
    assert f.severity == "failure"
    [tolerated] = _detect(text + "\n" + _completed("2024-01-01 10:06:10,000", 2),
                          {"execution.checkpointing.tolerable-failed-checkpoints": "3"})
    assert "The job kept running" in tolerated.summary and tolerated.severity == "warning"
    [unknown] = _detect(text, {"execution.checkpointing.tolerable-failed-checkpoints": "3"})
    assert "Whether the job kept running is unknown" in unknown.summary


def _shared_dir_collision(version: str, config: dict):
    text = _collision("2024-01-01 10:05:10,000", 3, base="file:/mnt/flink/checkpoints").replace(f"/{ZERO}/chk-3",
                                                                                                  "/chk-3")
    [f] = _detect(text, config, version=version)
    assert f.root_cause.slug == "shared-dir-without-job-subdir"
    return f


def test_create_subdir_is_proposed_only_to_releases_that_have_it():
    # 1.18 and older always write <dir>/<job-id>/chk-N and do not read the key: no create-subdir for them
    for version in ("1.16.3", "1.18.1"):
        old = _shared_dir_collision(version, {"state.checkpoints.dir": "file:///mnt/flink/checkpoints"})
        assert not any("create-subdir" in p.key for p in old.patches), version
        assert "create-subdir" not in render_config_diff(old.patches, None, version)
        own = next(p for p in old.patches if p.key == "checkpoint directory per job")
        assert f"Flink {version} has no option for job-id sub-directories" in own.reason
    # 1.19 brought state.checkpoints.create-subdir; 1.20 spells it execution.checkpointing.create-subdir
    off = {"state.checkpoints.create-subdir": "false"}
    v119 = _shared_dir_collision("1.19.1", off)
    assert "+state.checkpoints.create-subdir: true" in render_config_diff(v119.patches, None, "1.19.1")
    assert "state.checkpoints.create-subdir is false" in v119.details["why"]
    v120 = _shared_dir_collision("1.20.3", off)
    assert "+execution.checkpointing.create-subdir: true" in render_config_diff(v120.patches, None, "1.20.3")
    assert not any(p.key == "checkpoint directory per job" for p in v119.patches + v120.patches)


def test_a_create_subdir_key_an_old_release_ignores_does_not_name_the_cause():
    # 1.17 ignores the key and writes <dir>/<job-id>/chk-N: the collision is another job id story
    text = "\n".join([_start("2024-01-01 10:05:00,000"), _collision("2024-01-01 10:05:10,000", 1)])
    [f] = _detect(text, {"state.checkpoints.create-subdir": "false"}, version="1.17.2")
    assert f.root_cause.slug == "job-id-reused"


def test_genuine_two_jobs_into_one_directory_without_job_subdirectories(spark):
    primary = run_detectors(ingest([str(example(SLUG, "shared-dir-without-job-subdir-1.20"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "shared-dir-without-job-subdir")
    assert primary.details["collisions"] == ["chk-1", "chk-2", "chk-3"]  # each once, however often it is logged
    subdir = next(p for p in primary.patches if p.target == "flink" and "create-subdir" in p.key)
    assert (subdir.key, subdir.current, subdir.proposed) == ("execution.checkpointing.create-subdir", "false", "true")
