"""Detector container-memory-exceeded: which memory went past the container, and the budget it needs."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.evidence.memory import derive_taskmanager_memory
from flink_runbooks.evidence.memory.incident import apply_changes, deployment_of, user_memory_config
from flink_runbooks.render.patches import render_config_diff

SLUG = "container-memory-exceeded"
P = "taskmanager.memory."
MIB = 1 << 20
C3 = "container_e27_1614950323671_0419_01_000003"


def yarn_kill(over: int, usage: str, limit: str = "2 GB", kind: str = "PHYSICAL", container: str = C3) -> str:
    return (f"2021-03-08 21:17:46,792 INFO  org.apache.flink.runtime.resourcemanager.active.ActiveResourceManager [] - "
            f"Worker {container} is terminated. Diagnostics: Container {container} marked as failed.\n"
            f" Exit code:-104.\n Diagnostics: [2021-03-08 21:17:44.187]Container [pid=28814,containerID={container}] "
            f"is running {over}B beyond the '{kind}' memory limit. Current usage: {usage} of {limit} physical memory "
            f"used; 4.3 GB of 4.2 GB virtual memory used. Killing container.\n"
            f"[2021-03-08 21:17:44.201]Container killed on request. Exit code is 143\n")


OOMKILLED = ("2023-12-04 09:41:07,827 INFO  org.apache.flink.runtime.resourcemanager.active.ActiveResourceManager [] - "
             "Worker orders-taskmanager-1-3 is terminated. Diagnostics: Pod terminated, container termination "
             "statuses: [flink-main-container(exitCode=137, reason=OOMKilled, message=null)], pod status: "
             "Failed(reason=null, message=null)")
DESCRIBE = """\
Name:             flink-taskmanager-7c9d8b6f5-q4wz8
    Last State:     Terminated
      Reason:       OOMKilled
      Exit Code:    137
    Limits:
      cpu:     2
      memory:  3Gi
