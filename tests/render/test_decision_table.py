"""The decision table (data/DECISIONS.md) is generated from the detectors' declarations and kept in sync."""
from __future__ import annotations

import pytest

from corpus import ROOT, incident_from_text
from flink_runbooks.detectors import all_detectors, get_detector
from flink_runbooks.model import Patch
from flink_runbooks.render.decision_table import DECISIONS_FILE, decision_table, key_spellings


def test_committed_table_matches_the_code():
    assert DECISIONS_FILE == ROOT / "data" / "DECISIONS.md"
    assert DECISIONS_FILE.read_text() == decision_table(), (
        "data/DECISIONS.md is stale: run `make regen`")


def test_every_runbook_and_root_cause_has_a_row():
    text = decision_table()
    for detector in all_detectors():
        section = text.split(f"## `{detector.slug}`", 1)[1].split("\n## ", 1)[0]
        for rc in detector.root_causes:
            assert f"| `{rc.slug}` |" in section, f"{detector.slug}/{rc.slug} missing"


def test_keys_show_the_spelling_of_each_release():
    assert key_spellings("execution.checkpointing.dir") == (
        "`execution.checkpointing.dir` (1.20+), `state.checkpoints.dir` (before 1.20), "
        "`state.backend.fs.checkpointdir` (before 1.20)")
    assert key_spellings("heartbeat.timeout") == "`heartbeat.timeout`"


def test_undetermined_rows_say_what_to_collect_next():
    text = decision_table()
    rows = [line for line in text.splitlines() if line.startswith("| `undetermined` |")]
    assert len(rows) >= 6 and all("**Collect next:**" in row for row in rows)


def test_a_detector_cannot_propose_a_patch_its_cause_does_not_declare():
    # The table cannot drift: the detection code refuses what the declaration does not list.
    detector = get_detector("checkpoint-tolerable-failure-threshold")
    sneaky = Patch("flink", "execution.checkpointing.timeout", "1 h", "not declared for this cause")
    with pytest.raises(ValueError, match="not declared"):
        detector.finding("storage-unwritable", "x", [], confidence=0.9, patches=[sneaky])
    old_spelling = Patch("flink", "state.checkpoints.num-retained", "1", "declared under its newest name")
    get_detector("checkpoint-metadata-already-exists").finding(
        "concurrent-writers", "x", [], confidence=0.9, patches=[old_spelling])


def test_each_finding_says_what_would_change_the_verdict():
    text = ("2024-03-01 10:11:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - "
            "Decline checkpoint 2 by task abc of job 0123456789abcdef0123456789abcdef at tm-1.\n"
            "org.apache.flink.util.SerializedThrowable: org.apache.flink.runtime.checkpoint.CheckpointException: "
            "Asynchronous task checkpoint failed.\n"
            "Caused by: org.apache.flink.util.SerializedThrowable: java.nio.file.AccessDeniedException: /mnt/ckpt\n"
            "2024-03-01 10:11:00,100 INFO  org.apache.flink.runtime.jobmaster.JobMaster                 [] - Trying "
            "to recover from a global failure.\n"
            "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.\n")
    [finding] = get_detector("checkpoint-tolerable-failure-threshold").detect(incident_from_text(text))
    assert finding.root_cause.slug == "storage-unwritable"
    assert finding.would_change.startswith("If the same path is writable for the user Flink runs as")
    assert finding.to_dict()["would_change_verdict"] == finding.would_change
    for detector in all_detectors():
        for rc in detector.root_causes:
            assert detector.would_change(rc.slug), f"{detector.slug}/{rc.slug} says nothing about its verdict"


def test_every_literal_patch_in_a_detector_is_declared_by_one_of_its_causes():
    # Paths the example incidents do not reach must not propose undeclared changes either (they would be refused).
    import ast
    import fnmatch
    import inspect

    from flink_runbooks.vocabulary import keys as key_names

    positions = {"ops_patch": 0, "code_patch": 0, "kafka_patch": 0, "flink_patch": 1}
    targets = {"ops_patch": "ops", "code_patch": "code", "kafka_patch": "kafka", "flink_patch": "flink"}
    missing = []
    for detector in all_detectors():
        declared = {d for rc in detector.root_causes for d in rc.patches}
        tree = ast.parse(inspect.getsource(inspect.getmodule(type(detector))))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in positions and len(node.args) > positions[node.func.attr]):
                continue
            arg = node.args[positions[node.func.attr]]
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                continue
            target = targets[node.func.attr]
            key = key_names.canonical(arg.value) if target == "flink" else arg.value
            if not any(d.partition(":")[0] == target and fnmatch.fnmatchcase(
                    key, key_names.canonical(d.partition(":")[2]) if target == "flink" else d.partition(":")[2])
                       for d in declared):
                missing.append(f"{detector.slug}: {target}:{arg.value} (line {node.lineno})")
    assert not missing, "patches no root cause declares:\n" + "\n".join(missing)
