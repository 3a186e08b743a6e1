"""RPC calls between Flink's components timed out (``AskTimeoutException``, "Invocation of … timed out") or were
dropped for their size (``OversizedPayloadException``, "The rpc invocation size … exceeds the maximum akka framesize").

Causes told apart: a message over the RPC frame size (the RPC system drops it, silently on the sender's side, and the
call times out); a JobManager that stopped answering (its log silent across the timeout, or long GC pauses); a
recipient that was unreachable (association failures, refused connections). Timeouts towards a TaskManager that was
then lost by heartbeat belong to the TaskManager runbooks, not to this one; a CLI savepoint that timed out while the
JobManager had taken it up (or without the JobManager's log to show a stall) is the client's own timeout, judged by
savepoint-trigger-failure.
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence import cluster, savepoints
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording
from flink_runbooks.parse.timestamps import seconds_between
from flink_runbooks.vocabulary.units import format_size, parse_duration_ms, parse_memory_size

SLUG = "rpc-timeout"
OVERSIZED = re.compile(
    r"Discarding oversized payload sent to Actor\[(?P<recipient>[^\]#]+)[^\]]*\]: max allowed size (?P<max>\d+) bytes, "
    r"actual size of encoded class (?P<cls>[\w.$]+) was (?P<size>\d+) bytes")
INVOCATION_TOO_BIG = re.compile(r"The rpc invocation size (?P<size>\d+) exceeds the maximum (?P<system>akka|pekko) framesize")
RESULT_TOO_BIG = re.compile(r"(?P<method>\w+)'s result size (?P<size>\d+) exceeds the maximum size (?P<max>\d+)")
INVOCATION_TIMEOUT = re.compile(
    r"Invocation of \[(?:Remote|Local)?\w*Invocation\((?P<call>[\w$]+\.[\w$]+)\((?P<args>[^)]*)\)\)\] at recipient "
    r"\[(?P<recipient>[^\]]+)\] timed out")
ASK_TIMEOUT = re.compile(r"Ask timed out on \[Actor\[(?P<recipient>[^\]#]+)[^\]]*\]\] after \[(?P<ms>\d+) ms\]")
NOT_RESPONDING = re.compile(r"(?P<who>TaskManager|JobManager|ResourceManager) \((?P<tm>[^)]*\)?)\) not responding after "
                            r"a rpcTimeout of (?P<timeout>\S+)")
UNREACHABLE = re.compile(r"Could not send message \[(?P<msg>.*?)\] from sender \[.*?\] to recipient "
                         r"\[(?:Actor\[)?(?P<recipient>[^\]#]+).*?, because the recipient is unreachable")
CLIENT_SAVEPOINT = re.compile(r"(?:Failed to trigger a savepoint for the job|Triggering a savepoint for the job) "
                              r"(?P<job>[0-9a-f]{32})")
ASSOCIATION = re.compile(r"Association with remote system \[(?P<remote>[^\]]+)\] has failed|"
                         r"has quarantined this system|Address is now gated|Connection refused|Connection reset")
_TIMEOUT = re.compile(r"Invocation of \[\w*Invocation\(.*\] timed out|Ask timed out on \[Actor\[|"
                      r"not responding after a rpcTimeout|AskTimeoutException|RpcTimeoutException")
_JM_ENDPOINTS = re.compile(r"/user/rpc/(?:jobmanager|dispatcher|resourcemanager)")
_JM_HEARTBEAT_LOST = re.compile(r"The heartbeat of JobManager with id \S+ timed out")
_FRAMESIZE = "pekko.framesize"
_ASK = "pekko.ask.timeout"
_GRACE_S = 3  # a silence must cover the timeout's moment within this margin


class RpcTimeout(Detector):
    slug = SLUG
    title = "RPC call timed out or its message was too large"
    category = "coordination"
    meaning = ("A call between the JobManager, the TaskManagers and the client got no answer within the RPC timeout "
               "(akka/pekko.ask.timeout, the client's timeout): the message was over the frame size and dropped, the "
               "recipient was stalled, or it could not be reached.")
    versions = "1.5 – 2.x (akka.* keys up to 1.17, pekko.* since 1.18; the akka.* spellings stay deprecated aliases)"
    exception_classes = ("org.apache.pekko.pattern.AskTimeoutException", "akka.pattern.AskTimeoutException",
                         "org.apache.pekko.remote.OversizedPayloadException", "akka.remote.OversizedPayloadException",
                         "org.apache.flink.runtime.rpc.exceptions.RecipientUnreachableException",
                         "org.apache.flink.runtime.rpc.exceptions.RpcTimeoutException")
    config_keys = (
        "pekko.framesize",
        "pekko.ask.timeout",
        "blob.offload.minsize",
        "client.timeout",
        "jobmanager.memory.process.size",
        "heartbeat.timeout",
    )
    signatures = (
        r"Discarding oversized payload sent to",
        r"The rpc invocation size \d+ exceeds the maximum",
        r"result size \d+ exceeds the maximum size",
        r"Invocation of \[\w*Invocation\(",
        r"Ask timed out on \[Actor\[",
        r"not responding after a rpcTimeout",
        r"because the recipient is unreachable",
        r"Failed to trigger a savepoint for the job|Triggering a savepoint for the job",
        r"AskTimeoutException|RpcTimeoutException|OversizedPayloadException",
        r"Association with remote system .* has failed",
        r"has quarantined this system",
        r"The heartbeat of JobManager with id \S+ timed out",
    ) + cluster.GC_SIGNATURES
    wordings = (
        Wording(SLUG, r"Discarding oversized payload sent to Actor\[\S+\]: max allowed size \d+ bytes",
                "1.5 – 2.x", "Akka / Pekko remoting EndpointWriter (OversizedPayloadException, akka.* up to 1.17, org.apache.pekko.* since 1.18)",
                "org.apache.pekko.remote.OversizedPayloadException: Discarding oversized payload sent to "
                "Actor[pekko.tcp://flink@localhost:33771/user/rpc/taskmanager_0#346176678]: max allowed size 102400 "
                "bytes, actual size of encoded class org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation was "
                "430862 bytes."),
        Wording(SLUG, r"The rpc invocation size \d+ exceeds the maximum akka framesize",
                "1.5 – 1.14", "AkkaInvocationHandler#createRpcInvocationMessage (the sender's own size check: in the 1.14.6 jar, gone from 1.17.2's)",
                "java.io.IOException: The rpc invocation size 12582912 exceeds the maximum akka framesize."),
        Wording(SLUG, r"Invocation of \[\w*Invocation\([\w$]+\.[\w$]+\([^)]*\)\)\] at recipient \[\S+\] timed out",
                "1.14 – 2.x", "AkkaInvocationHandler / PekkoInvocationHandler#resolveTimeoutException (TimeoutException)",
                "java.util.concurrent.TimeoutException: Invocation of [RemoteRpcInvocation(TaskExecutorGateway."
                "submitTask(TaskDeploymentDescriptor, JobMasterId, Duration))] at recipient "
                "[pekko.tcp://flink@localhost:33771/user/rpc/taskmanager_0] timed out. This is usually caused by: "
                "1) Pekko failed sending the message silently, due to problems like oversized payload or "
                "serialization failures."),
        Wording(SLUG, r"not responding after a rpcTimeout of \S+",
                "1.13 – 2.x", "Execution#submitTask failure (\"Cannot deploy task … - TaskManager (…) not responding after a rpcTimeout of …\")",
                "java.lang.Exception: Cannot deploy task Source: Sequence Source -> enrich-with-lookup-table (1/1) "
                "(58d9587ea2d5cf166b4f87eb4c420db0_cbc357ccb763df2852fee8c4fc7d55f2_0_0) - TaskManager "
                "(localhost:33771-d964fc @ localhost (dataPort=42733)) not responding after a rpcTimeout of PT10S"),
        Wording(SLUG, r"Ask timed out on \[Actor\[(?:akka|pekko)\.tcp://flink@\S+\]\] after \[\d+ ms\]",
                "1.5 – 2.x", "Akka / Pekko ask pattern (AskTimeoutException)",
                "akka.pattern.AskTimeoutException: Ask timed out on [Actor[akka.tcp://flink@localhost:41701/user/rpc/"
                "taskmanager_0#2036758154]] after [10000 ms]. Message of type "
                "[org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation]."),
    )
    root_causes = (
        RootCause("payload-over-framesize", "An RPC message was larger than the RPC frame size: the RPC system "
                  "dropped it and the call timed out (or the sender refused to send it).",
                  "OversizedPayloadException 'Discarding oversized payload … max allowed size N bytes, actual size … "
                  "was M bytes', or 'The rpc invocation size M exceeds the maximum akka framesize'.",
                  patches=("flink:pekko.framesize", "flink:blob.offload.minsize", "code:shrink the RPC payload"),
                  would_change="No oversized-payload line near the timeout (then the recipient was slow or "
                               "unreachable)."),
        RootCause("jobmanager-unresponsive", "The JobManager stopped answering for longer than the timeout: a long "
                  "GC pause, CPU starvation or a frozen process.",
                  "Calls to the JobManager (or a client waiting on it) time out while the JobManager's own log is "
                  "silent across that moment, or logs long GC pauses.",
                  patches=("ops:find why the JobManager stalled", "flink:jobmanager.memory.process.size",
                           "flink:pekko.ask.timeout", "flink:client.timeout"),
                  would_change="A JobManager log that runs on through the timeout without pauses (then the call "
                               "itself was slow or lost on the network)."),
        RootCause("recipient-unreachable", "The recipient could not be reached: the network between the processes "
                  "failed, or the recipient had gone.",
                  "RecipientUnreachableException, or association failures / refused connections to the recipient "
                  "around the timeout.",
                  patches=("ops:check the recipient and the network",)),
        RootCause("undetermined", "RPC calls timed out, but the logs do not show whether the message was too large, "
                  "the recipient stalled or the network failed.",
                  "A timeout without an oversized payload, a silent recipient or connection errors in these logs.",
                  patches=("ops:collect the recipient's log and GC log",),
                  next_evidence="the recipient's log for the minute of the timeout (the JobManager's, or the "
                                "TaskManager's named in the recipient address), its GC log (-Xlog:gc*), and the RPC "
                                "that timed out (the 'Invocation of [...]' line with akka/pekko.ask.callstack: true)."),
    )

    templates = {
        "payload-over-framesize": "An RPC message of {size} ({label}) exceeded the RPC frame size of {limit} and was "
                                  "dropped by the RPC system{timed_out}. {advice}",
        "timed out": "; the call then timed out ({timeouts} timeout(s) logged)",
        "message note": "a {size} message against a frame size of {limit}",
        "dropped note": "the call whose message was dropped timed out",
        "framesize reason": "Room for the largest message seen ({size}) with a margin; every JobManager and "
                            "TaskManager must use the same value. This lets the message through: shrinking it (below) "
                            "is the lasting fix.",
        "offload reason": "Task deployment information above this size is shipped through the BLOB server instead of "
                          "the RPC message; below the frame size, large job and task information no longer travels in "
                          "the message.",
        "deployment label": "a task deployment (TaskExecutorGateway.submitTask)",
        "deployment advice": "The task's deployment carries the job's serialized functions: a large object captured "
                             "in a function (a lookup table, a model, a big collection) makes it large. Load such "
                             "data in open() from a file or broadcast state instead of capturing it.",
        "checkpoint label": "a checkpoint acknowledgement ({call})",
        "checkpoint advice": "State handles inlined in the acknowledgement make it large: lower the inline state "
                             "threshold (execution.checkpointing.data-inline-threshold / "
                             "state.storage.fs.memory-threshold) or reduce the number of state handles (operator list "
                             "state, unions).",
        "accumulators label": "task results / accumulators ({call})",
        "accumulators advice": "Accumulators and task results travel in RPC messages: keep accumulators small "
                               "(counters, not collections) and write large results to a sink.",
        "other label": "an RPC message",
        "other advice": "Find which call carried the large message (the method in 'Invocation of [...]') and shrink "
                        "what it carries; a job graph too large for the frame size needs fewer or smaller operators.",
        "first note": "the first call that got no answer",
        "gc note": "a GC pause of {seconds:.1f} s in the JobManager",
        "heartbeat note": "a TaskManager stopped hearing the JobManager's heartbeat requests as well",
        "resumes note": "the JobManager's log resumes here",
        "jobmanager-unresponsive": "Calls to the JobManager got no answer ({calls} "
                                   "timeout(s){client}){silent}{gc}{heartbeat}: the JobManager itself was stalled (GC "
                                   "pause, CPU starvation or a frozen process), not the call.",
        "client": ", the client's savepoint request among them",
        "silent": " while its log was silent for {silence:.0f} s around the timeout",
        "gc": "; it logged GC pauses of up to {seconds:.1f} s",
        "heartbeat": "; the TaskManagers stopped hearing its heartbeat requests too",
        "find the stall": "Look at the JobManager's GC log and CPU at that time (-Xlog:gc*, container CPU throttling, "
                          "a host pause): large job graphs, many accumulators or a very large checkpoint metadata "
                          "keep its heap busy.",
        "heap reason": "More heap shortens and spaces out the JobManager's GC pauses; check its GC log first.",
        "ask timeout reason": "A complement while the stall is investigated: calls outlive a pause of this length "
                              "instead of failing; it does not make the JobManager answer sooner.",
        "client timeout reason": "The CLI gave up waiting; a savepoint of large state may take longer than the "
                                 "client's timeout.",
        "unreachable note": "the recipient could not be reached",
        "recipient-unreachable": "The RPC recipient could not be reached ({signs}): the process had gone or the "
                                 "network between them failed; the timeouts follow from it.",
        "check the recipient": "Check whether the recipient process was alive at that time (its log, container "
                               "restarts) and the network between the two hosts (DNS, firewall, packet loss); longer "
                               "timeouts do not help an unreachable recipient.",
        "undetermined": "RPC calls timed out, but these logs show neither an oversized message, nor a stalled "
                        "recipient, nor connection errors.",
        "collect the logs": "The recipient's log and GC log for the minute of the timeout tell a stall from a lost "
                            "message; akka/pekko.ask.callstack: true names the calling site.",
        "excerpt": " Unknown from this excerpt: the JobManager's log around the timeout.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        oversized = [(ev, m) for ev in incident.events for m in [OVERSIZED.search(ev.text) or
                                                                 INVOCATION_TOO_BIG.search(ev.text) or
                                                                 RESULT_TOO_BIG.search(ev.text)] if m]
        timeouts = [(ev, m) for ev in incident.events for m in [_TIMEOUT.search(ev.text)] if m]
        unreachable = [(ev, m) for ev in incident.events for m in [UNREACHABLE.search(ev.text)] if m]
        client = [ev for ev in incident.events if CLIENT_SAVEPOINT.search(ev.text)
                  and any(c.simple_name == "TimeoutException" for c in ev.chain)]
        client = _client_waits_on_a_stalled_jobmanager(incident, client)
        if oversized:
            return [self._oversized(incident, oversized, timeouts)]
        lost = _lost_taskmanagers(incident)
        timeouts = [(ev, m) for ev, m in timeouts if not _towards(ev.text, lost)]
        unreachable = [(ev, m) for ev, m in unreachable if not _towards(ev.text, lost)]
        if not (timeouts or unreachable or client):
            return []
        return [self._stalled_or_unreachable(incident, timeouts, unreachable, client)]

    # -- payload over the frame size ----------------------------------------------------------------------------

    def _oversized(self, incident: Incident, oversized, timeouts) -> Finding:
        ev, m = oversized[0]
        size = int(m["size"])
        limit = int(m["max"]) if "max" in m.groupdict() and m["max"] else _configured_framesize(incident)
        what = self._payload_of(ev, timeouts)
        events = [ev] + [t for t, _ in timeouts[:2] if t is not ev]
        notes = {0: self.say("message note", size=_size(size), limit=_size(limit) if limit else "unknown")}
        for i in range(1, len(events)):
            notes[i] = self.say("dropped note")
        proposed = _framesize_for(size)
        patches = [self.flink_patch(
            incident, _FRAMESIZE, f"{proposed}b",
            self.say("framesize reason", size=_size(size)))]
        if what["kind"] == "deployment":
            patches.append(self.flink_patch(
                incident, "blob.offload.minsize", str(max(1024, min(limit or 1 << 20, 1 << 20) // 2)),
                self.say("offload reason")))
        patches.append(self.code_patch("shrink the RPC payload", what["snippet"], what["advice"]))
        summary = self.say("payload-over-framesize", size=_size(size), label=what["label"],
                           limit=_size(limit) if limit else "the configured maximum",
                           timed_out=self.say("timed out", timeouts=len(timeouts)) if timeouts else "",
                           advice=what["advice"])
        details = {"message_size": _size(size), "frame_size": _size(limit) if limit else "unknown",
                   "payload": what["label"], "oversized_messages": len(oversized), "rpc_timeouts": len(timeouts)}
        confidence = 0.9 if not is_excerpt(incident) else 0.75
        return self.finding("payload-over-framesize", summary, events, notes=notes, confidence=confidence,
                            patches=patches, details=details)

    def _payload_of(self, ev: Event, timeouts) -> dict:
        """What was in the oversized message, from the call that timed out with it."""
        call = next((_call_of(t) for t, _ in timeouts if _call_of(t)), None) or _call_of(ev) or ""
        if "submitTask" in call:
            return {"kind": "deployment", "label": self.say("deployment label"),
                    "advice": self.say("deployment advice"),
                    "snippet": ("// instead of capturing a large table in the function's fields\n"
                                "@Override public void open(OpenContext ctx) { table = loadTable(path); }")}
        if "acknowledgeCheckpoint" in call or "declineCheckpoint" in call:
            return {"kind": "checkpoint", "label": self.say("checkpoint label", call=call),
                    "advice": self.say("checkpoint advice"),
                    "snippet": "execution.checkpointing.data-inline-threshold: 20kb"}
        if "updateTaskExecutionState" in call or "accumulat" in call.lower():
            return {"kind": "accumulators", "label": self.say("accumulators label", call=call),
                    "advice": self.say("accumulators advice"),
                    "snippet": "// a counter, not a list of records\n"
                               "getRuntimeContext().getLongCounter(\"rows\").add(1);"}
        return {"kind": "other", "label": call or self.say("other label"), "advice": self.say("other advice"),
                "snippet": "grep -n -E 'Invocation of|oversized payload|exceeds the maximum' *.log"}

    # -- stalled JobManager, unreachable recipient, or undetermined --------------------------------------------------

    def _stalled_or_unreachable(self, incident: Incident, timeouts, unreachable, client) -> Finding:
        first = min([ev for ev, _ in timeouts] + [ev for ev, _ in unreachable] + client,
                    key=lambda e: e.ts or "~")
        events: list[Event] = [first]
        notes = {0: self.say("first note")}
        towards_jm = [ev for ev, _ in timeouts if _JM_ENDPOINTS.search(ev.text)] + client
        calls = len({ev.ts for ev, _ in timeouts if _JM_ENDPOINTS.search(ev.text)}) + len(
            {CLIENT_SAVEPOINT.search(ev.text)["job"] for ev in client})
        gc = [ev for ev in incident.events if ev.role == "jobmanager" and cluster.GC_PAUSE.search(ev.text)
              and _gc_seconds(ev) >= 1]
        silence = max((savepoints.jobmanager_silence(incident, ev.ts) or 0 for ev in towards_jm), default=0)
        timeout_s = (parse_duration_ms(incident.config.get(_ASK) or incident.config.get("akka.ask.timeout")) or 10000) / 1000
        client_s = (parse_duration_ms(incident.config.get("client.timeout")) or 60000) / 1000
        details = {"rpc_timeouts": len(timeouts), "unreachable": len(unreachable), "client_timeouts": len(client),
                   "calls": sorted({_call_of(ev) for ev, _ in timeouts if _call_of(ev)})[:6] or "not named"}
        associations = [ev for ev in incident.events if ASSOCIATION.search(ev.text) and _shortly_before(ev, first)]
        # The TaskManagers stopped hearing the JobManager's heartbeat requests too: it answered nobody.
        jm_heartbeat = [ev for ev in incident.events if _JM_HEARTBEAT_LOST.search(ev.message)]
        if towards_jm and (gc or silence >= min(timeout_s, client_s) - _GRACE_S or jm_heartbeat):
            cause = "jobmanager-unresponsive"
            if gc:
                events.append(gc[0])
                notes[len(events) - 1] = self.say("gc note", seconds=_gc_seconds(gc[0]))
            details["jobmanager_silence"] = f"{silence:.0f} s" if silence else "not measurable (no timestamps)"
            if jm_heartbeat:
                events.append(jm_heartbeat[0])
                notes[len(events) - 1] = self.say("heartbeat note")
            summary = self.say(
                cause, calls=calls, client=self.say("client") if client else "",
                silent=self.say("silent", silence=silence) if silence else "",
                gc=self.say("gc", seconds=max(_gc_seconds(e) for e in gc)) if gc else "",
                heartbeat=self.say("heartbeat") if jm_heartbeat else "")
            after = _first_jm_line_after(incident, first.ts)
            if after is not None:
                events.append(after)
                notes[len(events) - 1] = self.say("resumes note")
            patches = self._stalled_patches(incident, timeout_s, silence, bool(client))
        elif unreachable or associations:
            cause = "recipient-unreachable"
            ev = (unreachable[0][0] if unreachable else associations[-1])
            if ev is not first:
                events.append(ev)
            notes[len(events) - 1] = self.say("unreachable note")
            summary = self.say(cause, signs="RecipientUnreachableException" if unreachable
                               else "association failures / refused connections")
            patches = [self.ops_patch(
                "check the recipient and the network", self.say("check the recipient"),
                snippet="grep -n -E 'Association with remote system|quarantined|Connection refused' *.log")]
        else:
            cause = "undetermined"
            summary = self.say(cause)
            patches = [self.ops_patch(
                "collect the recipient's log and GC log", self.say("collect the logs"),
                snippet="grep -n -E 'Invocation of|Ask timed out|OversizedPayload' *.log")]
        confidence = {"jobmanager-unresponsive": 0.8 if silence or gc else 0.75, "recipient-unreachable": 0.7,
                      "undetermined": 0.4}[cause]
        if is_excerpt(incident):
            confidence = min(confidence, 0.5)
            summary += self.say("excerpt")
        return self.finding(cause, summary, events, notes=notes, confidence=confidence, patches=patches,
                            details=details)

    def _stalled_patches(self, incident: Incident, timeout_s: float, silence: float, client: bool):
        patches = [self.ops_patch(
            "find why the JobManager stalled",
            self.say("find the stall"),
            snippet="jcmd <jobmanager pid> GC.heap_info; kubectl top pod -l component=jobmanager")]
        heap = incident.config.get("jobmanager.memory.process.size")
        if heap and (parse_memory_size(heap) or 0) < 4 << 30:
            patches.append(self.flink_patch(
                incident, "jobmanager.memory.process.size", format_size(max(2 * (parse_memory_size(heap) or 0), 2 << 30)),
                self.say("heap reason")))
        if silence and silence > timeout_s:
            patches.append(self.flink_patch(
                incident, _ASK, f"{int(min(-(-max(2 * timeout_s, silence * 1.5) // 10) * 10, 120))} s",
                self.say("ask timeout reason")))
        if client:
            patches.append(self.flink_patch(
                incident, "client.timeout", "5 min",
                self.say("client timeout reason")))
        return patches


def _client_waits_on_a_stalled_jobmanager(incident: Incident, client: list[Event]) -> list[Event]:
    """The CLI's savepoint timeouts that may be the JobManager's: its log is here and it had not taken the request
    up when the client gave up. One it had taken up is the client's own timeout (savepoint-trigger-failure), and
    without the JobManager's log nothing says it stalled."""
    if not client or not any(ev.role == "jobmanager" for ev in incident.events):
        return []
    answered = {f.job for f in savepoints.client_failures(incident) if savepoints.started_while_waiting(incident, f)}
    return [ev for ev in client if CLIENT_SAVEPOINT.search(ev.text)["job"] not in answered]


