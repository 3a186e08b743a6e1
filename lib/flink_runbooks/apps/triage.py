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
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from flink_runbooks.apps.notebook_runner import HIDDEN_INPUT_TAGS, run_notebook
from flink_runbooks.diagnose import Diagnosis, run_detectors
from flink_runbooks.model import Finding, Patch, parse_version
from flink_runbooks.render.patches import render_config_diff, render_flinkdeployment_patch, render_kafka_properties
from flink_runbooks.parse.redact import redact_text
from flink_runbooks.render.report import diagnosis_dict

RUNBOOKS_DIR = pathlib.Path(__file__).resolve().parents[3] / "runbooks"
EXIT_RUNBOOK_FAILED = 3


class TriageError(Exception):
    """Bad input or output location; the message is one line for the user."""


@dataclass
class RunbookResult:
    runbook: str
    status: str = "pending"  # ok | failed | timed out
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

    @property
    def exit_code(self) -> int:
        if any(r.status != "ok" for r in self.runbooks):
            return EXIT_RUNBOOK_FAILED
        return 1 if self.diagnosis.findings else 0

    def to_dict(self) -> dict:
        doc = diagnosis_dict(self.diagnosis)
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
) -> TriageReport:
    from flink_runbooks.collect.listing import check_local_paths
    from flink_runbooks.collect.ingest import ingest
    from flink_runbooks.collect.store import save_incident

    say = progress or (lambda _msg: None)
    check_local_paths(paths)
    created = not pathlib.Path(out).exists()
    out_dir = prepare_out_dir(out, paths, force)
    say(f"ingest: reading {', '.join(paths)}")
    started = time.monotonic()
    try:
        incident = ingest(list(paths), spark, flink_version=flink_version)
    except BaseException:
        # Nothing was written yet: an --out this run created goes again rather than stay behind empty.
        if created and out_dir.is_dir() and not any(out_dir.iterdir()):
            out_dir.rmdir()
        raise
    cache = save_incident(incident, out_dir / "incident")
    say(f"ingest: {len(incident.events)} records from {len(incident.inputs)} file(s) in {time.monotonic() - started:.1f}s")
    diagnosis = run_detectors(incident)
    selected = list(runbooks) if runbooks else list(dict.fromkeys(f.runbook for f in diagnosis.findings))
    report = TriageReport(out_dir, diagnosis)
    nb_dir = pathlib.Path(runbooks_dir) if runbooks_dir else RUNBOOKS_DIR
    missing = [slug for slug in selected if not (nb_dir / f"{slug}.ipynb").exists()]
    if missing and runbooks:
        raise TriageError(f"no runbook notebook for {', '.join(missing)} in {nb_dir}")
    report.runbooks += [RunbookResult(slug, "failed", error=f"no notebook {slug}.ipynb in {nb_dir}") for slug in missing]
    (out_dir / "runbooks").mkdir(exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(_run_notebook, nb_dir / f"{slug}.ipynb", out_dir / "runbooks", cache, timeout_s): slug
                   for slug in selected if slug not in missing}
        for slug in selected:
            say(f"runbook {slug}: started")
        for fut in concurrent.futures.as_completed(futures):
            result = fut.result()
            report.runbooks.append(result)
            say(f"runbook {result.runbook}: {result.status} in {result.duration_s:.1f}s"
                + (f" ({result.error})" if result.error else ""))
    report.runbooks.sort(key=lambda r: selected.index(r.runbook))
    report.patches = write_patches(diagnosis, out_dir / "patches")
    # Values are redacted before serialisation (diagnosis_dict); the serialised text is never rewritten.
    (out_dir / "report.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    (out_dir / "report.md").write_text(render_markdown(report))
    return report


def _run_notebook(source: pathlib.Path, out_dir: pathlib.Path, cache: pathlib.Path, timeout_s: float) -> RunbookResult:
    """Execute one runbook on the saved incident, then render its page."""
    slug = source.stem
    run = run_notebook(source, out_dir / f"{slug}.ipynb", parameters={"incident_cache": str(cache)},
                       cwd=RUNBOOKS_DIR.parent, timeout_s=timeout_s)
    result = RunbookResult(slug, run.status, run.duration_s, run.error,
                           notebook=str(run.executed) if run.executed else None)
    if run.executed:
        try:
            result.html = str(render_html(run.executed))
        except Exception as exc:  # a broken notebook file still gets its status reported
            result.error = (result.error or "") + f" (no HTML: {exc})"
    return result


def render_html(notebook: pathlib.Path) -> pathlib.Path:
    """The executed notebook as a standalone HTML page (code of cells tagged ``setup`` hidden)."""
    import nbformat
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    cfg = Config()
    cfg.TagRemovePreprocessor.enabled = True
    cfg.TagRemovePreprocessor.remove_input_tags = set(HIDDEN_INPUT_TAGS)
    exporter = HTMLExporter(config=cfg)
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    target = notebook.with_suffix(".html")
    target.write_text(redact_text(body))
    return target


def merge_patches(findings: Sequence[Finding]) -> list[Patch]:
    """All findings' patches, one per (target, key): the primary finding's proposal wins a conflict."""
    merged: dict[tuple[str, str], Patch] = {}
    for f in sorted(findings, key=lambda f: not f.primary):
        for p in f.patches:
            merged.setdefault((p.target, p.key), p)
    return list(merged.values())


def write_patches(diagnosis: Diagnosis, directory: pathlib.Path) -> dict[str, str]:
    """The combined config diff, FlinkDeployment merge patch and Kafka properties, each only when needed."""
    patches = merge_patches(diagnosis.findings)
    version = parse_version(diagnosis.incident.flink_version)
    written: dict[str, str] = {}
    flink = [p for p in patches if p.target == "flink"]
    kafka = [p for p in patches if p.target == "kafka"]
    if not flink and not kafka:
        return written
    directory.mkdir(parents=True, exist_ok=True)
    if flink:
        cfg = diagnosis.incident.config
        diff = render_config_diff(flink, cfg, version)
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


def render_markdown(report: TriageReport) -> str:
    d = report.diagnosis
    inc = d.incident
    lines = ["# Triage report", "",
             f"Flink {inc.flink_version or 'version unknown'}; {len(inc.inputs)} input file(s), "
             f"{len(inc.events)} records kept.", ""]
    for w in list(inc.warnings) + list(d.errors):
        lines.append(f"- warning: {w}")
    if not d.findings:
        lines += ["", "No known failure found."]
    for f in d.findings:
        lines += ["", f"## {'Primary: ' if f.primary else ''}{f.title} (`{f.runbook}`)", "",
                  f"**Root cause:** `{f.root_cause.slug}`: {f.root_cause.summary} (confidence {f.confidence:.0%})", "",
                  f.summary, "", "Evidence:", ""]
        for e in f.evidence:
            lines.append(f"- `{e.file}:{e.line}` {e.ts or ''} {('— ' + e.note) if e.note else ''}")
            lines += ["", "  ```", *["  " + (redact_text(t) or t) for t in e.text.splitlines()[:6]], "  ```"]
        if f.patches:
            lines += ["", "Proposed changes (nothing was modified):", ""]
            for p in f.patches:
                value = p.proposed if p.proposed is not None else (p.snippet or "").splitlines()[0] if p.snippet else "—"
                lines.append(redact_text(f"- `{p.key}`: {p.current or '—'} → **{value}** ({p.reason})"))
    if report.patches:
        lines += ["", "## Patch files", ""] + [f"- {k}: `{v}`" for k, v in report.patches.items()]
        diff_path = report.patches.get("config_diff")
        if diff_path:
            lines += ["", "```diff", pathlib.Path(diff_path).read_text().rstrip("\n"), "```"]
    if report.runbooks:
        lines += ["", "## Runbooks executed", "", "| runbook | status | seconds | notebook | error |", "|---|---|---|---|---|"]
        for r in report.runbooks:
            link = f"[html]({os.path.relpath(r.html, report.out)})" if r.html else "—"
            lines.append(f"| `{r.runbook}` | {r.status} | {r.duration_s:.1f} | {link} | {r.error or ''} |")
    return "\n".join(lines) + "\n"
