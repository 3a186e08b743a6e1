"""TaskManager memory facts read from an incident, for the memory runbooks.

The model in :mod:`memory` works on a flat configuration; this module finds what to feed it and what Flink itself
said: the effective TaskManager breakdown a process logged, the configuration as the user wrote it (without the
``-D taskmanager.memory.*=<n>b`` sizes the start scripts generate for every TaskManager), memory configuration
errors, containers killed for memory (YARN, Kubernetes, the kernel's cgroup OOM killer) and whether RocksDB's native
memory is inside the TaskManager's budget.

Typical use from a detector::

    mem, source = effective_taskmanager_memory(incident)   # logged breakdown, else the model of the config
    conf = user_memory_config(incident)                      # what suggest_fix / grow_pool should change
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping

from flink_runbooks.vocabulary import keys
from flink_runbooks.evidence.memory import (MemoryConfigError, TaskManagerMemory, derive_taskmanager_memory, grow_pool,
                     parse_logged_breakdown)
from flink_runbooks.evidence.deployment import deployment
from flink_runbooks.evidence.memory.logged import breakdown_from_pools
from flink_runbooks.model import Event, Evidence, Incident
from flink_runbooks.vocabulary.units import format_size, parse_memory_size

MODEL_SINCE = (1, 10)  # FLIP-49; older TaskManagers have no process/flink size, managed or network fractions
DEFAULT_SLOTS = 1

# Memory sizes the start scripts / resource managers pass to every TaskManager as -D <key>=<bytes>b.
GENERATED_MEMORY_KEYS = frozenset(TaskManagerMemory(*([0] * 10)).dynamic_configs())
_GENERATED_VALUE = re.compile(r"^\d+b$")

_ROCKSDB_MANAGED = "state.backend.rocksdb.memory.managed"
_ROCKSDB_FIXED = "state.backend.rocksdb.memory.fixed-per-slot"
_ROCKSDB_FIXED_PER_TM = "state.backend.rocksdb.memory.fixed-per-tm"
_SLOTS = "taskmanager.numberOfTaskSlots"

# ---------------------------------------------------------------------------------------------------------------
# deployment and version


def deployment_of(incident: Incident) -> str:
    """``yarn``, ``kubernetes`` (native) or ``standalone``, as the memory model reads the legacy heap keys."""
    return deployment(incident).memory_target


def model_applies(incident: Incident) -> bool:
    """The FLIP-49 model describes this incident's TaskManagers (version unknown counts as yes)."""
    version = incident.version_tuple
    return version is None or tuple(version[:2]) >= MODEL_SINCE


# ---------------------------------------------------------------------------------------------------------------
# configuration


def _generated(cv) -> bool:
    return cv.key in GENERATED_MEMORY_KEYS and cv.source.kind == "dynamic" and bool(_GENERATED_VALUE.match(cv.value))


def user_memory_config(incident: Incident) -> dict[str, str]:
    """The effective configuration with the generated per-TaskManager ``-D`` memory sizes taken out.

    A TaskManager's log repeats its whole memory breakdown as dynamic properties (``-D taskmanager.memory.task.heap.
    size=402653174b``, also in ``Loading dynamic configuration property``); fed back into the model they pin every
    pool, so a patch to the user's file would look ineffective. Where such a key also has a value from the file
    (or a logged file property) that value is kept.
    """
    flat = incident.config.as_flat_dict()
    for key, cv in incident.config.items():
        if _generated(cv):
            written = [h for h in incident.config.history(key) if h.source.kind in ("file", "log") and h.key == key]
            if written:
                flat[key] = written[-1].value
            else:
                flat.pop(key, None)
    return flat


def has_taskmanager_memory_config(conf: Mapping[str, str]) -> bool:
    return any(k.startswith(("taskmanager.memory.", "taskmanager.heap.", "taskmanager.network.memory."))
               for k in conf)


