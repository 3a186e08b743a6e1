"""The FLIP-49 TaskManager / FLIP-116 JobManager memory model against what Flink itself prints and throws.

Expected values come from genuine Flink output: the 1.20.3 start-up logs of the example incidents recorded with a real
Flink (quoted below, and checked against those files), and ``TaskExecutorProcessUtils.processSpecFromConfig`` /
``JobManagerProcessUtils`` of the Flink 1.16.3, 1.20.3 and 2.0.0 distributions run on the configurations of
ORACLE_CASES.
"""
from __future__ import annotations

import re

import pytest

from corpus import DATA
from flink_runbooks.evidence.memory import (
    CONSTRAINTS, GROW_SLACK, POOLS, JobManagerMemory, MemoryConfigError, TaskManagerMemory,
    derive_jobmanager_memory, derive_taskmanager_memory, flink_human_size, grow_pool, parse_logged_breakdown,
    parse_logged_jobmanager_breakdown, suggest_fix, summarize,
)

P = "taskmanager.memory."
MIB = 1 << 20

# data/checkpoint-tolerable-failure-threshold/storage-permission-denied/log/flink-flink-taskexecutor-0-vm.log, lines 7,
# 8 and 33-47
GENUINE_TM_LOG = """\
jvm_params: -Xmx536870902 -Xms536870902 -XX:MaxDirectMemorySize=268435458 -XX:MaxMetaspaceSize=268435456
dynamic_configs: -D taskmanager.memory.network.min=134217730b -D taskmanager.cpu.cores=1.0 -D taskmanager.memory.task.off-heap.size=0b -D taskmanager.memory.jvm-metaspace.size=268435456b -D external-resources=none -D taskmanager.memory.jvm-overhead.min=201326592b -D taskmanager.memory.framework.off-heap.size=134217728b -D taskmanager.memory.network.max=134217730b -D taskmanager.memory.framework.heap.size=134217728b -D taskmanager.memory.managed.size=536870920b -D taskmanager.memory.task.heap.size=402653174b -D taskmanager.numberOfTaskSlots=1 -D taskmanager.memory.jvm-overhead.max=201326592b
INFO  [] - The derived from fraction jvm overhead memory (172.800mb (181193935 bytes)) is less than its min value 192.000mb (201326592 bytes), min value will be used instead
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
""".splitlines()

# data/tm-memory-misconfiguration/fractions-exceed-total-v1.20/cli/cli-start-cluster.out, line 27
# (after "IllegalConfigurationException: ")
GENUINE_INVALID_ERROR = (
    "TaskManager memory configuration failed: Sum of configured Framework Heap Memory (128.000mb (134217728 bytes)), "
    "Framework Off-Heap Memory (128.000mb (134217728 bytes)), Task Off-Heap Memory (0 bytes), Managed Memory "
    "(546.560mb (573109681 bytes)) and Network Memory (312.320mb (327491256 bytes)) exceed configured Total Flink "
    "Memory (780.800mb (818728130 bytes)).")
INVALID_CONF = {P + "process.size": "1728m", P + "managed.fraction": "0.7", P + "network.fraction": "0.4",
                P + "jvm-overhead.fraction": "0.4"}

# data/checkpoint-expired/backpressure-aligned-timeout-10s/log/flink-flink-standalonesession-0-vm.log, lines 35-41
GENUINE_JM_LOG = """\
INFO  [] - Final Master Memory configuration:
INFO  [] -   Total Process Memory: 1.563gb (1677721600 bytes)
INFO  [] -     Total Flink Memory: 1.125gb (1207959552 bytes)
INFO  [] -       JVM Heap:         1024.000mb (1073741824 bytes)
INFO  [] -       Off-heap:         128.000mb (134217728 bytes)
INFO  [] -     JVM Metaspace:      256.000mb (268435456 bytes)
INFO  [] -     JVM Overhead:       192.000mb (201326592 bytes)
""".splitlines()

# the resource manager's toString of the same spec (Flink 1.20.3, process.size 1728m)
GENUINE_SPEC = (
    "TaskExecutorProcessSpec {cpuCores=1.0, frameworkHeapSize=128.000mb (134217728 bytes), frameworkOffHeapSize="
    "128.000mb (134217728 bytes), taskHeapSize=384.000mb (402653174 bytes), taskOffHeapSize=0 bytes, networkMemSize="
    "128.000mb (134217730 bytes), managedMemorySize=512.000mb (536870920 bytes), jvmMetaspaceSize=256.000mb "
    "(268435456 bytes), jvmOverheadSize=192.000mb (201326592 bytes), numSlots=1}")

DEFAULT_1728M = dict(process=1811939328, flink=1342177280, framework_heap=134217728, task_heap=402653174,
                     managed=536870920, network=134217730, framework_off_heap=134217728, task_off_heap=0,
                     metaspace=268435456, overhead=201326592)


def _message(line: str) -> str:
    return line.split(" - ", 1)[1] if " - " in line else line


def _pools(mem: TaskManagerMemory) -> dict[str, int]:
    return {k: getattr(mem, k) for k in DEFAULT_1728M}


# ---------------------------------------------------------------------------------------------------------------
# the genuine 1.20 start-up breakdown


def test_distro_default_reproduces_the_genuine_1_20_breakdown_byte_for_byte():
    mem = derive_taskmanager_memory({P + "process.size": "1728m"}, (1, 20))
    assert _pools(mem) == DEFAULT_1728M
    assert mem.jvm_heap == 536870902 and mem.direct == 268435458 and mem.off_heap == 805306378
    block = [_message(line) for line in GENUINE_TM_LOG[3:]]
    assert mem.log_lines() == block
    assert mem.notes == [_message(GENUINE_TM_LOG[2])]
    assert mem.jvm_parameters() == GENUINE_TM_LOG[0].split(": ", 1)[1]
    logged = dict(re.findall(r"-D (taskmanager\.memory\.[\w.-]+)=(\S+)", GENUINE_TM_LOG[1]))
    assert mem.dynamic_configs() == logged


