"""``RegistrationTimeoutException``: a TaskManager could not register at the ResourceManager and terminated.

Causes told apart from both sides' logs: the TaskManager dials a different address or port than the one the
JobManager's log says it bound (wrong ``jobmanager.rpc.address``/``port``); the JobManager was not up (its log shows it
stopping or failing to start, or the TaskManager had been registered at that very address and lost it); the name does
not resolve or the JobManager listens on another interface (``UnknownHostException``, ``jobmanager.bind-host``).
A longer ``taskmanager.registration.timeout`` is only ever a complement to a JobManager that comes back, never a fix for
an address that is wrong.
"""
from __future__ import annotations

import dataclasses
import re

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence import rpc_addresses as rpc
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording
from flink_runbooks.vocabulary.units import format_duration, parse_duration_ms

SLUG = "tm-registration-timeout"
_ADDRESS = ("flink:jobmanager.rpc.address", "flink:jobmanager.rpc.port")
_COLLECT_JM = "ops:collect the JobManager log"
_ISO = re.compile(r"PT(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>[\d.]+)S)?$")
_STILL_RETRYING = 6  # a minute of failed attempts (every 10 s) without a registration: stuck even without the timeout


def duration_ms(text: str | None) -> int | None:
    """``300000 ms`` (Flink ≤ 1.16) or ``PT5M`` (java.time.Duration, 1.17+) in milliseconds.

    >>> duration_ms("PT40S"), duration_ms("300000 ms"), duration_ms("PT5M")
    (40000, 300000, 300000)
    """
    if not text:
        return None
    m = _ISO.match(text.strip())
    if m and any(m.groupdict().values()):
        return int((int(m["h"] or 0) * 3600 + int(m["m"] or 0) * 60 + float(m["s"] or 0)) * 1000)
    return parse_duration_ms(text)


