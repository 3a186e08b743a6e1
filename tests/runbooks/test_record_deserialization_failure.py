"""Detector record-deserialization-failure: the format, the source and the record named from genuine JSON and CSV
failures, the Debezium schema envelope, Confluent's missing magic byte, the skip option's warning and where the
evidence does not reach."""
from __future__ import annotations

from corpus import example, incident_from_text
from corpus import line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest
from flink_runbooks.diagnose import run_detectors

SLUG = "record-deserialization-failure"


def _primary(name, spark):
    return run_detectors(ingest([str(example(SLUG, name))], spark)).primary


def _detect(text: str, version: str = "1.20.3"):
    return get_detector(SLUG).detect(incident_from_text(text, {}, version, file="jobmanager.log"))


def test_genuine_cut_off_json_line_names_format_source_and_record(spark):
    primary = _primary("json-poison-1.20", spark)
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "malformed-record")
    assert primary.details["format"] == "json"
    assert primary.details["source"] == "order_feed"
    assert primary.details["record"] == '{"order_id": 101043, "customer": "c-07", "amount": 1'
    assert primary.details["attempts with the same failure"] == 3
    assert "Failed to deserialize JSON" in primary.evidence[0].text


def test_skip_option_is_spelled_for_the_format_and_warns_that_records_are_lost(spark):
    primary = _primary("json-poison-1.20", spark)
    skip = next(p for p in primary.patches if p.key == "skip unparsable records with the format's ignore-parse-errors")
    assert skip.snippet.startswith("'json.ignore-parse-errors' = 'true'")
    assert "lost WITHOUT A WORD" in skip.reason and "DEBUG" not in skip.reason
    dead = next(p for p in primary.patches if "dead letters" in p.key)
    assert "'format' = 'raw'" in dead.snippet and "order_feed_raw" in dead.snippet


def test_genuine_2_3_failure_says_skipped_json_records_are_logged_at_debug(spark):
    primary = _primary("json-poison-2.3", spark)
    assert primary.root_cause.slug == "malformed-record" and primary.details["format"] == "json"
    skip = next(p for p in primary.patches if "ignore-parse-errors" in p.key)
    assert "DEBUG" in skip.reason


def test_genuine_csv_file_reader_names_the_column_when_it_quotes_no_record(spark):
    primary = _primary("csv-poison-2.3", spark)
    assert primary.root_cause.slug == "malformed-record"
    assert (primary.details["format"], primary.details["column"]) == ("csv", "amount")
    assert primary.details["record"] == "not quoted in the message"
    assert any(p.snippet and p.snippet.startswith("'csv.ignore-parse-errors'") for p in primary.patches)
    dead = next(p for p in primary.patches if "dead letters" in p.key)
    assert "TRY_CAST(SPLIT_INDEX(payload" in dead.snippet and "JSON_VALUE" not in dead.snippet


def test_near_miss_job_that_skips_the_bad_line_is_no_finding(spark):
    inc = ingest([str(example(SLUG, "near-miss-ignore-parse-errors-1.20"))], spark)
    diagnosis = run_detectors(inc)
    assert not diagnosis.errors
    assert all(f.runbook != SLUG for f in diagnosis.findings)


def test_debezium_schema_envelope_gets_schema_include_not_skipping(spark):
    primary = _primary("debezium-schema-envelope-kafka-1.20", spark)
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "debezium-schema-envelope")
    assert primary.details["format"] == "debezium-json"
    assert primary.details["kafka record"] == {"topic": "shop.public.orders", "partition": "2", "offset": "4410982"}
    assert [p.snippet for p in primary.patches] == ["'debezium-json.schema-include' = 'true'"]


def test_unknown_magic_byte_explains_the_registry_framing_and_how_to_look(spark):
    primary = _primary("unknown-magic-byte-kafka-1.20", spark)
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "not-schema-registry-framed")
    check = next(p for p in primary.patches if p.key == "check the record's first bytes and its producer")
    assert "0x00" in check.reason and "xxd" in check.snippet
    assert not any("ignore-parse-errors" in p.key for p in primary.patches)  # Confluent's format has no such option
    # the wrapper quotes no record, so the attempts are the same failure, not provably the same record
    assert "same failure again" in primary.evidence[1].note


def _kafka_trace(*causes: str) -> str:
    return "\n".join([
        line("10:00:00,000", "Source: orders[1] (1/2) (ab_cd_0_0) switched from RUNNING to FAILED on tm-1:4040-aa "
             "@ tm-1 (dataPort=1).", logger="org.apache.flink.runtime.executiongraph.ExecutionGraph"),
        "java.io.IOException: Failed to deserialize consumer record due to",
        "\tat org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter.emitRecord(KafkaRecordEmitter.java:56) ~[?:?]",
        *causes])