def test_overhead_min_is_used_and_says_so_in_the_breakdown():
    mem = derive_taskmanager_memory({P + "process.size": "1728m"})
    rows = mem.rows()
    assert [r[0] for r in rows] == [
        "Total Process Memory", "Total Flink Memory", "Total JVM Heap Memory", "Framework Heap", "Task Heap",
        "Total Off-heap Memory", "Managed Memory", "Total JVM Direct Memory", "Framework Off-heap", "Task Off-heap",
        "Network Memory", "JVM Metaspace", "JVM Overhead"]
    assert [r[1] for r in rows] == [1811939328, 1342177280, 536870902, 134217728, 402653174, 805306378, 536870920,
                                    268435458, 134217728, 0, 134217730, 268435456, 201326592]
    overhead_how = rows[-1][2]
    assert "172.8m < min 192m" in overhead_how and "min used" in overhead_how
    assert "rest of flink" in rows[4][2]


def test_quoted_genuine_logs_are_the_recorded_files():
    tm_log = (DATA / "checkpoint-tolerable-failure-threshold/storage-permission-denied/log/"
              "flink-flink-taskexecutor-0-vm.log").read_text()
    lines = tm_log.splitlines()
    assert lines[6:8] + lines[32:47] == GENUINE_TM_LOG
    cli = (DATA / "tm-memory-misconfiguration/fractions-exceed-total-v1.20/cli/cli-start-cluster.out").read_text()
    assert f"IllegalConfigurationException: {GENUINE_INVALID_ERROR}" in cli
    conf = (DATA / "tm-memory-misconfiguration/fractions-exceed-total-v1.20/flink-conf.yaml").read_text()
    for key, value in INVALID_CONF.items():
        assert f"{key}: {value}" in conf
    jm_log = (DATA / "checkpoint-expired/backpressure-aligned-timeout-10s/log/"
              "flink-flink-standalonesession-0-vm.log").read_text()
    assert "\n".join(GENUINE_JM_LOG) in jm_log
    mem = parse_logged_breakdown(tm_log.splitlines())
    assert _pools(mem) == DEFAULT_1728M


# ---------------------------------------------------------------------------------------------------------------
# parse_logged_breakdown


def test_parse_logged_breakdown_round_trips_the_real_block():
    mem = parse_logged_breakdown(GENUINE_TM_LOG)
    assert mem == derive_taskmanager_memory({P + "process.size": "1728m"})
    assert _pools(mem) == DEFAULT_1728M


def test_parse_logged_breakdown_with_full_log4j_prefixes_and_without_any():
    prefixed = [f"2026-11-22 02:53:48,460 INFO  org.apache.flink.runtime.taskexecutor.TaskManagerRunner      [] - "
                f"{_message(line)}" for line in GENUINE_TM_LOG[3:]]
    assert _pools(parse_logged_breakdown(prefixed)) == DEFAULT_1728M
    bare = "\n".join(_message(line) for line in GENUINE_TM_LOG[3:])
    assert _pools(parse_logged_breakdown(bare)) == DEFAULT_1728M


@pytest.mark.parametrize("conf", [
    {P + "process.size": "4096m", P + "task.off-heap.size": "512m"},
    {P + "flink.size": "3g", P + "managed.fraction": "0.1", P + "network.min": "256m"},
    {P + "task.heap.size": "1g", P + "managed.size": "0"},
])
def test_parse_logged_breakdown_round_trips_printed_blocks(conf):
    mem = derive_taskmanager_memory(conf)
    noise = ["INFO  [] - Loading configuration property: taskmanager.numberOfTaskSlots, 1"]
    assert parse_logged_breakdown(noise + [f"INFO  [] - {line}" for line in mem.log_lines()] + noise) == mem


def test_parse_logged_breakdown_takes_the_last_block_and_falls_back_to_other_prints():
    first = derive_taskmanager_memory({P + "process.size": "1g"})
    last = derive_taskmanager_memory({P + "process.size": "4g"})
    assert parse_logged_breakdown(first.log_lines() + ["restart"] + last.log_lines()) == last
    assert _pools(parse_logged_breakdown([f"... will be started with {GENUINE_SPEC}."])) == DEFAULT_1728M
    assert _pools(parse_logged_breakdown(GENUINE_TM_LOG[:2])) == DEFAULT_1728M
    assert parse_logged_breakdown(["INFO  [] - Final TaskExecutor Memory configuration:", "nothing else"]) is None
    assert parse_logged_breakdown([]) is None


# ---------------------------------------------------------------------------------------------------------------
# refusing to start


def test_genuine_invalid_fractions_config_raises_flinks_own_error():
    with pytest.raises(MemoryConfigError) as info:
        derive_taskmanager_memory(INVALID_CONF, (1, 20))
    err = info.value
    assert err.constraint == "fractions-exceed-total"
    assert err.exception == "IllegalConfigurationException"
    assert err.flink_message == GENUINE_INVALID_ERROR
    text = str(err)
    for key in INVALID_CONF:
        assert key in text
    assert "0.7" in text and "780.800mb" in text


# A user's TaskManager configuration, asked about when off-heap memory grew until the job died: the legacy heap size
# with fractions that cannot fit in it.
LEGACY_HEAP_FRACTIONS = {P + "managed.fraction": "0.7", P + "network.fraction": "0.4",
                         P + "jvm-overhead.fraction": "0.4", P + "network.min": "256mb", P + "network.max": "1024mb", P + "jvm-overhead.min": "256mb",
                         P + "jvm-overhead.max": "1gb", P + "framework.heap.size": "64mb",
                         P + "framework.off-heap.size": "64mb", "taskmanager.heap.size": "1024m"}