"""


def _after(inc, finding):
    changes = {p.key: p.proposed for p in finding.patches if p.target == "flink"}
    return derive_taskmanager_memory(apply_changes(user_memory_config(inc), changes), inc.version_tuple,
                                     deployment=deployment_of(inc))


def test_small_overhead_grows_by_the_observed_excess_with_margin():
    inc = incident_from_text(yarn_kill(500 * MIB, "2.5 GB"), {P + "process.size": "2048m"}, "1.12.7")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "jvm-overhead-too-small"
    assert "2548m used of a 2g limit" in finding.summary  # the exact byte count, not YARN's rounded "2.5 GB"
    proposed = {p.key: p.proposed for p in finding.patches}
    # 500m over x 1.5 = 750m, in 64m steps 768m, on top of the 204.8m overhead
    assert proposed[P + "jvm-overhead.min"] == "973m"
    after, before = _after(inc, finding), derive_taskmanager_memory({P + "process.size": "2048m"}, (1, 12))
    assert after.overhead >= before.overhead + 768 * MIB - MIB
    assert all(getattr(after, pool) >= getattr(before, pool) for pool in ("task_heap", "managed", "network"))
    assert proposed[P + "process.size"] == f"{after.process // MIB}m"


def test_a_tiny_excess_still_gets_a_useful_minimum():
    inc = incident_from_text(yarn_kill(6295552, "2.0 GB"), {P + "process.size": "2048m"}, "1.12.7")
    [finding] = get_detector(SLUG).detect(inc)
    proposed = {p.key: p.proposed for p in finding.patches}
    assert proposed[P + "jvm-overhead.min"] == "461m"  # 204.8m + the 256m minimum growth


def test_virtual_memory_check_is_a_cluster_side_fix():
    text = yarn_kill(400 * MIB, "1.1 GB", kind="VIRTUAL").replace("4.3 GB of 4.2 GB", "4.6 GB of 4.2 GB")
    inc = incident_from_text(text, {P + "process.size": "2048m"}, "1.12.7")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "yarn-virtual-memory-check"
    [ops] = finding.patches
    assert ops.target == "ops" and "yarn.nodemanager.vmem-check-enabled" in ops.snippet
    assert "<value>2.8</value>" in ops.snippet  # (4.2g + 400m) / 2g = 2.3 virtual per physical, x 1.2, rounded up


def test_container_limit_below_the_process_size():
    inc = incident_from_text(DESCRIBE, {P + "process.size": "4096m"}, "1.18.1", file="kubectl-describe.txt")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "container-smaller-than-process"
    proposed = {p.key: p.proposed for p in finding.patches if p.target == "flink"}
    assert proposed == {P + "process.size": "3072m"}
    assert any(p.target == "ops" and "memory: 4096Mi" in p.snippet for p in finding.patches)
    assert _after(inc, finding).process == 3 << 30


def test_rocksdb_unmanaged_is_fixed_by_bounding_rocksdb_not_by_more_overhead():
    conf = {P + "process.size": "4096m", "state.backend.type": "rocksdb", "state.backend.rocksdb.memory.managed": "false"}
    inc = incident_from_text(OOMKILLED, conf, "1.17.2")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "rocksdb-native-memory"
    assert [(p.key, p.current, p.proposed) for p in finding.patches] == [
        ("state.backend.rocksdb.memory.managed", "false", "true")]
    assert "bounded by nothing" in finding.summary


def test_default_overhead_on_a_big_taskmanager_grows_by_half_when_the_platform_gives_no_usage():
    inc = incident_from_text(OOMKILLED, {P + "process.size": "8g"}, "2.0.0")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "jvm-overhead-too-small"
    proposed = {p.key: p.proposed for p in finding.patches if p.target == "flink"}
    assert proposed[P + "jvm-overhead.min"] == "1268m"  # 819.2m + half of it, in 64m steps
    assert _after(inc, finding).overhead >= 1268 * MIB - MIB


def test_an_overhead_already_raised_points_at_native_memory_and_glibc_arenas():
    conf = {P + "process.size": "8g", P + "jvm-overhead.fraction": "0.2", P + "jvm-overhead.max": "2g"}
    inc = incident_from_text(OOMKILLED, conf, "2.0.0")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "native-memory-outside-budget"
    assert "already raised above Flink's defaults" in finding.summary
    proposed = {p.key: p.proposed for p in finding.patches if p.target == "flink"}
    assert proposed[P + "jvm-overhead.min"] == "2471m"  # 1638.4m + half of it, in 64m steps
    assert any(p.target == "ops" and "MALLOC_ARENA_MAX" in p.key for p in finding.patches)
    assert _after(inc, finding).overhead >= 2471 * MIB - MIB


def test_eviction_and_jobmanager_kills_are_told_apart():
    evicted = ("2024-01-02 10:00:00,000 WARN  kubelet [] - The node was low on resource: memory. Container "
               "flink-main-container was using 5Gi, which exceeds its request of 4Gi.")
    [finding] = get_detector(SLUG).detect(incident_from_text(evicted, {P + "process.size": "4g"}, "1.17.2"))
    assert finding.root_cause.slug == "node-memory-pressure-eviction"
    jm = yarn_kill(300 * MIB, "2.3 GB", container="container_e27_1614950323671_0419_01_000001")
    inc = incident_from_text(jm, {"jobmanager.memory.process.size": "2048m", P + "process.size": "4g"}, "1.16.3")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "jobmanager-container"
    proposed = {p.key: p.proposed for p in finding.patches}
    assert proposed["jobmanager.memory.jvm-overhead.min"] == "716m"  # 204.8m + 300m x 1.5 in 64m steps (512m)
    assert proposed["jobmanager.memory.process.size"] == "2560m"


def test_exit_codes_alone_and_planned_stops_are_not_memory_kills():
    planned = ("2023-08-15 23:30:06,953 INFO  org.apache.flink.runtime.resourcemanager.active.ActiveResourceManager "
               "[] - Worker container_e08_1691990000000_0011_01_000002 is terminated. Diagnostics: Container "
               "container_e08_1691990000000_0011_01_000002 marked as failed.\n Exit code:143.\n Diagnostics: "
               "Container killed by the ApplicationMaster.\nContainer killed on request. Exit code is 143\n"
               "2023-08-15 23:30:07,001 INFO  org.apache.flink.yarn.YarnTaskExecutorRunner [] - RECEIVED SIGNAL 15: "
               "SIGTERM. Shutting down as requested.")
    sigkill = OOMKILLED.replace("reason=OOMKilled", "reason=Error")
    for text in (planned, sigkill):
        assert get_detector(SLUG).detect(incident_from_text(text, {P + "process.size": "4g"}, "1.16.3")) == []


def test_an_oomkilled_without_any_configuration_names_no_cause_and_says_what_to_collect():
    [finding] = get_detector(SLUG).detect(incident_from_text(OOMKILLED))
    # nothing shows the overhead at its defaults or RocksDB bounded: no cause is named
    assert finding.root_cause.slug == "undetermined" and finding.confidence < 0.5
    assert [p.target for p in finding.patches] == ["ops"]
    assert "Collect next: the flink-conf.yaml / config.yaml" in finding.summary
    assert "kubectl describe pod" in finding.summary and "VM.native_memory summary" in finding.summary
    assert "JVM overhead at its defaults" not in finding.summary


@pytest.mark.parametrize("version,spelled", [((1, 12), "+++ b/flink-conf.yaml"), ((2, 0), "+++ b/config.yaml")])
def test_patch_renders_per_file_generation(version, spelled):
    inc = incident_from_text(yarn_kill(500 * MIB, "2.5 GB"), {P + "process.size": "2048m"},
                             ".".join(map(str, version)))
    [finding] = get_detector(SLUG).detect(inc)
    diff = render_config_diff(finding.patches, None, version)
    assert spelled in diff and "taskmanager.memory.jvm-overhead.min: 973m" in diff


def test_example_yarn_kill_through_spark(spark):
    inc = ingest([str(example(SLUG, "yarn-physical-overhead-v1.12"))], spark)
    diagnosis = run_detectors(inc)
    primary = diagnosis.primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "jvm-overhead-too-small")
    assert "killed a container for physical memory" in primary.summary
    assert {p.key: p.proposed for p in primary.patches} == {P + "jvm-overhead.min": "461m",
                                                            P + "process.size": "2305m"}
    assert _after(inc, primary).overhead == 461 * MIB


def test_example_planned_stop_through_spark(spark):
    inc = ingest([str(example(SLUG, "near-miss-planned-stop-exit-143-v1.16"))], spark)
    assert run_detectors(inc).findings == []


def test_example_oomkilled_without_configuration_through_spark(spark):
    inc = ingest([str(example(SLUG, "oomkilled-without-config-1.17"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "undetermined")
    assert "Collect next:" in primary.summary and not [p for p in primary.patches if p.target == "flink"]


def _legacy_kill(usage: str, limit: str = "4 GB") -> str:
    return ("2020-06-11 13:42:51,450 INFO  org.apache.flink.runtime.resourcemanager.ResourceManager      - Closing "
            f"TaskExecutor connection {C3} because: Container [pid=30412,containerID={C3}] is running beyond physical "
            f"memory limits. Current usage: {usage} of {limit} physical memory used; 6.1 GB of 8.4 GB virtual memory "
            "used. Killing container.\n")


def test_before_1_10_a_yarn_kill_raises_the_heap_cutoff(spark):
    inc = ingest([str(example(SLUG, "yarn-heap-cutoff-rocksdb-1.9"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "heap-cutoff-too-small")
    assert "cutoff of 1024 MB (0.25 x the container)" in primary.summary
    assert "JVM heap 2764 MB" in primary.summary and "RocksDB" in primary.summary
    # 0.3 GB over x 1.5, at least 256 MB, in 64 MB steps: 1024 + 512 = 1536 MB of 4096 MB
    assert [(p.key, p.proposed) for p in primary.patches] == [("containerized.heap-cutoff-ratio", "0.38")]
    assert not any(p.key.startswith(P) for p in primary.patches)  # 1.9 reads no taskmanager.memory.* key
    assert "+containerized.heap-cutoff-ratio: 0.38" in render_config_diff(primary.patches, inc.config, inc.version_tuple)


@pytest.mark.parametrize("config, expected", [
    # the user's deprecated spelling is kept
    ({"taskmanager.heap.size": "4096m", "yarn.heap-cutoff-ratio": "0.3"}, [("yarn.heap-cutoff-ratio", "0.37")]),
    # a 2 GB container: the 600 MB minimum is the cutoff, so the minimum grows
    ({"taskmanager.heap.mb": "2048"}, [("containerized.heap-cutoff-min", "856")]),
    # a cutoff beyond half the container: the container grows so the heap keeps its size (1127 MB)
    ({"taskmanager.heap.size": "2048m", "containerized.heap-cutoff-ratio": "0.45"},
     [("taskmanager.heap.size", "2304m"), ("containerized.heap-cutoff-ratio", "0.52")]),
    # both: a 1 GB container whose 600 MB minimum is the cutoff (424 MB of heap kept)
    ({"taskmanager.heap.mb": "1024"}, [("taskmanager.heap.mb", "1280"), ("containerized.heap-cutoff-min", "856")]),
])
def test_the_cutoff_patch_follows_the_configuration(config, expected):
    gigabytes = int(next(iter(config.values())).rstrip("m")) // 1024
    inc = incident_from_text(_legacy_kill(f"{gigabytes}.1 GB", f"{gigabytes} GB"), config, "1.9.3")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "heap-cutoff-too-small"
    assert [(p.key, p.proposed) for p in finding.patches] == expected


def test_the_cutoff_model_is_not_used_from_1_10_on():
    inc = incident_from_text(_legacy_kill("4.1 GB"), {"taskmanager.heap.size": "4096m"}, "1.10.3")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug != "heap-cutoff-too-small"
    assert not any("cutoff" in p.key for p in finding.patches)


def test_before_1_10_a_virtual_memory_kill_beside_a_physical_one_still_gets_the_cutoff():
    """The cutoff is read from the TaskManager kills for memory used; a virtual-memory kill beside them is no reason
    to fail the detector."""
    virtual = _legacy_kill("4.1 GB").replace("physical memory limits", "virtual memory limits").replace(C3, C3[:-1] + "4")
    inc = incident_from_text(_legacy_kill("4.1 GB") + virtual, {"taskmanager.heap.size": "4096m"}, "1.9.3")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "heap-cutoff-too-small"
    assert [p.key for p in finding.patches] == ["containerized.heap-cutoff-ratio"]
