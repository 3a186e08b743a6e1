"""Detector savepoint-trigger-failure: Savepoint or stop-with-savepoint failed or timed out."""
from __future__ import annotations

from corpus import example
from flink_runbooks.diagnose import ingest
from flink_runbooks.diagnose import run_detectors

SLUG = "savepoint-trigger-failure"


def test_example_incident_gives_its_root_cause(spark):
    incident = ingest([str(example(SLUG, "example"))], spark)
    diagnosis = run_detectors(incident)
    assert not diagnosis.errors
    assert diagnosis.primary is not None and diagnosis.primary.runbook == SLUG
    # TODO: assert the root cause, the evidence lines and the patches a user would act on.
