"""The TaskManagers of an incident: who registered, where each runs, which were lost, how and with what fallout.

Shared by the cluster runbooks (``taskmanager-lost``, ``tm-heartbeat-timeout``, ``no-resource-available``,
``restart-strategy-exhausted``). Everything is read from the events Spark kept:

* identity: ``Starting TaskManager with ResourceID: <id>`` in a TaskManager's own log, ``Registering TaskManager with
  ResourceID <id> (<rpc address>) at ResourceManager`` on the JobManager, ``… on <id> @ <host> (dataPort=<port>)``
  in task failure lines;
* losses, as the ResourceManager and JobMaster report them: ``TaskManager with id <id> is no longer reachable``
  (1.14+), ``The heartbeat of TaskManager with id <id> timed out``, ``Closing TaskExecutor connection <id> because:
  <reason>``, ``Disconnect TaskExecutor <id> because: <reason>``, ``Worker <id> is terminated. Diagnostics: …``;
* what the TaskManager's own log says around its loss: an orderly shutdown (``RECEIVED SIGNAL``, ``Stopping
  TaskExecutor``), memory trouble, or nothing at all (the log just ends: the process was killed).

Resource ids differ by deployment and version: ``10.0.0.5:6122-3a8c1f`` (standalone 1.12+), 32 hex digits (older
standalone), ``container_e07_…_000002`` (YARN), ``<cluster>-taskmanager-1-3`` (Kubernetes).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flink_runbooks.evidence.episodes import SECONDARY_SYMPTOMS
from flink_runbooks.model import Event, Incident
from flink_runbooks.parse.timestamps import seconds_between
from flink_runbooks.vocabulary.units import format_duration

# ------------------------------------------------------------------------------------------------ log line shapes

_ID = r"[\w.:\-]+(?:\([\w.\-]+:\d+\))?"  # YARN adds the NodeManager: container_e07_…_000002(worker-3:8041)
_ID_METADATA = re.compile(r"^(?P<id>.*?)\((?P<host>[\w.\-]+):\d+\)$")
STARTED = re.compile(rf"Starting TaskManager with ResourceID: (?P<tm>{_ID})")
REGISTERING = re.compile(
    rf"Registering TaskManager with ResourceID (?P<tm>{_ID}) \((?P<addr>[^)]*)\) at ResourceManager")
UNREACHABLE = re.compile(rf"TaskManager with id (?P<tm>{_ID}?) is no longer reachable")
HEARTBEAT_TIMEOUT = re.compile(rf"[Hh]eartbeat of TaskManager with id (?P<tm>{_ID}?)(?:\s*\([^)]*\))? timed out")
CLOSING = re.compile(rf"Closing TaskExecutor connection (?P<tm>{_ID}) because:? ?(?P<reason>.*)")
DISCONNECT = re.compile(rf"Disconnect TaskExecutor (?P<tm>{_ID}) because:? ?(?P<reason>.*)")
WORKER_TERMINATED = re.compile(rf"Worker (?P<tm>{_ID}) is terminated\.? ?(?:Diagnostics: ?)?(?P<reason>.*)")
PEER_CLOSED = re.compile(
    r"(?:Connection unexpectedly closed by remote task manager|Lost connection to task manager) "
    r"'(?P<addr>[^'\[]*?)\s*(?:\[ ?(?P<tm>[^\]\s]+) ?\])?\s*'")
TASK_ON = re.compile(rf" on (?P<tm>{_ID}) @ (?P<host>[\w.\-]+) \(dataPort=(?P<port>\d+)\)")
ORDERLY_SHUTDOWN = re.compile(
    r"RECEIVED SIGNAL \d+: SIG(?:TERM|INT|HUP)|Stopping TaskExecutor |Terminating TaskManagerRunner with exit code|"
    r"Shutting down TaskExecutor|TaskManager is shutting down")
SHUTTING_DOWN_REASON = re.compile(r"The TaskExecutor is shutting down|TaskExecutor exceeded the idle timeout|"
                                  r"is idle|released as idle|Stopping worker")
NOT_A_LOSS_REASON = re.compile(r"Stopping JobMaster|JobManager is shutting down|[Jj]ob .* (?:finished|cancel)|"
                               r"ResourceManager leader changed|JobMaster is shutting down")
MEMORY_KILL = re.compile(
    r"OutOfMemoryError|OOMKilled|beyond (?:the )?'?(?:PHYSICAL|physical)'? memory limit|Killing container|"
    r"Memory cgroup out of memory|low on resource: memory|Container killed .* memory")
NODE_LOSS = re.compile(
    r"Container released on a \*lost\* node|lost node|NodeLost|node .{0,40}NotReady|[Ee]victed|"
    r"preempted|[Pp]reemption|spot instance|instance .{0,30}(?:terminated|reclaimed)")
EXTERNAL_KILL = re.compile(r"[Ee]xit ?[Cc]ode[:=]? ?1(?:37|43)\b|exitCode=1(?:37|43)\b|Killed by external signal|"
                           r"Container killed|SIGKILL|killed")
JVM_CRASH = re.compile(r"A fatal error has been detected by the Java Runtime Environment|hs_err_pid|SIGSEGV")
TM_SIDE_TIMEOUT = re.compile(r"[Hh]eartbeat of (?:ResourceManager|JobManager) with id \S+ timed out")
TM_SIDE_DISCONNECT = re.compile(
    r"Disconnect from JobManager responsible|Close ResourceManager connection|Close JobManager connection|"
    r"Association with remote system .* has failed|Connection refused|Connection timed out|"
    r"Could not resolve ResourceManager address")
GC_PAUSE = re.compile(
    r"GC\(\d+\) Pause [^\n]*?(?P<ms>\d+(?:\.\d+)?)ms\s*$|"
    r"Full GC[^\n]*real=(?P<secs>\d+(?:\.\d+)?) secs|"
    r"application threads were stopped: (?P<stopped>\d+(?:\.\d+)?) seconds|"
    r"Detected pause in JVM or host machine \(eg GC\): pause of approximately (?P<pause>\d+)ms")

# The lines these shapes need from the pre-filter (INFO lines are dropped otherwise); shared by the detectors.
LOSS_SIGNATURES = (
    r"Registering TaskManager with ResourceID ",
    r"TaskManager with id \S+ is no longer reachable",
    r"[Hh]eartbeat of TaskManager with id ",
    r"Closing TaskExecutor connection ",
    r"Disconnect TaskExecutor ",
    r"Worker \S+ is terminated",
    r"Connection unexpectedly closed by remote task manager",
    r"Lost connection to task manager",
    r"RECEIVED SIGNAL \d+: SIG",
    r"Stopping TaskExecutor ",
    r"Terminating TaskManagerRunner with exit code",
    r"[Hh]eartbeat of (?:ResourceManager|JobManager) with id \S+ timed out",
    r"Disconnect from JobManager responsible",
)
GC_SIGNATURES = (
    r"GC\(\d+\) Pause .*\d{4,}(?:\.\d+)?ms",
    r"Full GC .*real=\d+\.\d+ secs",
    r"application threads were stopped: [1-9]\d*\.\d+ seconds",
    r"Detected pause in JVM or host machine",
)

# Failure causes that mean "a TaskManager went away".
LOSS_CAUSE = re.compile(
    r"Connection unexpectedly closed by remote task manager|Lost connection to task manager|"
    r"is no longer reachable|[Hh]eartbeat of TaskManager with id .* timed out|The TaskExecutor is shutting down|"
    r"TaskManager .* (?:was|has been) (?:lost|killed|released)|Worker .* is terminated")
USING_STRATEGY = re.compile(r"Using restart back ?off time strategy (?P<strategy>\w+)(?P<args>\([^)]*\))?")
TERMINAL_STATE = re.compile(
    r"Job (?:.*? \()?(?P<job>[0-9a-f]{32})\)? (?:switched from state \w+ to|reached terminal state|reached globally "
    r"terminal state) (?P<state>CANCELED|FINISHED|FAILED|SUSPENDED)")


# ------------------------------------------------------------------------------------------------ time helpers

def duration_value(ms: int, version: tuple[int, ...] | None) -> str:
    """A duration as a config value: ``120 s`` where the option is Duration-typed (1.20+), else milliseconds,
    which every release reads (``heartbeat.timeout`` and ``slot.request.timeout`` were plain longs before 1.20)."""
    if version and tuple(version[:2]) >= (1, 20):
        return format_duration(ms)
    return str(int(ms))


def round_up(ms: float, step_ms: int) -> int:
    return int(-(-ms // step_ms) * step_ms)


# ------------------------------------------------------------------------------------------------ inventory

@dataclass
class Loss:
    """One report that a TaskManager went away (several lines about the same loss are merged)."""

    tm_id: str
    ts: str | None
    kind: str  # unreachable | heartbeat-timeout | shutting-down | terminated | connection-closed | disconnected
    reason: str
    events: list[Event] = field(default_factory=list)

    @property
    def orderly(self) -> bool:
        return self.kind == "shutting-down"


@dataclass
class TaskManager:
    tm_id: str
    host: str | None = None
    data_port: str | None = None
    log_file: str | None = None  # its own log among the inputs
    started: str | None = None
    registered: list[str] = field(default_factory=list)  # timestamps of registrations at the ResourceManager
    losses: list[Loss] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.tm_id}" + (f" on {self.host}" if self.host and self.host not in self.tm_id else "")


@dataclass
class Inventory:
    taskmanagers: dict[str, TaskManager] = field(default_factory=dict)

    def get(self, raw_id: str) -> TaskManager:
        m = _ID_METADATA.match(raw_id)
        tm_id, host = (m["id"], m["host"]) if m else (raw_id, _host_of_id(raw_id))
        tm = self.taskmanagers.get(tm_id)
        if tm is None:
            tm = self.taskmanagers[tm_id] = TaskManager(tm_id, host=host)
        tm.host = tm.host or host
        return tm

    def find(self, raw_id: str | None) -> TaskManager | None:
        if not raw_id:
            return None
        m = _ID_METADATA.match(raw_id)
        return self.taskmanagers.get(m["id"] if m else raw_id)

    def by_address(self, addr: str | None) -> TaskManager | None:
        """The TaskManager behind ``host/ip:dataPort`` (how peers name a lost TaskManager before 1.15)."""
        if not addr:
            return None
        port = addr.rsplit(":", 1)[-1]
        hosts = {h for h in re.split(r"[/:]", addr) if h and not h.isdigit()}
        for tm in self.taskmanagers.values():
            if tm.data_port == port and (not hosts or tm.host in hosts or any(h in tm.tm_id for h in hosts)):
                return tm
        on_host = [tm for tm in self.taskmanagers.values() if tm.host in hosts and tm.data_port in (None, port)]
        return on_host[0] if len(on_host) == 1 else None

    @property
    def lost(self) -> list[TaskManager]:
        return [tm for tm in self.taskmanagers.values() if any(not loss.orderly for loss in tm.losses)]

    def on_host(self, host: str | None) -> list[TaskManager]:
        return [tm for tm in self.taskmanagers.values() if host and tm.host == host]


def _host_of_id(tm_id: str) -> str | None:
    m = re.match(r"^([\w.\-]+?):\d+-[0-9a-f]{6}$", tm_id)
    return m.group(1) if m else None


def inventory(incident: Incident) -> Inventory:
    """Every TaskManager the incident mentions, with its host, its own log file and its losses in time order."""
    inv = Inventory()
    for f in incident.inputs:
        if f.tm_id:
            tm = inv.get(f.tm_id)
            tm.log_file = tm.log_file or f.path
    for ev in incident.events:
        text = ev.text
        m = STARTED.search(ev.message)
        if m:
            tm = inv.get(m["tm"])
            tm.log_file = tm.log_file or ev.file
            tm.started = tm.started or ev.ts
            continue
        m = REGISTERING.search(ev.message)
        if m:
            tm = inv.get(m["tm"])
            tm.registered.append(ev.ts or "")
            host = re.search(r"@([\w.\-]+):\d+", m["addr"])
            tm.host = tm.host or (host.group(1) if host else None)
            continue
        for m in TASK_ON.finditer(ev.message):
            tm = inv.get(m["tm"])
            tm.host = tm.host or m["host"]
            tm.data_port = tm.data_port or m["port"]
        loss = _loss_of(ev, text, inv)
        if loss:
            tm = inv.get(loss.tm_id)
            loss.tm_id = tm.tm_id
            _merge(tm, loss)
    return inv


def _loss_of(ev: Event, text: str, inv: Inventory) -> Loss | None:
    if ev.role == "taskmanager" and not PEER_CLOSED.search(text):
        return None  # a TaskManager's own view of the JobManager is not a report of its loss
    for rx, kind in ((UNREACHABLE, "unreachable"), (HEARTBEAT_TIMEOUT, "heartbeat-timeout")):
        m = rx.search(ev.message)
        if m:
            return Loss(m["tm"], ev.ts, kind, m.group(0), [ev])
    for rx in (CLOSING, DISCONNECT, WORKER_TERMINATED):
        m = rx.search(ev.message)
        if m:
            reason = m["reason"].strip()
            if NOT_A_LOSS_REASON.search(reason):
                return None
            if SHUTTING_DOWN_REASON.search(reason):
                kind = "shutting-down"
            elif UNREACHABLE.search(reason):
                kind = "unreachable"
            elif HEARTBEAT_TIMEOUT.search(reason):
                kind = "heartbeat-timeout"
            elif rx is WORKER_TERMINATED or EXTERNAL_KILL.search(reason) or MEMORY_KILL.search(reason):
                kind = "terminated"
            else:
                kind = "disconnected"
            return Loss(m["tm"], ev.ts, kind, reason, [ev])
    m = PEER_CLOSED.search(text)
    if m:
        tm = inv.get(m["tm"]) if m["tm"] else inv.by_address(m["addr"])
        # Before 1.15 peers name the lost TaskManager by address only: attach the report when it can be resolved.
        return Loss(tm.tm_id, ev.ts, "connection-closed", m.group(0), [ev]) if tm else None
    return None


_KIND_RANK = {"terminated": 0, "shutting-down": 1, "unreachable": 2, "heartbeat-timeout": 3, "disconnected": 4,
              "connection-closed": 5}
MERGE_WINDOW_S = 180  # lines about one loss arrive within the heartbeat timeout (50 s default) plus slack


def _merge(tm: TaskManager, loss: Loss) -> None:
    """Fold a loss report into the TaskManager's last loss when it is about the same incarnation and time."""
    last = tm.losses[-1] if tm.losses else None
    re_registered = last and any(r and last.ts and r > last.ts for r in tm.registered)
    gap = seconds_between(last.ts, loss.ts) if last else None
    if last and not re_registered and (gap is None or abs(gap) <= MERGE_WINDOW_S):
        last.events += loss.events
        if _KIND_RANK[loss.kind] < _KIND_RANK[last.kind]:
            last.kind, last.reason = loss.kind, loss.reason
        if loss.ts and (not last.ts or loss.ts < last.ts):
            last.ts = loss.ts
        return
    tm.losses.append(loss)


