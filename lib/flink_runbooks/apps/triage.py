"""Incident automation: ingest once, run the matching runbook notebooks with papermill, hand back a report.

Everything goes into one output directory: the saved incident (``incident/``), each executed notebook and its
HTML rendering (``runbooks/``), ``report.json``, ``report.md`` and ``patches/``. The inputs are only read.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import re
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from flink_runbooks.apps.notebook_runner import run_notebook
from flink_runbooks.diagnose import Diagnosis, run_detectors
from flink_runbooks.model import Patch
from flink_runbooks.vocabulary.versions import FlinkVersion
from flink_runbooks.render.patches import (fix_and_hardening, render_config_diff, render_flinkdeployment_patch,
                                          render_kafka_properties)
from flink_runbooks.parse.redact import redact_text
from flink_runbooks.render.markdown import HARDENING_PREFIX, render_markdown
from flink_runbooks.render.notebook_html import render_html
from flink_runbooks.render.report import diagnosis_dict

RUNBOOKS_DIR = pathlib.Path(__file__).resolve().parents[3] / "runbooks"
EXIT_RUNBOOK_FAILED = 3


class TriageError(Exception):
    """Bad input or output location; the message is one line for the user."""


class TriageInterrupted(Exception):
    """The run was stopped from outside (``cancel`` set: a server shutting down); report.json says what completed."""


class TriageOutputError(TriageError):
    """The output could not be written (a full disk, a read-only folder); report.json says so when it could be."""


@dataclass
class RunbookResult:
    runbook: str
    status: str = "pending"  # ok | failed | timed out | interrupted (killed, or never started)
    duration_s: float = 0.0
    error: str | None = None  # the failing cell and its message
    notebook: str | None = None
    html: str | None = None


@dataclass
class TriageReport:
    out: pathlib.Path
    diagnosis: Diagnosis
    runbooks: list[RunbookResult] = field(default_factory=list)
    patches: dict[str, str] = field(default_factory=dict)  # name -> path
    status: str = "running"  # complete | interrupted | failed (an output that could not be written)
    stage: str | None = None  # what was under way when the run stopped
    error: str | None = None

    @property
    def exit_code(self) -> int:
        if any(r.status != "ok" for r in self.runbooks):
            return EXIT_RUNBOOK_FAILED
        return 1 if self.diagnosis.findings else 0

    def to_dict(self) -> dict:
        doc = {"status": self.status}
        if self.status != "complete":
            doc |= {"stage": self.stage, "error": self.error}
        doc |= diagnosis_dict(self.diagnosis)
        doc["runbooks"] = [asdict(r) for r in self.runbooks]
        doc["patches"] = self.patches
        doc["out"] = str(self.out)
        return doc


def prepare_out_dir(out: str | os.PathLike, inputs: Sequence[str], force: bool) -> pathlib.Path:
    """The output directory must be empty (or ``force``) and must not lie inside an input directory."""
    path = pathlib.Path(out).resolve()
    for raw in inputs:
        if "://" in raw and not raw.startswith("file:"):
            continue
        src = pathlib.Path(re.sub(r"^file:(//)?", "", raw)).expanduser().resolve()
        if path == src or src in path.parents:
            raise TriageError(f"--out {out} is inside the input {raw}; choose a directory outside the incident's files")
    if path.exists() and not path.is_dir():
        raise TriageError(f"--out {out} exists and is not a directory")
    if path.exists() and any(path.iterdir()) and not force:
        raise TriageError(f"--out {out} is not empty; use --force to write into it anyway")
    path.mkdir(parents=True, exist_ok=True)
    return path


def triage(
    paths: Sequence[str],
    out: str | os.PathLike,
    *,
    spark=None,
    flink_version: str | None = None,
    runbooks: Sequence[str] | None = None,
    jobs: int = 2,
    timeout_s: float = 600,
    force: bool = False,
    runbooks_dir: str | os.PathLike | None = None,
    progress: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> TriageReport:
    """Ingest, diagnose, run the runbooks, write the report. An interrupt (``KeyboardInterrupt``, or ``cancel`` set:
    :class:`TriageInterrupted`) or an output that cannot be written (:class:`TriageOutputError`) still leaves
    ``report.json`` saying so and what completed, and no notebook process behind."""
    from flink_runbooks.collect.listing import check_local_paths
    from flink_runbooks.diagnose import ingest
    from flink_runbooks.collect.store import save_incident

    say = progress or (lambda _msg: None)
    check_local_paths(paths)
    created = not pathlib.Path(out).exists()
    out_dir = prepare_out_dir(out, paths, force)
    reserve_report(out_dir)
    say(f"ingest: reading {', '.join(paths)}")
    started = time.monotonic()
    try:
        incident = ingest(list(paths), spark, flink_version=flink_version)
    except KeyboardInterrupt:
        _write_unfinished(out_dir, {"status": "interrupted", "stage": "ingest", "out": str(out_dir)})
        raise
    except BaseException:
        # Nothing was written yet: an --out this run created goes again rather than stay behind empty.
        (out_dir / "report.json").unlink(missing_ok=True)
        if created and out_dir.is_dir() and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise
    report: TriageReport | None = None
    try:
        report = TriageReport(out_dir, run_detectors(incident), stage="diagnose")
        _run_stages(report, incident, save_incident, runbooks=runbooks, runbooks_dir=runbooks_dir, jobs=jobs,
                    timeout_s=timeout_s, say=say, started=started, cancel=cancel or threading.Event())
    except (KeyboardInterrupt, TriageInterrupted):
        if report is None:  # stopped while the detectors ran: nothing to list yet
            _write_unfinished(out_dir, {"status": "interrupted", "stage": "diagnose", "out": str(out_dir)})
        else:
            report.status = "interrupted"
            _write_unfinished(out_dir, report.to_dict())
        raise
    except OSError as exc:
        if report is None:
            raise
        report.status, report.error = "failed", f"cannot write into {out_dir}: {exc}"
        written = _write_unfinished(out_dir, report.to_dict())
        raise TriageOutputError(report.error + ("" if written else "; report.json could not be written either")) from exc
    except Exception as exc:  # a usage error found late, or a bug: report.json must not keep saying "running"
        if report is not None:
            report.status, report.error = "failed", redact_text(f"{type(exc).__name__}: {exc}")
            _write_unfinished(out_dir, report.to_dict())
        raise
    return report


def _run_stages(report: TriageReport, incident, save_incident, *, runbooks, runbooks_dir, jobs, timeout_s, say,
                started, cancel: threading.Event) -> None:
    out_dir, diagnosis = report.out, report.diagnosis
    report.stage = "save incident"
    try:
        cache = save_incident(incident, out_dir / "incident")
    except OSError:
        # A partial cache is of no use to anyone and may hold the last free bytes report.json needs.
        shutil.rmtree(out_dir / "incident", ignore_errors=True)
        raise
    say(f"ingest: {len(incident.events)} records from {len(incident.inputs)} file(s) in {time.monotonic() - started:.1f}s")
    selected = list(runbooks) if runbooks else list(dict.fromkeys(f.runbook for f in diagnosis.findings))
    nb_dir = pathlib.Path(runbooks_dir) if runbooks_dir else RUNBOOKS_DIR
    missing = [slug for slug in selected if not (nb_dir / f"{slug}.ipynb").exists()]
    if missing and runbooks:
        raise TriageError(f"no runbook notebook for {', '.join(missing)} in {nb_dir}")
    report.runbooks += [RunbookResult(slug, "failed", error=f"no notebook {slug}.ipynb in {nb_dir}") for slug in missing]
    report.stage = "runbooks"
    (out_dir / "runbooks").mkdir(exist_ok=True)
    report.runbooks += [RunbookResult(slug) for slug in selected if slug not in missing]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(_run_notebook, nb_dir / f"{slug}.ipynb", out_dir / "runbooks", cache, timeout_s,
                               cancel): slug for slug in selected if slug not in missing}
        for slug in selected:
            say(f"runbook {slug}: started")
        recorded: set[concurrent.futures.Future] = set()
        try:
            for fut in concurrent.futures.as_completed(futures):
                _record(report, fut.result(), say)
                recorded.add(fut)
        except BaseException:
            # Running notebooks are killed and queued ones never start; the pool then joins within a moment.
            cancel.set()
            for fut in concurrent.futures.as_completed(set(futures) - recorded):
                _record(report, fut.result(), say)
            raise
    report.runbooks.sort(key=lambda r: selected.index(r.runbook))
    if cancel.is_set():
        raise TriageInterrupted("stopped while its runbooks ran")
    report.stage = "patches"
    report.patches = write_patches(diagnosis, out_dir / "patches")
    report.stage = "report"
    report.status = "complete"
    # Values are redacted before serialisation (diagnosis_dict); the serialised text is never rewritten.
    _write_atomically(out_dir / "report.json", json.dumps(report.to_dict(), indent=2) + "\n")
    (out_dir / "report.md").write_text(render_markdown(report))
    report.stage = None


def _record(report: TriageReport, result: RunbookResult, say: Callable[[str], None]) -> None:
    report.runbooks = [result if r.runbook == result.runbook else r for r in report.runbooks]
    say(f"runbook {result.runbook}: {result.status} in {result.duration_s:.1f}s"
        + (f" ({result.error})" if result.error else ""))


def _write_atomically(path: pathlib.Path, text: str) -> None:
    """A reader (serve, automation) sees the old report or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# Room kept for report.json from the start, so a run that fills the disk can still say so: a JSON document followed
