"""``Task did not exit gracefully within N + seconds``: a cancelled task never left its code, so the TaskManager
killed itself.

When a task is cancelled (the job is cancelled, or another task failed and the job fails over) Flink interrupts the
task thread every ``task.cancellation.interval`` and logs where the thread is stuck. If the thread is still alive
after ``task.cancellation.timeout`` the watchdog raises a fatal error and the whole TaskManager JVM exits, taking
every other task in its slots down with it.

Where the thread was stuck is in the stack the warnings print (bare frames, without ``at``): frames of the job's
own classes in record processing mean the job's code blocks in I/O or catches ``InterruptedException`` and carries
on; frames in the job's ``close()`` path (``closeAllOperators``/``disposeAllOperators``) with a timeout lowered below
Flink's default mean a slow but working clean-up was cut short; frames only of Flink or a library point at a
blocked connector or I/O call. A cancellation that ends in ``CANCELED`` before the watchdog fires is no finding.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.evidence.faults import is_framework
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.detectors.base import Detector
from flink_runbooks.vocabulary.wordings import Wording
from flink_runbooks.vocabulary.units import format_duration
from flink_runbooks.vocabulary.lifecycle import TASK_CANCELED

SLUG = "task-cancellation-timeout"
DEFAULT_TIMEOUT_MS = 180_000  # TaskManagerOptions.TASK_CANCELLATION_TIMEOUT, 1.x and 2.x

# Task.logTaskThreadStackTrace (1.13+) and TaskInterrupter (<= 1.12): the warning that carries the stuck stack.
STUCK = re.compile(
    r"Task '(?P<task>[^']+)' did not react to cancelling signal(?: - (?P<action>interrupting|notifying TM); it is "
    r"stuck for (?P<secs>\d+) seconds in method:| for (?P<old_secs>\d+) seconds, but is stuck in method:)")
# Task.TaskCancelerWatchDog: the fatal error (logged by TaskExecutor and again by TaskManagerRunner).
WATCHDOG = re.compile(r"Task did not exit gracefully within (?P<secs>\d+) \+ seconds")
JVM_EXIT = re.compile(r"Terminating TaskManagerRunner with exit code (?P<code>-?\d+)|"
                      r"Fatal error occurred while executing the TaskManager|Encountered fatal error \S+ - terminating the JVM")
# A thread-dump frame as Task prints it (no "at", a module or class-loader prefix) or as a pasted stack has it; found
# anywhere in a line, since wrapped or joined pastes put several frames on one line.
FRAME = re.compile(r"(?:^|\s)(?:at\s+)?(?:[\w.-]+@[\w.-]+/|[\w.-]+//|[\w.]+/)?(?P<name>[A-Za-z_$][\w$]*(?:\.[\w$]+)+)"
                   r"\.(?P<method>[\w$<>]+)\((?P<where>[\w$.]+:\d+|Native Method|Unknown Source)\)")
# Flink's clean-up path: an operator being closed (1.14+) or disposed (<= 1.13) after the task left its main loop.
CLOSE_PATH = re.compile(r"\.(?:closeAllOperators|disposeAllOperators|closeFunction|cleanUpInvoke|cleanUpInternal|"
                        r"cleanUp|closeOperator|afterInvoke)\(")
# What a thread blocked (rather than busy) sits in: sleeping, waiting, parked, or in a socket/file read.
WAITING = re.compile(r"java\.lang\.Thread\.sleep|java\.lang\.Object\.wait|jdk\.internal\.misc\.Unsafe\.park|"
                     r"sun\.misc\.Unsafe\.park|LockSupport\.park")
BLOCKING_IO = re.compile(r"SocketInputStream\.|NioSocketImpl\.|SocketDispatcher\.|sun\.nio\.ch\.\w+\.(?:read|poll|"
                         r"connect|accept)|FileDispatcherImpl\.|java\.net\.\w+\.(?:connect|read|accept)|"
                         r"HttpURLConnection|sun\.nio\.ch\.Net\.poll")

_FRAME_LINE = (r"^\s?(?:[\w.-]+@[\w.-]+/|[\w.-]+//)?[\w$]+(?:\.[\w$]+)+\.[\w$<>]+\((?:[\w$]+\.(?:java|scala|kt):\d+|"
               r"Native Method|Unknown Source)\)$")


@dataclass
class StuckReport:
    """One "did not react to cancelling signal" warning: the task, how long, and the frames it printed."""

    event: Event
    task: str
    seconds: int | None
    action: str | None
    frames: list[tuple[str, str]] = field(default_factory=list)  # (class, method) from the top of the stack

    @property
    def user_frames(self) -> list[tuple[str, str]]:
        return [(c, m) for c, m in self.frames if "." in c and not is_framework(c)]

    @property
    def in_close_path(self) -> bool:
        return any(CLOSE_PATH.search(f"{c}.{m}(") for c, m in self.frames)

    def top(self, n: int = 3) -> str:
        return " <- ".join(f"{c.rsplit('.', 1)[-1]}.{m}" for c, m in self.frames[:n])


def stuck_reports(incident: Incident) -> list[StuckReport]:
    """The stuck-thread warnings of the logs, after the stacks of a pulled thread dump (the threads of tasks the REST
    API showed CANCELING when the cluster was pulled), so a warning of the logs is preferred where both tell."""
    out = thread_dump_reports(incident)
    for ev in incident.events:
        m = STUCK.search(ev.message) or STUCK.search(ev.text)
        if not m:
            continue
        secs = m["secs"] or m["old_secs"]
        frames = []
        for line in ev.message.split("\n")[1:] + ev.body + ev.frames:
            frames += [(f["name"], f["method"]) for f in FRAME.finditer(line)]
        out.append(StuckReport(ev, m["task"], int(secs) if secs else None, m["action"], frames))
    return out


THREAD_DUMP = "thread dump"
# "Map (1/2)#0" Id=67 TIMED_WAITING: a task thread is named after its task and attempt.
_TASK_THREAD = re.compile(r"^(?P<task>.+ \(\d+/\d+\))#\d+$")


def cancelling_tasks(incident: Incident) -> set[str]:
    """Names of the job vertices that had CANCELING subtasks when the cluster was pulled (``GET /jobs/:jobid``)."""
    return {v.name for snapshot in incident.rest for job in snapshot.jobs for v in job.vertices
            if v.tasks.get("CANCELING") or v.status == "CANCELING"}


def thread_dump_reports(incident: Incident) -> list[StuckReport]:
    """Where each task thread of a cancelling vertex was when the pull took its TaskManager's thread dump."""
    vertices = cancelling_tasks(incident)
    out = []
    for snapshot in incident.rest:
        for tm in snapshot.taskmanagers:
            for thread in tm.threads:
                m = _TASK_THREAD.match(thread.name)
                if not m or m["task"].rsplit(" (", 1)[0] not in vertices:
                    continue
                lines = thread.text.splitlines()
                frames = [(f["name"], f["method"]) for line in lines[1:] for f in FRAME.finditer(line)]
                event = Event(file=thread.file or tm.document or "thread-dump", line=thread.line or 0,
                              ts=None, level=None, logger=THREAD_DUMP, thread=thread.name,
                              message=lines[0] if lines else thread.name, frames=lines[1:40], role="taskmanager")
                out.append(StuckReport(event, thread.name, None, THREAD_DUMP, frames))
    return out