def _size(num_bytes: int) -> str:
    """``421877`` → ``412 KiB``, ``12582912`` → ``12.0 MiB`` (frame sizes are set in bytes, read in KiB/MiB)."""
    if num_bytes >= 1 << 20:
        return f"{num_bytes / (1 << 20):.1f} MiB"
    return f"{num_bytes / 1024:.0f} KiB" if num_bytes >= 1024 else f"{num_bytes} bytes"


def _configured_framesize(incident: Incident) -> int | None:
    value = incident.config.get(_FRAMESIZE) or incident.config.get("akka.framesize")
    return parse_memory_size(value) if value else 10485760


def _framesize_for(size: int) -> int:
    """The message size with a quarter of margin, rounded up to whole MiB (never below the 10 MiB default)."""
    mib = 1 << 20
    return max(10 * mib, -(-int(size * 1.25) // mib) * mib)


def _call_of(ev: Event) -> str | None:
    m = INVOCATION_TIMEOUT.search(ev.text)
    return m["call"] if m else None


def _gc_seconds(ev: Event) -> float:
    return cluster.gc_pause_seconds(ev.text)


def _lost_taskmanagers(incident: Incident) -> set[str]:
    """host:port of TaskManagers the JobManager declared dead by heartbeat or reachability."""
    out = set()
    for rx in (cluster.HEARTBEAT_TIMEOUT, cluster.UNREACHABLE):
        for _event, m in incident.find(rx):
            hp = re.match(r"([\w.\-]+:\d+)", m["tm"] or "")
            if hp:
                out.add(hp.group(1))
    return out


def _towards(text: str, lost: set[str]) -> bool:
    return any(f"@{hp}/" in text or f"({hp}-" in text for hp in lost)


def _shortly_before(ev: Event, first: Event) -> bool:
    """Within the two minutes before the first timeout (connection errors long before it are another story)."""
    gap = seconds_between(ev.ts, first.ts)
    return gap is not None and 0 <= gap <= 120 or (gap is None and not ev.ts and not first.ts)


def _first_jm_line_after(incident: Incident, ts: str | None) -> Event | None:
    return next((ev for ev in savepoints.jobmanager_lines(incident) if ts and ev.ts > ts), None)
