"""``flink-runbooks serve``: an Alertmanager webhook receiver that runs triage.

Alertmanager (webhook payload version 4) posts to ``POST /alerts``. The incident is named by the first alert that
names it, in this order: annotation, then label, then the group's common annotations and labels. Either
``flink_rest_url``, a running cluster's JobManager (``http(s)://``), pulled live into the run's ``pulled/`` folder
(optional ``job_id`` or ``job_name``; see :mod:`flink_runbooks.collect.rest`) when it is one of the ``--allow-rest-url``
addresses (else ``403``: the pull sends the environment's REST credentials), or ``flink_logs``, a folder relative
to ``--logs-root`` (an absolute path is accepted only when it lies under the root). An optional ``flink_version``
annotation or label is passed on as ``--flink-version``. A ``resolved`` notification starts nothing (200).

Each accepted alert becomes a run with a new timestamped folder under ``--out-root`` and is answered with ``202``
and the run's id and report location; ``GET /runs/{id}`` returns its status (queued, running, done, error or
interrupted) and, when done, the report. At most ``max_concurrent`` triages run at once; later ones wait in order,
at most ``max_queued`` of them (then ``503``). Paths outside the logs root (``..``, symlinks pointing out) get
``403``, unknown paths ``404``, malformed payloads ``400``/``422``. A repeat of an alert whose triage is queued or
running (or another alert about the same cluster meanwhile) is acknowledged with ``200`` and that run (Alertmanager
counts any other status as a failed notification and sends it again). A finished run's ``GET /runs/{id}`` carries a
one-line ``headline`` (runbook, root cause, confidence) and ``GET /runs/{id}/report.md`` serves its report, ``GET
/runs/{id}/report.html`` the same as a page (with the runbook notebooks it links to under ``/runs/{id}/runbooks/``),
so a chat bot or a pager can link to it; every answer about a run names both links.

The incident folder is opened once, when the alert is accepted, and triage reads a snapshot taken through that open
folder (hard links, or copies on another file system) in the run's ``input/`` folder, removed when the triage ends:
replacing the folder or a file in it by a link after the check reads nothing outside the root. Each run's state is
kept in ``<out-root>/.runs/<id>.json``, so a restarted server answers for every earlier run and marks the ones it
did not finish ``interrupted`` (their folder holds an ``INCOMPLETE`` file until a triage completes).
"""
from __future__ import annotations

import collections
import dataclasses
import datetime as _dt
import json
import os
import pathlib
import re
import shutil
import sys
import threading
import urllib.parse
import uuid
from dataclasses import asdict, dataclass, field, fields
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from flink_runbooks.apps.incident_folder import PathRejected, resolve_incident, IncidentFolder, open_incident, snapshot_incident
from flink_runbooks.collect import rest
from flink_runbooks.render.terminal import confidence_words

LOCATION_KEY = "flink_logs"
REST_URL_KEY = "flink_rest_url"
JOB_KEYS = ("job_id", "job_name")
VERSION_KEY = "flink_version"
PULLED_DIR = "pulled"  # in a run's folder: the bundle pulled from the cluster (redacted as written)
DEFAULT_MAX_QUEUED = 100
STATE_DIR = ".runs"  # under --out-root: one JSON file per run
INCOMPLETE_MARK = "INCOMPLETE"  # in a run's folder from acceptance until its triage completes
SNAPSHOT_DIR = "input"  # in a run's folder while its triage runs
UNFINISHED = ("queued", "running")

def default_max_concurrent(cores: int | None = None) -> int:
    """Triages run at once by default: each already runs ``jobs`` notebook kernels, so one on a machine of two cores
    or fewer, else half the cores."""
    cores = cores or os.cpu_count() or 1
    return 1 if cores <= 2 else cores // 2


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


class Alert(BaseModel):
    """One alert of an Alertmanager webhook payload (only the fields this server reads are required)."""

    model_config = ConfigDict(extra="allow")
    status: str
    labels: dict[str, str]
    annotations: dict[str, str] = {}


class Payload(BaseModel):
    """Alertmanager webhook payload, version 4."""

    model_config = ConfigDict(extra="allow")
    version: str
    status: str
    alerts: list[Alert]
    commonLabels: dict[str, str] = {}
    commonAnnotations: dict[str, str] = {}


