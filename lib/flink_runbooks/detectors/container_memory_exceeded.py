"""A TaskManager (or JobManager) container killed by YARN, Kubernetes or the kernel for using more memory than its
limit: which memory was outside Flink's budget, and how much more the budget needs."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from flink_runbooks.evidence.memory import MemoryConfigError, TaskManagerMemory, derive_jobmanager_memory, derive_taskmanager_memory, grow_pool
from flink_runbooks.evidence.memory.incident import (KILL_SIGNATURES, MODEL_SINCE, STATE_BACKEND_SIGNATURES, ContainerKill, apply_changes,
                               breakdown_rows, config_evidence, container_memory_kills, deployment_of,
                               distinct_containers,
                               effective_taskmanager_memory, model_applies, rocksdb_fix, rocksdb_memory, size_text,
                               user_memory_config)
from flink_runbooks.model import Evidence, Finding, Incident, RootCause, earliest_ts
from flink_runbooks.vocabulary.units import parse_memory_size
from flink_runbooks.detectors.base import Detector
from flink_runbooks.vocabulary.wordings import Wording

MIB = 1 << 20
MIN_OVERHEAD_GROWTH = 256 * MIB  # below this a kill is rarely cured: native usage fluctuates by more
OVERHEAD_DEFAULTS = {"taskmanager.memory.jvm-overhead.fraction": 0.1, "taskmanager.memory.jvm-overhead.min": 192 * MIB,
                     "taskmanager.memory.jvm-overhead.max": 1 << 30}
OVERHEAD_DEFAULT_MAX = 1 << 30
EXCESS_MARGIN = 1.5  # observed excess x margin: the usage kept growing after the sample YARN reports
VMEM_RATIO_MARGIN = 1.2
# Before 1.10 a YARN container holds the JVM heap and a cutoff: everything else (metaspace, thread stacks, direct and
# native memory, RocksDB) must fit into max(containerized.heap-cutoff-min, ratio x container). Defaults and keys from
# ResourceManagerOptions of the 1.9.3 jar (yarn.heap-cutoff-* are their deprecated spellings).
CUTOFF_RATIO, CUTOFF_MIN = "containerized.heap-cutoff-ratio", "containerized.heap-cutoff-min"
LEGACY_CUTOFF_KEYS = {CUTOFF_RATIO: "yarn.heap-cutoff-ratio", CUTOFF_MIN: "yarn.heap-cutoff-min"}
DEFAULT_CUTOFF_RATIO, DEFAULT_CUTOFF_MIN_MB = 0.25, 600
MAX_CUTOFF_RATIO = 0.5  # beyond this the heap shrinks too far: the container must grow instead
# YarnResourceManager (1.5 - 1.9) before it asks YARN for a TaskManager container
LEGACY_CONTAINER = re.compile(r"will be started with container size (?P<container>\d+) MB, JVM heap size (?P<heap>\d+) "
                              r"MB, JVM direct memory limit (?P<direct>\d+) MB")


class ContainerMemoryExceeded(Detector):
    slug = "container-memory-exceeded"
    title = "Container killed for exceeding its memory limit"
    category = "memory"
    meaning = ("YARN, Kubernetes or the kernel killed a Flink container because the process used more memory than "
               "the container's limit: native memory outside Flink's budget, not a Java OutOfMemoryError.")
    exception_classes = ()
    versions = "1.5 – 2.x (the FLIP-49 budget from 1.10, the YARN heap cutoff before; the kill lines are the platform's)"
    layer = 0
    config_keys = (
        "taskmanager.memory.process.size",
        "taskmanager.memory.jvm-overhead.min",
        "taskmanager.memory.jvm-overhead.max",
        "taskmanager.memory.jvm-overhead.fraction",
        "taskmanager.memory.task.off-heap.size",
        "state.backend.type",
        "state.backend.rocksdb.memory.managed",
        "state.backend.rocksdb.memory.fixed-per-slot",
        "taskmanager.numberOfTaskSlots",
    )
    signatures = (*KILL_SIGNATURES, *STATE_BACKEND_SIGNATURES, r"TaskExecutorProcessSpec \{",
                  r"will be started with container size \d+ MB, JVM heap size")
    root_causes = (
        RootCause("yarn-virtual-memory-check",
                  "YARN's virtual memory check killed the container although its physical memory was within the "
                  "limit: a false positive (the JVM reserves far more address space than it uses).",
                  "'is running beyond the VIRTUAL memory limit' / 'beyond virtual memory limits' with physical usage "
                  "below the physical limit.",
                  patches=("ops:yarn.nodemanager.vmem-check-enabled",)),
        RootCause("container-smaller-than-process",
                  "The container's memory limit is smaller than taskmanager.memory.process.size, so the JVM is "
                  "allowed to grow past what the container may use.",
                  "Observed limit (pod 'Limits: memory', YARN '... of N GB physical') below the effective process size.",
                  patches=("flink:taskmanager.memory.process.size", "ops:container memory limit", "flink:taskmanager.memory.*")),
        RootCause("rocksdb-native-memory",
                  "RocksDB's native memory is not bounded by managed memory (memory.managed: false or an unbudgeted "
                  "fixed-per-slot size), so it grows past the container.",
                  "A kill for physical memory / OOMKilled while the state backend is RocksDB with "
                  "state.backend.rocksdb.memory.managed: false or fixed-per-slot x slots above the budget.",
                  patches=("flink:state.backend.rocksdb.memory.managed",)),
        RootCause("jvm-overhead-too-small",
                  "The JVM overhead (thread stacks, GC and JIT structures, glibc malloc arenas, native libraries) is "
                  "at Flink's default size, made for a plain JVM, and cannot absorb the process's native memory.",
                  "A kill for physical memory / OOMKilled with the JVM overhead at its defaults (10 % of the process, "
                  "min 192m, max 1g) and no unbounded RocksDB.",
                  patches=("flink:taskmanager.memory.jvm-overhead.max", "flink:taskmanager.memory.jvm-overhead.min",
                           "flink:taskmanager.memory.process.size", "ops:TaskManager memory configuration", "flink:taskmanager.memory.*")),
        RootCause("native-memory-outside-budget",
                  "Native memory beyond a JVM overhead that was already raised: glibc arenas, native leaks, "
                  "direct allocations of native libraries outside -XX:MaxDirectMemorySize.",
                  "A kill for physical memory / OOMKilled although jvm-overhead.fraction/min/max were set above "
                  "their defaults (or the overhead is 1g or more) and RocksDB is bounded.",
                  patches=("flink:taskmanager.memory.jvm-overhead.max", "flink:taskmanager.memory.jvm-overhead.min",
                           "flink:taskmanager.memory.process.size",
                           "ops:containerized.taskmanager.env.MALLOC_ARENA_MAX", "flink:taskmanager.memory.*")),
        RootCause("heap-cutoff-too-small",
                  "Before Flink 1.10, everything a YARN TaskManager uses besides its JVM heap (metaspace, threads, "
                  "direct and native memory, RocksDB) must fit into the container's cutoff, 25 % of the container "
                  "(at least 600 MB) by default; it did not.",
                  "A kill for physical memory on YARN by a release before 1.10 (start-up banner or legacy "
                  "taskmanager.heap.size configuration); the container size from the configuration or "
                  "YarnResourceManager's 'will be started with container size' line.",
                  patches=(f"flink:{CUTOFF_RATIO}", f"flink:{CUTOFF_MIN}", "flink:yarn.heap-cutoff-ratio",
                           "flink:yarn.heap-cutoff-min", "flink:taskmanager.heap.size", "flink:taskmanager.heap.mb")),
        RootCause("node-memory-pressure-eviction",
                  "Kubernetes evicted the pod because the node ran short of memory and the pod used more than its "
                  "memory request.",
                  "'The node was low on resource: memory. Container ... was using X, which exceeds its request of Y'.",
                  patches=("ops:TaskManager pod memory request",)),
        RootCause("jobmanager-container",
                  "The JobManager's container was killed for memory.",
                  "The killed container is the JobManager's (YARN container _000001, a jobmanager pod).",
                  patches=("flink:jobmanager.memory.jvm-overhead.max", "flink:jobmanager.memory.jvm-overhead.min",
                           "flink:jobmanager.memory.process.size", "flink:jobmanager.memory.*", "ops:jobmanager.memory.jvm-overhead.min")),
        RootCause("undetermined",
                  "A TaskManager container was killed for memory, but the incident holds no memory configuration, "
                  "so which pool outgrew its budget cannot be told.",
                  "A kill for physical memory / OOMKilled without the TaskManager's memory configuration (no config "
                  "file, no 'Final TaskExecutor Memory configuration' block in the logs).",
                  patches=("ops:TaskManager memory configuration",),
                  would_change="With the configuration, an overhead at its defaults points at the JVM overhead, "
                               "RocksDB with memory.managed: false at RocksDB, a container limit below the process "
                               "size at the container.",
                  next_evidence="the flink-conf.yaml / config.yaml the TaskManagers ran with, or the start of a "
                                "TaskManager log (its 'Final TaskExecutor Memory configuration' block); the pod's "
                                "limits (`kubectl describe pod <taskmanager-pod>`, or the YARN container size); the "
                                "state backend in use; for native growth, Native Memory Tracking "
                                "(env.java.opts.taskmanager: -XX:NativeMemoryTracking=summary, then "
                                "`jcmd <pid> VM.native_memory summary`)."),
    )

    wordings = (
        Wording("container-memory-exceeded", r"is running (?:[\d.]+[KMGT]?B )?beyond (?:physical|virtual) memory limits",
                "1.3 – 2.x", "YARN NodeManager (ContainersMonitorImpl), relayed by Flink's YARN resource manager",
                "Container [pid=4711,containerID=container_1573131122047_0007_01_000003] is running 212992B beyond the 'PHYSICAL' memory limit. Current usage: 4.0 GB of 4 GB physical memory used; is running beyond physical memory limits"),
    )

    templates = {
        "head": "{where} killed {containers} {what}{usage}.",
        "one container": "a container",
        "containers": "{count} containers",
        "usage": ": {usage} used of a {limit} limit",
        "at the limit": " at its {limit} limit",
        "budget": "Flink budgets {process} per TaskManager: heap {heap}, direct {direct}, managed {managed}, "
                  "metaspace {metaspace}, JVM overhead {overhead}.",
        "yarn-virtual-memory-check": "Physical usage was {usage} of {limit}: only the virtual-memory check tripped, a "
                                     "false positive for JVMs.",
        "container-smaller-than-process": "The container limit is below the process size Flink was given.",
        "rocksdb-native-memory": "{described}.",
        "jvm-overhead-too-small": "Everything outside heap, direct, managed and metaspace must fit into the "
                                  "{overhead} JVM overhead; it did not.",
        "default overhead": "default 192m-1g",
        "undetermined": "Root cause undetermined: without the TaskManager's memory configuration nothing shows which "
                        "pool (JVM overhead, RocksDB, the container limit) was outside the budget.",
        "heap-cutoff-too-small": "On Flink {version} the JVM heap gets the {container} container less a cutoff of "
                                 "{cutoff} ({how}){jvm}; metaspace, threads, direct and native memory{rocksdb} must "
                                 "fit into it, and they needed {excess} more.",
        "unknown excess": "an unknown amount",
        "cutoff by ratio": "{ratio} x the container",
        "cutoff by min": "the minimum of {minimum} MB, above {ratio} x the container",
        "jvm sizes": " (YarnResourceManager: JVM heap {heap} MB, direct memory limit {direct} MB)",
        "rocksdb before 1.10": ", and RocksDB, which no release before 1.10 bounds,",
        "raise cutoff": "A cutoff of {after} ({before} now) leaves the native memory room for what it used plus a "
                        "margin; the JVM heap shrinks by as much inside the same container.",
        "raise container": "The cutoff would take more than half of the container: grow the container to {size} "
                           "so that the JVM heap keeps its size beside the larger cutoff (on YARN this key sizes the "
                           "container).",
        "native-memory-outside-budget": "The overhead was already raised above Flink's defaults and native memory "
                                        "outgrew it anyway: look for glibc arenas or a native leak before adding "
                                        "more.",
        "note kill": "{platform}: killed ({kind}){usage}{exit_code}",
        "note kill usage": ", {usage} of {limit}",
        "note kill exit code": ", exit code {code}",
        "note exit code": "exit code {code}",
        "note same container": "the same container",
        "note rocksdb": "RocksDB memory setting",
        "disable vmem check": "Virtual memory is address space the JVM reserved (thread stacks, code cache, mapped "
                              "files, glibc arenas), not memory in use; the physical usage stayed within the limit. "
                              "Disable the check on the cluster side (no Flink setting changes it){raise_ratio}.",
        "raise ratio": ", or raise yarn.nodemanager.vmem-pmem-ratio to {ratio} (virtual/physical seen: {seen:.2f})",
        "guaranteed qos": "Give the TaskManager pods Guaranteed QoS: memory request = memory limit = "
                          "taskmanager.memory.process.size ({process}); pods that use more than they requested are "
                          "evicted first when the node runs short.",
        "the process size": "the process size",
        "configuration missing": "The TaskManager memory configuration is not in the incident: add the "
                                 "flink-conf.yaml/config.yaml or the TaskManager log (its 'Final TaskExecutor Memory "
                                 "configuration' block) to get computed sizes and a cause; no size is proposed "
                                 "without them.",
        "container limit": "Flink sizes the JVM for {process} but the container may only use {limit}: either make the "
                           "container limit (pod resources.limits.memory) at least {process}, or shrink "
                           "taskmanager.memory.process.size to the limit (below).",
        "malloc arenas": "glibc gives threads their own malloc arenas (up to 8 x CPU cores of them), which native "
                         "libraries fill and rarely return to the OS; capping the arenas keeps native memory near "
                         "what is in use. Then find what allocates natively (Native Memory Tracking: "
                         "-XX:NativeMemoryTracking=summary).",
        "grow overhead": "JVM overhead {before} -> {after}: {seen}; the overhead is the only pool that covers native "
                         "memory Flink does not manage.",
        "went over": "the container went {excess} over its limit",
        "hit the limit": "the container hit its limit",
        "overhead max": "The overhead's max must not be below its new min.",
        "fit the container": "Size the JVM for the memory the container may actually use.",
        "grow process": "The process (and the container Flink requests) grows by the added overhead; every other "
                        "pool keeps its size.",
        "rocksdb managed": "RocksDB bounded by the slot's managed memory",
        "rocksdb fixed": "A fixed size overrides the managed-memory bound and is not part of the TaskManager budget.",
        "grow managed": "Managed memory grows so RocksDB keeps the memory it was given, now inside the budget.",
        "set": "Set to {value}.",
        "raise jobmanager overhead": "Raise the JobManager's JVM overhead (and its process size by as much).",
        "jobmanager overhead": "The JobManager's native memory went past its container: {growth} more JVM overhead, "
                               "and the process grows by as much.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        kills = container_memory_kills(incident)
        if not kills:
            return []
        mem, source = effective_taskmanager_memory(incident)
        cut = _legacy_yarn(incident, _taskmanager_kills(kills))
        cause = self._cause(incident, kills, mem, cut)
        kill = next((k for k in kills if k.usage is not None), kills[0])
        patches, after = self._patches(incident, cause, kills, mem, cut)
        details = {
            "kills": [_kill_row(k) for k in kills],
            "memory_source": source,
            "deployment": deployment_of(incident),
        }
        if mem is not None:
            details["process_size"] = size_text(mem.process)
            details["jvm_overhead"] = size_text(mem.overhead)
            details["breakdown"] = breakdown_rows(mem)
        if after is not None:
            details["breakdown_after_patch"] = breakdown_rows(after)
        summary = self._summary(incident, cause, kills, kill, mem, cut)
        evidence = []
        for k in kills[:4]:
            usage = (self.say("note kill usage", usage=size_text(k.usage), limit=size_text(k.limit))
                     if k.usage is not None and k.limit is not None else "")
            exit_code = self.say("note kill exit code", code=k.exit_code) if k.exit_code else ""
            evidence.append(Evidence.of(k.event, self.say("note kill", platform=k.platform, kind=k.kind, usage=usage,
                                                          exit_code=exit_code)))
        for k in kills:
            evidence += [Evidence.of(ev, self.say("note exit code", code=k.exit_code) if k.exit_code
                                     else self.say("note same container")) for ev in k.supporting[:1]]
        if cause == "rocksdb-native-memory":
            for key in ("state.backend.rocksdb.memory.managed", "state.backend.rocksdb.memory.fixed-per-slot"):
                ev = config_evidence(incident, key, self.say("note rocksdb"))
                if ev is not None:
                    evidence.append(ev)
        confidence = 0.9 if mem is not None else 0.8 if cause == "heap-cutoff-too-small" else 0.4
        finding = self.finding(cause, summary, [], confidence=confidence, patches=patches,
                               details=details)
        finding.evidence = evidence[:8]
        finding.first_seen = earliest_ts([k.event for k in kills] + [ev for k in kills for ev in k.supporting])
        return [finding]

    # -- which memory was outside the budget --------------------------------------------------------------------

    def _cause(self, incident: Incident, kills: list[ContainerKill], mem: TaskManagerMemory | None,
               cut: _LegacyCutoff | None) -> str:
        if all(k.kind == "virtual" for k in kills):
            return "yarn-virtual-memory-check"
        if all(_jobmanager(k) for k in kills):
            return "jobmanager-container"
        tm_kills = _taskmanager_kills(kills)
        if all(k.kind == "evicted" for k in tm_kills):
            return "node-memory-pressure-eviction"
        if cut is not None:
            return "heap-cutoff-too-small"
        limits = [k.physical_limit for k in tm_kills if k.physical_limit]
        if mem is not None and limits and min(limits) < mem.process - MIB:
            return "container-smaller-than-process"
        rocks = rocksdb_memory(incident, mem)
        if rocks is not None and rocks.problem is not None:
            return "rocksdb-native-memory"
        if mem is None:
            # Without the configuration nothing shows the overhead at its defaults or RocksDB bounded: no cause.
            return "undetermined"
        if mem.overhead >= OVERHEAD_DEFAULT_MAX or _overhead_raised(incident):
            return "native-memory-outside-budget"
        return "jvm-overhead-too-small"

    def _growth(self, kills: list[ContainerKill], mem: TaskManagerMemory | None) -> int:
        """How much more the JVM overhead needs: the observed excess with a margin, at least MIN_OVERHEAD_GROWTH
        (and half the current overhead when the platform reports no usage, as Kubernetes does)."""
        # a kill at exactly the limit (cgroup, Kubernetes) says nothing about how far the process wanted to grow
        excess = max((k.excess for k in kills if k.excess), default=None)
        if excess is not None:
            wanted = int(excess * EXCESS_MARGIN)
        else:
            wanted = mem.overhead // 2 if mem is not None else MIN_OVERHEAD_GROWTH
        wanted = max(wanted, MIN_OVERHEAD_GROWTH)
        return math.ceil(wanted / (64 * MIB)) * 64 * MIB

    def _patches(self, incident: Incident, cause: str, kills: list[ContainerKill], mem: TaskManagerMemory | None,
                 cut: _LegacyCutoff | None):
        conf = user_memory_config(incident)
        version = incident.version_tuple
        deployment = deployment_of(incident)
        patches, changes = [], {}
        if cause == "yarn-virtual-memory-check":
            ratios = [k.usage / k.physical_limit for k in kills if k.usage and k.physical_limit]
            ratio = math.ceil(max(ratios) * VMEM_RATIO_MARGIN * 10) / 10 if ratios else None
            snippet = ("<!-- yarn-site.xml on every NodeManager, then restart the NodeManagers -->\n"
                       "<property>\n  <name>yarn.nodemanager.vmem-check-enabled</name>\n  <value>false</value>\n"
                       "</property>")
            if ratio:
                snippet += ("\n<!-- or keep the check with room for the JVM's address space -->\n<property>\n"
                            f"  <name>yarn.nodemanager.vmem-pmem-ratio</name>\n  <value>{ratio}</value>\n</property>")
            patches.append(self.ops_patch(
                "yarn.nodemanager.vmem-check-enabled",
                self.say("disable vmem check",
                         raise_ratio=self.say("raise ratio", ratio=ratio, seen=max(ratios)) if ratio else ""),
                snippet=snippet))
            return patches, None
        if cause == "jobmanager-container":
            return self._jobmanager_patches(incident, kills), None
        if cause == "heap-cutoff-too-small":
            return self._cutoff_patches(incident, kills, cut), None
        if cause == "node-memory-pressure-eviction":
            patches.append(self.ops_patch(
                "TaskManager pod memory request",
                self.say("guaranteed qos", process=size_text(mem.process) if mem else self.say("the process size")),
                snippet="resources:\n  requests:\n    memory: <process size>\n  limits:\n    memory: <process size>"))
            return patches, None
        if not model_applies(incident) or mem is None:
            patches.append(self.ops_patch(
                "TaskManager memory configuration", self.say("configuration missing")))
            return patches, None
        if cause == "container-smaller-than-process":
            limit = min(k.physical_limit for k in kills if k.physical_limit)
            changes = {"taskmanager.memory.process.size": f"{limit // MIB}m"}
            patches.append(self.ops_patch(
                "container memory limit", self.say("container limit", process=size_text(mem.process),
                                                   limit=size_text(limit)),
                snippet=f"resources:\n  limits:\n    memory: {mem.process // MIB}Mi\n  requests:\n    memory: "
                        f"{mem.process // MIB}Mi"))
        elif cause == "rocksdb-native-memory":
            rocks = rocksdb_memory(incident, mem)
            changes = rocksdb_fix(incident, rocks)
        else:
            growth = self._growth(kills, mem)
            try:
                changes = grow_pool(conf, version, "overhead", growth, deployment=deployment)
            except (ValueError, MemoryConfigError):
                changes = {}
            if cause == "native-memory-outside-budget":
                patches.append(self.ops_patch(
                    "containerized.taskmanager.env.MALLOC_ARENA_MAX", self.say("malloc arenas"),
                    snippet="containerized.taskmanager.env.MALLOC_ARENA_MAX: 4   # YARN / native Kubernetes\n"
                            "# standalone / docker: export MALLOC_ARENA_MAX=4 in the TaskManager's environment"))
        for key, value in changes.items():
            if key.endswith("jvm-overhead.min"):
                excess = max((k.excess for k in kills if k.excess), default=None)
                why = self.say("grow overhead", before=size_text(mem.overhead) if mem else "?", after=value,
                               seen=self.say("went over", excess=size_text(excess)) if excess
                               else self.say("hit the limit"))
            elif key.endswith("jvm-overhead.max"):
                why = self.say("overhead max")
            elif key.endswith("process.size"):
                why = self.say("fit the container" if cause == "container-smaller-than-process" else "grow process")
            elif key.startswith("state.backend.rocksdb"):
                why = self.say("rocksdb managed" if value == "true" else "rocksdb fixed")
            elif key.endswith("managed.fraction") or key.endswith("managed.size"):
                why = self.say("grow managed")
            else:
                why = self.say("set", value=value)
            patches.insert(len(patches) - (1 if cause == "native-memory-outside-budget" else 0),
                           self.flink_patch(incident, key, value, why))
        after = None
        try:
            after = derive_taskmanager_memory(apply_changes(conf, changes), version, deployment=deployment)
        except (MemoryConfigError, ValueError):
            after = None
        if cause == "container-smaller-than-process" and after is None:
            patches = [p for p in patches if p.target != "flink"]
        return patches, after

    def _cutoff_patches(self, incident: Incident, kills: list[ContainerKill], cut: _LegacyCutoff):
        wanted = cut.cutoff_mb + self._growth(kills, None) // MIB
        heap = cut.container_mb - cut.cutoff_mb
        container = cut.container_mb
        patches = []
        if wanted / container > MAX_CUTOFF_RATIO:
            # the heap keeps its size: the container grows by what the cutoff needs
            container = math.ceil((heap + wanted) / 256) * 256
            value = str(container) if cut.heap_key.endswith(".mb") else f"{container}m"
            patches.append(self.flink_patch(incident, cut.heap_key, value, self.say("raise container", size=value)))
        if max(cut.min_mb, cut.ratio * container) < wanted:
            why = self.say("raise cutoff", after=f"{wanted} MB", before=f"{cut.cutoff_mb} MB")
            if cut.ratio * container >= cut.min_mb:
                ratio = math.ceil(wanted / container * 100) / 100
                patches.append(self.flink_patch(incident, cut.spelled(incident, CUTOFF_RATIO), f"{ratio:.2f}", why))
            else:
                patches.append(self.flink_patch(incident, cut.spelled(incident, CUTOFF_MIN), str(wanted), why))
        return patches

    def _jobmanager_patches(self, incident: Incident, kills: list[ContainerKill]):
        conf = user_memory_config(incident)
        deployment = deployment_of(incident)
        try:
            jm = derive_jobmanager_memory(conf, incident.version_tuple, deployment=deployment)
        except (MemoryConfigError, ValueError):
            jm = None
        if jm is None:
            return [self.ops_patch("jobmanager.memory.jvm-overhead.min", self.say("raise jobmanager overhead"))]
        growth = self._growth(kills, None)
        overhead = jm.overhead + growth
        changes = {"jobmanager.memory.jvm-overhead.min": f"{overhead // MIB}m",
                   "jobmanager.memory.jvm-overhead.max": f"{max(overhead, 1 << 30) // MIB}m",
                   "jobmanager.memory.process.size": f"{(jm.process + growth) // MIB}m"}
        try:
            derive_jobmanager_memory(apply_changes(conf, changes), incident.version_tuple, deployment=deployment)
        except (MemoryConfigError, ValueError):
            return [self.ops_patch("jobmanager.memory.jvm-overhead.min", self.say("raise jobmanager overhead"))]
        why = self.say("jobmanager overhead", growth=size_text(growth))
        return [self.flink_patch(incident, k, v, why) for k, v in changes.items()]

    def _summary(self, incident: Incident, cause: str, kills: list[ContainerKill], kill: ContainerKill,
                 mem: TaskManagerMemory | None, cut: _LegacyCutoff | None) -> str:
        where = {"yarn": "YARN", "kubernetes": "Kubernetes", "kernel": "the kernel's cgroup OOM killer",
                 "docker": "Docker"}[kill.platform]
        what = {"physical": "for physical memory", "virtual": "for virtual memory", "oom-killed": "(OOMKilled)",
                "evicted": "(evicted under node memory pressure)"}[kill.kind]
        count = distinct_containers(kills)
        if kill.usage is not None and kill.limit is not None:
            usage = self.say("usage", usage=size_text(kill.usage), limit=size_text(kill.limit))
        elif kill.limit is not None:
            usage = self.say("at the limit", limit=size_text(kill.limit))
        else:
            usage = ""
        containers = self.say("one container") if count == 1 else self.say("containers", count=count)
        sentences = [self.say("head", where=where, containers=containers, what=what, usage=usage)]
        if mem is not None:
            sentences.append(self.say("budget", process=size_text(mem.process), heap=size_text(mem.jvm_heap),
                                      direct=size_text(mem.direct), managed=size_text(mem.managed),
                                      metaspace=size_text(mem.metaspace), overhead=size_text(mem.overhead)))
        if cause == "yarn-virtual-memory-check":
            sentences.append(self.say(cause, usage=size_text(kill.physical_usage),
                                      limit=size_text(kill.physical_limit)))
        elif cause == "rocksdb-native-memory":
            sentences.append(self.say(cause, described=rocksdb_memory(incident, mem).describe()))
        elif cause == "heap-cutoff-too-small":
            how = (self.say("cutoff by ratio", ratio=f"{cut.ratio:.2f}") if cut.cutoff_mb > cut.min_mb
                   else self.say("cutoff by min", minimum=cut.min_mb, ratio=f"{cut.ratio:.2f}"))
            jvm = self.say("jvm sizes", heap=cut.heap_mb, direct=cut.direct_mb) if cut.heap_mb else ""
            excess = max((k.excess for k in kills if k.excess), default=None)
            sentences.append(self.say(cause, version=incident.flink_version or "<1.10", container=f"{cut.container_mb} MB",
                                      cutoff=f"{cut.cutoff_mb} MB", how=how, jvm=jvm,
                                      rocksdb=self.say("rocksdb before 1.10") if cut.rocksdb else "",
                                      excess=size_text(excess) if excess else self.say("unknown excess")))
        elif cause == "jvm-overhead-too-small":
            sentences.append(self.say(cause, overhead=size_text(mem.overhead) if mem
                                      else self.say("default overhead")))
        elif cause in ("container-smaller-than-process", "undetermined", "native-memory-outside-budget"):
            sentences.append(self.say(cause))
        return " ".join(sentences)


@dataclass
class _LegacyCutoff:
    """A YARN TaskManager container of a release before 1.10: its size and cutoff as the configuration sets them."""

    container_mb: int
    ratio: float
    min_mb: int
    heap_key: str
    heap_mb: int | None = None
    direct_mb: int | None = None
    rocksdb: bool = False

    @property
    def cutoff_mb(self) -> int:
        return max(self.min_mb, int(self.ratio * self.container_mb))

    @staticmethod
    def spelled(incident: Incident, key: str) -> str:
        """The user's spelling when the configuration uses the deprecated yarn.* key."""
        legacy = LEGACY_CUTOFF_KEYS[key]
        return legacy if incident.config.get(legacy) is not None and incident.config.get(key) is None else key


