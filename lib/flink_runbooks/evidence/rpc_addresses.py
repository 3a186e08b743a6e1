"""Where the RPC endpoints are: the addresses the JobManager bound, the ones TaskManagers dial, and what became of
each attempt (resolved, refused, unknown host). Shared by the coordination runbooks (registration, RPC timeouts).

Flink logs its RPC addresses as ``akka.tcp://flink@host:port/...`` (≤ 1.17) or ``pekko.tcp://flink@host:port/...``
(≥ 1.18); ``.ssl.tcp`` with SSL on.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flink_runbooks.model import Event, Incident

_URL = r"(?P<scheme>akka|pekko)(?:\.ssl)?\.tcp://flink@(?P<host>[^:/\s]+):(?P<port>\d+)"
# JobManager side: the actor system it started (the metrics one is "flink-metrics@": not the RPC endpoint)
ACTOR_SYSTEM = re.compile(rf"Actor system started at {_URL}\b")
BIND = re.compile(r"Trying to start (?:remote )?actor system,? (?:at|external address) (?P<ext>[^\s,]+?):(?P<port>\d+)"
                  r"(?:, bind address (?P<bind>[^\s,]+?):(?P<bport>\d+))?\b")
# TaskManager side
CONNECTING_RM = re.compile(rf"Connecting to ResourceManager {_URL}/user/rpc/resourcemanager")
RESOLVE_FAILED = re.compile(
    rf"Could not resolve ResourceManager address {_URL}/user/rpc/resourcemanager\S*, retrying in (?P<ms>\d+) ms")
RESOLVED_RM = re.compile(r"Resolved ResourceManager address, beginning registration")
REGISTERED_RM = re.compile(r"Successful registration at resource manager (?P<addr>\S+)")
REGISTRATION_TIMEOUT = re.compile(
    r"Could not register at the ResourceManager within the specified maximum registration duration "
    r"(?P<duration>\S+?(?: ms)?)\. This indicates a problem with this instance")
REFUSED = re.compile(r"Connection refused(?:: (?P<target>[^\s\]]+))?")
UNKNOWN_HOST = re.compile(r"UnknownHostException(?:: (?P<host>[^\s:\]]+))?|Name or service not known|"
                          r"nodename nor servname provided|Temporary failure in name resolution|No such host is known")
CONNECT_TIMEOUT = re.compile(r"connection timed out|ConnectTimeoutException|Connect timed out", re.IGNORECASE)
RM_HEARTBEAT_LOST = re.compile(r"The heartbeat of ResourceManager with id \S+ timed out|"
                               r"ResourceManager leader changed to new address|Close ResourceManager connection")
# The JobManager process ending or failing to start
JM_ENDED = re.compile(
    r"RECEIVED SIGNAL \d+: SIG(?:TERM|INT|HUP|KILL)|Shutting \w*ClusterEntrypoint down|"
    r"Terminating cluster entrypoint process|Could not start cluster entrypoint|"
    r"Fatal error occurred in the cluster entrypoint|ClusterEntrypointException")
JM_STARTING = re.compile(r"Starting \w*(?:ClusterEntrypoint|ClusterEntryPoint)\b|Starting StandaloneSessionClusterEntrypoint")

SIGNATURES = (
    r"Actor system started at (?:akka|pekko)",
    r"Trying to start (?:remote )?actor system",
    r"Connecting to ResourceManager ",
    r"Could not resolve ResourceManager address",
    r"Resolved ResourceManager address",
    r"Successful registration at resource manager",
    r"Could not register at the ResourceManager within",
    r"Association with remote system .* has failed",
    r"Remote connection to .* failed with",
    r"UnknownHostException|Name or service not known|Temporary failure in name resolution",
    r"RECEIVED SIGNAL \d+|Shutting \w*ClusterEntrypoint down|Terminating cluster entrypoint process",
    r"Could not start cluster entrypoint|Fatal error occurred in the cluster entrypoint",
    r"The heartbeat of ResourceManager with id",
)


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    scheme: str = ""

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def is_loopback(host: str) -> bool:
    return host in ("localhost", "0.0.0.0", "::1") or host.startswith("127.")


@dataclass
class JobManagerRpc:
    """The JobManager's RPC endpoint as its own log states it."""

    external: Endpoint | None = None
    bind: Endpoint | None = None
    started: Event | None = None  # the line that states the address
    ended: list[Event] = field(default_factory=list)  # shutdown / failed start lines
    starts: list[Event] = field(default_factory=list)  # entrypoint start lines


