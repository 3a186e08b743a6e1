"""A job failed or restarted, or an exception ended a task, and no catalogued runbook explains it.

Silence is the worst answer to a failed job: this runbook names the first fault of the first failure episode (the
deepest exception, not Flink's wrappers), the task or operator it ended, which component threw it (user code, Flink,
a connector, the JVM, the environment) and the job's own frames, and says what to collect next. It never outranks
a catalogued finding: when one explains the failure, this one is dropped (see ``diagnose``).
"""
from __future__ import annotations

import re

from flink_runbooks.evidence.episodes import episodes, failure_events, first_fault, is_excerpt, is_secondary
from flink_runbooks.evidence.faults import read_fault
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.detectors.base import Detector, signature
from flink_runbooks.vocabulary.lifecycle import COORDINATOR_FAILOVER
from flink_runbooks.vocabulary.wordings import Wording

_JM_LOG = "ops:collect the JobManager log"
_TRACE = "ops:collect the full stack trace"
_CAUSE_OF = {"user code": "thrown-by-user-code", "a connector": "thrown-by-connector", "Flink": "thrown-by-flink",
             "the JVM": "thrown-by-jvm", "the environment": "thrown-by-environment", None: "undetermined"}


def _user_frame_signature() -> str:
    """A stack frame of a class outside the JDK, Flink and the libraries it runs, as a line regex without
    lookaheads (RE2 on the workers has none): a trie of the framework prefixes, each branch point excluding the
    characters that continue a prefix."""
    from flink_runbooks.evidence.faults import FRAMEWORK_PACKAGES

    trie: dict = {}
    for prefix in FRAMEWORK_PACKAGES:
        node = trie
        for ch in prefix:
            node = node.setdefault(ch, {})
        node["$end"] = True

    def branch(node: dict) -> str:
        children = sorted(k for k in node if k != "$end")
        alts = []
        letters = "".join(c for c in children if c.isalnum() or c == "_")
        alts.append(rf"[^\W{letters}][\w$.]*" if letters else r"\w[\w$.]*")
        for ch in children:
            child = node[ch]
            if child.get("$end"):
                continue  # a framework prefix is complete: no user frame continues here
            alts.append(("\\." if ch == "." else ch) + branch(child))
        return "(?:" + "|".join(alts) + ")"

    from flink_runbooks.parse.layouts import PREFIX

    return r"^(?:" + PREFIX + r")?\s*at (?:[\w.-]+//|[\w.-]+/)?" + branch(trie) + r"\.[\w$<>]+\("