# ------------------------------------------------------------------------------------------------ around a loss

def own_events(incident: Incident, tm: TaskManager) -> list[Event]:
    """The events of the TaskManager's own log (empty when that log is not among the inputs)."""
    if not tm.log_file:
        return []
    return [ev for ev in incident.events if ev.file == tm.log_file]


@dataclass
class LossContext:
    """What the evidence says about one loss."""

    tm: TaskManager
    loss: Loss
    has_own_log: bool
    orderly: Event | None = None  # an orderly shutdown line in its own log before the loss
    last_own: Event | None = None  # its last kept line before the loss
    after_own: list[Event] = field(default_factory=list)  # kept lines after the loss (the process lived on)
    restarted: bool = False  # a new start-up banner after the loss
    memory: list[Event] = field(default_factory=list)  # memory trouble of this TaskManager before/at the loss
    node: list[Event] = field(default_factory=list)  # node/pod loss evidence
    external_kill: list[Event] = field(default_factory=list)
    crash: list[Event] = field(default_factory=list)
    gc_pauses: list[tuple[Event, float]] = field(default_factory=list)  # (event, seconds)
    tm_side_timeouts: list[Event] = field(default_factory=list)
    tm_side_disconnects: list[Event] = field(default_factory=list)

    @property
    def alive_after(self) -> bool:
        return bool(self.after_own) and not self.restarted

    @property
    def longest_gc_s(self) -> float:
        return max((s for _, s in self.gc_pauses), default=0.0)

    def silence_s(self) -> float | None:
        """Seconds its own log was silent across the loss: last kept line before it to the first one after.

        Only kept lines are seen, so this is an upper bound; a TaskManager that resumes after a freeze logs its own
        heartbeat timeouts at once, which bounds it from the other side.
        """
        if not self.last_own or not self.after_own:
            return None
        return seconds_between(self.last_own.ts, self.after_own[0].ts)


