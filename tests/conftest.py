"""Shared fixtures: one SparkSession for the whole run, paths to the example incidents."""
from __future__ import annotations

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
# production write-ups the catalogue was written from, verbatim (their origin: incident_reports/README.md)
INCIDENT_REPORTS = ROOT / "tests" / "incident_reports"


@pytest.fixture(scope="session")
def spark():
    from flink_runbooks.collect.spark import get_spark

    session = get_spark(master="local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
    return DATA


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
    import pathlib

    from flink_runbooks.collect.ingest import ingest

    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return ingest([str(directory)], flink_version=version)


def swept(cases, ids):
    """``cases`` (tuples whose first item is the runbook slug) as pytest parameters: the first case of each runbook
    runs in every tier, the others carry the ``sweep`` mark (``make test`` runs them, ``make test-fast`` does not)."""
    import pytest

    seen: set[str] = set()
    params = []
    for case, case_id in zip(cases, ids):
        marks = [pytest.mark.sweep] if case[0] in seen else []
        seen.add(case[0])
        params.append(pytest.param(*case, id=case_id, marks=marks))
    return params


def expected_incidents():
    """Every example incident with its expectations: (slug, name, path, expected dict)."""
    from corpus import incidents

    return incidents()