class TmRegistrationTimeout(Detector):
    slug = SLUG
    title = "TaskManager cannot register at the ResourceManager"
    category = "coordination"
    meaning = ("A TaskManager kept failing to reach the ResourceManager at the address it was given and terminated "
               "after taskmanager.registration.timeout (RegistrationTimeoutException); it never offered its slots.")
    versions = "1.5 – 2.x (akka.tcp:// addresses up to 1.17, pekko.tcp:// since 1.18)"
    exception_classes = ("org.apache.flink.runtime.taskexecutor.exceptions.RegistrationTimeoutException",)
    config_keys = (
        "jobmanager.rpc.address",
        "jobmanager.rpc.port",
        "jobmanager.bind-host",
        "taskmanager.registration.timeout",
        "high-availability.type",
    )
    signatures = rpc.SIGNATURES + (r"RegistrationTimeoutException",)
    wordings = (
        Wording(SLUG, r"Could not register at the ResourceManager within the specified maximum registration duration \d+ ms",
                "1.5 – 1.16", "TaskExecutor#registrationTimeout (RegistrationTimeoutException, the duration as a Time)",
                "org.apache.flink.runtime.taskexecutor.exceptions.RegistrationTimeoutException: Could not register at the "
                "ResourceManager within the specified maximum registration duration 300000 ms. This indicates a problem "
                "with this instance. Terminating now."),
        Wording(SLUG, r"Could not register at the ResourceManager within the specified maximum registration duration PT\w+",
                "1.17 – 2.x", "TaskExecutor#registrationTimeout (RegistrationTimeoutException, the duration as a java.time.Duration)",
                "org.apache.flink.runtime.taskexecutor.exceptions.RegistrationTimeoutException: Could not register at the "
                "ResourceManager within the specified maximum registration duration PT40S. This indicates a problem with "
                "this instance. Terminating now."),
        Wording(SLUG, r"Could not resolve ResourceManager address (?:akka|pekko)\.tcp://flink@\S+/user/rpc/resourcemanager_\*, retrying in \d+ ms",
                "1.5 – 2.x", "TaskExecutor's ResourceManager registration (RetryingRegistration: akka.tcp up to 1.17, pekko.tcp since 1.18)",
                "Could not resolve ResourceManager address pekko.tcp://flink@localhost:6174/user/rpc/resourcemanager_*, "
                "retrying in 10000 ms: Could not connect to rpc endpoint under address "
                "pekko.tcp://flink@localhost:6174/user/rpc/resourcemanager_*."),
    )
    root_causes = (
        RootCause("wrong-rpc-address", "The TaskManager dials another address or port than the one the JobManager "
                  "bound: its jobmanager.rpc.address / jobmanager.rpc.port differ from the JobManager's.",
                  "The TaskManager's 'Could not resolve ResourceManager address …@host:port' names a host or port "
                  "other than the JobManager's 'Actor system started at …@host:port'.",
                  patches=_ADDRESS + ("ops:make the TaskManagers use the JobManager's address",),
                  would_change="The JobManager's log showing its RPC actor system on the very host and port the "
                               "TaskManager dials (then the JobManager was down or unreachable)."),
        RootCause("jobmanager-not-running", "The JobManager was not running when the TaskManager tried to register: "
                  "it had stopped, crashed or failed to start.",
                  "The JobManager's log ends with a shutdown or a failed start before the TaskManager's attempts; or "
                  "the TaskManager had registered at the same address and lost the ResourceManager.",
                  patches=("ops:start the JobManager and find why it stopped", "flink:taskmanager.registration.timeout"),
                  would_change="A JobManager log that runs through the TaskManager's attempts with its RPC endpoint up."),
        RootCause("address-unresolvable-or-unbound", "The JobManager's name does not resolve where the TaskManager "
                  "runs, or the JobManager listens on another interface than the one the name leads to.",
                  "UnknownHostException / 'Name or service not known' for the host the TaskManager dials; or the "
                  "JobManager bound its RPC port to a loopback bind address while the TaskManager dials another host.",
                  patches=("flink:jobmanager.rpc.address", "flink:jobmanager.bind-host",
                           "ops:check the name and the service the TaskManagers dial")),
        RootCause("undetermined", "The TaskManager could not reach the ResourceManager, but the logs do not show "
                  "whether the address is wrong or the JobManager was down.",
                  "Only the TaskManager's side is at hand (no JobManager log, or one that shows neither its address "
                  "nor its end).",
                  patches=(_COLLECT_JM,),
                  next_evidence="the JobManager's log of the same minutes ('Actor system started at …' gives the "
                                "address it bound; its end says whether it stopped) and the TaskManager's "
                                "jobmanager.rpc.address / jobmanager.rpc.port; on Kubernetes `kubectl get svc,endpoints` "
                                "for the JobManager service."),
    )

    templates = {
        "address-unresolvable-or-unbound": "The TaskManager dials {dialled} but the name {host} does not resolve "
                                           "where it runs (UnknownHostException), so it never reached the "
                                           "ResourceManager.",
        "bound to loopback": "The JobManager bound its RPC port to {bind} (loopback) while the TaskManager dials "
                             "{dialled}: connections from other hosts are refused.",
        "dropped": "Connections to {dialled} time out instead of being refused: a firewall, network policy or a "
                   "service without endpoints drops them.",
        "wrong-rpc-address": "The TaskManager dials the ResourceManager at {dialled}, but the JobManager's RPC "
                             "endpoint is {endpoint} (its own log): the TaskManager's jobmanager.rpc.{what} is wrong, "
                             "so every attempt was refused until the registration timeout.",
        "jobmanager-not-running": "The JobManager was not running while the TaskManager tried to register{log_end}"
                                  "{registered_before}.",
        "log end": " (its log ends with: {message})",
        "registered before": "; the TaskManager had been registered at {dialled} before and lost the ResourceManager, "
                             "so the address was right",
        "undetermined": "The TaskManager could not reach the ResourceManager at {dialled}{refused}, but {seen}: "
                        "whether the address is wrong or the JobManager was down cannot be told from these logs.",
        "configured address": "its configured address",
        "refused": " (connection refused)",
        "no address or end": "the JobManager's log does not state its RPC address or its end",
        "no jobmanager log": "there is no JobManager log",
        "still retrying": "The TaskManager is still retrying ({count} failed attempts); it terminates when "
                          "taskmanager.registration.timeout runs out.",
        "unknown": "Unknown from these logs: {unknown}.",
        "excerpt": "the JobManager's side (an excerpt of the TaskManager's log)",
        "note gave up": "the TaskManager gave up after {duration} and terminated",
        "note attempts": "{count} failed attempt(s) to reach the ResourceManager at {dialled}",
        "note unresolvable": "the name {host} does not resolve where the TaskManager runs",
        "note endpoint bound": "the JobManager's RPC endpoint: {endpoint}, bound to {bind}",
        "note endpoint": "the JobManager's RPC endpoint: {endpoint}",
        "note stopped": "the JobManager stopped before the TaskManager's attempts",
        "note lost resourcemanager": "the TaskManager had been registered at {dialled} and lost the ResourceManager: "
                                     "the address was right",
        "note dropped": "connections time out instead of being refused: dropped on the way",
        "note refused": "connection refused: nothing listens on that host and port",
        "collect": "The JobManager's log of the same minutes says which address it bound ('Actor system started at') "
                   "and whether it was running; compare it with the TaskManager's jobmanager.rpc.address/port.",
        "rpc address": "The JobManager's RPC endpoint is {endpoint}; the TaskManager dials {host}. On Kubernetes use "
                       "the JobManager's service name that resolves to it, in the TaskManagers' configuration.",
        "rpc port": "The JobManager listens on port {port}; the TaskManager dials {dialled_port}.",
        "same address": "The TaskManagers' configuration (or their -D / FlinkDeployment overrides) differs from the "
                        "JobManager's: give both the same jobmanager.rpc.address and jobmanager.rpc.port, then "
                        "restart the TaskManagers. A longer taskmanager.registration.timeout would only keep them "
                        "retrying a wrong address.",
        "check the name": "Check from the TaskManager's host that {host} resolves to the JobManager and that port "
                          "{port} is open; on Kubernetes the JobManager's service must exist in the TaskManagers' "
                          "namespace and select the JobManager pod.",
        "bind host": "The JobManager binds its RPC port to {host}, which other hosts cannot reach.",
        "announced name": "The JobManager announces itself as {host}; use a name the TaskManagers can resolve that "
                          "leads to it (on Kubernetes the JobManager's service name, in the TaskManagers' namespace).",
        "start the jobmanager": "Nothing listened at the ResourceManager's address: find in the JobManager's log (and "
                                "its .out file, container status, exit code) why it stopped or failed to start, and "
                                "start it; the TaskManagers register once it is up.",
        "longer timeout": "A complement, not a fix: the TaskManagers gave up after {timeout}, shorter than a "
                          "JobManager restart may take; with 5 min they wait for the restarted JobManager instead of "
                          "terminating.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        findings = []
        for reg in rpc.registrations(incident):
            stuck = reg.gave_up or (len(reg.attempts) >= _STILL_RETRYING and not reg.registered_after(reg.attempts[-1]))
            if not stuck:
                continue
            findings.append(self._judge(incident, reg))
            break  # one TaskManager tells the story; the others dial the same configuration
        return findings

    def _judge(self, incident: Incident, reg: rpc.Registration) -> Finding:
        jm = rpc.jobmanager_rpc(incident)
        dialled = reg.dialled
        excerpt = is_excerpt(incident) and jm.started is None
        events: list[Event] = [reg.timeout] if reg.timeout else []
        notes: dict[int, str] = {}
        if reg.timeout:
            notes[0] = self.say("note gave up", duration=self._duration(reg))
        if reg.attempts:
            notes[len(events)] = self.say("note attempts", count=len(reg.attempts), dialled=dialled)
            events.append(reg.attempts[0])
        details = {
            "taskmanager_log": reg.file,
            "dialled_address": str(dialled) if dialled else "unknown",
            "failed_attempts": len(reg.attempts),
            "registration_timeout": self._duration(reg) if reg.timeout else "not reached (still retrying)",
            "jobmanager_rpc_address": str(jm.external) if jm.external else "not in these logs",
        }
        if jm.bind:
            details["jobmanager_bind_address"] = str(jm.bind)
        first_try = (reg.attempts or [reg.timeout])[0]
        ended = [ev for ev in jm.ended if (ev.ts or "") <= (first_try.ts or "")
                 and not any((s.ts or "") > (ev.ts or "") and (s.ts or "") <= (first_try.ts or "") for s in jm.starts)]
        lost_rm = [ev for ev in reg.lost_rm if reg.registered_before(ev)]
        cause, summary, patches = None, "", []
        if reg.unknown_host and dialled:
            cause = "address-unresolvable-or-unbound"
            events.append(reg.unknown_host[0])
            notes[len(events) - 1] = self.say("note unresolvable", host=dialled.host)
            summary = self.say(cause, dialled=dialled, host=dialled.host)
            patches = self._unresolvable(incident, reg, dialled, jm)
        elif (dialled and jm.bind and rpc.is_loopback(jm.bind.host) and not rpc.is_loopback(dialled.host)
              and dialled.port == jm.bind.port):
            cause = "address-unresolvable-or-unbound"
            summary = self.say("bound to loopback", bind=jm.bind, dialled=dialled)
            patches = self._unresolvable(incident, reg, dialled, jm)
            events.append(jm.started)
            notes[len(events) - 1] = self.say("note endpoint bound", endpoint=jm.external, bind=jm.bind)
        elif dialled and jm.external and (dialled.port != jm.external.port or
                                         (dialled.host != jm.external.host and not _same_host(dialled, jm))):
            cause = "wrong-rpc-address"
            what = "port" if dialled.port != jm.external.port and dialled.host == jm.external.host else "address"
            summary = self.say(cause, dialled=dialled, endpoint=jm.external, what=what)
            patches = self._wrong_address(incident, reg, dialled, jm)
            events.append(jm.started)
            notes[len(events) - 1] = self.say("note endpoint", endpoint=jm.external)
        elif ended or lost_rm:
            cause = "jobmanager-not-running"
            if ended:
                events.append(ended[-1])
                notes[len(events) - 1] = self.say("note stopped")
            if lost_rm:
                events.append(lost_rm[0])
                notes[len(events) - 1] = self.say("note lost resourcemanager", dialled=dialled)
            summary = self.say(cause, log_end=self.say("log end", message=ended[-1].message[:120]) if ended else "",
                               registered_before=self.say("registered before", dialled=dialled) if lost_rm else "")
            patches = self._jobmanager_down(incident, reg)
        elif reg.connect_timeouts and dialled:
            cause = "address-unresolvable-or-unbound"
            events.append(reg.connect_timeouts[0])
            notes[len(events) - 1] = self.say("note dropped")
            summary = self.say("dropped", dialled=dialled)
            patches = self._unresolvable(incident, reg, dialled, jm)
        else:
            cause = "undetermined"
            seen = self.say("no address or end") if jm.started or jm.ended else self.say("no jobmanager log")
            summary = self.say(cause, dialled=dialled or self.say("configured address"),
                               refused=self.say("refused") if reg.refused else "", seen=seen)
            patches = [self.ops_patch(
                "collect the JobManager log", self.say("collect"),
                snippet="grep -n -E 'Actor system started at|Trying to start actor system|RECEIVED SIGNAL|"
                        "Terminating cluster entrypoint' jobmanager.log")]
        if reg.refused and cause != "address-unresolvable-or-unbound":
            events.append(reg.refused[0])
            notes[len(events) - 1] = self.say("note refused")
        unknown = []
        if excerpt:
            unknown.append(self.say("excerpt"))
        confidence = {"wrong-rpc-address": 0.9, "address-unresolvable-or-unbound": 0.85,
                      "jobmanager-not-running": 0.85, "undetermined": 0.4}[cause]
        if excerpt:
            confidence = min(confidence, 0.5)
        if not reg.timeout:
            summary += " " + self.say("still retrying", count=len(reg.attempts))
        if unknown:
            summary += " " + self.say("unknown", unknown="; ".join(unknown))
            details["unknown"] = unknown
        return self.finding(cause, summary, [e for e in events if e is not None], notes=notes, confidence=confidence,
                            patches=patches, details=details,
                            severity="failure" if reg.timeout else "warning")

    @staticmethod
    def _duration(reg: rpc.Registration) -> str:
        ms = duration_ms(reg.timeout_duration)
        return format_duration(ms) if ms else (reg.timeout_duration or "unknown")

    def _tm_patch(self, incident: Incident, reg: rpc.Registration, key: str, value: str, reason: str):
        """A change on the TaskManager's side, with the value the TaskManager itself logged (not the JobManager's)."""
        patch = self.flink_patch(incident, key, value, reason)
        logged = rpc.logged_value(incident, key, role="taskmanager", file=reg.file)
        if logged:
            patch = dataclasses.replace(patch, current=logged[0],
                                        current_source=f"TaskManager log {logged[1].file}:{logged[1].line}")
        return patch

    def _wrong_address(self, incident, reg, dialled, jm):
        patches = []
        if dialled.host != jm.external.host:
            patches.append(self._tm_patch(
                incident, reg, "jobmanager.rpc.address", jm.external.host,
                self.say("rpc address", endpoint=jm.external, host=dialled.host)))
        if dialled.port != jm.external.port:
            patches.append(self._tm_patch(
                incident, reg, "jobmanager.rpc.port", str(jm.external.port),
                self.say("rpc port", port=jm.external.port, dialled_port=dialled.port)))
        patches.append(self.ops_patch(
            "make the TaskManagers use the JobManager's address", self.say("same address"),
            snippet="grep -E 'jobmanager\\.rpc\\.(address|port)' taskmanager.log jobmanager.log"))
        return patches

    def _unresolvable(self, incident, reg, dialled, jm):
        patches = [self.ops_patch(
            "check the name and the service the TaskManagers dial",
            self.say("check the name", host=dialled.host, port=dialled.port),
            snippet=f"getent hosts {dialled.host}; nc -vz {dialled.host} {dialled.port}\n"
                    "kubectl get svc,endpoints -l component=jobmanager")]
        if jm.bind and rpc.is_loopback(jm.bind.host) and not rpc.is_loopback(dialled.host):
            patches.append(self.flink_patch(
                incident, "jobmanager.bind-host", "0.0.0.0", self.say("bind host", host=jm.bind.host)))
        if jm.external and jm.external.host != dialled.host:
            patches.append(self._tm_patch(
                incident, reg, "jobmanager.rpc.address", jm.external.host,
                self.say("announced name", host=jm.external.host)))
        return patches

    def _jobmanager_down(self, incident, reg):
        patches = [self.ops_patch(
            "start the JobManager and find why it stopped", self.say("start the jobmanager"),
            snippet="tail -n 50 jobmanager.log; kubectl describe pod -l component=jobmanager")]
        configured = duration_ms(reg.timeout_duration)
        if configured is not None and configured < 300000:
            patches.append(self.flink_patch(
                incident, "taskmanager.registration.timeout", "5 min",
                self.say("longer timeout", timeout=format_duration(configured))))
        return patches


def _same_host(dialled: rpc.Endpoint, jm: rpc.JobManagerRpc) -> bool:
    """Both names are loopback, or the TaskManager dials the bind address the JobManager logged."""
    if rpc.is_loopback(dialled.host) and jm.external and rpc.is_loopback(jm.external.host):
        return True
    return bool(jm.bind and jm.bind.host == dialled.host)