def loss_context(incident: Incident, tm: TaskManager, loss: Loss) -> LossContext:
    own = own_events(incident, tm)
    ctx = LossContext(tm, loss, has_own_log=bool(own))
    loss_ts = loss.ts or "~"
    current_ts = ""
    for ev in own:
        current_ts = ev.ts or current_ts  # records without a timestamp (a cut trace) belong where they stand
        before = current_ts <= loss_ts
        if before:
            if ORDERLY_SHUTDOWN.search(ev.message):
                ctx.orderly = ctx.orderly or ev
            ctx.last_own = ev
        elif STARTED.search(ev.message) or re.search(r"Starting TaskManager \(Version", ev.message):
            ctx.restarted = True
        elif not ctx.restarted:
            ctx.after_own.append(ev)
        if not ctx.restarted:
            if MEMORY_KILL.search(ev.text) and (before or (seconds_between(loss.ts, ev.ts) or 0) < 5):
                ctx.memory.append(ev)
            if JVM_CRASH.search(ev.text):
                ctx.crash.append(ev)
            m = GC_PAUSE.search(ev.text)
            if m:
                secs = _gc_seconds(m)
                if secs >= 1:
                    ctx.gc_pauses.append((ev, secs))
            if TM_SIDE_TIMEOUT.search(ev.text):
                ctx.tm_side_timeouts.append(ev)
            elif TM_SIDE_DISCONNECT.search(ev.text) and not before:
                ctx.tm_side_disconnects.append(ev)
    # What the cluster manager said about this TaskManager (reasons of the loss lines, worker diagnostics).
    for ev in loss.events:
        if MEMORY_KILL.search(ev.text):
            ctx.memory.append(ev)
        if NODE_LOSS.search(ev.text):
            ctx.node.append(ev)
        if EXTERNAL_KILL.search(ev.text):
            ctx.external_kill.append(ev)
    for ev in incident.events:
        if ev.file == tm.log_file or ev in loss.events:
            continue
        if tm.tm_id in ev.text and abs(seconds_between(loss.ts, ev.ts) or 0) <= MERGE_WINDOW_S:
            if MEMORY_KILL.search(ev.text) and ev not in ctx.memory:
                ctx.memory.append(ev)
            if NODE_LOSS.search(ev.text) and ev not in ctx.node:
                ctx.node.append(ev)
    return ctx


