"""Pull an incident from a running Flink cluster: read-only GETs of the JobManager's REST API, written as an incident
bundle that the ordinary ingestion reads (and a user can attach to a ticket).

The bundle (``pull(url, out)``):

- ``manifest.json``: where and when it was pulled from (the URL without credentials), the Flink version, every
  request with its status or error, what was cut (logs over the size cap keep their newest bytes) and whether the
  pull is partial;
- ``flink-conf.yaml`` (``config.yaml`` for 2.x): the cluster's effective configuration (``/jobmanager/config``) as
  ``key: value`` lines, so the configuration parser reads it like a file;
- ``rest/``: the REST documents as JSON (``/config``, ``/jobs/overview``, per job its details, exception history,
  checkpoints and configuration, per TaskManager its details);
- ``log/jobmanager/`` and ``log/taskmanager-<id>/``: the log files the cluster serves, under their own names; a file
  that several processes serve (a log folder they share) once, in ``log/shared/``;
- ``rest/jobs/<job>/vertices/<vertex>-watermarks.json`` and ``-subtask-metrics.json``: for a running job, the
  watermark each subtask received and the few metrics per subtask that tell an idle source subtask from a stopped
  event time (``/jobs/:jobid/vertices/:vertexid/watermarks``, ``.../subtasks/:subtaskindex/metrics?get=``);
- ``log/taskmanager-<id>/thread-dump.txt``: when a subtask is CANCELING, the thread dump of the TaskManager hosting
  it (``/jobs/:jobid/vertices/:vertexid`` names it), in jstack's form.

Everything is redacted as it is written (secret values of the configuration, keys and tokens in log lines), so no
secret reaches the disk. Endpoints and JSON shapes are those of Flink 1.13 to 2.x (``*Headers`` and ``*Info``
classes of ``flink-runtime``'s REST messages, read in 1.20.3 and 2.3.0): ``/jobs/:jobid/exceptions`` with
``exceptionHistory`` since 1.13 (``failureLabels`` since 1.18, ``endpoint`` since 1.19 where older releases say
``location``, 2.x without the legacy ``root-exception``/``all-exceptions``), the log list and log file handlers of the
JobManager and TaskManagers since 1.11, ``/taskmanagers/:taskmanagerid/thread-dump`` (``threadInfos[].threadName``,
``stringifiedThreadInfo``), ``memoryConfiguration`` of ``/taskmanagers/:taskmanagerid`` since 1.12.

:func:`read_bundle` reads a bundle's REST documents back as the plain data of a
:class:`~flink_runbooks.model.ClusterSnapshot` for ingestion.
"""
from __future__ import annotations

import base64
import collections
import contextlib
import datetime
import json
import netrc
import os
import pathlib
import re
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from flink_runbooks.model import (ClusterSnapshot, RestCheckpoint, RestCheckpointConfig, RestFailure, RestFailureEntry,
                                  RestJob, RestTaskManager, RestThread, RestVertex)
from flink_runbooks.parse.redact import redact_data, redact_text, redact_value
from flink_runbooks.vocabulary.versions import FlinkVersion

# Credentials are read from the environment (never from a command line that ps shows) or from ~/.netrc.
TOKEN_ENV = "FLINK_RUNBOOKS_REST_TOKEN"
USER_ENV, PASSWORD_ENV = "FLINK_RUNBOOKS_REST_USER", "FLINK_RUNBOOKS_REST_PASSWORD"

REQUEST_TIMEOUT_S = 10.0
PULL_TIMEOUT_S = 180.0
MAX_LOG_BYTES = 64 << 20  # per log file; the newest bytes are kept
MAX_EXCEPTIONS = 20
MAX_JOBS = 5
THREAD_DUMP_SUFFIX = "-thread-dump.json"  # rest/taskmanagers/<id>-thread-dump.json
_CHUNK = 1 << 20
# Jobs worth a diagnosis first: those that failed, are failing or restart.
TROUBLED_STATES = ("FAILED", "FAILING", "RESTARTING")
JOB_ID = re.compile(r"^[0-9a-f]{32}$")


class PullError(Exception):
    """The cluster cannot be pulled from as asked; one line for the user (exit 2)."""


def is_rest_url(text: str) -> bool:
    return bool(re.match(r"^https?://", text.strip(), re.IGNORECASE))


