"""``java.lang.OutOfMemoryError`` in an incident: which JVM ran out of which pool, where, how often, how soon.

Shared by the ``oom-java-heap``, ``oom-direct-memory`` and ``oom-metaspace`` runbooks. One OutOfMemoryError is
logged many times (the TaskManager's task failure, the JobManager's copy of it, the job's RESTARTING/FAILING records,
"Recovery is suppressed", the terminal state): :func:`occurrences` folds them into one :class:`OomOccurrence` per
failed execution attempt or crashed process, so counts and timings mean what they say.

The pools, and the messages the JVM and Flink put on them::

    java.lang.OutOfMemoryError: Java heap space                       (task threads: plain JVM text)
    java.lang.OutOfMemoryError: GC overhead limit exceeded
    java.lang.OutOfMemoryError: Java heap space. A heap space-related out-of-memory error has occurred. ...
        Flink Master ... 'jobmanager.memory.heap.size' ...           (the JobManager's own heap, enriched)
    java.lang.OutOfMemoryError: Direct buffer memory. The direct out-of-memory error has occurred. ...
        'taskmanager.memory.task.off-heap.size' ... 'taskmanager.memory.framework.off-heap.size' ...
    java.lang.OutOfMemoryError: Cannot reserve 1048576 bytes of direct buffer memory (allocated: ..., limit: ...)
    java.lang.OutOfMemoryError: Could not allocate enough memory segments for NetworkBufferPool (required (Mb): 409,
        allocated (Mb): 255, missing (Mb): 154). Cause: Direct buffer memory
    java.lang.OutOfMemoryError: Metaspace. The metaspace out-of-memory error has occurred. ...
        'taskmanager.memory.jvm-metaspace.size' configuration option should be increased. ...

Only exceptions count (chain links of a record), never a log message that quotes one.

The module also sizes JobManager pools with the FLIP-116 model (:func:`grow_jobmanager_pool`) and moves TaskManager
memory between pools with the FLIP-49 model (:func:`heap_from_managed`, :func:`grow_framework_off_heap`), each
change checked against :mod:`memory` before it is proposed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from flink_runbooks.evidence.checkpoints import checkpoint_history
from flink_runbooks.evidence.cluster import TASK_ON
from flink_runbooks.parse.timestamps import seconds_between
from flink_runbooks.evidence.memory import (MIB, JobManagerMemory, MemoryConfigError, TaskManagerMemory, derive_jobmanager_memory,
                     derive_taskmanager_memory, grow_pool)
from flink_runbooks.evidence.memory.incident import (STATE_BACKEND_IN_LOG, deployment_of, effective_taskmanager_memory, model_applies,
                              user_memory_config)
from flink_runbooks.model import ChainLink, Event, Incident
from flink_runbooks.vocabulary import keys
from flink_runbooks.vocabulary.units import format_size, parse_memory_size
from flink_runbooks.vocabulary.lifecycle import (
    GLOBAL_FAILURE, JOB_FAILOVER, JOB_RUNNING, JOB_STATE, RECOVERY_SUPPRESSED, TASK_FAILED, TASK_RUNNING)

# A frame of user code: a job jar uploaded through the blob server, or any jar that is not Flink's own.
USER_JAR_FRAME = r"\[blob_p-[0-9a-f]+-[0-9a-f]+:|~?\[(?!flink-|\?|na:|jrt:)[\w.+-]+\.jar:"
# The same without a lookahead, for the line pre-filter (RE2 has none); it also lets through a few odd jar names the
# exact pattern rejects, which the detectors then do.
USER_JAR_FRAME_PREFILTER = (r"\[blob_p-[0-9a-f]+-[0-9a-f]+:|"
                            r"~?\[(?:[^f?\]]|f[^l]|fl[^i]|fli[^n]|flin[^k]|flink[^-])[\w.+-]*\.jar:")

OOM = "java.lang.OutOfMemoryError"
KINDS: dict[str, re.Pattern[str]] = {
    # Flink's enrichment text (1.10+) names the pool too, so a mistyped pool name in a pasted message still counts.
    "heap": re.compile(r"^(?:Java heap space|GC overhead limit exceeded|Requested array size exceeds VM limit)"
                       r"|A heap space-related out-of-memory error has occurred"),
    "direct": re.compile(r"Direct buffer memory|bytes of direct buffer memory|The direct out-of-memory error has occurred"),
    "metaspace": re.compile(r"^(?:Metaspace|Compressed class space)|The metaspace out-of-memory error has occurred"
                            r"|memory\.jvm-metaspace\.size' configuration option should be increased"),
}
# a wrapper whose message is the OOM itself (``ExecutionException: java.lang.OutOfMemoryError: ...``), not a text
# that merely mentions one
_QUOTED = re.compile(r"^(?:(?:[a-zA-Z_$][\w$]*\.)+[\w$]*(?:Exception|Error|Throwable): )*java\.lang\.OutOfMemoryError: "
                     r"(?P<msg>.*)")
_INLINE_CAUSE = re.compile(r"with failure cause: java\.lang\.OutOfMemoryError: (?P<msg>.+)$")

# Whose JVM ran out: Flink's enriched texts name it; so do the fatal-error handlers around them.
_JM_TEXT = re.compile(r"Flink Master|JobManager (?:requires|has to be shut ?down)|'jobmanager\.memory\.")
_TM_TEXT = re.compile(r"'taskmanager\.memory\.|task executor has to be shut ?down", re.I)
TM_FATAL = re.compile(r"Fatal error occurred while executing the TaskManager|Fatal error occurred in TaskExecutor|"
                      r"TaskManager .*(?:fatal error|Shutting it down)|Task did not exit gracefully within|"
                      r"Terminating TaskManagerRunner with exit code [1-9-]|TaskManager initialization failed")
JM_FATAL = re.compile(r"Fatal error occurred in the cluster entrypoint|Fatal error occurred in (?:the )?"
                      r"(?:ResourceManager|Dispatcher|JobMaster|JobManager)|Error while (?:starting|running) the "
                      r"(?:Flink )?(?:JobManager|Dispatcher)|Could not start cluster entrypoint")
UNCAUGHT = re.compile(r"(?:FATAL: )?Thread '(?P<thread>[^']*)' produced an uncaught exception|"
                      r"Exception in thread \"(?P<thread2>[^\"]*)\"|Uncaught error from thread \[(?P<thread3>[^\]]*)\]")
_JOB_WRAPPER = re.compile(rf"{JOB_STATE.pattern}|{RECOVERY_SUPPRESSED.pattern}|{GLOBAL_FAILURE.pattern}|"
                          r"reached (?:globally )?terminal state|Job \w+ failed|JobResult|job has failed")
_NEW_FAILURE = re.compile(rf"{JOB_FAILOVER.pattern}|{GLOBAL_FAILURE.pattern}")
ATTEMPT = re.compile(r"\((?P<id>[0-9a-f]{32}(?:_[0-9a-f]{32}_\d+_\d+)?)\)")
TASK_STARTED = re.compile(rf"{ATTEMPT.pattern} {TASK_RUNNING.pattern}")
TM_BANNER = re.compile(r"Starting (?:TaskManager|\w*TaskExecutorRunner) \(Version")
SUBMISSION = re.compile(r"Received JobGraph submission '?(?P<name>.*?)'? \((?P<job>[0-9a-f]{32})\)|"
                        r"Submitting job '?(?P<name2>.*?)'? \((?P<job2>[0-9a-f]{32})\)|"
                        r"Received JobGraph submission (?P<job3>[0-9a-f]{32})")

# Signatures the OOM runbooks share: task starts (time to OOM), job submissions (leaks across submissions) and the
# memory spec a resource manager starts TaskManagers with.
CONTEXT_SIGNATURES = (
    TASK_RUNNING.pattern,
    r"Received JobGraph submission",
    r"Submitting job \S+ \(",
    r"TaskExecutorProcessSpec \{",
)


@dataclass
class OomOccurrence:
    """One OutOfMemoryError: a failed execution attempt or a crashed process, with every record reporting it."""

    kind: str  # heap | direct | metaspace
    event: Event  # the richest record (the TaskManager's own one when present)
    link: ChainLink  # the OutOfMemoryError of its chain
    process: str  # jobmanager | taskmanager: whose JVM ran out
    fatal: bool  # a fatal-error handler took the process down (not just one task failure)
    attempt: str | None = None  # execution attempt id
    task: str | None = None  # task name as logged
    taskmanager: str | None = None  # resource id of the TaskManager (JobManager records name it)
    reports: list[Event] = field(default_factory=list)  # every record of this occurrence

    @property
    def ts(self) -> str | None:
        return self.event.ts

    @property
    def message(self) -> str:
        return self.link.message


def oom_link(event: Event, kind: str) -> ChainLink | None:
    """The OutOfMemoryError of ``kind`` in the record's exception chain (also when a wrapper quotes it)."""
    rx = KINDS[kind]
    inline = _INLINE_CAUSE.search(event.message) if TASK_FAILED.search(event.message) else None
    if inline and rx.search(inline.group("msg")):
        # 1.12-1.14 put the stringified exception on the task's own line: "... to FAILED with failure cause: java..."
        return ChainLink(OOM, inline.group("msg").strip(), "top")
    for link in event.chain:
        if link.kind == "suppressed":
            continue
        if link.simple_name == "OutOfMemoryError" and rx.search(link.message):
            return link
        quoted = _QUOTED.search(link.message)
        if quoted and rx.search(quoted.group("msg")):
            return ChainLink(OOM, quoted.group("msg"), link.kind)
    return None


