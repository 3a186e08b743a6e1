"""memory_evidence: what the memory runbooks read from an incident (effective breakdown, user config, kills, RocksDB)."""
from __future__ import annotations

from corpus import incident_from_text
from flink_runbooks.parse.config import ConfigSource
from flink_runbooks.evidence.memory.incident import (
    container_memory_kills, deployment_of, distinct_containers, effective_taskmanager_memory, k8s_quantity,
    rocksdb_fix, rocksdb_memory, user_memory_config, yarn_size,
)

MIB = 1 << 20
# checkpoint-tolerable-threshold-v1.20/log/flink-flink-taskexecutor-0-vm.log, lines 7, 8 and 30-47 (genuine)
GENUINE_TM_START = """\
jvm_params: -Xmx536870902 -Xms536870902 -XX:MaxDirectMemorySize=268435458 -XX:MaxMetaspaceSize=268435456
dynamic_configs: -D taskmanager.memory.network.min=134217730b -D taskmanager.cpu.cores=1.0 -D taskmanager.memory.task.off-heap.size=0b -D taskmanager.memory.jvm-metaspace.size=268435456b -D external-resources=none -D taskmanager.memory.jvm-overhead.min=201326592b -D taskmanager.memory.framework.off-heap.size=134217728b -D taskmanager.memory.network.max=134217730b -D taskmanager.memory.framework.heap.size=134217728b -D taskmanager.memory.managed.size=536870920b -D taskmanager.memory.task.heap.size=402653174b -D taskmanager.numberOfTaskSlots=1 -D taskmanager.memory.jvm-overhead.max=201326592b
INFO  [] - Final TaskExecutor Memory configuration:
INFO  [] -   Total Process Memory:          1.688gb (1811939328 bytes)
INFO  [] -     Total Flink Memory:          1.250gb (1342177280 bytes)
INFO  [] -       Total JVM Heap Memory:     512.000mb (536870902 bytes)
INFO  [] -         Framework:               128.000mb (134217728 bytes)
INFO  [] -         Task:                    384.000mb (402653174 bytes)
INFO  [] -       Total Off-heap Memory:     768.000mb (805306378 bytes)
INFO  [] -         Managed:                 512.000mb (536870920 bytes)
INFO  [] -         Total JVM Direct Memory: 256.000mb (268435458 bytes)
INFO  [] -           Framework:             128.000mb (134217728 bytes)
INFO  [] -           Task:                  0 bytes
INFO  [] -           Network:               128.000mb (134217730 bytes)
INFO  [] -     JVM Metaspace:               256.000mb (268435456 bytes)
INFO  [] -     JVM Overhead:                192.000mb (201326592 bytes)
"""


def test_logged_breakdown_wins_over_the_model_of_the_file():
    # the file says 4g but the TaskManager logged the 1728m breakdown it really got
    inc = incident_from_text(GENUINE_TM_START, {"taskmanager.memory.process.size": "4g"}, "1.20.3")
    mem, source = effective_taskmanager_memory(inc)
    assert mem.process == 1811939328 and mem.task_heap == 402653174 and mem.overhead == 192 * MIB
    assert source.startswith("logged: Final TaskExecutor Memory configuration")


def test_model_of_the_configuration_when_nothing_was_logged():
    inc = incident_from_text("", {"taskmanager.memory.process.size": "2g"}, "1.15.4")
    mem, source = effective_taskmanager_memory(inc)
    assert mem.process == 2 << 30 and round(mem.overhead / MIB, 1) == 204.8
    assert source.startswith("model of the configuration")


def test_invalid_or_missing_or_pre_flip49_configuration_gives_no_breakdown_and_says_why():
    bad = incident_from_text("", {"taskmanager.memory.process.size": "1728m",
                                  "taskmanager.memory.managed.fraction": "0.7",
                                  "taskmanager.memory.network.fraction": "0.4"}, "1.20.3")
    assert effective_taskmanager_memory(bad) == (None, effective_taskmanager_memory(bad)[1])
    assert "fractions-exceed-total" in effective_taskmanager_memory(bad)[1]
    assert "no TaskManager memory settings" in effective_taskmanager_memory(incident_from_text("", {}, "1.18.1"))[1]
    old = incident_from_text("", {"taskmanager.heap.size": "1024m"}, "1.9.1")
    assert "predates the FLIP-49" in effective_taskmanager_memory(old)[1]


