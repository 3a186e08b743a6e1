"""Leadership in highly available clusters: grants and revocations of Flink's leader contenders, and the state of the
HA backend's connection (ZooKeeper through Curator, Kubernetes ConfigMap leases through the fabric8 client).

Wordings are those of Flink's own classes (``ZooKeeperLeaderElectionDriver``, ``ZooKeeperMultipleComponentLeaderElection
Driver`` up to 1.17, ``JobMasterServiceLeadershipRunner``, ``DefaultDispatcherRunner``, ``ResourceManagerServiceImpl``,
``TaskExecutor$JobLeaderListenerImpl``, ``KubernetesLeaderElector``, ``Fabric8FlinkKubeClient``), of the shaded Curator
(``ConnectionStateManager``: "State change: SUSPENDED") and ZooKeeper client (``ClientCnxn``), and of fabric8's
``LeaderElector`` (DEBUG unless its logger is raised).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flink_runbooks.model import Event, Incident
from flink_runbooks.vocabulary.lifecycle import JOB_SUSPENDED

_ID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}"
GRANTED = re.compile(rf"(?P<who>\w+) (?:for job (?P<job>[0-9a-f]{{32}}) )?was granted leadership with leader id (?P<leader>{_ID})|"
                     rf"Resource manager service is granted leadership with session id (?P<rm>{_ID})")
REVOKED = re.compile(rf"(?P<who>\w+) (?:for job (?P<job>[0-9a-f]{{32}}) )?was revoked (?:the )?leadership with leader id (?P<leader>{_ID})|"
                     rf"Resource manager service is revoked leadership with session id (?P<rm>{_ID})")
# Up to 1.12 the leader contenders log their job's name and id, or their RPC address (checked in 1.9.3 and 1.12.5):
# "JobManager runner for job <name> (<id>) was granted leadership with session id <uuid> at <address>.",
# "JobManager for job <name> (<id>) was revoked leadership at <address>." (1.9; "... (<id>) at <address> was revoked
# leadership." in 1.12), "ResourceManager|Dispatcher <address> was granted leadership with fencing token <token>" and
# "... was revoked leadership." (the Dispatcher's own up to 1.9, a runner's since).
RUNNER_GRANTED = re.compile(rf"JobManager runner for job .*? \((?P<job>[0-9a-f]{{32}})\) was granted leadership with "
                            rf"session id (?P<leader>{_ID})")
RUNNER_REVOKED = re.compile(r"JobManager for job .*? \((?P<job>[0-9a-f]{32})\) (?:at \S+ )?was revoked leadership")
FENCED_GRANTED = re.compile(r"(?P<who>ResourceManager|Dispatcher) \S+ was granted leadership with fencing token "
                            r"(?P<leader>[0-9a-f-]+)")
FENCED_REVOKED = re.compile(r"(?P<who>ResourceManager|Dispatcher) \S+ was revoked leadership\.")
TM_LOST_LEADER = re.compile(rf"JobManager for job (?P<job>[0-9a-f]{{32}}) with leader id (?P<leader>[0-9a-f]{{32}}|{_ID}) lost leadership|"
                            r"Job leader for job id (?P<job2>[0-9a-f]{32}) lost leadership")
CLIENT_LOST = re.compile(r"Job (?P<job>[0-9a-f]{32}) was not finished by JobManager|Job completed with illegal status: SUSPENDED|"
                         r"Cannot obtain JobMasterGateway because the JobMaster lost leadership")
LEADERSHIP_LOST = re.compile(re.sub(r"\?P<\w+>", "", "|".join(p.pattern for p in (
    REVOKED, RUNNER_REVOKED, FENCED_REVOKED, TM_LOST_LEADER, CLIENT_LOST))))
FENCING = re.compile(r"Fencing token mismatch|FencingTokenException|"
                     r"does not match the expected job manager leader id")
# ZooKeeper (Curator and Flink's drivers)
ZK_SUSPENDED = re.compile(r"Connection to ZooKeeper suspended|State change: SUSPENDED")
ZK_RECONNECTED = re.compile(r"Connection to ZooKeeper was reconnected|State change: RECONNECTED")
ZK_LOST = re.compile(r"Connection to ZooKeeper lost|State change: LOST|session 0x\w+ has expired|Session expired event received|"
                     r"Session timeout has elapsed while SUSPENDED")
ZK_SESSION_TIMEOUT = re.compile(r"Client session timed out, have not heard from server in (?P<ms>\d+) ?ms")
ZK_NEGOTIATED = re.compile(r"negotiated timeout = (?P<ms>\d+)")
# Kubernetes HA (Flink's client and fabric8's leader elector)
K8S_FAILURE = re.compile(r"(?:Could not|Failed to) update ConfigMap|KubernetesClientException|Exception occurred while "
                         r"renewing lock|Renew deadline reached after|Exception occurred while acquiring lock|"
                         r"Leadership was likely already lost|Cannot retry checkAndUpdateConfigMap")
K8S_STATUS = re.compile(r"Received status: Status\((?P<status>.*?)\)\.?$", re.MULTILINE)


def k8s_statuses(text: str) -> list[tuple[str, str]]:
    """(HTTP code, reason) of each Kubernetes API status a fabric8 exception carries: ('429', 'TooManyRequests')."""
    out = []
    for m in K8S_STATUS.finditer(text):
        code = re.search(r"\bcode=(\d{3})", m["status"])
        reason = re.search(r"\breason=(\w+)", m["status"])
        out.append((code.group(1) if code else "", reason.group(1) if reason else ""))
    return out
K8S_NEW_LEADER = re.compile(r"New leader elected (?P<leader>\S+) for (?P<lock>\S+?)\.?$")
RENEW_DEADLINE = re.compile(r"Renew deadline reached after (?P<s>\d+) seconds")

SIGNATURES = (
    r"was (?:granted|revoked) (?:the )?leadership with leader id",
    r"was granted leadership with (?:session id|fencing token)|was revoked leadership(?:\.| at )",
    r"Resource manager service is (?:granted|revoked) leadership",
    r"lost leadership",
    r"was not finished by JobManager|Job completed with illegal status",
    r"switched from state \w+ to SUSPENDED",
    r"Fencing token mismatch|FencingTokenException|does not match the expected job manager leader id",
    r"Connection to ZooKeeper (?:suspended|lost|was reconnected)",
    r"State change: (?:SUSPENDED|RECONNECTED|LOST|CONNECTED)",
    r"Client session timed out, have not heard from server",
    r"session 0x\w+ has expired|Session expired event received|Session timeout has elapsed while SUSPENDED",
    r"Session establishment complete on server",
    r"(?:Could not|Failed to) update ConfigMap|KubernetesClientException",
    r"Exception occurred while (?:renewing|acquiring) lock|Renew deadline reached after|Leadership was likely already lost",
    r"New leader elected \S+ for ",
    r"Cannot retry checkAndUpdateConfigMap",
)


@dataclass
class Leadership:
    grants: list[Event] = field(default_factory=list)
    losses: list[Event] = field(default_factory=list)  # revocations, TaskManagers' and clients' views of a lost leader
    suspended: list[Event] = field(default_factory=list)
    reconnected: list[Event] = field(default_factory=list)
    lost: list[Event] = field(default_factory=list)
    session_timeouts: list[Event] = field(default_factory=list)
    k8s_failures: list[Event] = field(default_factory=list)
    k8s_leaders: list[Event] = field(default_factory=list)
    fencing: list[Event] = field(default_factory=list)
    suspended_jobs: list[Event] = field(default_factory=list)

    @property
    def first_loss(self) -> Event | None:
        return self.losses[0] if self.losses else None


def leadership(incident: Incident) -> Leadership:
    def compute(inc: Incident) -> Leadership:
        out = Leadership()
        for ev in inc.events:
            text = ev.text
            if grant_of(ev) is not None:
                out.grants.append(ev)
            if LEADERSHIP_LOST.search(text):
                out.losses.append(ev)
            if JOB_SUSPENDED.search(ev.message):
                out.suspended_jobs.append(ev)
            if ZK_SUSPENDED.search(ev.message):
                out.suspended.append(ev)
            elif ZK_RECONNECTED.search(ev.message):
                out.reconnected.append(ev)
            elif ZK_LOST.search(text):
                out.lost.append(ev)
            if ZK_SESSION_TIMEOUT.search(text):
                out.session_timeouts.append(ev)
            if K8S_FAILURE.search(text):
                out.k8s_failures.append(ev)
            if K8S_NEW_LEADER.search(ev.message):
                out.k8s_leaders.append(ev)
            if FENCING.search(text):
                out.fencing.append(ev)
        return out

    return incident.derived("leadership", compute)


def grant_of(ev: Event) -> tuple[str, str, str] | None:
    """(who, job id or '', leader id) of a leadership grant, in any release's wording."""
    m = GRANTED.search(ev.message)
    if m:
        return (m["who"] or "ResourceManager", m["job"] or "", m["leader"] or m["rm"])
    m = RUNNER_GRANTED.search(ev.message)
    if m:
        return ("JobManager", m["job"], m["leader"])
    m = FENCED_GRANTED.search(ev.message)
    return (m["who"], "", m["leader"]) if m else None