def gc_pause_seconds(text: str) -> float:
    """The length of the GC pause a log line reports (0 when it reports none)."""
    m = GC_PAUSE.search(text)
    return _gc_seconds(m) if m else 0.0


def _gc_seconds(m: re.Match[str]) -> float:
    if m["ms"]:
        return float(m["ms"]) / 1000
    if m["pause"]:
        return float(m["pause"]) / 1000
    return float(m["secs"] or m["stopped"] or 0)


def same_host_losses(inv: Inventory, tm: TaskManager, loss: Loss, window_s: float = 60) -> list[TaskManager]:
    """Other TaskManagers of the same host lost within ``window_s`` of this loss."""
    out = []
    for other in inv.on_host(tm.host):
        if other is tm:
            continue
        for ol in other.losses:
            gap = seconds_between(loss.ts, ol.ts)
            if not ol.orderly and gap is not None and abs(gap) <= window_s:
                out.append(other)
                break
    return out


def secondary_noise(incident: Incident, start: str | None, end: str | None, exclude: set[int] | None = None) -> dict:
    """Counts of the fallout on peers between ``start`` and ``end``: failures whose cause is a known secondary
    symptom (RemoteTransportException, ``Buffer pool is destroyed``, cancellation) and tasks cancelled."""
    exclude = exclude or set()
    counts: dict[str, int] = {}
    files: set[str] = set()
    for ev in incident.events:
        if id(ev) in exclude or (start and ev.ts and ev.ts < start) or (end and ev.ts and ev.ts > end):
            continue
        causes = [c for c in ev.chain if c.kind != "suppressed"]
        deepest = f"{causes[-1].cls}: {causes[-1].message}" if causes else ""
        m = SECONDARY_SYMPTOMS.search(deepest)
        if m:
            key = causes[-1].simple_name if "Exception" in causes[-1].cls or "Error" in causes[-1].cls else m.group(0)
            if "Buffer pool is destroyed" in deepest:
                key = "Buffer pool is destroyed"
            counts[key] = counts.get(key, 0) + 1
            files.add(ev.file)
        elif re.search(r"switched from \w+ to CANCELING", ev.message):
            counts["tasks cancelled"] = counts.get("tasks cancelled", 0) + 1
    return {"counts": counts, "files": sorted(files), "total": sum(counts.values())}