@pytest.mark.parametrize("version", [(1, 11), (1, 16), (1, 20)])
def test_legacy_heap_with_fractions_standalone_maps_legacy_heap_to_flink_size_and_fails(version):
    with pytest.raises(MemoryConfigError) as info:
        derive_taskmanager_memory(LEGACY_HEAP_FRACTIONS, version)
    err = info.value
    assert err.constraint == "fractions-exceed-total"
    # Flink 1.20.3 BashJavaUtils on this configuration
    assert err.flink_message == (
        "TaskManager memory configuration failed: Sum of configured Framework Heap Memory (64.000mb (67108864 bytes)),"
        " Framework Off-Heap Memory (64.000mb (67108864 bytes)), Task Off-Heap Memory (0 bytes), Managed Memory "
        "(716.800mb (751619263 bytes)) and Network Memory (409.600mb (429496736 bytes)) exceed configured Total "
        "Flink Memory (1024.000mb (1073741824 bytes)).")
    assert err.notes[0] == ("'taskmanager.memory.flink.size' is not specified, use the configured deprecated task "
                            "manager heap value (1024.000mb (1073741824 bytes)) for it.")


def test_legacy_heap_with_fractions_on_yarn_maps_legacy_heap_to_process_size_and_still_fails():
    with pytest.raises(MemoryConfigError) as info:
        derive_taskmanager_memory(LEGACY_HEAP_FRACTIONS, (1, 20), deployment="yarn")
    assert info.value.constraint == "fractions-exceed-total"
    assert info.value.flink_message.endswith(
        "Managed Memory (250.880mb (263066737 bytes)) and Network Memory (256.000mb (268435456 bytes)) exceed "
        "configured Total Flink Memory (358.400mb (375809632 bytes)).")
    assert any("derived from fraction network memory (143.360mb (150323855 bytes)) is less than its min value "
               "256.000mb" in note for note in info.value.notes)


def test_legacy_heap_with_fractions_on_flink_2_has_no_size_at_all():
    with pytest.raises(MemoryConfigError) as info:
        derive_taskmanager_memory(LEGACY_HEAP_FRACTIONS, (2, 0))
    assert info.value.constraint == "no-size-configured"
    assert any("'taskmanager.heap.size' was removed in Flink 2.0" in n for n in info.value.notes)


def test_explicit_task_heap_and_managed_exceeding_flink_size():
    conf = {P + "flink.size": "2g", P + "task.heap.size": "1500m", P + "managed.size": "1g"}
    with pytest.raises(MemoryConfigError) as info:
        derive_taskmanager_memory(conf)
    err = info.value
    assert err.constraint == "fixed-exceeds-flink-memory"
    assert "Task Heap Memory (1.465gb (1572864000 bytes))" in err.flink_message
    assert "exceed configured Total Flink Memory (2.000gb (2147483648 bytes))" in err.flink_message
    assert P + "task.heap.size" in str(err) and P + "managed.size" in str(err)
    # the same sizes under a process size
    with pytest.raises(MemoryConfigError) as info:
        derive_taskmanager_memory({P + "process.size": "3g", P + "task.heap.size": "2g", P + "managed.size": "1g"})
    assert info.value.constraint == "fixed-exceeds-flink-memory"


def test_huge_framework_heap_alone_is_a_fixed_size_problem_not_a_fraction_problem():
    with pytest.raises(MemoryConfigError) as info:
        derive_taskmanager_memory({P + "process.size": "1g", P + "framework.heap.size": "1g"})
    assert info.value.constraint == "fixed-exceeds-flink-memory"


@pytest.mark.parametrize("conf, constraint", [
    ({}, "no-size-configured"),
    ({P + "process.size": "4g", P + "network.min": "2g", P + "network.max": "1g"}, "network-min-gt-max"),
    ({P + "process.size": "4g", P + "jvm-overhead.min": "2g"}, "overhead-min-gt-max"),
    ({P + "process.size": "4g", P + "managed.fraction": "1.0"}, "fraction-out-of-range"),
    ({P + "process.size": "600m", P + "jvm-metaspace.size": "512m"}, "metaspace-overhead-exceed-process"),
    ({P + "process.size": "2g", P + "flink.size": "1900m"}, "process-less-than-flink-plus-metaspace"),
    ({P + "process.size": "8g", P + "flink.size": "2g"}, "overhead-out-of-range"),
    ({P + "flink.size": "2g", P + "task.heap.size": "1g", P + "managed.size": "512m", P + "network.max": "64m"},
     "network-out-of-range"),
    ({P + "flink.size": "1g", P + "task.heap.size": "200m", P + "managed.size": "200m",
      "taskmanager.network.numberOfBuffers": "2048"}, "network-buffers-mismatch"),
    ({P + "process.size": "1.5g"}, "invalid-value"),
    ({P + "process.size": "4g", P + "managed.fraction": "zero"}, "invalid-value"),
    ({P + "process.size": "4g", "taskmanager.network.numberOfBuffers": "4096", P + "segment-size": "1000"},
     "invalid-segment-size"),
    ({"taskmanager.heap.mb": "-1"}, "negative-legacy-heap"),
])
def test_constraint_slugs(conf, constraint):
    assert constraint in CONSTRAINTS
    with pytest.raises(MemoryConfigError) as info:
        derive_taskmanager_memory(conf)
    assert info.value.constraint == constraint