def _taskmanager_kills(kills: list[ContainerKill]) -> list[ContainerKill]:
    """The kills of TaskManager containers for the memory they used (not YARN's virtual-memory check)."""
    return [k for k in kills if k.kind != "virtual" and not _jobmanager(k)]


def _legacy_yarn(incident: Incident, kills: list[ContainerKill]) -> _LegacyCutoff | None:
    """The cutoff model of a YARN kill on a release before 1.10, or None (another release, platform, or no size)."""
    version = incident.version_tuple
    config = incident.config
    heap_key = next((k for k in ("taskmanager.heap.size", "taskmanager.heap.mb") if config.get(k)), None)
    legacy = (tuple(version[:2]) < MODEL_SINCE if version
              else heap_key is not None and not config.get("taskmanager.memory.process.size"))
    if not legacy or not kills or any(k.platform != "yarn" or k.kind != "physical" for k in kills):
        return None
    logged = next((m for ev in incident.events for m in [LEGACY_CONTAINER.search(ev.message)] if m), None)
    if logged:
        container_mb = int(logged["container"])
    elif heap_key == "taskmanager.heap.mb":
        container_mb = int(config.get_int(heap_key) or 0)
    elif heap_key:
        container_mb = (parse_memory_size(config.get(heap_key)) or 0) // MIB
    else:
        container_mb = max((k.physical_limit or 0) for k in kills) // MIB
    if container_mb <= 0:
        return None

    def setting(key: str, default: float) -> float:
        value = config.get(key) or config.get(LEGACY_CUTOFF_KEYS[key])
        try:
            return float(value) if value is not None else default
        except ValueError:
            return default

    backend = (config.get("state.backend") or "").lower()
    return _LegacyCutoff(container_mb=container_mb, ratio=setting(CUTOFF_RATIO, DEFAULT_CUTOFF_RATIO),
                         min_mb=int(setting(CUTOFF_MIN, DEFAULT_CUTOFF_MIN_MB)),
                         heap_key=heap_key or "taskmanager.heap.size",
                         heap_mb=int(logged["heap"]) if logged else None,
                         direct_mb=int(logged["direct"]) if logged else None,
                         rocksdb="rocksdb" in backend)


def _jobmanager(kill: ContainerKill) -> bool:
    """The killed container is the JobManager's: by its name, or by the pod's role a Kubernetes record names
    (``Pod orders-5d7b9c-x2x4z (jobmanager, ...)``: a native JobManager pod's name does not say it)."""
    return kill.jobmanager or bool(re.search(r"\bPod \S+ \(jobmanager\b", kill.event.message))


def _overhead_raised(incident: Incident) -> bool:
    """The user already gave the JVM overhead more than Flink's defaults (so more of the same is not the answer)."""
    conf = user_memory_config(incident)
    for key, default in OVERHEAD_DEFAULTS.items():
        value = conf.get(key)
        if value is None:
            continue
        if key.endswith("fraction"):
            try:
                if float(value) > default:
                    return True
            except ValueError:
                continue
        elif (parse_memory_size(value) or 0) > default:
            return True
    return False


def _kill_row(kill: ContainerKill) -> dict:
    return {"platform": kill.platform, "kind": kill.kind, "container": kill.container or "",
            "usage": size_text(kill.usage) if kill.usage is not None else "", "limit":
            size_text(kill.limit) if kill.limit is not None else "", "exit_code": kill.exit_code,
            "where": f"{kill.event.file}:{kill.event.line}"}