def shown_url(url: str) -> str:
    """The URL without credentials, as it may be printed and written."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


@dataclass
class Request:
    path: str
    status: int | None = None
    bytes: int = 0
    error: str | None = None


@dataclass
class RestClient:
    """GETs against one JobManager (or HistoryServer): a timeout per request and a deadline for the whole pull."""

    url: str
    timeout: float = REQUEST_TIMEOUT_S
    total_timeout: float = PULL_TIMEOUT_S
    ca_cert: str | None = None
    insecure: bool = False
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not is_rest_url(self.url):
            raise PullError(f"{self.url!r} is not an http:// or https:// URL of a Flink JobManager")
        parts = urllib.parse.urlsplit(self.url.strip())
        self.base = shown_url(self.url.strip())
        self._auth = _authorization(parts)
        self._deadline = time.monotonic() + self.total_timeout
        self._context = None
        if parts.scheme.lower() == "https":
            if self.insecure:
                self._context = ssl._create_unverified_context()  # the user asked for it; the manifest says so
            else:
                try:
                    self._context = ssl.create_default_context(cafile=self.ca_cert)
                except (OSError, ssl.SSLError) as exc:
                    raise PullError(f"cannot read the CA certificate {self.ca_cert}: {exc}") from None

    def _open(self, path: str):
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise PullError(f"the pull from {self.base} took longer than {self.total_timeout:g} s and was stopped")
        headers = {"Accept": "application/json, text/plain"}
        if self._auth:
            headers["Authorization"] = self._auth
        request = urllib.request.Request(self.base + path, headers=headers, method="GET")
        opener = urllib.request.build_opener(_NoRedirect, urllib.request.HTTPSHandler(context=self._context))
        return opener.open(request, timeout=min(self.timeout, left))

    @contextlib.contextmanager
    def _get(self, path: str) -> Iterator[tuple[Request, Any]]:
        """The response to GET ``path``, its request recorded; every failure becomes a one-line :class:`PullError`."""
        record = Request(urllib.parse.unquote(path))
        self.requests.append(record)
        try:
            with self._open(path) as response:
                record.status = response.status
                yield record, response
        except urllib.error.HTTPError as exc:
            record.status, record.error = exc.code, f"HTTP {exc.code} {exc.reason}"
            raise PullError(f"GET {self.base}{record.path}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError, socket.timeout) as exc:
            record.error = _reason(exc)
            raise PullError(f"GET {self.base}{record.path}: {record.error}") from None

    def get_json(self, path: str) -> Any:
        with self._get(path) as (record, response):
            body = response.read()
            record.bytes = len(body)
        try:
            return json.loads(body)
        except ValueError:
            record.error = "not JSON"
            raise PullError(f"GET {self.base}{record.path} did not answer with JSON") from None

    def get_to_file(self, path: str, dest: pathlib.Path, cap: int) -> tuple[int, bool]:
        """Stream a text document to ``dest`` through :func:`write_redacted_tail`; returns the bytes read and whether
        it was cut."""
        try:
            with self._get(path) as (record, response):
                def chunks() -> Iterator[bytes]:
                    while chunk := response.read(_CHUNK):
                        yield chunk
                        if time.monotonic() > self._deadline:
                            raise PullError(f"the pull from {self.base} took longer than {self.total_timeout:g} s "
                                            f"and was stopped while reading {record.path}")
                total, cut = write_redacted_tail(chunks(), dest, cap)
                record.bytes = total
        except PullError:
            dest.unlink(missing_ok=True)
            raise
        return total, cut


def write_redacted_tail(chunks: Iterable[bytes], dest: pathlib.Path, cap: int) -> tuple[int, bool]:
    """Write a streamed text document to ``dest``, redacted line by line before it is written (no unredacted byte
    reaches the disk); over ``cap`` bytes only the newest ``cap`` bytes are kept, from a line start. Neither memory
    nor the disk holds much more than twice the cap, however long the document. Returns the bytes read and whether
    it was cut."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    total, pending, cut = 0, b"", False
    with open(dest, "w+b") as out:
        for chunk in chunks:
            total += len(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            out.writelines(redact_text(line.decode("utf-8", errors="replace")).encode() + b"\n" for line in lines)
            if out.tell() > 2 * cap:
                _keep_newest(out, cap)
                cut = True
        if pending:
            out.write(redact_text(pending.decode("utf-8", errors="replace")).encode())
        if out.tell() > cap:
            _keep_newest(out, cap)
            cut = True
    return total, cut


def _keep_newest(out, cap: int) -> None:
    """Cut the open file ``out`` to its newest ``cap`` bytes, from the start of a line."""
    out.seek(-cap, os.SEEK_END)
    out.readline()  # the rest of a line cut in the middle
    tail = out.read()
    out.seek(0)
    out.write(tail)
    out.truncate()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as the error it is: following it would send the credentials to another address."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, ssl.SSLCertVerificationError) or isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted ({getattr(reason, 'verify_message', reason)}); pass --ca-cert FILE"
    if isinstance(reason, (socket.timeout, TimeoutError)) or "timed out" in str(reason):
        return "no answer in time (timed out)"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the JobManager's REST endpoint on this host and port?)"
    if isinstance(reason, socket.gaierror):
        return f"unknown host ({reason.strerror or reason})"
    return str(reason)


def _authorization(parts: urllib.parse.SplitResult) -> str | None:
    """Bearer token or basic credentials: from the environment, the URL's user info, or ~/.netrc."""
    if os.environ.get(TOKEN_ENV):
        return "Bearer " + os.environ[TOKEN_ENV]
    user, password = os.environ.get(USER_ENV), os.environ.get(PASSWORD_ENV)
    if not user and parts.username:
        user, password = urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
    if not user and parts.hostname:
        try:
            found = netrc.netrc().authenticators(parts.hostname)
        except (OSError, netrc.NetrcParseError):
            found = None
        if found:
            user, password = found[0], found[2]
    if not user:
        return None
    return "Basic " + base64.b64encode(f"{user}:{password or ''}".encode()).decode()


# --------------------------------------------------------------------------------------------------------- the bundle

@dataclass
class PullReport:
    out: pathlib.Path
    source: str
    flink_version: str | None
    jobs: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    partial: bool = False
    # TaskManagers hosting a subtask that hangs in cancellation: their thread dumps are pulled
    cancelling: set[str] = field(default_factory=set)
    # log files the JobManager served (wherever they are written: a shared log folder's files go to log/shared/)
    jobmanager_logs: list[str] = field(default_factory=list)
    # running jobs (id -> details) whose vertices' watermarks and subtask metrics are pulled last
    running: dict[str, dict] = field(default_factory=dict)


def pull(url: str, out: str | os.PathLike, *, job: str | None = None, timeout: float = REQUEST_TIMEOUT_S,
         total_timeout: float = PULL_TIMEOUT_S, max_log_bytes: int = MAX_LOG_BYTES, ca_cert: str | None = None,
         insecure: bool = False, progress: Callable[[str], None] | None = None) -> PullReport:
    """Pull what a diagnosis needs from the cluster behind ``url`` into the folder ``out`` (created; an existing
    non-empty folder is refused, nothing is overwritten). Raises :class:`PullError` when nothing can be pulled; a
    failure after the cluster answered keeps what was pulled, marked partial in the manifest."""
    client = RestClient(url, timeout=timeout, total_timeout=total_timeout, ca_cert=ca_cert, insecure=insecure)
    root = pathlib.Path(out)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise PullError(f"{root} already exists and is not an empty folder; nothing was written")
    say = progress or (lambda _message: None)
    dashboard = client.get_json("/config")
    if not isinstance(dashboard, dict) or "flink-version" not in dashboard:
        raise PullError(f"{client.base} answered, but not as a Flink REST endpoint (GET /config has no flink-version)")
    overview = client.get_json("/jobs/overview")
    jobs = _chosen_jobs(client, overview, job)  # an unknown job is refused before anything is written
    root.mkdir(parents=True, exist_ok=True)
    version = str(dashboard.get("flink-version") or "") or None
    report = PullReport(root, client.base, version)
    if insecure:
        report.warnings.append("TLS certificate checks were switched off (--insecure)")
    started = datetime.datetime.now(datetime.timezone.utc)
    _write_json(root / "rest" / "config.json", dashboard)
    _write_json(root / "rest" / "jobs-overview.json", overview)
    try:
        say(f"pulling from {client.base} (Flink {version or 'unknown'})")
        _pull_configuration(client, root, version, report)
        _pull_jobs(client, root, jobs, report, say)
        _pull_logs(client, root, max_log_bytes, report, say)
        # Last: the JobManager fetches metrics from the TaskManagers at most every metrics.fetcher.update-interval,
        # in the background of the request that asks; the job details asked, and by now the answer is in.
        for jid, details in report.running.items():
            say(f"watermarks of job {jid}")
            _pull_watermarks(client, root, jid, details, report)
    except PullError as exc:
        report.partial = True
        report.warnings.append(f"the pull stopped early, the bundle is partial: {exc}")
    if not report.jobmanager_logs:
        # A HistoryServer, or a JobManager whose logs cannot be read: the exception history is what is left of them.
        for jid in report.jobs:
            derived = _exception_history_log(root, jid)
            if derived:
                report.logs.append(derived)
                report.warnings.append(f"no JobManager log was pulled: {derived} is written from the job's exception "
                                       f"history (GET /jobs/{jid}/exceptions), the only record of its failures here")
    manifest = {
        "source": client.base,
        "pulled_at": started.isoformat(timespec="seconds"),
        "flink_version": version,
        "partial": report.partial,
        "insecure_tls": insecure,
        "jobs": report.jobs,
        "logs": report.logs,
        "warnings": report.warnings,
        "requests": [{"path": r.path, "status": r.status, "bytes": r.bytes, **({"error": r.error} if r.error else {})}
                     for r in client.requests],
    }
    _write_json(root / "manifest.json", manifest)
    return report


def _redacted(doc: Any) -> Any:
    """A REST document with the value of every sensitive key masked (a job's ``user-config``, ``{"key": k,
    "value": v}`` entries) and every string scrubbed of credential-shaped text."""
    if isinstance(doc, dict):
        named = doc.get("key") if isinstance(doc.get("key"), str) and "value" in doc else None
        return {k: (redact_value(named, v) if k == "value" and named and isinstance(v, str) else
                    redact_value(k, v) if isinstance(v, str) else _redacted(v)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_redacted(v) for v in doc]
    return redact_data(doc)


def _write_json(path: pathlib.Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_redacted(doc), indent=1, sort_keys=True) + "\n")


def _pull_configuration(client: RestClient, root: pathlib.Path, version: str | None, report: PullReport) -> None:
    try:
        entries = [e for e in (client.get_json("/jobmanager/config") or []) if isinstance(e, dict)]
    except PullError as exc:
        if "HTTP 404" not in str(exc):
            raise
        report.warnings.append(f"{exc}: no cluster configuration (a HistoryServer serves none); the jobs' own "
                               f"configuration is under rest/jobs/")
        return
    _write_json(root / "rest" / "jobmanager-config.json", entries)
    entries = _redacted(entries)
    # 2.x reads only config.yaml; flat "key: value" lines are valid in both formats.
    v = FlinkVersion.parse(version)
    name = "config.yaml" if v is not None and v >= (2, 0) else "flink-conf.yaml"
    lines = [f"# The effective configuration of {client.base} (GET /jobmanager/config), as pulled; a proposal to "
             "change it is never applied here."]
    for entry in sorted(entries, key=lambda e: str(e.get("key"))):
        key, value = str(entry.get("key", "")), entry.get("value")
        if key and value is not None:
            lines.append(f"{key}: {value}")
    (root / name).write_text("\n".join(lines) + "\n")


def _chosen_jobs(client: RestClient, overview: Any, wanted: str | None) -> list[dict]:
    """The job asked for (by id or name), else those that failed, are failing or restart, else the running ones,
    else all: the newest first, at most MAX_JOBS."""
    jobs = [j for j in (overview or {}).get("jobs", []) if isinstance(j, dict)]
    if wanted:
        chosen = [j for j in jobs if j.get("jid") == wanted or j.get("name") == wanted]
        if not chosen:
            known = ", ".join(f"{j.get('name')} ({j.get('jid')})" for j in jobs[:5]) or "none"
            raise PullError(f"no job {wanted!r} on {client.base} (jobs: {known})")
    else:
        troubled = [j for j in jobs if j.get("state") in TROUBLED_STATES]
        running = [j for j in jobs if j.get("state") == "RUNNING"]
        chosen = troubled or running or jobs
    return sorted(chosen, key=lambda j: -(j.get("start-time") or 0))[:MAX_JOBS]


def _pull_jobs(client: RestClient, root: pathlib.Path, chosen: list[dict], report: PullReport, say) -> None:
    for j in chosen:
        jid = str(j.get("jid", ""))
        if not JOB_ID.match(jid):
            continue
        say(f"job {j.get('name')} ({jid}, {j.get('state')})")
        report.jobs.append(jid)
        try:
            details = client.get_json(f"/jobs/{jid}")
            _write_json(root / "rest" / "jobs" / jid / "job.json", details)
        except PullError as exc:
            report.warnings.append(str(exc))
            details = None
        report.cancelling.update(_cancelling_hosts(client, root, jid, details, report))
        if isinstance(details, dict) and details.get("state") == "RUNNING":
            report.running[jid] = details
        for name, path in (("exceptions", f"/jobs/{jid}/exceptions?maxExceptions={MAX_EXCEPTIONS}"),
                           ("checkpoints", f"/jobs/{jid}/checkpoints"),
                           ("checkpoints-config", f"/jobs/{jid}/checkpoints/config"),
                           ("config", f"/jobs/{jid}/config")):
            try:
                _write_json(root / "rest" / "jobs" / jid / f"{name}.json", client.get_json(path))
            except PullError as exc:
                # a job without checkpointing answers 404 on its checkpoint documents
                report.warnings.append(str(exc))


def _cancelling_hosts(client: RestClient, root: pathlib.Path, jid: str, details: Any, report: PullReport) -> set[str]:
    """The TaskManagers hosting a subtask of ``jid`` that is CANCELING (``GET /jobs/:jobid/vertices/:vertexid``'s
    ``taskmanager-id``), when a vertex has cancelling subtasks or the job is CANCELLING. A subtask still cancelling
    when someone pulls is the moment its stack is worth having: one GET per TaskManager."""
    if not isinstance(details, dict):
        return set()
    vertices = [v for v in details.get("vertices") or [] if isinstance(v, dict)]
    hanging = [v for v in vertices if (v.get("tasks") or {}).get("CANCELING") or v.get("status") == "CANCELING"]
    if not hanging and details.get("state") == "CANCELLING":
        hanging = [v for v in vertices if v.get("status") not in ("FINISHED", "CANCELED", "FAILED")]
    hosts = set()
    for v in hanging:
        vid = str(v.get("id", ""))
        if not re.fullmatch(r"[0-9a-f]{32}", vid):
            continue
        try:
            doc = client.get_json(f"/jobs/{jid}/vertices/{vid}")
        except PullError as exc:
            report.warnings.append(str(exc))
            continue
        _write_json(root / "rest" / "jobs" / jid / "vertices" / f"{vid}.json", doc)
        for subtask in (doc or {}).get("subtasks") or []:
            if isinstance(subtask, dict) and subtask.get("status") == "CANCELING" and subtask.get("taskmanager-id"):
                hosts.add(str(subtask["taskmanager-id"]))
    return hosts


# The metrics that tell a source subtask without data from one whose event time stopped (their names after the
# operator's prefix, e.g. "Source__clicks[1].numRecordsOut"; MetricNames in 1.20.3 and 2.3.0): records in and out,
# the watermarks a subtask received and emitted, and the FLIP-33 source metrics (idle time, event-time lags,
# watermark alignment drift), with the window operators' late records.
WATERMARK_METRICS = ("numRecordsIn", "numRecordsOut", "currentInputWatermark", "currentOutputWatermark",
                     "sourceIdleTime", "currentEmitEventTimeLag", "currentFetchEventTimeLag", "watermarkLag",
                     "watermarkAlignmentDrift", "numLateRecordsDropped")
MAX_WATERMARK_SUBTASKS = 32  # per vertex: one GET each; enough to name the subtask that holds the rest back
MAX_WATERMARK_METRICS = 60  # metric ids per GET (a long chain names the same metrics once per operator)
WATERMARKS_SUFFIX = "-watermarks.json"  # rest/jobs/<job>/vertices/<vertex>-watermarks.json
SUBTASK_METRICS_SUFFIX = "-subtask-metrics.json"  # {"<subtask>": [{"id": ..., "value": ...}, ...]}


def _pull_watermarks(client: RestClient, root: pathlib.Path, jid: str, details: dict, report: PullReport) -> None:
    """Per vertex of a running job, the watermark each subtask received (``GET
    /jobs/:jobid/vertices/:vertexid/watermarks``, ``<subtask>.currentInputWatermark``) and, per subtask, the few
    metrics that say whether it reads records and how far its event time is (``GET
    /jobs/:jobid/vertices/:vertexid/subtasks/:subtaskindex/metrics?get=...``): windows that never fire show only
    there. A metric the release or the job lacks is simply absent."""
    folder = root / "rest" / "jobs" / jid / "vertices"
    for vertex in [v for v in details.get("vertices") or [] if isinstance(v, dict)]:
        vid = str(vertex.get("id", ""))
        if not re.fullmatch(r"[0-9a-f]{32}", vid):
            continue
        try:
            _write_json(folder / f"{vid}{WATERMARKS_SUFFIX}", client.get_json(f"/jobs/{jid}/vertices/{vid}/watermarks"))
            available = client.get_json(f"/jobs/{jid}/vertices/{vid}/subtasks/metrics")
        except PullError as exc:
            report.warnings.append(str(exc))
            continue
        wanted = [str(m.get("id")) for m in available or [] if isinstance(m, dict)
                  and str(m.get("id", "")).rsplit(".", 1)[-1] in WATERMARK_METRICS][:MAX_WATERMARK_METRICS]
        parallelism = vertex.get("parallelism") if isinstance(vertex.get("parallelism"), int) else 0
        if not wanted or parallelism <= 0:
            continue
        query = urllib.parse.quote(",".join(sorted(wanted)), safe=",")
        per_subtask = {}
        for index in range(min(parallelism, MAX_WATERMARK_SUBTASKS)):
            try:
                per_subtask[str(index)] = client.get_json(
                    f"/jobs/{jid}/vertices/{vid}/subtasks/{index}/metrics?get={query}")
            except PullError as exc:
                report.warnings.append(str(exc))
                break
        if parallelism > MAX_WATERMARK_SUBTASKS:
            report.warnings.append(f"vertex {vid} of job {jid} has {parallelism} subtasks: the metrics of the first "
                                   f"{MAX_WATERMARK_SUBTASKS} were pulled (its watermarks name every subtask)")
        _write_json(folder / f"{vid}{SUBTASK_METRICS_SUFFIX}", per_subtask)


def _pull_thread_dump(client: RestClient, root: pathlib.Path, tm_id: str, quoted: str, report: PullReport) -> None:
    """``log/taskmanager-<id>/thread-dump.txt``: every thread of the TaskManager with its stack, as the JVM prints
    it (``GET /taskmanagers/:id/thread-dump``, ``ThreadDumpInfo``: ``threadInfos[].stringifiedThreadInfo``), redacted
    line by line; the JSON itself goes to rest/taskmanagers/."""
    try:
        doc = client.get_json(f"/taskmanagers/{quoted}/thread-dump")
    except PullError as exc:
        report.warnings.append(f"{exc} (no thread dump of a TaskManager whose task hangs in cancellation)")
        return
    _write_json(root / "rest" / "taskmanagers" / f"{_safe(tm_id)}{THREAD_DUMP_SUFFIX}", doc)
    threads = [t for t in (doc or {}).get("threadInfos") or [] if isinstance(t, dict)]
    lines = [f"# Thread dump of TaskManager {tm_id} (GET /taskmanagers/{tm_id}/thread-dump), pulled by flink-runbooks "
             f"because a task it hosts hangs in cancellation."]
    for thread in threads:
        text = str(thread.get("stringifiedThreadInfo") or f'"{thread.get("threadName")}"')
        lines += [redact_text(line) for line in text.rstrip("\n").split("\n")] + [""]
    dest = root / "log" / f"taskmanager-{_safe(tm_id)}" / "thread-dump.txt"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n")
    report.logs.append(str(dest.relative_to(root)))


# The exception history as log records: Flink's log4j2 layout, under a logger that says where they come from.
HISTORY_LOGGER = "flink-runbooks.rest.exception-history"


def _exception_history_log(root: pathlib.Path, jid: str) -> str | None:
    """``log/exception-history/<job>.log``: the job's exception history (root causes and the task failures beside
    them, oldest first) as log records, so the ordinary ingestion reads what the REST API alone kept."""
    source = root / "rest" / "jobs" / jid / "exceptions.json"
    try:
        doc = json.loads(source.read_text())
    except (OSError, ValueError):
        return None
    job = {}
    with_job = root / "rest" / "jobs" / jid / "job.json"
    if with_job.is_file():
        job = json.loads(with_job.read_text())
    name = job.get("name") or "job"
    records: list[tuple[int, str, str]] = []
    for entry in ((doc.get("exceptionHistory") or {}).get("entries") or []):
        for failure in [*(entry.get("concurrentExceptions") or []), entry]:
            stack = str(failure.get("stacktrace") or failure.get("exceptionName") or "").rstrip("\n")
            if not stack:
                continue
            where = failure.get("taskName")
            what = (f"{where} on {failure.get('location') or failure.get('endpoint') or 'an unknown TaskManager'} "
                    f"failed" if where else "the job failed (global failure)")
            labels = failure.get("failureLabels") if isinstance(failure.get("failureLabels"), dict) else {}
            labelled = "".join(f" [{k}: {v}]" for k, v in sorted(labels.items()))
            records.append((int(failure.get("timestamp") or 0), f"Job {name} ({jid}): {what}.{labelled}", stack))
    if not records:
        return None
    lines = [f"# Derived by flink-runbooks pull from GET /jobs/{jid}/exceptions: the exception history as log records."]
    for stamp, message, stack in sorted(records, key=lambda r: r[0]):
        ts = datetime.datetime.fromtimestamp(stamp / 1000, datetime.timezone.utc)
        lines.append(f"{ts:%Y-%m-%d %H:%M:%S},{ts.microsecond // 1000:03d} ERROR {HISTORY_LOGGER} [] - {message}")
        lines.append(redact_text(stack))
    dest = root / "log" / "exception-history" / f"{jid}.log"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n")
    return str(dest.relative_to(root))


# Processes on one host often share a log directory, and each of them serves all of it: a file that more than one
# process serves is pulled once, into this folder, rather than under a process it may not belong to (a killed
# TaskManager's log is served by its peers).
SHARED_LOG_FOLDER = "shared"


def _pull_logs(client: RestClient, root: pathlib.Path, cap: int, report: PullReport, say) -> None:
    listings: list[tuple[str, pathlib.Path, list[tuple[str, int]]]] = []

    def listed(listing: str, folder: pathlib.Path) -> None:
        try:
            files = (client.get_json(listing) or {}).get("logs", [])
        except PullError as exc:
            report.warnings.append(f"{exc} (its logs are not in the bundle)")
            return
        names = [(str(e.get("name", "")), int(e.get("size") or 0)) for e in files if isinstance(e, dict)]
        # GC logs, profiler output and names that are not plain file names are left out
        listings.append((listing, folder, [(n, s) for n, s in names if re.fullmatch(r"[\w.@+-]+", n)
                                           and re.search(r"\.(?:log|out)(?:\.\d+)?$", n)]))

    say("JobManager logs")
    listed("/jobmanager/logs", root / "log" / "jobmanager")
    try:
        managers = client.get_json("/taskmanagers")
    except PullError as exc:
        if "HTTP 404" not in str(exc):
            raise
        report.warnings.append(f"{exc}: no TaskManagers to pull (a HistoryServer serves none)")
        managers = None
    if managers is not None:
        _write_json(root / "rest" / "taskmanagers.json", managers)
    for tm in (managers or {}).get("taskmanagers", []):
        tm_id = str(tm.get("id", ""))
        if not re.fullmatch(r"[\w.:@-]+", tm_id):
            continue
        quoted = urllib.parse.quote(tm_id, safe="")
        say(f"TaskManager {tm_id}")
        try:
            _write_json(root / "rest" / "taskmanagers" / f"{_safe(tm_id)}.json", client.get_json(f"/taskmanagers/{quoted}"))
        except PullError as exc:
            report.warnings.append(str(exc))
        if tm_id in report.cancelling:
            _pull_thread_dump(client, root, tm_id, quoted, report)
        listed(f"/taskmanagers/{quoted}/logs", root / "log" / f"taskmanager-{_safe(tm_id)}")

    servers = collections.Counter(f for _, _, files in listings for f in set(files))
    pulled: set[tuple[str, int]] = set()
    for listing, folder, files in listings:
        for name, size in files:
            if (name, size) in pulled:
                continue
            pulled.add((name, size))
            dest = (root / "log" / SHARED_LOG_FOLDER if servers[(name, size)] > 1 else folder) / name
            say(f"log {name}")
            try:
                total, cut = client.get_to_file(f"{listing}/{urllib.parse.quote(name)}", dest, cap)
            except PullError as exc:
                report.warnings.append(f"{exc} (this log is not in the bundle)")
                continue
            report.logs.append(str(dest.relative_to(root)))
            if listing == "/jobmanager/logs":
                report.jobmanager_logs.append(report.logs[-1])
            if cut:
                report.warnings.append(f"{dest.relative_to(root)}: {total / (1 << 20):,.1f} MiB, only the newest "
                                       f"{cap >> 20} MiB kept")


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name)


