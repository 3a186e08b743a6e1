"""What the runbook notebooks call: open an incident, show findings, evidence, timelines and patches.

Notebooks stay thin (narrative plus one call per cell); everything they display goes through here, so redaction
and formatting are the same in Jupyter, in papermill runs and on the published site.
"""
from __future__ import annotations

import html
import logging
import os
import pathlib
import sys
from dataclasses import dataclass, field
from typing import Sequence

from flink_runbooks.diagnose import Diagnosis, run_detectors
from flink_runbooks.model import Finding, Incident
from flink_runbooks.parse.redact import redact_text
from flink_runbooks.render.html_table import diff_html, fact_text, html_table
from flink_runbooks.render.markdown import finding_html
from flink_runbooks.render.report import patch_outputs

PROJECT_ROOT = pathlib.Path(__file__).resolve().parents[2]

# What ipykernel logs when a SIGINT lands while it handles a message: jupyter_client interrupts every kernel before
# shutting it down, so a papermill run that succeeded could end in "ERROR | KeyboardInterrupt caught in kernel.".
INTERRUPT_BETWEEN_CELLS = "KeyboardInterrupt caught in kernel"


class _InterruptBetweenCells(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(INTERRUPT_BETWEEN_CELLS)


def quiet_interrupts_between_cells() -> None:
    """In a Jupyter kernel, drop ipykernel's report of an interrupt outside any cell: it says nothing about the
    notebook (an interrupt of a running cell still ends that cell with KeyboardInterrupt, as always)."""
    if "ipykernel" not in sys.modules:
        return
    from IPython import get_ipython

    log = getattr(getattr(get_ipython(), "kernel", None), "log", None)
    if isinstance(log, logging.Logger) and not any(isinstance(f, _InterruptBetweenCells) for f in log.filters):
        log.addFilter(_InterruptBetweenCells())



def resolve_paths(paths: str | Sequence[str]) -> list[str]:
    """Paths as given, or relative to the project root when they do not exist relative to the working directory.

    ``papermill -p incident_paths '["/var/log/flink", "conf/"]'`` hands the list over as its JSON text (``-p`` values
    are strings; only ``-y`` is parsed): a string that is a JSON list of strings is that list.
    """
    if isinstance(paths, str):
        paths = _json_list(paths) or [paths]
    out = []
    for p in paths:
        if "://" in p or os.path.isabs(p) or os.path.exists(p) or any(c in p for c in "*?["):
            out.append(p)
        else:
            out.append(str(PROJECT_ROOT / p))
    return out


def _json_list(text: str) -> list[str] | None:
    import json

    if not text.lstrip().startswith("[") or os.path.exists(text):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) and value and all(isinstance(v, str) for v in value) else None


