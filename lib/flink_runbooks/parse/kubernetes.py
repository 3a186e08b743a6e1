"""Kubernetes documents as log records: what `kubectl` (or the API) says about an incident's pods, events and Flink
resources, turned into one timestamped record per fact so the ordinary scan and the detectors read them like any log.

Documents understood (the shapes of the Kubernetes API, core/v1 and events.k8s.io/v1, and of kubectl's output):

- ``kubectl get events -o json|yaml``: a ``List``/``EventList`` of ``Event`` (``involvedObject``, ``message``,
  ``firstTimestamp``/``lastTimestamp``, ``count``; or ``regarding``, ``note``, ``eventTime``, ``series``);
- ``kubectl get pod NAME -o json|yaml`` (a ``Pod`` or a ``List``/``PodList`` of them): the phase, the conditions
  (``PodScheduled: False``), and per container the current and last state (``terminated.reason: OOMKilled``,
  ``exitCode: 137``, ``waiting.reason: CrashLoopBackOff``) with ``restartCount`` and the memory limit;
- ``kubectl describe pod`` text: ``State:``/``Last State:`` blocks, ``Restart Count:``, ``Limits:`` and the
  ``Events:`` table (its ages become times when the pod's ``Start Time:`` and its ``Scheduled`` event date the print);
- ``kubectl get events`` and ``kubectl events`` tables (``LAST SEEN  TYPE  REASON  OBJECT  MESSAGE``, with ``-o wide``
  also ``SUBOBJECT  SOURCE  …  FIRST SEEN  COUNT  NAME``, with ``-A`` a ``NAMESPACE`` first) and ``kubectl get pods``
  tables (``NAME  READY  STATUS  RESTARTS  AGE``, ``-o wide`` too), one file holding one or several of them;
- a ``FlinkDeployment`` or ``FlinkSessionJob`` (the operator's resource) with its ``status``: ``error``,
  ``jobStatus.state``, ``lifecycleState``, ``jobManagerDeploymentStatus``.

Each record is ``<time> <LEVEL> kubernetes.<what> [] - <message>`` (Flink's log4j2 layout, in UTC); a fact without a
time has no time stamp (``WARN kubernetes.pod [] - ...``). Records stand on the line of the document where the fact
is (the other lines are left empty), so evidence points at the user's own file. A pod's role (``jobmanager`` /
``taskmanager``) comes from its ``component`` label, else from its name. Environment variables and anything else
that is not a fact of the failure are never copied; messages are redacted.
"""
from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from flink_runbooks.parse.redact import redact_text

# These are small documents (a namespace's events, a few pods, one resource); anything larger is not what kubectl
# printed for one incident, and reading it whole would be the only way to convert it.
MAX_DOCUMENT_BYTES = 8 << 20
HEAD_BYTES = 16384

LOGGER = "kubernetes"
_OBJECT_KINDS = ("Event", "Pod", "FlinkDeployment", "FlinkSessionJob")
_LIST_KINDS = ("List", "EventList", "PodList", "FlinkDeploymentList", "FlinkSessionJobList")
_JSON_KIND = re.compile(r'"kind"\s*:\s*"(?P<kind>' + "|".join(_OBJECT_KINDS + _LIST_KINDS) + r')"')
_YAML_KIND = re.compile(r"^\s*(?:-\s+)?kind:\s*[\"']?(?P<kind>" + "|".join(_OBJECT_KINDS + _LIST_KINDS) + r")[\"']?\s*$",
                        re.M)
_JSON_API = re.compile(r'"apiVersion"\s*:\s*"')
_YAML_API = re.compile(r"^\s*(?:-\s+)?apiVersion:\s*\S", re.M)
_DESCRIBE_POD = re.compile(r"\A(?:\s*\n)*Name:\s+\S+\s*\n(?:.*\n){0,3}?Namespace:\s+\S+", re.M)
# kubectl's table headers (its printers' column names): `get events` / `events` (default and -o wide) and `get pods`
_EVENTS_HEADER = re.compile(r"^(?:NAMESPACE\s+)?LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+(?:SUBOBJECT\s+SOURCE\s+)?MESSAGE\b.*$",
                            re.M)