# ------------------------------------------------------------------------------------------ reading a bundle back

# A REST document of a pull is a few kilobytes (an exception history of MAX_EXCEPTIONS traces: a few hundred); a
# bigger one was not written by a pull and is not read.
MAX_DOCUMENT_BYTES = 16 << 20
MAX_STACKTRACE_CHARS = 64 << 10
MAX_THREADS = 5000


def read_bundle(folder: str | os.PathLike, shown: str | None = None) -> tuple[ClusterSnapshot | None, list[str]]:
    """The REST documents of the bundle ``folder`` (written by :func:`pull`) as plain data, with a warning per
    document that cannot be read; ``(None, [])`` when the folder is not a pulled bundle. Fields a release lacks
    (``endpoint`` before 1.19, ``failureLabels`` before 1.18, ``checkpointed_size`` before 1.15) stay empty."""
    root = pathlib.Path(folder)
    shown = shown or str(root)
    warnings: list[str] = []
    manifest = _document(root / "manifest.json", shown, warnings)
    if not isinstance(manifest, dict) or "source" not in manifest or "requests" not in manifest:
        return None, []
    snapshot = ClusterSnapshot(bundle=shown, source=_text(manifest.get("source")),
                               pulled_at=_text(manifest.get("pulled_at")),
                               flink_version=_text(manifest.get("flink_version")))
    jobs_dir = root / "rest" / "jobs"
    listed = [str(j) for j in manifest.get("jobs") or [] if JOB_ID.match(str(j))]
    found = sorted(p.name for p in jobs_dir.iterdir() if p.is_dir() and JOB_ID.match(p.name)) if jobs_dir.is_dir() else []
    for jid in dict.fromkeys(listed + found):
        folder_of_job = jobs_dir / jid
        if folder_of_job.is_dir():
            snapshot.jobs.append(_read_job(folder_of_job, jid, shown, warnings))
    tm_dir = root / "rest" / "taskmanagers"
    for path in sorted(tm_dir.glob("*.json")) if tm_dir.is_dir() else []:
        if path.name.endswith(THREAD_DUMP_SUFFIX):
            continue
        doc = _document(path, shown, warnings)
        if isinstance(doc, dict) and doc.get("id"):
            tm = RestTaskManager(id=str(doc["id"]), memory=_numbers(doc.get("memoryConfiguration")),
                                 hardware=_numbers(doc.get("hardware")), metrics=_numbers(doc.get("metrics")),
                                 document=_relative(path, root, shown))
            tm.threads = _read_thread_dump(root, tm.id, shown, warnings)
            snapshot.taskmanagers.append(tm)
    return snapshot, warnings


