"""Detector tm-registration-timeout: which side is wrong (the TaskManager's address, the JobManager, the name)."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_files
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.detectors.tm_registration_timeout import duration_ms
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.patches import render_config_diff

SLUG = "tm-registration-timeout"
TIMEOUT_117 = ("org.apache.flink.runtime.taskexecutor.exceptions.RegistrationTimeoutException: Could not register at "
               "the ResourceManager within the specified maximum registration duration 300000 ms. This indicates a "
               "problem with this instance. Terminating now.")


def _primary(inc):
    diagnosis = run_detectors(inc)
    assert not [e for e in diagnosis.errors if SLUG in e]
    return diagnosis.primary


@pytest.mark.parametrize("name, scheme", [("wrong-rpc-port-1.17", "akka"), ("wrong-rpc-port-2.3", "pekko")])
def test_a_wrong_port_is_named_from_both_sides_logs_with_the_jobmanagers_port(spark, name, scheme):
    primary = _primary(ingest([str(example(SLUG, name))], spark))
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "wrong-rpc-address")
    assert primary.details["dialled_address"] == "localhost:6174"
    assert primary.details["jobmanager_rpc_address"] == "localhost:6173"
    port = next(p for p in primary.patches if p.key == "jobmanager.rpc.port")
    # the TaskManager's own value (6174), not the JobManager's file, is what changes
    assert (port.current, port.proposed) == ("6174", "6173") and "TaskManager log" in port.current_source
    assert not any(p.key.startswith("taskmanager.registration") for p in primary.patches)  # never hide the address
    texts = [e.text for e in primary.evidence]
    assert any("RegistrationTimeoutException" in t for t in texts)
    assert any(f"Actor system started at {scheme}.tcp://flink@localhost:6173" in t for t in texts)
    assert "jobmanager.rpc.port: 6173" in render_config_diff(primary.patches, None, "1.17.2")


def test_a_stopped_jobmanager_is_named_and_the_timeout_only_complements_it(spark):
    primary = _primary(ingest([str(example(SLUG, "jobmanager-stopped-1.20"))], spark))
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "jobmanager-not-running")
    notes = " ".join(e.note for e in primary.evidence)
    assert "stopped before" in notes and "address was right" in notes
    keys = [p.key for p in primary.patches]
    assert keys[0] == "start the JobManager and find why it stopped"
    timeout = next(p for p in primary.patches if p.key == "taskmanager.registration.timeout")
    assert timeout.current == "40 s" and timeout.proposed == "5 min" and "complement" in timeout.reason


def test_an_unknown_host_is_a_name_problem_not_a_port_problem(spark):
    primary = _primary(ingest([str(example(SLUG, "unknown-host-1.20"))], spark))
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "address-unresolvable-or-unbound")
    assert "flink-jobmanager.flink.svc" in primary.summary
    assert any("UnknownHostException" in e.text for e in primary.evidence)
    address = next(p for p in primary.patches if p.key == "jobmanager.rpc.address")
    assert address.current == "flink-jobmanager.flink.svc" and address.proposed == "localhost"
    assert not any(p.key == "taskmanager.registration.timeout" for p in primary.patches)


def test_a_taskmanager_that_registers_after_retries_is_not_a_finding(spark):
    inc = ingest([str(example(SLUG, "near-miss-late-jobmanager-1.20"))], spark)
    assert get_detector(SLUG).detect(inc) == []


def test_the_timeout_alone_is_undetermined_and_asks_for_the_jobmanager_log(tmp_path):
    inc = incident_from_files(tmp_path, {"ticket.txt": TIMEOUT_117 + "\n\tat org.apache.flink.runtime.taskexecutor."
                                         "TaskExecutor.registrationTimeout(TaskExecutor.java:1552)\n"})
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "undetermined" and f.confidence <= 0.5
    assert "the JobManager's log" in f.summary and [p.key for p in f.patches] == ["collect the JobManager log"]
    assert f.details["registration_timeout"] == "5 min"


def test_a_loopback_bind_address_is_told_from_a_wrong_address(tmp_path):
    jm = ("2026-11-24 10:00:00,000 INFO  org.apache.flink.runtime.rpc.pekko.PekkoRpcServiceUtils [] - Trying to start "
          "actor system, external address 10.0.0.5:6123, bind address 127.0.0.1:6123.\n"
          "2026-11-24 10:00:01,000 INFO  org.apache.flink.runtime.rpc.pekko.PekkoRpcServiceUtils [] - Actor system "
          "started at pekko.tcp://flink@10.0.0.5:6123\n")
    tm = "".join(
        f"2026-11-24 10:00:{s:02d},000 INFO  org.apache.flink.runtime.taskexecutor.TaskExecutor [] - Could not resolve "
        "ResourceManager address pekko.tcp://flink@10.0.0.5:6123/user/rpc/resourcemanager_*, retrying in 10000 ms: "
        "Could not connect to rpc endpoint under address pekko.tcp://flink@10.0.0.5:6123/user/rpc/resourcemanager_*.\n"
        for s in range(10, 60, 10))
    tm += ("2026-11-24 10:01:00,000 ERROR org.apache.flink.runtime.taskexecutor.TaskExecutor [] - Fatal error occurred "
           "in TaskExecutor pekko.tcp://flink@10.0.0.7:35000/user/rpc/taskmanager_0.\n" + TIMEOUT_117.replace("300000 ms", "PT1M") + "\n")
    inc = incident_from_files(tmp_path, {"flink-flink-standalonesession-0-jm.log": jm,
                                         "flink-flink-taskexecutor-0-tm.log": tm}, version="1.20.3")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "address-unresolvable-or-unbound"
    assert any(p.key == "jobmanager.bind-host" and p.proposed == "0.0.0.0" for p in f.patches)


def test_durations_of_every_generation():
    assert duration_ms("PT40S") == 40000 and duration_ms("300000 ms") == 300000 and duration_ms("PT1M30S") == 90000