class TaskCancellationTimeout(Detector):
    slug = SLUG
    title = "Task did not exit within the cancellation timeout"
    category = "cluster"
    meaning = ("A cancelled task (job cancelled, or cancelled during a failover) did not leave its code within "
               "task.cancellation.timeout, so Flink declared a fatal error and the whole TaskManager JVM exited.")
    versions = "1.3 – 2.x (the watchdog and its message unchanged; the stuck-thread warning reworded in 1.13)"
    exception_classes = ("org.apache.flink.util.FlinkRuntimeException",)
    config_keys = (
        "task.cancellation.timeout",
        "task.cancellation.interval",
        "restart-strategy.type",
    )
    signatures = (
        r"did not react to cancelling signal",
        r"Task did not exit gracefully within \d+ \+ seconds",
        r"Terminating TaskManagerRunner with exit code",
        r"switched from CANCELING to CANCELED",
        _FRAME_LINE,
    )
    wordings = (
        Wording(SLUG, r"did not react to cancelling signal for \d+ seconds, but is stuck in method",
                "1.3 – 1.12", "org.apache.flink.runtime.taskmanager.Task$TaskInterrupter (read in 1.9.3, 1.10.3, 1.11.4, "
                "1.12.5)",
                "Task 'Map (1/4)' did not react to cancelling signal for 30 seconds, but is stuck in method:"),
        Wording(SLUG, r"did not react to cancelling signal - (?:interrupting|notifying TM); it is stuck for \d+ seconds",
                "1.13 – 2.x", "org.apache.flink.runtime.taskmanager.Task.logTaskThreadStackTrace (read in 1.13.6, "
                "1.17.2, 1.20.3, 2.3.0)",
                "Task 'Source: order-ids -> enrich-orders (1/1)#0' did not react to cancelling signal - interrupting; "
                "it is stuck for 2 seconds in method:"),
        Wording(SLUG, r"Task did not exit gracefully within \d+ \+ seconds",
                "1.3 – 2.x", "org.apache.flink.runtime.taskmanager.Task$TaskCancelerWatchDog (read in 1.9.3 to 1.13.6, "
                "1.17.2, 1.20.3, 2.3.0)",
                "org.apache.flink.util.FlinkRuntimeException: Task did not exit gracefully within 180 + seconds."),
    )
    root_causes = (
        RootCause("user-code-ignores-cancellation",
                  "The job's own code held the task thread and did not give it back when interrupted: it blocks in "
                  "an I/O call without a timeout, or catches InterruptedException and carries on.",
                  "The stuck-thread warnings show frames of the job's own classes (outside the JDK, Flink and the "
                  "libraries it runs) on top of the task's stack, in record processing, or in a close() that was "
                  "still running after the default timeout.",
                  patches=("code:let the job's code react to cancellation", "ops:restart the lost TaskManager"),
                  would_change="If the frames were in close() and task.cancellation.timeout had been lowered below "
                               "180 s, a slow clean-up would be cut short (cancellation-timeout-too-low); if no frame "
                               "were the job's, a connector or Flink itself would be blocked."),
        RootCause("cancellation-timeout-too-low",
                  "The task was closing its operators (a flush or clean-up that takes time) when "
                  "task.cancellation.timeout, lowered below Flink's default, ran out.",
                  "The stuck frames are in the operators' close/dispose path and task.cancellation.timeout is set "
                  "below the 180 s default.",
                  patches=("flink:task.cancellation.timeout", "code:bound the time close() may take",
                           "ops:restart the lost TaskManager"),
                  would_change="If the same close() frames were still stuck after 180 s, or the frames were in "
                               "record processing, the code itself would not stop (user-code-ignores-cancellation)."),
        RootCause("blocked-in-framework",
                  "The task thread was blocked in Flink's or a library's code (a connector's client, a file system, "
                  "a network call), not in the job's own classes.",
                  "Stuck frames are present and none of them is a class of the job; the top frames name the "
                  "library or Flink component that blocked.",
                  patches=("ops:take thread dumps while a cancellation hangs", "ops:restart the lost TaskManager"),
                  would_change="A frame of the job's own code on the stuck stack would put the cause there."),
        RootCause("undetermined",
                  "The watchdog killed the TaskManager, but the logs at hand do not show where the task was stuck.",
                  "'Task did not exit gracefully within N + seconds' without any 'did not react to cancelling "
                  "signal' warning carrying the stuck stack.",
                  patches=("ops:restart the lost TaskManager",),
                  next_evidence="the TaskManager log from the cancellation to the exit (the WARN lines 'Task … did "
                                "not react to cancelling signal … stuck … in method:' and the frames under them), and "
                                "the job's task.cancellation.timeout / task.cancellation.interval; if the log is "
                                "gone, `jstack <TaskManager pid>` during the next cancellation."),
    )

    templates = {
        "head": "Task '{task}' did not exit within {limit} of being cancelled: the cancellation watchdog raised a "
                "fatal error and the TaskManager JVM exited, failing every task it ran. ",
        "head unconfirmed": "Task '{task}' did not react to being cancelled; whether it exited before {limit} is not "
                            "in this excerpt (no 'Task did not exit gracefully' and no CANCELED state). ",
        "head hanging": "Task '{task}' was still cancelling when the cluster was pulled: its TaskManager's thread "
                        "dump shows where. Unless it returns within {limit} of being cancelled, the watchdog ends the "
                        "whole TaskManager JVM. ",
        "stuck": "The task thread was {state} in {top}{job_frame}{close_path}. ",
        "job frame": "; the job's own code on the stack: {frame}",
        "close path": " (the operators' close path)",
        "cancellation-timeout-too-low": "{summary} {limit} is below Flink's default of 3 min; the close was still "
                                        "working when it ran out.",
        "never returns": " A longer timeout would only delay the same kill: the code never returns.",
        # evidence notes
        "watchdog note": "the watchdog's fatal error: the TaskManager JVM exits",
        "stuck note": "where the task thread was stuck: {top}",
        "first interrupt note": "the first interrupt that did not stop the task",
        "thread dump note": "the task thread in the thread dump taken while it was cancelling: {top}",
        "exit note": "the TaskManager process ends",
        # patches
        "react to cancellation": "{frame} kept the task thread after Flink interrupted it. Give every blocking call a "
                                 "timeout, stop when the thread is interrupted (restore the flag and return or "
                                 "throw), and never catch InterruptedException to retry. A longer "
                                 "task.cancellation.timeout would not help: the code does not return at all.",
        "default timeout": "The operators were still closing when {timeout} ran out; Flink's default ({default}) "
                           "leaves a flush time to finish before the TaskManager is killed. Milliseconds, read by "
                           "every release.",
        "bound close": "A close() that flushes to an external system should give up after a bounded time (the data is "
                       "replayed from the last checkpoint anyway), so no timeout has to be sized to the slowest "
                       "flush.",
        "thread dumps": "The thread was blocked in {top}, outside the job's code. Take `jstack` dumps of the "
                        "TaskManager while the next cancellation hangs, and check that component (connector client "
                        "timeouts, the file system, the external service it waits for).",
        "restart the lost TaskManager": "The watchdog ends the whole TaskManager JVM. On Kubernetes or YARN a new one "
                                        "is started; a standalone cluster needs `bin/taskmanager.sh start` on that "
                                        "host, or the job waits for slots.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        watchdog = [ev for ev in incident.events if WATCHDOG.search(ev.text)]
        reports = stuck_reports(incident)
        excerpt = is_excerpt(incident)
        fatal_reports = [r for r in reports if r.action == "notifying TM"]
        hanging = [r for r in reports if r.action == THREAD_DUMP]
        if not watchdog and not fatal_reports:
            if hanging:
                return self._hanging(incident, hanging)
            if not reports or not excerpt or _cancellation_finished(incident, reports):
                return []  # warnings, then the task left in time (or nothing at all): a slow but working cancel
        timeout_ms = incident.config.get_duration_ms("task.cancellation.timeout")
        if watchdog:
            secs = int(WATCHDOG.search(watchdog[0].text)["secs"])
            observed_ms = secs * 1000
        elif fatal_reports and fatal_reports[0].seconds is not None:
            observed_ms = fatal_reports[0].seconds * 1000
        else:
            observed_ms = None
        effective_ms = timeout_ms if timeout_ms is not None else observed_ms
        lowered = effective_ms is not None and 0 < effective_ms < DEFAULT_TIMEOUT_MS
        with_frames = [r for r in reports if r.frames]
        # The stack closest to the watchdog says where the thread was when the TaskManager was killed.
        decisive = (fatal_reports and fatal_reports[0].frames and fatal_reports[0]) or (
            with_frames[-1] if with_frames else None)
        user = decisive.user_frames if decisive else []
        close_path = bool(decisive and decisive.in_close_path)
        if decisive is None:
            cause = "undetermined"
        elif close_path and lowered:
            cause = "cancellation-timeout-too-low"
        elif user:
            cause = "user-code-ignores-cancellation"
        else:
            cause = "blocked-in-framework"
        exits = [ev for ev in incident.events if JVM_EXIT.search(ev.message)]
        confirmed = bool(watchdog or fatal_reports)
        confidence = 0.9 if confirmed and decisive is not None else 0.7 if confirmed else 0.45
        if excerpt:
            confidence -= 0.15
        task = decisive.task if decisive else (reports[0].task if reports else None)
        details = {
            "task": task,
            "cancellation_timeout": (format_duration(effective_ms) if effective_ms is not None else "unknown")
            + ("" if timeout_ms is not None else " (from the watchdog's message)" if observed_ms else ""),
            "cancellation_timeout_source": _source(incident, "task.cancellation.timeout") if timeout_ms is not None
            else "the watchdog's message (the configuration at hand does not set it)" if observed_ms
            else "Flink default (not set)",
            "stuck_warnings": len(reports),
            "taskmanager_exited": bool(exits) or bool(watchdog),
        }
        if decisive is not None:
            details["stuck_in"] = decisive.top(4)
            details["job_frames_on_stack"] = [f"{c}.{m}" for c, m in decisive.user_frames[:6]] or "none"
            details["in_close_path"] = close_path
            details["thread_state"] = _thread_state(decisive)
        summary = self._summary(cause, decisive, task, effective_ms, watchdog, exits, confirmed, lowered)
        interrupts = [r for r in reports if r.action != THREAD_DUMP]
        evidence, notes = [], {}
        for ev, note in ((watchdog[0] if watchdog else None, self.say("watchdog note")),
                         (decisive.event if decisive else None,
                          self.say("stuck note", top=decisive.top(3)) if decisive else ""),
                         (interrupts[0].event if interrupts and decisive is not interrupts[0] else None,
                          self.say("first interrupt note")),
                         (exits[-1] if exits else None, self.say("exit note"))):
            if ev is not None and all(ev is not e for e in evidence):
                notes[len(evidence)] = note
                evidence.append(ev)
        patches = self._patches(incident, cause, decisive, effective_ms, timeout_ms)
        return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details)]

    def _hanging(self, incident: Incident, hanging: list[StuckReport]) -> list[Finding]:
        """A task still cancelling when the cluster was pulled, its thread dump at hand: where it hangs, before the
        watchdog ends the TaskManager (a warning: nothing has failed yet because of it)."""
        decisive = next((r for r in hanging if r.user_frames), hanging[0])
        if not decisive.frames:
            return []
        timeout_ms = incident.config.get_duration_ms("task.cancellation.timeout")
        limit = format_duration(timeout_ms if timeout_ms is not None else DEFAULT_TIMEOUT_MS)
        cause = "user-code-ignores-cancellation" if decisive.user_frames else "blocked-in-framework"
        job_frame = ""
        if decisive.user_frames:
            c, m = decisive.user_frames[0]
            job_frame = self.say("job frame", frame=f"{c}.{m}")
        summary = (self.say("head hanging", task=decisive.task, limit=limit)
                   + self.say("stuck", state=_thread_state(decisive), top=decisive.top(3), job_frame=job_frame,
                              close_path=self.say("close path") if decisive.in_close_path else "")
                   + self.cause(cause).summary)
        details = {"task": decisive.task, "stuck_in": decisive.top(4),
                   "job_frames_on_stack": [f"{c}.{m}" for c, m in decisive.user_frames[:6]] or "none",
                   "thread_state": _thread_state(decisive), "in_close_path": decisive.in_close_path,
                   "cancellation_timeout": limit, "cancellation_timeout_source": _source(incident, "task.cancellation.timeout"),
                   "taskmanager_exited": False}
        patches = [p for p in self._patches(incident, cause, decisive, timeout_ms, timeout_ms)
                   if p.key != "restart the lost TaskManager"]
        return [self.finding(cause, summary, [decisive.event], notes={0: self.say("thread dump note",
                                                                                  top=decisive.top(3))},
                             confidence=0.6, patches=patches, severity="warning", details=details)]

    def _summary(self, cause, decisive, task, effective_ms, watchdog, exits, confirmed, lowered) -> str:
        limit = format_duration(effective_ms) if effective_ms is not None else "the cancellation timeout"
        head = self.say("head" if confirmed else "head unconfirmed", task=task or '?', limit=limit)
        where = ""
        if decisive is not None:
            job_frame = ""
            if decisive.user_frames:
                c, m = decisive.user_frames[0]
                job_frame = self.say("job frame", frame=f"{c}.{m}")
            where = self.say("stuck", state=_thread_state(decisive), top=decisive.top(3), job_frame=job_frame,
                             close_path=self.say("close path") if decisive.in_close_path else "")
        body = self.cause(cause).summary
        if cause == "cancellation-timeout-too-low":
            body = self.say(cause, summary=body, limit=limit)
        elif cause == "user-code-ignores-cancellation" and lowered and decisive and not decisive.in_close_path:
            body += self.say("never returns")
        return head + where + body

    def _patches(self, incident, cause, decisive, effective_ms, timeout_ms):
        patches = []
        if cause == "user-code-ignores-cancellation":
            frame = f"{decisive.user_frames[0][0]}.{decisive.user_frames[0][1]}" if decisive.user_frames else "the job's code"
            patches.append(self.code_patch(
                "let the job's code react to cancellation", _INTERRUPT_SNIPPET,
                self.say("react to cancellation", frame=frame)))
        elif cause == "cancellation-timeout-too-low":
            proposed = max(DEFAULT_TIMEOUT_MS, (effective_ms or 0) * 3)
            patches.append(self.flink_patch(
                incident, "task.cancellation.timeout", str(proposed),
                self.say("default timeout", timeout=format_duration(effective_ms),
                         default=format_duration(DEFAULT_TIMEOUT_MS))))
            patches.append(self.code_patch("bound the time close() may take", _CLOSE_SNIPPET, self.say("bound close")))
        elif cause == "blocked-in-framework":
            top = decisive.top(3) if decisive else "?"
            patches.append(self.ops_patch("take thread dumps while a cancellation hangs",
                                          self.say("thread dumps", top=top), urgent=False))
        patches.append(self.ops_patch(
            "restart the lost TaskManager", self.say("restart the lost TaskManager"),
            snippet="bin/taskmanager.sh start"))
        return patches