@dataclass
class RunbookRun:
    slug: str
    incident: Incident
    diagnosis: Diagnosis
    findings: list[Finding] = field(default_factory=list)

    @property
    def finding(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    # -- displays ---------------------------------------------------------------------------------------------

    def summary(self):
        """The verdict for this runbook (cause, confidence in words, what to do now), what else was found in the
        incident, and what was read: the same rendering of a finding as report.md's."""
        from IPython.display import HTML

        parts = []
        if not self.findings:
            parts.append(f"<p><b>{_e(self.slug)} does not apply to this incident.</b> The evidence it looks for "
                         f"is absent.</p>")
        for f in self.findings:
            parts.append(f'<div class="verdict">{finding_html(f, level=3, evidence=False)}</div>')
        others = [f for f in self.diagnosis.findings if f.runbook != self.slug]
        if others:
            items = "".join(f"<li><code>{_e(f.runbook)}</code>{' (primary)' if f.primary else ''}: "
                            f"{_e(f.root_cause.summary)}</li>" for f in others)
            parts.append(f"<p>Other runbooks that apply to this incident:</p><ul>{items}</ul>")
        parts.append(f"<p><b>Incident:</b> Flink {_e(self.incident.flink_version or 'version unknown')}"
                     f"{' (' + _e(self.incident.version_source) + ')' if self.incident.version_source else ''}, "
                     f"{sum(1 for f in self.incident.inputs if f.kind == 'log')} log file(s), "
                     f"{len(self.incident.events)} records kept.</p>")
        for w in self.incident.warnings:
            parts.append(f"<p>⚠ {_e(w)}</p>")
        return HTML("\n".join(parts))

    def evidence(self):
        """The log lines behind the verdict, with file and line number."""
        rows = []
        for f in self.findings:
            for e in f.evidence:
                rows.append({"file": os.path.basename(e.file), "line": e.line, "time": e.ts or "",
                             "why it matters": e.note, "text": redact_text(e.text)})
        if not rows:
            return _note("No evidence: this runbook found nothing in the incident.")
        return _table(rows, preformatted=("text",))

    def details(self):
        """Numbers the detector measured (counts, current settings)."""
        rows = [{"what": k.replace("_", " "), "value": fact_text(v)} for f in self.findings for k, v in f.details.items()]
        if not rows:
            return _note("No measurements.")
        return _table(rows)

    def patches(self):
        """The proposed changes: a diff for the config file, the FlinkDeployment patch, Kafka and code snippets."""
        from IPython.display import HTML

        if not self.findings or not any(f.patches for f in self.findings):
            return _note("Nothing to change.")
        parts = []
        for f in self.findings:
            rows = [{"key": p.key, "current": p.current or "—", "from": p.current_source or "",
                     "proposed": p.proposed if p.proposed is not None else ("remove" if p.target == "flink" else "—"),
                     "why": p.reason}
                    for p in f.patches if p.target in ("flink", "kafka")]
            if rows:
                # each value redacted on its own, so a masked value never runs into the markup around it
                rows = [{k: redact_text(str(v)) for k, v in row.items()} for row in rows]
                parts.append(html_table(rows, code=("key",), strong=("proposed",)))
            outs = patch_outputs(f, self.diagnosis)
            if "config_diff" in outs:
                parts.append("<p><b>Proposed change to your configuration file</b> (a proposal: nothing was modified):</p>"
                             + diff_html(redact_text(outs["config_diff"]) or ""))
            if "flinkdeployment" in outs:
                parts.append("<p><b>Flink Kubernetes Operator</b> (<code>kubectl patch flinkdeployment … --type merge</code>):</p>"
                             f"<pre class='patch-yaml'>{_e(outs['flinkdeployment'])}</pre>")
            kafka = outs.get("kafka") or {}
            for label, key in (("KafkaSource / KafkaSink builder", "datastream"), ("Flink SQL table options", "sql")):
                if kafka.get(key):
                    parts.append(f"<p><b>{label}</b>:</p><pre>{_e(kafka[key])}</pre>")
            for a in outs.get("actions", []):
                parts.append(f"<p><b>{_e(a['what'])}</b>: {_e(a['why'])}</p>")
                if a["snippet"]:
                    parts.append(f"<pre>{_e(a['snippet'])}</pre>")
        return HTML(redact_text("\n".join(parts)))

    def inputs(self):
        """What was read: every file with its role, layout and size, and the configuration that applies."""
        rows = [{"file": f.path, "kind": f.kind, "role": f.role, "host": f.host or "", "layout": f.layout or "",
                 "lines": f.lines} for f in self.incident.inputs]
        return _table(rows)

    def config(self, keys: Sequence[str] | None = None):
        """Current values of the runbook's settings (``Detector.config_keys``, or the keys given) and where each came
        from."""
        from flink_runbooks.detectors import get_detector

        rows = []
        for k in keys if keys is not None else get_detector(self.slug).config_keys:
            v = self.incident.config.lookup(k)
            rows.append({"key": k, "value": fact_text(v.value) if v else "(not set: Flink default)",
                         "source": str(v.source) if v else ""})
        return _table(rows, columns=("key", "value", "source"))


def open_runbook(slug: str, incident_paths: str | Sequence[str] = (), *, flink_version: str = "",
                 incident_cache: str = "", spark_master: str = "") -> RunbookRun:
    """Ingest the incident (or load it from a triage cache) and run every detector over it."""
    from flink_runbooks.detectors import get_detector

    get_detector(slug)  # fail early on a typo in the slug
    quiet_interrupts_between_cells()  # every runbook calls this first
    if incident_cache:
        from flink_runbooks.collect.store import load_incident

        incident = load_incident(incident_cache)
    else:
        from flink_runbooks.diagnose import ingest
        from flink_runbooks.collect.spark import get_spark

        # Without a named master, ingestion reads a small local incident (a pasted trace) in this process and starts
        # local Spark only for the rest, as `diagnose` does.
        spark = get_spark(master=spark_master) if spark_master else None
        incident = ingest(resolve_paths(incident_paths), spark, flink_version=flink_version or None)
    diagnosis = run_detectors(incident)
    return RunbookRun(slug, incident, diagnosis, [f for f in diagnosis.findings if f.runbook == slug])


def checkpoint_timeline(run: RunbookRun):
    """A plot of every checkpoint attempt over time, coloured by outcome, with failovers marked."""
    import matplotlib.pyplot as plt

    from flink_runbooks.evidence.checkpoints import checkpoint_history, history_frame
    from flink_runbooks.vocabulary.lifecycle import TOLERABLE_FAILURES_EXCEEDED

    frame = history_frame(checkpoint_history(run.incident))
    fig, ax = plt.subplots(figsize=(10, 3.2))
    if frame.empty or frame["triggered"].isna().all():
        ax.text(0.5, 0.5, "no checkpoint lifecycle lines in these logs", ha="center", va="center")
        ax.set_axis_off()
        plt.close(fig)
        return fig
    colors = {"completed": "#2e7d32", "expired": "#ef6c00", "declined": "#c62828", "failed": "#6a1b9a",
              "in progress": "#9e9e9e"}
    for outcome, group in frame.groupby("outcome"):
        start = group["triggered"].fillna(group["finished"])
        ax.scatter(start, group["checkpoint"], label=f"{outcome} ({len(group)})", color=colors.get(outcome, "#000"),
                   s=28, zorder=3)
    import pandas as pd

    failovers = [pd.to_datetime(ev.ts) for ev, _ in run.incident.find(TOLERABLE_FAILURES_EXCEEDED) if ev.ts]
    for i, t in enumerate(failovers):
        ax.axvline(t, color="#c62828", linestyle="--", linewidth=1,
                   label="tolerable-failure threshold exceeded" if i == 0 else None)
    _fit_time_axis(ax, list(frame["triggered"].fillna(frame["finished"]).dropna()) + failovers)
    ax.set_xlabel("time (as logged)")
    ax.set_ylabel("checkpoint id")
    ax.set_title("Checkpoint attempts by outcome")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    fig.autofmt_xdate()
    fig.tight_layout()
    plt.close(fig)  # returned, so Jupyter shows it once
    return fig


# The least time a timeline shows: one event (or a burst within a second) is drawn in a minute of context, where
# matplotlib's default limits for a single date span years.
MIN_TIMELINE_SPAN = "1min"


def _fit_time_axis(ax, times) -> None:
    """x-limits around ``times`` with a margin, at least :data:`MIN_TIMELINE_SPAN` wide."""
    import pandas as pd

    if not times:
        return
    first, last = min(times), max(times)
    margin = max((last - first) * 0.05, (pd.Timedelta(MIN_TIMELINE_SPAN) - (last - first)) / 2, pd.Timedelta(0))
    ax.set_xlim(first - margin, last + margin)


def _note(text: str):
    from IPython.display import HTML

    return HTML(f"<p><i>{_e(text)}</i></p>")


def _e(text) -> str:
    return html.escape(redact_text(str(text)) or "")


def _table(rows: Sequence[dict], columns: Sequence[str] | None = None, *, preformatted: Sequence[str] = ()):
    """Rows as an HTML table: every value is text, escaped (see :func:`~flink_runbooks.render.html_table.html_table`)."""
    from IPython.display import HTML

    return HTML(html_table(rows, columns, preformatted=preformatted))


def event_timeline(run: RunbookRun, title: str = "Warnings, errors and failures over time"):
    """Every WARN/ERROR record and every failure over time, one row per log file, this runbook's evidence marked."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from flink_runbooks.evidence.episodes import FAILURE_LINE, episodes

    rows = [ev for ev in run.incident.events if ev.ts and (ev.level in ("WARN", "ERROR", "FATAL") or FAILURE_LINE.search(ev.message))]
    # failures the REST exception history of a pulled cluster holds and no log line records
    logged = {(ev.file, ev.line) for ev in rows}
    rows += [ev for ep in episodes(run.incident) for ev in ep.failures if ev.ts and (ev.file, ev.line) not in logged]
    evidence = {(os.path.basename(e.file), e.line) for f in run.findings for e in f.evidence}
    fig, ax = plt.subplots(figsize=(10, max(2.2, 0.6 + 0.45 * len({ev.file for ev in rows}))))
    if not rows:
        ax.text(0.5, 0.5, "no timestamped warnings or failures in these logs", ha="center", va="center")
        ax.set_axis_off()
        plt.close(fig)
        return fig
    files = sorted({os.path.basename(ev.file) for ev in rows})
    ypos = {f: i for i, f in enumerate(files)}
    style = {"WARN": ("#ef6c00", "warning"), "ERROR": ("#c62828", "error"), "FATAL": ("#c62828", "error")}
    seen = set()
    for ev in rows:
        color, label = style.get(ev.level, ("#6a1b9a", "failure"))
        key = (os.path.basename(ev.file), ev.line)
        if key in evidence:
            color, label = "#000000", "evidence of this runbook"
        ax.scatter(pd.to_datetime(ev.ts), ypos[key[0]], color=color, s=40 if key in evidence else 14,
                   marker="D" if key in evidence else "o", label=None if label in seen else label, zorder=3)
        seen.add(label)
    _fit_time_axis(ax, [pd.to_datetime(ev.ts) for ev in rows])
    # A '$' pair in a file name would be read as matplotlib math markup (mis-drawn, or a parse error).
    ax.set_yticks(range(len(files)), [f.replace("$", r"\$") for f in files], fontsize=8)
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    fig.autofmt_xdate()
    fig.tight_layout()
    plt.close(fig)
    return fig
