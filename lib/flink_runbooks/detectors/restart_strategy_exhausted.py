"""``JobException: Recovery is suppressed by …RestartBackoffTimeStrategy``: the job FAILED because restarts ran out."""
from __future__ import annotations

import re

from flink_runbooks.evidence import cluster
from flink_runbooks.evidence.checkpoints import checkpoint_history
from flink_runbooks.evidence.episodes import episodes, fault_text, is_secondary
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.units import format_duration
from flink_runbooks.detectors.base import Detector
from flink_runbooks.parse.timestamps import seconds_between
from flink_runbooks.vocabulary.lifecycle import JOB_STATE, RECOVERY_SUPPRESSED
from flink_runbooks.vocabulary.wordings import Wording

# Faults that come from the environment and may pass: a bigger budget can ride them out.
_INFRASTRUCTURE = re.compile(
    rf"{cluster.LOSS_CAUSE.pattern}|RemoteTransportException|PartitionNotFoundException|NoResourceAvailableException|"
    r"TimeoutException|AskTimeoutException|ConnectException|Connection refused|Connection reset|UnknownHostException|"
    r"SocketTimeoutException|lost leadership|RecipientUnreachableException|Disconnect from JobManager|"
    r"TaskManager .* (?:lost|released)|Container (?:released|killed|preempted)|Pod .* (?:deleted|evicted)")
_VOLATILE = re.compile(r"\b[0-9a-f]{8,}\b|\d+(?:\.\d+)?|'[^']*'|\"[^\"]*\"|@[0-9a-f]+|/[\w./-]+")


