"""A JobManager or TaskManager pod that never runs on Kubernetes: refused by the namespace (ResourceQuota,
LimitRange), left unscheduled, its image not pulled, its ConfigMap or Secret missing, or its container crashing (or
OOMKilled) as it starts.

Evidence comes from Kubernetes (events and pod states as ``kubernetes.*`` records, see ``parse.kubernetes``: kubectl's
JSON/YAML, ``describe pod``, ``get events`` and ``get pods`` tables) and from Flink's own side:

- native Kubernetes (1.10 – 2.x), ``KubernetesResourceManagerDriver``: ``Could not create pod {}, exception: {}`` (the
  Fabric8 client's ``KubernetesClientException: Failure executing: POST at: …/pods. Message: pods "…" is forbidden:
  exceeded quota: …``), and ``ActiveResourceManager``: ``Worker {} is terminated. Diagnostics: Pod terminated,
  container termination statuses: [flink-main-container(exitCode=137, reason=OOMKilled, message=null)]…`` (checked
  in flink-dist 1.20.3 and 2.3.0);
- the Flink Kubernetes Operator's ``DeploymentFailedException`` in a FlinkDeployment's ``status.error``: ``[<container>]
  <waiting message>`` for a JobManager container waiting in CrashLoopBackOff, ImagePullBackOff, ErrImagePull,
  RunContainerError, CreateContainerConfigError or OOMKilled, and the ReplicaFailure/FailedCreate condition's message.

Neighbours: a TaskManager that ran and was later OOMKilled is ``container-memory-exceeded`` (a pod killed for memory
is claimed here only when it never registered or ran under a minute); Flink waiting for slots is
``no-resource-available``, a wrapper (layer 1): when the Kubernetes evidence shows pods that never started, this
finding (layer 0) is the root cause and comes first.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flink_runbooks.detectors.base import Detector, version_key
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.parse.kubernetes import parse_time
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "pod-start-failure"
MIB = 1 << 20

# Kubernetes' own words (the API server's admission plugins, the scheduler, the kubelet), as events and states carry them
_AMOUNTS = r"[\w./-]+=\d+(?:\.\d+)?[A-Za-z]*(?:,[\w./-]+=\d+(?:\.\d+)?[A-Za-z]*)*"
QUOTA = re.compile(rf"exceeded quota: (?P<quota>[\w.-]+), requested: (?P<requested>{_AMOUNTS}), "
                   rf"used: (?P<used>{_AMOUNTS}), limited: (?P<limited>{_AMOUNTS})")
QUOTA_UNSPECIFIED = re.compile(r"failed quota: (?P<quota>[\w.-]+): must specify (?P<what>[\w.,]+)")
LIMIT_RANGE = re.compile(r"(?P<bound>maximum|minimum) (?P<resource>cpu|memory|ephemeral-storage) usage per "
                         r"(?P<per>Container|Pod) is (?P<allowed>\S+?),? but (?:limit|request) is (?P<asked>[\w.]+)")
UNSCHEDULABLE = re.compile(r"FailedScheduling|cannot be scheduled|\d+/\d+ nodes are available")
SHORTAGE = re.compile(r"(?P<count>\d+) (?P<what>Insufficient [\w/-]+(?:\.[\w/-]+)*|node\(s\) didn't match (?:Pod's )?"
                      r"node (?:affinity/selector|selector|affinity)|node\(s\) had (?:untolerated )?taint \{[^}]*\}|"
                      r"node\(s\) didn't satisfy existing pods anti-affinity rules|Too many pods|"
                      r"node\(s\) had volume node affinity conflict)")
UNBOUND_PVC = re.compile(r"unbound immediate PersistentVolumeClaims|persistentvolumeclaim \"[\w.-]+\" not found")
IMAGE = re.compile(r"ErrImagePull|ImagePullBackOff|InvalidImageName|Failed to pull image|Back-off pulling image")
IMAGE_NAME = re.compile(r"(?:pull(?:ing)? image|image) \\?\"(?P<image>[^\"\\]+)\\?\"")
IMAGE_AUTH = re.compile(r"(?i)pull access denied|unauthorized|authentication required|no basic auth credentials|"
                        r"401 Unauthorized|403 Forbidden|denied: requested access")
IMAGE_MISSING = re.compile(r"(?i)manifest unknown|not found|does not exist|NotFound|InvalidImageName|"
                           r"invalid reference format")
MISSING_OBJECT = re.compile(r"(?P<kind>configmap|secret)s? \\?\"(?P<name>[\w.-]+)\\?\" not found")
CONFIG_ERROR = re.compile(r"CreateContainerConfigError|FailedMount|CreateContainerError")
CRASH = re.compile(r"CrashLoopBackOff|[Bb]ack-off (?:\d+[\dhms]* )?restarting failed container|RunContainerError")
# a termination as the pod records (parse.kubernetes) and Flink's ActiveResourceManager print it
TERMINATED = re.compile(r"Terminated: Reason: (?P<reason>\w+), Exit Code: (?P<code>-?\d+)"
                        r"(?:, started (?P<started>[^\s,]+))?(?:, finished (?P<finished>[^\s,]+))?")
FLINK_TERMINATED = re.compile(r"Worker (?P<pod>[\w.-]+) is terminated\. Diagnostics: Pod terminated, container "
                              r"termination statuses: \[(?P<container>[\w.-]+)\(exitCode=(?P<code>-?\d+), "
                              r"reason=(?P<reason>\w+), message=(?P<message>[^\]]*)\)")
CREATING = re.compile(r"Creating new TaskManager pod with name (?P<pod>[\w.-]+) and resource")
FLINK_CREATE_FAILED = re.compile(r"Could not create pod (?P<pod>[\w.-]+), exception: ")
FABRIC8_FAILURE = re.compile(r"Failure executing: POST at: \S+/pods\. Message: (?P<message>.+?)(?:\. Received status:|$)")
OPERATOR_FAILED = re.compile(r"DeploymentFailedException: \[(?P<container>[\w.-]+)\] (?P<message>.*)")
HEALTHY = re.compile(r"Event Normal Started from kubelet|STATUS Running \(READY (?P<ready>\d+)/\d+|"
                     r"Worker (?P<worker>[\w.-]+) is registered|Registering TaskManager with ResourceID (?P<tm>[\w.-]+)")
POD_NAME = re.compile(r"(?:Pod|pod) \"?(?P<pod>[a-z0-9][\w.-]*[a-z0-9])\"?")
PENDING = re.compile(r"STATUS (?:Pending|ContainerCreating|Init:\S+)|is Pending|Pod \{?[\w.-]*\}? is terminated before "
                     r"being scheduled")
SHORT_RUN_S = 60  # a container killed within this of its start never got to run a task

_QUOTA_ACTION = "ops:raise the namespace's ResourceQuota or free it"
_NODES_ACTION = "ops:make room for the pod"
_IMAGE_ACTION = "ops:fix the image reference"
_OBJECT_ACTION = "ops:create the object the pod needs"
_CRASH_ACTION = "ops:read the container's own log"
_MEMORY_ACTION = "ops:give the container the memory Flink's model needs"
_COLLECT = "ops:collect the pod's events and status"


@dataclass
class Refusal:
    """One cause, the records that show it and the facts read from them."""

    cause: str
    events: list[Event] = field(default_factory=list)
    facts: dict = field(default_factory=dict)


class PodStartFailure(Detector):
    slug = SLUG
    title = "Flink pods that never start on Kubernetes (quota, scheduling, image pull, crash loop)"
    category = "cluster"
    meaning = ("A JobManager or TaskManager pod never ran: the namespace's ResourceQuota or LimitRange refused it, no "
               "node could take it, its image could not be pulled, a ConfigMap or Secret it mounts is missing, or its "
               "container crashed (or was OOMKilled) as it started.")
    versions = ("1.10 – 2.x native Kubernetes (Flink's wording checked in flink-dist 1.20.3 and 2.3.0) and the Flink "
                "Kubernetes Operator; Kubernetes' event and state reasons of the API, scheduler and kubelet")
    exception_classes = ("org.apache.flink.kubernetes.shaded.io.fabric8.kubernetes.client.KubernetesClientException",
                         "org.apache.flink.kubernetes.operator.exception.DeploymentFailedException")
    config_keys = ("taskmanager.memory.process.size", "kubernetes.taskmanager.cpu.amount",
                   "jobmanager.memory.process.size", "kubernetes.container.image.ref",
                   "kubernetes.container.image.pull-secrets", "kubernetes.pod-template-file.taskmanager")
    collect_next = ("the namespace's events and the pods' state: `kubectl get events -n <ns> --sort-by=.lastTimestamp`, "
                    "`kubectl describe pod <pod> -n <ns>` and `kubectl get pod <pod> -n <ns> -o yaml` (for a crash, "
                    "`kubectl logs <pod> -n <ns> --previous`)")
    signatures = (
        r"exceeded quota|failed quota|usage per (?:Container|Pod) is",
        r"FailedScheduling|cannot be scheduled|nodes are available",
        r"ErrImagePull|ImagePullBackOff|InvalidImageName|Failed to pull image|Back-off pulling image",
        r"CreateContainerConfigError|CreateContainerError|FailedMount|RunContainerError",
        r"CrashLoopBackOff|[Bb]ack-off (?:\d+[\dhms]* )?restarting failed container|OOMKilled",
        r"Could not create pod|Creating new TaskManager pod|Pod \S+ is terminated before being scheduled",
        r"is terminated\. Diagnostics: Pod terminated",
        r"DeploymentFailedException",
        r"Event Normal (?:Started|Scheduled)|STATUS \S+ \(READY|Worker \S+ is registered",
        r"Registering TaskManager with ResourceID ",
    )
    wordings = (
        Wording(SLUG, r"Could not create pod [\w.-]+, exception: .*Failure executing: POST at: \S+/pods\. Message: "
                      r"pods \"[\w.-]+\" is forbidden", "1.10 – 2.x",
                "org.apache.flink.kubernetes.KubernetesResourceManagerDriver (flink-dist 1.20.3, 2.3.0) with the "
                "shaded Fabric8 client's OperationSupport#requestFailure",
                "Could not create pod orders-taskmanager-1-3, exception: java.util.concurrent.CompletionException: "
                "org.apache.flink.kubernetes.shaded.io.fabric8.kubernetes.client.KubernetesClientException: Failure "
                "executing: POST at: https://10.96.0.1/api/v1/namespaces/streaming/pods. Message: pods "
                "\"orders-taskmanager-1-3\" is forbidden: exceeded quota: flink-quota, requested: limits.memory=1728Mi, "
                "used: limits.memory=6912Mi, limited: limits.memory=8Gi."),
        Wording(SLUG, r"KubernetesClientException: Failure executing: POST at: \S+/pods\. Message: pods \"[\w.-]+\" "
                      r"is forbidden", "1.10 – 2.x",
                "the shaded Fabric8 client's KubernetesClientException (flink-dist 1.20.3, 2.3.0)",
                "org.apache.flink.kubernetes.shaded.io.fabric8.kubernetes.client.KubernetesClientException: Failure "
                "executing: POST at: https://10.96.0.1/api/v1/namespaces/streaming/pods. Message: pods "
                "\"orders-taskmanager-1-3\" is forbidden: exceeded quota: flink-quota, requested: limits.memory=1728Mi, "
                "used: limits.memory=6912Mi, limited: limits.memory=8Gi."),
        Wording(SLUG, r"DeploymentFailedException: \[[\w.-]+\] ", "1.16 – 2.x",
                "org.apache.flink.kubernetes.operator.exception.DeploymentFailedException#forContainerStatus (Flink "
                "Kubernetes Operator 1.12 – 1.13, FLINK-37470; earlier operators give the kubelet's message without "
                "the container's name, read by the reasons it holds)",
                "org.apache.flink.kubernetes.operator.exception.DeploymentFailedException: [flink-main-container] "
                "Back-off pulling image \"registry.example.com/streaming/orders:1.20.3-b42\""),
    )
    root_causes = (
        RootCause("resource-quota-exceeded",
                  "The namespace's ResourceQuota refused the pod: creating it would exceed the quota's hard limit.",
                  "'pods \"…\" is forbidden: exceeded quota: <quota>, requested: …, used: …, limited: …' (a FailedCreate "
                  "event, Flink's 'Could not create pod', the operator's ReplicaFailure).",
                  patches=(_QUOTA_ACTION, "flink:taskmanager.memory.process.size",
                           "flink:kubernetes.taskmanager.cpu.amount", "flink:kubernetes.taskmanager.cpu")),
        RootCause("limit-range-refused",
                  "The namespace's LimitRange refused the pod: its container asks for more (or less) than a "
                  "container or pod may.",
                  "'pods \"…\" is forbidden: maximum memory usage per Container is 2Gi, but limit is 4Gi'.",
                  patches=("ops:fit the pod into the LimitRange",)),
        RootCause("unschedulable",
                  "The scheduler found no node for the pod: too little free cpu/memory, no node matching its node "
                  "selector or tolerating the nodes' taints, or a PersistentVolumeClaim not bound.",
                  "A FailedScheduling event '0/N nodes are available: …' (Insufficient cpu/memory, didn't match node "
                  "selector, untolerated taint, unbound PersistentVolumeClaims) or PodScheduled False.",
                  patches=(_NODES_ACTION,)),
        RootCause("image-pull-failure",
                  "The kubelet cannot pull the pod's image: a wrong image or tag, or a private registry without the "
                  "pull secret.",
                  "ErrImagePull / ImagePullBackOff, 'Failed to pull image \"…\"': 'not found'/'manifest unknown' for "
                  "a wrong reference, 'pull access denied'/'unauthorized' for missing credentials.",
                  patches=(_IMAGE_ACTION, "flink:kubernetes.container.image.pull-secrets")),
        RootCause("configmap-or-secret-missing",
                  "The pod mounts (or reads its environment from) a ConfigMap or Secret that does not exist, so its "
                  "container is never created.",
                  "CreateContainerConfigError / FailedMount with 'configmap \"…\" not found' or 'secret \"…\" not "
                  "found'.",
                  patches=(_OBJECT_ACTION,)),
        RootCause("oomkilled-at-start",
                  "The container was OOMKilled as it started, before it registered: its memory limit is below what "
                  "Flink's memory model gives the JVM.",
                  "A termination 'reason: OOMKilled, exitCode: 137' within a minute of the container's start, or "
                  "Flink's 'Worker … is terminated … reason=OOMKilled' for a worker that never registered.",
                  patches=(_MEMORY_ACTION,)),
        RootCause("crash-loop",
                  "The container starts and exits with an error again and again (CrashLoopBackOff): the process "
                  "itself fails; its own log (the previous container's) says why.",
                  "CrashLoopBackOff / 'Back-off restarting failed container' with a last termination 'Error, exit "
                  "code N' (not OOMKilled).",
                  patches=(_CRASH_ACTION,)),
        RootCause("undetermined",
                  "A Flink pod did not start (Pending, waiting, refused), but nothing in the incident says why.",
                  "A pod Pending or waiting without an event naming the reason.",
                  patches=(_COLLECT,),
                  next_evidence="the namespace's events (`kubectl get events -n <namespace> "
                                "--sort-by=.lastTimestamp`), `kubectl describe pod <pod> -n <namespace>` and `kubectl "
                                "get pod <pod> -n <namespace> -o yaml` (status.containerStatuses)."),
    )

    templates = {
        "head": "The {role} pod {pod} never started: {what}. ",
        "head unnamed": "A {role} pod never started: {what}. ",
        "what quota": "the namespace's ResourceQuota {quota} refused it (requested {requested}, used {used}, "
                      "limited {limited})",
        "what quota unspecified": "the namespace's ResourceQuota {quota} refused it: the pod must specify {what}",
        "what limit range": "the namespace's LimitRange refused it ({bound} {resource} per {per} is {allowed}, the pod "
                            "asks {asked})",
        "what unschedulable": "no node could take it ({shortage})",
        "what image": "its image {image} could not be pulled ({why})",
        "why auth": "the registry refused the credentials",
        "why missing": "no such image or tag",
        "why unknown": "the kubelet's message does not say why",
        "what object": "its {kind} {object_name} does not exist",
        "what object unnamed": "its container could not be created ({reason})",
        "what oom": "its container was OOMKilled (exit code {code}) {when}",
        "oom when run": "{seconds} s after it started",
        "oom when unregistered": "before the TaskManager registered",
        "what crash": "its container keeps crashing (exit code {code}, {reason})",
        "what crash unknown": "its container keeps crashing (CrashLoopBackOff)",
        "what pending": "it stays {state}",
        "resource-quota-exceeded": "Kubernetes refuses to create the pod; Flink retries and keeps waiting for the "
                                   "slots it would have brought.",
        "limit-range-refused": "Kubernetes refuses to create the pod until its resources fit the namespace's "
                               "LimitRange.",
        "unschedulable": "The pod stays Pending until a node has room for it.",
        "image-pull-failure": "The container cannot start without its image.",
        "configmap-or-secret-missing": "The kubelet cannot create the container until the object exists.",
        "oomkilled-at-start": "A container killed for memory before it ran a task is sized below what the JVM "
                              "Flink starts needs; raising Flink's own memory options alone does not help.",
        "crash-loop": "Kubernetes restarts it with a growing back-off; the cause is in the container's own log.",
        "last log": " Its last log lines: {lines}",
        "undetermined": "The incident shows the pod not running but not why.",
        "waiting flink": " Flink waits for the slots this pod would bring (no-resource-available is the consequence).",
        "note refused": "Kubernetes: {what}",
        "note flink": "Flink's side of it",
        "note own log": "the crashing container's own log",
        # patches and actions
        "quota action": "The namespace's ResourceQuota {quota} has {left} left of {resource} and the pod asks "
                        "{requested}: raise the quota's hard limit (or free it by stopping another workload) so the "
                        "{role} fits.",
        "quota snippet": "kubectl describe resourcequota {quota} -n {namespace}   # Used / Hard\n"
                         "kubectl edit resourcequota {quota} -n {namespace}",
        "lower memory": "Or make each TaskManager fit what the quota has left ({left} of {resource}): a smaller "
                        "process has less heap and managed memory for the same slots; fewer slots per TaskManager "
                        "keep each slot's share.",
        "lower cpu": "Or ask for the cpu the quota has left ({left}) per TaskManager.",
        "limit range action": "The LimitRange allows {bound} {allowed} of {resource} per {per}; the pod asks {asked}. "
                              "Set the {role}'s resources within it ({keys}, or the FlinkDeployment's "
                              "spec.{spec}.resource), or have the LimitRange changed.",
        "limit range snippet": "kubectl describe limitrange -n {namespace}",
        "nodes action": "No node has room for the pod ({shortage}): {fix}",
        "fix insufficient": "add nodes (or let the cluster autoscaler add them), or ask for less per pod "
                            "(taskmanager.memory.process.size, kubernetes.taskmanager.cpu.amount or the "
                            "FlinkDeployment's resource) and run more slots per TaskManager.",
        "fix selector": "the pod's node selector or affinity matches no node: fix "
                        "kubernetes.taskmanager.node-selector / the pod template's nodeSelector, or label the nodes.",
        "fix taint": "the nodes carry taints the pod does not tolerate: add the toleration "
                     "(kubernetes.taskmanager.tolerations / kubernetes.jobmanager.tolerations or the pod template), "
                     "or schedule onto untainted nodes.",
        "fix pvc": "a PersistentVolumeClaim the pod mounts is not bound: check the claim's storage class and "
                   "provisioner (`kubectl get pvc -n <namespace>`).",
        "nodes snippet": "kubectl describe nodes | grep -A8 'Allocated resources'\n"
                         "kubectl get events -n {namespace} --field-selector reason=FailedScheduling",
        "image action auth": "The registry refused to serve {image} without credentials. Create a docker-registry "
                             "Secret in the pods' namespace and name it in {key} (native Kubernetes, and the "
                             "operator's flinkConfiguration) or in the pod template's imagePullSecrets.",
        "image action missing": "The image {image} does not exist: correct the repository or tag ({key}, or the "
                                "FlinkDeployment's spec.image) to one that was pushed.",
        "image action unknown": "Check that {image} exists and that the nodes may pull it (`kubectl describe pod` "
                                "shows the kubelet's full message).",
        "pull secrets": "The image is in a private registry and no pull secret is configured: the kubelet pulls "
                        "with this Secret (type kubernetes.io/dockerconfigjson, in the pods' namespace).",
        "image snippet": "kubectl create secret docker-registry regcred -n {namespace} --docker-server=<registry> "
                         "--docker-username=<user> --docker-password=<token>",
        "object action": "Create the {kind} {object_name} in the pod's namespace (or fix the name the pod template or "
                         "FlinkDeployment refers to); the kubelet retries on its own.",
        "object snippet": "kubectl get {kind} {object_name} -n {namespace}",
        "memory action": "The container's memory limit ({limit}) is below what the JVM Flink starts uses: the "
                         "limit must be at least the process size (taskmanager.memory.process.size / "
                         "jobmanager.memory.process.size{process}). Remove the lower limit from the pod template "
                         "(or the FlinkDeployment's resource), or lower the process size to the limit.",
        "crash action": "Read why the process exits: the previous container's log, then fix that fault (the "
                        "runbook its exception names); exit code {code}.",
        "crash snippet": "kubectl logs {pod} -n {namespace} --previous --tail=100",
        "collect action": "Collect what says why the pod does not run.",
        "collect snippet": "kubectl get events -n {namespace} --sort-by=.lastTimestamp\n"
                           "kubectl describe pod {pod} -n {namespace}\n"
                           "kubectl get pod {pod} -n {namespace} -o yaml",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        records = [ev for ev in incident.events if _relevant(ev)]
        if not records:
            return []
        healthy = _healthy_pods(incident)
        created = {m["pod"] for _, m in incident.find(CREATING)}
        refusals = [r for r in (self._read(ev, healthy, created) for ev in records) if r is not None]
        refusals = [r for r in refusals if not (r.facts.get("pod") in healthy and r.cause in (
            "unschedulable", "undetermined", "image-pull-failure", "configmap-or-secret-missing"))]
        # a pod killed for memory after it ran is container-memory-exceeded's, its back-off included
        ran_out = {_pod_of(ev) for ev in records if "OOMKilled" in ev.text} - {
            r.facts.get("pod") for r in refusals if r.cause == "oomkilled-at-start"}
        looping = {r.facts.get("pod") for r in refusals if r.cause == "crash-loop" and r.facts.get("looping")}
        refusals = [r for r in refusals if not (r.cause == "crash-loop" and (
            r.facts.get("pod") in ran_out or (r.facts.get("pod") not in looping and not r.facts.get("short"))))]
        if not refusals:
            return []
        order = [rc.slug for rc in self.root_causes]
        refusals.sort(key=lambda r: order.index(r.cause))
        main = refusals[0]
        if main.cause == "crash-loop" and main.facts.get("code") is None:
            main.facts.update(next((r.facts for r in refusals if r.cause == "crash-loop" and r.facts.get("code")
                                    is not None), {}))
        same = [r for r in refusals if r.cause == main.cause]
        # facts of the same pod first: another pod's exit code or image is not this one's
        same.sort(key=lambda r: r.facts.get("pod") != main.facts.get("pod"))
        facts = dict(main.facts)
        for r in same[1:]:
            for key, value in r.facts.items():
                facts.setdefault(key, value)
        roles = [_role_of(ev) for r in same for ev in r.events]
        facts.setdefault("role", next((role for role in roles if role != "Flink"), "Flink"))
        facts["namespace"] = facts.get("namespace") or _namespace(same) or "<namespace>"
        evidence, notes, add = evidence_trail()
        what = self._what(main.cause, facts)
        for r in same[:4]:
            for ev in r.events:
                add(ev, self.say("note refused", what=what) if (ev.logger or "").startswith("kubernetes.")
                    else self.say("note flink"))
        pod = facts.get("pod")
        summary = (self.say("head", role=facts["role"], pod=pod, what=what) if pod
                   else self.say("head unnamed", role=facts["role"], what=what))
        summary += self.say(main.cause)
        if main.cause == "crash-loop":
            tail = _last_log_records(incident, pod)
            if tail:
                facts["last_log_lines"] = [_line_of(ev) for ev in tail]
                summary += self.say("last log", lines=" | ".join(facts["last_log_lines"]))
                for ev in tail:
                    add(ev, self.say("note own log"))
        if facts["role"] == "TaskManager" and _waiting_for_slots(incident):
            summary += self.say("waiting flink")
        patches = self._patches(incident, main.cause, facts)
        details = {k: v for k, v in facts.items() if isinstance(v, (str, int, float)) or k == "last_log_lines"}
        # a kill for memory at start is container-memory-exceeded's too, which reads Flink's memory model and
        # proposes the sizes: that finding comes first; this one adds that the pod never ran
        confidence = 0.5 if main.cause == "undetermined" else 0.6 if main.cause == "oomkilled-at-start" else 0.9
        return [self.finding(main.cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details)]

    # ------------------------------------------------------------------------------------------------- reading

    def _read(self, ev: Event, healthy: set[str], created: set[str]) -> Refusal | None:
        """The cause one record shows, with its facts; None when it shows none of them."""
        text = ev.text
        pod = _pod_of(ev)
        base = {"pod": pod} if pod else {}
        m = QUOTA.search(text)
        if m:
            return Refusal("resource-quota-exceeded", [ev], {**base, "quota": m["quota"], "requested": m["requested"],
                                                             "used": m["used"], "limited": m["limited"]})
        m = QUOTA_UNSPECIFIED.search(text)
        if m:
            return Refusal("resource-quota-exceeded", [ev], {**base, "quota": m["quota"], "unspecified": m["what"]})
        m = LIMIT_RANGE.search(text)
        if m:
            return Refusal("limit-range-refused", [ev], {**base, **m.groupdict()})
        if UNSCHEDULABLE.search(text) and (ev.logger or "").startswith("kubernetes."):
            # the reason most nodes give first: it is the one to fix (one tainted control-plane node is usual)
            counts: dict[str, int] = {}
            for s in SHORTAGE.finditer(text):
                counts[s["what"]] = max(counts.get(s["what"], 0), int(s["count"]))
            shortages = [f"{n} {what}" for what, n in sorted(counts.items(), key=lambda kv: -kv[1])]
            if UNBOUND_PVC.search(text):
                shortages.append("PersistentVolumeClaim not bound")
            return Refusal("unschedulable", [ev], {**base, "shortage": ", ".join(shortages) or "FailedScheduling"})
        if IMAGE.search(text):
            image = IMAGE_NAME.search(text)
            why = "auth" if IMAGE_AUTH.search(text) else "missing" if IMAGE_MISSING.search(text) else None
            facts = {**base, **({"image": image["image"]} if image else {})}
            if why:
                facts["why"] = why
            return Refusal("image-pull-failure", [ev], facts)
        m = MISSING_OBJECT.search(text)
        if m and (CONFIG_ERROR.search(text) or (ev.logger or "").startswith("kubernetes.")):
            return Refusal("configmap-or-secret-missing", [ev], {**base, "kind": m["kind"].lower(),
                                                                 "name": m["name"]})
        if CONFIG_ERROR.search(text) and "configmap" not in text.lower() and "secret" not in text.lower():
            return Refusal("configmap-or-secret-missing", [ev], {**base, "reason": "CreateContainerConfigError"})
        m = FLINK_TERMINATED.search(text)
        if m:
            # only a pod whose creation the log shows and that never registered did not run
            return None if m["pod"] in healthy or m["pod"] not in created else self._flink_termination(ev, m)
        m = TERMINATED.search(text)
        if m and m["reason"] != "Completed" and m["code"] not in ("0", "143"):
            if m["reason"] == "OOMKilled":
                started, finished = parse_time(m["started"]), parse_time(m["finished"])
                if started and finished and (finished - started).total_seconds() < SHORT_RUN_S:
                    seconds = int((finished - started).total_seconds())
                    return Refusal("oomkilled-at-start", [ev], {**base, "code": int(m["code"]), "seconds": seconds,
                                                                "limit": _limit(ev)})
                return None  # a container that ran and was killed later: container-memory-exceeded
            started, finished = parse_time(m["started"]), parse_time(m["finished"])
            short = bool(started and finished and (finished - started).total_seconds() < SHORT_RUN_S)
            return Refusal("crash-loop", [ev], {**base, "code": int(m["code"]), "reason": m["reason"],
                                                **({"short": True} if short else {})})
        if CRASH.search(text) and not re.search(r"OOMKilled", text):
            return Refusal("crash-loop", [ev], {**base, "looping": True})
        m = OPERATOR_FAILED.search(text)
        if m:
            return Refusal("undetermined", [ev], {**base, "state": m["message"][:120]})
        if PENDING.search(text):
            state = re.search(r"STATUS (\S+)", text)
            return Refusal("undetermined", [ev], {**base, "state": state[1] if state else "Pending"})
        return None

    def _flink_termination(self, ev: Event, m: re.Match) -> Refusal | None:
        """Flink's own line for a TaskManager pod that ended before it registered (a registered one ran)."""
        if m["reason"] == "OOMKilled":
            return Refusal("oomkilled-at-start", [ev], {"pod": m["pod"], "code": int(m["code"]), "unregistered": True})
        if m["code"] not in ("0", "143") and m["reason"] not in ("Completed",):
            return Refusal("crash-loop", [ev], {"pod": m["pod"], "code": int(m["code"]), "reason": m["reason"],
                                                "short": True})
        return None

    def _what(self, cause: str, f: dict) -> str:
        if cause == "resource-quota-exceeded":
            if f.get("unspecified"):
                return self.say("what quota unspecified", quota=f["quota"], what=f["unspecified"])
            return self.say("what quota", quota=f["quota"], requested=f["requested"], used=f["used"],
                            limited=f["limited"])
        if cause == "limit-range-refused":
            return self.say("what limit range", bound=f["bound"], resource=f["resource"], per=f["per"],
                            allowed=f["allowed"], asked=f["asked"])
        if cause == "unschedulable":
            return self.say("what unschedulable", shortage=f["shortage"])
        if cause == "image-pull-failure":
            why = self.say({"auth": "why auth", "missing": "why missing"}.get(f.get("why"), "why unknown"))
            return self.say("what image", image=f.get("image") or "(unnamed)", why=why)
        if cause == "configmap-or-secret-missing":
            if f.get("name"):
                return self.say("what object", kind=f["kind"], object_name=f["name"])
            return self.say("what object unnamed", reason=f.get("reason") or "CreateContainerConfigError")
        if cause == "oomkilled-at-start":
            when = (self.say("oom when run", seconds=f["seconds"]) if f.get("seconds") is not None
                    else self.say("oom when unregistered"))
            return self.say("what oom", code=f.get("code", 137), when=when)
        if cause == "crash-loop":
            if f.get("code") is not None:
                return self.say("what crash", code=f["code"], reason=f.get("reason") or "Error")
            return self.say("what crash unknown")
        return self.say("what pending", state=f.get("state") or "Pending")

    # ------------------------------------------------------------------------------------------------- patches

    def _patches(self, incident: Incident, cause: str, f: dict):
        namespace, pod, role = f["namespace"], f.get("pod") or "<pod>", f["role"]
        if cause == "resource-quota-exceeded":
            return self._quota_patches(incident, f)
        if cause == "limit-range-refused":
            side = "jobmanager" if role == "JobManager" else "taskmanager"
            return [self.ops_patch("fit the pod into the LimitRange", self.say(
                "limit range action", bound="at most" if f["bound"] == "maximum" else "at least",
                allowed=f["allowed"], resource=f["resource"], per=f["per"], asked=f["asked"], role=role,
                keys=f"{side}.memory.process.size / kubernetes.{side}.cpu.amount",
                spec="jobManager" if role == "JobManager" else "taskManager"),
                snippet=self.say("limit range snippet", namespace=namespace))]
        if cause == "unschedulable":
            shortage = f["shortage"]
            first = shortage.split(", ")[0]
            fix = ("fix pvc" if "PersistentVolumeClaim" in shortage else "fix insufficient" if "Insufficient" in first
                   else "fix taint" if "taint" in first else "fix selector" if "didn't match" in first
                   else "fix insufficient")
            return [self.ops_patch("make room for the pod", self.say("nodes action", shortage=shortage,
                                                                      fix=self.say(fix)),
                                   snippet=self.say("nodes snippet", namespace=namespace))]
        if cause == "image-pull-failure":
            image = f.get("image") or "the image"
            image_key = version_key(incident, "kubernetes.container.image.ref")
            secrets_key = version_key(incident, "kubernetes.container.image.pull-secrets")
            why = f.get("why")
            action = ("image action auth" if why == "auth" else "image action missing" if why == "missing"
                      else "image action unknown")
            fields = {"image": image, "key": secrets_key if why == "auth" else image_key}
            if why is None:
                fields.pop("key")
            patches = [self.ops_patch("fix the image reference", self.say(action, **fields),
                                      snippet=self.say("image snippet", namespace=namespace) if why == "auth" else None)]
            if why == "auth" and not incident.config.get("kubernetes.container.image.pull-secrets") \
                    and _flink_creates_pods(incident):
                patches.append(self.flink_patch(incident, "kubernetes.container.image.pull-secrets", "regcred",
                                                self.say("pull secrets")))
            return patches
        if cause == "configmap-or-secret-missing":
            kind, name = f.get("kind") or "ConfigMap or Secret", f.get("name") or "<name>"
            return [self.ops_patch("create the object the pod needs",
                                   self.say("object action", kind=kind, object_name=name),
                                   snippet=self.say("object snippet", kind=kind.split()[0].lower(), object_name=name,
                                                    namespace=namespace))]
        if cause == "oomkilled-at-start":
            key = "taskmanager.memory.process.size" if role == "TaskManager" else "jobmanager.memory.process.size"
            process = incident.config.get(key)
            return [self.ops_patch("give the container the memory Flink's model needs", self.say(
                "memory action", limit=f.get("limit") or "its limit", process=f": {process}" if process else ""))]
        if cause == "crash-loop":
            return [self.ops_patch("read the container's own log", self.say("crash action", code=f.get("code", "?")),
                                   snippet=self.say("crash snippet", pod=pod, namespace=namespace))]
        return [self.ops_patch("collect the pod's events and status", self.say("collect action"),
                               snippet=self.say("collect snippet", pod=pod, namespace=namespace))]

    def _quota_patches(self, incident: Incident, f: dict):
        quota, namespace, role = f["quota"], f["namespace"], f["role"]
        resource, left, requested, fits = _quota_room(f)
        patches = [self.ops_patch(
            "raise the namespace's ResourceQuota or free it",
            self.say("quota action", quota=quota, left=left or "nothing", resource=resource or "its resources",
                     requested=requested or "more", role=role),
            snippet=self.say("quota snippet", quota=quota, namespace=namespace))]
        # a smaller TaskManager only when it still fits what the quota has left (else it would be refused too)
        if fits is not None and role == "TaskManager" and _native(incident):
            if resource.endswith("memory"):
                patches.append(self.flink_patch(incident, "taskmanager.memory.process.size", f"{fits // MIB}m",
                                                self.say("lower memory", left=left, resource=resource)))
            elif resource.endswith("cpu"):
                patches.append(self.flink_patch(incident, "kubernetes.taskmanager.cpu.amount", fits,
                                                self.say("lower cpu", left=left)))
        return patches


