"""``java.lang.OutOfMemoryError: Direct buffer memory``: who allocates direct buffers, and whether it is a leak."""
from __future__ import annotations

import re

from flink_runbooks.evidence.memory import oom
from flink_runbooks.evidence.memory import MemoryConfigError
from flink_runbooks.model import Finding, Incident, Patch, RootCause
from flink_runbooks.vocabulary.units import format_size
from flink_runbooks.detectors.base import Detector
from flink_runbooks.vocabulary.wordings import Wording

CONNECTOR_BUDGET_PER_SLOT = 128 << 20  # task off-heap per slot for connector/user direct buffers (one client each)
MIN_CONNECTOR_BUDGET = 256 << 20
LEAK_SPEEDUP = 0.5  # a restarted attempt that runs out in half the time or less did not get its memory back
LONG_RUN_S = 3600

LIBRARY_FRAME = (r"io\.netty\.|org\.apache\.(?:parquet|orc|kafka|pulsar|arrow|hadoop|avro)\.|org\.xerial\.snappy\.|"
                 r"com\.github\.luben\.zstd\.|org\.elasticsearch\.|co\.elastic\.|software\.amazon\.awssdk\.|"
                 r"com\.amazonaws\.|io\.grpc\.|com\.google\.cloud\.|net\.jpountz\.lz4\.|org\.rocksdb\.")
FLINK_NET_FRAME = r"org\.apache\.flink\.runtime\.(?:io\.network\.netty|rest|rpc)\.|org\.apache\.pekko\.|akka\.remote\."
USER_JAR_FRAME = oom.USER_JAR_FRAME
FRAMES = (USER_JAR_FRAME, LIBRARY_FRAME, FLINK_NET_FRAME)
NETWORK_POOL = re.compile(r"Could not allocate enough memory segments for NetworkBufferPool \(required \(Mb\): "
                          r"(?P<required>\d+), allocated \(Mb\): (?P<allocated>\d+), "
                          r"missing \(Mb\): (?P<missing>\d+)\)", re.I)
ALLOCATOR_FRAME = re.compile(r"\.(?:allocate\w*|newChunk|newDirectBuffer|directBuffer|ioBuffer|setInput|"
                             r"reserveMemory)\(")
MAX_DIRECT_FLAG = re.compile(r"-XX:MaxDirectMemorySize=\S+")
JVM_OPTS_KEYS = ("env.java.opts.taskmanager", "env.java.opts.all", "env.java.opts")

# Flink's enriched OutOfMemoryError message (TaskManager, 1.12+).
TM_DIRECT_MESSAGE = ("java.lang.OutOfMemoryError: Direct buffer memory. The direct out-of-memory error has occurred. This can "
                     "mean two things: either job(s) require(s) a larger size of JVM direct memory or there is a direct memory "
                     "leak. The direct memory can be allocated by user code or some of its dependencies. In this case "
                     "'taskmanager.memory.task.off-heap.size' configuration option should be increased.")


