"""``flink-runbooks serve``: an Alertmanager webhook receiver that runs triage.

Alertmanager (webhook payload version 4) posts to ``POST /alerts``. The incident's log location is read from the
first alert that has it, in this order: annotation ``flink_logs``, label ``flink_logs``, then the group's common
annotations and labels. It is a path relative to ``--logs-root`` (an absolute path is accepted only when it lies
under the root). An optional ``flink_version`` annotation or label is passed on as ``--flink-version``.

Each accepted alert starts a triage into a new timestamped folder under ``--out-root`` and is answered with
``202`` and the run's id and report location; ``GET /runs/{id}`` returns its status and, when done, the report.
Paths outside the logs root (``..``, symlinks pointing out) get ``403``, unknown paths ``404``, malformed payloads
``400``/``422``, and a second alert for a folder whose triage is still running ``409``.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import pathlib
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

LOCATION_KEY = "flink_logs"
VERSION_KEY = "flink_version"


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
    incident: str
    out: str
    status: str = "running"  # running | done | error
    exit_code: int | None = None
    error: str | None = None
    started: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    finished: str | None = None

    def view(self) -> dict[str, Any]:
        doc = {k: getattr(self, k) for k in ("id", "incident", "out", "status", "exit_code", "error", "started", "finished")}
        report = pathlib.Path(self.out) / "report.json"
        doc["report_path"] = str(report)
        if self.status == "done" and report.exists():
            try:
                doc["report"] = json.loads(report.read_text())
            except (OSError, ValueError) as exc:  # one unreadable report must not break every listing
                doc["error"] = f"report.json cannot be read: {exc}"
        return doc


class PathRejected(Exception):
    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def resolve_incident(logs_root: str | os.PathLike, location: str) -> pathlib.Path:
    """The incident folder for ``location``, guaranteed to be inside ``logs_root`` after resolving symlinks."""
    root = pathlib.Path(logs_root).resolve()
    if not location or "\x00" in location:
        raise PathRejected(400, "empty log location")
    candidate = pathlib.Path(location)
    if ".." in candidate.parts:
        raise PathRejected(403, f"log location {location!r} may not contain '..'")
    target = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if target == root:
        raise PathRejected(403, f"log location {location!r} is the logs root itself; name an incident folder under it")
    if root not in target.parents:
        raise PathRejected(403, f"log location {location!r} is outside the logs root")
    if not target.exists():
        raise PathRejected(404, f"log location {location!r} does not exist under the logs root")
    escape = first_escape(target, root)
    if escape is not None:
        raise PathRejected(403, f"log location {location!r} holds {escape}, a link that leads outside the logs root")
    return target


def first_escape(folder: pathlib.Path, root: pathlib.Path) -> str | None:
    """The first path under ``folder`` that, once links are followed, lies outside ``root`` (None when every file
    triage would read is inside). Directories are visited once by real path, so a link loop ends the walk."""
    seen: set[str] = set()
    for current, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(current)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        for name in sorted(dirs) + sorted(files):
            path = pathlib.Path(current) / name
            resolved = pathlib.Path(os.path.realpath(path))
            if resolved != root and root not in resolved.parents:
                return str(path.relative_to(folder))
    return None


def find_location(payload: dict[str, Any]) -> tuple[str | None, str | None]:
    """(log location, flink version) named by the payload, per the order documented above."""
    def pick(mapping: dict | None, key: str) -> str | None:
        value = (mapping or {}).get(key)
        return value if isinstance(value, str) and value.strip() else None

    sources = []
    for alert in payload.get("alerts") or []:
        sources += [alert.get("annotations"), alert.get("labels")]
    sources += [payload.get("commonAnnotations"), payload.get("commonLabels")]
    location = next((v for src in sources if (v := pick(src, LOCATION_KEY))), None)
    version = next((v for src in sources if (v := pick(src, VERSION_KEY))), None)
    return location, version


def create_app(logs_root: str, out_root: str, *, jobs: int = 2, timeout_s: float = 600, spark=None,
               runbooks_dir: str | None = None):
    from fastapi import FastAPI, HTTPException

    from flink_runbooks.apps.triage import triage

    app = FastAPI(title="flink-runbooks", description=__doc__)
    runs: dict[str, Run] = {}
    busy: dict[str, str] = {}  # incident folder -> run id
    lock = threading.Lock()
    pathlib.Path(out_root).mkdir(parents=True, exist_ok=True)

    def work(run: Run, paths: list[str], version: str | None) -> None:
        try:
            report = triage(paths, run.out, spark=spark, flink_version=version, jobs=jobs, timeout_s=timeout_s,
                            runbooks_dir=runbooks_dir)
            run.exit_code, run.status = report.exit_code, "done"
        except Exception as exc:  # the server outlives any failed triage
            from flink_runbooks.parse.redact import redact_text

            run.status, run.error = "error", redact_text(f"{type(exc).__name__}: {exc}")
        finally:
            run.finished = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            with lock:
                busy.pop(run.incident, None)

    @app.post("/alerts", status_code=202)
    def receive(payload: Payload) -> dict[str, Any]:
        if payload.version != "4":
            raise HTTPException(400, f"unsupported Alertmanager payload version {payload.version!r} (expected '4')")
        location, version = find_location(payload.model_dump())
        if location is None:
            raise HTTPException(400, f"no '{LOCATION_KEY}' annotation or label names the incident's logs")
        if version is not None:
            from flink_runbooks.apps.cli import flink_version

            try:
                version = flink_version(version)
            except Exception as exc:  # argparse.ArgumentTypeError
                raise HTTPException(400, f"'{VERSION_KEY}': {exc}") from None
        try:
            folder = resolve_incident(logs_root, location)
        except PathRejected as exc:
            raise HTTPException(exc.status, exc.reason) from None
        with lock:
            if str(folder) in busy:
                raise HTTPException(409, f"a triage of {location!r} is already running: run {busy[str(folder)]}")
            stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            run_id = f"{stamp}-{uuid.uuid4().hex[:6]}"
            name = re.sub(r"[^\w.-]+", "_", folder.name)[:60] or "incident"
            run = Run(run_id, str(folder), str(pathlib.Path(out_root).resolve() / f"{run_id}-{name}"))
            runs[run_id] = run
            busy[str(folder)] = run_id
        threading.Thread(target=work, args=(run, [str(folder)], version), daemon=True).start()
        return {"run": run_id, "status": run.status, "out": run.out, "report": f"{run.out}/report.json",
                "url": f"/runs/{run_id}"}

    @app.get("/runs/{run_id}")
    def status(run_id: str) -> dict[str, Any]:
        run = runs.get(run_id)
        if run is None:
            raise HTTPException(404, f"no run {run_id!r}")
        return run.view()

    @app.get("/runs")
    def list_runs() -> list[dict[str, Any]]:
        return [{k: v for k, v in r.view().items() if k != "report"} for r in runs.values()]

    @app.get("/healthz")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def run_server(*, host: str, port: int, logs_root: str, out_root: str, jobs: int = 2, timeout_s: float = 600) -> int:
    import uvicorn

    if not pathlib.Path(logs_root).is_dir():
        print(f"flink-runbooks: --logs-root {logs_root} is not a directory", flush=True)
        return 2
    uvicorn.run(create_app(logs_root, out_root, jobs=jobs, timeout_s=timeout_s), host=host, port=port)
    return 0