# by blanks, overwritten in place (no new blocks) when nothing else can be written.
REPORT_RESERVE_BYTES = 64 * 1024


def reserve_report(out_dir: pathlib.Path) -> None:
    head = json.dumps({"status": "running", "out": str(out_dir)}).encode()
    (out_dir / "report.json").write_bytes(head + b" " * max(0, REPORT_RESERVE_BYTES - len(head) - 1) + b"\n")


def _write_unfinished(out_dir: pathlib.Path, doc: dict) -> bool:
    """``report.json`` of a run that did not finish: its status and what completed. On a full disk it goes into the
    room reserved at the start, whole when it fits, else its status, stage and error alone. False when even that
    cannot be written."""
    path = out_dir / "report.json"
    text = json.dumps(doc, indent=2) + "\n"
    try:
        _write_atomically(path, text)
        return True
    except OSError:
        pass
    brief = json.dumps({k: doc.get(k) for k in ("status", "stage", "error", "out")}, indent=2) + "\n"
    for candidate in (text, brief):
        data = candidate.encode()
        try:
            if len(data) <= path.stat().st_size:
                with open(path, "r+b") as f:
                    f.write(data)
                    f.truncate(len(data))
                return True
        except OSError:
            continue
    return False


def _run_notebook(source: pathlib.Path, out_dir: pathlib.Path, cache: pathlib.Path, timeout_s: float,
                  cancel: threading.Event) -> RunbookResult:
    """Execute one runbook on the saved incident, then render its page."""
    slug = source.stem
    run = run_notebook(source, out_dir / f"{slug}.ipynb", parameters={"incident_cache": str(cache)},
                       cwd=RUNBOOKS_DIR.parent, timeout_s=timeout_s, cancel=cancel)
    result = RunbookResult(slug, run.status, run.duration_s, run.error,
                           notebook=str(run.executed) if run.executed else None)
    if run.executed and run.status != "interrupted":
        try:
            result.html = str(render_html(run.executed))
        except Exception as exc:  # a broken notebook file still gets its status reported
            result.error = (result.error or "") + f" (no HTML: {exc})"
    return result