# Flink's own results (TaskExecutorProcessUtils / JobManagerProcessUtils of the 1.16.3, 1.20.3 and 2.0.0
# distributions, legacy heap mapped as the standalone scripts do): pools in bytes, or (exception, message).
ORACLE_CASES = [
    ('1.20', 'tm', {'taskmanager.memory.process.size': '4096m'},
     {'process': 4294967296, 'flink': 3597035104, 'framework_heap': 134217728, 'task_heap': 1530082070, 'managed': 1438814063, 'network': 359703515, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 429496736}),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '16g'},
     {'process': 17179869184, 'flink': 15837691904, 'framework_heap': 134217728, 'task_heap': 7650410378, 'managed': 6335076856, 'network': 1583769214, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 1073741824}),
    ('1.16', 'tm', {'taskmanager.memory.process.size': '16g'},
     {'process': 17179869184, 'flink': 15837691904, 'framework_heap': 134217728, 'task_heap': 8160437768, 'managed': 6335076856, 'network': 1073741824, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 1073741824}),
    ('1.20', 'tm', {'taskmanager.memory.flink.size': '1280m'},
     {'process': 1811939328, 'flink': 1342177280, 'framework_heap': 134217728, 'task_heap': 402653174, 'managed': 536870920, 'network': 134217730, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 201326592}),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '2g', 'taskmanager.memory.flink.size': '1500m'},
     {'process': 2147483648, 'flink': 1572864000, 'framework_heap': 134217728, 'task_heap': 517996533, 'managed': 629145609, 'network': 157286402, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 306184192}),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '2g', 'taskmanager.memory.flink.size': '1g'},
     {'process': 2147483648, 'flink': 1073741824, 'framework_heap': 134217728, 'task_heap': 268435448, 'managed': 429496736, 'network': 107374184, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 805306368}),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '2g', 'taskmanager.memory.flink.size': '1900m'},
     ('IllegalConfigurationException', 'TaskManager memory configuration failed: The configured Total Process Memory size (2.000gb (2147483648 bytes)) is less than the sum of the derived Total Flink Memory size (1.855gb (1992294400 bytes)) and the configured or default JVM Metaspace size  (256.000mb (268435456 bytes)).')),
    ('1.20', 'tm', {'taskmanager.memory.task.heap.size': '1g', 'taskmanager.memory.managed.size': '512m'},
     {'process': 2618074207, 'flink': 2087831327, 'framework_heap': 134217728, 'task_heap': 1073741824, 'managed': 536870912, 'network': 208783135, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 261807424}),
    ('1.20', 'tm', {'taskmanager.memory.task.heap.size': '1g', 'taskmanager.memory.managed.size': '512m', 'taskmanager.memory.process.size': '2g'},
     ('IllegalConfigurationException', 'TaskManager memory configuration failed: The configured Total Process Memory size (2.000gb (2147483648 bytes)) is less than the sum of the derived Total Flink Memory size (1.944gb (2087831327 bytes)) and the configured or default JVM Metaspace size  (256.000mb (268435456 bytes)).')),
    ('1.20', 'tm', {'taskmanager.memory.task.heap.size': '1g', 'taskmanager.memory.managed.size': '512m', 'taskmanager.memory.flink.size': '1700m'},
     ('IllegalConfigurationException', 'TaskManager memory configuration failed: Sum of configured Framework Heap Memory (128.000mb (134217728 bytes)), Framework Off-Heap Memory (128.000mb (134217728 bytes)), Task Heap Memory (1024.000mb (1073741824 bytes)), Task Off-Heap Memory (0 bytes) and Managed Memory (512.000mb (536870912 bytes)) exceed configured Total Flink Memory (1.660gb (1782579200 bytes)).')),
    ('1.20', 'tm', {'taskmanager.memory.flink.size': '2g', 'taskmanager.memory.task.heap.size': '1g', 'taskmanager.memory.managed.size': '512m', 'taskmanager.memory.network.max': '64m'},
     ('IllegalConfigurationException', 'TaskManager memory configuration failed: If Total Flink, Task Heap and (or) Managed Memory sizes are explicitly configured then the Network Memory size is the rest of the Total Flink memory after subtracting all other configured types of memory, but the derived Network Memory is inconsistent with its configuration.')),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '8g', 'taskmanager.memory.flink.size': '2g'},
     ('IllegalConfigurationException', 'TaskManager memory configuration failed: Derived JVM Overhead size (5.750gb (6174015488 bytes)) is not in configured JVM Overhead range [192.000mb (201326592 bytes), 1024.000mb (1073741824 bytes)].')),
    ('1.16', 'tm', {'taskmanager.memory.process.size': '8g', 'taskmanager.memory.network.min': '2g', 'taskmanager.memory.network.max': '2g', 'taskmanager.memory.task.off-heap.size': '512m'},
     {'process': 8589934592, 'flink': 7462505664, 'framework_heap': 134217728, 'task_heap': 1524713338, 'managed': 2985002310, 'network': 2147483648, 'framework_off_heap': 134217728, 'task_off_heap': 536870912, 'metaspace': 268435456, 'overhead': 858993472}),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '4g', 'taskmanager.memory.task.heap.size': '3g', 'taskmanager.memory.managed.size': '1g'},
     ('IllegalConfigurationException', 'TaskManager memory configuration failed: The configured Total Process Memory size (4.000gb (4294967296 bytes)) is less than the sum of the derived Total Flink Memory size (4.722gb (5070447510 bytes)) and the configured or default JVM Metaspace size  (256.000mb (268435456 bytes)).')),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '4g', 'taskmanager.memory.task.heap.size': '1g'},
     {'process': 4294967296, 'flink': 3597035104, 'framework_heap': 134217728, 'task_heap': 1073741824, 'managed': 1438814063, 'network': 816043761, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 429496736}),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '700m'},
     ('IllegalConfigurationException', 'TaskManager memory configuration failed: Sum of configured Framework Heap Memory (128.000mb (134217728 bytes)), Framework Off-Heap Memory (128.000mb (134217728 bytes)), Task Off-Heap Memory (0 bytes), Managed Memory (100.800mb (105696462 bytes)) and Network Memory (64.000mb (67108864 bytes)) exceed configured Total Flink Memory (252.000mb (264241152 bytes)).')),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '600m', 'taskmanager.memory.jvm-metaspace.size': '512m'},
     ('IllegalConfigurationException', 'TaskManager memory configuration failed: Sum of configured JVM Metaspace (512.000mb (536870912 bytes)) and JVM Overhead (192.000mb (201326592 bytes)) exceed configured Total Process Memory (600.000mb (629145600 bytes)).')),
    ('1.16', 'tm', {'taskmanager.memory.process.size': '4g', 'taskmanager.network.memory.min': '2g'},
     ('IllegalConfigurationException', "TaskManager memory configuration failed: Inconsistently configured Key: 'taskmanager.memory.network.fraction' , default: 0.1 (fallback keys: [{key=taskmanager.network.memory.fraction, isDeprecated=true}]) (0.10000000149011612) and its min (2.000gb (2147483648 bytes)), max (1024.000mb (1073741824 bytes)) value")),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '4g', 'taskmanager.memory.jvm-overhead.min': '2g'},
     ('IllegalConfigurationException', "TaskManager memory configuration failed: Inconsistently configured Key: 'taskmanager.memory.jvm-overhead.fraction' , default: 0.1 (fallback keys: []) (0.10000000149011612) and its min (2.000gb (2147483648 bytes)), max (1024.000mb (1073741824 bytes)) value")),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '4g', 'taskmanager.memory.managed.fraction': '1.0'},
     ('IllegalConfigurationException', "TaskManager memory configuration failed: Inconsistently configured Key: 'taskmanager.memory.managed.fraction' , default: 0.4 (fallback keys: []) (1.0) and its min (0 bytes), max (8388608.000tb (9223372036854775807 bytes)) value")),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '4g', 'taskmanager.network.memory.fraction': '0.2', 'taskmanager.memory.size': '1g'},
     {'process': 4294967296, 'flink': 3597035104, 'framework_heap': 134217728, 'task_heap': 1535450793, 'managed': 1073741824, 'network': 719407031, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 429496736}),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '4g', 'taskmanager.network.numberOfBuffers': '4096'},
     {'process': 4294967296, 'flink': 3597035104, 'framework_heap': 134217728, 'task_heap': 1755567857, 'managed': 1438814063, 'network': 134217728, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 429496736}),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '4g', 'taskmanager.network.numberOfBuffers': '4096', 'taskmanager.memory.segment-size': '1000'},
     ('IllegalConfigurationException', 'TaskManager memory configuration failed: Invalid configuration value for taskmanager.memory.segment-size : 1000 - Minimum memory segment size is 4096')),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '1.5g'},
     ('IllegalConfigurationException', "TaskManager memory configuration failed: Cannot read memory size from config option 'taskmanager.memory.process.size'.")),
    ('1.20', 'tm', {'taskmanager.memory.process.size': '4g', 'taskmanager.memory.managed.fraction': 'zero'},
     ('IllegalArgumentException', "Could not parse value 'zero' for key 'taskmanager.memory.managed.fraction'.")),
    ('1.20', 'tm', {'taskmanager.heap.mb': '2048'},
     {'process': 2684354564, 'flink': 2147483648, 'framework_heap': 134217728, 'task_heap': 805306352, 'managed': 858993472, 'network': 214748368, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 268435460}),
    ('1.20', 'tm', {'taskmanager.memory.jvm-metaspace.size': '512m'},
     ('IllegalConfigurationException', "TaskManager memory configuration failed: Either required fine-grained memory (taskmanager.memory.task.heap.size and taskmanager.memory.managed.size), or Total Flink Memory size (Key: 'taskmanager.memory.flink.size' , default: null (fallback keys: [])), or Total Process Memory size (Key: 'taskmanager.memory.process.size' , default: null (fallback keys: [])) need to be configured explicitly.")),
    ('2.0', 'tm', {'taskmanager.memory.process.size': '4096m', 'taskmanager.network.memory.fraction': '0.2', 'taskmanager.network.numberOfBuffers': '4096'},
     {'process': 4294967296, 'flink': 3597035104, 'framework_heap': 134217728, 'task_heap': 1170378554, 'managed': 1438814063, 'network': 719407031, 'framework_off_heap': 134217728, 'task_off_heap': 0, 'metaspace': 268435456, 'overhead': 429496736}),
    ('1.20', 'jm', {'jobmanager.memory.process.size': '1600m'},
     {'process': 1677721600, 'flink': 1207959552, 'heap': 1073741824, 'off_heap': 134217728, 'metaspace': 268435456, 'overhead': 201326592}),
    ('1.20', 'jm', {'jobmanager.memory.flink.size': '1g', 'jobmanager.memory.heap.size': '800m'},
     {'process': 1543503872, 'flink': 1073741824, 'heap': 838860800, 'off_heap': 234881024, 'metaspace': 268435456, 'overhead': 201326592}),
    ('1.20', 'jm', {'jobmanager.memory.flink.size': '1g', 'jobmanager.memory.heap.size': '800m', 'jobmanager.memory.off-heap.size': '128m'},
     ('IllegalConfigurationException', 'JobManager memory configuration failed: Sum of the configured JVM Heap Memory (800.000mb (838860800 bytes)) and the configured Off-heap Memory (128.000mb (134217728 bytes)) does not match the configured Total Flink Memory (1024.000mb (1073741824 bytes)). Please, make the configuration consistent or configure only one option: either JVM Heap or Total Flink Memory.')),
    ('1.20', 'jm', {'jobmanager.memory.flink.size': '1g', 'jobmanager.memory.heap.size': '2g'},
     ('IllegalConfigurationException', 'JobManager memory configuration failed: The configured JVM Heap Memory (2.000gb (2147483648 bytes)) exceeds the configured Total Flink Memory (1024.000mb (1073741824 bytes)). Please, make the configuration consistent or configure only one option: either JVM Heap or Total Flink Memory.')),
    ('1.20', 'jm', {'jobmanager.memory.process.size': '512m'},
     ('IllegalConfigurationException', 'JobManager memory configuration failed: The configured Total Flink Memory (64.000mb (67108864 bytes)) is less than the configured Off-heap Memory (128.000mb (134217728 bytes)).')),
    ('1.20', 'jm', {'jobmanager.heap.size': '1g'},
     {'process': 1677721600, 'flink': 1207959552, 'heap': 1073741824, 'off_heap': 134217728, 'metaspace': 268435456, 'overhead': 201326592}),
    ('1.20', 'jm', {},
     ('IllegalConfigurationException', "JobManager memory configuration failed: Either required fine-grained memory (jobmanager.memory.heap.size), or Total Flink Memory size (Key: 'jobmanager.memory.flink.size' , default: null (fallback keys: [])), or Total Process Memory size (Key: 'jobmanager.memory.process.size' , default: null (fallback keys: [])) need to be configured explicitly.")),
    ('2.0', 'jm', {},
     ('IllegalConfigurationException', "Either required fine-grained memory (jobmanager.memory.heap.size), or Total Flink Memory size (Key: 'jobmanager.memory.flink.size' , default: null (fallback keys: [])), or Total Process Memory size (Key: 'jobmanager.memory.process.size' , default: null (fallback keys: [])) need to be configured explicitly.")),
]