def describe_noise(noise: dict) -> str:
    if not noise["total"]:
        return ""
    parts = ", ".join(f"{n}× {k}" for k, n in sorted(noise["counts"].items(), key=lambda kv: -kv[1]))
    return f"{noise['total']} follow-on record(s) ({parts}) are fallout of this loss, not separate faults."


def orderly_ends(incident: Incident) -> list[tuple[str, str | None, Event]]:
    """Spans in which the job had ended in an orderly way (CANCELED/FINISHED) until it ran again: ``(from, to, event)``.

    What happens inside such a span (TaskManagers stopped, connections closed) is not a failure of the job.
    """
    spans: list[tuple[str, str | None, Event]] = []
    current: tuple[str, Event] | None = None
    for ev in incident.events:
        m = TERMINAL_STATE.search(ev.message)
        if m and m["state"] in ("CANCELED", "FINISHED"):
            if current is None and ev.ts:
                current = (ev.ts, ev)
        elif current and (m or re.search(r"switched from state \w+ to RUNNING", ev.message)):
            spans.append((current[0], ev.ts, current[1]))
            current = None
    if current:
        spans.append((current[0], None, current[1]))
    return spans


def ended_before(spans: list[tuple[str, str | None, Event]], ts: str | None) -> Event | None:
    """The orderly end whose span contains ``ts``, if any."""
    if not ts:
        return None
    return next((ev for start, stop, ev in spans if start <= ts and (stop is None or ts < stop)), None)