def apply_changes(conf: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    """``conf`` after ``changes`` (``None`` deletes the key under every spelling)."""
    out = dict(conf)
    for key, value in changes.items():
        for alias in keys.aliases(key):
            out.pop(alias, None)
        out.pop(key, None)
        if value is not None:
            out[key] = value
    return out


# ---------------------------------------------------------------------------------------------------------------
# effective TaskManager memory


def _file_lines(events: list[Event]) -> list[str]:
    lines = []
    for ev in sorted(events, key=lambda e: e.line):
        lines.append(ev.message)
        lines.extend(ev.body)
    return lines


def logged_taskmanager_memory(incident: Incident) -> tuple[TaskManagerMemory | None, str | None]:
    """The breakdown a TaskManager (or the resource manager starting it) logged, and where: the last
    "Final TaskExecutor Memory configuration" block, ``TaskExecutorProcessSpec {...}`` or the generated ``-D``
    memory sizes. TaskManager logs are preferred over the others."""
    by_file: dict[str, list[Event]] = {}
    for ev in incident.events:
        by_file.setdefault(ev.file, []).append(ev)
    role_rank = {"taskmanager": 0, "unknown": 1, "client": 2, "jobmanager": 3}
    ordered = sorted(by_file.items(), key=lambda kv: (role_rank.get(kv[1][0].role, 1), kv[0]))
    for path, events in ordered:
        mem = parse_logged_breakdown(_file_lines(events))
        if mem is not None:
            marker = next((ev for ev in sorted(events, key=lambda e: -e.line)
                           if "Final TaskExecutor Memory configuration" in ev.text
                           or "TaskExecutorProcessSpec {" in ev.text or "-D taskmanager.memory." in ev.text), None)
            where = f"{path}:{marker.line}" if marker else path
            what = mem.notes[0].removeprefix("read from ") if mem.notes else "logged breakdown"
            return mem, f"{what} ({where})"
    rest = rest_taskmanager_memory(incident)
    if rest is not None:
        return rest
    generated = {k: cv for k, cv in incident.config.items() if _generated(cv)}
    if len(generated) == len(GENERATED_MEMORY_KEYS):
        line = " ".join(f"-D {k}={cv.value}" for k, cv in generated.items())
        mem = parse_logged_breakdown([line])
        if mem is not None:
            return mem, f"TaskManager dynamic properties ({next(iter(generated.values())).source})"
    return None, None


# TaskManagerDetailsInfo's memoryConfiguration (TaskExecutorMemoryConfiguration, 1.12+): the sizes the TaskManager
# runs with, in bytes.
_REST_POOLS = {"frameworkHeap": "framework_heap", "frameworkOffHeap": "framework_off_heap", "taskHeap": "task_heap",
               "taskOffHeap": "task_off_heap", "networkMemory": "network", "managedMemory": "managed",
               "jvmMetaspace": "metaspace", "jvmOverhead": "overhead"}


def rest_taskmanager_memory(incident: Incident) -> tuple[TaskManagerMemory, str] | None:
    """The breakdown a TaskManager's REST details report (a pulled bundle's ``GET /taskmanagers/:id``), and where."""
    for snapshot in incident.rest:
        for tm in snapshot.taskmanagers:
            pools = {pool: int(tm.memory[name]) for name, pool in _REST_POOLS.items() if name in tm.memory}
            mem = breakdown_from_pools(pools, f"GET /taskmanagers/{tm.id}")
            if mem is not None:
                return mem, f"the TaskManager's REST details ({tm.document or tm.id})"
    return None


def derived_taskmanager_memory(incident: Incident) -> tuple[TaskManagerMemory | None, MemoryConfigError | None]:
    """The model of the user's configuration: the breakdown, or the error Flink would throw (both None when the
    incident has no TaskManager memory settings or predates the model)."""
    if not model_applies(incident):
        return None, None
    conf = user_memory_config(incident)
    if not has_taskmanager_memory_config(conf):
        return None, None
    try:
        return derive_taskmanager_memory(conf, incident.version_tuple, deployment=deployment_of(incident)), None
    except MemoryConfigError as error:
        return None, error


def effective_taskmanager_memory(incident: Incident) -> tuple[TaskManagerMemory | None, str]:
    """The TaskManager memory breakdown in force, and where it comes from.

    A breakdown a process logged wins (it is what the JVM got); otherwise the model of the user's configuration.
    ``(None, why)`` when neither is available: no memory settings, a configuration Flink refuses, or a version
    before the FLIP-49 model.
    """
    mem, where = logged_taskmanager_memory(incident)
    if mem is not None:
        return mem, f"logged: {where}"
    if not model_applies(incident):
        return None, f"Flink {incident.flink_version} predates the FLIP-49 memory model (1.10)"
    derived, error = derived_taskmanager_memory(incident)
    if derived is not None:
        source = incident.config.lookup("taskmanager.memory.process.size") or incident.config.lookup(
            "taskmanager.memory.flink.size")
        return derived, f"model of the configuration ({source.source if source else 'configuration'})"
    if error is not None:
        return None, f"the configuration is invalid ({error.constraint}): {error.flink_message}"
    return None, "no TaskManager memory settings and no logged breakdown in the incident"


def breakdown_rows(mem: TaskManagerMemory) -> list[dict[str, str]]:
    """``TaskManagerMemory.rows()`` as display rows (label, size, bytes, how it was derived)."""
    return [{"pool": label, "size": format_size(size), "bytes": size, "how": how} for label, size, how in mem.rows()]


# ---------------------------------------------------------------------------------------------------------------
# memory configuration errors in the logs

MEMORY_CONFIG_ERROR = re.compile(
    r"(?:TaskManager|JobManager) memory configuration failed|"
    r"Sum of configured .*exceed configured Total (?:Flink|Process) Memory|"
    r"Derived JVM Overhead size .* is not in configured JVM Overhead range|"
    r"Derived Network Memory size .* is not in configured Network Memory range|"
    r"the derived Network Memory is inconsistent with its configuration|"
    r"Derived Network Memory size .* does not match configured Network Memory size|"
    r"Inconsistently configured Key: 'taskmanager\.(?:memory|network)\.|"
    r"Configured and Derived (?:Flink internal )?memory sizes \(total .*\) do not add up|"
    r"The configured Total Process Memory size .* is less than the sum of the derived Total Flink Memory|"
    r"Either required fine-grained memory \(taskmanager\.memory\.task\.heap\.size"
)
TM_START_SCRIPT_FAILED = re.compile(r"Could not get JVM parameters and dynamic configurations properly")
_EXCEPTION_AT = re.compile(r"((?:[\w$]+\.)+IllegalConfigurationException): (.*)")


def memory_config_error_events(incident: Incident) -> list[Event]:
    """Events carrying one of Flink's memory-model ``IllegalConfigurationException`` texts, in time order."""
    return [ev for ev, _ in incident.find(MEMORY_CONFIG_ERROR)]


def error_evidence(event: Event, note: str) -> Evidence:
    """Evidence showing the exception text itself: a start script prints it after unrelated INFO lines, so the
    record it lands in may begin with something else."""
    lines = [line for line in event.text.splitlines() if MEMORY_CONFIG_ERROR.search(line)]
    # the outermost exception ("... memory configuration failed: ...") first, its cause after it
    lines.sort(key=lambda line: 0 if "memory configuration failed" in line else 1)
    shown = []
    for i, line in enumerate(lines):
        m = _EXCEPTION_AT.search(line)
        text = f"{m.group(1)}: {m.group(2)}" if m else line
        text = ("Caused by: " if i and m else "") + text
        if text not in shown:
            shown.append(text)
    text = "\n".join(shown) if shown else event.excerpt()
    return Evidence(event.file, event.line, event.ts, text[:1200], note)


def config_evidence(incident: Incident, key: str, note: str) -> Evidence | None:
    """Evidence pointing at where a configuration value came from (file line, logged property or -D)."""
    cv = incident.config.lookup(key)
    if cv is None or _generated(cv):
        return None
    return Evidence(cv.source.path or str(cv.source), cv.source.line or 0, None, f"{cv.key}: {cv.value}", note)


# ---------------------------------------------------------------------------------------------------------------
# containers killed for memory

# Line signatures (Java/Python regex subset) that keep the kill evidence in Spark's pre-filter.
KILL_SIGNATURES = (
    r"is running (?:\d+B )?beyond (?:the )?'?(?:PHYSICAL|VIRTUAL|physical|virtual)'? memory limit",
    r"Container killed on request\. Exit code is",
    r"exited with a non-zero exit code 1[34][37]",
    r"OOMKilled",
    r"Memory cgroup out of memory",
    r"memory: usage \d+kB, limit \d+kB",
    r"(?:Worker|Container|Pod) \S+ (?:is )?terminated",
    r"exitCode=1[34][37]|[Ee]xit [Cc]ode(?: is|:)\s*1[34][37]",
    r"^\s+(?:Reason|Exit Code|Last State|Restart Count):\s+\S",
    r"^\s+memory:\s+\d+(?:\.\d+)?(?:[KMGTE]i?)?\s*$",
    r"The node was low on resource: memory",
)
_YARN_KILL = re.compile(
    r"Container \[pid=(?P<pid>\d+),\s*containerID=(?P<container>[\w-]+)\] is running (?:(?P<over>\d+)B )?beyond (?:the )?"
    r"'?(?P<kind>PHYSICAL|VIRTUAL|physical|virtual)'? memory limits?\. Current usage: (?P<pu>[\d.]+ ?[KMGT]?B) of "
    r"(?P<pl>[\d.]+ ?[KMGT]?B) physical memory used; (?P<vu>[\d.]+ ?[KMGT]?B) of (?P<vl>[\d.]+ ?[KMGT]?B) virtual "
    r"memory used")
_K8S_OOM = re.compile(r"reason[=:]\s*\"?OOMKilled|Reason:\s+OOMKilled|\"OOMKilled\":\s*true|\bOOMKilled\b")
_CGROUP_OOM = re.compile(r"Memory cgroup out of memory: Kill(?:ed)? process (?P<pid>\d+) \((?P<cmd>[^)]*)\)"
                         r"(?:.*?anon-rss:(?P<rss>\d+)kB)?")
_CGROUP_LIMIT = re.compile(r"memory: usage (?P<usage>\d+)kB, limit (?P<limit>\d+)kB")
_EVICTED = re.compile(r"The node was low on resource: memory\.(?: Threshold quantity: \S+, available: \S+\.)?"
                      r"(?: Container (?P<container>\S+) was using (?P<usage>\S+), (?:which exceeds|request is) "
                      r"(?:its request of )?(?P<request>\S+?)\.?(?:\s|$))?")
_EXIT_CODE = re.compile(r"(?:exitCode=|[Ee]xit [Cc]ode(?: is|:)\s*|non-zero exit code )(?P<code>\d+)")
_K8S_LIMIT = re.compile(r"^\s*memory:\s+(?P<q>\d+(?:\.\d+)?(?:[KMGTE]i?)?)\s*$")
_CONTAINER_NAME = re.compile(r"(container_(?:e\d+_)?\d+_\d+_\d+_\d+)|(?:Worker|Pod|pod|TaskExecutor connection) "
                             r"(?P<pod>[\w.-]+)|^Name:\s+(?P<described>[\w.-]+)", re.M)
_JM_CONTAINER = re.compile(r"container_(?:e\d+_)?\d+_\d+_\d+_0*1\b|jobmanager", re.I)


@dataclass
class ContainerKill:
    """One container or process the platform killed for memory."""

    event: Event
    platform: str  # yarn | kubernetes | kernel | docker
    kind: str  # physical | virtual | oom-killed | evicted
    container: str | None = None
    usage: int | None = None  # bytes in use when killed (physical; virtual for kind=virtual)
    limit: int | None = None  # the container's limit in bytes
    physical_usage: int | None = None
    physical_limit: int | None = None
    exit_code: int | None = None
    supporting: list[Event] = field(default_factory=list)

    @property
    def jobmanager(self) -> bool:
        return bool(self.container and _JM_CONTAINER.search(self.container))

    @property
    def excess(self) -> int | None:
        if self.usage is None or self.limit is None:
            return None
        return max(0, self.usage - self.limit)


def yarn_size(text: str) -> int | None:
    """``2.1 GB`` / ``512 MB`` / ``4 GB`` as YARN prints them (binary units) -> bytes."""
    m = re.match(r"^\s*([\d.]+)\s*([KMGT]?)B\s*$", text)
    if not m:
        return None
    factor = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2)]
    return int(float(m.group(1)) * factor)


