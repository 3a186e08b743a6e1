"""The JobManager lost its leadership (high availability): its jobs were suspended and recovered by the next leader.

Causes told apart from the HA backend's own lines before the loss: the ZooKeeper session timed out or the connection was
suspended (Curator SUSPENDED/LOST, "Client session timed out", often after a JobManager GC pause); Kubernetes API
errors while renewing the ConfigMap lease (KubernetesClientException, 409/429, "Renew deadline reached"); two JobManagers
acting as leader at once (grants in two processes without a revocation in between, fencing token mismatches).
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence import cluster
from flink_runbooks.evidence import leadership as ha
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording
from flink_runbooks.parse.timestamps import seconds_between
from flink_runbooks.vocabulary.units import parse_duration_ms

SLUG = "jm-leadership-lost"
_ZK_TIMEOUT = "high-availability.zookeeper.client.session-timeout"
_ZK_TOLERATE = "high-availability.zookeeper.client.tolerate-suspended-connections"
_UPGRADE_FOR_TOLERANCE = "upgrade to a release that tolerates suspended ZooKeeper connections"
_K8S = "high-availability.kubernetes.leader-election."
_BEFORE_S = 120  # HA backend trouble this long before the loss explains it


class JmLeadershipLost(Detector):
    slug = SLUG
    title = "JobManager lost leadership (high availability)"
    category = "coordination"
    meaning = ("The JobManager's leader election (ZooKeeper or Kubernetes) revoked its leadership: its jobs were "
               "suspended, TaskManagers dropped their slots for them, and the next leader recovered them from the "
               "last checkpoint.")
    versions = "1.5 – 2.x (ZooKeeper HA; Kubernetes HA since 1.12; one leader election per process since 1.15)"
    exception_classes = ("org.apache.flink.runtime.rpc.exceptions.FencingTokenException",
                         "org.apache.flink.kubernetes.shaded.io.fabric8.kubernetes.client.KubernetesClientException",
                         "org.apache.flink.shaded.zookeeper3.org.apache.zookeeper.KeeperException$SessionExpiredException")
    config_keys = (
        "high-availability.type",
        "high-availability.zookeeper.client.session-timeout",
        "high-availability.zookeeper.client.tolerate-suspended-connections",
        "high-availability.kubernetes.leader-election.lease-duration",
        "high-availability.kubernetes.leader-election.renew-deadline",
        "high-availability.cluster-id",
        "jobmanager.memory.process.size",
    )
    signatures = ha.SIGNATURES + cluster.GC_SIGNATURES
    wordings = (
        Wording(SLUG, r"JobManager for job [0-9a-f]{32} with leader id [0-9a-f]{32} lost leadership",
                "1.5 – 2.x", "TaskExecutor$JobLeaderListenerImpl#jobManagerLostLeadership",
                "JobManager for job 6f3c2a51d0e84b7a9c1d2e3f4a5b6c7d with leader id 8a1e9f2b3c4d5e6f7a8b9c0d1e2f3a4b lost leadership."),
        Wording(SLUG, r"Job leader for job id [0-9a-f]{32} lost leadership",
                "1.5 – 2.x", "TaskExecutor$JobLeaderListenerImpl (the exception that frees the job's slots)",
                "java.lang.Exception: Job leader for job id 6f3c2a51d0e84b7a9c1d2e3f4a5b6c7d lost leadership."),
        Wording(SLUG, r"for job [0-9a-f]{32} was revoked leadership with leader id [0-9a-f-]+",
                "1.13 – 2.x", "JobMasterServiceLeadershipRunner#revokeLeadership",
                "JobMasterServiceLeadershipRunner for job 6f3c2a51d0e84b7a9c1d2e3f4a5b6c7d was revoked leadership with "
                "leader id 8a1e9f2b-3c4d-5e6f-7a8b-9c0d1e2f3a4b. Stopping current JobMasterServiceProcess."),
        Wording(SLUG, r"JobManager for job .*? \([0-9a-f]{32}\) (?:at \S+ )?was revoked leadership",
                "1.5 – 1.12", "JobManagerRunner(Impl)#revokeLeadership (\"... was revoked leadership at <address>.\" in "
                "1.9.3, \"... at <address> was revoked leadership.\" in 1.12.5)",
                "JobManager for job Orders ETL (6f3c2a51d0e84b7a9c1d2e3f4a5b6c7d) was revoked leadership at "
                "akka.tcp://flink@jobmanager-0:6123/user/jobmanager_0."),
        Wording(SLUG, r"(?:ResourceManager|Dispatcher) \S+ was revoked leadership\.",
                "1.5 – 1.12", "ResourceManager#revokeLeadership (\"Clearing fencing token.\" follows), "
                "Dispatcher#revokeLeadership up to 1.9 (checked in 1.9.3 and 1.12.5)",
                "ResourceManager akka.tcp://flink@jobmanager-0:6123/user/resourcemanager was revoked leadership. "
                "Clearing fencing token."),
        Wording(SLUG, r"Connection to ZooKeeper suspended\. The contender \S+ no longer participates in the leader "
                      r"election",
                "1.5 – 1.12", "ZooKeeperLeaderElectionService (1.9.3) / ZooKeeperLeaderElectionDriver (1.12.5), WARN",
                "Connection to ZooKeeper suspended. The contender akka.tcp://flink@jobmanager-0:6123/user/jobmanager_0 "
                "no longer participates in the leader election."),
        Wording(SLUG, r"Connection to ZooKeeper suspended, waiting for reconnection",
                "1.13 – 2.x", "ZooKeeperLeaderElectionDriver / ZooKeeperLeaderRetrievalDriver (WARN)",
                "Connection to ZooKeeper suspended, waiting for reconnection."),
        Wording(SLUG, r"Connection to ZooKeeper lost\. (?:The contender|None of the contenders)",
                "1.13 – 2.x", "ZooKeeper(MultipleComponent)LeaderElectionDriver (\"The contender no longer participates\" "
                "up to 1.17, \"None of the contenders participates in the leader election anymore\" since 1.18)",
                "Connection to ZooKeeper lost. None of the contenders participates in the leader election anymore."),
        Wording(SLUG, r"Job [0-9a-f]{32} was not finished by JobManager",
                "1.3 – 1.4", "the pre-FLIP-6 job client, as reported logs show it (no release jar checked)",
                "org.apache.flink.runtime.client.JobExecutionException: Job 6f3c2a51d0e84b7a9c1d2e3f4a5b6c7d was not "
                "finished by JobManager."),
        Wording(SLUG, r"Job completed with illegal status: SUSPENDED",
                "1.10 – 2.x", "JobResult#toJobExecutionResult (a client waiting for a job that was suspended)",
                "org.apache.flink.runtime.client.JobExecutionException: Job completed with illegal status: SUSPENDED."),
    )
    root_causes = (
        RootCause("zookeeper-session-timeout", "The JobManager's ZooKeeper connection was suspended and its session "
                  "expired (or the suspension alone revoked the leadership): a long GC pause of the JobManager or a "
                  "network problem to the ZooKeeper quorum.",
                  "Curator 'State change: SUSPENDED'/'LOST', 'Connection to ZooKeeper suspended/lost', 'Client "
                  "session timed out' before the revocation.",
                  patches=("ops:find what paused the JobManager or cut it from ZooKeeper", f"flink:{_ZK_TIMEOUT}",
                           f"flink:{_ZK_TOLERATE}", f"ops:{_UPGRADE_FOR_TOLERANCE}", "flink:jobmanager.memory.process.size")),
        RootCause("kubernetes-api-failure", "Renewing the leader ConfigMap lease failed against the Kubernetes API "
                  "(errors, throttling, timeouts) until the renew deadline passed.",
                  "KubernetesClientException / 'Exception occurred while renewing lock' / 'Renew deadline reached' / "
                  "ConfigMap update failures (409, 429, 5xx) before the revocation.",
                  patches=("ops:check the Kubernetes API server and the JobManager's access to it",
                           f"flink:{_K8S}lease-duration", f"flink:{_K8S}renew-deadline", f"flink:{_K8S}retry-period")),
        RootCause("two-leaders", "Two JobManagers acted as leader at the same time (split brain): one kept leading "
                  "after another had been elected.",
                  "Leadership granted in two JobManager processes with different leader ids and no revocation in "
                  "between, or fencing token mismatches.",
                  patches=("ops:stop the stale JobManager and keep one leader per cluster id",
                           f"flink:{_ZK_TOLERATE}", "flink:high-availability.cluster-id")),
        RootCause("undetermined", "The leadership was lost, but the logs at hand do not show the HA backend's side.",
                  "A leadership loss without ZooKeeper connection states, Kubernetes API errors or a second leader "
                  "in these logs (typically only a TaskManager's or a client's view).",
                  patches=("ops:collect the JobManager log and the HA backend's view",),
                  next_evidence="the JobManager's log for the minutes before the loss (Curator 'State change:' lines, "
                                "'Connection to ZooKeeper …', KubernetesClientException), its GC log, and the ZooKeeper "
                                "server logs or `kubectl get events` / API server metrics for that time."),
    )

    templates = {
        "zookeeper-session-timeout": "The JobManager's ZooKeeper connection was suspended{outcome}: {why}. Its "
                                     "leadership was revoked and its jobs suspended.",
        "session expired": " and its session expired (nothing heard for {unheard_ms} ms, session timeout {session_ms} "
                           "ms)",
        "suspension revoked": " and the suspension alone revoked its leadership",
        "gc pause": "the JobManager paused for {seconds:.0f} s (GC)",
        "stalled": "the JobManager or its network to ZooKeeper stalled (no GC pause in these logs)",
        "kubernetes-api-failure": "Renewing the leader ConfigMap lease failed against the Kubernetes API ({count} "
                                  "failure(s){statuses}) until the renew deadline of {renew_s} s passed: the "
                                  "JobManager gave up its leadership and its jobs were suspended.",
        "statuses": ", statuses {statuses}",
        "two-leaders": "Two JobManagers acted as leader at the same time ({count} leader ids granted{rejected}): one "
                       "kept leading after another had been elected, until its own leadership was revoked.",
        "rejected": ", calls rejected for a leader id or fencing token that was no longer valid",
        "undetermined": "The JobManager lost its leadership, but these logs do not show why: no ZooKeeper connection "
                        "states, Kubernetes API errors or second leader before the loss.",
        "regained": "Leadership was granted again at {ts}; the jobs recover from their last checkpoint.",
        "excerpt": "Unknown from this excerpt: the JobManager's own view of the HA backend.",
        "note loss": "the leadership was lost here",
        "note suspended job": "the job was suspended with the leadership",
        "note suspended": "the ZooKeeper connection was suspended before the loss",
        "note session timeout": "the client heard nothing from ZooKeeper for too long and dropped the connection",
        "note expired": "the session expired: the leader's ephemeral node is gone",
        "note gc": "a {seconds:.1f} s GC pause of the JobManager",
        "note api failure": "the Kubernetes API refused or failed the lease update",
        "note renew deadline": "the renew deadline passed: the lease was given up",
        "note grant": "leader id {leader} granted in {file}",
        "note second grant": "leader id {leader} granted in {file} while the first had not been revoked",
        "note fencing": "a call of one leader rejected because another leader's id is expected",
        "collect": "The JobManager's log of the minutes before the loss shows the HA backend's connection states; its "
                   "GC log shows pauses; ZooKeeper's server log or the Kubernetes API server's events show the other "
                   "side.",
        "remove the pause": "A stop-the-world pause longer than the session timeout expires the session whatever the "
                            "network does: give the JobManager heap headroom (or a pause-bounded collector) and look "
                            "for what fills it.",
        "check gc and network": "Check the JobManager's GC log and the network to the ZooKeeper quorum (ZooKeeper's "
                                "server logs show the expired session and any quorum trouble) for that time.",
        "longer session": "A longer session rides out pauses of this length; the ZooKeeper servers must allow it "
                          "(maxSessionTimeout, 20 × tickTime by default). A complement to removing the pause, not a "
                          "cure.",
        "tolerate suspension": "The connection came back within the session, but a suspension alone revoked the "
                               "leadership; tolerating suspended connections keeps it until the session is actually "
                               "lost.",
        "upgrade to tolerate": "Flink {version} has no way to keep the leadership through a suspended connection: "
                               "high-availability.zookeeper.client.tolerate-suspended-connections exists from 1.14 "
                               "on. Until an upgrade, every ZooKeeper hiccup of this kind suspends the jobs.",
        "heap headroom": "More heap headroom shortens the JobManager's full collections.",
        "check the api server": "Look at the API server's latency and throttling (429, APF) and at other writers of "
                                "the same ConfigMaps (409 conflicts: a second deployment with the same cluster id, or "
                                "an operator) at that time.",
        "longer lease": "A longer lease lets a leader ride out a slow API server.",
        "renew deadline": "Keep the renew deadline equal to the lease duration (at most).",
        "retry period": "Retry renewals well within the deadline.",
        "one leader": "Make sure only one JobManager deployment uses this high-availability.cluster-id and storage "
                      "path, and that a JobManager cut off from the HA backend stops leading (it must not keep "
                      "running jobs).",
        "do not tolerate suspension": "With suspended connections tolerated, a JobManager cut off from ZooKeeper "
                                      "keeps its leadership until its client declares the session lost, while the "
                                      "quorum has already elected another leader.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        lead = ha.leadership(incident)
        losses = [ev for ev in lead.losses + lead.lost if not _shutting_down(incident, ev)]
        loss = min(losses, key=lambda ev: (ev not in lead.losses, ev.ts or "~")) if losses else None
        if loss is None:
            return []  # a suspension that reconnected in time is not a lost leadership
        window = [ev for ev in incident.events if _within(ev, loss)]
        overlap = ha.overlapping_leaders(incident)
        zk = [ev for ev in lead.suspended + lead.lost + lead.session_timeouts if ev in window or ev is loss]
        k8s = [ev for ev in lead.k8s_failures if ev in window]
        gc = [ev for ev in window if cluster.GC_PAUSE.search(ev.text) and _gc_seconds(ev) >= 1]
        events: list[Event] = [loss]
        notes = {0: self.say("note loss")}
        details = {"leadership_losses": len(lead.losses), "suspended_jobs": len(lead.suspended_jobs),
                   "zookeeper_suspended": len(lead.suspended), "zookeeper_lost": len(lead.lost),
                   "kubernetes_api_failures": len(lead.k8s_failures)}
        recovered = [ev for ev in lead.grants if (ev.ts or "") > (loss.ts or "~")]
        if overlap or lead.fencing:
            cause = "two-leaders"
            summary, patches = self._two_leaders(incident, overlap, lead, events, notes, details)
        elif zk:
            cause = "zookeeper-session-timeout"
            summary, patches = self._zookeeper(incident, zk, gc, lead, events, notes, details, loss)
        elif k8s:
            cause = "kubernetes-api-failure"
            summary, patches = self._kubernetes(incident, k8s, events, notes, details)
        else:
            cause = "undetermined"
            summary = self.say(cause)
            patches = [self.ops_patch(
                "collect the JobManager log and the HA backend's view", self.say("collect"),
                snippet="grep -n -E 'State change:|Connection to ZooKeeper|KubernetesClientException|revoked' jobmanager.log\n"
                        "kubectl get events --field-selector involvedObject.kind=ConfigMap")]
        if lead.suspended_jobs:
            events.append(lead.suspended_jobs[0])
            notes[len(events) - 1] = self.say("note suspended job")
        if recovered:
            details["leadership_regained_at"] = recovered[0].ts
            summary += " " + self.say("regained", ts=recovered[0].ts)
        confidence = {"two-leaders": 0.8, "zookeeper-session-timeout": 0.85, "kubernetes-api-failure": 0.8,
                      "undetermined": 0.4}[cause]
        if is_excerpt(incident) and not lead.grants:
            confidence = min(confidence, 0.5)
            summary += " " + self.say("excerpt")
        return [self.finding(cause, summary, events, notes=notes, confidence=confidence, patches=patches,
                             details=details)]

    def _zookeeper(self, incident, zk, gc, lead, events, notes, details, loss):
        first = zk[0]
        events.append(first)
        notes[len(events) - 1] = self.say("note suspended")
        lost = [ev for ev in zk if ha.ZK_LOST.search(ev.text)]
        timeouts = [ev for ev in zk if ev in lead.session_timeouts]
        if timeouts:
            events.append(timeouts[0])
            notes[len(events) - 1] = self.say("note session timeout")
        if lost:
            events.append(lost[0])
            notes[len(events) - 1] = self.say("note expired")
        if gc:
            events.append(gc[0])
            notes[len(events) - 1] = self.say("note gc", seconds=_gc_seconds(gc[0]))
        silent = ha.ZK_SESSION_TIMEOUT.search(timeouts[0].text) if timeouts else None
        unheard_ms = int(silent["ms"]) if silent else None
        session_ms = parse_duration_ms(incident.config.get(_ZK_TIMEOUT)) or 60000
        tolerate = (incident.config.get(_ZK_TOLERATE) or "false").lower() == "true"
        details.update({"session_timeout": f"{session_ms} ms", "tolerate_suspended_connections": tolerate,
                        "not_heard_from_zookeeper": f"{unheard_ms} ms" if unheard_ms else "not logged",
                        "jobmanager_gc_pause": f"{_gc_seconds(gc[0]):.1f} s" if gc else "none in these logs"})
        why = self.say("gc pause", seconds=_gc_seconds(gc[0])) if gc else self.say("stalled")
        outcome = (self.say("session expired", unheard_ms=unheard_ms, session_ms=session_ms) if lost
                   else self.say("suspension revoked"))
        summary = self.say("zookeeper-session-timeout", outcome=outcome, why=why)
        patches = [self.ops_patch(
            "find what paused the JobManager or cut it from ZooKeeper",
            self.say("remove the pause" if gc else "check gc and network"),
            snippet="grep -n -E 'Pause|Full GC' jobmanager-gc.log\necho srvr | nc <zookeeper-host> 2181")]
        if lost:
            target = max(2 * session_ms, (unheard_ms or 0) * 3 // 2, 120000)
            patches.append(self.flink_patch(
                incident, _ZK_TIMEOUT, str(-(-target // 10000) * 10000), self.say("longer session")))
        elif not tolerate and _tolerance_exists(incident):
            patches.append(self.flink_patch(
                incident, _ZK_TOLERATE, "true", self.say("tolerate suspension")))
        elif not tolerate:
            patches.append(self.ops_patch(_UPGRADE_FOR_TOLERANCE, self.say("upgrade to tolerate",
                                                                            version=incident.flink_version),
                                          urgent=False))
        if gc:
            heap = incident.config.get("jobmanager.memory.process.size")
            if heap:
                from flink_runbooks.vocabulary.units import format_size, parse_memory_size
                size = parse_memory_size(heap) or 0
                patches.append(self.flink_patch(
                    incident, "jobmanager.memory.process.size", format_size(max(2 * size, 2 << 30)),
                    self.say("heap headroom")))
        return summary, patches

    def _kubernetes(self, incident, k8s, events, notes, details):
        events.append(k8s[0])
        notes[len(events) - 1] = self.say("note api failure")
        statuses = sorted({f"{code} {reason}".strip() for ev in k8s for code, reason in ha.k8s_statuses(ev.text)})
        deadline = next((ev for ev in k8s if ha.RENEW_DEADLINE.search(ev.text)), None)
        if deadline is not None and deadline is not k8s[0]:
            events.append(deadline)
            notes[len(events) - 1] = self.say("note renew deadline")
        details["kubernetes_statuses"] = statuses or "not logged"
        lease = parse_duration_ms(incident.config.get(f"{_K8S}lease-duration")) or 15000
        renew = parse_duration_ms(incident.config.get(f"{_K8S}renew-deadline")) or 15000
        summary = self.say("kubernetes-api-failure", count=len(k8s), renew_s=renew // 1000,
                           statuses=self.say("statuses", statuses=", ".join(statuses)) if statuses else "")
        patches = [self.ops_patch(
            "check the Kubernetes API server and the JobManager's access to it", self.say("check the api server"),
            snippet="kubectl get --raw /metrics | grep apiserver_flowcontrol_rejected_requests_total\n"
                    "kubectl get configmaps -l configmap-type=high-availability -o wide")]
        if renew < 60000:
            patches.append(self.flink_patch(incident, f"{_K8S}lease-duration", "60 s", self.say("longer lease")))
            patches.append(self.flink_patch(incident, f"{_K8S}renew-deadline", "60 s", self.say("renew deadline")))
            patches.append(self.flink_patch(incident, f"{_K8S}retry-period", "5 s", self.say("retry period")))
        details["lease_duration"] = f"{lease // 1000} s"
        return summary, patches

    def _two_leaders(self, incident, overlap, lead, events, notes, details):
        if overlap:
            a, b = overlap[0]
            events += [a, b]
            notes[len(events) - 2] = self.say("note grant", leader=ha.leader_of(a), file=a.file.rsplit("/", 1)[-1])
            notes[len(events) - 1] = self.say("note second grant", leader=ha.leader_of(b),
                                              file=b.file.rsplit("/", 1)[-1])
        if lead.fencing:
            events.append(lead.fencing[0])
            notes[len(events) - 1] = self.say("note fencing")
        leaders = sorted({ha.leader_of(ev) for ev in lead.grants if ha.leader_of(ev)})
        details["leader_ids"] = leaders[:6]
        tolerate = (incident.config.get(_ZK_TOLERATE) or "false").lower() == "true"
        summary = self.say("two-leaders", count=len(leaders), rejected=self.say("rejected") if lead.fencing else "")
        patches = [self.ops_patch(
            "stop the stale JobManager and keep one leader per cluster id", self.say("one leader"),
            snippet="grep -n -E 'granted leadership|revoked' jobmanager*.log")]
        if tolerate:
            patches.append(self.flink_patch(
                incident, _ZK_TOLERATE, "false", self.say("do not tolerate suspension")))
        return summary, patches


_UNIFIED_TS = re.compile(r"^\[(?P<d>\d{4}-\d\d-\d\d)T(?P<t>\d\d:\d\d:\d\d\.\d{3})")


def _ts(ev: Event) -> str | None:
    """The record's time; a JVM unified-logging GC line ('[2026-11-20T03:15:18.402+0000][info][gc] …') carries its own."""
    if ev.ts:
        return ev.ts
    m = _UNIFIED_TS.match(ev.message)
    return f"{m['d']} {m['t']}" if m else None


def _tolerance_exists(incident: Incident) -> bool:
    """tolerate-suspended-connections exists from 1.14 on (absent from 1.12.5's HighAvailabilityOptions, present in
    1.14.6's); an unknown release is given the benefit of the doubt, as most running today have it."""
    version = incident.version_tuple
    return version is None or tuple(version[:2]) >= (1, 14)


def _shutting_down(incident: Incident, loss: Event) -> bool:
    """The process that lost the leadership was being stopped (a revocation on shutdown is not a lost leadership)."""
    from flink_runbooks.evidence.rpc_addresses import JM_ENDED

    for ev in incident.events:
        if ev.file == loss.file and JM_ENDED.search(ev.text):
            gap = seconds_between(ev.ts, loss.ts)
            if gap is not None and 0 <= gap <= 60:
                return True
    return False


def _within(ev: Event, loss: Event) -> bool:
    gap = seconds_between(_ts(ev), loss.ts)
    return gap is not None and 0 <= gap <= _BEFORE_S


def _gc_seconds(ev: Event) -> float:
    return cluster.gc_pause_seconds(ev.text)
