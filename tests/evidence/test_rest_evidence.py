"""What a pulled bundle's REST documents add to the diagnosis: the exception history gives the episodes and their
first fault exactly, the checkpoint history and settings feed the checkpoint runbooks, a TaskManager's details give
the memory breakdown, a thread dump shows where a cancelling task hangs, failure labels reach the evidence.

Every bundle is pulled from genuine responses of Flink 1.20.3 and 2.3.0 (tests/collect/rest_responses/), and each
diagnosis is compared with the same bundle without its REST documents."""
from __future__ import annotations

import shutil

import pytest

from flink_runbooks.collect import rest
from flink_runbooks.diagnose import ingest, run_detectors
from flink_runbooks.evidence.checkpoints import checkpoint_history
from flink_runbooks.evidence.episodes import episodes, fault_text, first_fault
from flink_runbooks.evidence.memory.incident import effective_taskmanager_memory
from replay import LABELLED, STUCK, replayed_cluster
from support import JOB, RecordedCluster, recorded_cluster


def _pulled(tmp_path, source=None, **faults):
    """A bundle pulled from the failing job's cluster (``source`` None) or from a recorded folder."""
    out = tmp_path / "bundle"
    if source is None:
        with recorded_cluster() as url:
            RecordedCluster.faults = dict(faults)
            rest.pull(url, out)
    else:
        with replayed_cluster(source) as url:
            rest.pull(url, out)
    return out


def _without_rest(bundle, tmp_path):
    """The same bundle as a plain folder of logs and configuration: its REST documents and manifest removed."""
    plain = tmp_path / "plain"
    shutil.copytree(bundle, plain)
    shutil.rmtree(plain / "rest")
    (plain / "manifest.json").unlink()
    return plain


def test_the_exception_history_gives_each_episode_and_its_first_fault(tmp_path):
    bundle = _pulled(tmp_path)
    with_rest = ingest([str(bundle)])
    found = episodes(with_rest)
    # three failures handled: two restarts, then the restart strategy gave up
    assert [ep.outcome for ep in found] == ["restarting", "restarting", "failed"]
    assert {ep.job for ep in found} == {JOB}
    assert all(fault_text(ep.first_fault) == "java.lang.IllegalStateException: order 300 has no customer"
               for ep in found)
    # each failure is the JobManager log's own record of it, once: the TaskManager's copy is not a second failure
    assert all("standalonesession" in ev.file for ep in found for ev in ep.failures)
    assert [len(ep.failures) for ep in found] == [1, 1, 2]
    assert found[-1].suppressed is not None
    without = ingest([str(_without_rest(bundle, tmp_path))])
    assert len(episodes(without)) == len(found)
    assert sum(len(ep.failures) for ep in episodes(without)) > sum(len(ep.failures) for ep in found)


def test_a_historyserver_s_history_is_read_once(tmp_path):
    """Without a JobManager log the pull writes the history as log records: the episodes are the history's, each
    failure that record, not a second one."""
    bundle = _pulled(tmp_path, **{"/jobmanager/config": 404, "/jobmanager/logs": 404, "/taskmanagers": 404})
    incident = ingest([str(bundle)])
    found = episodes(incident)
    assert [ep.outcome for ep in found] == ["restarting", "restarting", "failed"]
    assert all(ev.file.endswith(f"exception-history/{JOB}.log") for ep in found for ev in ep.failures)
    assert first_fault(incident).ts == "2026-11-27 23:29:55.286"


def test_without_any_log_of_the_failure_the_evidence_points_into_the_exceptions_document(tmp_path):
    bundle = _pulled(tmp_path)
    for log in (bundle / "log").rglob("*.log"):
        log.unlink()
    incident = ingest([str(bundle)])
    fault = first_fault(incident)
    assert fault.file.endswith(f"rest/jobs/{JOB}/exceptions.json")
    line = (bundle / "rest" / "jobs" / JOB / "exceptions.json").read_text().splitlines()[fault.line - 1]
    assert line.lstrip().startswith('"stacktrace": "java.lang.IllegalStateException: order 300 has no customer')
    assert "Source: Sequence Source -> Map -> Sink: Print to Std. Out (1/1) - execution #0 on localhost:39181" \
        in fault.message


@pytest.mark.parametrize("source", [None, STUCK["1.20.3"], STUCK["2.3.0"]],
                         ids=["1.20.3-restarts-exhausted", "1.20.3-checkpoints-expire", "2.3.0-checkpoints-expire"])
def test_a_bundle_with_rest_documents_is_diagnosed_at_least_as_right(source, tmp_path):
    bundle = _pulled(tmp_path, source)
    with_rest = run_detectors(ingest([str(bundle)]))
    without = run_detectors(ingest([str(_without_rest(bundle, tmp_path))]))
    failures = [(f.runbook, f.root_cause.slug) for f in without.findings if f.severity == "failure"]
    assert [(f.runbook, f.root_cause.slug) for f in with_rest.findings if f.severity == "failure"] == failures
    for f in with_rest.findings:
        same = next((g for g in without.findings if g.runbook == f.runbook), None)
        assert same is None or f.confidence >= same.confidence
    assert not with_rest.errors


