"""Detector user-code-exception: a poison record, a bug of a new release and a flaky dependency told apart from the
attempts' timeline; restarts exhausted stays the outcome, and a failure outside the catalogue is no longer the answer."""
from __future__ import annotations

import json

from corpus import DATA, example, incident_from_text
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors

SLUG = "user-code-exception"
JOB = "d6b596ee9c80fe2128d619997c4a4466"


def line(ts: str, msg: str, level: str = "INFO", logger: str = "org.apache.flink.runtime.executiongraph.ExecutionGraph") -> str:
    return f"2024-05-02 {ts} {level:<5} {logger:<60} [] - {msg}"


def _attempt(ts: str, fault: list[str], to: str = "RESTARTING", back: str | None = None) -> list[str]:
    out = [line(f"{ts},000", "enrich -> Sink: out (1/1) (379e_857e_0_0) switched from RUNNING to FAILED on tm-1:40000-abc @ tm-1 (dataPort=40001)."),
           *fault, line(f"{ts},010", f"Job orders ({JOB}) switched from state RUNNING to {to}.")]
    if back:
        out.append(line(back, f"Job orders ({JOB}) switched from state RESTARTING to RUNNING."))
    return out


def _checkpoints(*stamps: str) -> list[str]:
    return [line(f"{ts},000", f"Completed checkpoint {i + 1} for job {JOB} (2100 bytes, checkpointDuration=40 ms, finalizationTime=1 ms).",
                 logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator") for i, ts in enumerate(stamps)]


TIMEOUT = ["java.net.SocketTimeoutException: Read timed out",
           "\tat java.base/java.net.SocketInputStream.socketRead0(Native Method) ~[?:?]",
           "\tat com.acme.orders.Enrich.map(Enrich.java:31) ~[orders.jar:?]"]
REFUSED = ["java.net.ConnectException: Connection refused",
           "\tat java.base/sun.nio.ch.Net.connect0(Native Method) ~[?:?]",
           "\tat com.acme.orders.Enrich.map(Enrich.java:29) ~[orders.jar:?]"]
NPE = ["java.lang.NullPointerException: Cannot invoke \"String.length()\" because \"order.sku\" is null",
       "\tat com.acme.orders.Enricher.map(Enricher.java:57) ~[orders-job-2.4.jar:?]",
       "\tat org.apache.flink.streaming.api.operators.StreamMap.processElement(StreamMap.java:38) ~[flink-dist-1.18.1.jar:1.18.1]"]


def test_poison_record_recurs_after_restore_and_restarts_exhausted_is_its_outcome(spark):
    d = run_detectors(ingest([str(example(SLUG, "poison-record-1.20"))], spark))
    assert (d.primary.runbook, d.primary.root_cause.slug) == (SLUG, "poison-record")
    assert d.primary.details["thrown_at"] == "com.acme.orders.OrdersJob$ParseAmount.map(OrdersJob.java:108)"
    assert d.primary.details["attempts_with_this_fault"] == 4
    assert d.primary.details["checkpoints_completed_before_first_fault"] == 7
    assert 'For input string: "n/a"' in d.primary.summary
    keys = [p.key for p in d.primary.patches]
    assert "route bad records to a dead-letter side output" in keys
    assert "ctx.output(deadLetters, line)" in d.primary.patches[0].snippet
    # restarting cannot help a poison record: no bigger restart budget is proposed
    assert not any(p.target == "flink" and p.key.startswith("restart-strategy") for p in d.primary.patches)
    outcome = next(f for f in d.findings if f.runbook == "restart-strategy-exhausted")
    assert not outcome.primary and outcome.details["recurring_fault_runbook"] == SLUG
    assert not any(f.runbook == "unrecognised-failure" for f in d.findings)


def test_a_new_release_failing_on_its_first_records_is_a_bug_of_that_release(spark):
    d = run_detectors(ingest([str(example(SLUG, "code-bug-after-deploy-1.20"))], spark))
    f = d.primary
    assert (f.runbook, f.root_cause.slug) == (SLUG, "code-bug-since-deploy")
    assert f.details["checkpoints_completed_before_first_fault"] == 0
    assert f.details["seconds_from_job_start_to_first_fault"] < 5
    assert f.details["earlier_run_of_the_same_job"]  # release 1 ran under the same name and was cancelled
    assert "OrdersJob$Convert.map(OrdersJob.java:127)" in f.summary
    assert [p.key for p in f.patches][:2] == ["roll back to the previous release", "fix the failing code"]


def test_timeouts_that_vary_and_recover_are_a_transient_dependency(spark):
    d = run_detectors(ingest([str(example(SLUG, "transient-dependency-1.20"))], spark))
    f = d.primary
    assert (f.runbook, f.root_cause.slug) == (SLUG, "transient-dependency")
    assert f.details["external_call"] is True and f.details["attempts_with_this_fault"] >= 2
    assert "OrdersJob$Enrich.map" in f.details["thrown_at"]
    keys = {p.key: p for p in f.patches}
    assert "AsyncDataStream.unorderedWaitWithRetry" in keys["retry the external call with a timeout"].snippet
    assert keys["restart-strategy.type"].proposed == "exponential-delay"


def test_poison_record_on_flink_2():
    d = run_detectors(ingest([str(example(SLUG, "poison-record-2.3"))]))
    assert (d.primary.runbook, d.primary.root_cause.slug) == (SLUG, "poison-record")
    assert d.incident.flink_version.startswith("2.")


def test_synthetic_timeouts_from_the_jobs_call_that_change_between_attempts():
    text = "\n".join([line("10:00:00,000", f"Job orders ({JOB}) switched from state CREATED to RUNNING."),
                      *_checkpoints("10:01:00", "10:02:00"),
                      *_attempt("10:05:00", TIMEOUT, back="10:05:10,000"),
                      *_attempt("11:40:00", REFUSED, back="11:40:10,000")])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {"restart-strategy.type": "fixed-delay"}, "1.20.1"))
    assert f.root_cause.slug == "transient-dependency" and f.severity == "failure"
    assert f.details["outcome"] == "recovered"