_PODS_HEADER = re.compile(r"^(?:NAMESPACE\s+)?NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\b.*$", re.M)
# a table may follow the command that printed it (a shell prompt, a comment)
_TABLE_START = re.compile(r"\A(?:\s*\n|[$#>].*\n){0,4}(?:NAMESPACE\s+)?(?:LAST SEEN\s+TYPE\s+REASON\s+OBJECT|"
                          r"NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE)\b")

FAILED_JOB_STATES = ("FAILED", "FAILING", "RESTARTING")
FAILED_LIFECYCLE = ("FAILED", "ROLLING_BACK", "ROLLED_BACK")
FAILED_JM_DEPLOYMENT = ("ERROR", "MISSING")


def document_kind(head: str) -> str | None:
    """``"describe-pod"``, ``"kubectl-table"``, ``"json"`` or ``"yaml"`` when the start of a file is a Kubernetes document this module
    converts (events, pods, a Flink resource), else None. Only the head is looked at; :func:`records_of` decides."""
    stripped = head.lstrip()
    if _TABLE_START.match(head):
        return "kubectl-table"
    if _DESCRIBE_POD.match(head) and re.search(r"^(?:Containers|Status|Labels|Node|Events):", head, re.M):
        return "describe-pod"
    if stripped.startswith("{") and _JSON_API.search(head) and _JSON_KIND.search(head):
        return "json"
    if re.match(r"(?:---\s*\n)?(?:#.*\n)*(?:apiVersion|kind|items|metadata):", stripped) and _YAML_API.search(head) \
            and _YAML_KIND.search(head):
        return "yaml"
    return None


class DocumentError(ValueError):
    """The document cannot be read (broken JSON/YAML); one line naming the file."""


# ------------------------------------------------------------------------------------------------------------ records

@dataclass
class Fact:
    """One record: where in the document it stands (a character offset), when, how bad, and what."""

    offset: int
    ts: datetime.datetime | None
    level: str
    what: str  # the logger's last part: event, pod, flinkdeployment, flinksessionjob
    message: str
    body: list[str] = field(default_factory=list)


def records_of(text: str, name: str, kind: str | None = None) -> tuple[list[str], list[str]]:
    """The document as the lines of a log (``len`` = the document's lines, facts on their own lines) and warnings.
    Raises :class:`DocumentError` when it is broken; returns no lines when it holds no Kubernetes object."""
    kind = kind or document_kind(text[:HEAD_BYTES])
    warnings: list[str] = []
    if kind == "describe-pod":
        facts = list(_describe_pod_facts(text))
    elif kind == "kubectl-table":
        facts = list(_table_facts(text))
    elif kind in ("json", "yaml"):
        facts = []
        for doc in _load(text, name, kind):
            facts.extend(_object_facts(doc, text, 0))
    else:
        return [], warnings
    return _place(text, facts), warnings