# ------------------------------------------------------------------------------------------------ restart strategy

MAX_INT = 2147483647
_ARGS = re.compile(r"(\w+)=\s*([\w.\-]+)")
_KIND_OF = {"FixedDelayRestartBackoffTimeStrategy": "fixed-delay", "FailureRateRestartBackoffTimeStrategy": "failure-rate",
            "ExponentialDelayRestartBackoffTimeStrategy": "exponential-delay", "NoRestartBackoffTimeStrategy": "none"}
_CONFIG_KIND = {"fixed-delay": "fixed-delay", "fixeddelay": "fixed-delay", "failure-rate": "failure-rate",
                "failurerate": "failure-rate", "exponential-delay": "exponential-delay",
                "exponentialdelay": "exponential-delay", "none": "none", "off": "none", "disable": "none"}


@dataclass
class RestartStrategy:
    kind: str  # fixed-delay | failure-rate | exponential-delay | none | unknown
    args: dict[str, str]
    source: str  # where it was read: "Recovery is suppressed", "JobMaster log", "config", "default"
    set_in_code: bool = False  # the job's own code chose it (the log disagrees with the configuration)

    @property
    def attempts(self) -> int | None:
        value = self.args.get("maxNumberRestartAttempts") or self.args.get("attempts")
        return int(value) if value and value.lstrip("-").isdigit() else None

    @property
    def delay_ms(self) -> int | None:
        value = self.args.get("backoffTimeMS") or self.args.get("initialBackoffMS") or self.args.get("delay_ms")
        return int(float(value)) if value else None

    def describe(self) -> str:
        if self.kind == "fixed-delay" and self.attempts is not None:
            attempts = "unlimited" if self.attempts >= MAX_INT else str(self.attempts)
            return f"fixed-delay ({attempts} attempts in the job's lifetime, {format_duration(self.delay_ms or 0)} apart)"
        if self.kind == "failure-rate":
            a = self.args
            return (f"failure-rate (at most {a.get('maxFailuresPerInterval', '?')} failures per "
                    f"{format_duration(int(a['failuresIntervalMS'])) if a.get('failuresIntervalMS') else '?'})")
        if self.kind == "none":
            return "no restarts (NoRestartBackoffTimeStrategy)"
        if self.kind == "unknown":
            return ("an unknown restart strategy (neither logged nor configured; Flink's default depends on whether "
                    "the job enables checkpointing, possibly in its code)")
        return self.kind


