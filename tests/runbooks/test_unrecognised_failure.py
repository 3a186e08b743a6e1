"""Detector unrecognised-failure: a failed or restarted job is never answered with silence; healthy logs still are."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from corpus import DATA, example, incident_from_text
from flink_runbooks.diagnose import ingest
from flink_runbooks.collect.scan import line_patterns
from flink_runbooks.detectors import prefilter
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import order_findings, run_detectors
from flink_runbooks.evidence.faults import component
from flink_runbooks.model import ChainLink, Finding, RootCause

SLUG = "unrecognised-failure"
JOB = "d6b596ee9c80fe2128d619997c4a4466"


def line(ts: str, msg: str, level: str = "INFO", logger: str = "org.apache.flink.runtime.executiongraph.ExecutionGraph") -> str:
    return f"2024-05-02 {ts} {level:<5} {logger:<60} [] - {msg}"


def _restart_log(fault: list[str], to: str = "RESTARTING", recovered: bool = True) -> str:
    lines = [line("10:00:00,000", f"Job orders ({JOB}) switched from state CREATED to RUNNING."),
             line("10:01:00,000", "enrich -> Sink: out (2/4) (379e_857e_0_0) switched from RUNNING to FAILED on tm-1:40000-abc @ tm-1 (dataPort=40001)."),
             *fault,
             line("10:01:00,010", f"Job orders ({JOB}) switched from state RUNNING to {to}.")]
    if recovered:
        lines.append(line("10:01:10,000", f"Job orders ({JOB}) switched from state RESTARTING to RUNNING."))
    return "\n".join(lines)


NPE = ["java.lang.NullPointerException: Cannot invoke \"String.length()\" because \"order.sku\" is null",
       "\tat com.acme.orders.Enricher.map(Enricher.java:57) ~[orders-job-2.4.jar:?]",
       "\tat org.apache.flink.streaming.api.operators.StreamMap.processElement(StreamMap.java:38) ~[flink-dist-1.18.1.jar:1.18.1]"]


def test_user_code_exception_names_task_frames_and_component():
    [f] = get_detector(SLUG).detect(incident_from_text(_restart_log(NPE)))
    assert f.root_cause.slug == "thrown-by-user-code"
    assert f.details["task_or_operator"] == "enrich -> Sink: out (2/4)"
    assert f.details["first_fault"].startswith("java.lang.NullPointerException")
    assert f.details["user_code_frames"] == ["at com.acme.orders.Enricher.map(Enricher.java:57) ~[orders-job-2.4.jar:?]"]
    assert "com.acme.orders.Enricher.map(Enricher.java:57)" in f.summary
    assert any(p.key == "fix or guard the failing code" for p in f.patches)


def test_a_job_that_failed_without_a_logged_exception_is_undetermined_and_says_what_to_collect():
    log = "\n".join([line("10:00:00,000", f"Job orders ({JOB}) switched from state CREATED to RUNNING."),
                     line("10:05:00,000", f"Job orders ({JOB}) switched from state RUNNING to FAILING."),
                     line("10:05:00,100", f"Job orders ({JOB}) switched from state FAILING to FAILED.")])
    [f] = get_detector(SLUG).detect(incident_from_text(log))
    assert f.root_cause.slug == "undetermined"
    assert f.confidence < 0.5
    assert "Collect next" in f.summary and "stack trace" in f.summary


def test_the_first_fault_is_not_a_symptom_of_a_lost_peer():
    lost = ["org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException: Connection unexpectedly closed by remote task manager 'tm-2/10.0.0.2:40000'. This might indicate that the remote task manager was lost."]
    log = "\n".join([line("10:00:00,000", f"Job orders ({JOB}) switched from state CREATED to RUNNING."),
                     line("10:01:00,000", "map (1/4) (a_b_0_0) switched from RUNNING to FAILED on tm-1."), *lost,
                     line("10:01:00,001", "sink (2/4) (a_c_0_0) switched from RUNNING to FAILED on tm-2."),
                     "java.net.ConnectException: Connection refused (Connection refused)",
                     line("10:01:00,010", f"Job orders ({JOB}) switched from state RUNNING to RESTARTING.")])
    [f] = get_detector(SLUG).detect(incident_from_text(log))
    assert f.details["first_fault"].startswith("java.net.ConnectException")
    assert f.root_cause.slug == "thrown-by-environment"
    assert f.details["task_or_operator"] == "sink (2/4)"


@pytest.mark.parametrize("cls, message, frames, expected", [
    ("java.lang.NoClassDefFoundError", "org/apache/kafka/clients/consumer/ConsumerRecord", [], "the JVM"),
    ("java.lang.OutOfMemoryError", "unable to create native thread", [], "the JVM"),
    ("java.net.UnknownHostException", "kafka-0.kafka", [], "the environment"),
    ("java.io.IOException", "No space left on device", [], "the environment"),
    ("org.postgresql.util.PSQLException", "ERROR: duplicate key value violates unique constraint", [], "a connector"),
    ("org.apache.flink.elasticsearch7.shaded.org.elasticsearch.ElasticsearchException", "mapper_parsing_exception", [], "a connector"),
    ("org.apache.flink.runtime.state.BackendBuildingException", "Failed when trying to restore heap backend", [], "Flink"),
    ("com.acme.fraud.RuleCompileException", "unknown field 'amount2'", [], "user code"),
    ("java.lang.IllegalArgumentException", "bad record", ["at com.acme.Parse.map(Parse.java:9)"], "user code"),
    ("java.lang.IllegalArgumentException", "bad record", [], None),
])
def test_component_is_judged_from_package_then_frames(cls, message, frames, expected):
    assert component(ChainLink(cls, message, "caused_by"), frames)[0] == expected


def test_unknown_generic_exception_in_an_excerpt_is_reported_at_low_confidence():
    text = "java.lang.IllegalArgumentException: Invalid timestamp format: '2024-13-45'"
    [f] = get_detector(SLUG).detect(incident_from_text(text))
    assert f.root_cause.slug == "undetermined"
    assert f.confidence <= 0.3
    assert "excerpt" in " ".join(f.details["unknown"])


def test_a_warning_with_an_exception_in_a_healthy_job_is_not_a_failure():
    log = "\n".join([line("10:00:00,000", f"Job orders ({JOB}) switched from state CREATED to RUNNING."),
                     line("10:00:05,000", "[Consumer clientId=orders-0, groupId=orders] Error while fetching metadata", "WARN",
                          "org.apache.kafka.clients.NetworkClient"),
                     "org.apache.kafka.common.errors.DisconnectException: null",
                     line("10:00:30,000", f"Completed checkpoint 1 for job {JOB} (1000 bytes, checkpointDuration=80 ms, finalizationTime=2 ms).",
                          logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator")])
    assert get_detector(SLUG).detect(incident_from_text(log)) == []


def test_never_outranks_a_catalogued_finding():
    incident = incident_from_text(_restart_log(NPE))
    [uf] = get_detector(SLUG).detect(incident)
    catalogued = Finding("oom-java-heap", "heap", RootCause("x", "x"), "s", 0.5, severity="warning",
                         first_seen="2000-01-01 00:00:00.000")
    findings = [uf, catalogued]
    order_findings(findings)
    assert findings[0] is catalogued and findings[0].primary and not uf.primary


def test_a_catalogued_failure_explains_the_failure_and_silences_this_runbook():
    oom = ["java.lang.OutOfMemoryError: Java heap space",
           "\tat com.acme.orders.Enricher.map(Enricher.java:57) ~[orders-job-2.4.jar:?]"]
    d = run_detectors(incident_from_text(_restart_log(oom), version="1.18.1"))
    assert d.primary is not None and d.primary.runbook == "oom-java-heap"
    assert SLUG not in [f.runbook for f in d.findings]


def test_user_frames_pass_the_pre_filter_and_framework_frames_do_not():
    kept = line_patterns(prefilter())["kept"]
    lines = ["\tat com.acme.orders.Enricher.map(Enricher.java:57) ~[orders-job-2.4.jar:?]",
             "jobmanager-1  | \tat scenario.ScenarioJob$StatefulMap.map(ScenarioJob.java:105)",
             "\tat org.apache.flink.runtime.taskmanager.Task.run(Task.java:575)",
             "\tat java.base/java.lang.Thread.run(Thread.java:840)"]
    assert pc.match_substring_regex(pa.array(lines), kept).to_pylist() == [True, True, False, False]


def test_example_incidents_end_to_end(spark):
    for name in ("healthy-deprecated-key-tasks-starting-1.17", "near-miss-kafka-bootstrap-disconnect-1.16"):
        path = example(SLUG, name)
        expected = json.loads((path / "expected.json").read_text())
        d = run_detectors(ingest([str(path)], spark))
        if expected["primary"] is None:
            assert d.findings == [], name
            continue
        assert d.primary.runbook == SLUG and d.primary.root_cause.slug == expected["root_cause"], name
    # the job's own exception is now inside the catalogue: this runbook still reads it, and diagnose drops it
    d = run_detectors(ingest([str(example(SLUG, "user-code-exception-restarting-1.20"))], spark))
    assert d.primary.runbook == "user-code-exception" and not any(f.runbook == SLUG for f in d.findings)
    [user] = get_detector(SLUG).detect(d.incident)
    assert user.details["task_or_operator"] == "stateful-map -> discard-sink: Writer (1/1)"
    assert any("scenario.ScenarioJob$StatefulMap.map" in f for f in user.details["user_code_frames"])
    assert user.confidence >= 0.6
    # the record too large is inside the catalogue now: this runbook still reads it, and diagnose drops it
    d = run_detectors(ingest([str(example(SLUG, "kafka-record-too-large-excerpt-1.15"))], spark))
    assert d.primary.runbook == "kafka-record-too-large" and not any(f.runbook == SLUG for f in d.findings)
    [excerpt] = get_detector(SLUG).detect(d.incident)
    assert excerpt.confidence < user.confidence
    assert "RecordTooLargeException" in excerpt.details["first_fault"]


def test_every_example_folder_has_an_expectation():
    assert len(list((DATA / SLUG).glob("*/expected.json"))) >= 4


def test_an_excerpt_does_not_claim_what_the_job_did_next():
    from corpus import incident_from_text

    text = ("2024-05-02 10:11:12,345 WARN  org.apache.flink.runtime.taskmanager.Task [] - Map (1/4)#3 "
            "(a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6_1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d_0_3) switched from RUNNING to FAILED "
            "with failure cause:\njava.lang.NullPointerException: value is null\n"
            "\tat com.acme.orders.EnrichFunction.map(EnrichFunction.java:42)\n")
    [finding] = get_detector(SLUG).detect(incident_from_text(text))  # diagnose gives user-code-exception
    assert finding.runbook == "unrecognised-failure"
    assert "restarted" not in finding.summary.replace("failed or restarted", "")
    assert finding.details["outcome"] == "unknown"


_ENUMERATOR_FAILOVER = [
    line("10:01:00,000", "Uncaught exception in the SplitEnumerator for Source Source: inventory while handling operator "
         "event RequestSplitEvent (host='10.42.1.23') from subtask 1 (#0). Triggering job failover.", "ERROR",
         "org.apache.flink.runtime.source.coordinator.SourceCoordinator"),
    "java.lang.IllegalStateException: No snapshot split left for subtask 1",
    "\tat com.acme.inventory.SnapshotSplitEnumerator.handleSplitRequest(SnapshotSplitEnumerator.java:88) ~[inventory-job-1.3.jar:?]",
    "\tat org.apache.flink.runtime.source.coordinator.SourceCoordinator.handleRequestSplitEvent(SourceCoordinator.java:618) ~[flink-dist-1.20.3.jar:1.20.3]",
    line("10:01:00,010", f"Job inventory ({JOB}) switched from state RUNNING to RESTARTING."),
]


def test_a_split_enumerator_failing_the_job_on_the_jobmanager_is_its_first_fault():
    # pasted as users paste it: the coordinator's ERROR with its trace and the job's state change, no task failed
    [f] = get_detector(SLUG).detect(incident_from_text("\n".join(_ENUMERATOR_FAILOVER)))
    assert f.details["first_fault"] == "java.lang.IllegalStateException: No snapshot split left for subtask 1"
    assert f.root_cause.slug == "thrown-by-user-code"
    assert f.details["task_or_operator"] == "the split enumerator of Source: inventory (on the JobManager)"
    assert f.evidence[0].line == 1
    assert "no exception is logged" not in json.dumps(f.details) + f.summary
    assert "none is logged" not in f.summary


def test_the_async_call_wording_of_the_source_coordinator_is_a_failure_event_too():
    from flink_runbooks.evidence.episodes import episodes

    log = _ENUMERATOR_FAILOVER[:]
    log[0] = line("10:01:00,000", "Exception while handling result from async call in SourceCoordinator-Source: "
                  "inventory. Triggering job failover.", "ERROR",
                  "org.apache.flink.runtime.source.coordinator.SourceCoordinatorContext")
    incident = incident_from_text("\n".join(log))
    [episode] = episodes(incident)
    assert episode.outcome == "restarting" and episode.first_fault.line == 1
    [f] = get_detector(SLUG).detect(incident)
    assert f.details["task_or_operator"] == "the split enumerator of Source: inventory (on the JobManager)"


def test_a_failure_line_without_its_exception_names_the_exception_logged_before_it():
    # a scheduler-side ERROR the catalogue does not know, then the job's state change without a trace
    log = "\n".join([line("10:00:00,000", f"Job orders ({JOB}) switched from state CREATED to RUNNING."),
                     line("10:01:00,000", "Failed to dispatch the lookup result", "ERROR",
                          "com.acme.orders.LookupClient"),
                     "com.acme.orders.LookupFailedException: lookup service answered 503",
                     "\tat com.acme.orders.LookupClient.fetch(LookupClient.java:41) ~[orders-job-2.4.jar:?]",
                     line("10:01:00,010", f"Job orders ({JOB}) switched from state RUNNING to FAILING."),
                     line("10:01:00,100", f"Job orders ({JOB}) switched from state FAILING to FAILED.")])
    [f] = get_detector(SLUG).detect(incident_from_text(log))
    assert f.details["first_fault"] == "com.acme.orders.LookupFailedException: lookup service answered 503"
    assert f.root_cause.slug == "thrown-by-user-code"
    assert "no exception is logged" not in json.dumps(f.details) + f.summary
    assert "logged before it" in f.summary and f.confidence < 0.6


def test_an_unrelated_warning_with_an_exception_is_not_named_but_not_denied_either():
    log = "\n".join([line("10:00:00,000", f"Job orders ({JOB}) switched from state CREATED to RUNNING."),
                     line("10:00:05,000", "[Consumer clientId=orders-0, groupId=orders] Error while fetching metadata",
                          "WARN", "org.apache.kafka.clients.NetworkClient"),
                     "org.apache.kafka.common.errors.DisconnectException: null",
                     line("10:05:00,000", f"Job orders ({JOB}) switched from state RUNNING to FAILING."),
                     line("10:05:00,100", f"Job orders ({JOB}) switched from state FAILING to FAILED.")])
    [f] = get_detector(SLUG).detect(incident_from_text(log))
    assert f.root_cause.slug == "undetermined"
    assert "no exception is logged" not in json.dumps(f.details) + f.summary
    assert "none is logged" not in f.summary
