"""Detector task-cancellation-timeout: where the cancelled task was stuck decides the cause; a cancellation that ends
in time is no finding."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_text
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.patches import render_config_diff

SLUG = "task-cancellation-timeout"
TASK = "Map (2/4)#0"
T = "org.apache.flink.runtime.taskmanager.Task"


def _line(ts: str, level: str, logger: str, message: str) -> str:
    return f"2024-06-01 {ts} {level:<5} {logger:<60} [] - {message}"


def _stuck(ts: str, frames: list[str], action: str = "interrupting", secs: int = 30) -> list[str]:
    return [_line(ts, "WARN", T, f"Task '{TASK}' did not react to cancelling signal - {action}; it is stuck for {secs} "
                                  "seconds in method:"), " " + frames[0], *frames[1:], ""]


def _watchdog(ts: str, secs: int = 180) -> list[str]:
    return [_line(ts, "ERROR", "org.apache.flink.runtime.taskexecutor.TaskExecutor",
                  f"Task did not exit gracefully within {secs} + seconds."),
            f"org.apache.flink.util.FlinkRuntimeException: Task did not exit gracefully within {secs} + seconds.",
            "\tat org.apache.flink.runtime.taskmanager.Task$TaskCancelerWatchDog.run(Task.java:1833) [flink-dist-1.20.3.jar:1.20.3]",
            _line(ts, "ERROR", "org.apache.flink.runtime.taskexecutor.TaskManagerRunner",
                  "Terminating TaskManagerRunner with exit code 1.")]


SOCKET = ["java.base@11.0.21/sun.nio.ch.Net.poll(Native Method)",
          "java.base@11.0.21/sun.nio.ch.NioSocketImpl.park(NioSocketImpl.java:181)",
          "java.base@11.0.21/sun.nio.ch.NioSocketImpl.timedRead(NioSocketImpl.java:285)",
          "java.base@11.0.21/java.net.SocketInputStream.read(SocketInputStream.java:182)",
          "com.acme.enrich.GeoClient.lookup(GeoClient.java:88)",
          "com.acme.enrich.EnrichFunction.map(EnrichFunction.java:41)",
          "app//org.apache.flink.streaming.api.operators.StreamMap.processElement(StreamMap.java:38)",
          "app//org.apache.flink.runtime.taskmanager.Task.run(Task.java:575)"]
HDFS_CLOSE = ["java.base@11.0.21/java.lang.Object.wait(Native Method)",
              "app//org.apache.hadoop.hdfs.DataStreamer.waitForAckedSeqno(DataStreamer.java:886)",
              "app//org.apache.hadoop.hdfs.DFSOutputStream.flushOrSync(DFSOutputStream.java:749)",
              "app//org.apache.flink.runtime.fs.hdfs.HadoopRecoverableFsDataOutputStream.sync(HadoopRecoverableFsDataOutputStream.java:126)",
              "app//org.apache.flink.streaming.api.functions.sink.filesystem.OutputStreamBasedPartFileWriter.closeForCommit(OutputStreamBasedPartFileWriter.java:62)",
              "app//org.apache.flink.streaming.runtime.tasks.StreamTask.processInput(StreamTask.java:638)",
              "app//org.apache.flink.runtime.taskmanager.Task.run(Task.java:575)"]


def _detect(lines: list[str], config: dict | None = None, version: str = "1.20.3"):
    return get_detector(SLUG).detect(incident_from_text("\n".join(lines) + "\n", config or {}, version,
                                                        file="flink-taskexecutor.log"))


def test_genuine_interrupts_swallowed_by_the_jobs_retry_loop(spark):
    incident = ingest([str(example(SLUG, "user-code-swallows-interrupts-1.20"))], spark)
    diagnosis = run_detectors(incident)
    assert not [e for e in diagnosis.errors if SLUG in e]
    f = diagnosis.primary
    assert f.runbook == SLUG and f.root_cause.slug == "user-code-ignores-cancellation" and f.confidence >= 0.85
    # the frames Flink printed without "at" are read: the job's own method is named, below Thread.sleep
    assert f.details["stuck_in"].startswith("Thread.sleep <- CancellationJob$EnrichOrders.awaitLookupService")
    assert f.details["job_frames_on_stack"][0] == "scenario.CancellationJob$EnrichOrders.awaitLookupService"
    assert f.details["cancellation_timeout"] == "10 s" and f.details["taskmanager_exited"] is True
    assert "did not exit gracefully within 10 + seconds" in f.evidence[0].text
    assert any("notifying TM" in e.text for e in f.evidence)
    # raising the timeout would only delay the kill: no config change, a code change instead
    assert not [p for p in f.patches if p.target == "flink"]
    code = next(p for p in f.patches if p.target == "code")
    assert "Thread.currentThread().interrupt()" in code.snippet and "awaitLookupService" in code.reason


@pytest.mark.parametrize("name", ["slow-close-timeout-too-low-2.3", "slow-close-timeout-too-low-1.20"])
def test_genuine_slow_close_cut_short_by_a_lowered_timeout(spark, name):
    f = run_detectors(ingest([str(example(SLUG, name))], spark)).primary
    assert f.runbook == SLUG and f.root_cause.slug == "cancellation-timeout-too-low"
    assert f.details["in_close_path"] is True and "EnrichOrders.close" in f.details["stuck_in"]
    timeout = next(p for p in f.patches if p.target == "flink")
    assert (timeout.key, timeout.current, timeout.proposed) == ("task.cancellation.timeout", "10000", "180000")
    assert "task.cancellation.timeout: 180000" in render_config_diff(f.patches, None, f.details.get("version") or "2.3.0")


@pytest.mark.parametrize("name", ["user-code-swallows-interrupts-2.3", "user-code-swallows-interrupts-1.17"])
def test_genuine_swallowed_interrupts_on_other_releases(name):
    f = run_detectors(ingest([str(example(SLUG, name))])).primary
    assert f.runbook == SLUG and f.root_cause.slug == "user-code-ignores-cancellation"


def test_healthy_and_timely_cancellations_give_nothing():
    for name in ("healthy", "near-miss-cancelled-after-interrupts"):
        findings = run_detectors(ingest([str(example(SLUG, name))])).findings
        assert not [f for f in findings if f.runbook == SLUG], name


def test_the_pasted_ticket_names_the_jobs_frame_at_lower_confidence():
    f = run_detectors(ingest([str(example(SLUG, "ticket-excerpt-1.17"))])).primary
    assert f.runbook == SLUG and f.root_cause.slug == "user-code-ignores-cancellation"
    assert f.confidence < 0.85
    assert "the watchdog's message" in f.details["cancellation_timeout_source"]


def test_blocking_socket_read_in_user_code_is_named_as_io():
    [f] = _detect(_stuck("10:00:30,000", SOCKET) + _stuck("10:03:00,000", SOCKET, "notifying TM", 180)
                  + _watchdog("10:03:00,001"))
    assert f.root_cause.slug == "user-code-ignores-cancellation"
    assert f.details["thread_state"] == "blocked in I/O"
    assert f.details["job_frames_on_stack"][0] == "com.acme.enrich.GeoClient.lookup"


def test_default_timeout_and_a_close_that_never_ends_blames_the_code_not_the_timeout():
    frames = ["com.acme.sink.Store.flushAll(Store.java:12)", "com.acme.sink.StoreSink.close(StoreSink.java:30)",
              "app//org.apache.flink.api.common.functions.util.FunctionUtils.closeFunction(FunctionUtils.java:41)",
              "app//org.apache.flink.streaming.runtime.tasks.StreamTask.closeAllOperators(StreamTask.java:1181)"]
    [f] = _detect(_stuck("10:03:00,000", frames, "notifying TM", 180) + _watchdog("10:03:00,001"))
    assert f.root_cause.slug == "user-code-ignores-cancellation"  # 3 min of close is not "a bit slow"
    assert not [p for p in f.patches if p.target == "flink"]


def test_a_thread_blocked_in_a_library_is_not_blamed_on_the_job():
    [f] = _detect(_stuck("10:03:00,000", HDFS_CLOSE, "notifying TM", 180) + _watchdog("10:03:00,001"))
    assert f.root_cause.slug == "blocked-in-framework"
    assert "DataStreamer.waitForAckedSeqno" in f.details["stuck_in"]
    assert any(p.key == "take thread dumps while a cancellation hangs" for p in f.patches)


def test_a_watchdog_without_the_stuck_stack_is_undetermined_and_says_what_to_collect():
    [f] = _detect(_watchdog("10:03:00,001"))
    assert f.root_cause.slug == "undetermined"
    assert "did not react to cancelling signal" in f.summary  # collect next: those warnings
    assert [p.key for p in f.patches] == ["restart the lost TaskManager"]


def test_the_old_wording_up_to_1_12_is_read():
    lines = [_line("10:00:30,000", "WARN", T, f"Task '{TASK}' did not react to cancelling signal for 30 seconds, but "
                                               "is stuck in method:"),
             " com.acme.enrich.EnrichFunction.map(EnrichFunction.java:41)",
             "org.apache.flink.streaming.api.operators.StreamMap.processElement(StreamMap.java:41)", ""] + _watchdog("10:03:00,001")
    [f] = _detect(lines, version="1.12.5")
    assert f.root_cause.slug == "user-code-ignores-cancellation"


def test_warnings_followed_by_canceled_are_no_finding():
    lines = _stuck("10:00:30,000", SOCKET) + [
        _line("10:00:41,000", "INFO", T, "Map (2/4)#0 (9f1e0cc2b3f3e4b3c8c2a1e0f3c4d5e6_cbc357ccb763df2852fee8c4fc7d55f2_1_0) "
                                         "switched from CANCELING to CANCELED.")]
    assert _detect(lines) == []
