"""``java.lang.OutOfMemoryError: Metaspace``: too many classes for the metaspace, or class loaders that leak."""
from __future__ import annotations

import re

from flink_runbooks.evidence.memory import oom
from flink_runbooks.evidence.episodes import episodes, fault_text
from flink_runbooks.evidence.memory import MemoryConfigError
from flink_runbooks.model import Event, Finding, Incident, Patch, RootCause
from flink_runbooks.evidence.memory.incident import model_applies
from flink_runbooks.vocabulary.units import format_size, parse_memory_size
from flink_runbooks.detectors.base import Detector
from flink_runbooks.vocabulary.lifecycle import JOB_RUNNING
from flink_runbooks.vocabulary.wordings import Wording

RESTART_LOOP = 3  # restarts before the OOM from which the restarts, not the job's size, explain it
CLOSED_CLASSLOADER = re.compile(r"Trying to access closed classloader")
# Before 1.10 Flink sets no metaspace limit: the JVM's is unbounded unless the user's JVM options set one.
MAX_METASPACE = re.compile(r"-XX:MaxMetaspaceSize=(?P<size>\d+[kKmMgG]?)")
_ENV_KEYS = {"taskmanager": ("env.java.opts.taskmanager", "env.java.opts"),
             "jobmanager": ("env.java.opts.jobmanager", "env.java.opts")}
_JVM_OPTS = tuple(f"flink:{k}" for k in ("env.java.opts.taskmanager", "env.java.opts.jobmanager", "env.java.opts"))

# Flink's enriched OutOfMemoryError message (TaskManager, 1.12+).
TM_METASPACE_MESSAGE = ("java.lang.OutOfMemoryError: Metaspace. The metaspace out-of-memory error has occurred. This can mean two "
                        "things: either the job requires a larger size of JVM metaspace to load classes or there is a class loading "
                        "leak. In the first case 'taskmanager.memory.jvm-metaspace.size' configuration option should be increased.")


