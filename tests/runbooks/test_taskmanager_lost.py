"""Detector taskmanager-lost: which TaskManager went away and why; consequences of memory kills stay secondary."""
from __future__ import annotations

from corpus import example, incident_from_text
from corpus import incident_of, line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.render.patches import render_config_diff

SLUG = "taskmanager-lost"
JOB = "258992144ecf11584769d12759027120"
LOST = "10.0.0.7:35211-7ad2c1"
PEER = "10.0.0.8:41877-0c9e4d"
RMGR = "org.apache.flink.runtime.resourcemanager.StandaloneResourceManager"
TMR = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"


def _jm(loss_lines: list[str], outcome: str = "RESTARTING to RUNNING") -> str:
    lines = [
        line("10:00:01,000", f"Registering TaskManager with ResourceID {LOST} (pekko.tcp://flink@10.0.0.7:35211/user/rpc/taskmanager_0) at ResourceManager", logger=RMGR),
        line("10:00:01,100", f"Registering TaskManager with ResourceID {PEER} (pekko.tcp://flink@10.0.0.8:41877/user/rpc/taskmanager_0) at ResourceManager", logger=RMGR),
        line("10:00:05,000", f"Job fraud-scoring ({JOB}) switched from state CREATED to RUNNING."),
        line("10:05:00,100", f"stateful-map (1/2) (9e1c_857e_0_0) switched from RUNNING to FAILED on {PEER} @ 10.0.0.8 (dataPort=41743)."),
        f"org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException: Connection unexpectedly closed by "
        f"remote task manager '10.0.0.7/10.0.0.7:33113 [ {LOST} ] '. This might indicate that the remote task manager was lost.",
        "\tat org.apache.flink.runtime.io.network.netty.CreditBasedPartitionRequestClientHandler.channelInactive(CreditBasedPartitionRequestClientHandler.java:134) ~[flink-dist-1.20.3.jar:1.20.3]",
        line("10:05:00,110", f"Job fraud-scoring ({JOB}) switched from state RUNNING to RESTARTING."),
        line("10:05:00,120", "source (1/2) (9e1c_bc76_0_0) switched from RUNNING to CANCELING."),
        line("10:05:00,130", "source (2/2) (9e1c_bc76_1_0) switched from RUNNING to CANCELING."),
    ] + loss_lines + [line("10:05:10,000", f"Job fraud-scoring ({JOB}) switched from state {outcome}.")]
    return "\n".join(lines)


UNREACHABLE = [line("10:05:01,000", f"TaskManager with id {LOST} is no longer reachable.", logger=RMGR)]
TM_START = line("10:00:00,500", f"Starting TaskManager with ResourceID: {LOST}", logger=TMR)


def _detect(files, config=None, version="1.20.3"):
    return get_detector(SLUG).detect(incident_of(files, config, version))


def test_a_taskmanager_whose_log_just_ends_was_killed():
    tm = TM_START + "\n" + line("10:04:48,000", "Some late warning", level="WARN")
    [f] = _detect({"jobmanager.log": _jm(UNREACHABLE), "taskmanager-7.log": tm})
    assert f.root_cause.slug == "process-killed"
    assert f.details["lost_taskmanager"] == LOST and f.details["host"] == "10.0.0.7"
    assert f.details["job_outcome"].startswith("recovered")
    assert "no shutdown line" in f.summary and "12 s before the loss" in f.summary
    # the peers' fallout is one count, not separate faults
    assert f.details["follow_on_noise"] == {"tasks cancelled": 2}
    assert any(n.startswith("its own log ends here") for n in (e.note for e in f.evidence))


def test_an_orderly_stop_of_a_busy_taskmanager_is_told_apart():
    jm = _jm([line("10:05:00,050", f"Closing TaskExecutor connection {LOST} because: The TaskExecutor is shutting down.", logger=RMGR)])
    jm = jm.replace("org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException: Connection unexpectedly "
                    f"closed by remote task manager '10.0.0.7/10.0.0.7:33113 [ {LOST} ] '. This might indicate that the remote "
                    "task manager was lost.", "org.apache.flink.util.FlinkExpectedException: The TaskExecutor is shutting down.")
    jm = jm.replace(f"on {PEER} @ 10.0.0.8 (dataPort=41743)", f"on {LOST} @ 10.0.0.7 (dataPort=33113)")
    tm = TM_START + "\n" + line("10:05:00,000", "RECEIVED SIGNAL 15: SIGTERM. Shutting down as requested.", logger=TMR)
    [f] = _detect({"jobmanager.log": jm, "taskmanager-7.log": tm})
    assert f.root_cause.slug == "stopped-while-running"
    assert any(p.target == "ops" and "draining" in p.key for p in f.patches)


