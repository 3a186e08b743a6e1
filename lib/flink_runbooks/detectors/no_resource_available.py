"""``NoResourceAvailableException``: the job asked for more slots than the cluster could give in time."""
from __future__ import annotations

import math
import re

from flink_runbooks.evidence import cluster
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.units import format_duration
from flink_runbooks.detectors.base import Detector
from flink_runbooks.parse.timestamps import seconds_between
from flink_runbooks.vocabulary.lifecycle import JOB_STATE
from flink_runbooks.vocabulary.wordings import Wording

_NO_RESOURCE = re.compile(
    r"NoResourceAvailableException|Could not acquire the minimum required resources|"
    r"Slot request bulk is not fulfillable|Could not allocate the required slot within slot request timeout|"
    r"Could not allocate all requires slots within timeout|Not enough resources available for scheduling")
_STATUS = re.compile(r"(?i)registered TMs: (?P<tms>\d+), registered slots: (?P<slots>\d+),? free slots: (?P<free>\d+)")
_REQUIREMENTS = re.compile(r"Received resource requirements from job (?P<job>\w+): \[(?P<reqs>.*)\]")
_REQUIRED_SLOTS = re.compile(r"numberOfRequiredSlots=(?P<n>\d+)")
_PROFILE = re.compile(r"resourceProfile=ResourceProfile\{(?P<profile>[^}]*)\}")
_LEGACY_COUNTS = re.compile(r"Slots required: (?P<required>\d+), slots allocated: (?P<allocated>\d+)")
_NOT_FULFILLED = re.compile(r"Could not fulfill resource requirements of job (?P<job>\w+)\. Free slots: (?P<free>\d+)")
_PARALLELISM = re.compile(r"\((?P<i>\d+)/(?P<n>\d+)\)")
_WORKER_REQUEST = re.compile(r"Requesting new worker with resource spec|Requesting new TaskExecutor container|"
                             r"Creating new TaskManager pod")
_MATCHING = re.compile(r"Matching resource requirements against available resources")
# Kubernetes refusing the TaskManager pods the ResourceManager (or a Deployment) asked for: the scheduler found no node
# with room, or the namespace's ResourceQuota forbids them. Events and pod states arrive as kubernetes.* records
# (parse.kubernetes); the JobManager's own client logs the quota refusal too.
_K8S_UNSCHEDULABLE = re.compile(r"FailedScheduling|cannot be scheduled")
_K8S_QUOTA = re.compile(r"exceeded quota:? ?(?P<quota>[\w.-]+)?")
_K8S_SHORTAGE = re.compile(r"\d+ (?P<what>Insufficient [\w/-]+(?:\.[\w/-]+)*|node\(s\) didn't match [^,.]+|Too many pods)")
_DEFAULT_TIMEOUT_MS = 300_000  # slot.request.timeout and the adaptive scheduler's resource-wait-timeout


