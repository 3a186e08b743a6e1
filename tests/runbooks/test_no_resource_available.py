"""Detector no-resource-available: required slots against what the cluster had and what the job got."""
from __future__ import annotations

from corpus import example, incident_from_text
from corpus import line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.render.patches import render_config_diff

SLUG = "no-resource-available"
JOB = "5bbf26d2496f2ff33a0a134bb6edfea8"
OTHER = "aa11bb22cc33dd44ee55ff6600778899"
RMGR = "org.apache.flink.runtime.resourcemanager.StandaloneResourceManager"
SM = "org.apache.flink.runtime.resourcemanager.slotmanager.FineGrainedSlotManager"
BRIDGE = "org.apache.flink.runtime.jobmaster.slotpool.DeclarativeSlotPoolBridge"
NRA = "org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: Could not acquire the minimum required resources."


def _registered(n: int) -> list[str]:
    return [line("10:00:01,000", f"Registering TaskManager with ResourceID 10.0.0.{i}:4000{i}-aaaaa{i} "
                                 f"(pekko.tcp://flink@10.0.0.{i}:4000{i}/user/rpc/taskmanager_0) at ResourceManager", logger=RMGR)
            for i in range(1, n + 1)]


def _failure(required: int, got_tms: int, got_slots: int, extra: list[str] | None = None) -> list[str]:
    return (extra or []) + [
        line("10:01:00,000", f"Received resource requirements from job {JOB}: [ResourceRequirement{{resourceProfile=ResourceProfile{{UNKNOWN}}, "
                             f"numberOfRequiredSlots={required}}}]", logger=SM),
        line("10:06:00,000", "Could not acquire the minimum required resources, failing slot requests. Acquired: []. Current slot pool status: "
                             f"Registered TMs: {got_tms}, registered slots: {got_slots} free slots: 0", level="WARN", logger=BRIDGE),
        line("10:06:00,010", f"Source (1/{required}) (e5a1_bc76_0_0) switched from SCHEDULED to FAILED on [unassigned resource]."),
        NRA,
    ]


def _detect(text: str, config: dict | None = None, version: str = "1.20.3"):
    return get_detector(SLUG).detect(incident_from_text(text, config, version))


def test_more_parallelism_than_slots_proposes_slots_parallelism_and_taskmanagers_with_numbers():
    text = "\n".join(_registered(2) + _failure(6, 2, 4))
    [f] = _detect(text, {"taskmanager.numberOfTaskSlots": "2", "parallelism.default": "6"})
    assert f.root_cause.slug == "parallelism-exceeds-slots"
    assert (f.details["required_slots"], f.details["cluster_taskmanagers"], f.details["cluster_slots"]) == (6, 2, 4)
    flink = {p.key: p for p in f.patches if p.target == "flink"}
    assert (flink["taskmanager.numberOfTaskSlots"].current, flink["taskmanager.numberOfTaskSlots"].proposed) == ("2", "3")
    assert (flink["parallelism.default"].current, flink["parallelism.default"].proposed) == ("6", "4")
    assert any("run 1 more TaskManager(s) (3 in total)" in p.reason for p in f.patches if p.target == "ops")


def test_enough_slots_in_total_but_held_by_another_job():
    extra = [line("10:00:30,000", f"Received resource requirements from job {OTHER}: [ResourceRequirement{{resourceProfile=ResourceProfile{{UNKNOWN}}, numberOfRequiredSlots=4}}]", logger=SM),
             line("10:01:00,500", f"Could not fulfill resource requirements of job {JOB}. Free slots: 0", level="WARN",
                  logger="org.apache.flink.runtime.resourcemanager.slotmanager.DeclarativeSlotManager")]
    text = "\n".join(_registered(2) + _failure(2, 0, 0, extra))
    [f] = _detect(text, {"taskmanager.numberOfTaskSlots": "2"}, "1.14.6")
    assert f.root_cause.slug == "slots-held-by-other-jobs"
    assert f.details["cluster_free_slots"] == 0 and f.details["required_slots"] == 2
    assert any("stop or move a job, or add 1 TaskManager(s)" in p.reason for p in f.patches)


def test_no_taskmanager_with_the_adaptive_scheduler_raises_the_resource_wait_timeout():
    text = "\n".join([
        line("10:00:00,000", " Starting StandaloneSessionClusterEntrypoint (Version: 1.20.3, Scala: 2.12, Rev:01e3a6d, Date:2025-09-20T02:22:05+02:00)",
             logger="org.apache.flink.runtime.entrypoint.ClusterEntrypoint"),
        line("10:01:00,000", f"Received resource requirements from job {JOB}: [ResourceRequirement{{resourceProfile=ResourceProfile{{UNKNOWN}}, numberOfRequiredSlots=2}}]", logger=SM),
        line("10:01:00,100", "Matching resource requirements against available resources.", logger=SM),
        "Missing resources:", f"\t Job {JOB}", "\t\tResourceRequirement{resourceProfile=ResourceProfile{UNKNOWN}, numberOfRequiredSlots=2}",
        "Current resources:", "\t(none)",
        line("10:01:20,000", "Failed to go from CreatingExecutionGraph to Executing because the ExecutionGraph creation failed.",
             logger="org.apache.flink.runtime.scheduler.adaptive.AdaptiveScheduler"),
        "org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: Not enough resources available for scheduling.",
    ])
    conf = {"jobmanager.scheduler": "adaptive", "jobmanager.adaptive-scheduler.resource-wait-timeout": "20 s"}
    [f] = _detect(text, conf)
    assert f.root_cause.slug == "no-taskmanagers" and f.details["waited"] == "20 s"
    wait = next(p for p in f.patches if p.key == "jobmanager.adaptive-scheduler.resource-wait-timeout")
    assert (wait.current, wait.proposed) == ("20 s", "5 min")