def _process(event: Event, link: ChainLink) -> tuple[str, bool]:
    """(whose JVM, fatal?) for one record."""
    text = link.message
    if _JM_TEXT.search(text):
        return "jobmanager", True
    if TASK_FAILED.search(event.message):
        return "taskmanager", False
    if TM_FATAL.search(event.message):
        return "taskmanager", True
    if JM_FATAL.search(event.message):
        return "jobmanager", True
    if UNCAUGHT.search(event.message):
        return (event.role if event.role in ("jobmanager", "taskmanager") else "taskmanager"), True
    if GLOBAL_FAILURE.search(event.message) and not JOB_STATE.search(event.message):
        return "jobmanager", False  # a global failure starts on the JobManager (coordinators, checkpointing)
    if _TM_TEXT.search(text):
        return "taskmanager", False
    return (event.role if event.role == "jobmanager" and not _JOB_WRAPPER.search(event.message)
            else "taskmanager"), False


def occurrences(incident: Incident, kind: str) -> list[OomOccurrence]:
    """Every OutOfMemoryError of ``kind``, one per failed attempt or crashed process, in time order.

    The JobManager's copy of a task failure folds into the TaskManager's record of the same attempt; job-level
    records (RESTARTING, FAILING, "Recovery is suppressed", terminal state) fold into the attempt that failed just
    before them and only stand alone when no task or process record is there (a JobManager-only excerpt).
    """
    found: list[OomOccurrence] = []
    wrappers: list[tuple[Event, ChainLink]] = []
    for ev in incident.events:
        link = oom_link(ev, kind)
        if link is None:
            continue
        if _JOB_WRAPPER.search(ev.message) and not TASK_FAILED.search(ev.message):
            wrappers.append((ev, link))
            continue
        process, fatal = _process(ev, link)
        attempt = ATTEMPT.search(ev.message)
        on = TASK_ON.search(ev.message)
        task = ev.message.split(" (", 1)[0].strip() if TASK_FAILED.search(ev.message) else None
        occ = OomOccurrence(kind, ev, link, process, fatal, attempt.group("id") if attempt else None,
                            task, on.group("tm") if on else None, [ev])
        same = next((o for o in found if o.attempt and o.attempt == occ.attempt), None)
        if same is None and not occ.attempt:
            # the same crash told twice (a fatal handler and the thread's own record, JSON and text copies)
            same = next((o for o in found if not o.attempt and o.process == occ.process and o.event.file == ev.file
                         and _close(o.ts, ev.ts, 2)), None)
        if same is None:
            found.append(occ)
            continue
        same.reports.append(ev)
        same.taskmanager = same.taskmanager or occ.taskmanager
        same.fatal = same.fatal or occ.fatal
        own_log = (ev.role == "taskmanager", len(ev.frames))
        if own_log > (same.event.role == "taskmanager", len(same.event.frames)):
            same.event, same.link = ev, link
    for occ in [o for o in found if o.attempt is None]:
        # the fatal-error handler's or a library's own record of the OOM that failed a task next to it is that
        # occurrence (the user-code class loader reports a Metaspace OOM to the TaskManager and to the task)
        owner = next((o for o in found if o.attempt and o.process == occ.process and o.event.file == occ.event.file
                      and _close(o.ts, occ.ts, 5)), None)
        if owner is not None:
            owner.reports.append(occ.event)
            owner.fatal = owner.fatal or occ.fatal
            found.remove(occ)
    standalone: list[OomOccurrence] = []
    for ev, link in wrappers:
        starts_failure = bool(_NEW_FAILURE.search(ev.message))
        candidates = found + ([] if starts_failure else standalone)
        owner = max((o for o in candidates if (o.ts or "") <= (ev.ts or "~") and _close(o.ts, ev.ts, 120)),
                    key=lambda o: o.ts or "", default=None)
        if owner is not None:
            owner.reports.append(ev)
            continue
        process, fatal = _process(ev, link)
        standalone.append(OomOccurrence(kind, ev, link, process, fatal, reports=[ev]))
    found += standalone
    found.sort(key=lambda o: (o.ts or "~", o.event.file, o.event.line))
    return found