def _read_thread_dump(root: pathlib.Path, tm_id: str, shown: str, warnings: list[str]) -> list[RestThread]:
    """The TaskManager's thread dump (``ThreadDumpInfo``), each thread placed in the text file written beside its
    logs, so evidence points at the lines a person reads."""
    doc = _document(root / "rest" / "taskmanagers" / f"{_safe(tm_id)}{THREAD_DUMP_SUFFIX}", shown, warnings)
    if not isinstance(doc, dict):
        return []
    text_file = root / "log" / f"taskmanager-{_safe(tm_id)}" / "thread-dump.txt"
    starts: list[int] = []
    with contextlib.suppress(OSError):
        starts = [i + 1 for i, line in enumerate(text_file.read_text(errors="replace").splitlines())
                  if line.startswith('"')]
    threads = [t for t in doc.get("threadInfos") or [] if isinstance(t, dict)][:MAX_THREADS]
    shown_file = _relative(text_file, root, shown) if text_file.is_file() else None
    return [RestThread(name=str(t.get("threadName") or ""),
                       text=str(t.get("stringifiedThreadInfo") or "")[:MAX_STACKTRACE_CHARS],
                       file=shown_file, line=starts[i] if len(starts) == len(threads) else None)
            for i, t in enumerate(threads)]


