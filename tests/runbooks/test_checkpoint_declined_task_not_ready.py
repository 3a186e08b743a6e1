"""Detector checkpoint-declined-task-not-ready: restoring vs finished tasks vs a restart loop, noise collapsed."""
from __future__ import annotations

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.render.patches import render_config_diff

SLUG = "checkpoint-declined-task-not-ready"
JOB = "3c5e7a9b1d0f2e4a6c8b0d2f4a6c8e1f"
EG = "org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - "
CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - "
CFM = "org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - "


def _state(ts: str, old: str, new: str) -> str:
    return f"{ts} INFO  {EG}Job orders ({JOB}) switched from state {old} to {new}."


def _not_executed(ts: str, task: str = "Source: kafka (3/8)") -> str:
    return (f"{ts} INFO  {CFM}Failed to trigger checkpoint for job {JOB} since Checkpoint triggering task {task} of job "
            f"{JOB} is not being executed at the moment. Aborting checkpoint. Failure reason: Not all required tasks "
            f"are currently running..")


def _detect(text, config=None, version="1.17.2"):
    return get_detector(SLUG).detect(incident_from_text(text, config or {}, version))


def test_repeated_aborts_after_a_start_are_tasks_restoring_and_only_a_warning():
    text = "\n".join([_state("2023-10-18 21:05:20,000", "CREATED", "RUNNING")]
                     + [_not_executed(f"2023-10-18 21:0{6 + i}:12,000") for i in range(4)]
                     + [f"2023-10-18 21:11:40,000 INFO  {EG}Source: kafka (3/8) (a_b_2_0) switched from INITIALIZING to RUNNING.",
                        f"2023-10-18 21:12:12,000 INFO  {CC}Completed checkpoint 9 for job {JOB} (100 bytes, checkpointDuration=20000 ms, finalizationTime=2 ms)."])
    [f] = _detect(text, {"execution.checkpointing.interval": "1 min"})
    assert (f.root_cause.slug, f.severity) == ("tasks-restoring", "warning")
    assert f.details["aborted_triggers"] == 4
    assert f.details["longest_not_ready_after_start"] == "380 s"  # job RUNNING 21:05:20 -> last task RUNNING 21:11:40
    assert f.details["tasks"] == ["Source: kafka (3/8)"]
    # a fresh start restores from remote storage: local recovery would not help, so it is not proposed
    assert not any(p.target == "flink" for p in f.patches)


def test_slow_restore_after_a_failover_proposes_local_recovery():
    text = "\n".join([_state("2023-10-18 21:05:00,000", "RUNNING", "RESTARTING"),
                      _state("2023-10-18 21:05:20,000", "RESTARTING", "RUNNING")]
                     + [_not_executed(f"2023-10-18 21:0{6 + i}:12,000") for i in range(3)])
    [f] = _detect(text, {"execution.checkpointing.interval": "1 min"}, version="1.20.0")
    local = next(p for p in f.patches if p.target == "flink")
    assert (local.key, local.proposed) == ("execution.state-recovery.from-local", "true")
    assert "+state.backend.local-recovery: true" in render_config_diff(f.patches, None, (1, 17))


def test_aborts_while_the_job_is_restarting_or_cancelling_are_noise():
    text = "\n".join([_state("2024-01-01 10:00:00,000", "CREATED", "RUNNING"),
                      _state("2024-01-01 10:05:00,000", "RUNNING", "RESTARTING"),
                      _not_executed("2024-01-01 10:05:00,100"),
                      _state("2024-01-01 10:05:05,000", "RESTARTING", "RUNNING"),
                      _state("2024-01-01 10:09:00,000", "RUNNING", "CANCELLING"),
                      _not_executed("2024-01-01 10:09:00,200")])
    assert _detect(text) == []


def test_a_single_abort_right_after_start_is_not_worth_a_finding():
    text = "\n".join([_state("2024-01-01 10:00:00,000", "CREATED", "RUNNING"), _not_executed("2024-01-01 10:00:03,000"),
                      f"2024-01-01 10:01:03,000 INFO  {CC}Completed checkpoint 2 for job {JOB} (100 bytes, checkpointDuration=20 ms, finalizationTime=2 ms)."])
    assert _detect(text) == []