def _close(a: str | None, b: str | None, seconds: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    gap = seconds_between(a, b)
    return gap is not None and abs(gap) <= seconds


# ---------------------------------------------------------------------------------------------------------------
# timing: how long each attempt ran before it ran out


def uptimes(incident: Incident, found: list[OomOccurrence]) -> list[float | None]:
    """Seconds each OOM came after its attempt started (or, failing that, the job or its TaskManager), in one pass."""
    attempt_starts: dict[str, list[str]] = {}
    job_starts: list[str] = []
    banners: dict[str, list[str]] = {}
    for ev in incident.events:
        if not ev.ts:
            continue
        if m := TASK_STARTED.search(ev.message):
            attempt_starts.setdefault(m.group("id"), []).append(ev.ts)
        elif JOB_RUNNING.search(ev.message):
            job_starts.append(ev.ts)
        elif TM_BANNER.search(ev.message):
            banners.setdefault(ev.file, []).append(ev.ts)

    def latest(stamps: list[str], ts: str) -> str | None:
        return max((t for t in stamps if t <= ts), default=None)

    out: list[float | None] = []
    for occ in found:
        start = None
        if occ.ts:
            start = (latest(attempt_starts.get(occ.attempt or "", []), occ.ts) or latest(job_starts, occ.ts)
                     or latest(banners.get(occ.event.file, []), occ.ts))
        out.append(seconds_between(start, occ.ts) if start else None)
    return out


def same_process(incident: Incident, a: OomOccurrence, b: OomOccurrence) -> bool:
    """Both OOMs hit the same JVM: the same TaskManager with no restart of it in between."""
    if a.process != b.process:
        return False
    if a.taskmanager and b.taskmanager:
        if a.taskmanager != b.taskmanager:
            return False
    elif a.event.role == b.event.role == "taskmanager" and a.event.file != b.event.file:
        return False
    if not (a.ts and b.ts):
        return True
    files = {o.event.file for o in (a, b) if o.event.role == "taskmanager"}
    return not any(ev.file in files and ev.ts and a.ts < ev.ts < b.ts and TM_BANNER.search(ev.message)
                   for ev in incident.events)


def restarts_before(incident: Incident, ts: str | None) -> list[Event]:
    """The job's RESTARTING transitions before ``ts``."""
    return [ev for ev in incident.events if (m := JOB_STATE.search(ev.message)) and m.group("to") == "RESTARTING"
            and (ts is None or (ev.ts or "") <= ts)]


def submissions_before(incident: Incident, ts: str | None) -> list[tuple[Event, str, str]]:
    """Job submissions to the cluster before ``ts``: (event, job id, job name)."""
    out = []
    for ev in incident.events:
        if ts and ev.ts and ev.ts > ts:
            break
        m = SUBMISSION.search(ev.message)
        if m:
            job = m.group("job") or m.group("job2") or m.group("job3")
            name = m.group("name") or m.group("name2") or ""
            if job not in {j for _, j, _ in out}:
                out.append((ev, job, name))
    return out


# ---------------------------------------------------------------------------------------------------------------
# frames


def matching_frames(event: Event, patterns: tuple[str, ...]) -> list[str]:
    """The record's frames that match one of ``patterns``, in stack order.

    Spark keeps only frames some detector asked for, so a detector must judge from the frames *it* asked for to
    reach the same verdict on a full log and on an excerpt.
    """
    rx = re.compile("|".join(f"(?:{p})" for p in patterns))
    return [f for f in event.frames if rx.search(f)]


def frame_class(frame: str) -> str:
    """``at a.b.C$D.m(C.java:1) ~[x.jar:?]`` -> ``a.b.C$D.m``."""
    m = re.match(r"^\s*at\s+(?:[\w.-]+/)*([\w$.<>]+)\(", frame)
    return m.group(1) if m else frame.strip()


# ---------------------------------------------------------------------------------------------------------------
# state backend and checkpoints


HEAP_BACKENDS = ("hashmap", "filesystem", "fs", "jobmanager", "memory")


def state_backend(incident: Incident) -> tuple[str, str]:
    """(``heap`` | ``rocksdb`` | ``changelog`` | ``other``, how we know): what the job's tasks logged beats the
    configuration (job code can set the backend); no setting at all is the heap backend (Flink's default)."""
    logged = [(ev, m) for ev, m in incident.find(STATE_BACKEND_IN_LOG)]
    if logged:
        ev, m = logged[-1]
        name = m.group("backend")
        kind = "rocksdb" if "RocksDB" in name else "changelog" if name == "Changelog" else "heap"
        return kind, f"{ev.file.rsplit('/', 1)[-1]}:{ev.line}: {ev.message.strip()[:120]}"
    cv = incident.config.lookup("state.backend.type")
    if cv is None:
        version = incident.version_tuple
        key = keys.name_for("state.backend.type", version) if version else "state.backend.type"
        default = "hashmap" if not version or tuple(version[:2]) >= (1, 13) else "memory"
        return "heap", f"{key} not set: Flink's default is the heap ({default}) backend"
    value = cv.value.strip().lower()
    if value in HEAP_BACKENDS or "hashmap" in value or "fsstatebackend" in value or "memorystatebackend" in value:
        return "heap", f"{cv.key}: {cv.value} ({cv.source})"
    if "rocksdb" in value:
        return "rocksdb", f"{cv.key}: {cv.value} ({cv.source})"
    return "other", f"{cv.key}: {cv.value} ({cv.source})"


@dataclass
class CheckpointGrowth:
    completed: int
    first_bytes: int | None
    last_bytes: int | None
    largest_bytes: int | None

    @property
    def ratio(self) -> float | None:
        if not self.first_bytes or self.last_bytes is None:
            return None
        return self.last_bytes / self.first_bytes

    @property
    def growing(self) -> bool:
        """At least three completed checkpoints and the last one half as large again as the first."""
        return self.completed >= 3 and (self.ratio or 0) >= 1.5


def checkpoint_growth(incident: Incident, until: str | None = None) -> CheckpointGrowth:
    sizes = [a.size_bytes for a in checkpoint_history(incident) if a.outcome == "completed"
             and a.size_bytes is not None and (until is None or (a.finished or "") <= until)]
    return CheckpointGrowth(len(sizes), sizes[0] if sizes else None, sizes[-1] if sizes else None,
                            max(sizes) if sizes else None)


# ---------------------------------------------------------------------------------------------------------------
# TaskManager memory: what is in force and how to change it


@dataclass
class TaskManagerSizing:
    """The incident's TaskManager memory and what the model can change about it."""

    memory: TaskManagerMemory | None
    source: str
    conf: dict[str, str]  # the user's configuration (no generated -D sizes)
    version: tuple[int, ...] | None
    deployment: str
    slots: int

    @property
    def model(self) -> bool:
        return self.memory is not None and (self.version is None or tuple(self.version[:2]) >= (1, 10))

    def per_slot(self, pool: str) -> int | None:
        if self.memory is None:
            return None
        return getattr(self.memory, pool) // max(1, self.slots)


def taskmanager_sizing(incident: Incident) -> TaskManagerSizing:
    mem, source = effective_taskmanager_memory(incident)
    if not model_applies(incident):
        mem = None
    slots = incident.config.get_int("taskmanager.numberOfTaskSlots") or 1
    return TaskManagerSizing(mem, source, user_memory_config(incident), incident.version_tuple,
                             deployment_of(incident), slots)


def base_configuration(sizing: TaskManagerSizing) -> dict[str, str]:
    """The user's configuration, or the logged process size when the incident shows no memory settings (a TaskManager
    excerpt): the model needs a total to grow."""
    conf = dict(sizing.conf)
    if not any(k.startswith(("taskmanager.memory.", "taskmanager.heap.")) for k in conf) and sizing.memory is not None:
        conf["taskmanager.memory.process.size"] = format_size(sizing.memory.process)
    return conf


def changes_for(sizing: TaskManagerSizing, pool: str, amount: float | int | str) -> dict[str, str | None]:
    """``memory.grow_pool`` on the user's configuration (raises ValueError/MemoryConfigError when impossible)."""
    conf = base_configuration(sizing)
    changes = grow_pool(conf, sizing.version, pool, amount, deployment=sizing.deployment)
    if conf != sizing.conf:
        # the process size we assumed is the one the TaskManager logged: state it, it is not in the user's file
        changes.setdefault("taskmanager.memory.process.size", conf["taskmanager.memory.process.size"])
    return changes


def heap_from_managed(sizing: TaskManagerSizing, target_task_heap: int) -> dict[str, str] | None:
    """A lower ``managed.fraction`` that gives the task heap ``target_task_heap`` inside the same process size, or
    None when managed memory cannot give that much (keeps at least 5 % managed; task heap must be derived)."""
    if sizing.memory is None:
        return None
    conf = base_configuration(sizing)
    if any(k in conf for k in ("taskmanager.memory.task.heap.size", "taskmanager.memory.managed.size",
                               "taskmanager.memory.size")):
        return None
    mem = sizing.memory
    delta = target_task_heap - mem.task_heap
    if delta <= 0 or mem.flink <= 0:
        return None
    fraction = int((mem.managed - delta) / mem.flink * 100) / 100
    if fraction < 0.05:
        return None
    changes = {"taskmanager.memory.managed.fraction": f"{fraction:g}"}
    try:
        after = derive_taskmanager_memory({**conf, **changes}, sizing.version, deployment=sizing.deployment)
    except MemoryConfigError:
        return None
    if after.task_heap + (1 << 16) < target_task_heap or after.process != mem.process or after.network < mem.network:
        return None
    return changes


def grow_framework_off_heap(sizing: TaskManagerSizing, amount: int) -> dict[str, str | None]:
    """Grow ``taskmanager.memory.framework.off-heap.size`` by ``amount`` bytes.

    The model treats framework and task off-heap alike (two fixed parts of total Flink memory, both inside
    ``-XX:MaxDirectMemorySize``), so the totals ``grow_pool`` computes for task off-heap fit framework off-heap too;
    the result is derived again to prove it.
    """
    fw_key, task_key = "taskmanager.memory.framework.off-heap.size", "taskmanager.memory.task.off-heap.size"
    conf = base_configuration(sizing)
    before = derive_taskmanager_memory(conf, sizing.version, deployment=sizing.deployment)
    changes = changes_for(sizing, "task_off_heap", amount)
    if task_key in conf:
        changes[task_key] = conf[task_key]
    else:
        changes.pop(task_key, None)
    changes[fw_key] = format_size(before.framework_off_heap + amount)
    trial = {k: v for k, v in {**conf, **changes}.items() if v is not None}
    after = derive_taskmanager_memory(trial, sizing.version, deployment=sizing.deployment)
    if after.framework_off_heap < before.framework_off_heap + amount or after.task_off_heap != before.task_off_heap:
        raise ValueError("growing framework off-heap memory does not fit the model")
    return {k: v for k, v in changes.items() if conf.get(k) != v}


# ---------------------------------------------------------------------------------------------------------------
# JobManager memory (FLIP-116, 1.11+)

_JM = "jobmanager.memory."
_JM_GENERATED = (_JM + "heap.size", _JM + "off-heap.size", _JM + "jvm-metaspace.size", _JM + "jvm-overhead.min",
                 _JM + "jvm-overhead.max")


def user_jobmanager_config(incident: Incident) -> dict[str, str]:
    """The user's configuration without the JobManager's generated ``-D jobmanager.memory.*=<n>b`` sizes."""
    conf = user_memory_config(incident)
    for key in _JM_GENERATED:
        cv = incident.config.lookup(key)
        if cv is None or cv.source.kind != "dynamic" or not re.fullmatch(r"\d+b", cv.value):
            continue
        written = [h for h in incident.config.history(key) if h.source.kind in ("file", "log")]
        if written:
            conf[key] = written[-1].value
        else:
            conf.pop(key, None)
    return conf


def jobmanager_memory(incident: Incident) -> tuple[JobManagerMemory | None, str]:
    """The JobManager's memory: the model of the user's configuration, else the heap the JobManager was given."""
    version = incident.version_tuple
    conf = user_jobmanager_config(incident)
    if version is None or tuple(version[:2]) >= (1, 11):
        try:
            mem = derive_jobmanager_memory(conf, version, deployment=deployment_of(incident))
            key = next((k for k in (_JM + "process.size", _JM + "flink.size", _JM + "heap.size",
                                    "jobmanager.heap.size") if k in conf), None)
            return mem, f"model of {key}: {conf[key]}" if key else "model of the configuration"
        except (MemoryConfigError, ValueError):
            pass
    heap = incident.config.get_bytes(_JM + "heap.size") or incident.config.get_bytes("jobmanager.heap.size")
    if heap:
        return JobManagerMemory(0, 0, heap, 0, 0, 0), "the JobManager's heap size"
    return None, "no JobManager memory settings in the incident"


def grow_jobmanager_pool(incident: Incident, pool: str, factor: float) -> dict[str, str]:
    """Key changes that grow the JobManager's ``heap``, ``off_heap`` or ``metaspace`` by ``factor`` and keep the model
    valid.

    The pool's own key is set when it is configured (``heap.size``, ``jvm-metaspace.size``); a configured total
    (``process.size``, ``flink.size``) grows by the smallest whole number of mebibytes that gives the pool its
    target without shrinking the others. Before 1.11 (no model) the legacy ``jobmanager.heap.size`` is scaled; no
    key sized the other pools then.
    """
    version = incident.version_tuple
    conf = user_jobmanager_config(incident)
    if version is not None and tuple(version[:2]) < (1, 11):
        if pool != "heap":
            return {}
        heap = parse_memory_size(conf.get("jobmanager.heap.size")) or 1024 * MIB
        return {"jobmanager.heap.size": _mib(int(heap * factor))}
    deployment = deployment_of(incident)
    if not any(k.startswith(_JM) or k.startswith("jobmanager.heap.") for k in conf):
        conf[_JM + "process.size"] = "1600m"  # the distribution's jobmanager.memory.process.size
    before = derive_jobmanager_memory(conf, version, deployment=deployment)
    old = getattr(before, pool)
    target = int(old * factor)
    target = -(-target // MIB) * MIB
    own: dict[str, str] = {}
    if pool == "metaspace":
        own[_JM + "jvm-metaspace.size"] = _mib(target)
        totals = [_JM + "process.size"] if _JM + "process.size" in conf else []
    elif pool == "off_heap":
        own[_JM + "off-heap.size"] = _mib(target)
        totals = [k for k in (_JM + "process.size", _JM + "flink.size") if k in conf]
    else:
        if _JM + "heap.size" in conf:
            own[_JM + "heap.size"] = _mib(target)
        elif "jobmanager.heap.size" in conf and not any(k in conf for k in (_JM + "process.size", _JM + "flink.size")):
            own["jobmanager.heap.size"] = _mib(target)
        totals = [k for k in (_JM + "process.size", _JM + "flink.size") if k in conf]

    def candidate(extra: int) -> dict[str, str]:
        out = dict(own)
        for key in totals:
            out[key] = _mib(parse_memory_size(conf[key]) + extra)
        return out

    def fits(extra: int) -> bool:
        try:
            after = derive_jobmanager_memory({**conf, **candidate(extra)}, version, deployment=deployment)
        except (MemoryConfigError, ValueError):
            return False
        return getattr(after, pool) >= target and all(getattr(after, p) >= getattr(before, p)
                                       for p in ("heap", "off_heap", "metaspace", "overhead"))

    first = max(0, (target - old) // MIB)
    hit = next((m for m in range(first, first * 4 + 4096) if fits(m * MIB)), None)
    if hit is None:
        raise ValueError(f"no JobManager size gives the {pool} {format_size(target)}")
    written = user_jobmanager_config(incident)
    return {k: v for k, v in candidate(hit * MIB).items() if written.get(k) != v}


def _mib(num_bytes: int) -> str:
    return format_size(-(-num_bytes // MIB) * MIB)


def jvm_opts(incident: Incident, role: str) -> tuple[str, str | None]:
    """(key, current value) of the role's own JVM options; the shared ``env.java.opts.all`` keeps applying next to
    them, so flags are added there."""
    key = f"env.java.opts.{role}"
    return key, incident.config.get(key)


def with_jvm_flags(current: str | None, flags: list[str]) -> str | None:
    """``current`` JVM options plus ``flags`` that are not in it yet (None when nothing is missing)."""
    text = (current or "").strip()
    missing = [f for f in flags if f.split("=", 1)[0] not in text]
    if not missing:
        return None
    return " ".join(p for p in (text, *missing) if p)


def mib_text(num_bytes: int | None) -> str:
    """Sizes for explanations: ``384m``, ``1.5g`` (rounded to whole mebibytes)."""
    if num_bytes is None:
        return "?"
    mib = round(num_bytes / MIB)
    if mib >= 1024 and mib % 512 == 0:
        return f"{mib / 1024:g}g"
    return f"{mib}m"


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def repeats_as_evidence(found: list, uptimes: list[float | None], evidence: list, notes: dict[int, str],
                        most: int = 3) -> None:
    """Add the OOMs after the first (up to ``most``) to a finding's evidence, each with how long its attempt ran."""
    for occurrence, uptime in list(zip(found, uptimes))[1:most + 1]:
        notes[len(evidence)] = "it happened again" + (f" after {duration_text(uptime)}" if uptime is not None else "")
        evidence.append(occurrence.event)


def occurrence_details(found: list, uptimes: list[float | None]) -> dict:
    """What every OOM finding reports about the OOMs themselves: how many, where the first one was, how long each
    attempt ran before it."""
    first = found[0]
    return {"occurrences": len(found), "process": first.process, "fatal": first.fatal,
            "message": first.message[:160], "task": first.task,
            "seconds_running_before_oom": [round(u, 1) if u is not None else None for u in uptimes]}