class OomDirectMemory(Detector):
    slug = "oom-direct-memory"
    title = "OutOfMemoryError: Direct buffer memory"
    category = "memory"
    meaning = ("The JVM reached -XX:MaxDirectMemorySize (framework off-heap + task off-heap + network memory): "
               "something allocated more direct buffers than that budget, or never released them.")
    exception_classes = ("java.lang.OutOfMemoryError",)
    versions = "1.10 – 2.x (Flink appends its explanation naming task.off-heap.size and framework.off-heap.size)"
    layer = 0
    config_keys = (
        "taskmanager.memory.process.size",
        "taskmanager.memory.task.off-heap.size",
        "taskmanager.memory.framework.off-heap.size",
        "taskmanager.memory.network.fraction",
        "taskmanager.numberOfTaskSlots",
        "taskmanager.jvm-exit-on-oom",
        "env.java.opts.taskmanager",
    )
    signatures = (
        r"OutOfMemoryError: (?:Direct buffer memory|Cannot reserve \d+ bytes of direct buffer memory|"
        r"Could not allocate enough memory segments for NetworkBufferPool)",
        *oom.CONTEXT_SIGNATURES,
    )
    frames = (oom.USER_JAR_FRAME_PREFILTER, LIBRARY_FRAME, FLINK_NET_FRAME)
    root_causes = (
        RootCause("user-code-direct-memory", "The job's code or a connector/format library allocates direct "
                  "buffers (netty, Parquet/ORC codecs, Kafka/Pulsar/ES/AWS clients) beyond the task off-heap budget.",
                  "Allocating frames in the job jar or in a client/format library; "
                  "taskmanager.memory.task.off-heap.size small or at its default 0.",
                  patches=("flink:taskmanager.memory.process.size", "flink:taskmanager.memory.task.off-heap.size", "flink:taskmanager.memory.*")),
        RootCause("direct-memory-leak", "Direct buffers are allocated and never released: the memory does not come "
                  "back when the task restarts, so each attempt runs out sooner (or after hours of slow growth).",
                  "The OOM repeats in the same TaskManager JVM and the restarted attempt runs out in half the time or "
                  "less, or repeats after running for hours.",
                  patches=("flink:taskmanager.jvm-exit-on-oom", "flink:taskmanager.memory.process.size",
                           "flink:taskmanager.memory.task.off-heap.size", "ops:find the leak", "flink:taskmanager.memory.*")),
        RootCause("framework-off-heap-too-small", "Flink's own network stack (netty) needs more direct memory than "
                  "framework off-heap gives it: many connections at high parallelism.",
                  "The OOM is in Flink's shaded netty / network stack (LocalTransportException, 'Flink Netty' "
                  "threads), no job or library frames.",
                  patches=("flink:jobmanager.memory.off-heap.size", "flink:jobmanager.memory.process.size",
                           "flink:taskmanager.memory.framework.off-heap.size",
                           "flink:taskmanager.memory.process.size", "flink:taskmanager.memory.*", "flink:jobmanager.memory.*")),
        RootCause("network-memory-exceeds-max-direct", "The network buffer pool itself did not fit under the JVM's "
                  "direct memory limit: -XX:MaxDirectMemorySize was overridden below Flink's network memory.",
                  "'Could not allocate enough memory segments for NetworkBufferPool' at TaskManager start, often "
                  "with -XX:MaxDirectMemorySize in env.java.opts.",
                  patches=("flink:env.java.opts.taskmanager", "ops:JVM direct memory limit")),
    )

    wordings = (
        Wording("oom-direct-memory", r"OutOfMemoryError:\s*Direct buffer memory",
                "1.3 – 2.x", "the JVM (java.nio.Bits)", "java.lang.OutOfMemoryError: Direct buffer memory"),
        Wording("oom-direct-memory", r"The direct out-of-memory error has occurred",
                "1.10 – 2.x", "TaskManagerExceptionUtils / ClusterEntryPointExceptionUtils", TM_DIRECT_MESSAGE),
        Wording("oom-direct-memory", r"Could not allocate enough memory segments for NetworkBufferPool \(required \(M[Bb]\): \d+",
                "1.9 – 2.x", "NetworkBufferPool.<init> (\"(required (Mb): ...\" in 1.9 – 1.11, \"(required (MB): ...\" in 1.20)",
                "java.lang.OutOfMemoryError: Could not allocate enough memory segments for NetworkBufferPool (required (Mb): 1024, allocated (Mb): 931, missing (Mb): 93). Cause: Direct buffer memory."),
    )

    def detect(self, incident: Incident) -> list[Finding]:
        found = oom.occurrences(incident, "direct")
        if not found:
            return []
        first = next((o for o in found if o.event.frames), found[0])
        frames = oom.matching_frames(first.event, FRAMES)
        uptimes = oom.uptimes(incident, found)
        sizing = oom.taskmanager_sizing(incident)
        pool = NETWORK_POOL.search(first.message)
        leak = self._leak(incident, found, uptimes)
        consumer = self._consumer(first, frames)
        if pool:
            cause = "network-memory-exceeds-max-direct"
        elif leak:
            cause = "direct-memory-leak"
        elif consumer == "flink":
            cause = "framework-off-heap-too-small"
        else:
            cause = "user-code-direct-memory"

        mem = sizing.memory
        budget = "unknown (no memory settings or start-up breakdown in the incident)"
        jobmanager = first.process == "jobmanager"
        if jobmanager:
            jm_mem, jm_source = oom.jobmanager_memory(incident)
            if jm_mem is not None and jm_mem.off_heap:
                budget = f"the JobManager's off-heap memory, {oom.mib_text(jm_mem.off_heap)} ({jm_source})"
        elif mem is not None:
            budget = (f"{oom.mib_text(mem.direct)} JVM direct memory = framework off-heap "
                      f"{oom.mib_text(mem.framework_off_heap)} + task off-heap {oom.mib_text(mem.task_off_heap)} + "
                      f"network {oom.mib_text(mem.network)} ({sizing.source})")
        top = self._top(frames)
        times = ", ".join(oom.duration_text(u) for u in uptimes if u is not None)
        who = first.task or ("The JobManager" if first.process == "jobmanager" else "A TaskManager")
        if pool:
            summary = (f"{who} could not start: its network buffer pool did not fit into the JVM's direct memory. "
                       f"Flink's limit would be {budget}. ")
        else:
            summary = (f"{who} ran out of direct memory {len(found)} time(s)"
                       f"{f' after running {times}' if times else ''}"
                       f"{f'; the buffers were allocated by {top}' if top else ''}. Direct memory limit: {budget}. ")
        flag = self._max_direct_override(incident)
        if jobmanager and cause != "direct-memory-leak":
            summary += ("The JobManager's direct memory is bounded by jobmanager.memory.off-heap.size: its RPC and "
                        "netty buffers, operator coordinators and user code run at submission share it.")
        else:
            summary += self._verdict(cause, leak, pool, mem, f" ({flag[1]} in {flag[0]})" if flag else "")
        patches = self._patches(incident, cause, sizing, pool, jobmanager=jobmanager)
        notes = {0: f"the OOM{' (' + top + ')' if top else ''}"}
        evidence = [first.event]
        oom.repeats_as_evidence(found, uptimes, evidence, notes)
        return [self.finding(
            cause, summary, evidence, confidence=0.9 if cause != "user-code-direct-memory" or frames else 0.7,
            patches=patches, notes=notes,
            details={
                **oom.occurrence_details(found, uptimes),
                "leak_evidence": leak,
                "allocating_frames": [oom.frame_class(f) for f in frames[:5]],
                "jvm_direct_memory": format_size(mem.direct) if mem else None,
                "framework_off_heap": format_size(mem.framework_off_heap) if mem else None,
                "task_off_heap": format_size(mem.task_off_heap) if mem else None,
                "network_memory": format_size(mem.network) if mem else None,
                "slots": sizing.slots,
                "memory_source": sizing.source,
                "network_pool_mb": pool.groupdict() if pool else None,
            },
        )]

    @staticmethod
    def _consumer(first: oom.OomOccurrence, frames: list[str]) -> str:
        """``user`` (job jar or a client/format library), ``flink`` (Flink's network stack) or ``unknown``."""
        for frame in frames:
            cls = oom.frame_class(frame)
            if re.search(USER_JAR_FRAME, frame) or not cls.startswith(("org.apache.flink.", "org.apache.pekko.",
                                                                        "akka.")):
                return "user"
            return "flink"
        if any(c.cls.startswith("org.apache.flink.runtime.io.network.netty") for c in first.event.chain):
            return "flink"
        return "unknown"

    @staticmethod
    def _top(frames: list[str]) -> str | None:
        """The allocating frame: the first that allocates a buffer (a handler that only reports the OOM sits above it
        in the flattened trace), else the first frame."""
        allocating = next((f for f in frames if ALLOCATOR_FRAME.search(f)), frames[0] if frames else None)
        return oom.frame_class(allocating) if allocating else None

    def _leak(self, incident: Incident, found: list[oom.OomOccurrence], uptimes: list[float | None]) -> str | None:
        """Why the repeats look like a leak, or None."""
        for (a, ua), (b, ub) in zip(zip(found, uptimes), zip(found[1:], uptimes[1:])):
            if ua and ub is not None and ua >= 1 and ub <= ua * LEAK_SPEEDUP and oom.same_process(incident, a, b):
                return (f"the restarted attempt ran out after {oom.duration_text(ub)}, the one before after "
                        f"{oom.duration_text(ua)}, in the same TaskManager JVM: the memory of the failed attempt was "
                        f"never released")
        long_runs = [u for u in uptimes if u is not None and u >= LONG_RUN_S]
        if len(found) >= 2 and len(long_runs) == len([u for u in uptimes if u is not None]) and long_runs:
            return (f"each attempt ran for {', '.join(oom.duration_text(u) for u in long_runs)} before running out: "
                    f"usage grows slowly and is never given back")
        return None

    @staticmethod
    def _verdict(cause: str, leak: str | None, pool, mem, override: str = "") -> str:
        if cause == "network-memory-exceeds-max-direct":
            return (f"The network buffer pool needs {pool['required']} MB but only {pool['allocated']} MB of direct "
                    f"memory could be allocated: the JVM was started with a -XX:MaxDirectMemorySize below Flink's "
                    f"own network memory{override}, so the TaskManager cannot start.")
        if cause == "direct-memory-leak":
            return f"This is a leak: {leak}. A bigger budget only postpones the next OOM."
        if cause == "framework-off-heap-too-small":
            return ("The buffers belong to Flink's own network stack: framework off-heap memory is too small for the "
                    "number of connections.")
        zero = mem is not None and mem.task_off_heap == 0
        return ("The job's code or one of its libraries allocates direct buffers"
                + (", and taskmanager.memory.task.off-heap.size is 0: nothing is budgeted for them." if zero else
                   " beyond the task off-heap budget."))

    def _patches(self, incident: Incident, cause: str, sizing: oom.TaskManagerSizing, pool,
                 jobmanager: bool) -> list[Patch]:
        if cause == "network-memory-exceeds-max-direct":
            return self._network_pool_patches(incident, pool)
        patches: list[Patch] = []
        if jobmanager:
            patches += self._grow_jobmanager_off_heap(incident, stopgap=cause == "direct-memory-leak")
        elif cause == "framework-off-heap-too-small":
            patches += self._grow_framework(incident, sizing)
        else:
            patches += self._grow_task_off_heap(incident, sizing, stopgap=cause == "direct-memory-leak")
        if cause == "direct-memory-leak":
            current = incident.config.get_bool("taskmanager.jvm-exit-on-oom", False)
            if not current and not jobmanager:
                patches.append(self.flink_patch(
                    incident, "taskmanager.jvm-exit-on-oom", "true",
                    "Leaked direct memory survives task restarts inside the same JVM: let the TaskManager exit on an "
                    "OutOfMemoryError so a fresh process replaces it (Kubernetes/YARN start a new one; a standalone "
                    "cluster needs a supervisor that restarts it)."))
            patches.append(self.ops_patch(
                "find the leak", "Track native memory while the job runs and look for a growing 'Other' (direct "
                "buffers); in a heap dump, DirectByteBuffer objects still referenced from the job's classes are the "
                "leak. Buffers kept in fields or static collections, or clients that are never closed in close(), "
                "are the usual culprits.",
                "env.java.opts.taskmanager: \"-XX:NativeMemoryTracking=summary\"\n"
                "jcmd <taskmanager-pid> VM.native_memory summary     # repeat and compare 'Other'\n"
                "jcmd <taskmanager-pid> GC.heap_dump /tmp/tm.hprof    # who holds the DirectByteBuffers"))
        return patches

    def _grow_task_off_heap(self, incident: Incident, sizing: oom.TaskManagerSizing, stopgap: bool) -> list[Patch]:
        mem = sizing.memory
        if mem is None or not sizing.model:
            return []
        if mem.task_off_heap == 0:
            amount = max(MIN_CONNECTOR_BUDGET, CONNECTOR_BUDGET_PER_SLOT * sizing.slots)
            how = (f"a task off-heap budget of {oom.mib_text(amount)} ({oom.mib_text(CONNECTOR_BUDGET_PER_SLOT)} per "
                   f"slot x {sizing.slots}, at least {oom.mib_text(MIN_CONNECTOR_BUDGET)}) where there was none")
            grow: float | int = amount
        else:
            how = f"twice the task off-heap budget ({oom.mib_text(mem.task_off_heap)} → " \
                  f"{oom.mib_text(2 * mem.task_off_heap)})"
            grow = 2.0
        try:
            changes = oom.changes_for(sizing, "direct", grow)
        except (ValueError, MemoryConfigError):
            return []
        reason = (f"Raise -XX:MaxDirectMemorySize with {how}; the other pools keep their size (model-checked)."
                  + (" A stopgap: it buys time between failures while the leak is fixed." if stopgap else ""))
        return [self.flink_patch(incident, key, value, reason) for key, value in changes.items()]

    def _grow_jobmanager_off_heap(self, incident: Incident, stopgap: bool) -> list[Patch]:
        """The JobManager's direct memory is its off-heap memory (RPC, netty, coordinators, user code at submission)."""
        mem, _ = oom.jobmanager_memory(incident)
        try:
            changes = oom.grow_jobmanager_pool(incident, "off_heap", 2.0)
        except (ValueError, MemoryConfigError):
            return []
        current = oom.mib_text(mem.off_heap) if mem and mem.off_heap else "the current size"
        reason = (f"Twice the JobManager's off-heap memory ({current} → "
                  f"{oom.mib_text(2 * mem.off_heap) if mem and mem.off_heap else 'double'}), which bounds its direct "
                  f"memory; the other JobManager pools keep their size (model-checked)."
                  + (" A stopgap while the leak is fixed." if stopgap else ""))
        return [self.flink_patch(incident, key, value, reason) for key, value in changes.items()]

    def _grow_framework(self, incident: Incident, sizing: oom.TaskManagerSizing) -> list[Patch]:
        mem = sizing.memory
        if mem is None or not sizing.model:
            return []
        try:
            changes = oom.grow_framework_off_heap(sizing, mem.framework_off_heap)
        except (ValueError, MemoryConfigError):
            return []
        return [self.flink_patch(
            incident, key, value,
            f"Twice the framework off-heap memory ({oom.mib_text(mem.framework_off_heap)} → "
            f"{oom.mib_text(2 * mem.framework_off_heap)}) for Flink's netty buffers at this parallelism; the other "
            f"pools keep their size (model-checked).") for key, value in changes.items()]

    @staticmethod
    def _max_direct_override(incident: Incident) -> tuple[str, str] | None:
        """(key, flag) of a -XX:MaxDirectMemorySize in the JVM options, which wins over Flink's own flag."""
        for key in JVM_OPTS_KEYS:
            value = incident.config.get(key)
            m = MAX_DIRECT_FLAG.search(value or "")
            if m:
                return key, m.group(0)
        return None

    def _network_pool_patches(self, incident: Incident, pool) -> list[Patch]:
        flag = self._max_direct_override(incident)
        if flag:
            key, text = flag
            rest = " ".join(MAX_DIRECT_FLAG.sub("", incident.config.get(key)).split())
            return [self.flink_patch(
                incident, key, rest or None,
                f"{text} overrides the limit Flink computes (framework + task off-heap + network memory) and leaves "
                f"the network buffer pool {pool['missing']} MB short; remove it and size direct memory with "
                f"taskmanager.memory.* instead.")]
        return [self.ops_patch(
            "JVM direct memory limit",
            f"The JVM was started with less direct memory than Flink's network memory ({pool['required']} MB): in a "
            f"local/IDE run give the JVM -XX:MaxDirectMemorySize of at least {int(pool['required']) + 256}m, or "
            f"lower taskmanager.memory.network.max; never set -XX:MaxDirectMemorySize by hand on a cluster.")]