def _thread_state(report: StuckReport) -> str:
    names = [f"{c}.{m}" for c, m in report.frames[:4]]
    text = " ".join(names)
    if BLOCKING_IO.search(text):
        return "blocked in I/O"
    if WAITING.search(text):
        return "sleeping or waiting (interrupts did not end it)"
    return "running (busy, not reacting to interrupts)"


def _cancellation_finished(incident: Incident, reports: list[StuckReport]) -> bool:
    tasks = {r.task.split("#")[0] for r in reports}
    for ev in incident.events:
        m = TASK_CANCELED.search(ev.message)
        if m and m["task"] in tasks:
            return True
    return False


def _source(incident: Incident, key: str) -> str:
    current = incident.config.lookup(key)
    return str(current.source) if current else "Flink default (not set)"


_INTERRUPT_SNIPPET = """\
// wait with a deadline and give the thread back when Flink interrupts it
while (!lookupService.isAvailable()) {
    try {
        Thread.sleep(500);
    } catch (InterruptedException e) {
        Thread.currentThread().interrupt();  // keep the flag: the task is being cancelled
        throw new RuntimeException("cancelled while waiting for the lookup service", e);
    }
}
// blocking clients: set connect/read timeouts (socket.setSoTimeout, HTTP client timeouts) so no call waits forever"""

_CLOSE_SNIPPET = """\
@Override
public void close() throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    for (Batch batch : buffered) {
        if (System.nanoTime() > deadline || Thread.currentThread().isInterrupted()) {
            LOG.warn("Giving up the flush on close: the records are replayed from the last checkpoint");
            break;
        }
        client.flush(batch, Duration.ofSeconds(10));  // a flush with its own timeout
    }
    super.close();
}"""