@pytest.mark.parametrize("version, kind, conf, expected", ORACLE_CASES,
                         ids=[f"{v}-{k}-{i}" for i, (v, k, _, _) in enumerate(ORACLE_CASES)])
def test_matches_flink_on_oracle_cases(version, kind, conf, expected):
    derive = derive_jobmanager_memory if kind == "jm" else derive_taskmanager_memory
    version = tuple(int(p) for p in version.split("."))
    if isinstance(expected, dict):
        mem = derive(conf, version)
        assert {k: getattr(mem, k) for k in expected} == expected
    else:
        with pytest.raises(MemoryConfigError) as info:
            derive(conf, version)
        assert (info.value.exception, info.value.flink_message) == expected


def test_version_defaults():
    # 1.10.0 shipped a 96m metaspace; FLINK-16406 raised it
    assert derive_taskmanager_memory({P + "process.size": "2g"}, (1, 10, 0)).metaspace == 96 * MIB
    assert derive_taskmanager_memory({P + "process.size": "2g"}, (1, 10, 1)).metaspace == 256 * MIB
    # network max: 1g until 1.16, unbounded since 1.17
    assert derive_taskmanager_memory({P + "process.size": "32g"}, (1, 16)).network == 1 << 30
    assert derive_taskmanager_memory({P + "process.size": "32g"}, (1, 17)).network > 3 << 30
    with pytest.raises(ValueError):
        derive_taskmanager_memory({P + "process.size": "2g"}, (1, 9))


