"""Detector kafka-client-timeout: what the client logged before it gave up names the cause (advertised listeners,
unreachable bootstrap, credentials, ACLs, a missing topic); a timeout the client rides out is no finding."""
from __future__ import annotations

import json

from corpus import example, incident_from_text
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.report import to_json, to_text

SLUG = "kafka-client-timeout"
NET = "org.apache.kafka.clients.NetworkClient"
TAG = "[Consumer clientId=orders-0, groupId=orders]"
POSITION = ("org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before the position for "
            "partition orders-0 could be determined")


def _line(ts: str, level: str, logger: str, message: str) -> str:
    return f"2024-04-16 {ts} {level:<5} {logger:<60} [] - {message}"


def _dump(servers: str) -> list[str]:
    return [_line("07:30:01,000", "INFO", "org.apache.kafka.clients.consumer.ConsumerConfig", "ConsumerConfig values: "),
            f"\tbootstrap.servers = [{servers}]", "\tclient.id = orders-0", "\tgroup.id = orders",
            "\tsecurity.protocol = PLAINTEXT", ""]


def _failed(ts: str, cause: str) -> list[str]:
    return [_line(ts, "WARN", "org.apache.flink.runtime.taskmanager.Task",
                  "Source: orders (1/1)#0 (b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a3_cbc357ccb763df2852fee8c4fc7d55f2_0_0) "
                  "switched from RUNNING to FAILED with failure cause:"),
            "java.lang.RuntimeException: One or more fetchers have encountered exception", f"Caused by: {cause}"]


def _detect(lines: list[str]):
    return get_detector(SLUG).detect(incident_from_text("\n".join(lines) + "\n", {}, "1.17.2",
                                                        file="flink-taskexecutor.log"))


def test_brokers_advertised_under_internal_names(spark):
    f = run_detectors(ingest([str(example(SLUG, "advertised-listeners-internal-hosts-1.17"))], spark)).primary
    assert f.runbook == SLUG and f.root_cause.slug == "advertised-listeners-unreachable"
    assert f.details["bootstrap_servers"] == ["kafka.prod.example.com"]
    assert f.details["unreachable_brokers"][0] == "node 0: kafka-0.kafka-headless.kafka.svc.cluster.local (does not resolve)"
    assert f.details["waiting_for"] == "the position of orders-0" and f.details["client_timeout"] == "60000 ms"
    assert "Error connecting to node kafka-0" in f.evidence[1].text
    ops = f.patches[0]
    assert ops.key == "advertise addresses the TaskManagers can reach" and "advertised.listeners=" in ops.snippet
    assert not [p for p in f.patches if p.target == "kafka"]  # a longer client timeout would not help


def test_refused_credentials_and_the_planted_password_stays_masked(spark):
    path = example(SLUG, "sasl-authentication-failed-1.13")
    diagnosis = run_detectors(ingest([str(path)], spark))
    f = diagnosis.primary
    assert f.runbook == SLUG and f.root_cause.slug == "authentication-failed"
    assert f.details["security"] == {"sasl.mechanism": "SCRAM-SHA-512", "security.protocol": "SASL_SSL"}
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in f.summary
    # the job parameter in flink-conf.yaml holds a (fake) password: nothing a user sees may show it
    assert "planted-Fake-Secret-7731" in (path / "flink-conf.yaml").read_text()
    assert "planted-Fake-Secret-7731" not in to_json(diagnosis) + to_text(diagnosis)
    assert "planted-Fake-Secret-7731" not in json.dumps(diagnosis.incident.config.to_dict())


def test_topic_acl_missing_for_the_sink(spark):
    f = run_detectors(ingest([str(example(SLUG, "topic-not-authorized-kafkasink-1.18"))], spark)).primary
    assert f.runbook == SLUG and f.root_cause.slug == "not-authorized"
    assert f.details["refused"] == "topics [user-sessions]"
    assert "kafka-acls.sh" in f.patches[0].snippet


def test_the_pasted_ticket_with_a_misspelt_topic():
    f = run_detectors(ingest([str(example(SLUG, "ticket-excerpt-topic-missing-1.15"))])).primary
    assert f.runbook == SLUG and f.root_cause.slug == "topic-missing"
    assert f.confidence < 0.85
    assert any("UNKNOWN_TOPIC_OR_PARTITION" in e.text for e in f.evidence)


