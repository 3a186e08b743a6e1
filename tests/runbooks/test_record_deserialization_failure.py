"""Detector record-deserialization-failure: A source cannot deserialize a record."""
from __future__ import annotations

from corpus import example
from flink_runbooks.diagnose import ingest
from flink_runbooks.diagnose import run_detectors

SLUG = "record-deserialization-failure"


def test_example_incident_gives_its_root_cause(spark):
    incident = ingest([str(example(SLUG, "json-poison-1.20"))], spark)
    diagnosis = run_detectors(incident)
    assert not diagnosis.errors
    assert diagnosis.primary is not None and diagnosis.primary.runbook == SLUG
    # TODO: assert the root cause, the evidence lines and the patches a user would act on.
