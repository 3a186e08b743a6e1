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
    templates = {
        "head": "{who} ran out of direct memory {count} time(s){after}{allocated}. Direct memory limit: {budget}. ",
        "after": " after running {times}",
        "allocated by": "; the buffers were allocated by {top}",
        "pool head": "{who} could not start: its network buffer pool did not fit into the JVM's direct memory. "
                     "Flink's limit would be {budget}. ",
        "unknown budget": "unknown (no memory settings or start-up breakdown in the incident)",
        "jobmanager budget": "the JobManager's off-heap memory, {off_heap} ({source})",
        "taskmanager budget": "{direct} JVM direct memory = framework off-heap {framework} + task off-heap {task} + "
                              "network {network} ({source})",
        "jobmanager": "The JobManager's direct memory is bounded by jobmanager.memory.off-heap.size: its RPC and "
                      "netty buffers, operator coordinators and user code run at submission share it.",
        "network-memory-exceeds-max-direct": "The network buffer pool needs {required} MB but only {allocated} MB of "
                                             "direct memory could be allocated: the JVM was started with a "
                                             "-XX:MaxDirectMemorySize below Flink's own network memory{override}, so "
                                             "the TaskManager cannot start.",
        "override": " ({flag} in {key})",
        "direct-memory-leak": "This is a leak: {leak}. A bigger budget only postpones the next OOM.",
        "framework-off-heap-too-small": "The buffers belong to Flink's own network stack: framework off-heap memory "
                                        "is too small for the number of connections.",
        "user-code-direct-memory": "The job's code or one of its libraries allocates direct buffers{budget}",
        "nothing budgeted": ", and taskmanager.memory.task.off-heap.size is 0: nothing is budgeted for them.",
        "over budget": " beyond the task off-heap budget.",
        "faster repeat": "the restarted attempt ran out after {after}, the one before after {before}, in the same "
                         "TaskManager JVM: the memory of the failed attempt was never released",
        "slow growth": "each attempt ran for {durations} before running out: usage grows slowly and is never given "
                       "back",
        "oom note": "the OOM{top}",
        "exit on oom": "Leaked direct memory survives task restarts inside the same JVM: let the TaskManager exit on "
                       "an OutOfMemoryError so a fresh process replaces it (Kubernetes/YARN start a new one; a "
                       "standalone cluster needs a supervisor that restarts it).",
        "find the leak": "Track native memory while the job runs and look for a growing 'Other' (direct buffers); in "
                         "a heap dump, DirectByteBuffer objects still referenced from the job's classes are the "
                         "leak. Buffers kept in fields or static collections, or clients that are never closed in "
                         "close(), are the usual culprits.",
        "first task off-heap": "a task off-heap budget of {amount} ({per_slot} per slot x {slots}, at least "
                               "{minimum}) where there was none",
        "twice the task off-heap": "twice the task off-heap budget ({before} → {after})",
        "grow task off-heap": "Raise -XX:MaxDirectMemorySize with {how}; the other pools keep their size "
                              "(model-checked).{stopgap}",
        "stopgap": " A stopgap: it buys time between failures while the leak is fixed.",
        "grow jobmanager off-heap": "Twice the JobManager's off-heap memory ({before} → {after}), which bounds its "
                                    "direct memory; the other JobManager pools keep their size "
                                    "(model-checked).{stopgap}",
        "jobmanager stopgap": " A stopgap while the leak is fixed.",
        "grow framework off-heap": "Twice the framework off-heap memory ({before} → {after}) for Flink's netty "
                                   "buffers at this parallelism; the other pools keep their size (model-checked).",
        "remove the override": "{flag} overrides the limit Flink computes (framework + task off-heap + network "
                               "memory) and leaves the network buffer pool {missing} MB short; remove it and size "
                               "direct memory with taskmanager.memory.* instead.",
        "JVM direct memory limit": "The JVM was started with less direct memory than Flink's network memory "
                                   "({required} MB): in a local/IDE run give the JVM -XX:MaxDirectMemorySize of at "
                                   "least {at_least}m, or lower taskmanager.memory.network.max; never set "
                                   "-XX:MaxDirectMemorySize by hand on a cluster.",
    }

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
        budget = self.say("unknown budget")
        jobmanager = first.process == "jobmanager"
        if jobmanager:
            jm_mem, jm_source = oom.jobmanager_memory(incident)
            if jm_mem is not None and jm_mem.off_heap:
                budget = self.say("jobmanager budget", off_heap=oom.mib_text(jm_mem.off_heap), source=jm_source)
        elif mem is not None:
            budget = self.say("taskmanager budget", direct=oom.mib_text(mem.direct),
                              framework=oom.mib_text(mem.framework_off_heap), task=oom.mib_text(mem.task_off_heap),
                              network=oom.mib_text(mem.network), source=sizing.source)
        top = self._top(frames)
        times = ", ".join(oom.duration_text(u) for u in uptimes if u is not None)
        who = first.task or ("The JobManager" if first.process == "jobmanager" else "A TaskManager")
        if pool:
            summary = self.say("pool head", who=who, budget=budget)
        else:
            summary = self.say("head", who=who, count=len(found), budget=budget,
                               after=self.say("after", times=times) if times else "",
                               allocated=self.say("allocated by", top=top) if top else "")
        flag = self._max_direct_override(incident)
        if jobmanager and cause != "direct-memory-leak":
            summary += self.say("jobmanager")
        elif cause == "network-memory-exceeds-max-direct":
            summary += self.say(cause, required=pool["required"], allocated=pool["allocated"],
                                override=self.say("override", flag=flag[1], key=flag[0]) if flag else "")
        elif cause == "direct-memory-leak":
            summary += self.say(cause, leak=leak)
        elif cause == "framework-off-heap-too-small":
            summary += self.say(cause)
        else:
            zero = mem is not None and mem.task_off_heap == 0
            summary += self.say(cause, budget=self.say("nothing budgeted" if zero else "over budget"))
        patches = self._patches(incident, cause, sizing, pool, jobmanager=jobmanager)
        notes = {0: self.say("oom note", top=f" ({top})" if top else "")}
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
                return self.say("faster repeat", after=oom.duration_text(ub), before=oom.duration_text(ua))
        long_runs = [u for u in uptimes if u is not None and u >= LONG_RUN_S]
        if len(found) >= 2 and len(long_runs) == len([u for u in uptimes if u is not None]) and long_runs:
            return self.say("slow growth", durations=", ".join(oom.duration_text(u) for u in long_runs))
        return None

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
                patches.append(self.flink_patch(incident, "taskmanager.jvm-exit-on-oom", "true",
                                                self.say("exit on oom")))
            patches.append(self.ops_patch(
                "find the leak", self.say("find the leak"),
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
            how = self.say("first task off-heap", amount=oom.mib_text(amount),
                           per_slot=oom.mib_text(CONNECTOR_BUDGET_PER_SLOT), slots=sizing.slots,
                           minimum=oom.mib_text(MIN_CONNECTOR_BUDGET))
            grow: float | int = amount
        else:
            how = self.say("twice the task off-heap", before=oom.mib_text(mem.task_off_heap),
                           after=oom.mib_text(2 * mem.task_off_heap))
            grow = 2.0
        try:
            changes = oom.changes_for(sizing, "direct", grow)
        except (ValueError, MemoryConfigError):
            return []
        reason = self.say("grow task off-heap", how=how, stopgap=self.say("stopgap") if stopgap else "")
        return [self.flink_patch(incident, key, value, reason) for key, value in changes.items()]

    def _grow_jobmanager_off_heap(self, incident: Incident, stopgap: bool) -> list[Patch]:
        """The JobManager's direct memory is its off-heap memory (RPC, netty, coordinators, user code at submission)."""
        mem, _ = oom.jobmanager_memory(incident)
        try:
            changes = oom.grow_jobmanager_pool(incident, "off_heap", 2.0)
        except (ValueError, MemoryConfigError):
            return []
        known = bool(mem and mem.off_heap)
        reason = self.say("grow jobmanager off-heap",
                          before=oom.mib_text(mem.off_heap) if known else "the current size",
                          after=oom.mib_text(2 * mem.off_heap) if known else "double",
                          stopgap=self.say("jobmanager stopgap") if stopgap else "")
        return [self.flink_patch(incident, key, value, reason) for key, value in changes.items()]

    def _grow_framework(self, incident: Incident, sizing: oom.TaskManagerSizing) -> list[Patch]:
        mem = sizing.memory
        if mem is None or not sizing.model:
            return []
        try:
            changes = oom.grow_framework_off_heap(sizing, mem.framework_off_heap)
        except (ValueError, MemoryConfigError):
            return []
        reason = self.say("grow framework off-heap", before=oom.mib_text(mem.framework_off_heap),
                          after=oom.mib_text(2 * mem.framework_off_heap))
        return [self.flink_patch(incident, key, value, reason) for key, value in changes.items()]

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
            return [self.flink_patch(incident, key, rest or None,
                                     self.say("remove the override", flag=text, missing=pool["missing"]))]
        return [self.ops_patch("JVM direct memory limit", self.say(
            "JVM direct memory limit", required=pool["required"], at_least=int(pool["required"]) + 256))]