def restart_strategy(incident: Incident) -> RestartStrategy:
    """The restart strategy in force: what the JobMaster logged beats the configuration, which beats the default."""
    from flink_runbooks.vocabulary.lifecycle import RECOVERY_SUPPRESSED

    cfg_kind = _CONFIG_KIND.get((incident.config.get("restart-strategy.type") or "").strip().lower())
    logged = None
    for ev in incident.events:
        m = RECOVERY_SUPPRESSED.search(ev.text) or USING_STRATEGY.search(ev.message)
        if m:
            args = dict(_ARGS.findall(m["args"] or ""))
            logged = RestartStrategy(_KIND_OF.get(m["strategy"], "unknown"), args,
                                     "Recovery is suppressed" if "suppressed" in m.group(0) else "JobMaster log")
            if logged.source == "Recovery is suppressed":
                break
    if logged:
        logged.set_in_code = _chosen_in_code(incident, logged, cfg_kind)
        return logged
    if cfg_kind:
        args = {}
        attempts = incident.config.get_int("restart-strategy.fixed-delay.attempts")
        if cfg_kind == "fixed-delay":
            args["maxNumberRestartAttempts"] = str(attempts if attempts is not None else 1)
            args["backoffTimeMS"] = str(incident.config.get_duration_ms("restart-strategy.fixed-delay.delay", 1000))
        return RestartStrategy(cfg_kind, args, "config")
    return RestartStrategy(default_restart_kind(incident), {}, "default")


def checkpointing_enabled(incident: Incident) -> bool:
    return bool(incident.config.get_duration_ms("execution.checkpointing.interval")) or any(
        "Triggering checkpoint" in ev.message for ev in incident.events)


def default_restart_kind(incident: Incident) -> str:
    """Flink's default: no restarts without checkpointing; with it fixed-delay (unlimited) up to 1.18 and
    exponential-delay since 1.19. Without a sign of checkpointing the default is unknown, not "none": the job's code
    may enable checkpointing, and a pasted excerpt shows no checkpoint lines either way."""
    if not checkpointing_enabled(incident):
        return "unknown"
    v = incident.version_tuple
    return "exponential-delay" if v and tuple(v[:2]) >= (1, 19) else "fixed-delay"


def _chosen_in_code(incident: Incident, logged: RestartStrategy, cfg_kind: str | None) -> bool:
    if logged.kind == "unknown":
        return False
    if cfg_kind:
        if cfg_kind != logged.kind:
            return True
        attempts = incident.config.get_int("restart-strategy.fixed-delay.attempts")
        return logged.kind == "fixed-delay" and attempts is not None and logged.attempts not in (None, attempts)
    # No strategy in the configuration: Flink's default is unlimited fixed-delay / exponential-delay / none.
    if logged.kind == "fixed-delay":
        return logged.attempts is not None and logged.attempts < MAX_INT
    return logged.kind in ("failure-rate",) or (logged.kind == "none" and checkpointing_enabled(incident))


