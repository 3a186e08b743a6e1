"""Detector kafka-eos-transaction-timeout: the broker's refusal, transactions that outlived their timeout (data loss),
the broker's expiry and a second job with the same transactional ids are told apart; a restore within the timeout is
no finding."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_text
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.patches import render_config_diff, render_kafka_properties

SLUG = "kafka-eos-transaction-timeout"
JOB = "7f3c9e1a5b2d4f6e8a0c1e3b5d7f9a2c"
CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator"
FENCED_3X = ("org.apache.kafka.common.errors.ProducerFencedException: There is a newer producer with the same "
             "transactionalId which fences the current one.")


def _line(ts: str, level: str, logger: str, message: str) -> str:
    return f"2024-09-03 {ts} {level:<5} {logger:<60} [] - {message}"


def _producer_dump(ts: str, timeout_ms: int, tid: str = "orders-eos-0-12") -> list[str]:
    return [_line(ts, "INFO", "org.apache.kafka.clients.producer.ProducerConfig", "ProducerConfig values: "),
            "\tbootstrap.servers = [kafka-1:9092]", f"\tclient.id = producer-{tid}",
            f"\ttransaction.timeout.ms = {timeout_ms}", f"\ttransactional.id = {tid}", ""]


def _checkpoint(ts: str, cid: int) -> list[str]:
    return [_line(ts, "INFO", CC, f"Completed checkpoint {cid} for job {JOB} (48211 bytes, checkpointDuration=473 ms, "
                                  "finalizationTime=2 ms).")]


def _job_running(ts: str, job: str = JOB, name: str = "orders-enricher") -> list[str]:
    return [_line(ts, "INFO", "org.apache.flink.runtime.executiongraph.ExecutionGraph",
                  f"Job {name} ({job}) switched from state CREATED to RUNNING.")]


def _writer_failed(ts: str, cause: str) -> list[str]:
    return [_line(ts, "WARN", "org.apache.flink.runtime.taskmanager.Task",
                  "Sink: enriched-orders Writer (1/1)#0 (c0e2a4b6d8f0a2c4e6b8d0f2a4c6e8b0) switched from RUNNING to "
                  "FAILED with failure cause:"), cause,
            "\tat org.apache.flink.connector.kafka.sink.KafkaWriter.write(KafkaWriter.java:204) ~[?:?]"]


def _detect(lines: list[str], config: dict | None = None, version: str = "1.18.1"):
    return get_detector(SLUG).detect(incident_from_text("\n".join(lines) + "\n", config or {}, version))


def test_flinkkafkaproducers_one_hour_default_refused_by_the_broker(spark):
    diagnosis = run_detectors(ingest([str(example(SLUG, "timeout-above-broker-max-1.13"))], spark))
    f = diagnosis.primary
    assert f.runbook == SLUG and f.root_cause.slug == "timeout-above-broker-max" and f.confidence >= 0.9
    # the restarts ran out, but the broker's refusal is the root cause, not the exhausted budget
    outcome = next(g for g in diagnosis.findings if g.runbook == "restart-strategy-exhausted")
    assert not outcome.primary and outcome.root_cause.slug == "same-fault-every-attempt"
    assert "transaction.max.timeout.ms" in f.evidence[0].text
    assert "FlinkKafkaProducer asks for 1 h" in f.summary
    kafka = next(p for p in f.patches if p.target == "kafka")
    assert (kafka.key, kafka.current, kafka.proposed) == ("transaction.timeout.ms", "3600000", "900000")
    assert any(p.key == "raise transaction.max.timeout.ms on the brokers" for p in f.patches)
    rendered = render_kafka_properties(f.patches)
    assert 'producerConfig.setProperty("transaction.timeout.ms", "900000");' in rendered["datastream"]
    assert "transaction.timeout.ms=900000" in rendered["properties"]


def test_the_pasted_kafkasink_ticket_names_the_broker_limit_at_lower_confidence():
    f = run_detectors(ingest([str(example(SLUG, "ticket-excerpt-kafkasink-1.17"))])).primary
    assert f.runbook == SLUG and f.root_cause.slug == "timeout-above-broker-max"
    assert f.confidence < 0.9


def test_kafkasinks_one_hour_default_is_reported_when_the_logs_do_not_show_the_timeout():
    f = run_detectors(ingest([str(example(SLUG, "ticket-excerpt-kafkasink-1.17"))])).primary
    # the pasted trace has no ProducerConfig dump: KafkaSinkBuilder's default, not "unknown"
    assert f.details["sink"] == "KafkaSink"  # its Sink V2 writer task
    assert f.details["transaction_timeout"].startswith("1 h (3600000 ms), the sink's default")
    assert "unknown" not in f.details["transaction_timeout"] + f.summary
    assert "KafkaSink, like FlinkKafkaProducer, asks for 1 h" in f.summary
    kafka = next(p for p in f.patches if p.target == "kafka")
    assert (kafka.current, kafka.proposed) == ("3600000", "900000") and "not in the logs" in kafka.current_source


def test_the_default_timeout_is_reported_but_decides_nothing():
    [f] = _detect(_writer_failed("14:10:00,500", FENCED_3X))
    assert f.root_cause.slug == "undetermined"
    assert f.details["transaction_timeout"].startswith("1 h (3600000 ms), the sink's default")


def test_a_restore_after_the_timeout_is_data_loss():
    f = run_detectors(ingest([str(example(SLUG, "transaction-expired-after-downtime-1.13"))])).primary
    assert f.runbook == SLUG and f.root_cause.slug == "transaction-timeout-too-short"
    assert f.details["open_before_commit"].startswith("95 min")
    assert f.details["downtime_before_restore"].startswith("94 min")
    assert "lost" in f.summary and "data loss" in f.summary
    kafka = next(p for p in f.patches if p.target == "kafka")
    assert kafka.current == "900000" and int(kafka.proposed) > 95 * 60_000
    assert kafka.current_source.startswith("ProducerConfig values")
    assert "restored checkpoint 212, 94 min" in f.evidence[-1].note
    assert any(p.key == "raise transaction.max.timeout.ms on the brokers" for p in f.patches)
    assert any(p.key == "find and replay the lost records" for p in f.patches)


def test_kafkasinks_committer_fenced_after_an_outage_is_data_loss():
    f = run_detectors(ingest([str(example(SLUG, "committer-fenced-after-outage-1.18"))])).primary
    assert f.runbook == SLUG and f.root_cause.slug == "transaction-timeout-too-short"
    assert f.details["sink"] == "KafkaSink" and f.details["transactional_ids"] == ["orders-eos-0-58"]
    assert f.details["downtime_before_restore"].startswith("41 min")
    assert "signals data loss" in f.evidence[0].text


def test_a_restore_within_the_timeout_is_the_normal_already_committed_path():
    findings = run_detectors(ingest([str(example(SLUG, "near-miss-restore-within-timeout-1.13"))])).findings
    assert findings == []


def test_a_second_job_with_the_same_prefix_fences_the_first(spark):
    f = run_detectors(ingest([str(example(SLUG, "shared-prefix-two-jobs-1.18"))], spark)).primary
    assert f.runbook == SLUG and f.root_cause.slug == "shared-transactional-id-prefix"
    assert f.details["other_job"]["job"] == JOB and f.details["sink"] == "KafkaSink"
    assert "orders-eos" in f.summary
    code = next(p for p in f.patches if p.target == "code")
    assert "setTransactionalIdPrefix" in code.snippet
    assert not [p for p in f.patches if p.target == "kafka"]  # a timeout would not stop the fencing


def test_healthy_exactly_once_job_gives_nothing():
    assert run_detectors(ingest([str(example(SLUG, "healthy"))])).findings == []


def test_a_timeout_shorter_than_the_checkpoint_interval_expires_every_transaction():
    lines = (_producer_dump("14:00:01,000", 60_000) + _job_running("14:00:00,000") + _checkpoint("14:05:00,000", 1)
             + _writer_failed("14:10:00,500", FENCED_3X))
    [f] = _detect(lines, {"execution.checkpointing.interval": "5 min"})
    assert f.root_cause.slug == "transaction-timeout-too-short"
    assert "shorter than the checkpoint interval" in f.summary
    patches = {p.key: p for p in f.patches}
    assert patches["transaction.timeout.ms"].proposed == "1380000"  # 3 intervals x 1.5, whole minutes
    assert "raise transaction.max.timeout.ms on the brokers" in patches  # above the brokers' default maximum
    assert patches["execution.checkpointing.interval"].proposed == "20 s"
    assert "execution.checkpointing.interval: 20 s" in render_config_diff(f.patches, None, "1.18.1")


def test_an_unknown_producer_id_mapping_is_the_broker_forgetting_the_transactional_id():
    cause = ("org.apache.kafka.common.KafkaException: org.apache.kafka.common.errors.InvalidPidMappingException: The "
             "producer attempted to use a producer id which is not currently assigned to its transactional id.")
    lines = _producer_dump("14:00:01,000", 900_000) + _job_running("14:00:00,000") + _writer_failed("14:10:00,500", cause)
    [f] = _detect(lines, {"execution.checkpointing.interval": "1 min"})
    assert f.root_cause.slug == "broker-expired-transaction"
    assert any(p.key == "raise transactional.id.expiration.ms on the brokers" for p in f.patches)


def test_checkpoints_further_apart_than_the_timeout_let_the_broker_abort():
    lines = (_producer_dump("14:00:01,000", 900_000) + _job_running("14:00:00,000") + _checkpoint("14:01:00,000", 1)
             + _checkpoint("14:22:00,000", 2) + _writer_failed("14:22:30,500", FENCED_3X))
    [f] = _detect(lines, {"execution.checkpointing.interval": "1 min"})
    assert f.root_cause.slug == "broker-expired-transaction"
    assert f.details["longest_gap_between_checkpoints"] == "21 min"
    assert next(p for p in f.patches if p.target == "kafka").proposed == str(32 * 60_000)


def test_fencing_without_anything_else_is_undetermined_and_says_what_to_collect():
    [f] = _detect(_writer_failed("14:10:00,500", FENCED_3X))
    assert f.root_cause.slug == "undetermined"
    assert "kafka-transactions.sh" in f.summary
    assert [p.target for p in f.patches] == ["ops"]


def test_kafkasink_committer_after_a_long_downtime():
    committer = ("Unable to commit transaction (CommitRequestImpl{committable=KafkaCommittable{producerId=7004, "
                 "epoch=3, transactionalId=orders-eos-0-41}, numRetries=0, state=RECEIVED}) because its producer is "
                 "already fenced. This means that you either have a different producer with the same "
                 "'transactional.id' (this is unlikely with the 'KafkaSink' as all generated ids are unique and "
                 "shouldn't be reused) or recovery took longer than 'transaction.timeout.ms' (900000ms). In both "
                 "cases this most likely signals data loss, please consult the Flink documentation for more details.")
    new_job = "e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2"
    lines = (_job_running("10:00:00,000") + _checkpoint("10:40:00,000", 40)
             + [_line("12:10:00,000", "INFO", CC, f"Restoring job {new_job} from Checkpoint 40 @ 1725357600000 for "
                                                  f"{JOB} located at s3://analytics/checkpoints/{JOB}/chk-40.")]
             + [_line("12:10:02,000", "ERROR", "org.apache.flink.connector.kafka.sink.KafkaCommitter", committer),
                FENCED_3X])
    [f] = _detect(lines, {"execution.checkpointing.interval": "1 min"})
    assert f.root_cause.slug == "transaction-timeout-too-short"
    assert f.details["downtime_before_restore"].startswith("90 min")
    assert f.details["transaction_timeout"].startswith("15 min")


@pytest.mark.parametrize("text", [
    "org.apache.kafka.common.errors.InvalidTxnTimeoutException: The transaction timeout is larger than the maximum "
    "value allowed by the broker (as configured by transaction.max.timeout.ms).",
])
def test_a_bare_pasted_refusal_is_enough(text):
    [f] = _detect([text])
    assert f.root_cause.slug == "timeout-above-broker-max"
