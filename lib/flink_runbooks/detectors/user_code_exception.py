"""The job's own code threw the exception that failed it (a parse error, a NullPointerException, an external call).

Causes told apart from the timeline of the attempts (:mod:`~flink_runbooks.evidence.user_code`):
- ``poison-record``: the same exception at the same frame of the job's code on every attempt, after the job had
  run and checkpointed: restoring the checkpoint replays the same record into the same code.
- ``code-bug-since-deploy``: the fault comes from the first records of a freshly submitted job (within a minute of
  its start, before any checkpoint completed), next to an earlier run of the same job name that did not fail or in
  every attempt alike (one early fault alone may as well be an early poison record).
- ``transient-dependency``: an external call from the job's code timed out or was refused, and the faults differ
  between attempts or the job ran again after a restart.
Anything else (one attempt, an excerpt without the job's timeline) is ``undetermined`` with what to collect next.

The restart strategy running out (``restart-strategy-exhausted``) is the outcome of these faults, not their cause:
it stays a secondary finding next to this one.
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence import cluster
from flink_runbooks.evidence.user_code import (FIRST_RECORDS_WINDOW_S, UserFault, excerpt, job_run, user_faults)
from flink_runbooks.model import Finding, Incident, RootCause
from flink_runbooks.vocabulary.lifecycle import RECOVERY_SUPPRESSED

_ALERT = "ops:alert on restarts"
_COLLECT = "ops:collect the JobManager log"

DEAD_LETTER_SNIPPET = """\
// Route records the code cannot handle to a side output instead of failing the job on them.
final OutputTag<String> deadLetters = new OutputTag<String>("dead-letters") {};
SingleOutputStreamOperator<Order> parsed = lines.process(new ProcessFunction<String, Order>() {
    @Override
    public void processElement(String line, Context ctx, Collector<Order> out) {
        try {
            out.collect(Order.parse(line));
        } catch (RuntimeException e) {          // the exception the logs show
            ctx.output(deadLetters, line);       // keep the record for inspection and replay
        }
    }
});
parsed.getSideOutput(deadLetters).sinkTo(deadLetterSink);   // a topic, a table or files"""

RETRY_SNIPPET = """\
// Call the service asynchronously with a timeout and retries (Flink >= 1.16), so a slow or briefly unavailable
// service delays records instead of failing the job.
AsyncRetryStrategy<String> retries = new AsyncRetryStrategies.ExponentialBackoffDelayRetryStrategyBuilder<String>(
        5, 200L, 10_000L, 2.0)
    .ifException(RetryPredicates.HAS_EXCEPTION_PREDICATE)
    .build();
DataStream<String> enriched = AsyncDataStream.unorderedWaitWithRetry(
    orders, new EnrichAsync(), 30, TimeUnit.SECONDS, 100, retries);
// Before 1.16: catch the timeout in the function, retry a few times with a delay, then send the record to a
// dead-letter side output."""

ALERT_SNIPPET = """\
# Prometheus: the job restarted in the last 10 minutes (flink_jobmanager_job_numRestarts is Flink's own metric)
- alert: FlinkJobRestarting
  expr: increase(flink_jobmanager_job_numRestarts[10m]) > 0
  labels: {severity: warning}
  annotations: {summary: "{{ $labels.job_name }} restarted: a fault in the job's code or a dependency"}"""