class UnrecognisedFailure(Detector):
    slug = "unrecognised-failure"
    title = "A failure outside the catalogue"
    category = "failures"
    meaning = ("The job failed or restarted (or an exception ended a task) for a reason none of the other runbooks "
               "knows; this one names the first fault, where it was thrown and by which component.")
    versions = "1.3 – 2.x"
    layer = 3
    exception_classes = ()
    config_keys = (
        "restart-strategy.type",
        "restart-strategy",
        "restart-strategy.fixed-delay.attempts",
        "restart-strategy.exponential-delay.max-backoff",
        "jobmanager.execution.failover-strategy",
    )
    signatures = (
        r"FatalExitExceptionHandler|produced an uncaught exception|Fatal error occurred in",
        r"The program finished with the following exception|Job execution failed",
        _user_frame_signature(),
        signature(COORDINATOR_FAILOVER),
    )
    wordings = (
        Wording("unrecognised-failure", r"Uncaught exception in the SplitEnumerator for Source .* Triggering job failover",
                "1.13 – 2.x", "SourceCoordinator.runInEventLoop (checked in 1.13.6, 1.20.3, 2.3.0)",
                "2026-03-10 14:05:00,112 ERROR org.apache.flink.runtime.source.coordinator.SourceCoordinator [] - "
                "Uncaught exception in the SplitEnumerator for Source Source: orders while handling operator event "
                "RequestSplitEvent (host='10.42.1.23') from subtask 1 (#0). Triggering job failover."),
        Wording("unrecognised-failure", r"Exception while handling result from async call in .*Triggering job failover",
                "1.13 – 2.x", "SourceCoordinatorContext.handleUncaughtExceptionFromAsyncCall (checked in 1.13.6, "
                "1.20.3, 2.3.0)",
                "2026-03-10 14:05:00,112 ERROR org.apache.flink.runtime.source.coordinator.SourceCoordinatorContext "
                "[] - Exception while handling result from async call in SourceCoordinator-Source: orders. "
                "Triggering job failover."),
    )
    root_causes = (
        RootCause("thrown-by-user-code", "The job's own code threw the exception that failed it.",
                  "The deepest cause is a class of the job, or a generic JDK exception whose first frame is the "
                  "job's code.",
                  patches=(_JM_LOG, _TRACE, "code:fix or guard the failing code")),
        RootCause("thrown-by-connector", "A connector (or the client library it runs) threw the exception that "
                  "failed the job.", "The deepest cause's package is a connector's or its client library's.",
                  patches=(_JM_LOG, "ops:check the external system and the connector version")),
        RootCause("thrown-by-flink", "Flink itself threw the exception that failed the job, in a way no catalogued "
                  "runbook recognises.", "The deepest cause is an org.apache.flink class outside the connectors.",
                  patches=(_JM_LOG, "ops:search Flink's issue tracker")),
        RootCause("thrown-by-jvm", "The JVM raised the error that failed the job (a resource ran out or class "
                  "loading failed).", "The deepest cause is a java.lang Error the JVM raises itself.",
                  patches=(_JM_LOG, "ops:collect the JVM's view")),
        RootCause("thrown-by-environment", "The network, storage or file system around the job failed it.",
                  "The deepest cause is a java.net / java.nio.file / storage client exception, or its message "
                  "names a refused connection, a timeout, a full disk or a denied permission.",
                  patches=(_JM_LOG, "ops:check the host, network or storage at that time")),
        RootCause("undetermined", "The job failed, but the logs do not show which component threw the fault.",
                  "No exception is logged with the failure (nor at ERROR beside it), or it is a generic one without "
                  "frames.",
                  patches=(_JM_LOG, _TRACE),
                  next_evidence="the complete stack trace of the first failure (every 'Caused by:' with its first "
                                "frames), from the TaskManager that ran the failing task."),
    )

    templates = {
        "head": "The first fault{where} was {fault}.",
        "where": " in {task}",
        "thrown by": "It was thrown by {component}: {why}.",
        "thrower undetermined": "Which component threw it is undetermined: {why}.",
        "own code": "The job's own code on the stack: {frame}.",
        "job failed": "The job FAILED.",
        "job restarting": "The job restarted ({episodes} failure episode(s)).",
        "job recovered": "The job restarted {episodes} time(s) and was running again after the last restart.",
        "job unknown": "The excerpt does not show what became of the job.",
        "distinct faults": "{count} different faults appear across the episodes; the first one is named here.",
        "uncatalogued": "No catalogued runbook recognises this failure.",
        "unknown": "Unknown from these logs: {unknown}.",
        "unknown outcome": "whether the job failed or restarted and how often (an excerpt, no job state changes)",
        "unknown frames": "the frames of the deepest cause",
        "unknown exception": "the exception itself (none is logged with the failure)",
        "unknown exception elsewhere": "the exception itself (the failure's own record carries none)",
        "not with the failure": "the failure's own record carries no exception, and no exception logged at ERROR "
                                "comes before it",
        "first fault note": "first fault: {fault}",
        "logged apart": "The failure's own line carries no exception; the exception logged {when} it in the same "
                        "input is named as its fault.",
        "logged apart note": "the exception logged {when} the failure: {fault}",
        "collect the JobManager log": "The JobManager log around the failure shows the job's state changes, the first "
                                      "task that failed and whether restarts followed; an excerpt cannot show the "
                                      "first fault of the episode.",
        "collect the full stack trace": "The complete trace of the first failure (every 'Caused by:' and its first "
                                        "frames) tells whether the job's code, a library or Flink threw it.",
        "guard the code": "Reproduce with the failing record (the task and frames above say where); guard bad input "
                          "instead of letting one record fail the job over and over.",
        "check the connector": "Look at the external system's own logs at the time of the fault and compare the "
                               "connector version with the Flink version it was built for.",
        "check the environment": "The fault came from outside the job: check the host's disk, DNS and network, and "
                                 "the storage service's health at the time of the first fault.",
        "collect the JVM's view": "For class-loading errors compare the job jar's dependencies with Flink's lib/ (mvn "
                                  "dependency:tree); for resource errors the TaskManager's memory configuration and a "
                                  "heap dump.",
        "search the issue tracker": "A Flink-internal exception outside the catalogue may be a known bug of this "
                                    "version: search issues.apache.org/jira/projects/FLINK for the class and message, "
                                    "and note the exact Flink version.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = failure_events(incident)
        if not failures:
            return []
        event = first_fault(incident) or failures[0]
        fault = read_fault(event)
        # A failure line without its exception (a job's state change) while the input holds one: name that one
        # rather than claim none is logged.
        apart = _exception_near(incident, event) if fault.deepest is None else None
        if apart is not None:
            event = apart[0]
            fault = read_fault(event)
        # exceptions elsewhere in the input (a WARN, a consequence of another fault) are not this failure's, but
        # the answer never claims that none is logged
        logged_elsewhere = fault.deepest is None and any(ev.chain for ev in incident.events)
        if logged_elsewhere:
            fault.why = self.say("not with the failure")
        eps = [ep for ep in episodes(incident) if ep.failures or ep.outcome in ("restarting", "failed")]
        excerpt = is_excerpt(incident)
        # An excerpt shows a task's failure, not what the job did next.
        outcome = "unknown" if excerpt else _outcome(eps)
        cause = _CAUSE_OF[fault.component]
        unknown = []
        if excerpt:
            unknown.append(self.say("unknown outcome"))
        if not fault.user_frames and fault.component in (None, "user code"):
            unknown.append(self.say("unknown frames"))
        if fault.deepest is None:
            unknown.append(self.say("unknown exception elsewhere" if logged_elsewhere else "unknown exception"))
        confidence = 0.6 if fault.component and not excerpt else 0.45 if fault.component else 0.3
        if apart is not None:
            confidence = min(confidence, 0.45)
        # Numbers (record ids, offsets, ports) differ between attempts of the same fault.
        distinct = sorted({re.sub(r"\d+", "N", read_fault(ev).text) for ep in eps for ev in ep.failures
                           if not is_secondary(ev)})
        summary = self._summary(fault, outcome, eps, unknown, distinct, apart[1] if apart else None)
        evidence = [event] + [ev for ev in failures if ev is not event][:3]
        notes = {0: self.say("logged apart note", when=apart[1], fault=fault.text[:200]) if apart is not None
                 else self.say("first fault note", fault=fault.text[:200])}
        details = {
            "first_fault": fault.text,
            "task_or_operator": fault.task or "unknown",
            "component": fault.component or "undetermined",
            "why_that_component": fault.why,
            "user_code_frames": fault.user_frames[:8] or "none kept",
            "outcome": outcome,
            "failure_episodes": len(eps),
            "distinct_faults": distinct[:6],
            "unknown": unknown or "nothing",
        }
        return [self.finding(cause, summary, evidence, confidence=confidence, notes=notes, details=details,
                             patches=self._patches(fault, excerpt),
                             severity="warning" if outcome == "recovered" and len(eps) == 1 else "failure")]

    def _summary(self, fault, outcome, eps, unknown, distinct, logged_apart: str | None = None) -> str:
        parts = [self.say("head", where=self.say("where", task=fault.task) if fault.task else "",
                          fault=fault.text[:300].rstrip("."))]
        parts.append(self.say("thrown by", component=fault.component, why=fault.why) if fault.component
                     else self.say("thrower undetermined", why=fault.why))
        if fault.user_frames:
            parts.append(self.say("own code", frame=_short(fault.user_frames[0])))
        parts.append(self.say(f"job {outcome}", episodes=len(eps)) if outcome in ("restarting", "recovered")
                     else self.say(f"job {outcome}"))
        if len(distinct) > 1:
            parts.append(self.say("distinct faults", count=len(distinct)))
        if logged_apart:
            parts.append(self.say("logged apart", when=logged_apart))
        parts.append(self.say("uncatalogued"))
        if unknown:
            parts.append(self.say("unknown", unknown="; ".join(unknown)))
        return " ".join(parts)

    def _patches(self, fault, excerpt: bool):
        out = []
        if excerpt:
            out.append(self.ops_patch(
                "collect the JobManager log", self.say("collect the JobManager log"),
                snippet="grep -n -E 'switched from (state )?RUNNING to (FAILED|FAILING|RESTARTING)' jobmanager.log"))
        if fault.component in (None, "user code"):
            out.append(self.ops_patch(
                "collect the full stack trace", self.say("collect the full stack trace"),
                snippet="grep -n -A 60 -E 'switched from RUNNING to FAILED' taskmanager*.log | head -120"))
        if fault.component == "user code":
            out.append(self.code_patch(
                "fix or guard the failing code",
                "// e.g. route bad records to a side output instead of throwing\nctx.output(badRecords, value);",
                self.say("guard the code")))
        if fault.component == "a connector":
            out.append(self.ops_patch("check the external system and the connector version",
                                      self.say("check the connector")))
        if fault.component == "the environment":
            out.append(self.ops_patch("check the host, network or storage at that time",
                                      self.say("check the environment")))
        if fault.component == "the JVM":
            out.append(self.ops_patch(
                "collect the JVM's view", self.say("collect the JVM's view"),
                snippet="jar tf job.jar | grep -i <missing class>; ls $FLINK_HOME/lib"))
        if fault.component == "Flink":
            out.append(self.ops_patch("search Flink's issue tracker", self.say("search the issue tracker")))
        return out


def _exception_near(incident: Incident, failure: Event) -> tuple[Event, str] | None:
    """The exception record nearest the failure that is not a known consequence of another fault (the last one
    logged before it, else the first after it), with "before" or "after"; None when the input holds none."""
    from flink_runbooks.evidence.episodes import is_secondary

    candidates = [ev for ev in incident.events if ev.chain and ev.level in (None, "ERROR", "FATAL")
                  and not is_secondary(ev)]
    if not candidates:
        return None
    order = {id(ev): i for i, ev in enumerate(incident.events)}
    at = order.get(id(failure), 0)
    before = [ev for ev in candidates if (ev.ts or "") <= (failure.ts or "~") and order[id(ev)] <= at]
    if before:
        return before[-1], "before"
    return candidates[0], "after"


def _short(frame: str) -> str:
    """``at com.acme.Foo.bar(Foo.java:12) ~[job.jar:?]`` -> ``com.acme.Foo.bar(Foo.java:12)``."""
    return re.sub(r"\s+[~\[].*$", "", frame.strip().removeprefix("at "))


def _outcome(eps) -> str:
    if not eps:
        return "unknown"
    if any(ep.outcome == "failed" for ep in eps):
        return "failed"
    last = eps[-1]
    if last.outcome == "restarting":
        return "recovered" if last.recovered else "restarting"
    return "restarting" if last.outcome == "open" and last.failures else "unknown"