def test_generated_dynamic_memory_sizes_are_not_the_users_configuration():
    inc = incident_from_text("", {"taskmanager.memory.process.size": "1728m",
                                  "taskmanager.memory.managed.fraction": "0.2"}, "1.20.3")
    dyn = ConfigSource("dynamic", "taskmanager.log", 90, "-D")
    inc.config.add("taskmanager.memory.task.heap.size", "402653174b", dyn)
    inc.config.add("taskmanager.memory.managed.size", "268435460b", dyn)
    inc.config.add("taskmanager.memory.managed.fraction", "0.2", ConfigSource("log", "taskmanager.log", 20))
    inc.config.add("taskmanager.memory.jvm-metaspace.size", "512m", dyn)  # typed by a user: kept
    conf = user_memory_config(inc)
    assert "taskmanager.memory.task.heap.size" not in conf and "taskmanager.memory.managed.size" not in conf
    assert conf["taskmanager.memory.jvm-metaspace.size"] == "512m"
    assert conf["taskmanager.memory.process.size"] == "1728m"


def test_deployment_from_banners_and_container_ids():
    yarn = incident_from_text("2021-03-08 19:04:51,221 INFO  org.apache.flink.runtime.entrypoint.ClusterEntrypoint [] -  "
                              "Starting YarnSessionClusterEntrypoint (Version: 1.12.7, Scala: 2.12, Rev:88d9950, "
                              "Date:2021-12-14T23:39:33+01:00)")
    k8s = incident_from_text("2023-12-04 07:55:13,001 INFO  org.apache.flink.kubernetes.KubernetesResourceManagerDriver "
                             "[] - Pod orders-taskmanager-1-3 is created.")
    assert (deployment_of(yarn), deployment_of(k8s), deployment_of(incident_from_text(""))) == (
        "yarn", "kubernetes", "standalone")


def test_sizes_as_yarn_and_kubernetes_print_them():
    assert yarn_size("2.1 GB") == int(2.1 * (1 << 30)) and yarn_size("512 MB") == 512 * MIB
    assert k8s_quantity("4Gi") == 4 << 30 and k8s_quantity("4096Mi") == 4 << 30 and k8s_quantity("4G") == 4 * 10 ** 9


def test_container_kills_of_every_platform_with_their_numbers():
    text = """\
2021-03-08 21:17:44,187 WARN org.apache.hadoop.yarn.server.nodemanager.containermanager.monitor.ContainersMonitorImpl: Container [pid=28814,containerID=container_e27_1614950323671_0419_01_000003] is running 524288000B beyond the 'PHYSICAL' memory limit. Current usage: 2.5 GB of 2 GB physical memory used; 4.3 GB of 4.2 GB virtual memory used. Killing container.
2020-06-02 10:12:58,934 INFO  org.apache.flink.yarn.YarnResourceManager - Closing TaskExecutor connection container_1590912340115_0032_01_000002 because: Container [pid=19211,containerID=container_1590912340115_0032_01_000002] is running beyond virtual memory limits. Current usage: 1.1 GB of 2 GB physical memory used; 4.6 GB of 4.2 GB virtual memory used. Killing container.
2023-12-04 09:41:07,827 INFO  org.apache.flink.runtime.resourcemanager.active.ActiveResourceManager [] - Worker orders-taskmanager-1-3 is terminated. Diagnostics: Pod terminated, container termination statuses: [flink-main-container(exitCode=137, reason=OOMKilled, message=null)], pod status: Failed(reason=null, message=null)
"""
    dmesg = ("[Tue Apr 22 03:12:44 2025] memory: usage 8388608kB, limit 8388608kB, failcnt 10452\n"
             "[Tue Apr 22 03:12:44 2025] Memory cgroup out of memory: Killed process 3141 (java) total-vm:14231880kB, "
             "anon-rss:8301220kB, file-rss:28140kB, shmem-rss:0kB, UID:9999 pgtables:17388kB oom_score_adj:0\n")
    kills = container_memory_kills(incident_from_text(text)) + container_memory_kills(
        incident_from_text(dmesg, file="dmesg.txt"))
    kinds = [(k.platform, k.kind) for k in kills]
    assert kinds == [("yarn", "physical"), ("yarn", "virtual"), ("kubernetes", "oom-killed"),
                     ("kernel", "oom-killed")]
    physical, virtual, pod, cgroup = kills
    assert physical.limit == 2 << 30 and physical.excess == 500 * MIB  # the byte count, not the rounded GB
    assert virtual.usage == int(4.6 * (1 << 30)) and virtual.physical_usage == int(1.1 * (1 << 30))
    assert (pod.container, pod.exit_code) == ("orders-taskmanager-1-3", 137)
    assert cgroup.usage == 8301220 * 1024 and cgroup.limit == 8 << 30 and not cgroup.jobmanager
    assert distinct_containers(kills) == 4