def test_finished_tasks_on_1_14_get_the_flip147_key_of_that_version():
    text = "\n".join([_state("2022-11-03 01:00:10,000", "CREATED", "RUNNING"),
                      f"2022-11-03 01:03:00,000 INFO  {EG}Source: backfill (1/1) (4f6a8c0e) switched from RUNNING to FINISHED."]
                     + [f"2022-11-03 01:0{4 + i}:00,000 INFO  {CFM}Failed to trigger checkpoint for job {JOB} since Some "
                        f"tasks of the job have already finished and checkpointing with finished tasks is not enabled. "
                        f"Failure reason: Not all required tasks are currently running.." for i in range(3)])
    [f] = _detect(text, version="1.14.6")
    assert f.root_cause.slug == "tasks-finished"
    assert any("Source: backfill (1/1) finished" in e.note for e in f.evidence)
    diff = render_config_diff(f.patches, None, (1, 14))
    assert "+execution.checkpointing.checkpoints-after-tasks-finish.enabled: true" in diff
    assert "checkpoints-after-tasks-finish: true" in render_config_diff(f.patches, None, (1, 20))


def test_finished_tasks_before_1_14_ask_for_an_upgrade():
    text = "\n".join([_state("2021-06-01 08:00:00,000", "CREATED", "RUNNING"),
                      f"2021-06-01 08:05:00,000 INFO  {CC}Checkpoint triggering task Source: Custom File Source (1/1) of job "
                      f"{JOB} is not in state RUNNING but FINISHED instead. Aborting checkpoint."])
    [f] = _detect(text, version="1.12.7")
    assert f.root_cause.slug == "tasks-finished"
    assert f.details["task_states_named"] == {"FINISHED": 1}
    assert [p.target for p in f.patches] == ["ops"] and "1.14" in f.patches[0].reason


def test_restart_loop_points_at_the_first_fault():
    lines = []
    for n in range(3):
        m = 10 + n * 2
        lines += [_state(f"2024-01-01 10:{m}:00,000", "CREATED" if n == 0 else "RESTARTING", "RUNNING"),
                  _not_executed(f"2024-01-01 10:{m}:05,000"),
                  f"2024-01-01 10:{m}:30,000 INFO  {EG}map (1/2) (a_b_0_{n}) switched from RUNNING to FAILED on tm-1 @ host (dataPort=1).",
                  "java.lang.OutOfMemoryError: Java heap space",
                  _state(f"2024-01-01 10:{m}:30,100", "RUNNING", "RESTARTING")]
    [f] = _detect("\n".join(lines))
    assert (f.root_cause.slug, f.severity) == ("restart-loop", "warning")
    assert f.details["first_fault"] == "java.lang.OutOfMemoryError: Java heap space"
    assert "OutOfMemoryError" in f.summary and "OutOfMemoryError" in f.evidence[0].text


def test_reported_decline_that_fails_tasks_up_to_1_8(spark):
    inc = ingest([str(example(SLUG, "restart-loop-1.8"))], spark)
    diagnosis = run_detectors(inc)
    f = diagnosis.primary
    assert (f.runbook, f.root_cause.slug, f.severity) == (SLUG, "tasks-restoring", "failure")
    assert f.details["aborted_triggers"] == 3 and f.details["task_failures_from_discarded_checkpoints"] == 3
    code = {p.key: p for p in f.patches if p.target == "code"}
    assert code["ExecutionConfig#setFailTaskOnCheckpointError"].snippet == "env.getConfig().setFailTaskOnCheckpointError(false);"
    # no flink-conf key existed for the interval on 1.7: the interval is proposed in job code, longer than the restore
    assert "env.enableCheckpointing(" in code["StreamExecutionEnvironment#enableCheckpointing"].snippet


def test_example_incidents_without_a_finding(spark):
    for name in ("healthy", "near-miss-finished-with-flip147"):
        inc = ingest([str(example(SLUG, name))], spark)
        assert run_detectors(inc).findings == [], name


def test_one_abort_right_after_a_failover_of_another_cause_is_left_to_that_cause():
    text = "\n".join([_state("2026-11-22 03:03:17,980", "CREATED", "RUNNING"),
                      f"2026-11-22 03:03:21,393 INFO  {EG}map (1/1) (a_b_0_0) switched from RUNNING to FAILED on tm-1 @ host (dataPort=1).",
                      "org.rocksdb.RocksDBException: While link file to /mnt/ckpt/chk-1.tmp/000009.sst: Operation not supported",
                      _state("2026-11-22 03:03:21,433", "RUNNING", "RESTARTING"),
                      _state("2026-11-22 03:03:26,456", "RESTARTING", "RUNNING"),
                      _not_executed("2026-11-22 03:03:26,481"),
                      _state("2026-11-22 03:03:40,884", "RUNNING", "FAILING")])
    assert _detect(text, version="1.20.3") == []
