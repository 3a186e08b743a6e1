"""``java.lang.OutOfMemoryError: Java heap space``: whose heap, filled by what, and how much more it needs."""
from __future__ import annotations

import re

from flink_runbooks.evidence.memory import oom
from flink_runbooks.evidence.memory import MemoryConfigError
from flink_runbooks.evidence.memory.incident import STATE_BACKEND_SIGNATURES, deployment_of, model_applies
from flink_runbooks.model import Event, Finding, Incident, Patch, RootCause
from flink_runbooks.vocabulary.units import format_size, parse_memory_size
from flink_runbooks.detectors.base import Detector, version_key
from flink_runbooks.vocabulary.wordings import Wording

SMALL_SLOT_HEAP = 512 << 20  # below this much task heap per slot the heap is doubled, above it grown by half
SMALL_JM_HEAP = 2 << 30

# Frames that tell where the heap filled up (Spark keeps only frames some detector asks for).
HEAP_STATE_FRAME = r"org\.apache\.flink\.runtime\.state\.(?:heap|memory)\.\w"
UDF_FRAME = (r"\.(?:StreamMap|StreamFlatMap|StreamFilter|ProcessOperator|KeyedProcessOperator|"
             r"LegacyKeyedProcessOperator|CoProcessOperator|KeyedCoProcessOperator|CoStreamMap|CoStreamFlatMap|"
             r"CoBroadcastWithKeyedOperator|CoBroadcastWithNonKeyedOperator|StreamGroupedReduceOperator|"
             r"AsyncWaitOperator|StreamSink)\.process|WindowOperator\.emitWindowContents")
FLINK_ALLOC_FRAME = (r"org\.apache\.flink\.(?:api\.common\.typeutils|api\.java\.typeutils|core\.memory|"
                     r"runtime\.io\.network\.api\.serialization|runtime\.operators\.sort|table\.runtime\.(?:operators|"
                     r"util))\.|com\.esotericsoftware\.kryo\.|CopyingChainingOutput\.")
JM_SITE_FRAME = r"org\.apache\.flink\.runtime\.(?:checkpoint|rpc\.messages|source\.coordinator|executiongraph)\."
USER_JAR_FRAME = oom.USER_JAR_FRAME
FRAMES = (HEAP_STATE_FRAME, USER_JAR_FRAME, UDF_FRAME, FLINK_ALLOC_FRAME, JM_SITE_FRAME)

_JM_SITES = (
    ("handling checkpoints", re.compile(r"runtime\.checkpoint\.|runtime\.state\.memory\.")),
    ("running a split enumerator (source coordinator)", re.compile(r"runtime\.source\.coordinator\.")),
    ("deserialising an RPC message (checkpoint acknowledgements, task reports)",
     re.compile(r"runtime\.rpc\.messages\.")),
    ("building or updating the execution graph", re.compile(r"runtime\.executiongraph\.")),
)
CHECKPOINT_STORAGE_LOGGED = re.compile(r"Checkpoint storage is set to '?(?P<storage>\w+)'?")


