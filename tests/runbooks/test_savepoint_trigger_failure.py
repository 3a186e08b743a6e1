"""Detector savepoint-trigger-failure: a client that stopped waiting told from a savepoint that failed on the JobManager
(tasks not running, expired, no directory or one it cannot write)."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_files
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors
from flink_runbooks.render.patches import render_config_diff

SLUG = "savepoint-trigger-failure"


def _diagnose(inc):
    diagnosis = run_detectors(inc)
    assert not [e for e in diagnosis.errors if SLUG in e or "rpc-timeout" in e]
    return diagnosis


@pytest.mark.parametrize("name, command", [("stop-client-timeout-1.20", "flink stop"),
                                           ("savepoint-client-timeout-1.20", "flink savepoint"),
                                           ("stop-client-timeout-2.3", "flink stop")])
def test_a_client_that_stopped_waiting_is_told_the_savepoint_went_on(spark, name, command):
    primary = _diagnose(ingest([str(example(SLUG, name))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "client-timeout")
    assert primary.details["command"] == command and primary.details["client_timeout"] == "5 s"
    assert primary.details["savepoint_outcome"] == "completed"
    assert int(primary.details["completed_after_client_gave_up"].split()[0]) >= 10
    assert "TimeoutException" in primary.evidence[0].text
    assert any("Completed checkpoint" in e.text for e in primary.evidence)
    assert "did not fail" in primary.summary
    # look before triggering again, then wait longer or not at all
    keys = [p.key for p in primary.patches]
    assert keys[0] == "confirm the savepoint before triggering again" and primary.patches[0].urgent
    timeout = next(p for p in primary.patches if p.key == "client.timeout")
    assert (timeout.current, timeout.proposed) == ("5 s", "5 min")
    detached = next(p for p in primary.patches if p.key == "trigger the savepoint without waiting")
    assert not detached.urgent and f"{command} -detached" in detached.snippet


def test_a_stop_that_outlived_its_client_still_finished_the_job(spark):
    primary = _diagnose(ingest([str(example(SLUG, "stop-client-timeout-1.20"))], spark)).primary
    assert primary.details["job_state_after"] == "FINISHED" and "FINISHED" in primary.summary


def test_a_frozen_jobmanager_stays_an_rpc_timeout(spark):
    diagnosis = _diagnose(ingest([str(example("rpc-timeout", "frozen-jobmanager-savepoint-1.20"))], spark))
    assert (diagnosis.primary.runbook, diagnosis.primary.root_cause.slug) == ("rpc-timeout", "jobmanager-unresponsive")
    ours = [f for f in diagnosis.findings if f.runbook == SLUG]
    # it took the request up only after the client gave up: never the client's timeout; the trigger then met a
    # job failing over
    assert [f.root_cause.slug for f in ours] == ["tasks-not-running"]


def test_a_savepoint_that_expired_proposes_a_longer_checkpoint_timeout(spark):
    primary = _diagnose(ingest([str(example(SLUG, "savepoint-expired-1.20"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "savepoint-expired")
    assert primary.details["checkpoint_timeout"] == "10 s" and primary.details["savepoint"] == 1
    assert any("expired before completing" in e.text for e in primary.evidence)
    timeout = next(p for p in primary.patches if p.target == "flink")
    assert (timeout.key, timeout.current, timeout.proposed) == ("execution.checkpointing.timeout", "10 s", "5 min")
    assert "execution.checkpointing.timeout: 5 min" in render_config_diff(primary.patches, None, "1.20.3")
    assert not any(p.key == "client.timeout" for p in primary.patches)  # the client did not time out


def test_a_savepoint_while_the_task_initialises_names_its_state(spark):
    primary = _diagnose(ingest([str(example(SLUG, "tasks-not-running-1.20"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "tasks-not-running")
    assert primary.details["task_state"] == "INITIALIZING" and "INITIALIZING" in primary.summary
    assert any("is not being executed at the moment" in e.text for e in primary.evidence)
    assert [p.key for p in primary.patches] == ["trigger once every task is running"]


def test_no_savepoint_directory_proposes_the_key_of_the_release(spark):
    primary = _diagnose(ingest([str(example(SLUG, "dir-not-configured-2.3"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "directory-not-configured")
    assert "execution.checkpointing.savepoint-dir" in primary.summary
    assert {p.key for p in primary.patches} == {"execution.checkpointing.savepoint-dir", "pass a target directory"}


def test_an_unwritable_savepoint_directory_is_named(spark):
    primary = _diagnose(ingest([str(example(SLUG, "dir-not-writable-1.20"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "directory-not-writable")
    assert primary.details["path"].endswith("/shared-savepoints")
    assert [p.key for p in primary.patches] == ["make the savepoint directory writable"]


def test_a_savepoint_that_completed_is_no_finding(spark):
    inc = ingest([str(example(SLUG, "near-miss-savepoint-completed-1.20"))], spark)
    assert any("Savepoint completed. Path:" in ev.text for ev in inc.events)
    assert get_detector(SLUG).detect(inc) == []


def test_an_expired_periodic_checkpoint_is_left_to_the_checkpoint_runbooks(spark):
    inc = ingest([str(example(SLUG, "near-miss-checkpoint-expired-1.20"))], spark)
    assert any("expired before completing" in ev.text for ev in inc.events)
    assert get_detector(SLUG).detect(inc) == []
    assert _diagnose(inc).primary.runbook == "checkpoint-expired"


def test_a_pasted_cli_timeout_alone_is_undetermined_and_no_rpc_timeout(tmp_path):
    cli = ("Triggering savepoint for job c54f5bb507fe7c946b5ed66554c3a028.\nWaiting for response...\n\n"
           "------------------------------------------------------------\n"
           " The program finished with the following exception:\n\n"
           "org.apache.flink.util.FlinkException: Triggering a savepoint for the job c54f5bb507fe7c946b5ed66554c3a028 "
           "failed.\n"
           "\tat org.apache.flink.client.cli.CliFrontend.triggerSavepoint(CliFrontend.java:826)\n"
           "Caused by: java.util.concurrent.TimeoutException\n"
           "\tat java.base/java.util.concurrent.CompletableFuture.timedGet(CompletableFuture.java:1960)\n")
    inc = incident_from_files(tmp_path, {"ticket.txt": cli}, version="1.18.1")
    assert get_detector("rpc-timeout").detect(inc) == []
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "undetermined" and f.confidence <= 0.5
    assert "GET /jobs/<job id>/checkpoints" in f.summary
    assert [p.key for p in f.patches] == ["confirm the savepoint before triggering again"]


def test_before_1_19_the_cli_has_no_detached_savepoint_so_the_rest_api_is_proposed(tmp_path):
    jm = ("2026-11-28 21:56:11,700 INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - Triggering savepoint for "
          "job c54f5bb507fe7c946b5ed66554c3a028.\n"
          "2026-11-28 21:56:11,732 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator [] - Triggering "
          "checkpoint 7 (type=SavepointType{name='Savepoint', postCheckpointAction=NONE, formatType=CANONICAL}) @ "
          "1795902971720 for job c54f5bb507fe7c946b5ed66554c3a028.\n")
    client = ("2026-11-28 21:56:11,500 INFO  org.apache.flink.client.cli.CliFrontend [] - Triggering savepoint for "
              "job c54f5bb507fe7c946b5ed66554c3a028.\n"
              "2026-11-28 21:57:11,520 ERROR org.apache.flink.client.cli.CliFrontend [] - Error while running the "
              "command.\n"
              "org.apache.flink.util.FlinkException: Triggering a savepoint for the job "
              "c54f5bb507fe7c946b5ed66554c3a028 failed.\n"
              "\tat org.apache.flink.client.cli.CliFrontend.triggerSavepoint(CliFrontend.java:826)\n"
              "Caused by: java.util.concurrent.TimeoutException\n"
              "\tat java.base/java.util.concurrent.CompletableFuture.timedGet(CompletableFuture.java:1960)\n")
    inc = incident_from_files(tmp_path, {"log/flink-flink-standalonesession-0-host1.log": jm,
                                         "log/flink-flink-client-host1.log": client}, version="1.18.1")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "client-timeout" and f.details["savepoint_outcome"] == "in progress"
    assert "probably still running" in f.summary
    detached = next(p for p in f.patches if p.key == "trigger the savepoint without waiting")
    assert "-detached" not in detached.snippet and "POST" in detached.snippet and "/savepoints" in detached.snippet
    assert get_detector("rpc-timeout").detect(inc) == []


def test_a_savepoint_that_also_failed_on_the_jobmanager_is_not_called_a_client_timeout(tmp_path):
    job = "5a2b0c6f1e9d4c3b8a7f6e5d4c3b2a19"
    jm = (f"2026-11-28 10:00:01,000 INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - Triggering savepoint for "
          f"job {job}.\n"
          f"2026-11-28 10:00:01,020 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator [] - Triggering "
          f"checkpoint 4 (type=SavepointType{{name='Savepoint', postCheckpointAction=NONE, formatType=CANONICAL}}) @ "
          f"1795852801010 for job {job}.\n"
          f"2026-11-28 10:00:09,500 WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to "
          f"trigger or complete checkpoint 4 for job {job}. (0 consecutive failed attempts so far)\n"
          "org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task checkpoint failed.\n"
          "Caused by: java.io.IOException: Could not flush to file and close the file system output stream\n")
    client = (f"2026-11-28 10:00:00,800 INFO  org.apache.flink.client.cli.CliFrontend [] - Triggering savepoint for "
              f"job {job}.\n"
              "2026-11-28 10:00:05,820 ERROR org.apache.flink.client.cli.CliFrontend [] - Error while running the "
              "command.\n"
              f"org.apache.flink.util.FlinkException: Failed to trigger a savepoint for the job {job}.\n"
              "\tat org.apache.flink.client.cli.CliFrontend.triggerSavepoint(CliFrontend.java:885)\n"
              "Caused by: java.util.concurrent.TimeoutException\n"
              "\tat java.base/java.util.concurrent.CompletableFuture.timedGet(CompletableFuture.java:1960)\n")
    inc = incident_from_files(tmp_path, {"log/flink-flink-standalonesession-0-host1.log": jm,
                                         "log/flink-flink-client-host1.log": client}, version="1.20.3")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "undetermined" and f.details["savepoint_outcome"] == "failed"
    assert "failed on the JobManager" in f.summary and "Could not flush" in f.summary
    assert not any(p.key == "client.timeout" for p in f.patches)  # a longer wait would not have saved it