@dataclass
class Run:
    id: str
    incident: str  # the folder under the logs root as resolved when the alert was accepted, or the REST URL pulled
    out: str
    status: str = "queued"  # queued | running | done | error | interrupted
    exit_code: int | None = None
    error: str | None = None
    flink_version: str | None = None
    accepted: str = field(default_factory=_now)
    started: str | None = None
    finished: str | None = None
    input: str | None = None  # the snapshot triage reads: the incident's files under the same relative names
    input_warnings: list[str] = field(default_factory=list)  # files of the folder the snapshot left out, and why
    job: str | None = None  # the job to pull (id or name), for a REST URL

    def view(self) -> dict[str, Any]:
        doc = asdict(self)
        doc.update(report_links(self.id))
        report = pathlib.Path(self.out) / "report.json"
        doc["report_path"] = str(report)
        if self.status not in UNFINISHED and report.exists():
            try:
                doc["report"] = json.loads(report.read_text())
                doc["headline"] = headline(doc["report"])
            except (OSError, ValueError) as exc:  # one unreadable report must not break every listing
                doc["error"] = f"report.json cannot be read: {exc}"
        return doc


def report_links(run_id: str) -> dict[str, str]:
    """Where the run's report is served, as Markdown and as a page (they answer 404 until the run is done)."""
    return {"report_md": f"/runs/{run_id}/report.md", "report_html": f"/runs/{run_id}/report.html"}


def headline(report: dict[str, Any]) -> str:
    """One line for a pager or a chat: the primary finding's runbook, root cause and confidence in words."""
    primary = next((f for f in report.get("findings") or [] if f.get("primary")), None)
    if primary is None:
        return "no known failure found"
    cause = (primary.get("root_cause") or {}).get("slug", "undetermined")
    return (f"{primary.get('runbook')}: {cause} "
            f"(confidence {confidence_words(float(primary.get('confidence') or 0), cause)})")


class RunStore:
    """Run states on disk, one JSON file per run, each replaced whole on every change (a reader or a restart sees
    the previous state or the new one, never half of one)."""

    def __init__(self, out_root: pathlib.Path):
        self.directory = out_root / STATE_DIR

    def save(self, run: Run) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)  # on the first run: a server that ran none left nothing
        target = self.directory / f"{run.id}.json"
        temp = target.with_name(f".{run.id}.{threading.get_ident()}.tmp")
        with open(temp, "w") as fh:
            json.dump(asdict(run), fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, target)

    def load(self) -> list[Run]:
        names = {f.name for f in fields(Run)}
        runs = []
        for path in self.directory.glob("*.json"):
            try:
                doc = json.loads(path.read_text())
                runs.append(Run(**{k: v for k, v in doc.items() if k in names}))
            except (OSError, ValueError, TypeError) as exc:
                print(f"flink-runbooks serve: run state {path} cannot be read ({exc}); skipped", flush=True)
        return sorted(runs, key=lambda r: (r.accepted, r.id))


def busy_key(incident: str, job: str | None) -> str:
    """What a repeat of an alert shares with the run it repeats: the incident (and the job pulled)."""
    return incident + (f" job {job}" if job else "")


def repeated_run(busy: dict[str, str], incident: str, job: str | None) -> str | None:
    """The queued or running run an alert repeats: the same incident and job; or, for a cluster, any alert about it
    while a triage of it is under way (an alert without a job, such as a lost TaskManager, and one for a job of that
    cluster are one incident: one pull serves both)."""
    if (key := busy_key(incident, job)) in busy:
        return busy[key]
    if job is None:
        return next((run for key, run in busy.items() if key.startswith(busy_key(incident, None) + " job ")), None)
    return busy.get(busy_key(incident, None))


def find_value(payload: dict[str, Any], key: str) -> str | None:
    """The first value of ``key`` in the payload, per the order documented above."""
    return next((v for src in _sources(payload) if isinstance(v := (src or {}).get(key), str) and v.strip()), None)


def _sources(payload: dict[str, Any]) -> list:
    sources = []
    for alert in payload.get("alerts") or []:
        sources += [alert.get("annotations"), alert.get("labels")]
    return sources + [payload.get("commonAnnotations"), payload.get("commonLabels")]


def find_location(payload: dict[str, Any]) -> tuple[str | None, str | None]:
    """(log location, flink version) named by the payload, per the order documented above."""
    return find_value(payload, LOCATION_KEY), find_value(payload, VERSION_KEY)