def test_value_format_table_gets_the_prefixed_option_key():
    text = "\n".join([
        line("09:59:00,000", "CREATE TABLE orders (...) WITH ('connector' = 'kafka', 'value.format' = 'json')",
             logger="org.apache.flink.table.client.cli.CliClient"),
        _kafka_trace("Caused by: java.io.IOException: Failed to deserialize JSON 'not json'.")])
    [finding] = _detect(text)
    assert finding.details["skip option"] == "value.json.ignore-parse-errors"
    assert finding.details["source"] == "orders"


def test_datastream_json_schema_is_named_from_the_parser_exception():
    text = _kafka_trace("Caused by: com.fasterxml.jackson.core.JsonParseException: Unexpected character ('o' "
                        "(code 111)): expected a valid value")
    [finding] = _detect(text)
    assert (finding.root_cause.slug, finding.details["format"]) == ("malformed-record", "json")


def test_kafka_wrapper_without_its_causes_is_undetermined_and_says_what_to_collect():
    [finding] = _detect(_kafka_trace())
    assert finding.root_cause.slug == "undetermined"
    assert "Caused by" in finding.summary and "CREATE TABLE" in finding.summary
    assert not any("ignore-parse-errors" in p.key for p in finding.patches)


def test_a_job_of_user_code_throwing_a_parse_error_is_not_this_runbook():
    text = "\n".join([
        line("10:00:00,000", "Map (1/1) (ab_cd_0_0) switched from RUNNING to FAILED on tm-1:4040-aa @ tm-1 "
             "(dataPort=1).", logger="org.apache.flink.runtime.executiongraph.ExecutionGraph"),
        "java.lang.NumberFormatException: For input string: \"n/a\"",
        "\tat com.acme.orders.OrdersJob$ParseAmount.map(OrdersJob.java:108) ~[?:?]"])
    assert _detect(text) == []


def _debezium(record: str, *causes: str) -> str:
    return _kafka_trace(f"Caused by: java.io.IOException: Corrupt Debezium JSON message '{record}'.",
                        "\tat org.apache.flink.formats.json.debezium.DebeziumJsonDeserializationSchema.deserialize("
                        "DebeziumJsonDeserializationSchema.java:184) ~[flink-json-1.20.3.jar:1.20.3]", *causes)


def test_update_without_before_image_asks_for_replica_identity_full_on_the_captured_table():
    record = ('{"before":null,"after":{"id":7,"status":"SHIPPED"},"source":{"connector":"postgresql","db":"shop",'
              '"schema":"public","table":"orders"},"op":"u"}')
    [finding] = _detect(_debezium(record, 'Caused by: java.lang.IllegalStateException: The "before" field of UPDATE '
                                  'message is null, if you are using Debezium Postgres Connector, please check the '
                                  'Postgres table has been set REPLICA IDENTITY to FULL level.'))
    assert finding.root_cause.slug == "replica-identity-not-full"
    fix = next(p for p in finding.patches if p.key == "set the table's replica identity to FULL")
    assert fix.snippet.startswith("ALTER TABLE public.orders REPLICA IDENTITY FULL;")


def test_truncate_event_is_an_unsupported_change_type_not_a_malformed_record():
    record = '{"before":null,"after":null,"source":{"schema":"public","table":"orders"},"op":"t"}'
    [finding] = _detect(_debezium(record, 'Caused by: java.io.IOException: Unknown "op" value "t". The Debezium JSON '
                                  f"message is '{record}'"))
    assert finding.root_cause.slug == "unsupported-change-type"
    assert '"t"' in finding.summary and "truncate" in finding.summary
    keys = {p.key: p for p in finding.patches}
    assert keys["skip the change type at the capture"].snippet.startswith("skipped.operations=t")
    assert "WITHOUT A WORD" in keys["skip unparsable records with the format's ignore-parse-errors"].reason


def test_written_replica_identity_incident_names_the_table_and_the_offset(spark):
    primary = _primary("replica-identity-default-kafka-1.20", spark)
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "replica-identity-not-full")
    assert primary.details["kafka record"] == {"topic": "shop.public.orders", "partition": "0", "offset": "1183307"}
    assert primary.patches[0].snippet.startswith("ALTER TABLE public.orders REPLICA IDENTITY FULL;")


def test_kafka_table_without_its_ddl_in_the_logs_is_told_the_value_prefixed_spelling_too():
    [finding] = _detect(_kafka_trace("Caused by: java.io.IOException: Failed to deserialize JSON 'not json'."))
    skip = next(p for p in finding.patches if "ignore-parse-errors" in p.key)
    assert skip.snippet.startswith("'json.ignore-parse-errors'")
    assert "'value.json.ignore-parse-errors'" in skip.reason
