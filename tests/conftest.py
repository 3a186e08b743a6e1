"""Shared fixtures: one SparkSession for the whole run, paths to the example incidents."""
from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "data"


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
    """A small incident built in Python for detector unit tests (the Spark path is covered by test_ingest)."""
    from flink_runbooks.parse.config import ConfigSource, EffectiveConfig
    from flink_runbooks.model import ChainLink, Event, Incident
    from flink_runbooks.parse.records import assemble

    events = []
    for rec in assemble(text.splitlines()):
        events.append(Event(file=file, line=rec.line_index + 1, ts=rec.ts, level=rec.level, logger=rec.logger,
                            thread=rec.thread, message=rec.message,
                            chain=[ChainLink(c["cls"], c["message"], c["kind"]) for c in rec.chain],
                            frames=rec.frames, body=rec.body, truncated=rec.truncated, role="jobmanager"))
    cfg = EffectiveConfig()
    for key, value in (config or {}).items():
        cfg.add(key, value, ConfigSource("file", "flink-conf.yaml", 1))
    return Incident(events=events, config=cfg, flink_version=version)


def expected_incidents():
    """Every example incident with its expectations: (slug, name, path, expected dict)."""
    import json

    out = []
    for exp in sorted(DATA.glob("*/*/expected.json")):
        out.append((exp.parent.parent.name, exp.parent.name, exp.parent, json.loads(exp.read_text())))
    return out