def test_a_pasted_enumerator_failover_on_the_jobmanager_names_the_missing_topic():
    # the SourceCoordinatorContext ERROR with its trace and the job's RESTARTING lines, no global failure record:
    # the enumerator's failure is the job's failure, not a state change without an exception
    d = run_detectors(ingest([str(example(SLUG, "topic-missing-enumerator-excerpt-1.20"))]))
    f = d.primary
    assert f.runbook == SLUG and f.root_cause.slug == "topic-missing"
    assert "Topic orders-v2 not found." in f.summary
    assert f.evidence[0].line == 1
    assert "unrecognised-failure" not in [other.runbook for other in d.findings]


def test_healthy_and_a_broker_restart_the_client_rides_out_give_nothing():
    for name in ("healthy", "near-miss-broker-restart-blip-1.17"):
        findings = run_detectors(ingest([str(example(SLUG, name))])).findings
        assert not [f for f in findings if f.runbook == SLUG], name


def test_the_enumerator_cannot_reach_the_bootstrap_servers():
    f = run_detectors(ingest([str(example(SLUG, "bootstrap-unreachable-enumerator-1.20"))])).primary
    assert f.runbook == SLUG and f.root_cause.slug == "brokers-unreachable"
    assert f.details["failure"].endswith("Timed out waiting for a node assignment. Call: describeTopics")
    assert f.details["unreachable_brokers"] == ["node -1: kafka.prod.example.com"]
    assert "JobManager" in f.patches[0].reason


def test_bootstrap_servers_that_cannot_be_reached():
    lines = _dump("kafka.prod.example.com:9092") + [
        _line(f"07:30:{s:02d},000", "WARN", NET, f"{TAG} Connection to node -1 (kafka.prod.example.com/10.1.2.3:9092) "
                                                  "could not be established. Broker may not be available.")
        for s in range(2, 50, 6)] + [
        _line("07:31:00,000", "WARN", NET, f"{TAG} Bootstrap broker kafka.prod.example.com:9092 (id: -1 rack: null) "
                                           "disconnected")] + _failed("07:31:01,000", POSITION)
    [f] = _detect(lines)
    assert f.root_cause.slug == "brokers-unreachable"
    assert f.details["unreachable_brokers"] == ["node -1: kafka.prod.example.com"]
    assert "nc -vz kafka.prod.example.com" in f.patches[0].snippet


def test_a_timeout_without_anything_before_it_is_undetermined():
    [f] = _detect(_failed("07:31:01,000", POSITION))
    assert f.root_cause.slug == "undetermined"
    assert "kafka-broker-api-versions.sh" in f.summary  # collect next


def test_offset_commit_failures_are_left_to_their_own_runbook():
    lines = [_line("07:31:00,000", "WARN", "org.apache.flink.connector.kafka.source.reader.KafkaSourceReader",
                   "Failed to commit consumer offsets for checkpoint 12"),
             "org.apache.kafka.clients.consumer.RetriableCommitFailedException: Offset commit failed with a retriable "
             "exception. You should retry committing the latest consumed offsets.",
             "Caused by: org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before "
             "successfully committing offsets {orders-0=OffsetAndMetadata{offset=12, leaderEpoch=null, metadata=''}}"]
    assert _detect(lines) == []


def test_fenced_exactly_once_producers_are_left_to_the_transaction_runbook():
    lines = _failed("07:31:01,000", "org.apache.kafka.common.errors.ProducerFencedException: There is a newer producer "
                                    "with the same transactionalId which fences the current one.")
    assert _detect(lines) == []


def test_pasted_connection_warnings_alone_are_a_low_confidence_reading_with_the_outcome_unknown():
    lines = [f"WARN {NET} - {TAG} Connection to node -1 (kafka.prod.example.com/10.1.2.3:9092) could not be "
             "established. Broker may not be available."] * 3
    [f] = _detect(lines)
    assert f.root_cause.slug == "brokers-unreachable" and f.confidence < 0.5
    assert f.details["outcome"].startswith("unknown") and "not in this excerpt" in f.summary


def test_a_kerberos_login_without_a_ticket_is_left_to_the_kerberos_runbook(spark):
    """GSSAPI found no TGT: rotating a password or changing the SASL mechanism would not help."""
    diagnosis = run_detectors(ingest([str(example("kerberos-token-expired", "excerpt-kafka-no-tgt"))], spark))
    assert diagnosis.primary.runbook == "kerberos-token-expired"
    assert "kafka-client-timeout" not in {f.runbook for f in diagnosis.findings}