def is_revocation(ev: Event) -> bool:
    """The process's own leader contender was revoked (not another process's view of a lost leader)."""
    return any(p.search(ev.message) for p in (REVOKED, RUNNER_REVOKED, FENCED_REVOKED))


def leader_of(ev: Event) -> str | None:
    """The leader id / session id / fencing token a grant or revocation names."""
    grant = grant_of(ev)
    if grant is not None:
        return grant[2]
    m = REVOKED.search(ev.message)
    return (m["leader"] or m["rm"]) if m else None


def overlapping_leaders(incident: Incident) -> list[tuple[Event, Event]]:
    """Pairs of grants of the same component in two different processes (files) while the first had not been
    revoked: two JobManagers acting as leader at once."""
    lead = leadership(incident)
    out = []
    for i, a in enumerate(lead.grants):
        who_a, job_a, leader_a = grant_of(a)
        for b in lead.grants[i + 1:]:
            who_b, job_b, leader_b = grant_of(b)
            if b.file == a.file or who_a != who_b or job_a != job_b or leader_a == leader_b:
                continue
            revoked_before = any(r.file == a.file and (a.ts or "") <= (r.ts or "") <= (b.ts or "") for r in lead.losses
                                 if is_revocation(r))
            if not revoked_before:
                out.append((a, b))
    return out
