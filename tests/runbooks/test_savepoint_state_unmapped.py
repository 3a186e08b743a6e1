"""Detector savepoint-state-unmapped: which change orphaned the snapshot's state, and what to do about it."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_files, incident_from_text
from corpus import line
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.evidence.restore import operator_id_of_uid

SLUG = "savepoint-state-unmapped"
SP = "file:/data/flink/savepoints/savepoint-e3719e-79ecd409895c"
JOB = "07e1b9fc21c9449860b1e3960d2fb127"


def _failure(op: str, allow: bool = False) -> list[str]:
    return [
        line("21:33:57,084", f"Starting job {JOB} from savepoint {SP} ({'allowing non restored state' if allow else ''})",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
        line("21:33:57,137", f"Job {JOB} reached terminal state FAILED.",
             logger="org.apache.flink.runtime.dispatcher.StandaloneDispatcher"),
        "org.apache.flink.runtime.client.JobInitializationException: Could not start the JobMaster.",
        f"Caused by: java.lang.IllegalStateException: Failed to rollback to checkpoint/savepoint {SP}. Cannot map "
        f"checkpoint/savepoint state for operator {op} to the new program, because the operator is not available in "
        "the new program. If you want to allow to skip this, you can set the --allowNonRestoredState option on the CLI.",
        "\tat org.apache.flink.runtime.checkpoint.Checkpoints.throwNonRestoredStateException(Checkpoints.java:240)",
    ]


def _deployed(task: str, vertex: str) -> str:
    return line("21:33:35,882", f"Deploying {task} (1/1) (attempt #0) with attempt id e8ab61cb2bf0a101f77d23e61747861c_"
                f"{vertex}_0_0 and vertex id {vertex}_0 to localhost:35403-1fb19f @ localhost (dataPort=41829) with "
                "allocation id 863507a3e68ea984a6538f119b6214cb",
                logger="org.apache.flink.runtime.executiongraph.ExecutionGraph")


def test_operator_id_is_the_murmur3_hash_flink_gives_an_explicit_uid():
    # ids read from genuine Flink 1.20.3 logs of a job with .uid("counter") and .uid("numbers")
    assert operator_id_of_uid("counter") == "0da08f51eaa85fc298e176a139b3649a"
    assert operator_id_of_uid("numbers") == "ca88eee0095684d687a1b6495617f957"


def test_a_renamed_uid_is_named_and_given_back():
    op = operator_id_of_uid("enrich-orders")
    text = "\n".join([_deployed("enrich-orders -> Sink: audit", op)] + _failure(op))
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3"))
    assert f.root_cause.slug == "uid-missing-or-changed"
    assert f.details["explicit_uid"] == "enrich-orders" and "uid 'enrich-orders'" in f.summary
    code = next(p for p in f.patches if p.key == "stable operator uids")
    assert '.uid("enrich-orders")' in code.snippet
    skip = next(p for p in f.patches if p.target == "ops")
    assert "data-loss" in skip.reason and "--allowNonRestoredState" in skip.snippet


def test_an_auto_generated_id_gets_set_uid_hash():
    op = "90bea66de1c231edf33913ecd54406c1"
    text = "\n".join([_deployed("counter -> Sink: sink", op)] + _failure(op))
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3"))
    assert f.root_cause.slug == "uid-missing-or-changed"
    assert f.details["operator_in_snapshot_job"] == "counter -> Sink: sink"
    assert any(p.snippet and f'setUidHash("{op}")' in p.snippet for p in f.patches)


def test_sql_planner_operators_mean_the_plan_changed():
    op = "20ba6b65f97481d5570070de90e4e791"
    text = "\n".join([_deployed("GroupAggregate[3] -> totals[4]: Writer", op)] + _failure(op))
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3"))
    assert f.root_cause.slug == "sql-plan-changed"
    assert not any("uid" in p.key for p in f.patches)


@pytest.mark.parametrize("key,version", [("execution.state-recovery.ignore-unclaimed-state", "1.20.3"),
                                         ("execution.savepoint.ignore-unclaimed-state", "1.16.3")])
def test_a_configured_skip_that_did_not_reach_the_job(key, version):
    op = operator_id_of_uid("counter")
    text = "\n".join([_deployed("counter -> Sink: sink", op)] + _failure(op))
    [f] = get_detector(SLUG).detect(incident_from_text(text, {key: "true"}, version))
    assert f.root_cause.slug == "allow-non-restored-not-propagated"
    assert f.details["allow_non_restored_state_at_submission"] == "no"
    [p] = f.patches
    assert "allowNonRestoredState" in p.snippet and "for good" in p.reason


def test_the_bare_message_pasted_from_a_ticket_is_undetermined(tmp_path):
    op = "0da08f51eaa85fc298e176a139b3649a"
    text = (f"java.lang.IllegalStateException: Failed to rollback to checkpoint/savepoint {SP}. Cannot map "
            f"checkpoint/savepoint state for operator {op} to the new program, because the operator is not available "
            "in the new program. If you want to allow to skip this, you can set the --allowNonRestoredState option on "
            "the CLI.\n\tat org.apache.flink.runtime.checkpoint.Checkpoints.throwNonRestoredStateException(Checkpoints.java:240)\n")
    inc = incident_from_files(tmp_path, {"ticket.txt": text}, "1.18.1")
    primary = run_detectors(inc).primary
    assert primary.runbook == SLUG and primary.root_cause.slug == "undetermined"
    assert "Collect next" in primary.summary


def test_state_skipped_on_purpose_is_no_finding():
    text = "\n".join([
        line("21:42:29,167", f"Starting job {JOB} from savepoint {SP} (allowing non restored state)",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
        line("21:42:29,214", "Skipping savepoint state for operator 0da08f51eaa85fc298e176a139b3649a.",
             logger="org.apache.flink.runtime.checkpoint.Checkpoints")])
    assert get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3")) == []


@pytest.mark.parametrize("name,cause,task", [
    ("uid-renamed-1.20.3", "uid-missing-or-changed", "counter -> Sink: sink"),
    ("no-uids-changed-1.20.3", "uid-missing-or-changed", "counter -> Sink: sink"),
    ("sql-plan-changed-1.20.3", "sql-plan-changed", "GroupAggregate[3] -> totals[4]: Writer"),
])
def test_genuine_incidents(spark, name, cause, task):
    diagnosis = run_detectors(ingest([str(example(SLUG, name))], spark))
    primary = diagnosis.primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, cause)
    assert primary.details["operator_in_snapshot_job"] == task
    assert any("Cannot map checkpoint/savepoint state" in e.text for e in primary.evidence)
    assert any("without allowNonRestoredState" in e.note for e in primary.evidence)


def test_genuine_rest_submission_overrides_the_configured_skip(spark):
    primary = run_detectors(ingest([str(example(SLUG, "rest-ignores-config-1.20.3"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "allow-non-restored-not-propagated")
    assert primary.details["ignore_unclaimed_state_configured"] == "true"
    assert primary.details["allow_non_restored_state_at_submission"] == "no"
    [p] = primary.patches
    assert '"allowNonRestoredState": true' in p.snippet
