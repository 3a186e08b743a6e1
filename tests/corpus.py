"""The example corpus (every incident under ``data/`` with its ``expected.json``), diagnosed once per ingestion path
in a test worker: the golden pins, the accuracy verdicts and the in-process-equals-Spark check read the same result.

The suites that read it share the ``corpus`` xdist group, so one worker diagnoses each incident once."""
from __future__ import annotations

import functools
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
GROUP = "corpus"


def incidents() -> list[tuple[str, str, pathlib.Path, dict]]:
    """Every example incident with its expectations: (runbook slug, name, path, expected dict)."""
    return [(exp.parent.parent.name, exp.parent.name, exp.parent, json.loads(exp.read_text()))
            for exp in sorted(DATA.glob("*/*/expected.json"))]


@functools.lru_cache(maxsize=None)
def diagnosis(path: pathlib.Path, through_spark: bool = False) -> dict:
    """The JSON document ``flink-runbooks diagnose --format json`` prints for ``path``: read in this process (as the
    CLI reads small local inputs), or through the Spark pass."""
    from flink_runbooks.collect.ingest import ingest
    from flink_runbooks.diagnose import run_detectors
    from flink_runbooks.render.report import to_json

    spark = None
    if through_spark:
        from flink_runbooks.collect.spark import get_spark

        spark = get_spark(master="local[2]")
    return json.loads(to_json(run_detectors(ingest([str(path)], spark))))