# ----------------------------------------------------------------------------------------------------- helpers

_KUBERNETES_FLINK = re.compile(r"KubernetesResourceManagerDriver|ActiveResourceManager|DeploymentFailedException|"
                               r"KubernetesClientException")


def _relevant(ev: Event) -> bool:
    logger = ev.logger or ""
    if logger.startswith("kubernetes."):
        return ev.level in ("WARN", "ERROR") or bool(HEALTHY.search(ev.message))
    return bool(_KUBERNETES_FLINK.search(ev.text) or FABRIC8_FAILURE.search(ev.text) or FLINK_TERMINATED.search(ev.text)
                or FLINK_CREATE_FAILED.search(ev.text) or OPERATOR_FAILED.search(ev.text))


def _pod_of(ev: Event) -> str | None:
    for rx in (FLINK_TERMINATED, FLINK_CREATE_FAILED):
        m = rx.search(ev.text)
        if m:
            return m["pod"]
    m = re.search(r"on Pod (?P<pod>[\w.-]+)|^Pod (?P<pod2>[\w.-]+)|pods \\?\"(?P<pod3>[\w.-]+)\\?\" is forbidden",
                  ev.text, re.M)
    if m:
        return m["pod"] or m["pod2"] or m["pod3"]
    return None


def _role_of(ev: Event) -> str:
    text = ev.text.lower()
    if "taskmanager" in text or "worker " in text or "-tm-" in text:
        return "TaskManager"
    if "jobmanager" in text or "deploymentfailedexception" in text:
        return "JobManager"
    return "Flink"


