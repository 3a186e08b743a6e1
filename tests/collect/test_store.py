"""The saved incident gives the same diagnosis without reading the raw logs again."""
from __future__ import annotations

import json

from corpus import example
from flink_runbooks.apps import cli
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.report import diagnosis_dict
from flink_runbooks.collect.store import load_incident


def test_saved_incident_round_trips_to_the_same_findings(spark, capsys, tmp_path):
    path = example("checkpoint-tolerable-failure-threshold", "storage-permission-denied")
    code = cli.main(["diagnose", str(path), "--format", "json", "--save-incident", str(tmp_path / "inc")])
    direct = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (tmp_path / "inc" / "events.parquet").exists()
    loaded = load_incident(tmp_path / "inc")
    again = diagnosis_dict(run_detectors(loaded))
    assert again["findings"] == direct["findings"]
    assert again["flink_version"] == direct["flink_version"]
    assert loaded.config.get("execution.checkpointing.interval") == "5s"
    assert loaded.config.lookup("execution.checkpointing.interval").source.kind == "log"
