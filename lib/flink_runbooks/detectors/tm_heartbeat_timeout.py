"""``TimeoutException: Heartbeat of TaskManager with id … timed out``: why the JobManager stopped hearing from it."""
from __future__ import annotations

import re

from flink_runbooks.evidence import cluster
from flink_runbooks.evidence.cluster import HEARTBEAT_TIMEOUT, Inventory, LossContext
from flink_runbooks.evidence.memory import derive_jobmanager_memory, MemoryConfigError
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.units import format_duration, format_size
from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.parse.timestamps import seconds_between
from flink_runbooks.vocabulary.lifecycle import TASK_FAILED
from flink_runbooks.vocabulary.wordings import Wording

_ADDRESS_MISMATCH = re.compile(r"dropping message .* for non-local recipient|has quarantined this system|"
                               r"[Qq]uarantined address|not a local address")
_RPC_TIMEOUT = re.compile(r"Invocation of \[?Remote\w*Invocation\((?P<call>\w+Gateway\.\w+)[^\]]*\]? at recipient "
                          r"\[(?P<addr>[^\]]+)\] timed out|Ask timed out on \[Actor\[(?P<actor>[^\]#]+)")
_TOGETHER_S = 5  # timeouts this close together come from one event, not from several independent stalls


class TmHeartbeatTimeout(Detector):
    slug = "tm-heartbeat-timeout"
    title = "TaskManager heartbeat timed out"
    category = "cluster"
    meaning = ("The JobManager/ResourceManager received no heartbeat from a TaskManager for heartbeat.timeout and "
               "declared it dead, failing its tasks; the TaskManager was frozen, dead, cut off or overloaded.")
    exception_classes = ("java.util.concurrent.TimeoutException", "org.apache.flink.runtime.jobmaster.JobMasterException")
    versions = "1.5 – 2.x (akka before 1.18, pekko since; Duration-typed heartbeat options since 1.20)"
    layer = 0
    collect_next = "the TaskManager's log and GC log at the time of the timeout"
    config_keys = (
        "heartbeat.timeout",
        "heartbeat.interval",
        "pekko.ask.timeout",
        "taskmanager.memory.process.size",
        "jobmanager.memory.process.size",
    )
    signatures = cluster.LOSS_SIGNATURES + cluster.GC_SIGNATURES + (
        r"dropping message .* for non-local recipient",
        r"has quarantined this system",
        r"Invocation of \[?Remote\w*Invocation\(\w+Gateway",
    )
    root_causes = (
        RootCause("gc-pause-or-freeze", "The TaskManager JVM was alive but frozen longer than heartbeat.timeout: a "
                  "stop-the-world GC pause, a suspended/stalled VM or a starved container.",
                  "Its own log is silent across the timeout and then reports its own heartbeat timeouts to the "
                  "ResourceManager/JobManager at once; or GC pauses of many seconds in its log.",
                  patches=("flink:heartbeat.timeout", "ops:find the pause")),
        RootCause("process-died", "The TaskManager process had died (killed, crashed, out of memory) and the "
                  "heartbeat timeout is how the JobManager noticed.",
                  "Its own log ends before the timeout with no shutdown line and nothing after (or memory errors "
                  "right before): fix why it died; a longer timeout only delays recovery.",
                  patches=("ops:find why the TaskManager died",)),
        RootCause("network-partition", "The network between the JobManager and the TaskManager(s) failed while the "
                  "processes kept running.",
                  "The TaskManager's log continues through the timeout with connection errors; or several "
                  "TaskManagers time out together while their logs go on.",
                  patches=("flink:heartbeat.timeout", "ops:check the network between JobManager and TaskManagers")),
        RootCause("jobmanager-unresponsive", "The JobManager itself stalled (GC, overload) and every TaskManager "
                  "appeared to time out at once.",
                  "All registered TaskManagers time out within seconds, after a silent gap in the JobManager's log.",
                  patches=("flink:heartbeat.timeout", "flink:jobmanager.memory.process.size", "flink:jobmanager.memory.*")),
        RootCause("rpc-address-mismatch", "JobManager and TaskManager resolve each other's RPC address differently, "
                  "so heartbeats are dropped.",
                  "pekko/akka 'dropping message … for non-local recipient' or 'quarantined' lines around the timeout.",
                  patches=("ops:make the RPC addresses agree",)),
        RootCause("tm-log-missing", "The TaskManager's own log is not among the inputs: whether it died, froze or "
                  "was cut off cannot be told.",
                  "Only the JobManager's timeout lines are present.",
                  patches=("flink:heartbeat.timeout", "ops:collect the TaskManager's log")),
    )

    wordings = (
        Wording("tm-heartbeat-timeout", r"(?:The heartbeat of|Heartbeat of) TaskManager with id \S+ timed out",
                "1.5 – 2.x", "JobMaster / ResourceManager heartbeat listeners (\"Heartbeat of TaskManager with id {} timed out.\" up to 1.13, \"The heartbeat of TaskManager with id %s timed out.\" since 1.14)",
                "java.util.concurrent.TimeoutException: The heartbeat of TaskManager with id localhost:39497-b02aeb timed out."),
    )

    templates = {
        "head": "The heartbeat of TaskManager {tm} timed out at {at} (heartbeat.timeout {timeout}){together}. "
                "{verdict} {why}{rpc}{harmless}",
        "together": ", together with {others} other TaskManager(s)",
        "rpc before": " {count} RPC call(s) to it had already timed out before, the first at {first}.",
        "harmless": " No task failed because of it.",
        "excerpt head": "The heartbeat of TaskManager {tm} timed out (heartbeat.timeout {timeout}). {verdict}",
        # why the cause: one sentence of the evidence behind it
        "quarantined": "pekko/akka reported: '{message}'.",
        "memory trouble": "Its log shows memory trouble/a crash right before it went silent.",
        "gc pause": "Its log shows a GC pause of {pause:.0f} s.",
        "frozen": "Its own log was silent for {silence:.0f} s and then reported its own heartbeat timeouts at {at}: "
                  "it was frozen, not gone.",
        "jobmanager silent": "All {count} TaskManagers timed out together after {gap:.0f} s of silence in the "
                             "JobManager's log.",
        "jobmanager stalled": "The TaskManager's own log goes on and reports the JobManager's heartbeat timing out, "
                              "while the JobManager's log is silent for {gap:.0f} s and resumes only as it reports "
                              "the loss.",
        "log goes on": "Its own log goes on through the timeout.",
        "timed out together": "{count} TaskManagers timed out together.",
        "log ends": "Its own log ends{before} with no shutdown line and nothing after.",
        "before timeout": " {gap:.0f} s before the timeout",
        "add the log": "Add the TaskManager's log to tell a dead process from a frozen one.",
        # evidence notes
        "gave up note": "the ResourceManager/JobMaster gave up on the TaskManager",
        "excerpt note": "the JobManager gave up on the TaskManager",
        "rpc note": "an earlier RPC to the same TaskManager timed out: it had already stopped answering",
        "gc note": "GC pause of {pause:.1f} s",
        "last line note": "its own log: the last line before the timeout",
        "memory note": "memory trouble before it went silent",
        "resumed note": "its own log after the silence: it resumed and found itself disconnected",
        "disconnected note": "its own log goes on: it lost the connection",
        "address note": "the RPC layer drops messages for an address it does not consider its own",
        "failure note": "the task failure it caused",
        # patches
        "longer timeout": "Ride out stalls shorter than {proposed} (now {current}{observed}). Longer timeouts also "
                          "delay noticing a dead TaskManager, so fix the stalls as well.",
        "observed": "; the observed silence was {silence:.0f} s",
        "find the pause": "Turn on GC logging on the TaskManagers and look for long stop-the-world pauses (heap too "
                          "small for the state/records kept on heap, or a full GC); check CPU throttling of the "
                          "container and the VM's steal time. Pauses come from a heap under pressure: see "
                          "oom-java-heap for sizing it.",
        "find why it died": "The process was gone, not slow: raising heartbeat.timeout would only delay recovery. "
                            "Look at the end of its log, its stdout (.out: JVM crash, OutOfMemoryError) and the "
                            "container's exit reason.",
        "check the network": "The processes kept running; look for packet loss, DNS failures, network policy changes "
                             "or node network problems at the time of the timeout.",
        "make the RPC addresses agree": "Set jobmanager.rpc.address (and taskmanager.host) to names both sides "
                                        "resolve to the same address (the Kubernetes service / the host's routable "
                                        "name, not localhost or a pod IP that changes).",
        "collect the TaskManager's log": "Its last lines tell a dead process (log just ends) from a frozen one "
                                         "(silence, then its own heartbeat timeouts) or a network problem (log goes "
                                         "on with connection errors).",
        "bigger jobmanager": "Every TaskManager timed out at once, which points at a stalled JobManager: give it 50 % "
                             "more memory so GC pauses shrink.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        inv = cluster.inventory(incident)
        timed_out = [(tm, loss) for tm in inv.taskmanagers.values() for loss in tm.losses
                     if loss.kind == "heartbeat-timeout" or any(HEARTBEAT_TIMEOUT.search(e.text) for e in loss.events)]
        bare = [ev for ev in incident.events if HEARTBEAT_TIMEOUT.search(ev.text)]
        if not timed_out and not bare:
            return []
        timed_out.sort(key=lambda c: c[1].ts or "~")
        failures = [ev for ev in incident.events if HEARTBEAT_TIMEOUT.search(ev.text) and
                    (TASK_FAILED.search(ev.message) or re.search(r"to (?:FAILING|RESTARTING|FAILED)", ev.message)
                     or not ev.ts)]
        timeout_ms = incident.config.get_duration_ms("heartbeat.timeout") or 50_000
        if not timed_out:
            return [self._without_inventory(incident, bare, failures, timeout_ms)]
        tm, loss = timed_out[0]
        ctx = cluster.loss_context(incident, tm, loss)
        together = [c for c in timed_out if abs(seconds_between(loss.ts, c[1].ts) or 0) <= _TOGETHER_S]
        cause, why = self._cause(incident, inv, ctx, together, timeout_ms)
        rpc = _rpc_timeouts(incident, tm, loss.ts)
        evidence, notes = self._evidence(ctx, failures, rpc, incident)
        details = {
            "timed_out_taskmanager": tm.tm_id,
            "host": tm.host,
            "timed_out_at": loss.ts,
            "heartbeat_timeout": format_duration(timeout_ms),
            "heartbeat_interval": format_duration(incident.config.get_duration_ms("heartbeat.interval") or 10_000),
            "taskmanagers_timed_out": [{"id": t.tm_id, "host": t.host, "at": loss.ts} for t, loss in timed_out],
            "timed_out_together": len(together),
            "registered_taskmanagers": len(inv.taskmanagers),
            "own_log": tm.log_file or "not among the inputs",
            "rpc_timeouts_before": len(rpc),
            "failed_tasks": len(failures),
        }
        silence = ctx.silence_s()
        if silence is not None:
            details["own_log_silence_s"] = round(silence, 1)
        if ctx.gc_pauses:
            details["longest_gc_pause_s"] = round(ctx.longest_gc_s, 1)
        if ctx.memory:
            details["memory_evidence"] = ctx.memory[0].excerpt(200)
        summary = self.say(
            "head", tm=tm.label, at=loss.ts or "?", timeout=format_duration(timeout_ms),
            together=self.say("together", others=len(together) - 1) if len(together) > 1 else "",
            verdict=self.cause(cause).summary, why=why,
            rpc=self.say("rpc before", count=len(rpc), first=rpc[0].ts) if rpc else "",
            harmless="" if failures else self.say("harmless"))
        return [self.finding(cause, summary, evidence, notes=notes,
                             confidence=0.5 if cause == "tm-log-missing" else 0.8,
                             severity="failure" if failures else "warning",
                             patches=self._patches(incident, cause, ctx, timeout_ms), details=details)]

    def _without_inventory(self, incident: Incident, bare: list[Event], failures: list[Event], timeout_ms: int):
        """A pasted excerpt: the timeout without the lines that identify the TaskManager's fate."""
        m = HEARTBEAT_TIMEOUT.search(bare[0].text)
        summary = self.say("excerpt head", tm=m["tm"], timeout=format_duration(timeout_ms),
                           verdict=self.cause("tm-log-missing").summary)
        return self.finding("tm-log-missing", summary, bare[:3], confidence=0.5,
                            notes={0: self.say("excerpt note")},
                            patches=self._patches(incident, "tm-log-missing", None, timeout_ms),
                            details={"timed_out_taskmanager": m["tm"], "heartbeat_timeout": format_duration(timeout_ms)})

    def _patches(self, incident: Incident, cause: str, ctx: LossContext | None, timeout_ms: int):
        patches = []
        version = incident.version_tuple
        if cause in ("gc-pause-or-freeze", "network-partition", "tm-log-missing", "jobmanager-unresponsive"):
            silence = ctx.silence_s() if ctx else None
            if ctx and ctx.gc_pauses:
                silence = max(silence or 0, ctx.longest_gc_s)
            current, proposed = cluster.heartbeat_timeout_proposal(incident, silence)
            patches.append(self.flink_patch(
                incident, "heartbeat.timeout", cluster.duration_value(proposed, version),
                self.say("longer timeout", proposed=format_duration(proposed), current=format_duration(current),
                         observed=self.say("observed", silence=silence) if silence else "")))
        if cause == "gc-pause-or-freeze":
            patches.append(self.ops_patch(
                "find the pause", self.say("find the pause"),
                snippet="# flink-conf.yaml / config.yaml (JDK 11+)\n"
                        "env.java.opts.taskmanager: -Xlog:gc*:file=/opt/flink/log/gc.log:time,uptime:filecount=5,filesize=20M\n"
                        "# afterwards: grep -E 'Pause (Full|Young).*[0-9]{4,}\\.[0-9]+ms' /opt/flink/log/gc.log"))
        if cause == "process-died":
            patches.append(self.ops_patch(
                "find why the TaskManager died", self.say("find why it died"),
                snippet="kubectl describe pod <taskmanager pod> | grep -A5 'Last State'\n"
                        "dmesg -T | grep -iE 'killed process|out of memory'"))
        if cause == "network-partition":
            patches.append(self.ops_patch("check the network between JobManager and TaskManagers",
                                          self.say("check the network")))
        if cause == "jobmanager-unresponsive":
            patches += self._jobmanager_heap(incident)
        if cause == "rpc-address-mismatch":
            patches.append(self.ops_patch("make the RPC addresses agree", self.say("make the RPC addresses agree")))
        if cause == "tm-log-missing":
            patches.append(self.ops_patch(
                "collect the TaskManager's log", self.say("collect the TaskManager's log"),
                snippet="kubectl logs <taskmanager pod> --previous | tail -100"))
        return patches

    def _jobmanager_heap(self, incident: Incident):
        conf = incident.config.as_flat_dict()
        try:
            current = derive_jobmanager_memory(conf, incident.version_tuple).process
        except (MemoryConfigError, ValueError, TypeError):
            current = incident.config.get_bytes("jobmanager.memory.process.size")
        if not current:
            return []
        proposed = int(current * 1.5) // (1 << 20) * (1 << 20)
        return [self.flink_patch(incident, "jobmanager.memory.process.size", format_size(proposed),
                                 self.say("bigger jobmanager"))]

    def _cause(self, incident: Incident, inv: Inventory, ctx: LossContext, together: list,
               timeout_ms: int) -> tuple[str, str]:
        """The cause and one sentence of the evidence behind it."""
        near = [ev for ev in incident.events if _ADDRESS_MISMATCH.search(ev.text)]
        if near:
            return "rpc-address-mismatch", self.say("quarantined", message=near[0].message[:160])
        if ctx.memory or ctx.crash:
            return "process-died", self.say("memory trouble")
        if ctx.gc_pauses:
            return "gc-pause-or-freeze", self.say("gc pause", pause=ctx.longest_gc_s)
        silence = ctx.silence_s()
        timeout_s = timeout_ms / 1000
        if ctx.alive_after and ctx.tm_side_timeouts and (silence or 0) >= 0.8 * timeout_s:
            return "gc-pause-or-freeze", self.say("frozen", silence=silence, at=ctx.tm_side_timeouts[0].ts)
        registered = len([t for t in inv.taskmanagers.values() if t.registered or t.started])
        if len(together) >= 2 and len(together) >= registered:
            jm_gap = _jobmanager_silence(incident, ctx.loss.ts)
            if jm_gap is not None and jm_gap >= 0.8 * timeout_s:
                return "jobmanager-unresponsive", self.say("jobmanager silent", count=len(together), gap=jm_gap)
        if ctx.alive_after and ctx.tm_side_timeouts:
            # Both sides timed out while the TaskManager kept logging: a JobManager whose own log is silent across
            # the timeout was the one that stalled (it reports the loss only when it runs again).
            jm_gap = _jobmanager_stall(incident, ctx.loss.ts)
            if jm_gap is not None and jm_gap >= 0.8 * timeout_s:
                return "jobmanager-unresponsive", self.say("jobmanager stalled", gap=jm_gap)
        if ctx.alive_after or len(together) >= 2:
            return "network-partition", (self.say("log goes on") if ctx.alive_after else
                                         self.say("timed out together", count=len(together)))
        if ctx.has_own_log:
            gap = seconds_between(ctx.last_own.ts, ctx.loss.ts) if ctx.last_own else None
            return "process-died", self.say("log ends", before=self.say("before timeout", gap=gap)
                                            if gap is not None else "")
        return "tm-log-missing", self.say("add the log")

    def _evidence(self, ctx: LossContext, failures: list[Event], rpc: list[Event], incident: Incident):
        evidence, notes, add = evidence_trail()

        reported = next((e for e in ctx.loss.events if HEARTBEAT_TIMEOUT.search(e.text)), ctx.loss.events[0])
        add(reported, self.say("gave up note"))
        if rpc:
            add(rpc[0], self.say("rpc note"))
        for ev, secs in ctx.gc_pauses[:1]:
            add(ev, self.say("gc note", pause=secs))
        if ctx.last_own is not None and ctx.has_own_log:
            add(ctx.last_own, self.say("last line note"))
        for ev in ctx.memory[:1]:
            add(ev, self.say("memory note"))
        if ctx.tm_side_timeouts:
            add(ctx.tm_side_timeouts[0], self.say("resumed note"))
        elif ctx.tm_side_disconnects:
            add(ctx.tm_side_disconnects[0], self.say("disconnected note"))
        for ev in incident.events:
            if _ADDRESS_MISMATCH.search(ev.text):
                add(ev, self.say("address note"))
                break
        if failures:
            add(failures[0], self.say("failure note"))
        return evidence, notes


def _jobmanager_silence(incident: Incident, ts: str | None) -> float | None:
    """Seconds between the JobManager's last kept line before ``ts`` and the line before that gap ended."""
    jm = [ev for ev in incident.events if ev.role == "jobmanager" and ev.ts and ts and ev.ts < ts
          and not HEARTBEAT_TIMEOUT.search(ev.text)]
    return seconds_between(jm[-1].ts, ts) if jm else None


def _jobmanager_stall(incident: Incident, ts: str | None) -> float | None:
    """How long the JobManager's log was silent before it resumed right at ``ts``: a stalled JobManager writes
    nothing, and when it runs again its overdue timers fire at once (a checkpoint trigger, the heartbeat timeouts).
    None when its log does not resume within :data:`RESUME_S` of ``ts`` (a quiet JobManager, not a stalled one)."""
    jm = [ev.ts for ev in incident.events if ev.role == "jobmanager" and ev.ts and ts and ev.ts <= ts
          and not HEARTBEAT_TIMEOUT.search(ev.text)]
    resumed = [t for t in jm if (seconds_between(t, ts) or 0) <= RESUME_S]
    before = [t for t in jm if (seconds_between(t, ts) or 0) > RESUME_S]
    if not resumed or not before:
        return None
    return seconds_between(before[-1], resumed[0])


# A stalled JobManager's first lines after it runs again come within this many seconds of the timeouts it reports.
RESUME_S = 2


def _rpc_timeouts(incident: Incident, tm, ts: str | None) -> list[Event]:
    """RPC calls to this TaskManager that timed out before its heartbeat did (it had stopped answering)."""
    port = tm.tm_id.split(":")[1].split("-")[0] if re.match(r"^[\w.\-]+:\d+-", tm.tm_id) else None
    out = []
    for ev in incident.events:
        if ts and ev.ts and ev.ts >= ts:
            break
        m = _RPC_TIMEOUT.search(ev.text)
        if m and port and f":{port}/" in ev.text:
            out.append(ev)
    return out