class RestartStrategyExhausted(Detector):
    slug = "restart-strategy-exhausted"
    title = "Restart strategy exhausted: the job FAILED"
    category = "cluster"
    meaning = ("The restart strategy refused another restart ('Recovery is suppressed by …'), so the job went to "
               "FAILED and stays there until someone resubmits it; the reason is the fault that kept recurring.")
    exception_classes = ("org.apache.flink.runtime.JobException",)
    versions = "1.10 – 2.x (RestartBackoffTimeStrategy names since 1.10; exponential-delay the default since 1.19)"
    layer = 2
    collect_next = "the faults of the earlier attempts and the restart strategy in force"
    config_keys = (
        "restart-strategy.type",
        "restart-strategy.fixed-delay.attempts",
        "restart-strategy.fixed-delay.delay",
        "restart-strategy.failure-rate.max-failures-per-interval",
        "restart-strategy.exponential-delay.max-backoff",
        "execution.checkpointing.interval",
        "execution.checkpointing.externalized-checkpoint-retention",
    )
    signatures = (
        r"Recovery is suppressed by \w+",
        r"Using restart back ?off time strategy",
        r"Restoring job \w+ from",
    )
    root_causes = (
        RootCause("same-fault-every-attempt", "Every attempt failed with the same fault: restarting cannot help, "
                  "the code, the data or the setting behind that fault must change.",
                  "The first fault of every restart episode is the same exception (numbers aside).",
                  patches=("flink:execution.checkpointing.externalized-checkpoint-retention",
                           "ops:fix the recurring fault", "ops:resubmit the job", "flink:execution.checkpointing.prefer-checkpoint-for-recovery")),
        RootCause("restart-budget-too-small", "Transient or infrastructure faults used up a restart budget that is "
                  "too small for a long-running job.",
                  "The episodes fail with lost TaskManagers, timeouts or different faults, and the strategy is "
                  "fixed-delay/failure-rate with a few attempts.",
                  patches=("flink:execution.checkpointing.externalized-checkpoint-retention",
                           "flink:restart-strategy.exponential-delay.backoff-multiplier",
                           "flink:restart-strategy.exponential-delay.initial-backoff",
                           "flink:restart-strategy.exponential-delay.max-backoff",
                           "flink:restart-strategy.exponential-delay.reset-backoff-threshold",
                           "flink:restart-strategy.fixed-delay.attempts", "flink:restart-strategy.fixed-delay.delay",
                           "flink:restart-strategy.type", "code:restart strategy in the job's code",
                           "ops:resubmit the job", "flink:execution.checkpointing.prefer-checkpoint-for-recovery")),
        RootCause("no-restart-strategy", "No restarts were allowed (restart strategy 'none', or checkpointing off "
                  "with no strategy configured): the first fault failed the job.",
                  "'Recovery is suppressed by NoRestartBackoffTimeStrategy'.",
                  patches=("flink:execution.checkpointing.interval",
                           "flink:restart-strategy.exponential-delay.backoff-multiplier",
                           "flink:restart-strategy.exponential-delay.initial-backoff",
                           "flink:restart-strategy.exponential-delay.max-backoff",
                           "flink:restart-strategy.exponential-delay.reset-backoff-threshold",
                           "flink:restart-strategy.fixed-delay.attempts", "flink:restart-strategy.fixed-delay.delay",
                           "flink:restart-strategy.type", "ops:resubmit the job",
                           "flink:execution.checkpointing.prefer-checkpoint-for-recovery",
                           "flink:execution.checkpointing.externalized-checkpoint-retention")),
    )

    wordings = (
        Wording("restart-strategy-exhausted", r"Recovery is suppressed by \w+RestartBackoffTimeStrategy",
                "1.10 – 2.x", "ExecutionFailureHandler (JobException)",
                "org.apache.flink.runtime.JobException: Recovery is suppressed by FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=2, backoffTimeMS=3000)"),
    )

    templates = {
        "head": "The job FAILED{at}: recovery was suppressed by {strategy} after {restarts} restart(s){over}. ",
        "same-fault-every-attempt": "All {attempts} attempt(s) failed with the same fault: {fault}.",
        "no-restart-strategy": "The first fault failed the job: {fault}.",
        "restart-budget-too-small": "The attempts failed with {count} different fault(s); the last: {fault}.",
        "one fault": "Every attempt failed with {fault}.",
        "runbook": " That fault is the subject of the {runbook} runbook, which is the root cause of this incident.",
        "stays failed": " Once the strategy is exhausted Flink does not try again: the job stays FAILED until it is "
                        "resubmitted (from its last retained checkpoint) by hand or by automation.",
        # evidence notes
        "note suppressed": "the restart strategy refused another restart: the job is FAILED",
        "note fault": "first fault of failure episode {episode}",
        # patches
        "fix the fault": "Restarting replays the same input into the same code and fails the same way ({fault}). "
                         "{then}A bigger restart budget would only delay the FAILED state.",
        "follow the runbook": "Follow the {runbook} runbook. ",
        "fix code or data": "Fix the code or the data (a poison record: skip/route it to a side output), then "
                            "resubmit. ",
        "set in code": "The job's code sets its own restart strategy, which overrides the configuration file: change "
                       "it there.",
        "checkpointing": "Without checkpoints a restarted job starts from scratch (state lost, sources rewound to "
                         "their start offsets); checkpointing also makes Flink restart by default.",
        "retain": "Non-externalized checkpoints are deleted when the job FAILS; retained ones let you resubmit from "
                  "where it stopped.",
        "resubmit": "After the strategy is exhausted nothing restarts the job. Resubmit it from its last retained "
                    "checkpoint (or a savepoint) once the cause is fixed, or automate it: the Flink Kubernetes "
                    "Operator redeploys FAILED jobs with kubernetes.operator.job.restart.failed: true, other "
                    "platforms can watch GET /jobs/<id> for state FAILED.{last}",
        "last checkpoint": " The last completed checkpoint in these logs is {checkpoint}.",
        "resubmit snippet": "# the newest retained checkpoint of the failed job\n"
                            "ls -d {listed}\n"
                            "flink run -s {path} <your usual arguments> <job jar>",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        suppressed = [ev for ev in incident.events if RECOVERY_SUPPRESSED.search(ev.text)]
        if not suppressed:
            return []
        final = suppressed[0]
        job = _job_of(final)
        eps = [ep for ep in episodes(incident) if job is None or ep.job in (None, job)]
        ended = next((i for i, ep in enumerate(eps) if ep.suppressed is not None or ep.outcome == "failed"), None)
        eps = eps[: ended + 1] if ended is not None else eps
        faults = [(ep, ep.first_fault) for ep in eps if ep.first_fault is not None] or [(None, final)]
        named = [(ep, ev, fault_text(ev), _normalise(fault_text(ev))) for ep, ev in faults]
        strategy = cluster.restart_strategy(incident)
        distinct = sorted({n for *_, n in named})
        infrastructure = any(_INFRASTRUCTURE.search(text) or is_secondary(ev) for _, ev, text, _ in named)
        if strategy.kind == "none":
            cause = "no-restart-strategy"
        elif len(distinct) == 1 and not infrastructure:
            cause = "same-fault-every-attempt"
        else:
            cause = "restart-budget-too-small"
        recurring = named[-1][2]
        runbook = _runbook_for(self, recurring, incident)
        times = [ep.start if ep else ev.ts for ep, ev, *_ in named]
        restarts = sum(1 for ep in eps if ep.outcome == "restarting")
        span = seconds_between(times[0], times[-1]) if len(times) > 1 else None
        details = {
            "strategy": strategy.describe(),
            "strategy_parameters": strategy.args,
            "strategy_source": strategy.source + (" (set in the job's code)" if strategy.set_in_code else ""),
            "restarts_before_failing": restarts,
            "failure_episodes": len(named),
            "distinct_faults": len(distinct),
            "faults": [{"at": t, "fault": text[:300]} for t, (_, _, text, _) in zip(times, named)],
            "recurring_fault": recurring[:300],
            "recurring_fault_runbook": runbook,
            "failed_at": final.ts,
        }
        if span is not None:
            details["trouble_span"] = format_duration(round(span) * 1000)
        evidence = [final] + [ev for _, ev, *_ in named[:3] if ev is not final]
        notes = {0: self.say("note suppressed")}
        for i in range(1, len(evidence)):
            notes[i] = self.say("note fault", episode=i)
        recurring_fault = recurring.rstrip(".")
        if cause == "same-fault-every-attempt":
            fault = self.say(cause, attempts=len(named), fault=recurring_fault)
        elif cause == "no-restart-strategy":
            fault = self.say(cause, fault=recurring_fault)
        elif len(distinct) > 1:
            fault = self.say(cause, count=len(distinct), fault=recurring_fault)
        else:
            fault = self.say("one fault", fault=recurring_fault)
        summary = (self.say("head", at=f" at {final.ts}" if final.ts else "", strategy=strategy.describe(),
                            restarts=restarts, over=f" over {format_duration(round(span) * 1000)}" if span else "")
                   + self.cause(cause).summary + " " + fault
                   + (self.say("runbook", runbook=runbook) if runbook else "") + self.say("stays failed"))
        patches = self._patches(incident, cause, strategy, times, infrastructure, recurring, runbook, job)
        if cluster.prefers_checkpoint_for_recovery(incident):
            summary += " " + cluster.PREFER_CHECKPOINT_WARNING
            patches.append(self.flink_patch(incident, cluster.PREFER_CHECKPOINT_KEY, None,
                                            cluster.PREFER_CHECKPOINT_WARNING))
        return [self.finding(
            cause, summary, evidence,
            notes=notes, confidence=0.9 if len(named) > 1 or cause == "no-restart-strategy" else 0.7,
            patches=patches, details=details)]

    def _patches(self, incident: Incident, cause: str, strategy: cluster.RestartStrategy, times: list,
                 infrastructure: bool, recurring: str, runbook: str | None, job: str | None):
        patches = []
        if cause == "same-fault-every-attempt":
            patches.append(self.ops_patch("fix the recurring fault", self.say(
                "fix the fault", fault=recurring[:200],
                then=self.say("follow the runbook", runbook=runbook) if runbook else self.say("fix code or data"))))
        else:
            budget = cluster.restart_budget(incident, times, infrastructure=infrastructure)
            if strategy.set_in_code:
                patches.append(self.code_patch("restart strategy in the job's code", _code_snippet(incident, budget),
                                               self.say("set in code")))
            for key, value, reason in budget:
                patches.append(self.flink_patch(incident, key, value, reason))
        if cause == "no-restart-strategy" and not cluster.checkpointing_enabled(incident):
            patches.append(self.flink_patch(incident, "execution.checkpointing.interval", "1 min",
                                            self.say("checkpointing")))
        retention = (incident.config.get("execution.checkpointing.externalized-checkpoint-retention") or
                     "NO_EXTERNALIZED_CHECKPOINTS").upper()
        if cluster.checkpointing_enabled(incident) and retention == "NO_EXTERNALIZED_CHECKPOINTS":
            patches.append(self.flink_patch(
                incident, "execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION",
                self.say("retain")))
        history = [a for a in checkpoint_history(incident) if a.outcome == "completed"]
        last = self.say("last checkpoint", checkpoint=history[-1].checkpoint_id) if history else ""
        path = _resubmit_path(incident, job)
        patches.append(self.ops_patch("resubmit the job", self.say("resubmit", last=last), snippet=self.say(
            "resubmit snippet", listed=path.replace("file://", "").replace("file:", ""), path=path)))
        return patches


def _job_of(ev: Event) -> str | None:
    m = JOB_STATE.search(ev.message) or re.search(r"\b([0-9a-f]{32})\b", ev.message)
    if not m:
        return None
    return m["job"] if "job" in m.groupdict() else m.group(1)


def _normalise(text: str) -> str:
    """A fault without the numbers, ids, paths and quoted values that change from one attempt to the next."""
    return _VOLATILE.sub("#", text).strip()


def _runbook_for(me: Detector, fault: str, incident: Incident) -> str | None:
    """The runbook (other than the umbrella ones) whose signature or exception class names this fault. A class of
    the JDK (IllegalStateException, UnsupportedOperationException...) is thrown for any reason: it names a runbook
    only when that runbook's own judgement finds its failure in the incident."""
    from flink_runbooks.detectors import all_detectors

    best = None
    cls = fault.split(":", 1)[0].strip()
    jdk = cls.startswith(("java.", "javax."))
    for d in all_detectors():
        if d.slug == me.slug or d.layer >= 2:
            continue
        starts = [m.start() for sig in d.signatures for m in [re.search(sig, fault)] if m]
        if (not starts and cls in d.exception_classes and cls.rsplit(".", 1)[-1] not in ("TimeoutException", "IOException")
                and (not jdk or _finds_failure(d, incident))):
            starts = [len(fault)]
        if starts:
            rank = (min(starts), cls not in d.exception_classes, d.layer)
            if best is None or rank < best[0]:
                best = (rank, d.slug)
    return best[1] if best else None


def _finds_failure(detector: Detector, incident: Incident) -> bool:
    try:
        return any(f.severity == "failure" for f in detector.detect(incident))
    except Exception:  # noqa: BLE001 - its own failure is reported where it runs; here it only names nothing
        return False


def _resubmit_path(incident: Incident, job: str | None) -> str:
    """The newest retained checkpoint of the failed job (a pattern when the logs do not name it)."""
    history = [a for a in checkpoint_history(incident) if a.outcome == "completed"]
    restored = next((m.group(1) for ev in reversed(incident.events)
                     for m in [re.search(r"Restoring job \w+ from Checkpoint \d+ .* located at (\S+?)\.?$", ev.message)]
                     if m), None)
    ckpt_dir = incident.config.get("execution.checkpointing.dir") or "<checkpoint dir>"
    return (f"{ckpt_dir.rstrip('/')}/{job or '<job id>'}/chk-{history[-1].checkpoint_id}" if history
            else restored or f"{ckpt_dir.rstrip('/')}/{job or '<job id>'}/chk-<n>")


def _code_snippet(incident: Incident, budget: list[tuple[str, str, str]]) -> str:
    values = {k.rsplit(".", 1)[-1]: v for k, v, _ in budget}
    v = incident.version_tuple
    if values.get("type") == "fixed-delay":
        return (f"env.setRestartStrategy(RestartStrategies.fixedDelayRestart({values['attempts']}, "
                f"Time.of({values['delay'].split()[0]}, TimeUnit.SECONDS)));")
    if v and tuple(v[:2]) >= (1, 19):
        pairs = ",\n".join(f'    "{k}", "{val}"' for k, val, _ in budget)
        return (f"Configuration conf = Configuration.fromMap(Map.of(\n{pairs}));\n"
                "StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);")
    return ("env.setRestartStrategy(RestartStrategies.exponentialDelayRestart(\n"
            f"    Time.of({_seconds(values['initial-backoff'])}, TimeUnit.SECONDS),  // initial backoff\n"
            f"    Time.of({_seconds(values['max-backoff'])}, TimeUnit.SECONDS),  // max backoff\n"
            f"    {values['backoff-multiplier']},  // multiplier\n"
            "    Time.of(1, TimeUnit.HOURS),  // reset backoff threshold\n"
            "    0.1));  // jitter")


def _seconds(duration: str) -> int:
    from flink_runbooks.vocabulary.units import parse_duration_ms

    return (parse_duration_ms(duration) or 0) // 1000

