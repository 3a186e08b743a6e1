"""Detector tm-heartbeat-timeout: frozen, dead, cut off or a stalled JobManager, told apart by the TaskManager's log."""
from __future__ import annotations

from corpus import example, incident_from_text
from corpus import incident_of, line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.render.patches import render_config_diff

SLUG = "tm-heartbeat-timeout"
JOB = "6f021f75050bb3362b41d8b22c01d3e7"
TM1, TM2, TM3 = "10.0.1.1:40001-aaaaaa", "10.0.2.2:40002-bbbbbb", "10.0.3.3:40003-cccccc"
RMGR = "org.apache.flink.runtime.resourcemanager.StandaloneResourceManager"
TE = "org.apache.flink.runtime.taskexecutor.TaskExecutor"


def _registrations(*tms: str) -> list[str]:
    return [line("10:00:01,000", f"Registering TaskManager with ResourceID {tm} (pekko.tcp://flink@{tm.split(':')[0]}:"
                                 f"{tm.split(':')[1].split('-')[0]}/user/rpc/taskmanager_0) at ResourceManager", logger=RMGR)
            for tm in tms]


def _timeout(ts: str, tm: str, failing: bool = True) -> list[str]:
    out = [line(ts + ",000", f"The heartbeat of TaskManager with id {tm} timed out.", logger=RMGR)]
    if failing:
        out += [line(ts + ",005", f"map (1/2) (c07c_bc76_1_0) switched from RUNNING to FAILED on {tm} @ {tm.split(':')[0]} (dataPort=41131)."),
                f"java.util.concurrent.TimeoutException: The heartbeat of TaskManager with id {tm} timed out.",
                "\tat org.apache.flink.runtime.resourcemanager.ResourceManager$TaskManagerHeartbeatListener.notifyHeartbeatTimeout(ResourceManager.java:1466) ~[flink-dist-1.20.3.jar:1.20.3]"]
    return out


def _jm(*parts: list[str]) -> str:
    body = _registrations(TM1, TM2, TM3) + [line("10:00:05,000", f"Job fraud-scoring ({JOB}) switched from state CREATED to RUNNING.")]
    for p in parts:
        body += p
    return "\n".join(body)


def _tm(tm: str, *extra: str) -> str:
    return "\n".join([line("10:00:00,500", f"Starting TaskManager with ResourceID: {tm}",
                           logger="org.apache.flink.runtime.taskexecutor.TaskManagerRunner"), *extra])


def _detect(files, config=None, version="1.20.3"):
    return get_detector(SLUG).detect(incident_of(files, config, version))


def test_silence_then_its_own_timeouts_is_a_frozen_jvm_and_gets_a_longer_timeout():
    tm = _tm(TM1, line("10:03:50,000", "last words", level="WARN"),
             line("10:05:20,000", "The heartbeat of ResourceManager with id 4f6c timed out.", logger=TE))
    [f] = _detect({"jobmanager.log": _jm(_timeout("10:05:01", TM1)), "taskmanager-1.log": tm}, {"heartbeat.timeout": "50 s"})
    assert f.root_cause.slug == "gc-pause-or-freeze" and f.severity == "failure"
    assert f.details["own_log_silence_s"] == 90.0 and f.details["heartbeat_timeout"] == "50 s"
    hb = next(p for p in f.patches if p.key == "heartbeat.timeout")
    assert (hb.current, hb.proposed) == ("50 s", "140 s")
    assert "heartbeat.timeout: 140 s" in render_config_diff(f.patches, None, "1.20.3")


def test_a_gc_pause_in_the_taskmanagers_output_is_the_cause_and_sizes_the_timeout():
    tm = _tm(TM1, "2024-03-01T10:04:00.120+0000: 237.920: [Full GC (Ergonomics) [PSYoungGen: 195584K->112004K(195584K)] "
                  "640985K->557403K(641024K), 75.2345678 secs] [Times: user=118.20 sys=0.90, real=75.23 secs]")
    [f] = _detect({"jobmanager.log": _jm(_timeout("10:05:01", TM1)), "taskmanager-1.log": tm}, {}, "1.14.6")
    assert f.root_cause.slug == "gc-pause-or-freeze" and f.details["longest_gc_pause_s"] == 75.2
    hb = next(p for p in f.patches if p.key == "heartbeat.timeout")
    assert hb.proposed == "120000"  # 1.14 reads milliseconds; 1.5 x 75 s rounded up to 10 s
    assert any("GC pause" in e.note for e in f.evidence)


def test_a_log_that_just_ends_is_a_dead_process_and_the_timeout_is_left_alone():
    tm = _tm(TM1, line("10:04:02,000", "RocksDB write stall", level="WARN"))
    [f] = _detect({"jobmanager.log": _jm(_timeout("10:05:01", TM1)), "taskmanager-1.log": tm})
    assert f.root_cause.slug == "process-died"
    assert not any(p.key == "heartbeat.timeout" for p in f.patches)