class OomJavaHeap(Detector):
    slug = "oom-java-heap"
    title = "OutOfMemoryError: Java heap space"
    category = "memory"
    meaning = ("A JVM's heap was full: a TaskManager's task heap (state on the heap backend, objects the job keeps, "
               "or simply too little heap for the workload) or the JobManager's heap.")
    exception_classes = ("java.lang.OutOfMemoryError",)
    versions = "1.10 – 2.x (the JobManager's own heap OOM carries Flink's hint about jobmanager.memory.heap.size)"
    layer = 0
    config_keys = (
        "taskmanager.memory.process.size",
        "taskmanager.memory.task.heap.size",
        "taskmanager.memory.managed.fraction",
        "taskmanager.numberOfTaskSlots",
        "state.backend.type",
        "jobmanager.memory.process.size",
        "execution.checkpointing.storage",
        "env.java.opts.taskmanager",
    )
    signatures = (
        r"OutOfMemoryError: (?:Java heap space|GC overhead limit exceeded|Requested array size exceeds VM limit)",
        r"Checkpoint storage is set to",
        r"Maximum heap size: \d+ MiBytes",
        *STATE_BACKEND_SIGNATURES,
        *oom.CONTEXT_SIGNATURES,
    )
    frames = (HEAP_STATE_FRAME, oom.USER_JAR_FRAME_PREFILTER, UDF_FRAME, FLINK_ALLOC_FRAME, JM_SITE_FRAME)
    root_causes = (
        RootCause("heap-state-backend", "Keyed state lives on the JVM heap (hashmap/filesystem backend) and outgrew "
                  "the task heap.",
                  "Heap state-backend frames (CopyOnWriteStateMap, HeapListState, HeapSnapshotStrategy) in the OOM, "
                  "or the heap backend with checkpoints growing run after run.",
                  patches=("ops:savepoint before the backend switch",
                           "flink:execution.checkpointing.incremental", "flink:state.backend.type",
                           "code:StreamExecutionEnvironment#setStateBackend", "ops:stay on the heap backend",
                           "flink:taskmanager.memory.managed.fraction"),
                  versions="1.x, 2.x; existing state moves to RocksDB only from 1.13, through a canonical "
                           "savepoint"),
        RootCause("user-code-holds-objects", "The job's own code (or a library it calls) keeps objects on the heap "
                  "until it runs out: a collection, cache or buffer that only grows.",
                  "The OOM is thrown in the job's classes (frames from the job jar or right under the user function), "
                  "no heap state-backend frames.",
                  patches=("flink:env.java.opts.taskmanager", "flink:taskmanager.memory.managed.fraction",
                           "ops:find the oversized value", "ops:heap dump analysis", "flink:taskmanager.memory.*", "flink:taskmanager.heap.size")),
        RootCause("task-heap-too-small", "The task heap is too small for what the job does; nothing points at one "
                  "consumer.",
                  "The OOM is thrown in Flink's own code (deserialisation, serializers, sorting) or without frames, "
                  "the heap backend is not growing, and the model gives a small task heap per slot.",
                  patches=("flink:taskmanager.memory.managed.fraction", "flink:taskmanager.memory.process.size", "flink:taskmanager.memory.*", "flink:taskmanager.heap.size"),
                  # named without the heap's size only as a best guess: this is what confirms it
                  next_evidence="the TaskManager memory configuration (config file or its 'Final TaskExecutor "
                                "Memory configuration' log block) and the number of slots, to compare the task heap "
                                "per slot with what the job holds"),
        RootCause("undetermined", "A TaskManager ran out of heap, but the incident shows neither where (no frames) "
                  "nor how big the heap was (no memory configuration).",
                  "The OOM message alone: no stack frames, no memory settings or start-up memory breakdown.",
                  patches=("flink:env.java.opts.taskmanager", "ops:heap dump analysis"),
                  would_change="Frames of the heap state backend, of the job's own classes, or a task heap that the "
                               "configuration shows to be small would each name a cause.",
                  next_evidence="the full stack trace from the TaskManager log (the lines under the "
                                "OutOfMemoryError), the TaskManager memory configuration (config file or its "
                                "'Final TaskExecutor Memory configuration' log block), the state backend, and a heap "
                                "dump (-XX:+HeapDumpOnOutOfMemoryError, then `jmap -histo` or Eclipse MAT)."),
        RootCause("jobmanager-heap", "The JobManager's heap ran out (checkpoint metadata or state kept on the "
                  "JobManager, many jobs in one session cluster, big job graphs or split enumerators).",
                  "The OOM is in the JobManager's own process: Flink's hint names jobmanager.memory.heap.size, or a "
                  "fatal-error handler in the JobManager log reports it.",
                  patches=("flink:env.java.opts.jobmanager", "flink:execution.checkpointing.dir",
                           "flink:jobmanager.memory.process.size", "flink:state.backend.type",
                           "ops:one job per cluster", "flink:jobmanager.memory.*", "flink:execution.checkpointing.storage",
                           "ops:checkpoint directory", "flink:jobmanager.heap.size")),
    )

    wordings = (
        Wording("oom-java-heap", r"OutOfMemoryError:\s*(?:Java heap space|GC overhead limit exceeded)",
                "1.3 – 2.x", "the JVM", "java.lang.OutOfMemoryError: Java heap space"),
        Wording("oom-java-heap", r"A heap space-related out-of-memory error has occurred",
                "1.12 – 2.x", "ClusterEntryPointExceptionUtils (JobManager)",
                "java.lang.OutOfMemoryError: Java heap space. A heap space-related out-of-memory error has occurred. This can mean two things: either Flink Master requires a larger size of JVM heap space or there is a memory leak."),
    )

    templates = {
        # TaskManager heap
        "head": "{task} ran out of Java heap ({message}) {occurrences} time(s){uptimes}. {where} Task heap: {heap}. "
                "State backend: {backend} ({backend_source}).",
        "uptimes": " after running {times}",
        "heap": "{task_heap} task heap ({slots} slot(s), {per_slot} per slot) in a {process} TaskManager ({source})",
        "legacy heap": "{heap} of JVM heap shared by all the TaskManager's slots ({source})",
        "heap-state-backend legacy": "The state kept on the heap outgrew the heap: move it to RocksDB (off-heap, "
                                     "spills to disk). Before 1.10 RocksDB's memory is not bounded by Flink: leave "
                                     "room for it outside the heap (on YARN, in the heap cutoff).",
        "heap unknown": "unknown (no memory settings or start-up breakdown in the incident)",
        "checkpoints": " Checkpoints: {completed} completed, {first} → {last}.",
        "in state backend": "It was thrown in the heap state backend ({frame}).",
        "no frames": "The stack trace does not show where (no frames in the logs).",
        "in job code": "It was thrown in the job's own code ({frame}).",
        "in user function": "It was thrown inside the user function called by {frame}.",
        "in flink": "It was thrown in Flink's code ({frame}).",
        "single array": "'Requested array size exceeds VM limit' means one single array above ~2 GB was requested: a "
                        "single value or record that large, which no heap size fixes.",
        "heap-state-backend": "The state kept on the heap outgrew the task heap: move it to RocksDB (off-heap, spills "
                              "to disk), which uses the managed memory the heap backend leaves idle.",
        "user-code-holds-objects": "The job's code keeps what it allocates: more heap only delays the next OOM if "
                                   "that collection grows without bound; take a heap dump to see what it holds.",
        "task-heap-too-small": "Nothing points at one consumer: the task heap is too small for this workload.",
        "undetermined": "Root cause undetermined: the incident has neither the OOM's frames nor the heap's size.",
        "oom note": "the OOM ({process}{fatal}): {where}",
        "state note": "the job's keyed state lives on the JVM heap",
        "backend note": "heap state backend in use (not where the OOM was thrown)",
        "stay on heap": "If the state must stay on the heap, the task heap needs room for all of it plus headroom; "
                        "these sizes double the current task heap (model-checked).",
        "oversized value": "One array above the JVM's ~2 GB limit was requested: look for a single huge record, state "
                           "value or collection (a window or ListState serialised as one value).",
        "legacy grow": "{factor:g}x the TaskManager heap (this Flink predates the FLIP-49 model).",
        "managed to heap": "The heap state backend leaves managed memory ({managed}) unused in a streaming job: a "
                           "managed fraction of {fraction} moves it to the task heap, {before} → {after} "
                           "({factor:g}x), in the same {process} process (keep it if Python UDFs or batch operators "
                           "use managed memory).",
        "grow": "{factor:g}x the task heap ({before} → {after}, {why}); the other pools keep their size "
                "(model-checked).",
        "small slot": "the current task heap per slot is small",
        "half again": "half again",
        "rocksdb": "Keep keyed state in RocksDB: off the JVM heap, bounded by managed memory and spilling to local "
                   "disk.",
        "incremental": "Large RocksDB state: upload only the changed SST files at each checkpoint.",
        "managed back": "RocksDB's block cache and write buffers live in managed memory: back to the default 0.4 from "
                        "{fraction} (lowered for the heap backend).",
        # A checkpoint (or a native-format savepoint) is written in the backend's own format and cannot be restored
        # into another backend; only a savepoint in the canonical format can (the unified format arrived in 1.13,
        # FLIP-41).
        "no state migration": "Changing the state backend cannot carry the state over on this release: neither a "
                              "checkpoint nor a savepoint of the heap backend restores into RocksDB before Flink "
                              "1.13. Switching means starting without the current state (or upgrading Flink first, "
                              "then switching through a savepoint).",
        "canonical savepoint": "A checkpoint cannot change the state backend: restoring the heap backend's last "
                               "checkpoint into RocksDB fails. Stop the job with a savepoint in the canonical format, "
                               "then start it with the new backend from that savepoint (never from a checkpoint or a "
                               "native-format savepoint).",
        "backend in code": "Job code that sets a state backend overrides the configuration: change it there too.",
        "heap dump": "Write a heap dump when the next OOM happens (to {dump_dir}): it shows which objects filled the "
                     "heap.",
        "dump analysis": "Open the dump in Eclipse MAT / VisualVM and look at the dominator tree{thrown_in}. A "
                         "collection that grows per record (a list, map or cache without eviction) is the leak; keep "
                         "such data in keyed state with a TTL, or bound it.",
        "thrown in": "; the OOM was thrown in {frame}",
        # JobManager heap
        "jobmanager-heap": "The JobManager's own heap ran out ({message}){site}. JobManager heap: {heap} ({source}).",
        "site": " while {site}",
        "load": " Load on it: {reasons}.",
        "storage on jobmanager": "checkpoints are kept on the JobManager ({storage})",
        "largest checkpoint": "the largest completed checkpoint was {size}",
        "jobs": "{count} jobs were submitted to this cluster",
        "jobmanager note": "the JobManager process ran out of heap{site}",
        "grow jobmanager": "{factor:g}x the JobManager heap ({before} → {after}); the other JobManager pools keep "
                           "their size (model-checked).",
        "filesystem backend": "The memory state backend sends every checkpoint to the JobManager's heap; the "
                              "filesystem backend writes them to the checkpoint directory instead.",
        "filesystem storage": "Checkpoints stored on the JobManager sit in its heap; write them to a file system "
                              "instead.",
        "checkpoint dir": "A durable checkpoint directory{next_to}.",
        "next to savepoints": " next to the savepoint directory",
        "set checkpoint dir": "Set {key} to a durable file system (HDFS, S3, GCS) that every TaskManager and the "
                              "JobManager can reach.",
        "jobmanager heap dump": "A heap dump at the next JobManager OOM shows what filled it.",
        "one job per cluster": "Many jobs share this JobManager's heap: run the big ones in application mode (one "
                               "JobManager per job) so one job's checkpoints or graph cannot take the others down.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        found = oom.occurrences(incident, "heap")
        if not found:
            return []
        jm = [o for o in found if o.process == "jobmanager"]
        tm = [o for o in found if o.process != "jobmanager"]
        findings = []
        if tm:
            findings.append(self._taskmanager_finding(incident, tm))
        if jm:
            findings.append(self._jobmanager_finding(incident, jm))
        return findings

    # TaskManager heap ----------------------------------------------------------------------------------------------

    def _taskmanager_finding(self, incident: Incident, found: list[oom.OomOccurrence]) -> Finding:
        first = next((o for o in found if o.event.frames), found[0])
        frames = oom.matching_frames(first.event, FRAMES)
        state_frames = [f for f in frames if re.search(HEAP_STATE_FRAME, f)]
        top = frames[0] if frames else None
        user_top = bool(top and (re.search(USER_JAR_FRAME, top) or re.search(UDF_FRAME, top)))
        backend, backend_source = oom.state_backend(incident)
        growth = oom.checkpoint_growth(incident, until=first.ts)
        sizing = oom.taskmanager_sizing(incident)
        if state_frames or (backend == "heap" and growth.growing):
            cause = "heap-state-backend"
        elif user_top:
            cause = "user-code-holds-objects"
        elif frames or sizing.memory is not None:
            cause = "task-heap-too-small"
        else:
            cause = "undetermined"  # nothing points anywhere: no frames and no sizes
        uptimes = oom.uptimes(incident, found)
        single_array = first.message.startswith("Requested array size exceeds VM limit")

        mem = sizing.memory
        heap_text = self.say("heap unknown")
        legacy_heap = None if model_applies(incident) else _legacy_heap(incident)
        if legacy_heap is not None:
            heap_text = self.say("legacy heap", heap=oom.mib_text(legacy_heap[0]), source=legacy_heap[1])
        if mem is not None:
            heap_text = self.say("heap", task_heap=oom.mib_text(mem.task_heap), slots=sizing.slots,
                                 per_slot=oom.mib_text(sizing.per_slot("task_heap")),
                                 process=oom.mib_text(mem.process), source=sizing.source)
        if state_frames:
            where = self.say("in state backend", frame=oom.frame_class(state_frames[0]))
        elif not frames:
            where = self.say("no frames")
        elif re.search(USER_JAR_FRAME, frames[0]):
            where = self.say("in job code", frame=oom.frame_class(frames[0]))
        elif re.search(UDF_FRAME, frames[0]):
            where = self.say("in user function", frame=oom.frame_class(frames[0]))
        else:
            where = self.say("in flink", frame=oom.frame_class(frames[0]))
        times = ", ".join(oom.duration_text(u) for u in uptimes if u is not None)
        summary = self.say("head", task=first.task or "A TaskManager", message=first.message.split('.')[0],
                           occurrences=len(found), uptimes=self.say("uptimes", times=times) if times else "",
                           where=where, heap=heap_text, backend=backend, backend_source=backend_source)
        if growth.completed:
            summary += self.say("checkpoints", completed=growth.completed, first=format_size(growth.first_bytes),
                                last=format_size(growth.last_bytes))
        summary += " " + (self.say("single array") if single_array
                          else self.say("heap-state-backend legacy") if cause == "heap-state-backend" and not
                          model_applies(incident) else self.say(cause))
        patches = self._taskmanager_patches(incident, cause, sizing, backend, single_array, frames)
        evidence: list[Event] = [first.event]
        notes = {0: self.say("oom note", process=first.process, fatal=", fatal" if first.fatal else "", where=where)}
        oom.repeats_as_evidence(found, uptimes, evidence, notes)
        backend_event = next((ev for ev, _ in incident.find(oom.STATE_BACKEND_IN_LOG)), None)
        if backend_event is not None and backend == "heap":
            notes[len(evidence)] = self.say("state note" if cause == "heap-state-backend" else "backend note")
            evidence.append(backend_event)
        confidence = {"task-heap-too-small": 0.75, "undetermined": 0.4}.get(cause, 0.9)
        if cause == "task-heap-too-small" and mem is None:
            # "too small" needs the size: without it the frames only rule out the job's code and the state backend
            confidence = 0.45
        return self.finding(
            cause, summary, evidence, confidence=confidence, patches=patches, notes=notes,
            details={
                **oom.occurrence_details(found, uptimes),
                "top_frames": [oom.frame_class(f) for f in frames[:5]],
                "task_heap": format_size(mem.task_heap) if mem else None,
                "task_heap_per_slot": format_size(sizing.per_slot("task_heap")) if mem else None,
                "slots": sizing.slots,
                "process_size": format_size(mem.process) if mem else None,
                "managed_memory": format_size(mem.managed) if mem else None,
                "memory_source": sizing.source,
                "state_backend": backend,
                "state_backend_source": backend_source,
                "completed_checkpoints": growth.completed,
                "checkpoint_size_first_last": [growth.first_bytes, growth.last_bytes],
            },
        )

    def _taskmanager_patches(self, incident: Incident, cause: str, sizing: oom.TaskManagerSizing, backend: str,
                             single_array: bool, frames: list[str]) -> list[Patch]:
        patches: list[Patch] = []
        if cause == "heap-state-backend":
            patches += self._rocksdb_patches(incident, sizing)
            grow = self._grow_heap(incident, sizing, "rocksdb", 2.0)
            if grow:
                text = "\n".join(f"{p.key}: {p.proposed}" for p in grow)
                patches.append(self.ops_patch("stay on the heap backend", self.say("stay on heap"), text))
            return patches
        if single_array:
            patches.append(self.ops_patch(
                "find the oversized value", self.say("oversized value"),
                "grep -n 'Requested array size exceeds VM limit' taskmanager*.log   # the operator and the frames"))
            return patches
        factor = 2.0 if (sizing.per_slot("task_heap") or 0) < SMALL_SLOT_HEAP else 1.5
        patches += self._grow_heap(incident, sizing, backend, factor)
        if cause == "undetermined":
            return self._heap_dump_patches(incident, "taskmanager", frames)
        if cause == "user-code-holds-objects":
            patches += self._heap_dump_patches(incident, "taskmanager", frames)
        return patches

    def _grow_heap(self, incident: Incident, sizing: oom.TaskManagerSizing, backend: str,
                   factor: float) -> list[Patch]:
        mem = sizing.memory
        if mem is None or not sizing.model:
            legacy = incident.config.get_bytes("taskmanager.heap.size")
            if legacy:
                return [self.flink_patch(incident, "taskmanager.heap.size", format_size(int(legacy * factor)),
                                         self.say("legacy grow", factor=factor))]
            return []
        target = int(mem.task_heap * factor)
        batch = (incident.config.get("execution.runtime-mode") or "").upper() == "BATCH"
        changes = None
        if backend == "heap" and not batch and not any(k.startswith("python.") for k in sizing.conf):
            changes = oom.heap_from_managed(sizing, target)
        if changes:
            fraction = changes["taskmanager.memory.managed.fraction"]
            return [self.flink_patch(
                incident, "taskmanager.memory.managed.fraction", fraction,
                self.say("managed to heap", managed=oom.mib_text(mem.managed), fraction=fraction,
                         before=oom.mib_text(mem.task_heap), after=oom.mib_text(target), factor=factor,
                         process=oom.mib_text(mem.process)))]
        try:
            changes = oom.changes_for(sizing, "heap", factor)
        except (ValueError, MemoryConfigError):
            return []
        why = self.say("grow", factor=factor, before=oom.mib_text(mem.task_heap), after=oom.mib_text(target),
                       why=self.say("small slot" if factor == 2.0 else "half again"))
        return [self.flink_patch(incident, key, value, why) for key, value in changes.items()]

    def _rocksdb_patches(self, incident: Incident, sizing: oom.TaskManagerSizing) -> list[Patch]:
        patches = [self.flink_patch(incident, "state.backend.type", "rocksdb", self.say("rocksdb"))]
        if (incident.config.get("execution.checkpointing.incremental") or "").lower() != "true":
            patches.append(self.flink_patch(
                incident, "execution.checkpointing.incremental", "true", self.say("incremental")))
        managed_cv = incident.config.lookup("taskmanager.memory.managed.fraction")
        if managed_cv is not None and (incident.config.get_float("taskmanager.memory.managed.fraction") or 0) < 0.4:
            patches.append(self.flink_patch(
                incident, "taskmanager.memory.managed.fraction", None,
                self.say("managed back", fraction=managed_cv.value)))
        version = incident.version_tuple
        if version is not None and version < (1, 13):
            patches.append(self.ops_patch("savepoint before the backend switch", self.say("no state migration"),
                                          "# Flink < 1.13: no state migration between backends"))
        else:
            stop = ("bin/flink stop --type canonical --savepointPath <savepoint-dir> <job-id>"
                    if version is None or version >= (1, 15)
                    else "bin/flink stop --savepointPath <savepoint-dir> <job-id>")
            patches.append(self.ops_patch(
                "savepoint before the backend switch", self.say("canonical savepoint"),
                f"{stop}\n# then, with the RocksDB backend configured:\nbin/flink run -s <savepoint-path> ..."))
        if version is None or version >= (1, 13):
            patches.append(self.code_patch(
                "StreamExecutionEnvironment#setStateBackend",
                "env.setStateBackend(new EmbeddedRocksDBStateBackend(true)); // incremental checkpoints",
                self.say("backend in code")))
        return patches

    def _heap_dump_patches(self, incident: Incident, role: str, frames: list[str]) -> list[Patch]:
        key, current = oom.jvm_opts(incident, role)
        dump_dir = (incident.config.get("io.tmp.dirs") or "/tmp").split(",")[0].split(":")[0] or "/tmp"
        value = oom.with_jvm_flags(current, ["-XX:+HeapDumpOnOutOfMemoryError", f"-XX:HeapDumpPath={dump_dir}"])
        patches = []
        if value:
            patches.append(self.flink_patch(incident, key, value, self.say("heap dump", dump_dir=dump_dir)))
        top = next((oom.frame_class(f) for f in frames if re.search(USER_JAR_FRAME, f)), None)
        patches.append(self.ops_patch(
            "heap dump analysis",
            self.say("dump analysis", thrown_in=self.say("thrown in", frame=top) if top else ""),
            "jcmd <taskmanager-pid> GC.heap_dump /tmp/tm-heap.hprof   # a dump of a running TaskManager"))
        return patches

    # JobManager heap -----------------------------------------------------------------------------------------------

    def _jobmanager_finding(self, incident: Incident, found: list[oom.OomOccurrence]) -> Finding:
        first = found[0]
        frames = oom.matching_frames(first.event, (JM_SITE_FRAME, HEAP_STATE_FRAME))
        site = next((name for name, rx in _JM_SITES for f in frames if rx.search(f)), None)
        mem, source = oom.jobmanager_memory(incident)
        growth = oom.checkpoint_growth(incident, until=first.ts)
        storage = self._jm_checkpoint_storage(incident, checkpoints_taken=growth.completed > 0)
        jobs = oom.submissions_before(incident, first.ts)
        heap = mem.heap if mem else None
        while_ = self.say("site", site=site) if site else ""
        summary = self.say("jobmanager-heap", message=first.message.split('.')[0], site=while_,
                           heap=oom.mib_text(heap), source=source)
        reasons = []
        if storage:
            reasons.append(self.say("storage on jobmanager", storage=storage))
        if growth.largest_bytes:
            reasons.append(self.say("largest checkpoint", size=format_size(growth.largest_bytes)))
        if len(jobs) > 1:
            reasons.append(self.say("jobs", count=len(jobs)))
        if reasons:
            summary += self.say("load", reasons="; ".join(reasons))
        patches = self._jobmanager_patches(incident, heap, storage)
        return self.finding(
            "jobmanager-heap", summary, [o.event for o in found[:4]], confidence=0.85, patches=patches,
            notes={0: self.say("jobmanager note", site=while_)},
            details={"occurrences": len(found), "jobmanager_heap": format_size(heap) if heap else None,
                     "memory_source": source, "site": site, "checkpoint_storage_on_jobmanager": storage,
                     "largest_checkpoint_bytes": growth.largest_bytes, "jobs_submitted": len(jobs),
                     "top_frames": [oom.frame_class(f) for f in frames[:5]]},
        )

    @staticmethod
    def _jm_checkpoint_storage(incident: Incident, checkpoints_taken: bool) -> str | None:
        """Where the incident says checkpoints are held in the JobManager's heap, or None. Every job logs its
        storage, checkpointing or not; only a job that takes checkpoints puts them there."""
        for ev, m in incident.find(CHECKPOINT_STORAGE_LOGGED):
            if m.group("storage").lower() == "jobmanager" and checkpoints_taken:
                return f"logged: Checkpoint storage is set to 'jobmanager' ({ev.file.rsplit('/', 1)[-1]}:{ev.line})"
        cv = incident.config.lookup("execution.checkpointing.storage")
        if cv is not None and cv.value.strip().lower() == "jobmanager":
            return f"{cv.key}: {cv.value}"
        backend = incident.config.lookup("state.backend.type")
        if backend is not None and backend.value.strip().lower() in ("jobmanager", "memory"):
            return f"{backend.key}: {backend.value} (MemoryStateBackend)"
        return None

    def _jobmanager_patches(self, incident: Incident, heap: int | None, storage: str | None) -> list[Patch]:
        patches: list[Patch] = []
        factor = 2.0 if heap is None or heap < SMALL_JM_HEAP else 1.5
        try:
            changes = oom.grow_jobmanager_pool(incident, "heap", factor)
        except (ValueError, MemoryConfigError):
            changes = {}
        for key, value in changes.items():
            patches.append(self.flink_patch(
                incident, key, value,
                self.say("grow jobmanager", factor=factor, before=oom.mib_text(heap),
                         after=oom.mib_text(int((heap or 0) * factor)))))
        if storage:
            version = incident.version_tuple
            ckpt_dir = incident.config.get("execution.checkpointing.dir")
            savepoints = incident.config.get("execution.checkpointing.savepoint-dir")
            if not ckpt_dir and savepoints:
                ckpt_dir = savepoints.rstrip("/").rsplit("/", 1)[0] + "/checkpoints"
            if version is not None and version < (1, 13):
                patches.append(self.flink_patch(
                    incident, "state.backend.type", "filesystem", self.say("filesystem backend")))
            else:
                patches.append(self.flink_patch(
                    incident, "execution.checkpointing.storage", "filesystem", self.say("filesystem storage")))
            if ckpt_dir:
                derived = not incident.config.get("execution.checkpointing.dir")
                patches.append(self.flink_patch(
                    incident, "execution.checkpointing.dir", ckpt_dir,
                    self.say("checkpoint dir", next_to=self.say("next to savepoints") if derived else "")))
            else:
                patches.append(self.ops_patch(
                    "checkpoint directory",
                    self.say("set checkpoint dir", key=version_key(incident, 'execution.checkpointing.dir'))))
        key, current = oom.jvm_opts(incident, "jobmanager")
        value = oom.with_jvm_flags(current, ["-XX:+HeapDumpOnOutOfMemoryError", "-XX:HeapDumpPath=/tmp"])
        if value:
            patches.append(self.flink_patch(incident, key, value, self.say("jobmanager heap dump")))
        if len(oom.submissions_before(incident, None)) > 1:
            patches.append(self.ops_patch("one job per cluster", self.say("one job per cluster"), urgent=False))
        return patches


_MAX_HEAP_LOGGED = re.compile(r"Maximum heap size: (?P<mib>\d+) MiBytes")


def _legacy_heap(incident: Incident) -> tuple[int, str] | None:
    """A TaskManager's heap before 1.10: its start-up line, else taskmanager.heap.size (which on YARN is the whole
    container, so the start-up line wins)."""
    for ev in incident.events:
        m = _MAX_HEAP_LOGGED.search(ev.message)
        if m and ev.role == "taskmanager":
            return int(m["mib"]) << 20, f"{ev.file.rsplit('/', 1)[-1]}:{ev.line}"
    if deployment_of(incident) != "standalone":
        return None  # the key sizes the container there, not the heap
    cv = incident.config.lookup("taskmanager.heap.size")
    size = parse_memory_size(cv.value) if cv else None
    return (size, f"{cv.key}: {cv.value}") if size else None