def _document(path: pathlib.Path, shown: str, warnings: list[str]) -> Any:
    try:
        if not path.is_file():
            return None
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            warnings.append(f"{shown}/{path.name}: larger than {MAX_DOCUMENT_BYTES >> 20} MiB, not a document a pull "
                            f"writes; not read")
            return None
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        warnings.append(f"{shown}: {path.name} cannot be read as JSON ({exc.__class__.__name__}); not used")
        return None


def _relative(path: pathlib.Path, root: pathlib.Path, shown: str) -> str:
    return f"{shown.rstrip('/')}/{path.relative_to(root).as_posix()}"


def _read_job(folder: pathlib.Path, jid: str, shown: str, warnings: list[str]) -> RestJob:
    root = folder.parent.parent.parent
    job = RestJob(jid)
    details = _document(folder / "job.json", shown, warnings)
    if isinstance(details, dict):
        job.documents["job"] = _relative(folder / "job.json", root, shown)
        job.name, job.state = _text(details.get("name")), _text(details.get("state"))
        job.start_ms, job.end_ms = _millis(details.get("start-time")), _millis(details.get("end-time"))
        job.state_times = {k: v for k, v in _numbers(details.get("timestamps")).items() if v > 0}
        for v in details.get("vertices") or []:
            if isinstance(v, dict):
                job.vertices.append(_vertex(v, folder / "vertices", root, shown, warnings))
    exceptions = _document(folder / "exceptions.json", shown, warnings)
    if isinstance(exceptions, dict) and isinstance(exceptions.get("exceptionHistory"), dict):
        history = exceptions["exceptionHistory"]
        job.documents["exceptions"] = _relative(folder / "exceptions.json", root, shown)
        job.has_history = True
        job.history_truncated = bool(history.get("truncated"))
        entries = [RestFailureEntry(_failure(e), [_failure(c) for c in e.get("concurrentExceptions") or []
                                                  if isinstance(c, dict)])
                   for e in history.get("entries") or [] if isinstance(e, dict)]
        _number_lines(folder / "exceptions.json", entries)
        job.history = sorted(entries, key=lambda e: e.root.timestamp_ms or 0)
    checkpoints = _document(folder / "checkpoints.json", shown, warnings)
    if isinstance(checkpoints, dict):
        job.documents["checkpoints"] = _relative(folder / "checkpoints.json", root, shown)
        job.checkpoint_counts = _numbers(checkpoints.get("counts"))
        seen: dict[int, RestCheckpoint] = {}
        latest = checkpoints.get("latest") or {}
        for c in [*(checkpoints.get("history") or []), *(latest.values() if isinstance(latest, dict) else [])]:
            if isinstance(c, dict) and isinstance(c.get("id"), int) and "status" in c:
                seen.setdefault(c["id"], _checkpoint(c))
        job.checkpoints = sorted(seen.values(), key=lambda c: (c.trigger_ms or 0, c.checkpoint_id))
    config = _document(folder / "checkpoints-config.json", shown, warnings)
    if isinstance(config, dict) and ("timeout" in config or "mode" in config):
        job.documents["checkpoints-config"] = _relative(folder / "checkpoints-config.json", root, shown)
        interval = _millis(config.get("interval"))
        external = config.get("externalization") if isinstance(config.get("externalization"), dict) else {}
        job.checkpoint_config = RestCheckpointConfig(
            mode=_text(config.get("mode")),
            # Long.MAX_VALUE (or nothing) is how the REST API says checkpointing is off
            interval_ms=interval if interval and 0 < interval < (1 << 62) else None,
            timeout_ms=_millis(config.get("timeout")), min_pause_ms=_millis(config.get("min_pause")),
            max_concurrent=_millis(config.get("max_concurrent")),
            tolerable_failed=_millis(config.get("tolerable_failed_checkpoints")),
            unaligned=config.get("unaligned_checkpoints") if isinstance(config.get("unaligned_checkpoints"), bool) else None,
            externalized=external.get("enabled") if isinstance(external.get("enabled"), bool) else None,
            state_backend=_text(config.get("state_backend")), checkpoint_storage=_text(config.get("checkpoint_storage")))
    return job