def restart_budget(incident: Incident, fault_times: list[str | None], *, infrastructure: bool) -> list[tuple[str, str, str]]:
    """``(key, value, reason)`` for a restart strategy that rides out faults spaced like the observed ones.

    exponential-delay (documented from 1.13 on) keeps restarting with a growing pause that resets after a healthy
    period, so a long-running job is not killed by its N-th fault in a lifetime as fixed-delay's budget does. The
    pause starts at the current delay (at least 10 s after infrastructure faults, the time a replacement TaskManager
    needs) and is capped at twice the observed trouble span (1 to 30 min). Older releases get fixed-delay with a
    budget of three times the observed faults.
    """
    strategy = restart_strategy(incident)
    times = sorted(t for t in fault_times if t)
    span_ms = int((seconds_between(times[0], times[-1]) or 0) * 1000) if len(times) > 1 else 0
    delay_ms = strategy.delay_ms or incident.config.get_duration_ms("restart-strategy.fixed-delay.delay") or 1000
    initial = max(round_up(delay_ms, 1000), 10_000 if infrastructure else 1000)
    faults = max(len(fault_times), 1)
    observed = (f"{faults} fault(s) over {format_duration(round_up(span_ms, 1000))}" if span_ms
                else f"{faults} fault(s)")
    v = incident.version_tuple
    if v and tuple(v[:2]) < (1, 13):
        attempts = max(10, 3 * faults)
        return [
            ("restart-strategy.type", "fixed-delay", f"Observed {observed}; a fixed budget counts every restart of "
             f"the job's lifetime, so give it room (this release has no exponential-delay)."),
            ("restart-strategy.fixed-delay.attempts", str(attempts), f"Three times the {faults} observed fault(s), "
             f"at least 10."),
            ("restart-strategy.fixed-delay.delay", format_duration(initial),
             "Time for a replacement TaskManager to register before the next attempt." if infrastructure
             else "Pause between attempts."),
        ]
    max_backoff = min(max(round_up(2 * span_ms, 60_000), 60_000, initial), 30 * 60_000)
    return [
        ("restart-strategy.type", "exponential-delay",
         f"Observed {observed} under {strategy.describe()}: keep restarting with a growing pause instead of "
         f"failing the job when a fixed budget runs out."),
        ("restart-strategy.exponential-delay.initial-backoff", format_duration(initial),
         "First pause: the current delay" + (", at least 10 s so a replacement TaskManager can register."
                                             if infrastructure else ".")),
        ("restart-strategy.exponential-delay.max-backoff", format_duration(max_backoff),
         f"Cap the pause at twice the observed trouble span ({format_duration(round_up(span_ms, 1000))}), "
         f"between 1 and 30 min." if span_ms else
         # one fault, or faults without times: no span to scale by (a "0 ms" span would read as a measurement)
         f"Cap the pause at {format_duration(max_backoff)}: the faults seen give no time span to scale it by."),
        ("restart-strategy.exponential-delay.backoff-multiplier", "2.0", "Double the pause after each failed attempt."),
        ("restart-strategy.exponential-delay.reset-backoff-threshold", "1 h",
         "After an hour without failure the pause starts again from the initial backoff."),
    ]


def heartbeat_timeout_proposal(incident: Incident, observed_gap_s: float | None) -> tuple[int, int]:
    """(current, proposed) ``heartbeat.timeout`` in ms: at least twice the current value and 1.5× the observed
    silence, rounded up to 10 s (default 50 s)."""
    current = incident.config.get_duration_ms("heartbeat.timeout") or 50_000
    wanted = max(2 * current, int((observed_gap_s or 0) * 1500))
    return current, round_up(wanted, 10_000)


# ------------------------------------------------------------------------------------------------ recovery settings

PREFER_CHECKPOINT_KEY = "execution.checkpointing.prefer-checkpoint-for-recovery"  # 1.9 – 1.13, removed in 1.14
PREFER_CHECKPOINT_WARNING = (
    "execution.checkpointing.prefer-checkpoint-for-recovery is true (setPreferCheckpointForRecovery(true) in code): "
    "on recovery Flink then takes the latest checkpoint even when a newer savepoint exists, so it reprocesses and "
    "duplicates output; Flink deprecated it for that in 1.12 (FLINK-20441) and removed it in 1.14. Drop it from "
    "the configuration and the job's code.")


def prefers_checkpoint_for_recovery(incident: Incident) -> bool:
    """The job recovers from the latest checkpoint even over a newer savepoint (a setting Flink removed in 1.14)."""
    cv = incident.config.lookup(PREFER_CHECKPOINT_KEY)
    return cv is not None and cv.value.strip().lower() == "true"
