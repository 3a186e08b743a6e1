"""A TaskManager disappeared while the job ran: which one, when, and why it went away."""
from __future__ import annotations

import re

from flink_runbooks.evidence import cluster
from flink_runbooks.evidence.cluster import LOSS_CAUSE, Inventory, Loss, LossContext, TaskManager
from flink_runbooks.evidence.memory import MemoryConfigError, grow_pool
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.units import format_duration
from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.parse.timestamps import seconds_between
from flink_runbooks.evidence.deployment import deployment
from flink_runbooks.vocabulary.lifecycle import GLOBAL_FAILURE, JOB_RUNNING, RECOVERY_SUPPRESSED, TASK_FAILED
from flink_runbooks.vocabulary.wordings import Wording

_FAILURE_RECORD = re.compile(rf"{TASK_FAILED.pattern}|switched from state \w+ to (?:FAILING|RESTARTING|FAILED)|"
                             rf"{GLOBAL_FAILURE.pattern}|reached terminal state FAILED")
_RELATED = {"killed-for-memory": "container-memory-exceeded / oom-java-heap / oom-direct-memory / oom-metaspace",
            "tm-unresponsive": "tm-heartbeat-timeout"}


class TaskManagerLost(Detector):
    slug = "taskmanager-lost"
    title = "TaskManager lost while the job was running"
    category = "cluster"
    meaning = ("A TaskManager process went away (killed, crashed, its node lost, cut off, or stopped) while it ran "
               "tasks of the job, so the job failed over; peers report it as 'Connection unexpectedly closed by "
               "remote task manager'.")
    exception_classes = (
        "org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException",
        "org.apache.flink.runtime.jobmaster.JobMasterException",
        "org.apache.flink.util.FlinkExpectedException",
    )
    versions = "1.5 – 2.x (the peer message names the lost TaskManager's resource id since 1.15/1.16)"
    layer = 1
    collect_next = "the log of the lost TaskManager and the JobManager's view of it"
    config_keys = (
        "restart-strategy.type",
        "restart-strategy.fixed-delay.attempts",
        "restart-strategy.fixed-delay.delay",
        "heartbeat.timeout",
        "taskmanager.memory.process.size",
        "taskmanager.memory.jvm-overhead.min",
    )
    signatures = cluster.LOSS_SIGNATURES + (
        r"Using restart back ?off time strategy",
        r"The TaskExecutor is shutting down",
        r"OOMKilled|exitCode=13[79]|[Ee]xit [Cc]ode:? ?13[79]",
        r"beyond (?:the )?'?PHYSICAL'? memory limit|running beyond physical memory limits",
        r"Container released on a \*lost\* node",
    )
    root_causes = (
        RootCause("killed-for-memory", "The TaskManager was killed for memory: its container exceeded its limit or "
                  "the JVM ran out of memory. The memory runbook is the root cause; this loss is its consequence.",
                  "OOMKilled / exit code 137 / 'beyond physical memory limits' / OutOfMemoryError for that "
                  "TaskManager before it was lost.",
                  patches=("flink:restart-strategy.exponential-delay.backoff-multiplier",
                           "flink:restart-strategy.exponential-delay.initial-backoff",
                           "flink:restart-strategy.exponential-delay.max-backoff",
                           "flink:restart-strategy.exponential-delay.reset-backoff-threshold",
                           "flink:restart-strategy.type", "ops:fix the memory cause first", "flink:execution.checkpointing.prefer-checkpoint-for-recovery")),
        RootCause("process-killed", "The TaskManager process was killed or crashed (kill -9, the kernel OOM killer, "
                  "a container kill, a JVM crash).",
                  "Its own log just ends before the loss: no 'RECEIVED SIGNAL' / 'Stopping TaskExecutor' line and "
                  "nothing after; or the cluster manager reports exit code 137/143.",
                  patches=("flink:restart-strategy.exponential-delay.backoff-multiplier",
                           "flink:restart-strategy.exponential-delay.initial-backoff",
                           "flink:restart-strategy.exponential-delay.max-backoff",
                           "flink:restart-strategy.exponential-delay.reset-backoff-threshold",
                           "flink:restart-strategy.fixed-delay.attempts", "flink:restart-strategy.fixed-delay.delay",
                           "flink:restart-strategy.type", "flink:taskmanager.memory.jvm-overhead.min",
                           "flink:taskmanager.memory.process.size", "ops:find who killed the TaskManager", "flink:taskmanager.memory.*", "flink:execution.checkpointing.prefer-checkpoint-for-recovery")),
        RootCause("node-lost", "The machine, VM or pod host went away with every TaskManager on it.",
                  "All TaskManagers of one host lost at the same moment, or 'lost node' / eviction / preemption "
                  "diagnostics from YARN or Kubernetes.",
                  patches=("flink:restart-strategy.exponential-delay.backoff-multiplier",
                           "flink:restart-strategy.exponential-delay.initial-backoff",
                           "flink:restart-strategy.exponential-delay.max-backoff",
                           "flink:restart-strategy.exponential-delay.reset-backoff-threshold",
                           "flink:restart-strategy.type", "ops:check the node", "flink:execution.checkpointing.prefer-checkpoint-for-recovery")),
        RootCause("network-partition", "The TaskManager kept running but the JobManager and its peers could not "
                  "reach it.",
                  "Its own log continues after the loss and shows connection failures to the JobManager / "
                  "ResourceManager, without a silent gap.",
                  patches=("flink:heartbeat.timeout", "flink:restart-strategy.exponential-delay.backoff-multiplier",
                           "flink:restart-strategy.exponential-delay.initial-backoff",
                           "flink:restart-strategy.exponential-delay.max-backoff",
                           "flink:restart-strategy.exponential-delay.reset-backoff-threshold",
                           "flink:restart-strategy.type", "flink:execution.checkpointing.prefer-checkpoint-for-recovery")),
        RootCause("tm-unresponsive", "The TaskManager was alive but stopped answering (long GC pause, frozen or "
                  "starved JVM) and was declared dead; see tm-heartbeat-timeout.",
                  "Its own log is silent across the loss, then reports its own heartbeat timeouts to the "
                  "JobManager/ResourceManager when it resumes.",
                  patches=("flink:heartbeat.timeout", "flink:restart-strategy.exponential-delay.backoff-multiplier",
                           "flink:restart-strategy.exponential-delay.initial-backoff",
                           "flink:restart-strategy.exponential-delay.max-backoff",
                           "flink:restart-strategy.exponential-delay.reset-backoff-threshold",
                           "flink:restart-strategy.type", "flink:execution.checkpointing.prefer-checkpoint-for-recovery")),
        RootCause("stopped-while-running", "The TaskManager was shut down in an orderly way (SIGTERM from a "
                  "scale-down, a node drain, a rolling restart) while it still ran tasks of the job.",
                  "'The TaskExecutor is shutting down' as the task failure cause, 'RECEIVED SIGNAL 15' / "
                  "'Stopping TaskExecutor' in its own log.",
                  patches=("flink:restart-strategy.exponential-delay.backoff-multiplier",
                           "flink:restart-strategy.exponential-delay.initial-backoff",
                           "flink:restart-strategy.exponential-delay.max-backoff",
                           "flink:restart-strategy.exponential-delay.reset-backoff-threshold",
                           "flink:restart-strategy.type", "ops:stop TaskManagers only after draining them", "flink:execution.checkpointing.prefer-checkpoint-for-recovery")),
        RootCause("lost-tm-log-missing", "A TaskManager was lost, but its own log is not among the inputs, so why "
                  "it went away cannot be told.",
                  "Only peers' RemoteTransportException or the JobManager's loss lines are present.",
                  patches=("flink:restart-strategy.exponential-delay.backoff-multiplier",
                           "flink:restart-strategy.exponential-delay.initial-backoff",
                           "flink:restart-strategy.exponential-delay.max-backoff",
                           "flink:restart-strategy.exponential-delay.reset-backoff-threshold",
                           "flink:restart-strategy.type", "ops:collect the lost TaskManager's log", "flink:execution.checkpointing.prefer-checkpoint-for-recovery")),
    )

    wordings = (
        Wording("taskmanager-lost", r"Connection unexpectedly closed by remote task manager '[^']*'\. This might indicate that the remote task manager was lost",
                "1.5 – 2.x", "CreditBasedPartitionRequestClientHandler#channelInactive (RemoteTransportException)",
                "org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException: Connection unexpectedly closed by remote task manager 'worker-3/10.0.3.17:40123'. This might indicate that the remote task manager was lost."),
        Wording("taskmanager-lost", r"TaskManager with id \S+ is no longer reachable",
                "1.14 – 2.x", "JobMaster (JobMasterException)",
                "org.apache.flink.runtime.jobmaster.JobMasterException: TaskManager with id localhost:46347-426023 is no longer reachable."),
    )

    templates = {
        "head": "{who} was lost{when} while running tasks of the job. {verdict}",
        "named": "TaskManager {label}",
        "unnamed": "A TaskManager",
        "log ends": "Its own log ({log}) has no shutdown line and nothing after the loss; the last line kept from it "
                    "is at {last}{before}.",
        "before the loss": ", {seconds:.0f} s before the loss",
        "silent": "Its own log was silent for {seconds:.0f} s across the loss.",
        "peers name it": "Peers name it as '{address}'.",
        "others lost": "{count} other TaskManager(s) were lost around the same time.",
        "outcome": "Outcome: {outcome}.",
        # evidence notes
        "note memory": "memory trouble of the lost TaskManager",
        "note node": "the cluster manager reports the node/pod went away",
        "note loss": "TaskManager {tm} lost ({how})",
        "note orderly": "its own log: an orderly shutdown",
        "note log ends": "its own log ends here: no shutdown line and nothing after",
        "note alive": "its own log after the loss: it was still running",
        "note first failure": "first task failure caused by the loss",
        "note outcome": "the job's outcome",
        # patches
        "memory first": "The loss is a consequence: apply the memory runbook's changes (container-memory-exceeded or "
                        "the oom-* runbook of this incident); restarting more often does not stop the kills.",
        "who killed it": "Its log just ends, so something outside Flink stopped it: the kernel OOM killer, the "
                         "container runtime, an operator, or a JVM crash (hs_err_pid*.log).",
        "kill commands": "# Kubernetes: why did the pod's container stop (OOMKilled, Error, exit code)?\n"
                         "kubectl describe pod <taskmanager pod> | grep -A5 'Last State'\n"
                         "kubectl logs <taskmanager pod> --previous | tail -50\n"
                         "# YARN: the container's diagnostics and log\n"
                         "yarn logs -applicationId <application id> -containerId <container of {tm}>\n"
                         "# bare metal / VM: the kernel OOM killer\n"
                         "dmesg -T | grep -iE 'killed process|out of memory'",
        "check the node": "Every TaskManager of the host went at once: look at the node's events (NotReady, "
                          "preemption, spot reclamation, maintenance) and spread TaskManagers over more nodes.",
        "drain first": "The TaskManager was stopped with tasks on it. For planned scale-downs, take a savepoint and "
                       "rescale (or let the Kubernetes operator / autoscaler do it) instead of killing busy "
                       "TaskManagers; give pods a termination grace period.",
        "longer heartbeat": "The TaskManager was alive but unreachable for a while (current timeout {current}); a "
                            "longer timeout rides out short stalls. Fix the stalls too (tm-heartbeat-timeout).",
        "collect its log": "The reason is in the lost TaskManager's own log (its last lines) and in the cluster "
                           "manager's record of the container/pod; the REST API no longer serves logs of a lost "
                           "TaskManager.",
        "more overhead": "A container killed without an OutOfMemoryError in the JVM usually ran out of native memory "
                         "(threads, glibc arenas, RocksDB): give the JVM overhead 50 % more room.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = _loss_failures(incident)
        if not failures:
            return []
        inv = cluster.inventory(incident)
        tm, loss = _first_lost(inv, failures)
        ctx = cluster.loss_context(incident, tm, loss) if tm else None
        cause = _cause(inv, ctx, failures)
        lost = _lost_list(inv, failures)
        outcome, outcome_event = _outcome(incident, failures[0])
        evidence, notes = self._evidence(ctx, failures, outcome_event)
        noise = cluster.secondary_noise(incident, failures[0].ts, _recovery_ts(incident, failures[0]),
                                        exclude={id(e) for e in evidence})
        details = {
            "lost_taskmanager": tm.tm_id if tm else None,
            "host": tm.host if tm else None,
            "lost_at": loss.ts if loss else failures[0].ts,
            "how_the_jobmanager_learnt": loss.kind if loss else "peer connection closed",
            "own_log": (tm.log_file or "not among the inputs") if tm else "not among the inputs",
            "lost_taskmanagers": lost,
            "failed_tasks_citing_the_loss": len(failures),
            "follow_on_noise": noise["counts"],
            "job_outcome": outcome,
            "restart_strategy": cluster.restart_strategy(incident).describe(),
        }
        if ctx:
            details.update(_ctx_details(ctx))
        if cause in _RELATED:
            details["more_fundamental_runbook"] = _RELATED[cause]
        summary = self._summary(cause, tm, loss, ctx, lost, noise, outcome, failures)
        patches = self._patches(incident, cause, ctx, failures)
        if cluster.prefers_checkpoint_for_recovery(incident):
            summary += " " + cluster.PREFER_CHECKPOINT_WARNING
            patches.append(self.flink_patch(incident, cluster.PREFER_CHECKPOINT_KEY, None,
                                            cluster.PREFER_CHECKPOINT_WARNING))
        return [self.finding(
            cause, summary, evidence, notes=notes,
            confidence={"lost-tm-log-missing": 0.5, "network-partition": 0.6}.get(cause, 0.85),
            patches=patches,
            details=details,
        )]

    # ------------------------------------------------------------------------------------------------------------

    def _evidence(self, ctx: LossContext | None, failures: list[Event], outcome_event: Event | None):
        evidence, notes, add = evidence_trail()

        if ctx:
            for ev in ctx.memory[:2]:
                add(ev, self.say("note memory"))
            for ev in ctx.node[:1]:
                add(ev, self.say("note node"))
            reported = next((e for e in ctx.loss.events if not cluster.PEER_CLOSED.search(e.text)), ctx.loss.events[0])
            add(reported, self.say("note loss", tm=ctx.tm.tm_id, how=ctx.loss.kind))
            if ctx.orderly:
                add(ctx.orderly, self.say("note orderly"))
            elif ctx.has_own_log and not ctx.alive_after:
                add(ctx.last_own, self.say("note log ends"))
            for ev in (ctx.tm_side_timeouts or ctx.tm_side_disconnects)[:1]:
                add(ev, self.say("note alive"))
        add(failures[0], self.say("note first failure"))
        add(outcome_event, self.say("note outcome"))
        return evidence, notes

    def _summary(self, cause: str, tm: TaskManager | None, loss: Loss | None, ctx: LossContext | None,
                 lost: list[dict], noise: dict, outcome: str, failures: list[Event]) -> str:
        who = self.say("named", label=tm.label) if tm else self.say("unnamed")
        facts = []
        if ctx and cause == "process-killed" and ctx.last_own is not None:
            gap = seconds_between(ctx.last_own.ts, ctx.loss.ts)
            facts.append(self.say("log ends", log=ctx.tm.log_file, last=ctx.last_own.ts,
                                  before=self.say("before the loss", seconds=gap) if gap is not None else ""))
        if ctx and cause == "tm-unresponsive" and ctx.silence_s() is not None:
            facts.append(self.say("silent", seconds=ctx.silence_s()))
        if cause == "lost-tm-log-missing":
            addr = cluster.PEER_CLOSED.search(failures[0].text)
            if addr:
                facts.append(self.say("peers name it", address=addr["addr"].strip().lstrip("/")))
        others = len({d["id"] for d in lost} - ({tm.tm_id} if tm else set()))
        if others:
            facts.append(self.say("others lost", count=others))
        noise_text = cluster.describe_noise(noise)
        if noise_text:
            facts.append(noise_text)
        facts.append(self.say("outcome", outcome=outcome))
        return self.say("head", who=who, when=f" at {loss.ts}" if loss and loss.ts else "",
                        verdict=self.cause(cause).summary) + " " + " ".join(facts)

    def _patches(self, incident: Incident, cause: str, ctx: LossContext | None, failures: list[Event]):
        patches = []
        lost_tm = ctx.tm.tm_id if ctx else "<taskmanager>"
        if cause == "killed-for-memory":
            patches.append(self.ops_patch("fix the memory cause first", self.say("memory first")))
        if cause == "process-killed":
            patches.append(self.ops_patch("find who killed the TaskManager", self.say("who killed it"),
                                          snippet=self.say("kill commands", tm=lost_tm)))
            if deployment(incident).containerised:
                patches += self._overhead_patches(incident)
        if cause == "node-lost":
            patches.append(self.ops_patch(
                "check the node", self.say("check the node"),
                snippet="kubectl get events -A --field-selector involvedObject.kind=Node\n"
                        "kubectl describe node <node>   # Conditions, Events"))
        if cause == "stopped-while-running":
            patches.append(self.ops_patch("stop TaskManagers only after draining them", self.say("drain first"),
                                          urgent=False))
        if cause in ("network-partition", "tm-unresponsive"):
            gap = ctx.silence_s() if ctx else None
            current, proposed = cluster.heartbeat_timeout_proposal(incident, gap)
            patches.append(self.flink_patch(
                incident, "heartbeat.timeout", cluster.duration_value(proposed, incident.version_tuple),
                self.say("longer heartbeat", current=format_duration(current))))
        if cause == "lost-tm-log-missing":
            patches.append(self.ops_patch("collect the lost TaskManager's log", self.say("collect its log"),
                                          snippet=self.say("kill commands", tm=lost_tm)))
        strategy = cluster.restart_strategy(incident)
        if strategy.kind in ("none", "failure-rate") or (strategy.kind == "fixed-delay" and strategy.attempts is not None
                                                         and strategy.attempts < cluster.MAX_INT):
            for key, value, reason in cluster.restart_budget(incident, [f.ts for f in failures], infrastructure=True):
                patches.append(self.flink_patch(incident, key, value, reason))
        return patches

    def _overhead_patches(self, incident: Incident):
        """More JVM overhead: a container killed without an OutOfMemoryError usually ran out of native memory."""
        try:
            changes = grow_pool(incident.config.as_flat_dict(), incident.version_tuple, "overhead", 1.5,
                                deployment=deployment(incident).memory_target)
        except (MemoryConfigError, ValueError):
            return []
        return [self.flink_patch(incident, key, value, self.say("more overhead"))
                for key, value in sorted(changes.items())]


# ---------------------------------------------------------------------------------------------------------------- helpers

def _loss_failures(incident: Incident) -> list[Event]:
    """Failure records whose cause is a lost TaskManager, excluding anything after the job ended in an orderly way."""
    out = []
    ends = cluster.orderly_ends(incident)
    for ev in incident.events:
        if not LOSS_CAUSE.search(ev.text):
            continue
        is_failure = bool(_FAILURE_RECORD.search(ev.message)) or (
            ev.chain and (ev.level in ("ERROR", "WARN") or not ev.ts) and LOSS_CAUSE.search(
                "\n".join(f"{c.cls}: {c.message}" for c in ev.chain)))
        if not is_failure or RECOVERY_SUPPRESSED.search(ev.message):
            continue
        if cluster.ended_before(ends, ev.ts):
            continue
        out.append(ev)
    return out


def _first_lost(inv: Inventory, failures: list[Event]) -> tuple[TaskManager | None, Loss | None]:
    """The TaskManager whose loss caused the first failure, and that loss."""
    first = failures[0]
    named = _named_tm(inv, first)
    candidates = []
    for tm in inv.taskmanagers.values():
        for loss in tm.losses:
            gap = seconds_between(loss.ts, first.ts)
            if gap is None or -cluster.MERGE_WINDOW_S <= gap <= cluster.MERGE_WINDOW_S:
                candidates.append((tm, loss))
    if named:
        own = [(tm, loss) for tm, loss in candidates if tm is named]
        if own:
            return own[0]
        loss = named.losses[0] if named.losses else Loss(named.tm_id, first.ts, "connection-closed", first.message, [first])
        return named, loss
    real = [c for c in candidates if not c[1].orderly] or candidates
    if real:
        return min(real, key=lambda c: c[1].ts or "~")
    return None, None


def _named_tm(inv: Inventory, ev: Event) -> TaskManager | None:
    text = ev.text
    m = cluster.PEER_CLOSED.search(text)
    if m:
        return inv.find(m["tm"]) or inv.by_address(m["addr"])
    for rx in (cluster.UNREACHABLE, cluster.HEARTBEAT_TIMEOUT):
        m = rx.search(text)
        if m:
            return inv.find(m["tm"])
    m = cluster.TASK_ON.search(ev.message)
    if m and "shutting down" in text:
        return inv.find(m["tm"])
    return None


def _cause(inv: Inventory, ctx: LossContext | None, failures: list[Event]) -> str:
    if ctx is None:
        return "lost-tm-log-missing"
    if ctx.memory:
        return "killed-for-memory"
    shutting_down = ctx.loss.orderly or any("The TaskExecutor is shutting down" in f.text for f in failures[:1])
    if shutting_down and not ctx.crash:
        return "stopped-while-running"
    if ctx.node:
        return "node-lost"
    same_host = cluster.same_host_losses(inv, ctx.tm, ctx.loss)
    if same_host and len(same_host) + 1 == len(inv.on_host(ctx.tm.host)):
        return "node-lost"
    if ctx.external_kill or ctx.crash or (ctx.has_own_log and not ctx.alive_after and not ctx.orderly):
        return "process-killed"
    if ctx.alive_after:
        silence = ctx.silence_s() or 0
        if ctx.gc_pauses or (ctx.tm_side_timeouts and silence >= 10):
            return "tm-unresponsive"
        return "network-partition"
    if ctx.orderly:
        return "stopped-while-running"
    return "lost-tm-log-missing"


def _lost_list(inv: Inventory, failures: list[Event]) -> list[dict]:
    start = failures[0].ts
    out = []
    for tm in inv.taskmanagers.values():
        for loss in tm.losses:
            if loss.orderly and not any("shutting down" in f.text for f in failures):
                continue
            if start and loss.ts and (seconds_between(loss.ts, start) or 0) > cluster.MERGE_WINDOW_S:
                continue
            out.append({"id": tm.tm_id, "host": tm.host, "at": loss.ts, "how": loss.kind})
    return sorted(out, key=lambda d: d["at"] or "~")


def _recovery_ts(incident: Incident, first: Event) -> str | None:
    for ev in incident.events:
        if first.ts and ev.ts and ev.ts > first.ts and (_restarted(ev) or
                                                        RECOVERY_SUPPRESSED.search(ev.text)):
            return ev.ts
    return None


def _outcome(incident: Incident, first: Event) -> tuple[str, Event | None]:
    for ev in incident.events:
        if first.ts and ev.ts and ev.ts < first.ts:
            continue
        if RECOVERY_SUPPRESSED.search(ev.text):
            return "FAILED: the restart strategy gave up", ev
        if _restarted(ev):
            return "recovered: restarted from the last checkpoint", ev
    return "unknown (no job state change after the loss in these logs)", None


def _ctx_details(ctx: LossContext) -> dict:
    d: dict = {"orderly_shutdown_in_own_log": bool(ctx.orderly), "alive_after_the_loss": ctx.alive_after}
    if ctx.has_own_log and ctx.last_own is not None:
        d["own_log_last_line_before_loss"] = ctx.last_own.ts
        gap = seconds_between(ctx.last_own.ts, ctx.loss.ts)
        if gap is not None:
            d["own_log_silent_before_loss_s"] = round(gap, 1)
    silence = ctx.silence_s()
    if silence is not None:
        d["own_log_silence_across_loss_s"] = round(silence, 1)
    if ctx.gc_pauses:
        d["longest_gc_pause_s"] = round(ctx.longest_gc_s, 1)
    return d


def _restarted(ev: Event) -> bool:
    """The job runs again after a restart."""
    m = JOB_RUNNING.search(ev.message)
    return m is not None and m["previous"] == "RESTARTING"