def _namespace(refusals: list[Refusal]) -> str | None:
    for r in refusals:
        for ev in r.events:
            m = re.search(r"namespace (?P<ns>[a-z0-9-]+)\)|/namespaces/(?P<ns2>[a-z0-9-]+)/", ev.text)
            if m:
                return m["ns"] or m["ns2"]
    return None


def _healthy_pods(incident: Incident) -> set[str]:
    """Pods that started after all (a Started event, Running and ready, a registered worker)."""
    names = set()
    for ev in incident.events:
        m = HEALTHY.search(ev.message)
        if not m:
            continue
        if m["worker"] or m["tm"]:
            names.add(m["worker"] or m["tm"])
        elif m["ready"] is None or int(m["ready"]) > 0:
            pod = _pod_of(ev)
            if pod:
                names.add(pod)
    return names


def _waiting_for_slots(incident: Incident) -> bool:
    return any(re.search(r"NoResourceAvailableException|Requesting new worker with resource spec|"
                         r"Creating new TaskManager pod", ev.text) for ev in incident.events)


def _limit(ev: Event) -> str | None:
    m = re.search(r"memory:\s+(\S+)", "\n".join(ev.body))
    return m[1] if m else None


def _last_log_records(incident: Incident, pod: str | None) -> list[Event]:
    """The last records of the crashing container's own log (a file named after the pod, or a previous log), its
    warnings and errors when it has any."""
    own = [ev for ev in incident.events if not (ev.logger or "").startswith("kubernetes.")
           and ((pod and pod in ev.file) or "previous" in ev.file.rsplit("/", 1)[-1])
           and not _KUBERNETES_FLINK.search(ev.logger or "")]
    errors = [ev for ev in own if ev.level in ("WARN", "ERROR", "FATAL")]
    return (errors or own)[-3:]