def test_deprecated_keys_are_read_and_warned_about():
    mem = derive_taskmanager_memory({P + "process.size": "4g", "taskmanager.network.memory.min": "512m"})
    assert mem.network == 512 * MIB
    assert ("Config uses deprecated configuration key 'taskmanager.network.memory.min' instead of proper key "
            "'taskmanager.memory.network.min'") in mem.notes
    # the proper key wins over its deprecated alias
    both = {P + "process.size": "4g", "taskmanager.network.memory.min": "512m", P + "network.min": "256m"}
    assert derive_taskmanager_memory(both).network == 359703515


def test_flink_human_size_is_memory_size_to_human_readable_string():
    assert flink_human_size(0) == "0 bytes"
    assert flink_human_size(1024) == "1024 bytes"
    assert flink_human_size(1025) == "1.001kb (1025 bytes)"
    assert flink_human_size(1 << 30) == "1024.000mb (1073741824 bytes)"
    assert flink_human_size(181193935) == "172.800mb (181193935 bytes)"
    assert flink_human_size((1 << 63) - 1) == "8388608.000tb (9223372036854775807 bytes)"


# ---------------------------------------------------------------------------------------------------------------
# JobManager


def test_jobmanager_default_reproduces_the_genuine_1_20_breakdown():
    mem = derive_jobmanager_memory({"jobmanager.memory.process.size": "1600m"}, (1, 20))
    assert mem.log_lines() == [_message(line) for line in GENUINE_JM_LOG]
    assert parse_logged_jobmanager_breakdown(GENUINE_JM_LOG) == mem
    assert [r[0] for r in mem.rows()] == ["Total Process Memory", "Total Flink Memory", "JVM Heap", "Off-heap",
                                          "JVM Metaspace", "JVM Overhead"]
    assert "1600m" in summarize(mem)


# ---------------------------------------------------------------------------------------------------------------
# suggest_fix


BROKEN = {
    "genuine-fractions": INVALID_CONF,
    "legacy-heap-fractions": LEGACY_HEAP_FRACTIONS,
    "legacy-heap-fractions-yarn": LEGACY_HEAP_FRACTIONS,
    "fixed-sizes": {P + "flink.size": "2g", P + "task.heap.size": "1500m", P + "managed.size": "1g"},
    "fixed-under-process": {P + "process.size": "3g", P + "task.heap.size": "2g", P + "managed.size": "1g"},
    "huge-framework-heap": {P + "process.size": "1g", P + "framework.heap.size": "1g"},
    "network-min-gt-max": {P + "process.size": "4g", P + "network.min": "2g", P + "network.max": "1g"},
    "pre-1.17-network-min": {P + "process.size": "4g", "taskmanager.network.memory.min": "1500m"},
    "overhead-min-gt-max": {P + "process.size": "4g", P + "jvm-overhead.min": "2g"},
    "fraction-1": {P + "process.size": "4g", P + "managed.fraction": "1.0"},
    "both-totals": {P + "process.size": "8g", P + "flink.size": "2g"},
    "metaspace": {P + "process.size": "600m", P + "jvm-metaspace.size": "512m"},
    "remainder-network": {P + "flink.size": "2g", P + "task.heap.size": "1g", P + "managed.size": "512m",
                          P + "network.max": "64m"},
    "legacy-buffers": {P + "flink.size": "1g", P + "task.heap.size": "200m", P + "managed.size": "200m",
                       "taskmanager.network.numberOfBuffers": "2048"},
    "unparseable": {P + "process.size": "2g", P + "task.off-heap.size": "1.5g"},
    "nothing": {},
    "small-process": {P + "process.size": "700m"},
}