def _vertex(doc: dict, folder: pathlib.Path, root: pathlib.Path, shown: str, warnings: list[str]) -> RestVertex:
    """One vertex of the job details, with its subtasks' watermarks and metrics when the pull took them."""
    vid = _text(doc.get("id"))
    vertex = RestVertex(name=str(doc.get("name") or ""), status=_text(doc.get("status")),
                        parallelism=_millis(doc.get("parallelism")), tasks=_numbers(doc.get("tasks")),
                        start_ms=_millis(doc.get("start-time")), duration_ms=_millis(doc.get("duration")), id=vid)
    if not vid or not re.fullmatch(r"[0-9a-f]{32}", vid):
        return vertex
    path = folder / f"{vid}{WATERMARKS_SUFFIX}"
    watermarks = _document(path, shown, warnings)
    if isinstance(watermarks, list):
        vertex.documents["watermarks"] = _relative(path, root, shown)
        for metric in watermarks:
            subtask, value = _metric(metric)
            if subtask is not None and value is not None and subtask.endswith(".currentInputWatermark"):
                vertex.watermarks[subtask.split(".", 1)[0]] = int(value)
    path = folder / f"{vid}{SUBTASK_METRICS_SUFFIX}"
    metrics = _document(path, shown, warnings)
    if isinstance(metrics, dict):
        vertex.documents["subtask-metrics"] = _relative(path, root, shown)
        for index, listed in metrics.items():
            if str(index).isdigit() and isinstance(listed, list):
                vertex.subtask_metrics[str(index)] = {name: value for name, value in map(_metric, listed)
                                                      if name is not None and value is not None}
    return vertex


