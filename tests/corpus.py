"""The incidents tests read: the example corpus (every incident under ``data/`` with its ``expected.json``),
diagnosed once per ingestion path in a test worker (the golden pins, the accuracy verdicts and the
in-process-equals-Spark check read the same result; those suites share the ``corpus`` xdist group, so one worker
diagnoses each incident once), the production write-ups under ``tests/incident_reports/``, and incidents built from
text in a test."""
from __future__ import annotations

import functools
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
# production write-ups the catalogue was written from, verbatim (their origin: incident_reports/README.md)
INCIDENT_REPORTS = ROOT / "tests" / "incident_reports"
GROUP = "corpus"


def expected_incidents() -> list[tuple[str, str, pathlib.Path, dict]]:
    """Every example incident with its expectations: (runbook slug, name, path, expected dict)."""
    return [(exp.parent.parent.name, exp.parent.name, exp.parent, json.loads(exp.read_text()))
            for exp in sorted(DATA.glob("*/*/expected.json"))]


@functools.lru_cache(maxsize=None)
def diagnosis(path: pathlib.Path, through_spark: bool = False) -> dict:
    """The JSON document ``flink-runbooks diagnose --format json`` prints for ``path``: read in this process (as the
    CLI reads small local inputs), or through the Spark pass."""
    from flink_runbooks.diagnose import ingest
    from flink_runbooks.diagnose import run_detectors
    from flink_runbooks.render.report import to_json

    spark = None
    if through_spark:
        from flink_runbooks.collect.spark import get_spark

        spark = get_spark(master="local[2]")
    return json.loads(to_json(run_detectors(ingest([str(path)], spark))))


def example(slug: str, name: str) -> pathlib.Path:
    path = DATA / slug / name
    assert path.exists(), f"missing example incident {path}"
    return path


def incident_from_text(text: str, config: dict[str, str] | None = None, version: str | None = None, file: str = "jobmanager.log"):
    """A small incident built in Python for detector unit tests: every line kept (no pre-filter), records assembled
    and converted to events (redaction included) by the same code as the Spark path."""
    from flink_runbooks.collect.ingest import _to_event
    from flink_runbooks.parse.config import ConfigSource, EffectiveConfig
    from flink_runbooks.model import Incident
    from flink_runbooks.parse.records import assemble

    events = []
    for rec in assemble(text.splitlines()):
        row = dict(vars(rec), file=file)
        event = _to_event(row, 0)
        event.role = "jobmanager"
        events.append(event)
    cfg = EffectiveConfig()
    for key, value in (config or {}).items():
        cfg.add(key, value, ConfigSource("file", "flink-conf.yaml", 1))
    return Incident(events=events, config=cfg, flink_version=version)


def incident_from_files(directory, files: dict[str, str], version: str | None = None):
    """An incident read from files through the real ingestion (pre-filter, assembly, roles, version, redaction), in
    this process: the shapes a user pastes, without starting Spark."""
    from flink_runbooks.diagnose import ingest

    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return ingest([str(directory)], flink_version=version)


def swept(cases, ids):
    """``cases`` (tuples whose first item is the runbook slug) as pytest parameters: the first case of each runbook
    runs in every tier, the others carry the ``sweep`` mark (``make test`` runs them, ``make test-fast`` does not)."""
    seen: set[str] = set()
    params = []
    for case, case_id in zip(cases, ids):
        marks = [pytest.mark.sweep] if case[0] in seen else []
        seen.add(case[0])
        params.append(pytest.param(*case, id=case_id, marks=marks))
    return params


def incident_of(files: dict[str, str], config: dict[str, str] | None = None, version: str | None = None):
    """An incident of several log files (``taskmanager*`` names are TaskManager logs), in time order as ingest does."""
    events = []
    for name, text in files.items():
        part = incident_from_text(text, file=name)
        for ev in part.events:
            ev.role = "taskmanager" if name.startswith("taskmanager") else "jobmanager"
        events += part.events
    base = incident_from_text("", config, version)
    last: dict[str, str] = {}
    keyed = []
    for ev in sorted(events, key=lambda e: (e.file, e.line)):
        last[ev.file] = ev.ts or last.get(ev.file, "")
        keyed.append(((last[ev.file], ev.file, ev.line), ev))
    base.events = [ev for _, ev in sorted(keyed, key=lambda kv: kv[0])]
    return base


def line(ts: str, msg: str, level: str = "INFO", logger: str = "org.apache.flink.runtime.executiongraph.ExecutionGraph") -> str:
    return f"2024-03-01 {ts} {level:<5} {logger:<60} [] - {msg}"
