"""Detector restore-max-parallelism-changed: which setting changed the maximum parallelism, and the value to set back."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_files, incident_from_text, line
from flink_runbooks.detectors import get_detector
from flink_runbooks.detectors.restore_max_parallelism_changed import default_max_parallelism
from flink_runbooks.diagnose import ingest, run_detectors

SLUG = "restore-max-parallelism-changed"
SP = "file:/data/flink/savepoints/savepoint-26a300-55a0752367a9"
JOB = "7e7a4a100f786290d5867f9ed8a6bcfd"
COUNTER = "acfc6037bce502a9aa3bb5b361f1ed1f"  # the operator id of uid "order-counter"


def _mismatch(old: int, new: int) -> list[str]:
    return [
        line("22:13:23,168", f"Starting job {JOB} from savepoint {SP} ()",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
        line("22:13:23,184", f"Job {JOB} reached terminal state FAILED.",
             logger="org.apache.flink.runtime.dispatcher.StandaloneDispatcher"),
        "org.apache.flink.runtime.client.JobInitializationException: Could not start the JobMaster.",
        "Caused by: java.lang.IllegalStateException: Failed to rollback to checkpoint/savepoint Checkpoint Metadata. "
        f"Max parallelism mismatch between checkpoint/savepoint state and new program. Cannot map operator {COUNTER} "
        f"with max parallelism {old} to new program with max parallelism {new}. This indicates that the program has "
        "been changed in a non-compatible way after the checkpoint/savepoint.",
        "\tat org.apache.flink.runtime.checkpoint.Checkpoints.loadAndValidateCheckpoint(Checkpoints.java:196)",
    ]


def test_the_derived_default_follows_flinks_rule():
    # KeyGroupRangeAssignment#computeDefaultMaxParallelism: roundUpToPowerOfTwo(p + p / 2), within [128, 32768]
    assert [default_max_parallelism(p) for p in (1, 85, 86, 171, 172, 40000)] == [128, 128, 256, 256, 512, 32768]


def test_a_configured_maximum_is_set_back_to_the_snapshots_value():
    text = "\n".join(_mismatch(128, 256))
    [f] = get_detector(SLUG).detect(incident_from_text(text, {"pipeline.max-parallelism": "256"}, "1.20.3"))
    assert f.root_cause.slug == "max-parallelism-configured-differently"
    [key] = [p for p in f.patches if p.target == "flink"]
    assert (key.key, key.current, key.proposed) == ("pipeline.max-parallelism", "256", "128")
    assert f.details["snapshot"] == SP  # the path from the submission, not Flink's "Checkpoint Metadata"
    assert not any("allowNonRestoredState" in (p.snippet or "") for p in f.patches)


def test_a_maximum_given_with_the_submission_is_changed_there(tmp_path):
    client = "\n".join([
        line("22:13:21,505", " Program Arguments:", logger="org.apache.flink.client.cli.CliFrontend"),
        line("22:13:21,505", "    -Dpipeline.max-parallelism=256", logger="org.apache.flink.client.cli.CliFrontend"),
    ])
    inc = incident_from_files(tmp_path, {"flink-client.log": client, "jobmanager.log": "\n".join(_mismatch(128, 256)),
                                         "flink-conf.yaml": "parallelism.default: 1\n"}, "1.20.3")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "max-parallelism-configured-differently"
    [key] = [p for p in f.patches if p.target == "flink"]
    assert key.proposed == "128" and "-Dpipeline.max-parallelism=128" in key.reason
    assert any("pipeline.max-parallelism=256" in e.text for e in f.evidence)


def test_a_maximum_neither_configured_nor_submitted_is_in_the_code(tmp_path):
    # the client log of the refused submission (it prints the refusal) shows no -Dpipeline.max-parallelism
    client = "\n".join([line("22:13:21,505", " Program Arguments:", logger="org.apache.flink.client.cli.CliFrontend"),
                        line("22:13:23,300", "Error while running the command.", level="ERROR",
                             logger="org.apache.flink.client.cli.CliFrontend"), *_mismatch(64, 32)[2:]])
    inc = incident_from_files(tmp_path, {"flink-client.log": client, "jobmanager.log": "\n".join(_mismatch(64, 32)),
                                         "flink-conf.yaml": "parallelism.default: 1\n"}, "1.20.3")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "max-parallelism-set-in-code"
    assert [p.target for p in f.patches] == ["code", "ops"]
    assert "env.setMaxParallelism(64)" in f.patches[0].snippet


def test_code_that_sets_its_own_maximum_wins_over_the_configured_one(tmp_path):
    client = "\n".join([line("22:13:23,300", "Error while running the command.", level="ERROR",
                             logger="org.apache.flink.client.cli.CliFrontend"), *_mismatch(128, 32)[2:]])
    inc = incident_from_files(tmp_path, {"flink-client.log": client, "jobmanager.log": "\n".join(_mismatch(128, 32)),
                                         "flink-conf.yaml": "pipeline.max-parallelism: 128\n"}, "1.20.3")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "max-parallelism-set-in-code"
    assert not any(p.target == "flink" for p in f.patches)  # the file already says 128: changing it fixes nothing


def test_without_the_submissions_client_log_the_code_is_not_blamed(tmp_path):
    inc = incident_from_files(tmp_path, {"jobmanager.log": "\n".join(_mismatch(64, 32)),
                                         "flink-conf.yaml": "parallelism.default: 1\n"}, "1.20.3")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "undetermined"  # a -D given with the submission would be logged only there


def test_the_bare_message_is_undetermined_and_still_names_the_value(tmp_path):
    text = "\n".join(_mismatch(128, 256)[2:])
    primary = run_detectors(incident_from_files(tmp_path, {"ticket.txt": text}, "1.18.1")).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "undetermined")
    assert "Collect next" in primary.summary
    assert {p.target for p in primary.patches} == {"flink", "code"}
    assert all(p.proposed == "128" for p in primary.patches if p.target == "flink")


def test_a_parallelism_above_the_derived_128_is_explained():
    text = "\n".join([
        "org.apache.flink.runtime.client.JobInitializationException: Could not start the JobMaster.",
        f"Caused by: java.lang.IllegalStateException: The state for task {COUNTER} can not be restored. The maximum "
        "parallelism (128) of the restored state is lower than the configured parallelism (200). Please reduce the "
        "parallelism of the task to be lower or equal to the maximum parallelism.",
    ])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "2.3.0"))
    assert f.root_cause.slug == "parallelism-above-snapshot-max"
    assert "up to 85" in f.summary and "derives 512" in f.summary
    [par] = [p for p in f.patches if p.target == "flink"]
    assert (par.key, par.proposed) == ("parallelism.default", "128")


def test_a_parallelism_above_the_jobs_own_maximum():
    text = ("org.apache.flink.runtime.JobException: Vertex order-counter -> Sink: sink's parallelism (4) is higher "
            "than the max parallelism (2). Please lower the parallelism or increase the max parallelism.")
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3"))
    assert f.root_cause.slug == "parallelism-above-max-parallelism"
    assert f.details["vertex"] == "order-counter -> Sink: sink"
    assert any(p.key == "parallelism.default" and p.proposed == "2" for p in f.patches)


@pytest.mark.parametrize("name,cause,old,new", [
    ("config-max-changed-1.20.3", "max-parallelism-configured-differently", 128, 256),
    ("config-max-changed-2.3.0", "max-parallelism-configured-differently", 128, 256),
    ("code-max-changed-1.20.3", "max-parallelism-set-in-code", 64, 32),
])
def test_genuine_refusals(spark, name, cause, old, new):
    primary = run_detectors(ingest([str(example(SLUG, name))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, cause)
    assert (primary.details["snapshot_max_parallelism"], primary.details["new_max_parallelism"]) == (old, new)
    assert "order-counter" in primary.details["operator"]
    assert any("Max parallelism mismatch" in e.text for e in primary.evidence)


@pytest.mark.parametrize("name", ["parallelism-above-snapshot-max-1.20.3", "parallelism-above-snapshot-max-2.3.0"])
def test_genuine_parallelism_above_the_snapshots_maximum(spark, name):
    primary = run_detectors(ingest([str(example(SLUG, name))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "parallelism-above-snapshot-max")
    assert (primary.details["snapshot_max_parallelism"], primary.details["new_parallelism"]) == (128, 200)
    assert not any("allowNonRestoredState" in (p.snippet or "") for p in primary.patches)
    # the configuration says parallelism.default: 1, so the 200 came with the submission (-p) or from the code:
    # changing the file would not help
    [submit] = [p for p in primary.patches if p.target == "ops" and p.urgent]
    assert "-p 128" in submit.snippet and "savepoint-" in submit.snippet
    assert any(p.target == "code" and "setParallelism(128)" in p.snippet for p in primary.patches)
    assert not any(p.target == "flink" for p in primary.patches)


def test_a_configured_parallelism_above_the_snapshots_maximum_is_lowered_there():
    text = (f"java.lang.IllegalStateException: The state for task {COUNTER} can not be restored. The maximum "
            "parallelism (64) of the restored state is lower than the configured parallelism (96). Please reduce the "
            "parallelism of the task to be lower or equal to the maximum parallelism.")
    [f] = get_detector(SLUG).detect(incident_from_text(text, {"parallelism.default": "96"}, "1.20.3"))
    [par] = f.patches[:1]
    assert (par.target, par.key, par.current, par.proposed) == ("flink", "parallelism.default", "96", "64")
    assert "up to 85" not in f.summary  # 64 is no derived default: it was set


def test_genuine_parallelism_above_the_jobs_own_maximum(spark):
    primary = run_detectors(ingest([str(example(SLUG, "parallelism-above-max-1.20.3"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "parallelism-above-max-parallelism")
    assert (primary.details["parallelism"], primary.details["max_parallelism"]) == (4, 2)
    [submit] = [p for p in primary.patches if p.target == "ops"]
    assert "-p 2" in submit.snippet and not any(p.target == "flink" for p in primary.patches)
    assert any(p.key == "raise the maximum parallelism of a job without state" for p in primary.patches)