def test_kubectl_describe_gives_the_limit_and_a_planned_stop_is_no_kill():
    describe = """\
Name:             flink-taskmanager-7c9d8b6f5-q4wz8
    Last State:     Terminated
      Reason:       OOMKilled
      Exit Code:    137
    Limits:
      cpu:     2
      memory:  3Gi
    Requests:
      cpu:        1
      memory:     2Gi
"""
    [kill] = container_memory_kills(incident_from_text(describe, file="kubectl-describe.txt"))
    assert (kill.container, kill.limit, kill.exit_code) == ("flink-taskmanager-7c9d8b6f5-q4wz8", 3 << 30, 137)
    planned = """\
2023-08-15 23:30:06,953 INFO  org.apache.flink.runtime.resourcemanager.active.ActiveResourceManager [] - Worker container_e08_1691990000000_0011_01_000002 is terminated. Diagnostics: Container container_e08_1691990000000_0011_01_000002 marked as failed.
 Exit code:143.
 Diagnostics: [2023-08-15 23:30:06.912]Container killed by the ApplicationMaster.
[2023-08-15 23:30:06.913]Container killed on request. Exit code is 143
2023-08-15 23:30:06,800 INFO  org.apache.flink.yarn.YarnTaskExecutorRunner [] - RECEIVED SIGNAL 15: SIGTERM. Shutting down as requested.
"""
    assert container_memory_kills(incident_from_text(planned)) == []


ROCKS = {"state.backend": "rocksdb", "taskmanager.memory.process.size": "1728m"}


def test_rocksdb_memory_unbounded_over_budget_or_budgeted():
    unbounded = rocksdb_memory(incident_from_text("", {**ROCKS, "state.backend.rocksdb.memory.managed": "false"},
                                                  "1.13.6"))
    assert unbounded.problem == "unbounded" and unbounded.managed_memory == 536870920
    user_budget = incident_from_text("", {**ROCKS, "state.backend.rocksdb.memory.managed": "false",
                                          "state.backend.rocksdb.memory.fixed-per-slot": "924m"}, "1.13.6")
    rocks = rocksdb_memory(user_budget)
    assert rocks.problem == "over-budget" and rocks.demand == 924 * MIB and rocks.room == 536870920
    budgeted = incident_from_text("", {**ROCKS, "state.backend.rocksdb.memory.fixed-per-slot": "256m",
                                       "taskmanager.numberOfTaskSlots": "2"}, "1.16.3")
    assert rocksdb_memory(budgeted).problem is None
    assert rocksdb_memory(incident_from_text("", {**ROCKS, "state.backend": "hashmap"})) is None


def test_the_jobs_logged_state_backend_overrides_the_configuration():
    text = ("2024-02-12 09:30:07,001 INFO  org.apache.flink.runtime.state.StateBackendLoader [] - State backend "
            "loader loads the state backend as HashMapStateBackend")
    inc = incident_from_text(text, {**ROCKS, "state.backend.rocksdb.memory.managed": "false"}, "1.16.3")
    assert rocksdb_memory(inc) is None


def test_rocksdb_fix_keeps_the_memory_the_user_meant_rocksdb_to_have():
    user_budget = incident_from_text("", {**ROCKS, "state.backend.rocksdb.memory.managed": "false",
                                          "state.backend.rocksdb.memory.fixed-per-slot": "924m"}, "1.13.6")
    changes = rocksdb_fix(user_budget, rocksdb_memory(user_budget))
    assert changes["state.backend.rocksdb.memory.managed"] == "true"
    assert changes["state.backend.rocksdb.memory.fixed-per-slot"] is None
    assert changes["taskmanager.memory.process.size"] == "2217m"
    assert changes["taskmanager.memory.managed.fraction"] == "0.532"