def _line_of(ev: Event) -> str:
    """A record as one line: its deepest cause when it has one (what the process died of)."""
    root = ev.root_cause
    return (f"{root.cls}: {root.message}" if root and root.message else ev.message)[:200]


def _flink_creates_pods(incident: Incident) -> bool:
    """Flink's native Kubernetes integration builds the pods (native mode, or the operator's default native
    mode): its kubernetes.* options reach them."""
    return _native(incident) or any(ev.logger == "kubernetes.flinkdeployment" for ev in incident.events)


def _native(incident: Incident) -> bool:
    from flink_runbooks.evidence.deployment import deployment

    d = deployment(incident)
    return d.platform == "kubernetes" and d.native


def _quantity(text: str) -> float | None:
    """A Kubernetes quantity (``1728Mi``, ``8Gi``, ``500m`` cpu, ``2``) in bytes or cores."""
    m = re.fullmatch(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>Ki|Mi|Gi|Ti|k|M|G|T|m)?", text.strip())
    if not m:
        return None
    n = float(m["n"])
    factor = {"Ki": 1 << 10, "Mi": MIB, "Gi": 1 << 30, "Ti": 1 << 40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
              "m": 1e-3, None: 1}[m["unit"]]
    return n * factor


def _pairs(text: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in text.split(",") if "=" in p)