def _versions(name):
    return (1, 16) if name == "pre-1.17-network-min" else (1, 20)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_suggest_fix_results_pass_the_model(name):
    conf, version = BROKEN[name], _versions(name)
    deployment = "yarn" if name == "legacy-heap-fractions-yarn" else "standalone"
    with pytest.raises(MemoryConfigError) as info:
        derive_taskmanager_memory(conf, version, deployment=deployment)
    fix = suggest_fix(conf, version, info.value, deployment=deployment)
    assert fix, "a fix must change something"
    fixed = {k: v for k, v in {**conf, **fix}.items() if v is not None}
    mem = derive_taskmanager_memory(fixed, version, deployment=deployment)
    if name not in ("nothing", "small-process", "metaspace"):  # even the defaults do not fit these
        # the user's total is kept
        for key in (P + "process.size", "taskmanager.heap.size"):
            if key in conf:
                assert fixed[key] == conf[key]
    if P + "process.size" in conf and name not in ("small-process", "metaspace"):
        assert mem.process == derive_taskmanager_memory({P + "process.size": conf[P + "process.size"]}).process


def _random_conf(rng) -> dict[str, str]:
    """Memory settings as people write them, many of them out of budget."""
    sizes = ["0", "64m", "128m", "256m", "512m", "700m", "1g", "1536m", "2g", "3g", "4g", "8g", "16g"]
    fractions = ["0", "0.05", "0.1", "0.2", "0.4", "0.5", "0.7", "0.9", "1.0"]
    conf = {}
    for key, choices, p in [
        (P + "process.size", sizes[5:], 0.7), (P + "flink.size", sizes[4:], 0.2), (P + "task.heap.size", sizes, 0.25),
        (P + "managed.size", sizes, 0.2), (P + "managed.fraction", fractions, 0.3),
        (P + "network.fraction", fractions, 0.3), (P + "network.min", sizes[:9], 0.25),
        (P + "network.max", sizes[:9], 0.2), (P + "jvm-overhead.fraction", fractions, 0.25),
        (P + "jvm-overhead.min", sizes[:8], 0.2), (P + "jvm-overhead.max", sizes[:9], 0.2),
        (P + "jvm-metaspace.size", sizes[:8], 0.2), (P + "framework.heap.size", sizes[:8], 0.2),
        (P + "framework.off-heap.size", sizes[:8], 0.2), (P + "task.off-heap.size", sizes[:8], 0.2),
        ("taskmanager.heap.size", sizes[5:], 0.1), ("taskmanager.network.numberOfBuffers", ["2048", "8192"], 0.1),
    ]:
        if rng.random() < p:
            conf[key] = rng.choice(choices)
    return conf


def test_suggest_fix_always_yields_a_startable_config():
    import random

    rng, broken = random.Random(20), 0
    while broken < 150:
        conf = _random_conf(rng)
        try:
            derive_taskmanager_memory(conf)
            continue
        except MemoryConfigError as err:
            error = err
        broken += 1
        fix = suggest_fix(conf, None, error)
        fixed = {k: v for k, v in {**conf, **fix}.items() if v is not None}
        derive_taskmanager_memory(fixed)
        process = conf.get(P + "process.size")
        if process and P + "process.size" in fix:  # only when even the defaults do not fit into it
            with pytest.raises(MemoryConfigError):
                derive_taskmanager_memory({P + "process.size": process})


def test_grow_pool_always_yields_a_valid_config_that_grew():
    import random

    rng, grown = random.Random(21), 0
    while grown < 150:
        conf = _random_conf(rng)
        try:
            before = derive_taskmanager_memory(conf)
        except MemoryConfigError:
            continue
        pool = rng.choice(["task_heap", "task_off_heap", "metaspace", "network", "managed", "overhead"])
        amount = rng.choice([64 * MIB, 256 * MIB, 1 << 30])
        after = derive_taskmanager_memory({**conf, **grow_pool(conf, None, pool, amount)})
        assert getattr(after, pool) >= getattr(before, pool) + amount - GROW_SLACK, (conf, pool)
        assert all(getattr(after, p) >= getattr(before, p) for p in POOLS), (conf, pool)
        grown += 1


def test_suggest_fix_for_over_budget_fractions_resets_only_what_is_needed():
    fix = suggest_fix(INVALID_CONF, (1, 20))
    assert fix == {P + "managed.fraction": None, P + "network.fraction": None}


def test_suggest_fix_for_legacy_heap_with_fractions_leaves_a_usable_task_heap():
    # managed.fraction alone would start Flink, with 76.8m of task heap; the network fraction goes too
    fix = suggest_fix(LEGACY_HEAP_FRACTIONS, (1, 20))
    assert fix == {P + "managed.fraction": None, P + "network.fraction": None}
    mem = derive_taskmanager_memory({k: v for k, v in {**LEGACY_HEAP_FRACTIONS, **fix}.items() if v is not None}, (1, 20))
    assert mem.flink == 1 << 30 and mem.task_heap >= 128 * MIB
    alone = {k: v for k, v in LEGACY_HEAP_FRACTIONS.items() if k != P + "managed.fraction"}
    assert derive_taskmanager_memory(alone).task_heap < 128 * MIB


