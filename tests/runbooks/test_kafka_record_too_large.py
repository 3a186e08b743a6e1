"""Detector kafka-record-too-large: the producer's max.request.size (the record's size named, the topic's limit raised
with it), the broker's limit (never the producer's alone), buffer.memory, batches split by the broker, the older
client wording; a consumer's fetch-size error is not this runbook's."""
from __future__ import annotations

from corpus import example, incident_from_text, line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors
from flink_runbooks.render.patches import render_kafka_properties

SLUG = "kafka-record-too-large"
EXC = "org.apache.kafka.common.errors.RecordTooLargeException"


def _detect(text: str, version: str | None = "1.18.1"):
    return get_detector(SLUG).detect(incident_from_text(text, {}, version, file="taskmanager.log"))


def _diagnose(name: str, spark):
    return run_detectors(ingest([str(example(SLUG, name))], spark))


def test_sql_sink_over_max_request_size_gets_both_limits_raised_together(spark):
    primary = _diagnose("client-limit-sql-kafkasink-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "record-exceeds-max-request-size")
    assert primary.details["record size"] == 1349520 and primary.details["limit"] == 1048576
    assert primary.details["sink"] == "Kafka SQL connector" and primary.details["topic"] == "orders_enriched"
    assert "1,349,520 bytes" in primary.summary and "300,944 bytes (29%) over" in primary.summary
    client = next(p for p in primary.patches if p.target == "kafka")
    assert (client.key, client.proposed, client.current) == ("properties.max.request.size", "2097152", "1048576")
    assert "ProducerConfig values" in client.current_source
    assert "'properties.max.request.size' = '2097152'" in render_kafka_properties(primary.patches)["sql"]
    topic = next(p for p in primary.patches if p.key == "raise the topic's max.message.bytes to match")
    assert "--entity-name orders_enriched --add-config max.message.bytes=2097152" in topic.snippet
    assert "kafka-1.analytics.internal:9092" in topic.snippet


def test_broker_limit_never_raises_the_producer_limit(spark):
    primary = _diagnose("broker-limit-flinkkafkaproducer-1.17", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "broker-limit-exceeded")
    assert primary.details["sink"] == "FlinkKafkaProducer (legacy)"
    assert primary.details["batches split before"] == 6 and primary.details["partition"] == "invoice-documents-2"
    assert "a single record is over the topic's limit" in primary.summary
    assert not any(p.key.endswith("max.request.size") for p in primary.patches)
    compression = next(p for p in primary.patches if p.target == "kafka")
    assert (compression.key, compression.proposed) == ("compression.type", "lz4")
    assert any(p.key == "raise the topic's max.message.bytes to match" for p in primary.patches)


def test_the_older_client_wording_names_the_size_without_the_limit(spark):
    primary = _diagnose("ticket-old-client-wording-1.14", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "record-exceeds-max-request-size")
    assert primary.details["record size"] == 2211840 and "limit" not in primary.details
    assert primary.confidence < 0.9  # an excerpt
    client = next(p for p in primary.patches if p.target == "kafka")
    assert client.key == "max.request.size" and client.proposed == str(3 * 1024 * 1024)


def test_a_consumer_fetch_size_error_is_not_this_runbook(spark):
    d = _diagnose("near-miss-consumer-fetch-size-1.13", spark)
    assert not any(f.runbook == SLUG for f in d.findings)
    assert d.primary.runbook == "unrecognised-failure"


def test_batches_split_without_a_failure_is_a_warning_about_batch_size():
    text = "\n".join([
        line("10:00:00,000", "ProducerConfig values: ", logger="org.apache.kafka.clients.producer.ProducerConfig"),
        "\tbatch.size = 4194304", "\tmax.request.size = 8388608", "\tcompression.type = none",
        line("10:00:05,000", "[Producer clientId=producer-1] Got error produce response in correlation id 77 on "
             "topic-partition clicks-4, splitting and retrying (2147483647 attempts left). Error: MESSAGE_TOO_LARGE",
             level="WARN", logger="org.apache.kafka.clients.producer.internals.Sender")])
    [f] = _detect(text)
    assert f.root_cause.slug == "batches-split-by-broker" and f.severity == "warning"
    batch = next(p for p in f.patches if p.target == "kafka")
    assert (batch.key, batch.proposed, batch.current) == ("batch.size", "16384", "4194304")


def test_a_record_larger_than_buffer_memory():
    text = (f"{EXC}: The message is 41943040 bytes when serialized which is larger than the total memory buffer you "
            "have configured with the buffer.memory configuration.")
    [f] = _detect(text)
    assert f.root_cause.slug == "record-exceeds-buffer-memory"
    buffer = next(p for p in f.patches if p.target == "kafka")
    assert buffer.key == "buffer.memory" and int(buffer.proposed) >= 2 * 41943040


def test_the_exception_without_its_message_asks_for_it():
    [f] = _detect(f"Caused by: {EXC}")
    assert f.root_cause.slug == "undetermined" and f.confidence < 0.5
    assert "max.message.bytes" in f.summary
    assert [p.key for p in f.patches] == ["raise the topic's max.message.bytes to match"]


def test_every_wording_names_this_runbook_alone():
    for wording in get_detector(SLUG).wordings:
        [f] = _detect(wording.example)
        assert f.root_cause.slug != "undetermined", wording.example