MIN_TASKMANAGER_BYTES = 1 << 30  # below this a TaskManager has too little heap and network memory to be worth it
MIN_CPU = 0.5


def _quota_room(f: dict) -> tuple[str | None, str | None, str | None, object]:
    """The quota's resource the pod exceeded, what is left of it, what the pod asked, and a smaller ask that fits
    (bytes for memory, cores as text for cpu) or None when nothing useful fits."""
    if not f.get("requested"):
        return None, None, None, None
    requested, used, limited = _pairs(f["requested"]), _pairs(f["used"]), _pairs(f["limited"])
    for resource, asked in requested.items():
        have, hard = _quantity(used.get(resource, "")), _quantity(limited.get(resource, ""))
        want = _quantity(asked)
        if have is None or hard is None or want is None or have + want <= hard:
            continue
        left = max(hard - have, 0)
        if resource.endswith("memory"):
            text = f"{int(left // MIB)}Mi"
            fits = int(left // (64 * MIB)) * 64 * MIB if left >= MIN_TASKMANAGER_BYTES else None
        elif resource.endswith("cpu"):
            text = f"{left:g}"
            fits = f"{int(left * 10) / 10:g}" if left >= MIN_CPU else None
        else:
            text, fits = f"{left:g}", None
        return resource, text, asked, fits
    return None, None, None, None