def test_the_job_s_checkpoint_settings_are_what_its_runbooks_read(tmp_path):
    bundle = _pulled(tmp_path, STUCK["1.20.3"])
    incident = ingest([str(bundle)])
    timeout = incident.config.lookup("execution.checkpointing.timeout")
    assert timeout.value == "1500 ms" and str(timeout.source).startswith("REST ")
    assert str(timeout.source).endswith("checkpoints-config.json")
    assert incident.config.get_int("execution.checkpointing.tolerable-failed-checkpoints") == 1


def test_the_checkpoint_history_stands_in_for_a_missing_jobmanager_log(tmp_path):
    bundle = _pulled(tmp_path, STUCK["1.20.3"])
    for log in (bundle / "log").rglob("*standalonesession*"):
        log.unlink()
    incident = ingest([str(bundle)])
    history = checkpoint_history(incident)
    # the recorded GET /jobs/:jobid/checkpoints: both checkpoints expired after the 1.5 s timeout
    assert [(a.checkpoint_id, a.outcome) for a in history] == [(1, "expired"), (2, "expired")]
    assert {a.failure for a in history} == {"Checkpoint expired before completing."}
    expired = next(f for f in run_detectors(incident).findings if f.runbook == "checkpoint-expired")
    assert "1500 ms" in expired.summary
    assert any(e.file.endswith("checkpoints.json") for e in expired.evidence)


def test_a_taskmanager_s_details_give_its_memory_when_no_log_prints_it(tmp_path):
    bundle = _pulled(tmp_path)
    for log in (bundle / "log").rglob("*taskexecutor*"):
        log.unlink()
    mem, where = effective_taskmanager_memory(ingest([str(bundle)]))
    assert "REST details" in where and "taskmanagers/127.0.0.1_33099-2ce93c.json" in where
    assert (mem.process, mem.task_heap, mem.managed, mem.network) == (1 << 30, 26843542, 241591914, 64 << 20)


@pytest.mark.parametrize("version", ["1.20.3", "2.3.0"])
def test_a_task_hanging_in_cancellation_is_shown_by_its_thread_dump(version, tmp_path):
    bundle = _pulled(tmp_path, STUCK[version])
    finding = next(f for f in run_detectors(ingest([str(bundle)])).findings
                   if f.runbook == "task-cancellation-timeout")
    assert finding.severity == "warning"  # the watchdog has not ended the TaskManager (yet)
    assert finding.root_cause.slug == "user-code-ignores-cancellation"
    assert "com.example.orders.StuckJob$1.map" in finding.summary
    evidence = finding.evidence[0]
    assert evidence.file.endswith("thread-dump.txt")
    dump = (bundle / evidence.file.split("bundle/", 1)[1]).read_text().splitlines()
    assert dump[evidence.line - 1].startswith('"Source: Sequence Source -> Map -> Sink: Print to Std. Out (1/1)#0"')
    # without the pull's REST documents and thread dump the logs do not show the hang
    plain = _without_rest(bundle, tmp_path)
    for dump_file in plain.rglob("thread-dump.txt"):
        dump_file.unlink()
    assert not [f for f in run_detectors(ingest([str(plain)])).findings if f.runbook == "task-cancellation-timeout"]


@pytest.mark.parametrize("version", ["1.20.3", "2.3.0"])
def test_failure_labels_reach_the_evidence_of_their_finding(version, tmp_path):
    """A failure enricher labelled every failure of the job (type USER, team orders): the primary finding's
    evidence of those failures says so, whether the record is the JobManager log's or the history's."""
    bundle = _pulled(tmp_path, LABELLED[version])
    primary = next(f for f in run_detectors(ingest([str(bundle)])).findings if f.primary)
    assert primary.runbook == "restart-strategy-exhausted"
    assert any("failure labels: team=orders, type=USER" in e.note for e in primary.evidence)
    plain = run_detectors(ingest([str(_without_rest(bundle, tmp_path))]))
    assert not any("failure labels" in e.note for f in plain.findings for e in f.evidence)


def test_the_event_timeline_shows_failures_only_the_exception_history_holds(tmp_path):
    from flink_runbooks import notebook as nb

    bundle = _pulled(tmp_path)
    for log in (bundle / "log").rglob("*.log"):
        log.unlink()
    incident = ingest([str(bundle)])
    run = nb.RunbookRun("restart-strategy-exhausted", incident, run_detectors(incident))
    rows = [t.get_text() for t in nb.event_timeline(run).axes[0].get_yticklabels()]
    assert rows == ["exceptions.json"]