def _write_mark(out: pathlib.Path, run: Run) -> None:
    """The ``INCOMPLETE`` file in a run's folder: what a person opening the folder sees while the run is unfinished,
    and after a stop that nobody answered for."""
    why = {"queued": "it is waiting for a free slot",
           "running": "its triage is running",
           "error": f"its triage failed: {run.error}",
           "interrupted": f"it was interrupted: {run.error}"}.get(run.status, run.status)
    try:
        out.mkdir(parents=True, exist_ok=True)
        temp = out / f".{INCOMPLETE_MARK}.tmp"
        temp.write_text(f"This triage is not complete: {why}.\nrun {run.id}, status {run.status}, "
                        f"incident {run.incident}\n")
        os.replace(temp, out / INCOMPLETE_MARK)
    except OSError:
        pass  # the run's state on disk says the same; a full disk must not stop the server


# How long a stopping server waits for its running triages to stop their notebooks and write their reports.
SHUTDOWN_GRACE_S = 15


def rest_url_allowed(url: str, allowed: Sequence[str]) -> bool:
    """``url`` is one of the JobManagers this server may pull: same scheme and host as an allowed URL, the same port
    when the allowed URL names one, and a path under its path. (The pull sends the REST credentials of the
    environment or ~/.netrc, and what it fetches is served back: an alert must not choose where they go.)"""
    parts = urllib.parse.urlsplit(url)
    for entry in allowed:
        want = urllib.parse.urlsplit(entry)
        if parts.scheme.lower() != want.scheme.lower() or (parts.hostname or "") != (want.hostname or "").lower():
            continue
        if want.port is not None and (parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())) != want.port:
            continue
        prefix = want.path.rstrip("/")
        if parts.path == prefix or parts.path.startswith(prefix + "/") or not prefix:
            return True
    return False


_DEFAULT_PORTS = {"http": 80, "https": 443}


