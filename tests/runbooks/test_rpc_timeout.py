"""Detector rpc-timeout: an oversized message, a stalled JobManager or an unreachable recipient behind an RPC timeout."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_files
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.patches import render_config_diff

SLUG = "rpc-timeout"


def _diagnose(inc):
    diagnosis = run_detectors(inc)
    assert not [e for e in diagnosis.errors if SLUG in e]
    return diagnosis


@pytest.mark.parametrize("name, key, version", [("oversized-deployment-1.17", "akka.framesize", "1.17.2"),
                                                ("oversized-deployment-2.3", "pekko.framesize", "2.3.0")])
def test_an_oversized_deployment_is_named_with_the_frame_size_key_of_its_version(spark, name, key, version):
    primary = _diagnose(ingest([str(example(SLUG, name))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "payload-over-framesize")
    assert primary.details["frame_size"] == "100 KiB" and primary.details["payload"].startswith("a task deployment")
    assert "OversizedPayloadException: Discarding oversized payload" in primary.evidence[0].text
    frame = next(p for p in primary.patches if p.target == "flink" and "framesize" in p.key)
    assert (frame.key, frame.current, frame.proposed) == (key, "102400b", "10485760b")
    assert next(p for p in primary.patches if p.key == "blob.offload.minsize").proposed == "51200"
    assert any(p.target == "code" and "open(" in p.snippet for p in primary.patches)  # fix the payload, not only the limit
    assert f"{key}: 10485760b" in render_config_diff(primary.patches, None, version)


def test_a_frozen_jobmanager_behind_a_savepoint_timeout(spark):
    diagnosis = _diagnose(ingest([str(example(SLUG, "frozen-jobmanager-savepoint-1.20"))], spark))
    primary = diagnosis.primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "jobmanager-unresponsive")
    assert int(primary.details["jobmanager_silence"].split()[0]) >= 40
    assert "Failed to trigger a savepoint" in primary.evidence[0].text
    assert any("resumes" in e.note for e in primary.evidence)
    patches = {p.key: p for p in primary.patches}
    assert patches["client.timeout"].current == "20 s"
    assert "complement" in patches["pekko.ask.timeout"].reason  # never presented as the fix
    assert list(patches)[0] == "find why the JobManager stalled"


def test_a_cli_savepoint_timeout_with_a_healthy_jobmanager_is_the_client_s_own_timeout(spark):
    # client.timeout 5 s against a 25 s savepoint: the JobManager took the request up at once and completed it after
    # the CLI gave up, its log quiet only while the snapshot ran: no stall, no RPC timeout
    inc = ingest([str(example("savepoint-trigger-failure", "savepoint-client-timeout-1.20"))], spark)
    assert any("Failed to trigger a savepoint" in ev.text and ev.has_exception("TimeoutException") for ev in inc.events)
    assert get_detector(SLUG).detect(inc) == []
    diagnosis = _diagnose(inc)
    assert [(f.runbook, f.root_cause.slug) for f in diagnosis.findings] == [("savepoint-trigger-failure", "client-timeout")]


def test_a_pasted_cli_savepoint_timeout_without_the_jobmanager_s_log_is_not_claimed(tmp_path):
    cli = ("org.apache.flink.util.FlinkException: Failed to trigger a savepoint for the job "
           "c54f5bb507fe7c946b5ed66554c3a028.\n"
           "\tat org.apache.flink.client.cli.CliFrontend.triggerSavepoint(CliFrontend.java:885)\n"
           "Caused by: java.util.concurrent.TimeoutException\n"
           "\tat java.base/java.util.concurrent.CompletableFuture.timedGet(CompletableFuture.java:1960)\n")
    inc = incident_from_files(tmp_path, {"ticket.txt": cli}, version="1.20.3")
    assert get_detector(SLUG).detect(inc) == []
    assert _diagnose(inc).primary.runbook == "savepoint-trigger-failure"


def test_calls_to_a_killed_taskmanager_are_left_to_the_taskmanager_runbooks(spark):
    inc = ingest([str(example(SLUG, "near-miss-taskmanager-killed-1.20"))], spark)
    assert any("RecipientUnreachableException" in ev.text for ev in inc.events)
    assert get_detector(SLUG).detect(inc) == []
    assert _diagnose(inc).primary.runbook == "taskmanager-lost"


def test_healthy_savepoint_is_no_finding(spark):
    inc = ingest([str(example(SLUG, "healthy"))], spark)
    assert get_detector(SLUG).detect(inc) == []


def test_the_old_sender_side_size_check_is_read_from_a_pasted_trace(tmp_path):
    trace = ("org.apache.flink.runtime.jobmaster.JobMasterException: Could not deploy task.\n"
             "Caused by: java.io.IOException: The rpc invocation size 12582912 exceeds the maximum akka framesize.\n"
             "\tat org.apache.flink.runtime.rpc.akka.AkkaInvocationHandler.createRpcInvocationMessage(AkkaInvocationHandler.java:276)\n")
    inc = incident_from_files(tmp_path, {"ticket.txt": trace}, version="1.14.6")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "payload-over-framesize" and f.confidence < 0.9
    frame = next(p for p in f.patches if "framesize" in p.key)
    assert (frame.key, frame.proposed) == ("akka.framesize", "15728640b")  # 12 MiB + a quarter, in the 1.14 key


def test_an_unreachable_resourcemanager_is_a_reachability_problem(tmp_path):
    log = ("2026-11-24 10:00:00,000 WARN  org.apache.flink.runtime.jobmaster.JobMaster [] - Could not request slots.\n"
           "org.apache.flink.runtime.rpc.exceptions.RecipientUnreachableException: Could not send message "
           "[RemoteRpcInvocation(ResourceManagerGateway.declareRequiredResources(JobMasterId, ResourceRequirements, "
           "Time))] from sender [Actor[pekko://flink/temp/jobmanager_2$a]] to recipient "
           "[Actor[pekko.tcp://flink@flink-jm:6123/user/rpc/resourcemanager_0#1]], because the recipient is "
           "unreachable. This can either mean that the recipient has been terminated or that the remote RpcService "
           "is currently not reachable.\n")
    inc = incident_from_files(tmp_path, {"jobmanager.log": log}, version="1.18.1")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "recipient-unreachable"
    assert [p.key for p in f.patches] == ["check the recipient and the network"]


def test_a_bare_ask_timeout_is_undetermined_and_says_what_to_collect(tmp_path):
    trace = ("java.util.concurrent.CompletionException: org.apache.pekko.pattern.AskTimeoutException: Ask timed out on "
             "[Actor[pekko.tcp://flink@10.0.0.9:6122/user/rpc/taskmanager_0#-1]] after [10000 ms]. Message of type "
             "[org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation].\n")
    inc = incident_from_files(tmp_path, {"ticket.txt": trace}, version="1.19.1")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "undetermined" and f.confidence <= 0.5
    assert "GC log" in f.summary and not any(p.target == "flink" for p in f.patches)