class OomMetaspace(Detector):
    slug = "oom-metaspace"
    title = "OutOfMemoryError: Metaspace"
    category = "memory"
    meaning = ("The JVM's metaspace (class metadata, -XX:MaxMetaspaceSize) is full: the job loads more classes than "
               "it allows, or user-code class loaders of earlier jobs/attempts are never unloaded.")
    exception_classes = ("java.lang.OutOfMemoryError",)
    versions = "1.10 – 2.x (Flink appends a hint about taskmanager.memory.jvm-metaspace.size; default 256m since "\
               "1.10.1, 96m in 1.10.0)"
    layer = 0
    config_keys = (
        "taskmanager.memory.jvm-metaspace.size",
        "taskmanager.memory.process.size",
        "jobmanager.memory.jvm-metaspace.size",
        "classloader.resolve-order",
        "classloader.check-leaked-classloader",
        "classloader.fail-on-metaspace-oom-error",
    )
    signatures = (
        r"OutOfMemoryError: (?:Metaspace|Compressed class space)",
        r"Trying to access closed classloader",
        *oom.CONTEXT_SIGNATURES,
    )
    root_causes = (
        RootCause("classloader-leak", "Class loaders of earlier job submissions are never unloaded: a library in the "
                  "job jar registers itself globally (JDBC drivers, static caches, threads, shutdown hooks) and pins "
                  "its class loader, so every (re)submission adds its classes again.",
                  "Several job submissions to the same session cluster before the OOM, or 'Trying to access closed "
                  "classloader' warnings.",
                  patches=("flink:taskmanager.memory.jvm-metaspace.size", "flink:taskmanager.memory.process.size",
                           "ops:stop the class-loader leak", "flink:taskmanager.memory.*", *_JVM_OPTS)),
        RootCause("restart-loop-leak", "The job restarted many times, and each attempt left its classes behind: the "
                  "restarts drive the leak.",
                  f"{RESTART_LOOP} or more RESTARTING cycles of the job before the OOM.",
                  patches=("flink:taskmanager.memory.jvm-metaspace.size", "flink:taskmanager.memory.process.size",
                           "ops:fix the restarts", "flink:taskmanager.memory.*", *_JVM_OPTS)),
        RootCause("undetermined", "The metaspace ran out, but the logs do not reach back to the job's start: "
                  "earlier submissions or restarts (a leak) cannot be ruled out.",
                  "A metaspace OOM without the job's or the process's start in the logs.",
                  would_change="The JobManager log since the cluster started: several submissions or 'Trying to "
                               "access closed classloader' mean a leak, a restart loop means restart-driven leaking, "
                               "a first attempt means the metaspace is too small.",
                  next_evidence="the JobManager log since the cluster started (job submissions, RESTARTING "
                                "transitions), the TaskManager log from its start, and "
                                "`jcmd <pid> VM.classloader_stats` on the process while it runs."),
        RootCause("metaspace-too-small", "The job simply needs more class metadata than the metaspace holds (many "
                  "connectors and formats, code-generated SQL operators).",
                  "The OOM comes on the first attempt, without earlier submissions or restarts.",
                  patches=("flink:jobmanager.memory.jvm-metaspace.size", "flink:jobmanager.memory.process.size",
                           "flink:taskmanager.memory.jvm-metaspace.size", "flink:taskmanager.memory.process.size", "flink:taskmanager.memory.*", "flink:jobmanager.memory.*",
                           *_JVM_OPTS)),
    )

    wordings = (
        Wording("oom-metaspace", r"OutOfMemoryError:\s*Metaspace",
                "1.3 – 2.x", "the JVM", "java.lang.OutOfMemoryError: Metaspace"),
        Wording("oom-metaspace", r"The metaspace out-of-memory error has occurred",
                "1.10 – 2.x", "TaskManagerExceptionUtils / ClusterEntryPointExceptionUtils (enrichment of the JVM's message)", TM_METASPACE_MESSAGE),
        Wording("oom-metaspace", r"'(?:taskmanager|jobmanager)\.memory\.jvm-metaspace\.size' configuration option should be increased",
                "1.10 – 2.x", "TaskManagerExceptionUtils.TM_METASPACE_OOM_ERROR_MESSAGE", TM_METASPACE_MESSAGE),
    )

    templates = {
        "size unknown": "size unknown",
        "legacy limit": "Before 1.10 Flink sets no metaspace limit of its own: this one is the JVM option, and only its "
                        "value changes.",
        "head": "The {role}'s metaspace ({metaspace}, {source}) ran out {occurrences} time(s){fatal}. ",
        "fatal": " and took the process down",
        "classloader-leak": "{told}: class loaders of earlier jobs or attempts stay in the metaspace. More metaspace "
                            "only delays the next OOM; the leak must go.",
        "submissions": "{count} job submissions reached this cluster by then{names}",
        "closed warnings": "{count} 'Trying to access closed classloader' warning(s) were logged",
        "restart-loop-leak": "The job restarted {restarts} time(s) before it{first_fault}; each attempt loads the job's "
                             "classes again and some are never unloaded. Fix what makes it restart.",
        "metaspace-too-small": "It came on the job's first attempt, without earlier submissions or restarts: the job "
                               "needs more metaspace than configured.",
        "undetermined": "Root cause undetermined: the logs do not reach back to the job's start, so a class-loader "
                        "leak over earlier submissions or restarts cannot be told from a metaspace that is too small.",
        "grow": "{factor:g}x the metaspace ({before} → {after}); the other pools keep their size (model-checked).{stopgap}",
        "stopgap": " A stopgap: a leak fills any size, but it buys time between failures.",
        "stop the leak": "Put the libraries that register themselves globally (JDBC drivers, Hadoop, connectors with "
                         "static caches or threads) into Flink's lib/ (loaded once, by the parent class loader) and "
                         "mark them 'provided' in the job jar; or run each job in application mode, so its JobManager "
                         "and TaskManagers end with it. Do not set classloader.check-leaked-classloader: false to "
                         "silence 'Trying to access closed classloader': that is only for benign cases (a Hadoop "
                         "shutdown hook after the job ended), it hides the leak without freeing anything.",
        "fix the restarts": "Each restart loads the job's classes into a new class loader; what keeps the old ones "
                            "alive grows the metaspace until it breaks. Fix the failure that keeps restarting the "
                            "job{first_fault}, then the leak (libraries to lib/, close clients and threads in "
                            "close()).",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        found = oom.occurrences(incident, "metaspace")
        if not found:
            return []
        first = found[0]
        restarts = oom.restarts_before(incident, first.ts)
        submissions = oom.submissions_before(incident, first.ts)
        closed = [ev for ev, _ in incident.find(CLOSED_CLASSLOADER) if not first.ts or (ev.ts or "") <= first.ts]
        uptimes = oom.uptimes(incident, found)
        if closed or len(submissions) > 1:
            cause = "classloader-leak"
        elif len(restarts) >= RESTART_LOOP:
            cause = "restart-loop-leak"
        elif self._start_seen(incident, first):
            cause = "metaspace-too-small"
        else:
            # The history before the OOM is not in view: a leak over earlier submissions or restarts is as likely.
            cause = "undetermined"
        jm = first.process == "jobmanager"
        metaspace, source = self._metaspace(incident, jm)
        first_fault = self._first_fault(incident, restarts)
        summary = self.say("head", role="JobManager" if jm else "TaskManager",
                           metaspace=oom.mib_text(metaspace) if metaspace else self.say("size unknown"),
                           source=source, occurrences=len(found), fatal=self.say("fatal") if first.fatal else "")
        if cause == "classloader-leak":
            names = sorted({name for _, _, name in submissions if name})
            told = []
            if len(submissions) > 1:
                told.append(self.say("submissions", count=len(submissions),
                                     names=f" ({', '.join(names[:3])})" if names else ""))
            if closed:
                told.append(self.say("closed warnings", count=len(closed)))
            summary += self.say(cause, told=" and ".join(told).capitalize())
        elif cause == "restart-loop-leak":
            summary += self.say(cause, restarts=len(restarts),
                                first_fault=f" (first fault: {first_fault})" if first_fault else "")
        else:
            summary += self.say(cause)
        evidence: list[Event] = [first.event]
        notes = {0: "the metaspace OOM" + (" (fatal: the process shuts down)" if first.fatal else "")}
        if cause == "classloader-leak":
            for ev in ([ev for ev, _, _ in submissions[-3:]] + closed[:2]):
                notes[len(evidence)] = ("closed class loader still in use" if CLOSED_CLASSLOADER.search(ev.text)
                                        else "a job submission to the same cluster")
                evidence.append(ev)
        elif cause == "restart-loop-leak":
            for ev in (restarts[:1] + restarts[-1:]):
                notes[len(evidence)] = "a restart of the job before the OOM"
                evidence.append(ev)
        for o in found[1:3]:
            notes[len(evidence)] = "it happened again"
            evidence.append(o.event)
        confidence = 0.4 if cause == "undetermined" else 0.85
        return [self.finding(
            cause, summary, evidence, confidence=confidence, notes=notes,
            patches=self._patches(incident, cause, jm, metaspace, first_fault),
            details={
                "occurrences": len(found),
                "process": first.process,
                "fatal": first.fatal,
                "metaspace": format_size(metaspace) if metaspace else None,
                "metaspace_source": source,
                "restarts_before_oom": len(restarts),
                "job_submissions_before_oom": len(submissions),
                "closed_classloader_warnings": len(closed),
                "first_fault_of_restarts": first_fault,
                "seconds_running_before_oom": [round(u, 1) if u is not None else None for u in uptimes],
            },
        )]

    @staticmethod
    def _start_seen(incident: Incident, first: oom.OomOccurrence) -> bool:
        """The logs show the job (or the TaskManager) starting before the OOM: its history is in view."""
        return any((ev.ts or "") <= (first.ts or "") and (JOB_RUNNING.search(ev.message) or oom.SUBMISSION.search(
            ev.message) or oom.TM_BANNER.search(ev.message)) for ev in incident.events if ev.ts) and bool(first.ts)

    @staticmethod
    def _metaspace(incident: Incident, jm: bool) -> tuple[int | None, str]:
        if not model_applies(incident):
            limit = _legacy_limit(incident, "jobmanager" if jm else "taskmanager")
            if limit is None:
                return None, (f"no -XX:MaxMetaspaceSize in the incident: Flink {incident.flink_version} sets none, so "
                              "one is set in JVM options the incident does not hold")
            return parse_memory_size(limit[1]), f"-XX:MaxMetaspaceSize in {limit[0]}"
        if jm:
            mem, source = oom.jobmanager_memory(incident)
            return (mem.metaspace or None) if mem else None, source
        sizing = oom.taskmanager_sizing(incident)
        if sizing.memory is not None:
            return sizing.memory.metaspace, sizing.source
        return None, sizing.source

    @staticmethod
    def _first_fault(incident: Incident, restarts: list[Event]) -> str | None:
        if not restarts:
            return None
        for ep in episodes(incident):
            fault = ep.first_fault
            if fault is not None and oom.oom_link(fault, "metaspace") is None:
                return fault_text(fault)[:200]
        return None

    def _patches(self, incident: Incident, cause: str, jm: bool, metaspace: int | None,
                 first_fault: str | None) -> list[Patch]:
        if cause == "undetermined":
            return []  # a bigger metaspace would only hide a leak until the logs show which it is
        factor = 2.0 if cause == "metaspace-too-small" else 1.5
        patches = self._grow(incident, jm, metaspace, factor, stopgap=cause != "metaspace-too-small")
        if cause == "classloader-leak":
            patches.append(self.ops_patch(
                "stop the class-loader leak", self.say("stop the leak"),
                "ls $FLINK_HOME/lib   # shared drivers belong here\n"
                "jcmd <pid> VM.classloader_stats   # many loaders of the same job jar = the leak\n"
                "jcmd <pid> GC.class_histogram | grep -c ChildFirstClassLoader"))
        elif cause == "restart-loop-leak":
            patches.append(self.ops_patch(
                "fix the restarts", self.say("fix the restarts", first_fault=f" ({first_fault})" if first_fault else "")))
        return patches

    def _grow(self, incident: Incident, jm: bool, metaspace: int | None, factor: float,
              stopgap: bool) -> list[Patch]:
        why = self.say("grow", factor=factor, before=oom.mib_text(metaspace),
                       after=oom.mib_text(int((metaspace or 0) * factor)), stopgap=self.say("stopgap") if stopgap else "")
        if not model_applies(incident):
            limit = _legacy_limit(incident, "jobmanager" if jm else "taskmanager")
            if limit is None or metaspace is None:
                return []
            where, size, opts = limit
            larger = f"-XX:MaxMetaspaceSize={-(-int(metaspace * factor) // (1 << 20))}m"
            # the user's own JVM options, with only the limit changed (a logged flag without the file: the flag alone)
            value = MAX_METASPACE.sub(larger, opts, count=1) if opts else larger
            key = where if where in _ENV_KEYS["jobmanager" if jm else "taskmanager"] else _ENV_KEYS[
                "jobmanager" if jm else "taskmanager"][0]
            return [self.flink_patch(incident, key, value, why + " " + self.say("legacy limit"))]
        try:
            if jm:
                changes = oom.grow_jobmanager_pool(incident, "metaspace", factor)
            else:
                sizing = oom.taskmanager_sizing(incident)
                if sizing.memory is None or not sizing.model:
                    return []
                changes = oom.changes_for(sizing, "metaspace", factor)
        except (ValueError, MemoryConfigError):
            return []
        return [self.flink_patch(incident, key, value, why) for key, value in changes.items()]


def _legacy_limit(incident: Incident, role: str) -> tuple[str, str, str | None] | None:
    """Where a release before 1.10 got its metaspace limit: (the configuration key or 'the JVM options logged at
    start-up', the size, the whole option string when it is the configuration's)."""
    for key in _ENV_KEYS[role]:
        opts = incident.config.get(key)
        m = MAX_METASPACE.search(opts or "")
        if m:
            return key, m["size"], opts
    for ev in incident.events:
        if ev.role == role or ev.role == "unknown":
            m = MAX_METASPACE.search(ev.message)
            if m:
                return "the JVM options logged at start-up", m["size"], None
    return None