def jobmanager_rpc(incident: Incident) -> JobManagerRpc:
    def compute(inc: Incident) -> JobManagerRpc:
        out = JobManagerRpc()
        for ev in inc.events:
            if ev.role == "taskmanager":
                continue
            m = ACTOR_SYSTEM.search(ev.message)
            if m and ev.role == "jobmanager":
                out.external = Endpoint(m["host"], int(m["port"]), m["scheme"])
                out.started = ev
                continue
            b = BIND.search(ev.message)
            if b and ev.role == "jobmanager":
                out.external = out.external or Endpoint(b["ext"], int(b["port"]))
                if b["bind"]:
                    out.bind = Endpoint(b["bind"], int(b["bport"]))
                out.started = out.started or ev
                continue
            if ev.role == "jobmanager" and JM_ENDED.search(ev.text):
                out.ended.append(ev)
            elif ev.role == "jobmanager" and JM_STARTING.search(ev.message):
                out.starts.append(ev)
        return out

    return incident.derived("rpc_addresses.jobmanager", compute)


@dataclass
class Registration:
    """One TaskManager's attempts to reach the ResourceManager, from its own log."""

    file: str
    dialled: Endpoint | None = None
    attempts: list[Event] = field(default_factory=list)  # "Could not resolve ResourceManager address"
    timeout: Event | None = None  # RegistrationTimeoutException
    timeout_duration: str | None = None
    registered: list[Event] = field(default_factory=list)  # successful registrations / resolutions
    refused: list[Event] = field(default_factory=list)
    unknown_host: list[Event] = field(default_factory=list)
    connect_timeouts: list[Event] = field(default_factory=list)
    lost_rm: list[Event] = field(default_factory=list)  # an established connection to the RM was lost

    @property
    def gave_up(self) -> bool:
        return self.timeout is not None

    def registered_before(self, ev: Event) -> bool:
        return any((r.ts or "") <= (ev.ts or "") for r in self.registered)

    def registered_after(self, ev: Event) -> bool:
        return any((r.ts or "") > (ev.ts or "") for r in self.registered)


def registrations(incident: Incident) -> list[Registration]:
    """The TaskManagers that tried to reach a ResourceManager, in the order of their first attempt."""

    def compute(inc: Incident) -> list[Registration]:
        by_file: dict[str, Registration] = {}
        for ev in inc.events:
            text = ev.text
            reg = by_file.get(ev.file)
            m = RESOLVE_FAILED.search(ev.message) or CONNECTING_RM.search(ev.message)
            if m:
                reg = reg or by_file.setdefault(ev.file, Registration(ev.file))
                reg.dialled = Endpoint(m["host"], int(m["port"]), m["scheme"])
                if m.re is RESOLVE_FAILED:
                    reg.attempts.append(ev)
                continue
            t = REGISTRATION_TIMEOUT.search(text)
            if t:
                reg = reg or by_file.setdefault(ev.file, Registration(ev.file))
                if reg.timeout is None:
                    reg.timeout, reg.timeout_duration = ev, t["duration"]
                continue
            if reg is None:
                continue
            if RESOLVED_RM.search(ev.message) or REGISTERED_RM.search(ev.message):
                reg.registered.append(ev)
            elif RM_HEARTBEAT_LOST.search(ev.message):
                reg.lost_rm.append(ev)
            elif UNKNOWN_HOST.search(text):
                reg.unknown_host.append(ev)
            elif REFUSED.search(text):
                reg.refused.append(ev)
            elif CONNECT_TIMEOUT.search(text):
                reg.connect_timeouts.append(ev)
        return sorted(by_file.values(), key=lambda r: min((e.ts or "") for e in r.attempts + [r.timeout] if e)
                      if r.attempts or r.timeout else "")

    return incident.derived("rpc_addresses.registrations", compute)


def logged_value(incident: Incident, key: str, *, role: str, file: str | None = None) -> tuple[str, Event] | None:
    """The value of ``key`` a process of ``role`` (in ``file`` when given) printed at start-up."""
    rx = re.compile(rf"Loading (?:dynamic )?configuration property: {re.escape(key)}, ?(?P<value>.*)$")
    for ev in incident.events:
        if ev.role != role or (file and ev.file != file):
            continue
        m = rx.search(ev.message)
        if m:
            return m["value"].strip(), ev
    return None
