"""The effective memory read back from what Flink logs at start-up, and a summary for people."""
from __future__ import annotations

import re
from typing import Iterable
from flink_runbooks.vocabulary.units import format_size
from flink_runbooks.evidence.memory.model import JobManagerMemory, POOLS, TaskManagerMemory

# ---------------------------------------------------------------------------------------------------------------
# reading the effective memory back from logs

_BYTES_IN_VALUE = re.compile(r"\((\d+) bytes\)|^(\d+) bytes")
_TM_BLOCK_LABELS = {
    "Total Process Memory": "process", "Total Flink Memory": "flink", "Total JVM Heap Memory": "jvm_heap",
    "Total Off-heap Memory": "off_heap", "Managed": "managed", "Total JVM Direct Memory": "direct",
    "Network": "network", "JVM Metaspace": "metaspace", "JVM Overhead": "overhead",
}
_TM_BLOCK_LINE = re.compile(
    r"(?:^|\s-\s)\s*(Total Process Memory|Total Flink Memory|Total JVM Heap Memory|Framework|Task|"
    r"Total Off-heap Memory|Managed|Total JVM Direct Memory|Network|JVM Metaspace|JVM Overhead):\s+(.+?)\s*$")
_SPEC_FIELDS = {
    "frameworkHeapSize": "framework_heap", "frameworkOffHeapSize": "framework_off_heap", "taskHeapSize": "task_heap",
    "taskOffHeapSize": "task_off_heap", "networkMemSize": "network", "managedMemorySize": "managed",
    "jvmMetaspaceSize": "metaspace", "jvmOverheadSize": "overhead",
}
_DYNAMIC_FIELDS = {
    "taskmanager.memory.framework.heap.size": "framework_heap",
    "taskmanager.memory.framework.off-heap.size": "framework_off_heap",
    "taskmanager.memory.task.heap.size": "task_heap", "taskmanager.memory.task.off-heap.size": "task_off_heap",
    "taskmanager.memory.network.min": "network", "taskmanager.memory.managed.size": "managed",
    "taskmanager.memory.jvm-metaspace.size": "metaspace", "taskmanager.memory.jvm-overhead.min": "overhead",
}


def _value_bytes(text: str) -> int | None:
    m = _BYTES_IN_VALUE.search(text.strip())
    return int(m.group(1) or m.group(2)) if m else None


def breakdown_from_pools(pools: dict[str, int], source: str) -> TaskManagerMemory | None:
    if not all(p in pools for p in POOLS):
        return None
    flink = sum(pools[p] for p in POOLS if p not in ("metaspace", "overhead"))
    return TaskManagerMemory(process=flink + pools["metaspace"] + pools["overhead"], flink=flink,
                             **{p: pools[p] for p in POOLS}, notes=[f"read from {source}"],
                             derivation={p: f"logged ({source})" for p in (*POOLS, "process", "flink")})


def _parse_block(lines: list[str]) -> TaskManagerMemory | None:
    found: dict[str, int] = {}
    section = "heap"
    for line in lines:
        m = _TM_BLOCK_LINE.search(line)
        if not m:
            continue
        label, value = m.group(1), _value_bytes(m.group(2))
        if value is None:
            continue
        if label == "Total JVM Heap Memory":
            section = "heap"
        elif label == "Total JVM Direct Memory":
            section = "direct"
        if label in ("Framework", "Task"):
            pool = "framework" if label == "Framework" else "task"
            found[pool + ("_heap" if section == "heap" else "_off_heap")] = value
        else:
            found[_TM_BLOCK_LABELS[label]] = value
        if label == "JVM Overhead":
            break
    mem = breakdown_from_pools(found, "Final TaskExecutor Memory configuration")
    if mem is None:
        return None
    # the printed totals are authoritative when present
    mem.process = found.get("process", mem.process)
    mem.flink = found.get("flink", mem.flink)
    return mem


