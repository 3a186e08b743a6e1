"""Detector tm-memory-misconfiguration: each constraint told apart, patches that pass Flink's memory model."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.evidence.memory import MemoryConfigError, derive_taskmanager_memory
from flink_runbooks.evidence.memory.incident import deployment_of
from flink_runbooks.render.patches import apply_to_config, render_config_diff

SLUG = "tm-memory-misconfiguration"
P = "taskmanager.memory."
MIB = 1 << 20

# memory-config-invalid-v1.20/cli/cli-start-cluster.out, lines 2-5 and 27-39 (genuine, Flink 1.20.3)
GENUINE_START_FAILURE = """\
Starting standalonesession daemon on host vm.
[ERROR] The execution result is empty.
[ERROR] Could not get JVM parameters and dynamic configurations properly.
[ERROR] Raw output from BashJavaUtils:
INFO  [] - Loading configuration property: taskmanager.memory.managed.fraction, 0.7
Exception in thread "main" org.apache.flink.configuration.IllegalConfigurationException: TaskManager memory configuration failed: Sum of configured Framework Heap Memory (128.000mb (134217728 bytes)), Framework Off-Heap Memory (128.000mb (134217728 bytes)), Task Off-Heap Memory (0 bytes), Managed Memory (546.560mb (573109681 bytes)) and Network Memory (312.320mb (327491256 bytes)) exceed configured Total Flink Memory (780.800mb (818728130 bytes)).
\tat org.apache.flink.runtime.clusterframework.TaskExecutorProcessUtils.processSpecFromConfig(TaskExecutorProcessUtils.java:166)
\tat org.apache.flink.runtime.util.bash.BashJavaUtils.getTmResourceParams(BashJavaUtils.java:88)
Caused by: org.apache.flink.configuration.IllegalConfigurationException: Sum of configured Framework Heap Memory (128.000mb (134217728 bytes)), Framework Off-Heap Memory (128.000mb (134217728 bytes)), Task Off-Heap Memory (0 bytes), Managed Memory (546.560mb (573109681 bytes)) and Network Memory (312.320mb (327491256 bytes)) exceed configured Total Flink Memory (780.800mb (818728130 bytes)).
\tat org.apache.flink.runtime.util.config.memory.taskmanager.TaskExecutorFlinkMemoryUtils.deriveFromTotalFlinkMemory(TaskExecutorFlinkMemoryUtils.java:178)
\t... 3 more
"""
FRACTIONS_OVER_TOTAL = {P + "process.size": "1728m", P + "managed.fraction": "0.7", P + "network.fraction": "0.4",
                        P + "jvm-overhead.fraction": "0.4"}


def _patched_model(inc, finding):
    """What Flink derives once the finding's patches are applied to the incident's configuration."""
    return derive_taskmanager_memory(apply_to_config(finding.patches, inc.config), inc.version_tuple,
                                     deployment=deployment_of(inc))


def test_fractions_over_total_explained_with_the_numbers_and_repaired():
    inc = incident_from_text(GENUINE_START_FAILURE, FRACTIONS_OVER_TOTAL, "1.20.3", file="cli-start-cluster.out")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "fractions-exceed-total" and finding.severity == "failure"
    assert "334m more than there is" in finding.summary
    assert "managed.fraction 0.7 + network.fraction 0.4 = 1.1" in finding.summary
    assert "no TaskManager process ran" in finding.summary
    assert finding.details["model_agrees_with_log"] is True
    assert finding.evidence[0].text.startswith("org.apache.flink.configuration.IllegalConfigurationException: "
                                               "TaskManager memory configuration failed")
    proposed = {p.key: (p.current, p.proposed) for p in finding.patches}
    assert proposed == {P + "managed.fraction": ("0.7", None), P + "network.fraction": ("0.4", None),
                        P + "jvm-overhead.fraction": ("0.4", None)}
    mem = _patched_model(inc, finding)
    assert (mem.task_heap, mem.managed, mem.overhead) == (402653174, 536870920, 192 * MIB)
    assert [row["pool"] for row in finding.details["breakdown_after_patch"]][:2] == ["Total Process Memory",
                                                                                  "Total Flink Memory"]


def test_the_configuration_alone_is_enough_when_the_logs_only_show_no_taskmanager():
    inc = incident_from_text("2026-11-22 03:01:09,100 INFO  org.apache.flink.runtime.resourcemanager."
                             "slotmanager.FineGrainedSlotManager [] - Starting the slot manager.", FRACTIONS_OVER_TOTAL,
                             "1.20.3")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "fractions-exceed-total" and finding.confidence < 0.95
    _patched_model(inc, finding)


def test_explicit_sizes_larger_than_the_process_and_what_would_keep_them():
    conf = {P + "process.size": "2g", P + "task.heap.size": "1g", P + "managed.size": "1g"}
    inc = incident_from_text("", conf, "1.14.6")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "fixed-sizes-exceed-total"
    assert "(task.heap.size 1g, managed.size 1g)" in finding.summary
    assert "must be at least 3129m" in finding.summary
    assert [(p.key, p.proposed) for p in finding.patches] == [(P + "task.heap.size", None)]
    assert _patched_model(inc, finding).process == 2 << 30


def test_network_min_above_the_pre_117_default_max():
    conf = {P + "process.size": "8g", P + "network.min": "2g"}
    old = incident_from_text("", conf, "1.15.4")
    [finding] = get_detector(SLUG).detect(old)
    assert finding.root_cause.slug == "network-range-invalid"
    assert "before Flink 1.17 its default is 1g" in finding.summary
    assert [(p.key, p.proposed) for p in finding.patches] == [(P + "network.max", "2g")]
    assert _patched_model(old, finding).network == 2 << 30
    # since 1.17 the max is unbounded: the same configuration is fine
    assert get_detector(SLUG).detect(incident_from_text("", conf, "1.17.2")) == []


@pytest.mark.parametrize("conf,version,cause", [
    ({P + "process.size": "4g", P + "jvm-overhead.min": "1g", P + "jvm-overhead.max": "512m"}, "1.18.1",
     "jvm-overhead-range-invalid"),
    ({P + "process.size": "4g", P + "flink.size": "3g", P + "jvm-overhead.max": "256m"}, "1.18.1",
     "jvm-overhead-range-invalid"),
    ({"taskmanager.heap.size": "4096m"}, "2.0.0", "no-total-memory"),
    ({P + "process.size": "4g", P + "managed.fraction": "1.5"}, "1.16.3", "invalid-memory-value"),
])
def test_other_constraints_are_named_and_repaired(conf, version, cause):
    inc = incident_from_text("", conf, version)
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == cause
    assert finding.patches and all(p.target == "flink" for p in finding.patches)
    _patched_model(inc, finding)


def test_legacy_heap_on_flink_2_is_explained():
    [finding] = get_detector(SLUG).detect(incident_from_text("", {"taskmanager.heap.size": "4096m"}, "2.0.0"))
    assert "Flink 2.0 removed it" in finding.summary
    assert any(p.key == P + "process.size" and p.proposed == "1728m" for p in finding.patches)


def test_log_message_without_the_configuration_still_names_the_constraint():
    inc = incident_from_text(GENUINE_START_FAILURE, {}, "1.20.3")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "fractions-exceed-total"
    assert [p.target for p in finding.patches] == ["ops"]


def test_jobmanager_memory_errors_are_the_jobmanagers():
    text = ("org.apache.flink.configuration.IllegalConfigurationException: JobManager memory configuration failed: "
            "Sum of the configured JVM Heap Memory (2.000gb (2147483648 bytes)) and the configured Off-heap Memory "
            "(128.000mb (134217728 bytes)) does not match the configured Total Flink Memory (2.000gb (2147483648 "
            "bytes)).")
    inc = incident_from_text(text, {"jobmanager.memory.heap.size": "2g", "jobmanager.memory.off-heap.size": "128m",
                                    "jobmanager.memory.flink.size": "2g"}, "1.16.3")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "jobmanager-memory-invalid"
    assert [(p.key, p.proposed) for p in finding.patches] == [("jobmanager.memory.flink.size", None)]


ROCKSDB_OUTSIDE_BUDGET = {P + "process.size": "1728m", "state.backend": "rocksdb",
                          "state.backend.rocksdb.memory.fixed-per-slot": "924m",
                          "state.backend.rocksdb.memory.managed": "false"}


def test_rocksdb_outside_the_budget_is_a_warning_with_a_budgeted_fix():
    inc = incident_from_text("", ROCKSDB_OUTSIDE_BUDGET, "1.13.6")
    [finding] = get_detector(SLUG).detect(inc)
    assert (finding.root_cause.slug, finding.severity) == ("rocksdb-unmanaged-memory", "warning")
    assert "924m x 1 slot(s) = 924m" in finding.summary and "412m short" in finding.summary
    proposed = {p.key: p.proposed for p in finding.patches}
    assert proposed["state.backend.rocksdb.memory.managed"] == "true"
    assert proposed["state.backend.rocksdb.memory.fixed-per-slot"] is None
    assert proposed[P + "process.size"] == "2217m"
    assert _patched_model(inc, finding).managed >= 924 * MIB


def test_rocksdb_outside_the_budget_with_a_kill_is_a_failure():
    kill = ("2023-12-04 09:41:07,827 INFO  org.apache.flink.runtime.resourcemanager.active.ActiveResourceManager [] - "
            "Worker orders-taskmanager-1-3 is terminated. Diagnostics: Pod terminated, container termination "
            "statuses: [flink-main-container(exitCode=137, reason=OOMKilled, message=null)]")
    conf = {P + "process.size": "4096m", "state.backend.type": "rocksdb", "state.backend.rocksdb.memory.managed": "false"}
    findings = run_detectors(incident_from_text(kill, conf, "1.17.2")).findings
    mine = next(f for f in findings if f.runbook == SLUG)
    assert (mine.root_cause.slug, mine.severity) == ("rocksdb-unmanaged-memory", "failure")
    # the kill itself leads: container-memory-exceeded is the primary finding
    assert findings[0].runbook == "container-memory-exceeded" and findings[0].primary


def test_near_misses_valid_unusual_memory_and_budgeted_rocksdb_give_nothing():
    conf = {P + "process.size": "6g", P + "managed.fraction": "0.25", P + "network.fraction": "0.2",
            P + "network.max": "2g", P + "task.off-heap.size": "512m", P + "jvm-overhead.min": "512m",
            "state.backend": "rocksdb", "state.backend.rocksdb.memory.fixed-per-slot": "256m",
            "taskmanager.numberOfTaskSlots": "2"}
    assert get_detector(SLUG).detect(incident_from_text("", conf, "1.16.3")) == []


def test_a_taskmanager_that_started_proves_the_file_is_not_what_it_loaded():
    started = "INFO  [] - Final TaskExecutor Memory configuration:\n" + "\n".join(
        f"INFO  [] - {line}" for line in derive_taskmanager_memory({P + "process.size": "1728m"}).log_lines()[1:])
    inc = incident_from_text(started, FRACTIONS_OVER_TOTAL, "1.20.3")
    assert get_detector(SLUG).detect(inc) == []


def test_patches_render_into_the_users_file_of_each_generation():
    flat = "".join(f"{k}: {v}\n" for k, v in FRACTIONS_OVER_TOTAL.items())
    old = incident_from_text("", FRACTIONS_OVER_TOTAL, "1.18.1")
    old.config.set_file("flink-conf.yaml", flat, "flat")
    [finding] = get_detector(SLUG).detect(old)
    diff = render_config_diff(finding.patches, old.config, (1, 18))
    assert "-taskmanager.memory.managed.fraction: 0.7" in diff
    assert not [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    nested = ("taskmanager:\n  memory:\n    process:\n      size: 1728m\n    managed:\n      fraction: 0.7\n"
              "    network:\n      fraction: 0.4\n    jvm-overhead:\n      fraction: 0.4\n")
    new = incident_from_text("", FRACTIONS_OVER_TOTAL, "2.0.0")
    new.config.set_file("config.yaml", nested, "nested")
    [finding] = get_detector(SLUG).detect(new)
    diff = render_config_diff(finding.patches, new.config, (2, 0))
    assert "--- a/config.yaml" in diff and "-      fraction: 0.7" in diff and "size: 1728m" not in diff.split("@@")[0]


def test_genuine_incident_fractions_exceed_total(spark):
    inc = ingest([str(example(SLUG, "fractions-exceed-total-v1.20"))], spark)
    diagnosis = run_detectors(inc)
    primary = diagnosis.primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "fractions-exceed-total")
    assert any(e.file.endswith("cli/cli-start-cluster.out") for e in primary.evidence)
    patched = apply_to_config(primary.patches, inc.config)
    with pytest.raises(MemoryConfigError):
        derive_taskmanager_memory(inc.config.as_flat_dict(), inc.version_tuple)
    assert derive_taskmanager_memory(patched, inc.version_tuple).task_heap == 402653174


def test_genuine_healthy_incident(spark):
    inc = ingest([str(example(SLUG, "healthy"))], spark)
    assert get_detector(SLUG).detect(inc) == []


def test_legacy_keys_mixed_with_flip49_and_a_2mb_segment_are_flagged():
    # the configuration of a Flink 1.11 production question: pre-1.10 heap and network keys next to FLIP-49 ones
    from flink_runbooks.parse.config import parse_conf

    path = example(SLUG, "fractions-sum-1.5-kubernetes-v1.11") / "flink-conf.yaml"
    conf = {k: v for k, v, _ in parse_conf(path.read_text(), str(path))}
    [finding] = get_detector(SLUG).detect(incident_from_text("", conf, "1.11.6"))
    assert finding.root_cause.slug == "fractions-exceed-total"  # the refusal is still the verdict
    assert "taskmanager.heap.size (1024m) is the pre-1.10 total, mixed with FLIP-49 keys" in finding.summary
    assert "segment-size is 2mb, 64x the 32 KiB default" in finding.summary
    patches = {p.key: p for p in finding.patches}
    assert patches["taskmanager.memory.segment-size"].proposed is None
    assert patches["taskmanager.heap.size"].proposed is None
    assert patches["taskmanager.memory.flink.size"].proposed == "1024m"  # standalone: heap.size meant Flink memory
    diff = render_config_diff(finding.patches, None, "1.11.6")
    assert "+taskmanager.memory.network.min: 256mb" in diff


def test_a_clean_flip49_configuration_gets_no_legacy_notes():
    [finding] = get_detector(SLUG).detect(incident_from_text("", FRACTIONS_OVER_TOTAL, "1.17.2"))
    assert "Also in this configuration" not in finding.summary