class UserCodeException(Detector):
    slug = "user-code-exception"
    title = "The job's own code threw an exception"
    category = "job-code"
    meaning = ("A function of the job (a map, a process function, a call it makes to another service) threw the "
               "exception that failed the task; Flink restarts it from the last checkpoint, which helps only when the "
               "fault does not come back.")
    versions = "1.3 – 2.x"
    # Below the runbooks of a specific failure (a metaspace leak, a corrupt restore explain more than the job's own
    # exception that preceded them), above the umbrella outcomes (restarts exhausted) and unrecognised-failure.
    layer = 1
    exception_classes = ("java.lang.NullPointerException", "java.lang.NumberFormatException",
                         "java.lang.IllegalArgumentException", "java.lang.IllegalStateException")
    # Failures are found from the job's state changes and the frames of the job's own code, which the pre-filter
    # keeps for every failure; these lines add the restore and the fault's usual messages.
    config_keys = (
        "restart-strategy.type",
        "restart-strategy.fixed-delay.attempts",
        "restart-strategy.fixed-delay.delay",
        "execution.checkpointing.interval",
    )
    signatures = (
        r"Restoring job \w+ from",
        r"(?:NullPointerException|NumberFormatException|ArithmeticException|IndexOutOfBoundsException|"
        r"ClassCastException|DateTimeParseException)(?::|$)",
        r"(?:SocketTimeoutException|ConnectException|HttpTimeoutException): ",
    )
    root_causes = (
        RootCause("poison-record", "One record the code cannot handle: every attempt restores the checkpoint, "
                  "replays the same record into the same code and fails the same way.",
                  "The same exception (numbers aside) at the same frame of the job's code in two or more attempts, "
                  "after the job had run and completed checkpoints.",
                  patches=("code:route bad records to a dead-letter side output", "ops:find the poison record",
                           _ALERT),
                  would_change="A different exception or frame in each attempt (a dependency or state), or the "
                               "fault from the first records of a new job (a bug of the release)."),
        RootCause("code-bug-since-deploy", "The job's current code fails on its first records: a bug of this "
                  "release (or of the data it now expects), not one bad record.",
                  "The fault within a minute of a freshly submitted job's start, before any checkpoint completed, "
                  "thrown by the job's code, with an earlier run of the same job in the logs or the same fault in "
                  "every attempt.",
                  patches=("ops:roll back to the previous release", "code:fix the failing code", _ALERT),
                  would_change="The job running and checkpointing for a while before the first fault (a record, "
                               "not the release), or a restore from a savepoint of an older release."),
        RootCause("transient-dependency", "An external call from the job's code timed out or was refused while "
                  "the service was briefly slow or unavailable.",
                  "Timeouts or connection errors from a call in the job's code that differ between attempts, or "
                  "the job running again after the restart.",
                  patches=("code:retry the external call with a timeout", "flink:restart-strategy.type", _ALERT),
                  would_change="The same call failing every attempt with the service down for good (the "
                               "service's health), or a fault that is not a timeout or connection error."),
        RootCause("undetermined", "The job's own code threw the fault, but the logs do not show whether it recurs "
                  "at the same record, comes from a new release or from an unavailable service.",
                  "One failure of the job's code without the attempts before or after it.",
                  patches=(_COLLECT, "ops:find the poison record"),
                  next_evidence="the JobManager log of the failure episode (do the restarts fail at the same frame "
                                "and record?), when the job was last deployed, and the failing record's offset."),
    )

    templates = {
        "head": "The job's own code threw {fault}{where}{task}.",
        "at": " at {frame}",
        "in task": " in {task}",
        "poison-record": "The same fault came back in all {count} attempts, each time after restoring a checkpoint "
                         "(the job had completed {checkpoints} checkpoint(s) before the first one): one record the "
                         "code cannot handle is replayed into it on every restart.",
        "code-bug-since-deploy": "It failed {when} after the job started, on its first records and before any "
                                 "checkpoint completed: the release itself fails, not one record.",
        "earlier run": "An earlier run of the same job ({earlier}) ran without this fault and was stopped before "
                       "this one started: the new release brought the bug.",
        "transient-dependency": "The call to another service failed {count} time(s){different}{ran_again}: the "
                                "service was slow or briefly unavailable, the job's code did not wait or retry.",
        "different faults": " with different faults",
        "ran again": ", and the job ran again after restarting",
        "undetermined": "Whether the fault recurs at the same record, comes from a new release or from a service "
                        "that was unavailable does not show in these logs.",
        "job failed": "The job FAILED.",
        "job recovered": "The job was running again after the restart.",
        "job restarting": "The job was restarting.",
        "job fate unknown": "What became of the job does not show here.",
        "excerpt": "From an excerpt: the attempts before and after this one are unknown.",
        "thrown at": "thrown by the job's code at {frame}",
        "same again": "attempt {number}: the same fault",
        "different fault": "attempt {number}: a different fault",
        "dead letters": "Catch {exception} in {frame} and send the record to a side output: the job keeps running "
                        "and the record is kept for a fix and a replay. Restarting cannot help: every restart "
                        "replays the same record.",
        "find the poison record": "The exception's message and the operator name the field; the source's offset at "
                                  "the last completed checkpoint bounds where the record is. Skip it (a savepoint "
                                  "after advancing the offset) only once the code handles such records.",
        "poison grep": "grep -n -B2 -A12 'switched from RUNNING to FAILED' taskmanager*.log | grep -n '{word}'",
        "roll back": "Resubmit the previous jar from the last savepoint or retained checkpoint while the bug is "
                     "fixed; every restart of this release fails the same way.",
        "fix snippet": "// {frame}\n"
                       "// reproduce with the job's first input records in a test (MiniClusterWithClientResource) "
                       "before redeploying",
        "fix the failing code": "The fault is thrown at {frame} on the first records: fix it and test with real "
                                "input.",
        "retry": "The call at {frame} failed while the service was slow or down; retrying with backoff (and a "
                 "dead-letter output after the last retry) rides out short outages without restarting the job.",
        "exponential-delay": "The restart strategy in force is {strategy}; exponential-delay restarts without a "
                             "lifetime budget and backs off while the service is down.",
        "collect the JobManager log": "The JobManager log shows every attempt's first fault: the same frame and "
                                      "message each time is a poison record, a fault from a freshly started job is "
                                      "the release's bug, timeouts that change are a dependency.",
        "look for the record": "If the fault's message names a value, look for that record at the source's offset of "
                               "the last completed checkpoint.",
        "alert on restarts": "Flink restarts silently; an alert on the restart counter shows a failing job before "
                             "the restart strategy gives up.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        faults = [uf for uf in user_faults(incident) if not _claimed_elsewhere(uf)]
        if not faults:
            return []
        first = faults[0]
        run = job_run(incident, first)
        is_excerpt = excerpt(incident)
        shapes = [uf.shape for uf in faults]
        same = len(faults) >= 2 and len(set(shapes)) == 1
        recovered = any(uf.recovered for uf in faults)
        external = all(uf.external for uf in faults)
        varies = len(set(shapes)) > 1 or len({uf.fault.text for uf in faults}) > 1
        fresh = (run.seconds_to_first_fault is not None and run.seconds_to_first_fault <= FIRST_RECORDS_WINDOW_S
                 and run.checkpoints_before == 0 and not run.restored_before)
        progressed = run.checkpoints_before > 0 or (run.seconds_to_first_fault or 0) > FIRST_RECORDS_WINDOW_S
        if external and (varies or recovered):
            cause, confidence = "transient-dependency", 0.8 if len(faults) > 1 else 0.65
        elif not external and fresh and not is_excerpt and (run.earlier_run or same):
            # Failing fast is only evidence of a new bug next to the release before it, or when every attempt fails
            # the same way on its first records; one early fault may as well be an early poison record.
            cause, confidence = "code-bug-since-deploy", 0.85 if run.earlier_run else 0.75
        elif not external and same and progressed:
            cause, confidence = "poison-record", 0.85 if len(faults) >= 3 else 0.75
        else:
            cause, confidence = "undetermined", 0.4
        if is_excerpt:
            confidence = min(confidence, 0.5)
        outcome = _outcome(faults)
        summary = self._summary(cause, first, faults, run, outcome, is_excerpt)
        details = {
            "first_fault": first.fault.text[:400],
            "thrown_at": first.top_frame or "no frame of the job's code kept",
            "task_or_operator": first.fault.task or "unknown",
            "attempts_with_this_fault": len(faults),
            "same_fault_every_attempt": same,
            "external_call": external,
            "job": run.name or run.job or "unknown",
            "seconds_from_job_start_to_first_fault": (round(run.seconds_to_first_fault, 1)
                                                      if run.seconds_to_first_fault is not None else "unknown"),
            "checkpoints_completed_before_first_fault": run.checkpoints_before,
            "outcome": outcome,
        }
        if run.earlier_run:
            details["earlier_run_of_the_same_job"] = run.earlier_run
        if is_excerpt:
            details["unknown"] = ("whether the job restarted and failed again at the same place (an excerpt, no job "
                                  "state changes)")
        evidence = [uf.event for uf in faults[:4]]
        notes = {0: self.say("thrown at", frame=first.top_frame or "an unknown frame")}
        for i in range(1, len(evidence)):
            notes[i] = self.say("same again" if faults[i].shape == first.shape else "different fault", number=i + 1)
        severity = "warning" if outcome == "recovered" and len(faults) == 1 else "failure"
        return [self.finding(cause, summary, evidence, confidence=confidence, notes=notes, details=details,
                             patches=self._patches(incident, cause, first), severity=severity)]

    def _summary(self, cause: str, first: UserFault, faults: list[UserFault], run, outcome: str,
                 is_excerpt: bool) -> str:
        parts = [self.say("head", fault=first.fault.text[:240].rstrip("."),
                          where=self.say("at", frame=first.top_frame) if first.top_frame else "",
                          task=self.say("in task", task=first.fault.task) if first.fault.task else "")]
        if cause == "poison-record":
            parts.append(self.say(cause, count=len(faults), checkpoints=run.checkpoints_before))
        elif cause == "code-bug-since-deploy":
            when = f"{run.seconds_to_first_fault:.0f} s" if run.seconds_to_first_fault is not None else "moments"
            parts.append(self.say(cause, when=when))
            if run.earlier_run:
                parts.append(self.say("earlier run", earlier=run.earlier_run))
        elif cause == "transient-dependency":
            parts.append(self.say(
                cause, count=len(faults),
                different=self.say("different faults") if len({uf.fault.text for uf in faults}) > 1 else "",
                ran_again=self.say("ran again") if any(uf.recovered for uf in faults) else ""))
        else:
            parts.append(self.say(cause))
        parts.append(self.say({"failed": "job failed", "recovered": "job recovered", "restarting": "job restarting",
                               "unknown": "job fate unknown"}[outcome]))
        if is_excerpt:
            parts.append(self.say("excerpt"))
        return " ".join(parts)

    def _patches(self, incident: Incident, cause: str, first: UserFault):
        frame = first.top_frame or "the failing function"
        out = []
        if cause == "poison-record":
            out.append(self.code_patch(
                "route bad records to a dead-letter side output", DEAD_LETTER_SNIPPET,
                self.say("dead letters", exception=first.fault.deepest.cls if first.fault.deepest else "the exception",
                         frame=frame)))
            out.append(self.ops_patch(
                "find the poison record", self.say("find the poison record"),
                snippet=self.say("poison grep", word=_grep_word(first))))
        elif cause == "code-bug-since-deploy":
            out.append(self.ops_patch(
                "roll back to the previous release", self.say("roll back"),
                snippet="flink run -s <savepoint or retained checkpoint> <previous-release.jar> <your usual arguments>"))
            out.append(self.code_patch(
                "fix the failing code", self.say("fix snippet", frame=frame),
                self.say("fix the failing code", frame=frame)))
        elif cause == "transient-dependency":
            out.append(self.code_patch(
                "retry the external call with a timeout", RETRY_SNIPPET, self.say("retry", frame=frame)))
            strategy = cluster.restart_strategy(incident)
            if strategy.kind in ("fixed-delay", "failure-rate", "none") and not strategy.set_in_code:
                out.append(self.flink_patch(
                    incident, "restart-strategy.type", "exponential-delay",
                    self.say("exponential-delay", strategy=strategy.describe())))
        else:
            out.append(self.ops_patch(
                "collect the JobManager log", self.say("collect the JobManager log"),
                snippet="grep -n -A8 -E 'switched from (state )?RUNNING to (FAILED|FAILING|RESTARTING)' jobmanager.log"))
            out.append(self.ops_patch(
                "find the poison record", self.say("look for the record")))
        if cause != "undetermined":
            out.append(self.ops_patch(
                "alert on restarts", self.say("alert on restarts"), snippet=ALERT_SNIPPET, urgent=False))
        return out


def _outcome(faults: list[UserFault]) -> str:
    last = faults[-1].episode
    if last is None:
        return "unknown"
    if any(uf.episode and uf.episode.outcome == "failed" for uf in faults):
        return "failed"
    if last.recovered:
        return "recovered"
    return "restarting" if last.outcome in ("restarting", "open") else "unknown"


def _grep_word(uf: UserFault) -> str:
    return (uf.fault.deepest.cls.rsplit(".", 1)[-1] if uf.fault.deepest else "Exception")


def _claimed_elsewhere(uf: UserFault) -> bool:
    """A fault that another runbook names as its root cause (serialization, memory, configuration...) is that runbook's."""
    from flink_runbooks.detectors import all_detectors, all_wordings
    from flink_runbooks.vocabulary.wordings import recognise

    texts = [f"{c.cls}: {c.message}" for c in uf.event.chain
             if c.kind != "suppressed" and not RECOVERY_SUPPRESSED.search(c.message)]
    others = [d for d in all_detectors() if d.layer < 2 and d.slug != UserCodeException.slug]
    named = {d.slug for d in others}
    for text in texts:
        if any(w.runbook in named for w in recognise(text, all_wordings())):
            return True
        for d in others:
            if any(re.search(sig, text) for sig in d.signatures if not sig.startswith("^")):
                return True
    return False