def test_one_recovered_timeout_is_a_warning_and_silences_the_unrecognised_answer():
    d = run_detectors(ingest([str(example("restart-strategy-exhausted", "near-miss-restart-recovered-1.19"))]))
    assert [f.runbook for f in d.findings] == [SLUG]
    assert d.primary.severity == "warning" and d.primary.root_cause.slug == "transient-dependency"


def test_an_excerpt_of_a_users_exception_gives_this_runbook_at_low_confidence():
    text = ("2024-05-02 10:11:12,345 WARN  org.apache.flink.runtime.taskmanager.Task [] - Map (1/4)#3 "
            "(a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6_1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d_0_3) switched from RUNNING to FAILED "
            "with failure cause:\n" + "\n".join(NPE))
    d = run_detectors(incident_from_text(text))
    assert d.primary.runbook == SLUG and d.primary.root_cause.slug == "undetermined"
    assert d.primary.confidence <= 0.5
    assert "Collect next" in d.primary.summary and "JobManager log" in d.primary.summary
    assert not any(f.runbook == "unrecognised-failure" for f in d.findings)


def test_faults_of_flink_or_another_runbook_are_not_the_jobs_code():
    flink = ["org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.",
             "\tat com.acme.orders.Main.main(Main.java:20) ~[orders.jar:?]"]
    generic = ["java.lang.UnsupportedOperationException: Generic types have been disabled in the ExecutionConfig and "
               "type com.acme.orders.Order is treated as a generic type.",
               "\tat com.acme.orders.Main.main(Main.java:20) ~[orders.jar:?]"]
    for fault in (flink, generic):
        text = "\n".join([line("10:00:00,000", f"Job orders ({JOB}) switched from state CREATED to RUNNING."),
                          *_attempt("10:05:00", fault, to="FAILED")])
        assert get_detector(SLUG).detect(incident_from_text(text)) == [], fault[0]


def test_healthy_and_handled_bad_record_give_nothing(spark):
    for name in ("healthy-1.20", "near-miss-handled-bad-record-1.20"):
        d = run_detectors(ingest([str(example(SLUG, name))], spark))
        assert d.findings == [], (name, [(f.runbook, f.root_cause.slug) for f in d.findings])


def test_every_example_gives_its_expected_verdict(spark):
    folders = sorted(p.parent for p in (DATA / SLUG).glob("*/expected.json"))
    assert len(folders) >= 6
    for path in folders:
        expected = json.loads((path / "expected.json").read_text())
        d = run_detectors(ingest([str(path)], spark))
        if expected["primary"] is None:
            assert d.primary is None, path.name
            continue
        assert (d.primary.runbook, d.primary.root_cause.slug) == (expected["primary"], expected["root_cause"]), path.name