def test_requested_workers_that_never_registered_on_yarn_1_11():
    text = "\n".join([
        line("06:00:00,000", " Starting YarnJobClusterEntrypoint (Version: 1.11.6, Scala: 2.11, Rev:826ec4f, Date:2021-12-14T21:52:39+01:00)",
             logger="org.apache.flink.runtime.entrypoint.ClusterEntrypoint"),
        line("06:00:07,000", "Source: kafka-orders -> Map (1/4) (0000000000000000000000000000a401) switched from CREATED to SCHEDULED."),
        line("06:00:07,100", "Requesting new TaskExecutor container with resource WorkerResourceSpec {cpuCores=2.0}. Number pending workers of this resource is 1.",
             logger="org.apache.flink.yarn.YarnResourceManager"),
        line("06:05:08,000", "Source: kafka-orders -> Map (1/4) (0000000000000000000000000000a401) switched from SCHEDULED to FAILED on not deployed."),
        "java.util.concurrent.CompletionException: java.util.concurrent.CompletionException: java.util.concurrent.TimeoutException",
        "Caused by: org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: Could not allocate the required slot within slot request timeout. Please make sure that the cluster has enough resources.",
    ])
    [f] = _detect(text, {"slot.request.timeout": "300000"}, "1.11.6")
    assert f.root_cause.slug == "workers-not-provisioned" and f.details["required_slots"] == 4
    timeout = next(p for p in f.patches if p.key == "slot.request.timeout")
    assert (timeout.current, timeout.proposed) == ("300000", "600000")  # milliseconds before 1.20
    assert "slot.request.timeout: 600000" in render_config_diff(f.patches, None, "1.11.6")


def test_legacy_scheduler_counts_and_fine_grained_profiles():
    legacy = ("org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: Could not allocate all requires slots "
              "within timeout of 300000 ms. Slots required: 8, slots allocated: 4, previous allocation IDs: [], execution status: completed: Attempt #0")
    [f] = _detect(legacy, {}, "1.9.3")
    assert f.root_cause.slug == "parallelism-exceeds-slots" and f.details["required_slots"] == 8
    profile = "\n".join(_registered(2) + [
        line("10:01:00,000", f"Received resource requirements from job {JOB}: [ResourceRequirement{{resourceProfile=ResourceProfile{{cpuCores=4.0, "
                             "taskHeapMemory=8.000gb (8589934592 bytes)}, numberOfRequiredSlots=1}]", logger=SM),
        line("10:06:00,010", "Source (1/1) (e5a1_bc76_0_0) switched from SCHEDULED to FAILED on [unassigned resource]."), NRA])
    [g] = _detect(profile, {"taskmanager.numberOfTaskSlots": "2"})
    assert g.root_cause.slug == "resource-profile-unfulfillable" and "cpuCores=4.0" in g.details["requested_profile"]


def test_only_the_exception_gives_a_low_confidence_verdict():
    [f] = _detect(NRA)
    assert f.root_cause.slug == "capacity-not-in-logs" and f.confidence < 0.8


def test_missing_resources_during_start_up_are_not_a_failure():
    text = "\n".join([
        line("10:01:00,000", f"Received resource requirements from job {JOB}: [ResourceRequirement{{resourceProfile=ResourceProfile{{UNKNOWN}}, numberOfRequiredSlots=4}}]", logger=SM),
        line("10:01:00,100", "Matching resource requirements against available resources.", logger=SM),
        "Missing resources:", "\t\tResourceRequirement{resourceProfile=ResourceProfile{UNKNOWN}, numberOfRequiredSlots=4}", "Current resources:", "\t(none)",
    ] + _registered(2))
    assert run_detectors(incident_from_text(text)).findings == []


def test_genuine_parallelism_incident(spark):
    inc = ingest([str(example(SLUG, "parallelism-exceeds-slots"))], spark)
    diagnosis = run_detectors(inc)
    primary = diagnosis.primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "parallelism-exceeds-slots")
    assert (primary.details["required_slots"], primary.details["cluster_slots"], primary.details["job_got_slots"]) == (3, 1, 1)
    assert next(p for p in primary.patches if p.key == "taskmanager.numberOfTaskSlots").proposed == "3"
    exhausted = next(f for f in diagnosis.findings if f.runbook == "restart-strategy-exhausted")
    assert exhausted.details["recurring_fault_runbook"] == SLUG


def test_genuine_adaptive_incident(spark):
    inc = ingest([str(example(SLUG, "no-taskmanagers-adaptive"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "no-taskmanagers")
    assert primary.details["cluster_taskmanagers"] == 0 and primary.details["required_slots"] == 2