class NoResourceAvailable(Detector):
    slug = "no-resource-available"
    title = "Not enough task slots for the job (NoResourceAvailableException)"
    category = "cluster"
    meaning = ("The scheduler could not get the slots the job needs before slot.request.timeout (or the adaptive "
               "scheduler's resource-wait-timeout): too few TaskManagers/slots for the parallelism, or none at all.")
    exception_classes = ("org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException",)
    versions = "1.5 – 2.x (wording per scheduler generation: ≤1.9 legacy, 1.10–1.12 bulk, 1.13+ declarative/adaptive)"
    layer = 1
    collect_next = "the slots offered and requested (the JobManager and ResourceManager log)"
    config_keys = (
        "parallelism.default",
        "taskmanager.numberOfTaskSlots",
        "slot.request.timeout",
        "jobmanager.scheduler",
        "jobmanager.adaptive-scheduler.resource-wait-timeout",
        "taskmanager.memory.process.size",
    )
    signatures = (
        r"NoResourceAvailableException",
        r"Could not acquire the minimum required resources",
        r"Could not fulfill resource requirements of job",
        r"Slot request bulk is not fulfillable",
        r"Could not allocate the required slot within slot request timeout",
        r"Could not allocate all requires slots within timeout",
        r"Not enough resources available for scheduling",
        r"Received resource requirements from job",
        r"Matching resource requirements against available resources",
        r"^\s*(?:Missing|Current) resources:",
        r"^\s+\(none\)\s*$",
        r"^\s+TaskManager \S+\s*$",
        r"^\s+ResourceRequirement\{.*numberOfRequiredSlots=\d+",
        r"Requesting new worker with resource spec|Requesting new TaskExecutor container|Creating new TaskManager pod",
        r"Registering TaskManager with ResourceID ",
        r"Failed to go from \w+ to \w+ because",
        r"reached (?:globally )?terminal state FAILED",
        r"FailedScheduling|cannot be scheduled|exceeded quota",
    )
    root_causes = (
        RootCause("parallelism-exceeds-slots", "The job needs more slots than all registered TaskManagers offer.",
                  "Required slots (numberOfRequiredSlots / the highest parallelism) above 'registered slots'.",
                  patches=("flink:parallelism.default", "flink:taskmanager.numberOfTaskSlots", "ops:add TaskManagers")),
        RootCause("slots-held-by-other-jobs", "The cluster has enough slots in total, but other jobs hold them.",
                  "'registered slots' ≥ required while 'free slots' < required (a session cluster).",
                  patches=("ops:free or add slots",)),
        RootCause("no-taskmanagers", "No TaskManager was registered at all, so no slot could be offered.",
                  "'registered TMs: 0' / 'Current resources: (none)' / no 'Registering TaskManager' line.",
                  patches=("flink:jobmanager.adaptive-scheduler.resource-wait-timeout", "flink:slot.request.timeout",
                           "ops:bring TaskManagers up")),
        RootCause("workers-not-provisioned", "The ResourceManager asked YARN/Kubernetes for TaskManagers that never "
                  "came up (quota, queue full, pods Pending, image or scheduling problems).",
                  "'Requesting new worker …' / 'Creating new TaskManager pod …' without a matching registration; "
                  "Kubernetes events or pod states showing the TaskManager pods unschedulable (FailedScheduling: "
                  "Insufficient memory/cpu) or forbidden by a ResourceQuota ('exceeded quota', FailedCreate).",
                  patches=("flink:slot.request.timeout", "ops:bring TaskManagers up")),
        RootCause("resource-profile-unfulfillable", "Fine-grained resource requirements ask for more than any "
                  "TaskManager can offer in one slot.",
                  "A requirement with an explicit ResourceProfile{cpuCores=…, taskHeapMemory=…} while slots exist.",
                  patches=("ops:match requirements to TaskManagers",)),
        RootCause("capacity-not-in-logs", "Slots were missing, but the logs do not show how many were required or "
                  "registered.", "Only the exception is present (an excerpt or a client log).",
                  patches=("ops:compare required and available slots",)),
    )

    wordings = (
        Wording("no-resource-available", r"NoResourceAvailableException: (?:Could not acquire the minimum required resources|Could not allocate the required slot within slot request timeout|Could not allocate all requires slots within timeout|Not enough free slots available to run the job)",
                "1.3 – 2.x", "NoResourceAvailableException (legacy scheduler ≤ 1.9, slot pool 1.10 – 1.12, declarative 1.13+)",
                "org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: Could not acquire the minimum required resources."),
    )

    templates = {
        # the numbers of the summary, joined into one sentence
        "needs": "the job needs {required} slot(s)",
        "cluster had": "the cluster had {taskmanagers} TaskManager(s){with_slots}",
        "with slots": " with {slots} slot(s)",
        "free": "{free} of them free",
        "got": "the job got {got}",
        "waited": " The scheduler waited {waited} ({key}).",
        # evidence notes
        "note gave up": "the scheduler gave up waiting for slots",
        "note status": "slot pool status when the request failed",
        "note requirements": "what the job asked for",
        "note matching": "the ResourceManager's view: missing and current resources",
        "note worker": "the ResourceManager asked for a new TaskManager",
        "note refused": "Kubernetes did not start a TaskManager pod",
        "kubernetes refused": " Kubernetes did not start the TaskManager pod(s): {reason} ({count} record(s), the first at "
                              "{where}).",
        "unschedulable": "no node had room ({shortage})",
        "unschedulable unnamed": "no node could take them (FailedScheduling)",
        "quota": "the namespace's ResourceQuota {quota} forbids more",
        "no room on nodes": "The TaskManager pods fit on no node ({shortage}): add nodes (or let the cluster "
                            "autoscaler add them), or ask for less per TaskManager (spec.taskManager.resource of the "
                            "FlinkDeployment, or taskmanager.memory.process.size / kubernetes.taskmanager.cpu) and "
                            "run more slots per TaskManager.",
        "quota exhausted": "The namespace's ResourceQuota {quota} leaves no room for another TaskManager pod: raise "
                           "it, or make the job fit (fewer or smaller TaskManagers: lower the parallelism or "
                           "spec.taskManager.resource).",
        # patches
        "more slots": "{taskmanagers} TaskManager(s) × {wanted} slot(s) ≥ the {required} slot(s) the job needs. More "
                      "slots per TaskManager share its memory and CPU: check the TaskManager's size.",
        "lower parallelism": "Or run the job with the {available} slot(s) there are (a -p on the command line or "
                             "setParallelism in the code overrides this key).",
        "add TaskManagers": "Or keep {per_tm} slot(s) per TaskManager and run {missing} more TaskManager(s) ({total} "
                            "in total).",
        "add snippet": "kubectl scale deployment <cluster>-taskmanager --replicas={total}\n"
                       "# standalone: add {missing} host(s) to conf/workers and run bin/taskmanager.sh start",
        "free or add slots": "Other jobs hold the cluster's slots ({free} free of {slots}, {required} needed): stop "
                             "or move a job, or add {more} TaskManager(s).",
        "never registered": "The ResourceManager requested TaskManagers that never registered: check the "
                            "pods/containers (Pending, quota, image pull, YARN queue) and the TaskManagers' own logs.",
        "none registered": "No TaskManager registered: start them, or read their logs for why they did not start or "
                           "could not reach the JobManager (see tm-registration-timeout / "
                           "tm-memory-misconfiguration).",
        "wait longer": "Give starting TaskManagers time to register (waited {waited}); this only helps when "
                       "TaskManagers are on their way.",
        "match requirements": "The job asks for {profile} per slot: lower the slot sharing group's resources "
                              "(SlotSharingGroup.newBuilder(...).setCpuCores/...TaskHeapMemory) or start bigger "
                              "TaskManagers.",
        "compare slots": "The highest operator parallelism (per slot sharing group) must not exceed the free slots.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = [ev for ev in incident.events if _NO_RESOURCE.search(ev.text)]
        refused = kubernetes_refusals(incident)
        waiting = any(_WORKER_REQUEST.search(ev.message) or _REQUIREMENTS.search(ev.message) for ev in incident.events)
        taskmanager_refused = [ev for ev in refused if "taskmanager" in ev.text.lower()]
        if not failures and not (refused and waiting) and not taskmanager_refused:
            return []
        first = failures[0] if failures else refused[0]
        numbers = _capacity(incident, first)
        if refused:
            numbers["kubernetes_refused"] = _refusal(refused)
        cause = "workers-not-provisioned" if refused else _cause(numbers)
        refusal_evidence = [ev for ev in refused[:2] if ev is not first]
        evidence = [first] + refusal_evidence + [ev for ev in numbers.pop("_evidence") if ev is not first]
        notes = {0: self.say("note gave up") if failures else self.say("note refused")}
        for i, ev in enumerate(evidence[1:], 1):
            notes[i] = self._note(ev)
        summary = self._summary(cause, numbers)
        return [self.finding(cause, summary, evidence, notes=notes,
                             confidence=0.5 if cause == "capacity-not-in-logs" else 0.85,
                             patches=self._patches(incident, cause, numbers), details=numbers)]

    def _summary(self, cause: str, n: dict) -> str:
        refused = n.get("kubernetes_refused")
        if refused:
            return self._numbers(cause, n) + self.say(
                "kubernetes refused", reason=self._refusal_reason(refused), count=refused["records"],
                where=refused["first"])
        return self._numbers(cause, n)

    def _refusal_reason(self, refused: dict) -> str:
        reasons = []
        if refused.get("shortage"):
            reasons.append(self.say("unschedulable", shortage=refused["shortage"]))
        elif refused.get("unschedulable"):
            reasons.append(self.say("unschedulable unnamed"))
        if refused.get("quota"):
            reasons.append(self.say("quota", quota=refused["quota"]))
        return "; ".join(reasons)

    def _numbers(self, cause: str, n: dict) -> str:
        have = []
        if n.get("required_slots") is not None:
            have.append(self.say("needs", required=n["required_slots"]))
        if n.get("cluster_taskmanagers") is not None:
            with_slots = self.say("with slots", slots=n["cluster_slots"]) if n.get("cluster_slots") is not None else ""
            have.append(self.say("cluster had", taskmanagers=n["cluster_taskmanagers"], with_slots=with_slots))
        if n.get("cluster_free_slots") is not None:
            have.append(self.say("free", free=n["cluster_free_slots"]))
        if n.get("job_got_slots") is not None:
            have.append(self.say("got", got=n["job_got_slots"]))
        numbers = (", ".join(have)[0].upper() + ", ".join(have)[1:] + ". ") if have else ""
        timeout = self.say("waited", waited=n["waited"], key=n["timeout_key"]) if n.get("waited") else ""
        return f"{self.cause(cause).summary} {numbers}".strip() + timeout

    def _patches(self, incident: Incident, cause: str, n: dict):
        patches = []
        required, tms = n.get("required_slots"), n.get("cluster_taskmanagers") or n.get("job_pool_taskmanagers")
        per_tm = n.get("slots_per_taskmanager") or 1
        if cause == "parallelism-exceeds-slots" and required:
            if tms:
                wanted = math.ceil(required / tms)
                patches.append(self.flink_patch(
                    incident, "taskmanager.numberOfTaskSlots", str(wanted),
                    self.say("more slots", taskmanagers=tms, wanted=wanted, required=required)))
                available = n.get("cluster_slots") or tms * per_tm
                patches.append(self.flink_patch(incident, "parallelism.default", str(available),
                                                self.say("lower parallelism", available=available)))
            total = math.ceil(required / per_tm)
            missing_tms = total - (tms or 0)
            patches.append(self.ops_patch(
                "add TaskManagers", self.say("add TaskManagers", per_tm=per_tm, missing=missing_tms, total=total),
                snippet=self.say("add snippet", total=total, missing=missing_tms)))
        if cause == "slots-held-by-other-jobs" and required:
            free = n.get("cluster_free_slots") if n.get("cluster_free_slots") is not None else (n.get("job_got_slots") or 0)
            patches.append(self.ops_patch(
                "free or add slots",
                self.say("free or add slots", free=free, slots=n.get("cluster_slots"), required=required,
                         more=math.ceil((required - free) / per_tm)),
                snippet="flink list -r   # running jobs and who holds the slots"))
        refused = n.get("kubernetes_refused")
        if cause == "workers-not-provisioned" and refused:
            # waiting longer brings no pod a node has no room for, or a quota forbids
            if refused.get("quota"):
                patches.append(self.ops_patch(
                    "bring TaskManagers up", self.say("quota exhausted", quota=refused["quota"]),
                    snippet=f"kubectl describe resourcequota {refused['quota']} -n <namespace>   # used / hard"))
            if refused.get("unschedulable") or not refused.get("quota"):
                patches.append(self.ops_patch(
                    "bring TaskManagers up",
                    self.say("no room on nodes", shortage=refused.get("shortage") or "FailedScheduling"),
                    snippet="kubectl describe nodes | grep -A8 'Allocated resources'\n"
                            "kubectl get events --field-selector reason=FailedScheduling"))
            return patches
        if cause in ("no-taskmanagers", "workers-not-provisioned"):
            what = self.say("never registered" if cause == "workers-not-provisioned" else "none registered")
            patches.append(self.ops_patch(
                "bring TaskManagers up", what,
                snippet="kubectl get pods -l component=taskmanager; kubectl describe pod <pending taskmanager pod>\n"
                        "curl -s http://<jobmanager>:8081/overview   # taskmanagers, slots-total, slots-available"))
            key = n["timeout_key"]
            current = n.get("timeout_ms") or _DEFAULT_TIMEOUT_MS
            if current < _DEFAULT_TIMEOUT_MS or cause == "workers-not-provisioned":
                proposed = max(_DEFAULT_TIMEOUT_MS, 2 * current)
                value = (format_duration(proposed) if key.startswith("jobmanager.adaptive")
                         else cluster.duration_value(proposed, incident.version_tuple))
                patches.append(self.flink_patch(incident, key, value,
                                                self.say("wait longer", waited=format_duration(current))))
        if cause == "resource-profile-unfulfillable":
            patches.append(self.ops_patch("match requirements to TaskManagers",
                                          self.say("match requirements", profile=n.get("requested_profile"))))
        if cause == "capacity-not-in-logs":
            patches.append(self.ops_patch(
                "compare required and available slots", self.say("compare slots"),
                snippet="curl -s http://<jobmanager>:8081/overview   # slots-total, slots-available\n"
                        "curl -s http://<jobmanager>:8081/jobs/<job id>/plan | grep -o '\"parallelism\":[0-9]*' | sort -u"))
        return patches

    def _note(self, ev: Event) -> str:
        if _STATUS.search(ev.text):
            return self.say("note status")
        if _REQUIREMENTS.search(ev.message):
            return self.say("note requirements")
        if _MATCHING.search(ev.message):
            return self.say("note matching")
        if _WORKER_REQUEST.search(ev.message):
            return self.say("note worker")
        if _is_refusal(ev):
            return self.say("note refused")
        return ""


def _capacity(incident: Incident, first: Event) -> dict:
    """Required slots, what the job's slot pool got, and what the cluster has, from the best line each number has.

    The slot pool status of DeclarativeSlotPoolBridge (``Registered TMs: a, registered slots: b free slots: c``)
    counts what *this job* was given; the cluster's TaskManagers come from the ResourceManager's registrations, its
    'Current resources' list (1.18+) or 'Free slots' of the slot manager.
    """
    cfg = incident.config
    adaptive = (cfg.get("jobmanager.scheduler") or "").lower() == "adaptive" or "Not enough resources available" in first.text
    key = "jobmanager.adaptive-scheduler.resource-wait-timeout" if adaptive else "slot.request.timeout"
    out: dict = {"scheduler": "adaptive" if adaptive else "default", "timeout_key": key,
                 "timeout_ms": cfg.get_duration_ms(key), "slots_per_taskmanager": cfg.get_int("taskmanager.numberOfTaskSlots", 1)}
    evidence: list[Event] = []
    before = [ev for ev in incident.events if not (first.ts and ev.ts and ev.ts > first.ts)]
    status = next((ev for ev in reversed(before) if _STATUS.search(ev.text)), None)
    if status:
        m = _STATUS.search(status.text)
        out.update(job_pool_taskmanagers=int(m["tms"]), job_got_slots=int(m["slots"]))
        evidence.append(status)
    legacy = next((ev for ev in before if _LEGACY_COUNTS.search(ev.text)), None)
    if legacy:
        m = _LEGACY_COUNTS.search(legacy.text)
        # The legacy scheduler counts what it could allocate when it gave up: every slot the cluster had free.
        out.update(required_slots=int(m["required"]), job_got_slots=int(m["allocated"]), legacy_counts=True)
    job = _failing_job(incident, first, before)
    requested = [ev for ev in before if _REQUIREMENTS.search(ev.message)
                 and job in (None, _REQUIREMENTS.search(ev.message)["job"])]
    if requested and "required_slots" not in out:
        best = max(requested, key=lambda ev: _slots(_REQUIREMENTS.search(ev.message)["reqs"]))
        reqs = _REQUIREMENTS.search(best.message)["reqs"]
        out["required_slots"] = _slots(reqs)
        profiles = [p for p in _PROFILE.findall(reqs) if p != "UNKNOWN"]
        if profiles:
            out["requested_profile"] = f"ResourceProfile{{{profiles[0]}}}"
        evidence.append(best)
    not_fulfilled = next((ev for ev in reversed(before) if _NOT_FULFILLED.search(ev.message)), None)
    if not_fulfilled:
        out["cluster_free_slots"] = int(_NOT_FULFILLED.search(not_fulfilled.message)["free"])
        evidence.append(not_fulfilled)
    matching = next((ev for ev in reversed(before) if _MATCHING.search(ev.message)), None)
    if matching:
        body = [b.strip() for b in matching.body]
        if "Current resources:" in body:
            listed = body[body.index("Current resources:") + 1:]
            out["cluster_taskmanagers"] = 0 if "(none)" in listed else len([b for b in listed if b.startswith("TaskManager ")])
        if "required_slots" not in out:
            counts = [int(m["n"]) for b in body for m in [_REQUIRED_SLOTS.search(b)] if m]
            if counts:
                out["required_slots"] = sum(counts)
        evidence.append(matching)
    if "required_slots" not in out:
        parallelism = [int(m["n"]) for ev in incident.events for m in _PARALLELISM.finditer(ev.message)]
        if parallelism:
            out["required_slots"] = max(parallelism)
    inv = cluster.inventory(incident)
    # A registration without a time stamp (logs stripped of them) cannot be ordered: it counts, as the failure's
    # own JobManager log shows it.
    registered = [tm for tm in inv.taskmanagers.values()
                  if any(not r or not first.ts or r <= first.ts for r in tm.registered)]
    lost = [tm for tm in registered if any(not loss.orderly and (loss.ts or "") <= (first.ts or "~") for loss in tm.losses)]
    if "cluster_taskmanagers" not in out and (registered or _jobmanager_log_from_start(incident)):
        out["cluster_taskmanagers"] = len(registered) - len(lost)
    if lost:
        out["lost_before"] = [tm.tm_id for tm in lost]
    if out.get("cluster_taskmanagers") is not None:
        out["cluster_slots"] = out["cluster_taskmanagers"] * out["slots_per_taskmanager"]
    workers = [ev for ev in before if _WORKER_REQUEST.search(ev.message)]
    if workers:
        out["workers_requested"] = len(workers)
        evidence.append(workers[0])
    waited = seconds_between(requested[0].ts if requested else None, first.ts)
    if waited is not None:
        out["waited"] = format_duration(round(waited) * 1000)
    out["_evidence"] = evidence
    return out


def _is_refusal(ev: Event) -> bool:
    if _K8S_QUOTA.search(ev.text):
        return True
    return (ev.logger or "").startswith("kubernetes.") and bool(_K8S_UNSCHEDULABLE.search(ev.message))


def kubernetes_refusals(incident: Incident) -> list[Event]:
    """Records of Kubernetes refusing pods (unschedulable, over quota), the JobManager's own pods left out: a
    JobManager that never started does not wait for slots."""
    return [ev for ev in incident.events if _is_refusal(ev) and "(jobmanager" not in ev.message]


def _refusal(refused: list[Event]) -> dict:
    shortages = sorted({m["what"] for ev in refused for m in _K8S_SHORTAGE.finditer(ev.text)})
    quotas = [m["quota"] for ev in refused for m in [_K8S_QUOTA.search(ev.text)] if m and m["quota"]]
    return {"records": len(refused), "first": refused[0].location(),
            "unschedulable": any(_K8S_UNSCHEDULABLE.search(ev.text) for ev in refused),
            "shortage": ", ".join(shortages), "quota": quotas[0] if quotas else None}


def _failing_job(incident: Incident, first: Event, before: list[Event]) -> str | None:
    """The job whose slot requests failed: the one that goes FAILING/RESTARTING right after, else the one the slot
    manager could not serve, else the last one that asked."""
    for ev in incident.events:
        if first.ts and ev.ts and ev.ts >= first.ts:
            m = JOB_STATE.search(ev.message)
            if m and m["to"] in ("FAILING", "RESTARTING", "FAILED"):
                return m["job"]
            if seconds_between(first.ts, ev.ts) > 60:
                break
    for rx in (_NOT_FULFILLED, _REQUIREMENTS):
        m = next((m for ev in reversed(before) for m in [rx.search(ev.message)] if m), None)
        if m:
            return m["job"]
    return None


def _slots(reqs: str) -> int:
    return sum(int(n) for n in _REQUIRED_SLOTS.findall(reqs))


def _jobmanager_log_from_start(incident: Incident) -> bool:
    """The JobManager's log covers the cluster's start, so a missing registration line means none happened."""
    return any(ev.role == "jobmanager" and re.search(r"Starting \w+(?:Entrypoint|EntryPoint) \(Version", ev.message)
               for ev in incident.events)


def _cause(n: dict) -> str:
    required, tms, slots = n.get("required_slots"), n.get("cluster_taskmanagers"), n.get("cluster_slots")
    if tms == 0 or (tms is None and n.get("job_pool_taskmanagers") == 0 and n.get("workers_requested")):
        return "workers-not-provisioned" if n.get("workers_requested") else "no-taskmanagers"
    if required is None:
        return "capacity-not-in-logs"
    if slots is None and n.get("job_got_slots") is not None and (n.get("job_pool_taskmanagers") or n.get("legacy_counts")):
        slots = n["job_got_slots"]  # the job got slots from every TaskManager there was: a lower bound
    if slots is None:
        return "capacity-not-in-logs"
    if n.get("requested_profile") and slots >= required:
        return "resource-profile-unfulfillable"
    if slots < required:
        return "parallelism-exceeds-slots"
    got = n.get("job_got_slots")
    if n.get("cluster_free_slots") is not None and n["cluster_free_slots"] < required or (got is not None and got < required):
        return "slots-held-by-other-jobs"
    return "capacity-not-in-logs"