def parse_logged_breakdown(lines: Iterable[str] | str) -> TaskManagerMemory | None:
    """The effective TaskManager memory from a log: the last "Final TaskExecutor Memory configuration" block
    (with or without log prefixes), else the last ``TaskExecutorProcessSpec {...}`` (YARN/K8s resource manager),
    else the last ``-D taskmanager.memory.*=<n>b`` dynamic properties. None when none of them is there."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    lines = list(lines)
    for i in range(len(lines) - 1, -1, -1):
        if "Final TaskExecutor Memory configuration:" in lines[i]:
            mem = _parse_block(lines[i + 1:i + 40])
            if mem is not None:
                return mem
    for line in reversed(lines):
        if "TaskExecutorProcessSpec {" in line:
            pools = {}
            spec = line.split("TaskExecutorProcessSpec {", 1)[1]
            for name, value in re.findall(r"(\w+)=([^,}]*(?:\([^)]*\))?)", spec):
                if name in _SPEC_FIELDS and _value_bytes(value) is not None:
                    pools[_SPEC_FIELDS[name]] = _value_bytes(value)
            mem = breakdown_from_pools(pools, "TaskExecutorProcessSpec")
            if mem is not None:
                return mem
    for line in reversed(lines):
        if "-D taskmanager.memory." in line:
            pools = {_DYNAMIC_FIELDS[k]: int(v)
                     for k, v in re.findall(r"-D\s*(taskmanager\.memory\.[\w.-]+)=(\d+)b?", line)
                     if k in _DYNAMIC_FIELDS}
            mem = breakdown_from_pools(pools, "TaskManager dynamic properties")
            if mem is not None:
                return mem
    return None


_JM_LINE = re.compile(r"(Total Process Memory|Total Flink Memory|JVM Heap|Off-heap|JVM Metaspace|JVM Overhead):"
                      r"\s+(.+?)\s*$")


def parse_logged_jobmanager_breakdown(lines: Iterable[str] | str) -> JobManagerMemory | None:
    """The last "Final Master Memory configuration" block of a JobManager log."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    lines = list(lines)
    names = {"Total Process Memory": "process", "Total Flink Memory": "flink", "JVM Heap": "heap",
             "Off-heap": "off_heap", "JVM Metaspace": "metaspace", "JVM Overhead": "overhead"}
    for i in range(len(lines) - 1, -1, -1):
        if "Final Master Memory configuration:" in lines[i]:
            found = {}
            for line in lines[i + 1:i + 12]:
                m = _JM_LINE.search(line)
                if m and _value_bytes(m.group(2)) is not None:
                    found[names[m.group(1)]] = _value_bytes(m.group(2))
            if len(found) == len(names):
                return JobManagerMemory(**found, notes=["read from Final Master Memory configuration"])
    return None



# ---------------------------------------------------------------------------------------------------------------


def summarize(mem: TaskManagerMemory | JobManagerMemory) -> str:
    """A few lines of human text over a breakdown."""
    f = format_size
    if isinstance(mem, JobManagerMemory):
        text = (f"JobManager process {f(mem.process)} = flink {f(mem.flink)} (heap {f(mem.heap)} + off-heap "
                f"{f(mem.off_heap)}) + metaspace {f(mem.metaspace)} + overhead {f(mem.overhead)}")
    else:
        text = (f"TaskManager process {f(mem.process)} = flink {f(mem.flink)} + metaspace {f(mem.metaspace)} + "
                f"overhead {f(mem.overhead)}\n"
                f"  JVM heap {f(mem.jvm_heap)} (-Xmx): framework {f(mem.framework_heap)} + task {f(mem.task_heap)}\n"
                f"  managed {f(mem.managed)} (RocksDB / batch operators, off-heap)\n"
                f"  JVM direct {f(mem.direct)} (-XX:MaxDirectMemorySize): framework {f(mem.framework_off_heap)} + "
                f"task {f(mem.task_off_heap)} + network {f(mem.network)}\n"
                f"  metaspace {f(mem.metaspace)} (-XX:MaxMetaspaceSize)")
    for note in mem.notes:
        text += f"\n  note: {note}"
    return text