def _metric(doc: Any) -> tuple[str | None, float | int | None]:
    """A metric of the REST API, ``{"id": name, "value": "<number as text>"}``, as a name and a number (a whole
    number stays exact: a watermark is a long)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        return None, None
    value = doc.get("value")
    try:
        number = int(value) if re.fullmatch(r"-?\d+", str(value)) else float(value)
    except (TypeError, ValueError):
        return doc["id"], None
    return doc["id"], number if number == number else None  # NaN: no value


def _number_lines(path: pathlib.Path, entries: list[RestFailureEntry]) -> None:
    """The line of each failure's trace in the document as the pull wrote it (keys sorted, one per line: an entry's
    concurrent exceptions come before its own ``stacktrace``), so evidence points at it; left unset when the
    document was written otherwise."""
    try:
        lines = [i + 1 for i, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines())
                 if text.lstrip().startswith('"stacktrace": ')]
    except OSError:
        return
    failures = [f for e in entries for f in [*e.concurrent, e.root]]
    if len(lines) == len(failures):
        for failure, line in zip(failures, lines):
            failure.line = line


def _failure(doc: dict) -> RestFailure:
    labels = doc.get("failureLabels") if isinstance(doc.get("failureLabels"), dict) else {}
    return RestFailure(
        exception=str(doc.get("exceptionName") or ""),
        stacktrace=str(doc.get("stacktrace") or doc.get("exceptionName") or "")[:MAX_STACKTRACE_CHARS],
        timestamp_ms=_millis(doc.get("timestamp")), task=_text(doc.get("taskName")),
        # "endpoint" since 1.19 (2.x has only it), "location" before
        location=_text(doc.get("endpoint") or doc.get("location")), taskmanager=_text(doc.get("taskManagerId")),
        labels={str(k): str(v) for k, v in labels.items()})


def _checkpoint(doc: dict) -> RestCheckpoint:
    return RestCheckpoint(
        checkpoint_id=doc["id"], status=str(doc.get("status") or ""), savepoint=bool(doc.get("is_savepoint")),
        trigger_ms=_millis(doc.get("trigger_timestamp")), ack_ms=_millis(doc.get("latest_ack_timestamp")),
        end_to_end_ms=_millis(doc.get("end_to_end_duration")), state_size=_millis(doc.get("state_size")),
        checkpointed_size=_millis(doc.get("checkpointed_size")), failure_ms=_millis(doc.get("failure_timestamp")),
        failure_message=_text(doc.get("failure_message")), acknowledged=_millis(doc.get("num_acknowledged_subtasks")),
        subtasks=_millis(doc.get("num_subtasks")))


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value) else None


def _millis(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _numbers(doc: Any) -> dict:
    if not isinstance(doc, dict):
        return {}
    return {str(k): v for k, v in doc.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