def k8s_quantity(text: str) -> int | None:
    """A Kubernetes memory quantity (``4Gi``, ``4096Mi``, ``4G``, ``4294967296``) -> bytes."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTE]i?)?\s*$", text or "")
    if not m:
        return None
    unit = m.group(2) or ""
    binary = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Ei": 1 << 60}
    decimal = {"": 1, "K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "E": 10 ** 18}
    return int(float(m.group(1)) * (binary.get(unit) or decimal[unit]))


def _k8s_limit(event: Event) -> int | None:
    """The ``memory:`` line under ``Limits:`` of a ``kubectl describe pod`` excerpt."""
    lines = event.text.splitlines()
    in_limits = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("Limits:"):
            in_limits = True
            continue
        if stripped.startswith("Requests:"):
            in_limits = False
        if in_limits:
            m = _K8S_LIMIT.match(line)
            if m:
                return k8s_quantity(m.group("q"))
    # a lone "memory: 4Gi" line (the Limits header was not kept) is the limit when only one is there
    found = [k8s_quantity(m.group("q")) for line in lines if (m := _K8S_LIMIT.match(line))]
    return found[0] if len(set(found)) == 1 else None


def _exit_code(text: str) -> int | None:
    codes = [int(m.group("code")) for m in _EXIT_CODE.finditer(text)]
    return codes[-1] if codes else None


def container_memory_kills(incident: Incident) -> list[ContainerKill]:
    """Every kill for memory the incident shows, in time order (one per event; the same container reported by the
    NodeManager and again by the JobManager counts twice, as two pieces of evidence)."""
    kills: list[ContainerKill] = []
    for ev in incident.events:
        text = ev.text
        m = _YARN_KILL.search(text)
        if m:
            pu, pl = yarn_size(m["pu"]), yarn_size(m["pl"])
            vu, vl = yarn_size(m["vu"]), yarn_size(m["vl"])
            virtual = m["kind"].lower() == "virtual"
            if m["over"] and pl is not None and not virtual:
                pu = pl + int(m["over"])  # "2.0 GB of 2 GB" is rounded; the byte count is exact
            elif m["over"] and vl is not None and virtual:
                vu = vl + int(m["over"])
            kills.append(ContainerKill(ev, "yarn", "virtual" if virtual else "physical", m["container"],
                                       usage=vu if virtual else pu, limit=vl if virtual else pl,
                                       physical_usage=pu, physical_limit=pl, exit_code=_exit_code(text)))
            continue
        if re.search(r"is running (?:\d+B )?beyond (?:the )?'?(?:VIRTUAL|virtual)'? memory limit", text):
            kills.append(ContainerKill(ev, "yarn", "virtual", _container(text), exit_code=_exit_code(text)))
            continue
        if re.search(r"is running (?:\d+B )?beyond (?:the )?'?(?:PHYSICAL|physical)'? memory limit", text):
            kills.append(ContainerKill(ev, "yarn", "physical", _container(text), exit_code=_exit_code(text)))
            continue
        m = _CGROUP_OOM.search(text)
        if m:
            limit = _CGROUP_LIMIT.search(text)
            rss = int(m["rss"]) * 1024 if m["rss"] else None
            kills.append(ContainerKill(ev, "kernel", "oom-killed", f"pid {m['pid']} ({m['cmd']})", usage=rss,
                                       limit=int(limit["limit"]) * 1024 if limit else None, physical_usage=rss,
                                       exit_code=137))
            continue
        if _K8S_OOM.search(text):
            platform = "docker" if '"OOMKilled"' in text else "kubernetes"
            limit = _k8s_limit(ev)
            kills.append(ContainerKill(ev, platform, "oom-killed", _container(text), limit=limit,
                                       physical_limit=limit, exit_code=_exit_code(text) or 137))
            continue
        m = _EVICTED.search(text)
        if m:
            usage = k8s_quantity(m["usage"]) if m["usage"] else None
            request = k8s_quantity(m["request"]) if m["request"] else None
            kills.append(ContainerKill(ev, "kubernetes", "evicted", m["container"] or _container(text), usage=usage,
                                       limit=request, physical_usage=usage, physical_limit=request))
    _attach_context(incident, kills)
    return kills


def _container(text: str) -> str | None:
    m = _CONTAINER_NAME.search(text)
    if not m:
        return None
    return m.group(1) or m.group("pod") or m.group("described")


def _attach_context(incident: Incident, kills: list[ContainerKill]) -> None:
    """Exit-code lines and cgroup usage lines near a kill support it (and fill in missing numbers)."""
    if not kills:
        return
    used = {id(k.event) for k in kills}
    for ev in incident.events:
        if id(ev) in used:
            continue
        text = ev.text
        limit = _CGROUP_LIMIT.search(text)
        code = _exit_code(text)
        if not limit and code not in (137, 143):
            continue
        for kill in kills:
            same_file = ev.file == kill.event.file and abs(ev.line - kill.event.line) <= 40
            same_container = kill.container and kill.container in text
            if not (same_file or same_container):
                continue
            kill.supporting.append(ev)
            if limit and kill.limit is None:
                kill.limit = kill.physical_limit = int(limit["limit"]) * 1024
            if limit and kill.usage is None:
                kill.usage = kill.physical_usage = int(limit["usage"]) * 1024
            if code and kill.exit_code is None:
                kill.exit_code = code
            break


# ---------------------------------------------------------------------------------------------------------------
# RocksDB's native memory


# What a job's tasks say about their state backend (the job's code can override the configuration).
STATE_BACKEND_IN_LOG = re.compile(
    r"(?:loads the state backend as|Using (?:application-defined|job/cluster config) state backend:|"
    r"State backend is set to(?: heap memory)?|Loading state backend via factory) \S*?"
    r"(?P<backend>EmbeddedRocksDB|RocksDB|HashMap|Memory|Fs|Changelog)\w*")
STATE_BACKEND_SIGNATURES = (
    r"loads the state backend as \w+",
    r"Using (?:application-defined|job/cluster config) state backend",
    r"State backend is set to",
    r"Loading state backend via factory",
)


@dataclass
class RocksDBMemory:
    """How RocksDB's block cache and write buffers are bounded on one TaskManager."""

    backend_source: str  # where the incident says RocksDB is the state backend
    managed: bool  # state.backend.rocksdb.memory.managed (default true)
    fixed_per_slot: int | None  # state.backend.rocksdb.memory.fixed-per-slot in bytes
    slots: int
    fixed_per_tm: int | None = None  # state.backend.rocksdb.memory.fixed-per-tm (1.17+) in bytes
    managed_memory: int | None = None  # the TaskManager's managed memory (None when unknown)
    task_off_heap: int | None = None

    @property
    def demand(self) -> int | None:
        """Native memory RocksDB may take on the TaskManager: fixed-per-slot x slots, None when unbounded."""
        if self.fixed_per_slot is not None:
            return self.fixed_per_slot * self.slots
        if not self.managed:
            return self.fixed_per_tm
        return self.managed_memory

    @property
    def room(self) -> int | None:
        """Memory inside the process size RocksDB can use without pushing it over: the managed memory (left unused
        once RocksDB does not take it from there) plus the task off-heap budget."""
        if self.managed_memory is None:
            return None
        return self.managed_memory + (self.task_off_heap or 0)

    @property
    def problem(self) -> str | None:
        """``unbounded`` (managed off, no fixed size), ``over-budget`` (fixed size larger than the room) or None."""
        if self.fixed_per_slot is None and (self.managed or self.fixed_per_tm is None):
            return None if self.managed else "unbounded"
        room = self.room
        if room is not None and self.demand > room:
            return "over-budget"
        return None

    def describe(self) -> str:
        if self.problem == "unbounded":
            return ("state.backend.rocksdb.memory.managed is false and no fixed-per-slot is set: every RocksDB "
                    "column family gets its own write buffers and block cache, bounded by nothing, outside the "
                    "TaskManager's memory budget"
                    + (f" (the {format_size(self.managed_memory)} of managed memory reserved for it sit unused)"
                       if self.managed_memory else ""))
        if self.problem == "over-budget":
            sized = (f"state.backend.rocksdb.memory.fixed-per-slot {format_size(self.fixed_per_slot)} x {self.slots} "
                     f"slot(s) = {format_size(self.demand)}" if self.fixed_per_slot is not None else
                     f"state.backend.rocksdb.memory.fixed-per-tm {format_size(self.fixed_per_tm)}")
            return (f"{sized} of native memory, which is not taken from managed memory; "
                    f"the TaskManager budget leaves it {format_size(self.room)} (managed "
                    f"{format_size(self.managed_memory or 0)} + task off-heap {format_size(self.task_off_heap or 0)}), "
                    f"{format_size(self.demand - self.room)} short")
        return "RocksDB memory is bounded inside the TaskManager's budget"