def test_suggest_fix_drops_the_explicit_task_heap_when_fixed_sizes_do_not_fit():
    fix = suggest_fix(BROKEN["fixed-sizes"])
    assert fix == {P + "task.heap.size": None}


def test_suggest_fix_keeps_a_raised_network_min_and_lifts_the_max():
    fix = suggest_fix(BROKEN["pre-1.17-network-min"], (1, 16))
    assert fix.get(P + "network.max") == "1500m"
    assert "taskmanager.network.memory.min" not in fix
    fixed = {**BROKEN["pre-1.17-network-min"], **{k: v for k, v in fix.items() if v is not None}}
    assert derive_taskmanager_memory(fixed, (1, 16)).network == 1500 * MIB


def test_suggest_fix_on_a_valid_config_is_empty():
    assert suggest_fix({P + "process.size": "1728m"}) == {}


# ---------------------------------------------------------------------------------------------------------------
# grow_pool


POOL_KEYS = {
    "task_off_heap": P + "task.off-heap.size", "metaspace": P + "jvm-metaspace.size", "network": P + "network.min",
    "managed": (P + "managed.size", P + "managed.fraction"), "overhead": P + "jvm-overhead.min",
}


@pytest.mark.parametrize("base", [
    {P + "process.size": "1728m"},
    {P + "process.size": "4g", P + "task.heap.size": "1g"},
    {P + "flink.size": "2g"},
    {P + "task.heap.size": "1g", P + "managed.size": "1g"},
    {P + "process.size": "8g", P + "flink.size": "7g"},
], ids=["distro", "explicit-heap", "flink-size", "fine-grained", "both-totals"])
@pytest.mark.parametrize("pool", ["task_heap", "task_off_heap", "metaspace", "network", "managed", "overhead"])
def test_grow_pool_grows_the_right_pool_and_passes_the_model(base, pool):
    before = derive_taskmanager_memory(base)
    amount = 256 * MIB
    changes = grow_pool(base, None, pool, "256m")
    assert all(v is not None for v in changes.values())
    after = derive_taskmanager_memory({**base, **changes})
    assert getattr(after, pool) >= getattr(before, pool) + amount - GROW_SLACK
    for other in POOLS:
        assert getattr(after, other) >= getattr(before, other), other
    if pool in POOL_KEYS:
        keys = POOL_KEYS[pool] if isinstance(POOL_KEYS[pool], tuple) else (POOL_KEYS[pool],)
        assert set(keys) & set(changes)
    if P + "process.size" in base:
        assert after.process >= before.process + amount - GROW_SLACK
        assert P + "process.size" in changes
    elif P + "flink.size" in base and pool in ("metaspace", "overhead"):
        assert P + "flink.size" not in changes  # they come on top of a fixed flink size


def test_grow_pool_heap_oom_on_the_distro_default():
    changes = grow_pool({P + "process.size": "1728m"}, (1, 20), "heap", 1.5)
    assert set(changes) == {P + "process.size"}  # the task heap stays derived
    after = derive_taskmanager_memory({P + "process.size": changes[P + "process.size"]})
    assert after.task_heap >= 1.5 * 402653174 - GROW_SLACK
    assert after.managed >= 536870920 and after.network >= 134217730


def test_grow_pool_direct_oom_budgets_task_off_heap_without_shrinking_the_heap():
    changes = grow_pool({P + "process.size": "4g"}, (1, 20), "direct", "512m")
    assert changes[P + "task.off-heap.size"] == "512m"
    after = derive_taskmanager_memory({P + "process.size": "4g", **changes})
    assert after.task_off_heap == 512 * MIB
    assert after.task_heap >= derive_taskmanager_memory({P + "process.size": "4g"}).task_heap


def test_grow_pool_without_protecting_other_pools_grows_the_total_by_the_amount_when_that_suffices():
    changes = grow_pool({P + "process.size": "1728m"}, None, "metaspace", "128m", protect_other_pools=False)
    assert changes == {P + "jvm-metaspace.size": "384m", P + "process.size": "1856m"}


def test_grow_pool_repairs_an_invalid_configuration_first():
    changes = grow_pool(INVALID_CONF, (1, 20), "network", 2.0)
    assert changes[P + "managed.fraction"] is None and changes[P + "network.fraction"] is None
    fixed = {k: v for k, v in {**INVALID_CONF, **changes}.items() if v is not None}
    after = derive_taskmanager_memory(fixed)
    repaired = derive_taskmanager_memory({P + "process.size": "1728m", P + "jvm-overhead.fraction": "0.4"})
    assert after.network >= 2 * repaired.network - GROW_SLACK


def test_grow_pool_rejects_nonsense():
    with pytest.raises(ValueError):
        grow_pool({P + "process.size": "1728m"}, None, "heap", 0.5)
    with pytest.raises(ValueError):
        grow_pool({P + "process.size": "1728m"}, None, "task_off_heap", 2.0)  # 0 bytes times anything
    with pytest.raises(ValueError):
        grow_pool({P + "process.size": "1728m"}, None, "swap", "1g")


# ---------------------------------------------------------------------------------------------------------------


def test_summarize_names_the_pools_and_the_jvm_flags():
    text = summarize(derive_taskmanager_memory({P + "process.size": "1728m"}))
    for fragment in ("process 1728m", "flink 1280m", "task 384m", "managed 512m", "network 128m",
                     "MaxDirectMemorySize", "metaspace 256m", "overhead 192m", "min value will be used"):
        assert fragment in text
    assert isinstance(parse_logged_breakdown(GENUINE_TM_LOG), TaskManagerMemory)
    assert isinstance(derive_jobmanager_memory({"jobmanager.memory.process.size": "1600m"}), JobManagerMemory)