def test_taskmanagers_on_other_hosts_timing_out_together_while_logging_on_is_a_network_partition():
    jm = _jm(_timeout("10:05:01", TM2), _timeout("10:05:02", TM3, failing=False),
             [line("10:05:05,000", f"Completed checkpoint 9 for job {JOB} (1000 bytes, checkpointDuration=90 ms, finalizationTime=3 ms).",
                   logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator")])
    tm2 = _tm(TM2, *[line(f"10:0{m}:{s}0,000", "Association with remote system [pekko.tcp://flink@jm:6123] has failed. Caused by: [java.net.NoRouteToHostException: No route to host]", level="WARN")
                     for m, s in ((4, 3), (4, 4), (4, 5), (5, 0), (5, 1))])
    [f] = _detect({"jobmanager.log": jm, "taskmanager-2.log": tm2})
    assert f.root_cause.slug == "network-partition"
    assert f.details["timed_out_together"] == 2 and f.details["registered_taskmanagers"] == 3


def test_every_taskmanager_timing_out_after_a_jobmanager_gap_is_a_stalled_jobmanager():
    jm = "\n".join(_registrations(TM1, TM2) + [
        line("10:00:05,000", f"Job fraud-scoring ({JOB}) switched from state CREATED to RUNNING."),
        line("10:04:00,000", f"Completed checkpoint 8 for job {JOB} (1000 bytes, checkpointDuration=90 ms, finalizationTime=3 ms).",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator")]
        + _timeout("10:05:01", TM1) + _timeout("10:05:02", TM2, failing=False))
    [f] = _detect({"jobmanager.log": jm}, {"jobmanager.memory.process.size": "1600m"})
    assert f.root_cause.slug == "jobmanager-unresponsive"
    assert next(p for p in f.patches if p.key == "jobmanager.memory.process.size").proposed == "2400m"


def test_dropped_messages_for_a_non_local_recipient_is_an_address_mismatch():
    jm = _jm([line("10:04:55,000", "dropping message [class org.apache.pekko.actor.ActorSelectionMessage] for non-local recipient "
                                   "[Actor[pekko.tcp://flink@flink-jobmanager:6123/]] arriving at [pekko.tcp://flink@flink-jobmanager:6123] "
                                   "inbound addresses are [pekko.tcp://flink@10.0.0.5:6123]", level="WARN",
                   logger="org.apache.pekko.remote.EndpointWriter")], _timeout("10:05:01", TM1))
    [f] = _detect({"jobmanager.log": jm})
    assert f.root_cause.slug == "rpc-address-mismatch"


def test_without_the_taskmanagers_log_the_cause_stays_open_and_an_idle_timeout_is_a_warning():
    [f] = _detect({"jobmanager.log": _jm(_timeout("10:05:01", TM1, failing=False))})
    assert f.root_cause.slug == "tm-log-missing" and f.severity == "warning" and f.confidence < 0.8


def test_a_pasted_timeout_without_timestamps_is_reported():
    text = ("java.util.concurrent.TimeoutException: Heartbeat of TaskManager with id container_e07_1690000000000_0042_01_000002 timed out.\n"
            "\tat org.apache.flink.runtime.jobmaster.JobMaster$TaskManagerHeartbeatListener.notifyHeartbeatTimeout(JobMaster.java:1299)\n")
    [f] = get_detector(SLUG).detect(incident_from_text(text))
    assert f.root_cause.slug == "tm-log-missing"
    assert f.details["timed_out_taskmanager"] == "container_e07_1690000000000_0042_01_000002"


def test_the_taskmanagers_own_heartbeat_lines_alone_are_not_this_runbook():
    tm = _tm(TM1, line("10:05:20,000", "The heartbeat of ResourceManager with id 4f6c timed out.", logger=TE),
             line("10:05:20,100", "The heartbeat of JobManager with id 2221 timed out.", logger=TE))
    assert _detect({"taskmanager-1.log": tm}) == []
    debug = "\n".join([line("10:00:10,000", f"Received heartbeat from {TM1}.", level="DEBUG",
                            logger="org.apache.flink.runtime.heartbeat.HeartbeatManagerImpl")] * 3)
    assert run_detectors(incident_from_text(debug)).findings == []


def test_genuine_frozen_jvm_incident(spark):
    inc = ingest([str(example(SLUG, "frozen-jvm"))], spark)
    diagnosis = run_detectors(inc)
    primary = diagnosis.primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "gc-pause-or-freeze")
    assert primary.details["timed_out_taskmanager"] == "localhost:39497-b02aeb"
    assert primary.details["own_log_silence_s"] == 85.0 and primary.details["rpc_timeouts_before"] >= 1
    assert next(p for p in primary.patches if p.key == "heartbeat.timeout").proposed == "130 s"
    lost = next(f for f in diagnosis.findings if f.runbook == "taskmanager-lost")
    assert not lost.primary and lost.root_cause.slug == "tm-unresponsive"


def test_a_jobmanager_frozen_past_the_timeout_is_told_from_a_network_partition(spark):
    # genuine 1.20.3 logs: the JobManager stopped (SIGSTOP) for 47 s; the TaskManager logged on and timed out on it
    frozen = run_detectors(ingest([str(example("rpc-timeout", "frozen-jobmanager-savepoint-1.20"))], spark))
    [finding] = [f for f in frozen.findings if f.runbook == "tm-heartbeat-timeout"]
    assert finding.root_cause.slug == "jobmanager-unresponsive" and "silent for 47 s" in finding.summary
    # a partition between data centres: the JobManager's log is quiet, but does not resume right at the timeout
    partition = run_detectors(ingest([str(example("tm-heartbeat-timeout", "network-partition-1.13"))], spark))
    assert partition.primary.root_cause.slug == "network-partition"