def test_all_taskmanagers_of_one_host_lost_together_is_a_node_loss():
    other = "10.0.0.7:40001-aa00bb"
    jm = _jm(UNREACHABLE + [line("10:05:01,500", f"TaskManager with id {other} is no longer reachable.", logger=RMGR)])
    jm = line("10:00:01,050", f"Registering TaskManager with ResourceID {other} (pekko.tcp://flink@10.0.0.7:40001/user/rpc/taskmanager_0) at ResourceManager", logger=RMGR) + "\n" + jm
    [f] = _detect({"jobmanager.log": jm})
    assert f.root_cause.slug == "node-lost"
    assert {d["id"] for d in f.details["lost_taskmanagers"]} == {LOST, other}


def test_a_taskmanager_that_lives_on_without_a_gap_was_cut_off():
    tm = "\n".join([TM_START,
                    line("10:04:58,000", "Association with remote system [pekko.tcp://flink@jm:6123] has failed. Caused by: [java.net.NoRouteToHostException: No route to host]", level="WARN"),
                    line("10:05:03,000", "Association with remote system [pekko.tcp://flink@jm:6123] has failed. Caused by: [java.net.NoRouteToHostException: No route to host]", level="WARN")])
    [f] = _detect({"jobmanager.log": _jm(UNREACHABLE), "taskmanager-7.log": tm})
    assert f.root_cause.slug == "network-partition"
    hb = next(p for p in f.patches if p.key == "heartbeat.timeout")
    assert hb.proposed == "100 s"


def test_a_silent_taskmanager_that_wakes_up_to_its_own_timeouts_was_unresponsive():
    tm = "\n".join([TM_START, line("10:03:50,000", "A warning before the stall", level="WARN"),
                    line("10:05:20,000", "The heartbeat of ResourceManager with id 4f6c timed out.", logger="org.apache.flink.runtime.taskexecutor.TaskExecutor")])
    jm = _jm([line("10:05:01,000", f"The heartbeat of TaskManager with id {LOST} timed out.", logger=RMGR)])
    [f] = _detect({"jobmanager.log": jm, "taskmanager-7.log": tm}, {"heartbeat.timeout": "50000"})
    assert f.root_cause.slug == "tm-unresponsive"
    assert f.details["more_fundamental_runbook"] == "tm-heartbeat-timeout"
    assert next(p for p in f.patches if p.key == "heartbeat.timeout").proposed == "140 s"  # 90 s silence x 1.5


def test_a_memory_kill_before_the_loss_makes_the_memory_runbook_primary():
    kill = [line("10:05:01,000", f"Worker {LOST} is terminated. Diagnostics: Pod terminated, container termination statuses: "
                                 "[flink-main-container(exitCode=137, reason=OOMKilled, message=null)], pod status: Failed(reason=null, message=null)",
                 logger="org.apache.flink.runtime.resourcemanager.active.ActiveResourceManager")]
    inc = incident_of({"jobmanager.log": _jm(kill)}, {"taskmanager.memory.process.size": "4096m"}, "1.17.2")
    [mine] = get_detector(SLUG).detect(inc)
    assert mine.root_cause.slug == "killed-for-memory"
    assert "container-memory-exceeded" in mine.details["more_fundamental_runbook"]
    diagnosis = run_detectors(inc)
    assert diagnosis.primary.runbook != SLUG
    assert get_detector(diagnosis.primary.runbook).layer < get_detector(SLUG).layer


def test_an_out_of_memory_error_in_the_lost_taskmanagers_log_makes_the_oom_runbook_primary():
    tm = "\n".join([TM_START,
                    line("10:04:59,000", "Fatal error occurred while executing the TaskManager. Shutting it down...", level="ERROR", logger=TMR),
                    "java.lang.OutOfMemoryError: Java heap space",
                    "\tat java.util.Arrays.copyOf(Arrays.java:3236) ~[?:1.8.0_372]"])
    inc = incident_of({"jobmanager.log": _jm(UNREACHABLE), "taskmanager-7.log": tm}, {}, "1.20.3")
    [mine] = get_detector(SLUG).detect(inc)
    assert mine.root_cause.slug == "killed-for-memory"
    primary = run_detectors(inc).primary
    assert primary.runbook != SLUG and primary.runbook.startswith("oom")