def create_app(logs_root: str, out_root: str, *, jobs: int = 2, timeout_s: float = 600, spark=None,
               runbooks_dir: str | None = None, max_concurrent: int | None = None,
               max_queued: int = DEFAULT_MAX_QUEUED, allowed_rest_urls: Sequence[str] = ()):
    import contextlib

    from fastapi import FastAPI, HTTPException
    from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse

    from flink_runbooks.apps import triage as triage_module
    from flink_runbooks.parse.redact import redact_text
    from flink_runbooks.render.markdown import markdown_page
    from flink_runbooks.render.notebook_html import CONTENT_SECURITY_POLICY

    max_concurrent = default_max_concurrent() if max_concurrent is None else max_concurrent
    if max_concurrent < 1 or max_queued < 0:
        raise ValueError("max_concurrent must be at least 1 and max_queued at least 0")
    out_root_path = pathlib.Path(out_root).resolve()
    out_root_path.mkdir(parents=True, exist_ok=True)
    store = RunStore(out_root_path)
    runs: dict[str, Run] = {}
    busy: dict[str, str] = {}  # incident folder -> run id, while queued or running
    waiting: collections.deque[tuple[Run, IncidentFolder]] = collections.deque()
    lock = threading.Lock()
    running = 0

    def change(run: Run, status: str, **values: Any) -> None:
        # Disk first, then memory: whoever is told the new status finds the folder and the state file agreeing.
        new = dataclasses.replace(run, status=status, **values)
        try:
            store.save(new)
        except OSError as exc:  # a full disk: the run still answers from memory
            print(f"flink-runbooks serve: state of run {run.id} cannot be saved ({exc})", flush=True)
        if status == "done":
            pathlib.Path(run.out, INCOMPLETE_MARK).unlink(missing_ok=True)
        else:
            _write_mark(pathlib.Path(run.out), new)
        for key, value in vars(new).items():
            if key != "status":
                setattr(run, key, value)
        run.status = status  # last: a reader that sees it sees the values that came with it

    def interrupt(run: Run, reason: str) -> None:
        change(run, "interrupted", finished=_now(), error=reason)

    # Runs an earlier server accepted: answered for as they ended; those it left unfinished are interrupted now.
    for earlier in store.load():
        runs[earlier.id] = earlier
        if earlier.status in UNFINISHED:
            interrupt(earlier, f"the server stopped while it was {earlier.status}")
            shutil.rmtree(pathlib.Path(earlier.out, SNAPSHOT_DIR), ignore_errors=True)

    stops: dict[str, tuple[threading.Event, threading.Thread]] = {}  # running run id -> its stop and its thread

    def start(run: Run, handle: IncidentFolder) -> None:  # with the lock held
        nonlocal running
        running += 1
        change(run, "running", started=_now())
        stop = threading.Event()
        thread = threading.Thread(target=work, args=(run, handle, stop), name=f"triage-{run.id}", daemon=True)
        stops[run.id] = (stop, thread)
        thread.start()

    def work(run: Run, handle: IncidentFolder, stop: threading.Event) -> None:
        nonlocal running
        snapshot_dir = pathlib.Path(run.out, SNAPSHOT_DIR)
        try:
            if handle is None:  # a running cluster: pulled into the run's folder, redacted as written
                pulled = rest.pull(run.incident, pathlib.Path(run.out, PULLED_DIR), job=run.job)
                change(run, "running", input=str(pulled.out), input_warnings=pulled.warnings)
                source = str(pulled.out)
            else:
                snap = snapshot_incident(handle, snapshot_dir / handle.folder.name)
                handle.close()
                change(run, "running", input=str(snap.folder), input_warnings=snap.warnings)
                source = str(snap.folder)
            report = triage_module.triage([source], run.out, spark=spark, flink_version=run.flink_version,
                                          jobs=jobs, timeout_s=timeout_s, runbooks_dir=runbooks_dir, force=True,
                                          cancel=stop)
            change(run, "done", exit_code=report.exit_code, finished=_now())
        except triage_module.TriageInterrupted:
            interrupt(run, "the server stopped while it was running")
        except rest.PullError as exc:
            change(run, "error", error=redact_text(f"the cluster could not be pulled: {exc}"), finished=_now())
        except Exception as exc:  # the server outlives any failed triage
            change(run, "error", error=redact_text(f"{type(exc).__name__}: {exc}"), finished=_now())
        finally:
            if handle is not None:
                handle.close()
            # The incident's files are not kept: raw logs may hold secrets that only the saved incident has masked.
            shutil.rmtree(snapshot_dir, ignore_errors=True)
            with lock:
                running -= 1
                stops.pop(run.id, None)
                busy.pop(busy_key(run.incident, run.job), None)
                while waiting and running < max_concurrent:
                    start(*waiting.popleft())

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        yield
        # A stop with runs unfinished: say so now rather than at the next start.
        with lock:
            while waiting:
                run, handle = waiting.popleft()
                if handle is not None:
                    handle.close()
                busy.pop(busy_key(run.incident, run.job), None)
                interrupt(run, "the server stopped while it was queued")
            stopping = list(stops.values())
        # Running triages kill their notebooks and write report.json as interrupted; a thread still busy after the
        # grace period (an ingest under way) ends with the process, and its run is marked here.
        for stop, _thread in stopping:
            stop.set()
        for _stop, thread in stopping:
            thread.join(timeout=SHUTDOWN_GRACE_S)
        with lock:
            for run in runs.values():
                if run.status == "running":  # the snapshot goes at the next start
                    interrupt(run, "the server stopped while it was running")

    app = FastAPI(title="flink-runbooks", description=__doc__, lifespan=lifespan)

    @app.post("/alerts", status_code=202)
    def receive(payload: Payload):
        if payload.version != "4":
            raise HTTPException(400, f"unsupported Alertmanager payload version {payload.version!r} (expected '4')")
        if payload.status == "resolved":
            return JSONResponse({"status": "resolved", "started": False}, status_code=200)
        doc = payload.model_dump()
        location, version = find_location(doc)
        url = find_value(doc, REST_URL_KEY)
        job = next((v for key in JOB_KEYS if (v := find_value(doc, key))), None)
        if location is None and url is None:
            raise HTTPException(400, f"no '{REST_URL_KEY}' or '{LOCATION_KEY}' annotation or label names the incident")
        if url is not None and not rest.is_rest_url(url):
            raise HTTPException(400, f"'{REST_URL_KEY}': {url!r} is not an http:// or https:// URL")
        if url is not None and not rest_url_allowed(url, allowed_rest_urls):
            raise HTTPException(403, f"'{REST_URL_KEY}': {rest.shown_url(url)} is not a JobManager this server may "
                                     "pull (start it with --allow-rest-url for each cluster's REST address)")
        if version is not None:
            from flink_runbooks.vocabulary.versions import FlinkVersion

            try:
                version = FlinkVersion.typed(str(version))
            except ValueError as exc:
                raise HTTPException(400, f"'{VERSION_KEY}': {exc}") from None
        if url is not None:
            # credentials never travel in the run's state: the pull reads them from the environment or ~/.netrc
            handle, incident = None, rest.shown_url(url)
            name = urllib.parse.urlsplit(incident).netloc
        else:
            try:
                folder = resolve_incident(logs_root, location)
                handle = open_incident(logs_root, folder)
            except PathRejected as exc:
                raise HTTPException(exc.status, exc.reason) from None
            incident, name = str(folder), folder.name
        with lock:
            key = busy_key(incident, job)
            if (repeated := repeated_run(busy, incident, job)) is not None:
                # A repeat of the group: acknowledged, so Alertmanager does not count a failure and send it again.
                if handle is not None:
                    handle.close()
                earlier = runs[repeated]
                return JSONResponse({"run": earlier.id, "status": earlier.status, "repeat": True, "out": earlier.out,
                                     "url": f"/runs/{earlier.id}", **report_links(earlier.id)}, status_code=200)
            if running >= max_concurrent and len(waiting) >= max_queued:
                if handle is not None:
                    handle.close()
                raise HTTPException(503, f"{len(waiting)} triages are already waiting for one of {max_concurrent} "
                                         f"slot(s); send the alert again later")
            stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            run_id = f"{stamp}-{uuid.uuid4().hex[:6]}"
            name = re.sub(r"[^\w.-]+", "_", name)[:60] or "incident"
            run = Run(run_id, incident, str(out_root_path / f"{run_id}-{name}"), flink_version=version, job=job)
            runs[run_id] = run
            busy[key] = run_id
            if running < max_concurrent:
                start(run, handle)
            else:
                waiting.append((run, handle))
                change(run, "queued")
            answer = {"run": run_id, "status": run.status, "out": run.out, "report": f"{run.out}/report.json",
                      "url": f"/runs/{run_id}", **report_links(run_id)}
            if run.status == "queued":
                answer["position"] = len(waiting)
        return answer

    def view(run: Run) -> dict[str, Any]:
        doc = run.view()
        if run.status == "queued":
            with lock:
                doc["position"] = next((i for i, (r, _) in enumerate(waiting, 1) if r is run), None)
        return doc

    @app.get("/runs/{run_id}")
    def status(run_id: str) -> dict[str, Any]:
        run = runs.get(run_id)
        if run is None:
            raise HTTPException(404, f"no run {run_id!r}")
        return view(run)

    def finished_file(run_id: str, *parts: str) -> pathlib.Path:
        run = runs.get(run_id)
        if run is None:
            raise HTTPException(404, f"no run {run_id!r}")
        path = pathlib.Path(run.out, *parts)
        if run.status in UNFINISHED or not path.is_file():
            raise HTTPException(404, f"run {run_id} has no {'/'.join(parts)} ({run.status})")
        return path

    @app.get("/runs/{run_id}/report.md", response_class=PlainTextResponse)
    def report_markdown(run_id: str) -> PlainTextResponse:
        return PlainTextResponse(finished_file(run_id, "report.md").read_text(),
                                 media_type="text/markdown; charset=utf-8")

    @app.get("/runs/{run_id}/report.html", response_class=HTMLResponse)
    def report_page(run_id: str) -> HTMLResponse:
        page = markdown_page(finished_file(run_id, "report.md").read_text(), f"Triage report {run_id}")
        return HTMLResponse(page, headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY})

    @app.get("/runs/{run_id}/runbooks/{name}", response_class=HTMLResponse)
    def runbook_page(run_id: str, name: str) -> HTMLResponse:
        # only the pages triage wrote, by their plain names: the report links to them
        if not re.fullmatch(r"[\w-]+\.html", name):
            raise HTTPException(404, f"no page {name!r}")
        page = finished_file(run_id, "runbooks", name).read_text()
        return HTMLResponse(page, headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY})

    @app.get("/runs")
    def list_runs() -> list[dict[str, Any]]:
        return [{k: v for k, v in view(r).items() if k != "report"} for r in list(runs.values())]

    @app.get("/healthz")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def run_server(*, host: str, port: int, logs_root: str, out_root: str, jobs: int = 2, timeout_s: float = 600,
               max_concurrent: int | None = None, max_queued: int = DEFAULT_MAX_QUEUED,
               allowed_rest_urls: Sequence[str] = ()) -> int:
    import uvicorn

    if not pathlib.Path(logs_root).is_dir():
        print(f"flink-runbooks: --logs-root {logs_root} is not a directory", file=sys.stderr)
        return 2
    if max_concurrent is not None and max_concurrent < 1:
        print(f"flink-runbooks: --max-concurrent must be at least 1, not {max_concurrent}", file=sys.stderr)
        return 2
    refused = [u for u in allowed_rest_urls if not rest.is_rest_url(u)]
    if refused:
        print(f"flink-runbooks: --allow-rest-url {refused[0]} is not an http:// or https:// URL", file=sys.stderr)
        return 2
    uvicorn.run(create_app(logs_root, out_root, jobs=jobs, timeout_s=timeout_s, max_concurrent=max_concurrent,
                           max_queued=max_queued, allowed_rest_urls=allowed_rest_urls), host=host, port=port)
    return 0