def _load(text: str, name: str, kind: str) -> list[Any]:
    if kind == "json":
        try:
            return [json.loads(text)]
        except ValueError as exc:
            raise DocumentError(f"broken JSON in {name}: {exc}") from None
    import yaml

    from flink_runbooks.parse.config import ConfigError, _check_yaml_limits

    try:
        _check_yaml_limits(text[:MAX_DOCUMENT_BYTES], name) if len(text) <= (4 << 20) else None
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except ConfigError as exc:
        raise DocumentError(str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise DocumentError(f"broken YAML in {name}{where}: {getattr(exc, 'problem', None) or 'invalid YAML'}") from None


def _place(text: str, facts: list[Fact]) -> list[str]:
    """Lines of the derived log: each fact on the line of the document where it is (the next free one when two
    facts share a line), its body lines after it while those are free; every other line empty."""
    starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
    total = len(starts) if not text.endswith("\n") else len(starts) - 1
    lines: list[str | None] = [None] * max(total, 1)
    import bisect

    for fact in sorted(facts, key=lambda f: f.offset):
        at = max(bisect.bisect_right(starts, fact.offset) - 1, 0)
        while at < len(lines) and lines[at] is not None:
            at += 1
        if at >= len(lines):
            lines.append(None)
        lines[at] = _record(fact)
        for extra in fact.body:
            at += 1
            if at >= len(lines) or lines[at] is not None:
                break
            lines[at] = extra
    return [line or "" for line in lines]


def _record(fact: Fact) -> str:
    message = redact_text(" ".join(fact.message.split()))
    head = f"{fact.level:<5} {LOGGER}.{fact.what} [] - {message}"
    if fact.ts is None:
        return head
    ts = fact.ts.astimezone(datetime.timezone.utc)
    return f"{ts:%Y-%m-%d %H:%M:%S},{ts.microsecond // 1000:03d} {head}"


def parse_time(value: Any) -> datetime.datetime | None:
    """An RFC 3339 time (``2024-05-01T10:00:00Z``, micro- or nanoseconds), epoch milliseconds (the operator's
    ``updateTime``), or a describe line's ``Mon, 04 Dec 2023 07:55:21 +0000``; None otherwise."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) or (isinstance(value, str) and value.isdigit()):
        try:
            return datetime.datetime.fromtimestamp(int(value) / 1000, datetime.timezone.utc)
        except (OverflowError, ValueError, OSError):
            return None
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
    text = str(value).strip()
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?", text)
    if m:
        micros = (m.group(3) or "0")[:6].ljust(6, "0")
        zone = m.group(4) or "Z"
        zone = "+00:00" if zone == "Z" else (zone if ":" in zone else zone[:3] + ":" + zone[3:])
        try:
            return datetime.datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}.{micros}{zone}")
        except ValueError:
            return None
    try:
        return datetime.datetime.strptime(text, "%a, %d %b %Y %H:%M:%S %z")
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------------- JSON/YAML objects

def _object_facts(doc: Any, text: str, base: int) -> Iterable[Fact]:
    if isinstance(doc, list):
        for item in doc:
            yield from _object_facts(item, text, base)
        return
    if not isinstance(doc, dict):
        return
    kind = doc.get("kind")
    if kind in _LIST_KINDS or (kind is None and isinstance(doc.get("items"), list)):
        for item in doc.get("items") or []:
            yield from _object_facts(item, text, base)
        return
    where = _anchor(text, doc, base)
    if kind == "Event" or (kind is None and ("involvedObject" in doc or "regarding" in doc)):
        yield from _event_facts(doc, text, where)
    elif kind == "Pod":
        yield from _pod_facts(doc, text, where)
    elif kind in ("FlinkDeployment", "FlinkSessionJob"):
        yield from _flink_resource_facts(doc, text, where, kind)


def _anchor(text: str, obj: dict, base: int) -> int:
    """Where an object is in the document: its uid (unique), else its name, searched from ``base``."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    for key in ("uid", "name"):
        value = meta.get(key)
        if isinstance(value, str) and value:
            at = _find_value(text, key, value, base)
            if at >= 0:
                return at
    return base


def _find_value(text: str, key: str, value: str, start: int) -> int:
    m = re.compile(r"[\"']?" + re.escape(key) + r"[\"']?\s*:\s*[\"']?" + re.escape(value) + r"[\"']?\s*[,}\n]").search(
        text, start)
    return m.start() if m else -1


def _after(text: str, needle: str, start: int) -> int:
    at = text.find(needle, start)
    return at if at >= 0 else start


def _role(labels: Any, name: str) -> str | None:
    """jobmanager / taskmanager from the ``component`` label Flink (native and operator) and its Helm charts set,
    else from the name."""
    labels = labels if isinstance(labels, dict) else {}
    for key in ("component", "app.kubernetes.io/component"):
        value = str(labels.get(key) or "").lower()
        if value in ("jobmanager", "taskmanager"):
            return value
    lowered = name.lower()
    if "taskmanager" in lowered or "-tm-" in lowered:
        return "taskmanager"
    if "jobmanager" in lowered or "-jm-" in lowered:
        return "jobmanager"
    return None


def _pod_label(name: str, namespace: str | None, role: str | None) -> str:
    """``Pod NAME (taskmanager, namespace NS)``: the name right after ``Pod`` so every reader finds it."""
    extra = ", ".join(x for x in (role, f"namespace {namespace}" if namespace else None) if x)
    return f"Pod {name}" + (f" ({extra})" if extra else "")


def _event_facts(ev: dict, text: str, where: int) -> Iterable[Fact]:
    obj = ev.get("involvedObject") or ev.get("regarding") or {}
    obj = obj if isinstance(obj, dict) else {}
    kind, name, namespace = obj.get("kind") or "object", obj.get("name") or "?", obj.get("namespace")
    first = parse_time(ev.get("firstTimestamp") or ev.get("deprecatedFirstTimestamp") or ev.get("eventTime")
                       or (ev.get("metadata") or {}).get("creationTimestamp"))
    series = ev.get("series") if isinstance(ev.get("series"), dict) else {}
    last = parse_time(ev.get("lastTimestamp") or ev.get("deprecatedLastTimestamp") or series.get("lastObservedTime"))
    count = ev.get("count") or ev.get("deprecatedCount") or series.get("count") or 1
    kind_of = str(ev.get("type") or "Normal")
    reason = str(ev.get("reason") or "")
    message = str(ev.get("message") or ev.get("note") or "").strip()
    source = ev.get("source") if isinstance(ev.get("source"), dict) else {}
    reporter = ev.get("reportingController") or ev.get("reportingComponent") or source.get("component")
    about = (_pod_label(name, namespace, _role({}, name)) if kind == "Pod"
             else f"{kind} {name}" + (f" (namespace {namespace})" if namespace else ""))
    times = ""
    try:
        count = int(count)
    except (TypeError, ValueError):
        count = 1
    if count > 1:
        times = f" ({count} times" + (f", last at {_iso(last)}" if last else "") + ")"
    by = f" from {reporter}" if reporter else ""
    yield Fact(where, first or last, "WARN" if kind_of == "Warning" else "INFO", "event",
               f"Event {kind_of} {reason}{by} on {about}{times}: {message}")


def _iso(ts: datetime.datetime) -> str:
    return ts.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_facts(pod: dict, text: str, where: int) -> Iterable[Fact]:
    meta = pod.get("metadata") or {}
    name, namespace = str(meta.get("name") or "?"), meta.get("namespace")
    label = _pod_label(name, namespace, _role(meta.get("labels"), name))
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    limits = {}
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        if isinstance(c, dict):
            mem = ((c.get("resources") or {}).get("limits") or {}).get("memory")
            if mem:
                limits[c.get("name")] = str(mem)
    status_at = _after(text, "status", where)
    phase, reason = status.get("phase"), status.get("reason")
    if phase in ("Failed", "Unknown") or reason:
        yield Fact(status_at, None, "WARN", "pod",
                   f"{label} is {phase or 'in trouble'}" + (f": {reason}" if reason else "")
                   + (f": {status['message']}" if status.get("message") else ""))
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            yield Fact(_after(text, "PodScheduled", status_at), parse_time(cond.get("lastTransitionTime")), "WARN",
                       "pod", f"{label} cannot be scheduled ({cond.get('reason') or 'Unschedulable'}): "
                              f"{cond.get('message') or ''}")
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        if not isinstance(cs, dict):
            continue
        cname = str(cs.get("name") or "?")
        at = _after(text, cname, status_at)
        restarts = cs.get("restartCount") or 0
        limit = limits.get(cname)
        for which, state in (("last state", (cs.get("lastState") or {}).get("terminated")),
                             ("state", (cs.get("state") or {}).get("terminated"))):
            if isinstance(state, dict):
                yield _termination(label, cname, which, state, restarts, limit, _after(text, "terminated", at))
        waiting = (cs.get("state") or {}).get("waiting")
        if isinstance(waiting, dict) and waiting.get("reason") not in (None, "ContainerCreating", "PodInitializing"):
            last = (cs.get("lastState") or {}).get("terminated") or {}
            yield Fact(_after(text, "waiting", at), parse_time(last.get("finishedAt")), "WARN", "pod",
                       f"{label} container {cname} waiting: Reason: {waiting.get('reason')}, Restart Count: {restarts}"
                       + (f": {waiting['message']}" if waiting.get("message") else ""))


def _termination(label: str, container: str, which: str, state: dict, restarts: Any, limit: str | None,
                 at: int) -> Fact:
    reason, code = state.get("reason") or "Terminated", state.get("exitCode")
    bad = reason == "OOMKilled" or (code not in (None, 0, "0") and reason != "Completed")
    started, finished = parse_time(state.get("startedAt")), parse_time(state.get("finishedAt"))
    span = ", ".join(x for x in (f"started {_iso(started)}" if started else None,
                                 f"finished {_iso(finished)}" if finished else None) if x)
    message = (f"{label} container {container} {which} Terminated: Reason: {reason}, Exit Code: {code}"
               + (f", {span}" if span else "") + f", Restart Count: {restarts}"
               + (f": {state['message']}" if state.get("message") else ""))
    # the limit on its own lines, as kubectl describe prints it, where the memory readers look for it
    body = ["    Limits:", f"      memory:  {limit}"] if limit and reason == "OOMKilled" else []
    return Fact(at, finished or started, "WARN" if bad else "INFO", "pod", message, body)


def _flink_resource_facts(res: dict, text: str, where: int, kind: str) -> Iterable[Fact]:
    meta = res.get("metadata") or {}
    status = res.get("status")
    if not isinstance(status, dict):
        return
    name = f"{kind} {meta.get('name') or '?'}" + (f" (namespace {meta['namespace']})" if meta.get("namespace") else "")
    what = kind.lower()
    job = status.get("jobStatus") if isinstance(status.get("jobStatus"), dict) else {}
    reconciled = status.get("reconciliationStatus") if isinstance(status.get("reconciliationStatus"), dict) else {}
    when = (parse_time(job.get("updateTime")) or parse_time(reconciled.get("reconciliationTimestamp"))
            or parse_time(meta.get("creationTimestamp")))
    status_at = _after(text, "status", where)
    state = job.get("state")
    if state:
        jid = f" {job['jobId']}" if job.get("jobId") else ""
        yield Fact(_after(text, "state", status_at), when, "WARN" if state in FAILED_JOB_STATES else "INFO", what,
                   f"{name}: job {job.get('jobName') or ''}{jid} status {state}".replace("job  ", "job "))
    for key, bad, label in (("lifecycleState", FAILED_LIFECYCLE, "lifecycle state"),
                            ("jobManagerDeploymentStatus", FAILED_JM_DEPLOYMENT, "JobManager deployment status")):
        value = status.get(key)
        if value:
            yield Fact(_after(text, key, status_at), when, "WARN" if value in bad else "INFO", what,
                       f"{name}: {label} {value}")
    error = status.get("error")
    if error:
        yield Fact(_after(text, "error", status_at), when, "ERROR", what, f"{name}: error: {_operator_error(error)}")


def _operator_error(error: Any) -> str:
    """The operator writes ``status.error`` as JSON (``type``, ``message``, ``throwableList``) since 1.4, a plain
    message before."""
    doc = error
    if isinstance(error, str):
        try:
            doc = json.loads(error)
        except ValueError:
            return error
    if not isinstance(doc, dict):
        return str(error)
    parts = [f"{doc.get('type') or ''}: {doc.get('message') or ''}".strip(": ")]
    for cause in doc.get("throwableList") or []:
        if isinstance(cause, dict) and cause.get("message"):
            parts.append(f"caused by {cause.get('type') or ''}: {cause['message']}")
    return "; ".join(parts)


# ------------------------------------------------------------------------------------------------ kubectl describe pod

_FIELD = re.compile(r"^(?P<indent> *)(?P<key>\w[\w .-]*?):(?:\s+(?P<value>.*?))?\s*$")
_EVENT_ROW = re.compile(r"^\s{2}(?P<type>Normal|Warning)\s+(?P<reason>\S+)\s+(?P<age>\S+(?: \(x\d+ over \S+\))?)\s+"
                        r"(?P<source>\S+)\s+(?P<message>.*)$")


def _describe_pod_facts(text: str) -> Iterable[Fact]:
    """``kubectl describe pod``: one or more pods, separated by a blank line before the next ``Name:``."""
    for m in re.finditer(r"^Name:\s+\S+.*?(?=^\n*Name:\s|\Z)", text, re.M | re.S):
        yield from _one_described_pod(m.group(0), m.start())


def _one_described_pod(block: str, base: int) -> Iterable[Fact]:
    lines = block.split("\n")
    offsets, pos = [], base
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    top = {}
    labels = {}
    in_labels = False
    for line in lines:
        m = _FIELD.match(line)
        if m and not m["indent"]:
            top[m["key"]] = m["value"] or ""
            in_labels = m["key"] == "Labels"
            line = m["value"] or ""
        elif not line.startswith(" " * 10) or not line.strip():
            in_labels = False
        if in_labels and "=" in line:
            key, _, value = line.strip().partition("=")
            labels[key] = value
    name = top.get("Name", "?")
    label = _pod_label(name, top.get("Namespace"), _role(labels, name))
    if top.get("Status") == "Failed" or top.get("Reason"):
        at = next((i for i, line in enumerate(lines) if line.startswith(("Reason:", "Status:"))), 0)
        yield Fact(offsets[at], None, "WARN", "pod",
                   f"{label} is {top.get('Status') or 'in trouble'}" + (f": {top['Reason']}" if top.get("Reason") else "")
                   + (f": {top['Message']}" if top.get("Message") else ""))
    container = None
    limits_at: dict[str, str] = {}
    # first pass: each container's memory limit
    section = None
    for line in lines:
        m = _FIELD.match(line)
        if m and len(m["indent"]) == 2 and not m["value"] and m["key"] not in ("Type", "Conditions"):
            container = m["key"]
        if m and len(m["indent"]) == 4:
            section = m["key"]
        if m and section == "Limits" and len(m["indent"]) == 6 and m["key"] == "memory" and container:
            limits_at[container] = m["value"]
    container, restarts, state_block = None, None, None
    pending: list[tuple[int, str, dict]] = []
    in_containers = False
    for i, line in enumerate(lines):
        m = _FIELD.match(line)
        if m and not m["indent"]:
            in_containers = m["key"] in ("Containers", "Init Containers")
            state_block = None
        if not in_containers or not m:
            continue
        indent = len(m["indent"])
        if indent == 2 and not m["value"]:
            container, state_block = m["key"], None
        elif indent == 4 and m["key"] in ("State", "Last State"):
            state_block = {"which": m["key"].lower(), "state": m["value"], "at": i}
            pending.append((i, container, state_block))
        elif indent == 6 and state_block is not None:
            state_block[m["key"]] = m["value"]
            if m["key"] in ("Reason", "Exit Code"):
                state_block["at"] = min(state_block["at"], i) if m["key"] == "Exit Code" else i
        elif indent == 4:
            state_block = None
            if m["key"] == "Restart Count":
                restarts = m["value"]
                for _, cname, block in pending:
                    if cname == container:
                        block.setdefault("restarts", restarts)
    for _, cname, block in pending:
        restarts = block.get("restarts", "?")
        where = offsets[block["at"]]
        if block["state"] == "Terminated":
            state = {"reason": block.get("Reason"), "exitCode": block.get("Exit Code"),
                     "startedAt": parse_time(block.get("Started")), "finishedAt": parse_time(block.get("Finished")),
                     "message": block.get("Message")}
            yield _termination(label, cname, block["which"], state, restarts, limits_at.get(cname), where)
        elif block["state"] == "Waiting" and block.get("Reason"):
            yield Fact(where, None, "WARN", "pod",
                       f"{label} container {cname} waiting: Reason: {block['Reason']}, Restart Count: {restarts}")
    in_events = False
    rows = []
    for i, line in enumerate(lines):
        if line.startswith("Events:"):
            in_events = True
            continue
        if in_events:
            row = _EVENT_ROW.match(line)
            if row:
                rows.append((i, row))
    printed = _printed_at(parse_time(top.get("Start Time")), rows)
    for i, row in rows:
        yield Fact(offsets[i], _event_time(printed, row["age"]), "WARN" if row["type"] == "Warning" else "INFO",
                   "event", f"Event {row['type']} {row['reason']} from {row['source']} on {label}"
                            f" (age {row['age']}): {row['message']}")


def _printed_at(started: datetime.datetime | None, rows: list) -> datetime.datetime | None:
    """When the describe was printed: the pod's ``Start Time:`` plus the age of its ``Scheduled`` event (the
    scheduler binds the pod, then the kubelet starts it, within a second). Without both, the table's ages (relative
    to the print) give no time, only the order."""
    scheduled = next((row["age"] for _, row in rows if row["reason"] == "Scheduled"), None)
    seconds = age_seconds(scheduled) if scheduled else None
    if started is None or seconds is None:
        return None
    return started + datetime.timedelta(seconds=seconds)


def _event_time(printed: datetime.datetime | None, age: str) -> datetime.datetime | None:
    """The first occurrence of a describe event: ``4m30s (x14 over 9m)`` first happened 9m before the print."""
    if printed is None:
        return None
    m = re.fullmatch(r"(?P<last>\S+)(?: \(x\d+ over (?P<first>\S+)\))?", age)
    seconds = age_seconds((m["first"] or m["last"]) if m else age)
    return printed - datetime.timedelta(seconds=seconds) if seconds is not None else None


# ------------------------------------------------------------------------------------------ kubectl get events / pods

_KINDS = {"pod": "Pod", "replicaset": "ReplicaSet", "deployment": "Deployment", "statefulset": "StatefulSet",
          "job": "Job", "node": "Node", "persistentvolumeclaim": "PersistentVolumeClaim", "service": "Service",
          "configmap": "ConfigMap", "flinkdeployment": "FlinkDeployment", "flinksessionjob": "FlinkSessionJob"}
_HEALTHY_POD = ("Running", "Completed", "Succeeded")


def _columns(header: str) -> list[tuple[str, int]]:
    """The header's column names with where each starts (kubectl aligns every cell under its header)."""
    return [(m.group(0), m.start()) for m in re.finditer(r"\S+(?: \S+)*", header)]


def _cells(line: str, columns: list[tuple[str, int]]) -> dict[str, str]:
    cells = {}
    for i, (name, start) in enumerate(columns):
        end = columns[i + 1][1] if i + 1 < len(columns) else None
        cells[name] = line[start:end].strip() if end is not None else line[start:].strip()
    return cells


def _table_facts(text: str) -> Iterable[Fact]:
    """Every `kubectl get events` / `kubectl get pods` table in the text: a header, then its rows up to a blank line
    or a line that is no row (the next command, another header)."""
    offset = 0
    columns: list[tuple[str, int]] | None = None
    table = None
    for line in text.split("\n"):
        if _EVENTS_HEADER.match(line) or _PODS_HEADER.match(line):
            table = "events" if _EVENTS_HEADER.match(line) else "pods"
            columns = _columns(line)
        elif not line.strip() or line.lstrip().startswith(("$", "#")):
            table = None
        elif table and columns:
            cells = _cells(line, columns)
            fact = _event_row(cells, offset) if table == "events" else _pod_row(cells, offset)
            if fact is not None:
                yield fact
        offset += len(line) + 1


def _event_row(cells: dict[str, str], offset: int) -> Fact | None:
    kind_of = cells.get("TYPE", "")
    if kind_of not in ("Normal", "Warning"):
        return None
    kind, _, name = cells.get("OBJECT", "").partition("/")
    kind = _KINDS.get(kind.lower().split(".")[0], kind.title() or "object")
    namespace = cells.get("NAMESPACE") or None
    about = (_pod_label(name, namespace, _role({}, name)) if kind == "Pod"
             else f"{kind} {name}" + (f" (namespace {namespace})" if namespace else ""))
    source = cells.get("SOURCE", "").split(",")[0]
    seen = [f"last seen {cells['LAST SEEN']} ago"] if cells.get("LAST SEEN") else []
    if cells.get("COUNT", "").isdigit() and int(cells["COUNT"]) > 1:
        seen.append(f"{cells['COUNT']} times")
    if cells.get("FIRST SEEN"):
        seen.append(f"first seen {cells['FIRST SEEN']} ago")
    by = f" from {source}" if source else ""
    # the ages are relative to when the table was printed, which it does not say: only the text is a fact
    return Fact(offset, None, "WARN" if kind_of == "Warning" else "INFO", "event",
                f"Event {kind_of} {cells.get('REASON', '')}{by} on {about} ({', '.join(seen)}): "
                f"{cells.get('MESSAGE', '')}")


def _pod_row(cells: dict[str, str], offset: int) -> Fact | None:
    name, status = cells.get("NAME", ""), cells.get("STATUS", "")
    if not name or not status or not re.fullmatch(r"\d+/\d+", cells.get("READY", "")):
        return None
    label = _pod_label(name, cells.get("NAMESPACE") or None, _role({}, name))
    healthy = status in _HEALTHY_POD
    return Fact(offset, None, "INFO" if healthy else "WARN", "pod",
                f"{label} STATUS {status} (READY {cells['READY']}, RESTARTS {cells.get('RESTARTS', '?')}, "
                f"AGE {cells.get('AGE', '?')})")


_AGE_PART = re.compile(r"(\d+)([ydhms])")
_AGE_SECONDS = {"y": 365 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}


def age_seconds(age: str) -> int | None:
    """kubectl's human durations (``45s``, ``4m30s``, ``3h5m``, ``2d3h``) in seconds; None for ``<unknown>``."""
    age = age.strip()
    if not age or _AGE_PART.sub("", age):
        return None
    return sum(int(n) * _AGE_SECONDS[unit] for n, unit in _AGE_PART.findall(age))