def rocksdb_backend_source(incident: Incident) -> str | None:
    """Where the incident says the state backend is RocksDB (config value or a log line), else None."""
    logged = [(ev, m) for ev, m in incident.find(STATE_BACKEND_IN_LOG)]
    if logged:
        ev, m = logged[-1]
        return f"{os.path.basename(ev.file)}:{ev.line}" if "RocksDB" in m.group("backend") else None
    cv = incident.config.lookup("state.backend.type")
    if cv is not None and "rocksdb" in cv.value.lower():
        return f"{cv.key}: {cv.value} ({cv.source})"
    return None


def rocksdb_memory(incident: Incident, mem: TaskManagerMemory | None = None) -> RocksDBMemory | None:
    """RocksDB's memory bounds, or None when the state backend is not (known to be) RocksDB."""
    source = rocksdb_backend_source(incident)
    if source is None:
        return None
    if mem is None:
        mem, _ = effective_taskmanager_memory(incident)
    managed = incident.config.get_bool(_ROCKSDB_MANAGED, True)
    fixed = incident.config.get_bytes(_ROCKSDB_FIXED)
    slots = incident.config.get_int(_SLOTS) or DEFAULT_SLOTS
    return RocksDBMemory(source, managed if managed is not None else True, fixed, slots,
                         incident.config.get_bytes(_ROCKSDB_FIXED_PER_TM),
                         mem.managed if mem else None, mem.task_off_heap if mem else None)