def test_scale_down_of_an_idle_taskmanager_and_shutdown_after_cancel_give_no_finding_at_all():
    idle = "\n".join([
        line("10:00:05,000", f"Job fraud-scoring ({JOB}) switched from state CREATED to RUNNING."),
        line("10:05:00,050", f"Closing TaskExecutor connection {LOST} because: The TaskExecutor is shutting down.", logger=RMGR),
        line("10:05:10,000", f"Completed checkpoint 7 for job {JOB} (1000 bytes, checkpointDuration=90 ms, finalizationTime=3 ms).",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
    ])
    assert run_detectors(incident_of({"jobmanager.log": idle})).findings == []
    after_cancel = "\n".join([
        line("10:00:05,000", f"Job fraud-scoring ({JOB}) switched from state CREATED to RUNNING."),
        line("10:04:00,000", f"Job fraud-scoring ({JOB}) switched from state CANCELLING to CANCELED."),
        line("10:04:30,000", f"Disconnect TaskExecutor {LOST} because: Stopping JobMaster for job 'fraud-scoring' ({JOB}).",
             logger="org.apache.flink.runtime.jobmaster.JobMaster"),
        line("10:05:00,050", f"Closing TaskExecutor connection {LOST} because: The TaskExecutor is shutting down.", logger=RMGR),
    ])
    assert run_detectors(incident_of({"jobmanager.log": after_cancel})).findings == []


def test_a_pasted_trace_without_the_lost_taskmanagers_log_names_its_address():
    text = ("Caused by: org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException: Connection unexpectedly "
            "closed by remote task manager '/10.244.9.163:46377'. This might indicate that the remote task manager was lost.\n"
            "at org.apache.flink.runtime.io.network.netty.CreditBasedPartitionRequestClientHandler.channelInactive(CreditBasedPartitionRequestClientHandler.java:136)\n")
    [f] = get_detector(SLUG).detect(incident_from_text(text))
    assert f.root_cause.slug == "lost-tm-log-missing" and f.confidence < 0.8
    assert "'10.244.9.163:46377'" in f.summary
    assert any("kubectl logs" in (p.snippet or "") for p in f.patches)
    # nothing says which restart strategy ran: it stays unknown, and no restart budget is proposed against it
    assert "NoRestartBackoffTimeStrategy" not in f.details["restart_strategy"] + f.summary
    assert f.details["restart_strategy"].startswith("an unknown restart strategy")
    assert not any(p.key.startswith("restart-strategy") for p in f.patches)


def test_restart_budget_patch_comes_from_the_current_fixed_delay_and_renders_per_version():
    tm = TM_START + "\n" + line("10:04:48,000", "Some late warning", level="WARN")
    conf = {"restart-strategy": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3", "restart-strategy.fixed-delay.delay": "10 s"}
    [f] = _detect({"jobmanager.log": _jm(UNREACHABLE), "taskmanager-7.log": tm}, conf, "1.16.3")
    flink = {p.key: p for p in f.patches if p.target == "flink"}
    # 1.16 reads "restart-strategy" (".type" arrived in 1.17): the patch itself is spelled that way
    assert flink["restart-strategy"].current == "fixed-delay" and flink["restart-strategy"].proposed == "exponential-delay"
    assert flink["restart-strategy.exponential-delay.initial-backoff"].proposed == "10 s"
    assert "restart-strategy: exponential-delay" in render_config_diff(f.patches, None, "1.16.3")
    assert "restart-strategy.type: exponential-delay" in render_config_diff(f.patches, None, "1.20.3")


def test_a_killed_container_on_kubernetes_gets_more_jvm_overhead():
    jm = line("10:00:00,000", " Starting KubernetesApplicationClusterEntrypoint (Version: 1.17.2, Scala: 2.12, Rev:c0027e5, Date:2023-11-09T13:24:38+01:00)",
              logger="org.apache.flink.runtime.entrypoint.ClusterEntrypoint") + "\n" + _jm(UNREACHABLE)
    tm = TM_START + "\n" + line("10:04:48,000", "Some late warning", level="WARN")
    [f] = _detect({"jobmanager.log": jm, "taskmanager-7.log": tm}, {"taskmanager.memory.process.size": "4096m"}, "1.17.2")
    assert f.root_cause.slug == "process-killed"
    flink = {p.key: p.proposed for p in f.patches if p.target == "flink"}
    # 10 % of 4096m = 409.6m of overhead, +50 % = 615m; the process grows by the same amount
    assert flink["taskmanager.memory.jvm-overhead.min"] == "615m"
    assert flink["taskmanager.memory.process.size"] == "4302m"


def test_genuine_kill_9_incident(spark):
    inc = ingest([str(example(SLUG, "process-killed-kill9"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "process-killed")
    assert primary.details["lost_taskmanager"] == "localhost:38343-eda636"
    assert primary.details["how_the_jobmanager_learnt"] == "unreachable"
    assert primary.details["own_log"].endswith("flink-flink-taskexecutor-1-vm.log")
    assert primary.details["follow_on_noise"]["tasks cancelled"] >= 4


def test_genuine_healthy_incident(spark):
    assert get_detector(SLUG).detect(ingest([str(example(SLUG, "healthy"))], spark)) == []


def test_preferring_checkpoints_over_savepoints_for_recovery_is_flagged():
    # a Flink 1.11 production question: TaskManagers restart while the job prefers checkpoints for recovery
    text = ("Caused by: org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException: Connection unexpectedly "
            "closed by remote task manager '/10.244.9.163:46377'. This might indicate that the remote task manager was lost.\n")
    conf = {"execution.checkpointing.prefer-checkpoint-for-recovery": "true"}
    [f] = get_detector(SLUG).detect(incident_from_text(text, conf, "1.11.6"))
    assert "even when a newer savepoint exists" in f.summary and "removed it in 1.14" in f.summary
    drop = next(p for p in f.patches if p.key == "execution.checkpointing.prefer-checkpoint-for-recovery")
    assert drop.proposed is None and drop.current == "true"
    [clean] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.11.6"))
    assert "newer savepoint" not in clean.summary