def write_patches(diagnosis: Diagnosis, directory: pathlib.Path) -> dict[str, str]:
    """The fix's patch files (the primary finding's configuration changes) in ``directory``, and hardening's (what
    the other findings propose) apart in ``directory/hardening``: a config diff, a FlinkDeployment merge patch and
    Kafka properties, each only when needed. Keys of hardening files start with ``hardening_``."""
    fix, hardening = fix_and_hardening(diagnosis.findings)
    written = _write_patch_files(diagnosis, fix, directory)
    # hardening's diff starts where the fix's ends: applied one after the other, both apply
    hardening_files = _write_patch_files(diagnosis, [p for _, p in hardening], directory / "hardening", after=fix)
    written.update({HARDENING_PREFIX + name: path for name, path in hardening_files.items()})
    return written


def _write_patch_files(diagnosis: Diagnosis, patches: Sequence[Patch], directory: pathlib.Path, *,
                       after: Sequence[Patch] = ()) -> dict[str, str]:
    version = FlinkVersion.parse(diagnosis.incident.flink_version)
    written: dict[str, str] = {}
    flink = [p for p in patches if p.target == "flink"]
    kafka = [p for p in patches if p.target == "kafka"]
    if not flink and not kafka:
        return written
    directory.mkdir(parents=True, exist_ok=True)
    if flink:
        cfg = diagnosis.incident.config
        diff = render_config_diff(flink, cfg, version, after=after)
        name = pathlib.Path(cfg.file_path).name if cfg.file_path else "flink-config"
        written["config_diff"] = _write(directory / f"{name}.diff", diff)
        written["flinkdeployment"] = _write(directory / "flinkdeployment-patch.yaml",
                                            render_flinkdeployment_patch(flink, version))
    if kafka:
        rendered = render_kafka_properties(kafka)
        written["kafka_properties"] = _write(directory / "kafka-client.properties", rendered.get("properties", ""))
        if rendered.get("datastream"):
            written["kafka_datastream"] = _write(directory / "kafka-datastream.java", rendered["datastream"])
        if rendered.get("sql"):
            written["kafka_sql"] = _write(directory / "kafka-sql-options.sql", rendered["sql"])
    return written


def _write(path: pathlib.Path, text: str) -> str:
    path.write_text(redact_text(text))
    return str(path)