def rocksdb_fix(incident: Incident, rocks: RocksDBMemory) -> dict[str, str | None]:
    """Changes that put RocksDB back under managed memory, with as much memory per slot as the user meant to give
    it (``fixed-per-slot``) when the current managed memory is smaller; the TaskManager total grows for that."""
    changes: dict[str, str | None] = {_ROCKSDB_MANAGED: "true"}
    for key in (_ROCKSDB_FIXED, _ROCKSDB_FIXED_PER_TM):
        if incident.config.lookup(key) is not None:
            changes[key] = None
    wanted = rocks.demand if rocks.problem == "over-budget" else None
    if wanted and rocks.managed_memory is not None and wanted > rocks.managed_memory and model_applies(incident):
        conf = user_memory_config(incident)
        try:
            changes.update(grow_pool(conf, incident.version_tuple, "managed", wanted - rocks.managed_memory,
                                     deployment=deployment_of(incident)))
        except (ValueError, MemoryConfigError):
            pass
    return changes


def size_text(num_bytes: int | None) -> str:
    """``1536m`` / ``7.92g``-style text for explanations (``?`` when unknown)."""
    if num_bytes is None:
        return "?"
    exact = format_size(num_bytes)
    if parse_memory_size(exact) == num_bytes and not exact.endswith(("k", "b")) or num_bytes < 1 << 20:
        return exact
    return f"{num_bytes / (1 << 30):.2f}g" if num_bytes >= 1 << 30 else f"{num_bytes / (1 << 20):.0f}m"


def distinct_containers(kills: list[ContainerKill]) -> int:
    """How many containers the kills are about: the NodeManager, the JobManager and kubectl report one kill
    several times."""
    named = {k.container for k in kills if k.container}
    return len(named) or 1
