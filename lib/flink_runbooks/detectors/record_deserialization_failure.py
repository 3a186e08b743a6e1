"""A source met a record its format cannot deserialize (a poison record): ``Failed to deserialize JSON '...'``,
``Failed to deserialize CSV row '...'``, ``Failed to deserialize Avro record.``, ``Corrupt Debezium JSON message
'...'``, Confluent's ``Unknown magic byte!``, wrapped by the Kafka source's ``Failed to deserialize consumer record
due to``.

The format is named from Flink's own message (or, for the DataStream schemas that throw the parser's exception
bare, from the parser's package), the source from the failing task, the record from the message's quoted text or
the consumer record's topic, partition and offset. Causes:
- ``debezium-schema-envelope``: a Debezium JSON record that starts with ``{"schema":`` read with
  'debezium-json.schema-include' off: Kafka Connect's JSON converter wrote the schema envelope into every record.
- ``replica-identity-not-full``: Flink's 'The "before" field of UPDATE message is null ... REPLICA IDENTITY to
  FULL': a Postgres table captured without the old rows' images.
- ``unsupported-change-type``: 'Unknown "op" value "t"': a change type the CDC format does not know (a truncate).
- ``not-schema-registry-framed``: Confluent's deserializer found no magic byte (0x00) and schema id in front of
  the record: its producer wrote plain Avro, JSON or text, or the key is read with the value's format.
- ``malformed-record``: the record does not parse in the table's format (cut off, a value that does not fit its
  column); every restart reads it again.
- ``undetermined``: the source's wrapper without the format's message or parser exception under it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.episodes import episodes, is_excerpt
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.lifecycle import TASK_FAILED
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "record-deserialization-failure"

# Flink's formats, each message with the record it quotes (group "record"; the CSV reader of files quotes none).
FORMAT_MESSAGES = (
    ("json", re.compile(r"Failed to deserialize JSON '(?P<record>.*)'\.?")),
    ("csv", re.compile(r"Failed to deserialize CSV row(?: '(?P<record>.*)'\.?|\.)")),
    ("avro", re.compile(r"Failed to deserialize Avro record\.")),
    ("cdc", re.compile(r"Corrupt (?P<cdc>Debezium|Canal|Maxwell|Ogg) JSON message '(?P<record>.*)'\.?")),
    ("cdc", re.compile(r"Unknown \"(?:op|type|op_type)\" value \"(?P<op>[^\"]*)\"\. The (?P<cdc>Debezium|Canal|Maxwell|Ogg) "
                       r"JSON message is '(?P<record>.*)'")),
    ("avro-confluent", re.compile(r"Unknown magic byte!")),
)
# The converters' message for a value that does not fit its column (1.15+ in the CSV and JSON formats; checked in
# 1.20.3 and 2.3.0): under "Failed to deserialize JSON", and alone where the CSV file reader calls the converter.
FIELD_FAILURE = re.compile(r"Fail to deserialize at field: (?P<field>[^\s.]+)\.")
FORMAT_FRAME = re.compile(r"org\.apache\.flink\.formats\.(?P<fmt>csv|json|avro)\.")
KAFKA_WRAPPER = re.compile(r"Failed to deserialize consumer record(?: due to|(?P<record> ConsumerRecord\(.*))")
CONSUMER_RECORD = re.compile(r"topic = (?P<topic>[^,]+), partition = (?P<partition>\d+),(?: leaderEpoch = \S+,)? "
                             r"offset = (?P<offset>\d+)")
# The DataStream schemas (flink-json's JsonDeserializationSchema, flink-avro's AvroDeserializationSchema, a job's
# own) throw their parser's exception without a Flink message: the parser's package names the format.
PARSER_PACKAGES = (("json", re.compile(r"(?:^|\.)com\.fasterxml\.jackson\.(?:core|databind)\.")),
                   ("avro", re.compile(r"^org\.apache\.avro\.")))
# "Source: order_feed[1] (1/1)#0", "Source: Kafka Source -> Map (2/4)", "TableSourceScan(table=[[cat, db, orders]]"
SOURCE_TASK = re.compile(r"(?:Source: (?P<name>[^(\[]+?)(?:\[\d+\])?(?: ->.*?)? \(\d+/\d+\)|"
                         r"TableSourceScan\(table=\[\[(?:[^\]]*?, )?(?P<table>[^\],]+)\]\])")
# DebeziumJsonDeserializationSchema's REPLICA_IDENTITY_EXCEPTION (checked in 1.11.4, 1.20.3 and 2.3.0).
NO_BEFORE_IMAGE = re.compile(r"The \"before\" field of (?P<kind>UPDATE|DELETE) message is null, if you are using "
                             r"Debezium Postgres Connector")
CAPTURED_TABLE = re.compile(r"\"schema\":\"(?P<schema>[^\"]+)\",\"table\":\"(?P<table>[^\"]+)\"")
SCHEMA_ENVELOPE = re.compile(r"^\s*\{\s*\"schema\"\s*:")
# The formats that declare '<format>.ignore-parse-errors' (JsonFormatOptions / CsvFormatOptions, the CDC formats
# reuse the JSON one): json, csv, debezium-json and canal-json checked in 1.11.4, 1.20.3 and 2.3.0, maxwell-json and
# ogg-json in 1.20.3 and 2.3.0. The Avro formats have none.
SKIPPABLE = ("json", "csv", "debezium-json", "canal-json", "maxwell-json", "ogg-json")
PREVIEW_LIMIT = 160

_DEAD_LETTER = "code:read the payload with the raw format and parse it in SQL (dead letters)"
_SKIP = "code:skip unparsable records with the format's ignore-parse-errors"
_FIND = "ops:find the record at its offset or line"

RAW_TABLE = """\
-- Read the bytes as they are, parse them in SQL and keep what does not parse (a dead-letter table):
CREATE TABLE {table}_raw (payload STRING) WITH ({connection}'format' = 'raw');
"""
# Per format, the parse in SQL that yields NULL instead of failing on a malformed payload.
SQL_PARSE = {
    "json": """\
CREATE TEMPORARY VIEW {table}_parsed AS
SELECT payload, JSON_VALUE(payload, '$.order_id' RETURNING BIGINT) AS order_id,   -- your columns
       JSON_VALUE(payload, '$.amount' RETURNING DECIMAL(10, 2)) AS amount
FROM {table}_raw;   -- JSON_VALUE returns NULL for a payload or a value that does not parse
INSERT INTO {table}_dead_letters SELECT payload FROM {table}_parsed WHERE NOT (payload IS JSON) OR order_id IS NULL;
""",
    "csv": """\
CREATE TEMPORARY VIEW {table}_parsed AS
SELECT payload, TRY_CAST(SPLIT_INDEX(payload, ',', 0) AS BIGINT) AS order_id,   -- your columns
       TRY_CAST(SPLIT_INDEX(payload, ',', 2) AS DECIMAL(10, 2)) AS amount
FROM {table}_raw;   -- TRY_CAST (Flink >= 1.15) returns NULL for a value that does not fit
INSERT INTO {table}_dead_letters SELECT payload FROM {table}_parsed WHERE order_id IS NULL OR amount IS NULL;
""",
}
DATASTREAM_DEAD_LETTER = """\
// DataStream: a DeserializationSchema that never throws, and a side output for what it could not read
public void deserialize(byte[] bytes, Collector<Order> out) {
    try { out.collect(parse(bytes)); } catch (Exception e) { out.collect(Order.deadLetter(bytes, e)); }
}   // then route Order.isDeadLetter() to an OutputTag in a ProcessFunction and sink it"""

MAGIC_BYTE_SNIPPET = """\
# The first byte of a schema-registry record is 0x00, the next four the schema id (big-endian):
kcat -C -b <broker> -t {topic} -p {partition} -o {offset} -c 1 -f '%k\\n%s\\n' | xxd | head -3
#   00000000: 0000 0001 2a...    <- framed: magic byte 00, schema id 0x0000012a = 298
#   00000000: 7b22 6f72 6465...  <- '{{"orde...': plain JSON, not Avro with a schema id
# which producer wrote it, and with which serializer:
kafka-console-consumer --bootstrap-server <broker> --topic {topic} --partition {partition} --offset {offset} \\
  --max-messages 1 --property print.headers=true --property print.key=true"""


@dataclass
class Reading:
    """One deserialization failure: the record that carries it, the format and what it says about the record."""
    event: Event
    fmt: str  # json | csv | avro | debezium-json ... | avro-confluent | unknown
    message: str  # Flink's (or the parser's) line that names the failure
    record: str | None  # the record's text as the message quotes it
    kafka: dict[str, str]  # topic / partition / offset when the consumer record is printed
    wrapped_by_kafka: bool
    cause: str  # the deepest cause, "Class: message"
    field: str | None  # the column whose value did not fit
    op: str | None = None  # a change type the CDC format does not know ("t": a truncate)
    no_before_image: str | None = None  # UPDATE / DELETE: a Debezium change without its before image


class RecordDeserializationFailure(Detector):
    slug = SLUG
    title = "A source cannot deserialize a record"
    category = "connectors"
    meaning = ("A source read a record its format cannot turn into a row (a cut-off JSON line, a CSV value that "
               "does not fit its column, bytes that are not the schema's Avro): the task fails, and every restart "
               "reads the same record again.")
    versions = ("1.11 – 2.x (the JSON and CSV formats' messages checked in 1.11.4, 1.20.3 and 2.3.0; the Kafka "
                "source's since 1.12, checked in flink-connector-kafka 3.0 – 5.0)")
    exception_classes = ("org.apache.kafka.common.errors.SerializationException",)
    frames = (r"org\.apache\.flink\.formats\.[\w.$]+\.\w+\(", )
    config_keys = (
        "restart-strategy.type",
        "restart-strategy.fixed-delay.attempts",
    )
    collect_next = ("the whole trace of the task's failure with every 'Caused by' (it names the format and quotes the "
                    "record), the table's CREATE TABLE statement (its 'format' or 'value.format') and the record at "
                    "the offset or line it names")
    signatures = (
        r"Failed to deserialize (?:JSON '|CSV row|Avro record\.)",
        r"Corrupt (?:Debezium|Canal|Maxwell|Ogg) JSON message '",
        r"Unknown \"(?:op|type|op_type)\" value \"[^\"]*\"\. The \w+ JSON message is '",
        r"Unknown magic byte!",
        r"Failed to deserialize consumer record",
        r"Fail to deserialize at field: ",
        r"The \"before\" field of \w+ message is null",
        r"'value\.format'\s*=\s*'",
    )
    wordings = (
        Wording(SLUG, r"Failed to deserialize JSON '.*'", "1.11 – 2.x",
                "org.apache.flink.formats.json.JsonRowDataDeserializationSchema / JsonParserRowDataDeserializationSchema "
                "(checked in 1.11.4, 1.20.3 and 2.3.0)",
                "Caused by: java.io.IOException: Failed to deserialize JSON '{\"order_id\": 101043, \"customer\": "
                "\"c-07\", \"amount\": 1'."),
        Wording(SLUG, r"Failed to deserialize CSV row(?: '|\.)", "1.11 – 2.x",
                "org.apache.flink.formats.csv.CsvRowDataDeserializationSchema, RowCsvInputFormat (checked in 1.11.4, "
                "1.20.3 and 2.3.0)",
                "Caused by: java.io.IOException: Failed to deserialize CSV row '101043,c-07,n/a'."),
        Wording(SLUG, r"Failed to deserialize Avro record\.", "2.3 – 2.x",
                "org.apache.flink.formats.avro.AvroRowDeserializationSchema (checked in the copy flink-python 2.3.0 "
                "ships; flink-avro's jars are not at hand)",
                "Caused by: java.io.IOException: Failed to deserialize Avro record."),
        Wording(SLUG, r"Corrupt (?:Debezium|Canal|Maxwell|Ogg) JSON message '", "1.11 – 2.x",
                "org.apache.flink.formats.json.debezium.DebeziumJsonDeserializationSchema and the Canal, Maxwell and "
                "Ogg ones (checked in 1.20.3 and 2.3.0)",
                "Caused by: java.io.IOException: Corrupt Debezium JSON message '{\"schema\":{\"type\":\"struct\"}}'."),
        Wording(SLUG, r"Fail to deserialize at field: \S+\.", "1.15 – 2.x",
                "org.apache.flink.formats.csv.CsvToRowDataConverters, org.apache.flink.formats.json."
                "JsonToRowDataConverters (checked in 1.20.3 and 2.3.0; absent from 1.11.4)",
                "Caused by: java.lang.RuntimeException: Fail to deserialize at field: amount."),
        Wording(SLUG, r"The \"before\" field of \w+ message is null, if you are using Debezium Postgres Connector",
                "1.11 – 2.x", "org.apache.flink.formats.json.debezium.DebeziumJsonDeserializationSchema."
                "REPLICA_IDENTITY_EXCEPTION (checked in 1.11.4, 1.20.3 and 2.3.0)",
                "Caused by: java.lang.IllegalStateException: The \"before\" field of UPDATE message is null, if you "
                "are using Debezium Postgres Connector, please check the Postgres table has been set REPLICA "
                "IDENTITY to FULL level."),
        Wording(SLUG, r"Unknown magic byte!", "1.12 – 2.x",
                "io.confluent.kafka.serializers.AbstractKafkaSchemaSerDe.getByteBuffer (SchemaId.fromBytes since 8.0; "
                "checked in Confluent's serializers 5.0.0 – 8.1.0) under the Kafka source",
                "Caused by: org.apache.kafka.common.errors.SerializationException: Unknown magic byte!"),
        Wording(SLUG, r"Failed to deserialize consumer record due to", "1.12 – 2.x",
                "org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter (KafkaPartitionSplitReader before "
                "1.15; checked in flink-connector-kafka 3.0.0 – 5.0.0)",
                "Caused by: java.io.IOException: Failed to deserialize consumer record due to"),
    )
    root_causes = (
        RootCause("debezium-schema-envelope",
                  "Kafka Connect's JSON converter wrote each Debezium change with its schema envelope "
                  "({\"schema\": ..., \"payload\": ...}), and the table reads it with 'debezium-json.schema-include' "
                  "off, so Flink finds no 'op', 'before' or 'after' at the top.",
                  "'Corrupt Debezium JSON message' quoting a record that starts with {\"schema\":.",
                  patches=("code:debezium-json.schema-include",),
                  would_change="A record without the envelope failing the same way (then a record Debezium did not "
                               "write: malformed-record)."),
        RootCause("replica-identity-not-full",
                  "A Postgres table captured by Debezium without REPLICA IDENTITY FULL: its UPDATE and DELETE "
                  "changes carry no before image, which the debezium-json format needs to retract the old row.",
                  "Flink's 'The \"before\" field of UPDATE (or DELETE) message is null ... REPLICA IDENTITY to FULL' "
                  "under 'Corrupt Debezium JSON message'.",
                  patches=("ops:set the table's replica identity to FULL", _SKIP),
                  would_change="A change with its before image failing the same way (then the record itself: "
                               "malformed-record)."),
        RootCause("unsupported-change-type",
                  "The change stream carries an event type the CDC format does not turn into rows (Debezium's "
                  "truncate 't' or message 'm'): every such event fails the source.",
                  "'Unknown \"op\" value \"t\". The Debezium JSON message is ...' (or Canal's, Maxwell's, Ogg's "
                  "'type' / 'op_type').",
                  patches=("ops:skip the change type at the capture", _SKIP)),
        RootCause("not-schema-registry-framed",
                  "The record was read with Confluent's schema-registry deserializer (avro-confluent) but does not "
                  "start with the magic byte 0x00 and a schema id: a producer wrote plain Avro, JSON or text into the "
                  "topic, or the key is read with the value's format.",
                  "Confluent's 'Unknown magic byte!' under the source's failure.",
                  patches=("ops:check the record's first bytes and its producer", _DEAD_LETTER),
                  would_change="The record starting with 0x00 and a schema id the registry knows (a schema that "
                               "changed incompatibly instead: 'Error deserializing Avro message for id ...')."),
        RootCause("malformed-record",
                  "One record does not parse in the table's format (cut off, a value that does not fit its column): "
                  "the source fails on it, and every restart reads it again from the same offset or line.",
                  "The format's own 'Failed to deserialize ...' (or the parser's exception under the Kafka source) "
                  "with the record or where it is.",
                  patches=(_DEAD_LETTER, _SKIP, _FIND),
                  would_change="Every record failing from the first one on (the whole source is in another format: "
                               "a wrong 'format', not one poison record)."),
        RootCause("undetermined",
                  "A source could not deserialize a record, but the logs do not show the format's message or the "
                  "parser's exception under it.",
                  "The Kafka source's 'Failed to deserialize consumer record due to' without its causes.",
                  patches=(_FIND,),
                  next_evidence="the whole trace of the task's failure with every 'Caused by' (the format's message "
                                "quotes the record), the table's CREATE TABLE statement and the record at the offset."),
    )

    templates = {
        "head": "{source} could not deserialize a record{fmt}{attempts}: {cause}.",
        "source task": "The source {source}",
        "a source": "A source",
        "format": " in the {fmt} format",
        "attempts": " in {count} attempts",
        "the record": "The record: {record}",
        "the field": "The value of its column {field} does not fit the column's type.",
        "kafka position": "It is the record at offset {offset} of {topic}-{partition}.",
        "debezium-schema-envelope": "It starts with {{\"schema\": Kafka Connect's JsonConverter wrote the schema "
                                    "envelope (value.converter.schemas.enable=true) and the table reads it with "
                                    "'{key}' off.",
        "replica-identity-not-full": "An {kind} change of {table} arrived without its before image: Postgres "
                                     "logs only the key of old rows unless the table's REPLICA IDENTITY is FULL, "
                                     "and the debezium-json format needs the whole old row.",
        "unsupported-change-type": "The change type \"{op}\" is one the {fmt} format does not turn into rows "
                                   "(\"t\" is a truncate, \"m\" a logical-decoding message): every such event "
                                   "fails the source, whatever its content.",
        "replica identity": "Makes Postgres log the whole old row of every UPDATE and DELETE of {table}. Changes "
                            "already in the topic stay without it: skip them or move the source past them once.",
        "skip change type": "Debezium skips the change types in 'skipped.operations' before they reach the topic "
                            "('t', truncates, is the default since Debezium 2.0; 'none' sends them).",
        "not-schema-registry-framed": "Confluent's deserializer found no magic byte: a schema-registry record starts "
                                      "with the byte 0x00 and a 4-byte schema id. A producer wrote this record "
                                      "without the registry's serializer (plain Avro, JSON or a string), or the "
                                      "topic's key is read with the value's format.",
        "malformed-record": "The record does not parse as {fmt}: the job fails on it, and every restart reads it "
                            "again from the same {position}.",
        "undetermined": "The Kafka source reports a record it could not deserialize, but the format's message and "
                        "the parser's exception under it are not in these logs.",
        "position offset": "offset",
        "position line": "line of the file",
        "job failed": "The job FAILED when its restarts ran out.",
        "excerpt": "From an excerpt: whether every restart failed on the same record is unknown.",
        "note failure": "{fmt}: {message}",
        "note again": "attempt {number}: the same record again",
        "note same failure": "attempt {number}: the same failure again",
        "schema include": "Reads Debezium's JSON with the schema envelope Kafka Connect's JsonConverter wrote "
                          "(value.converter.schemas.enable=true); or turn the envelope off in the connector.",
        "check magic byte": "A record read with avro-confluent must start with 0x00 and the schema id; look at this "
                            "record's first bytes and find its producer (its client id, headers, the key it writes "
                            "with). Then make it use the registry's serializer, or read the topic with the format it "
                            "writes ('avro' for plain Avro, 'json', 'raw'); a key read with the value's format "
                            "fails the same way ('key.format').",
        "dead letters": "Read the payload as bytes ('raw' format) and parse it in SQL, or write a "
                        "DeserializationSchema that never throws and sends what it cannot read to a side output: "
                        "records that do not parse are kept for a fix and a replay, and the job keeps running.",
        "skip": "'{key}' = 'true' makes the {fmt} format drop records it cannot parse (and set fields that do not "
                "parse to null) instead of failing: the job runs on, but every such record is lost WITHOUT A "
                "WORD in the logs{debug}. Use it only where losing records is acceptable, and count them (the "
                "source's numRecordsIn against an upstream count).{prefix}",
        "skip value prefix": " A Kafka table that sets 'value.format' spells it 'value.{key}'.",
        "skip debug": " (Flink 2.3 logs each one at DEBUG, 'Failed to deserialize JSON')",
        "skip none": "",
        "find record": "The failing record is the one the message quotes{where}; fix or remove it at the source, "
                       "or move the job past it (a savepoint after the offset, a file rewritten), only once the "
                       "job copes with such records: a restart reads it again.",
        "where offset": " (offset {offset} of {topic}-{partition})",
        "where none": "",
        "find undetermined": "The trace's 'Caused by' lines name the format and quote the record; the Kafka source's "
                             "consumer record (topic, partition, offset) says where it is.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        readings = self._readings(incident)
        if not readings:
            return []
        first = readings[0]
        same = [r for r in readings[1:] if _same_record(first, r)]
        attempts = 1 + len(same)
        source = _source_name(first.event)
        excerpt = is_excerpt(incident)
        if first.fmt == "debezium-json" and first.record and SCHEMA_ENVELOPE.search(first.record):
            cause = "debezium-schema-envelope"
        elif first.fmt == "debezium-json" and first.no_before_image:
            cause = "replica-identity-not-full"
        elif first.op is not None:
            cause = "unsupported-change-type"
        elif first.fmt == "avro-confluent":
            cause = "not-schema-registry-framed"
        elif first.fmt != "unknown":
            cause = "malformed-record"
        else:
            cause = "undetermined"
        failed = any(ep.outcome == "failed" for ep in episodes(incident))
        parts = [self.say("head", source=self.say("source task", source=source) if source else self.say("a source"),
                          fmt=self.say("format", fmt=first.fmt) if first.fmt != "unknown" else "",
                          attempts=self.say("attempts", count=attempts) if attempts > 1 else "",
                          cause=first.cause[:240].rstrip("."))]
        if first.record is not None:
            parts.append(self.say("the record", record=_preview(first.record)))
        if first.field:
            parts.append(self.say("the field", field=first.field))
        if first.kafka:
            parts.append(self.say("kafka position", **first.kafka))
        key = _option_key(incident, first.fmt, "schema-include")
        if cause == "debezium-schema-envelope":
            parts.append(self.say(cause, key=key))
        elif cause == "replica-identity-not-full":
            parts.append(self.say(cause, kind=first.no_before_image, table=_captured_table(first.record)))
        elif cause == "unsupported-change-type":
            parts.append(self.say(cause, op=first.op, fmt=first.fmt))
        elif cause == "malformed-record":
            parts.append(self.say(cause, fmt=first.fmt,
                                  position=self.say("position offset" if first.wrapped_by_kafka else "position line")))
        else:
            parts.append(self.say(cause))
        if failed:
            parts.append(self.say("job failed"))
        if excerpt:
            parts.append(self.say("excerpt"))
        details = {
            "format": first.fmt,
            "source": source or "unknown",
            "record": _preview(first.record) if first.record is not None else "not quoted in the message",
            "column": first.field or "not named",
            "failure": first.message[:300],
            "deepest cause": first.cause[:300],
            "attempts with the same failure": attempts,
        }
        if first.kafka:
            details["kafka record"] = first.kafka
        if first.fmt in SKIPPABLE:
            details["skip option"] = _option_key(incident, first.fmt, "ignore-parse-errors")
        evidence = [first.event] + [r.event for r in same[:3]]
        notes = {0: self.say("note failure", fmt=first.fmt, message=first.message[:200])}
        for i in range(1, len(evidence)):
            located = first.record is not None or bool(first.kafka)
            notes[i] = self.say("note again" if located else "note same failure", number=i + 1)
        confidence = {"undetermined": 0.4}.get(cause, 0.9 if attempts > 1 or first.record else 0.8)
        if excerpt:
            confidence = min(confidence, 0.6 if cause != "undetermined" else 0.4)
        return [self.finding(cause, " ".join(parts), evidence, confidence=confidence, details=details, notes=notes,
                             patches=self._patches(incident, cause, first, source))]

    def _readings(self, incident: Incident) -> list[Reading]:
        out = []
        for ev in incident.events:
            reading = _reading(ev)
            if reading is not None:
                out.append(reading)
        # A failure is logged by the TaskManager and again by the JobManager (and the client): keep the failing
        # task's records, one per attempt, where the JobManager's lines are there.
        jm = [r for r in out if r.event.role == "jobmanager" and TASK_FAILED.search(r.event.message)]
        return jm or [r for r in out if TASK_FAILED.search(r.event.message)] or out

    def _patches(self, incident: Incident, cause: str, first: Reading, source: str | None):
        table = _table_name(source)
        out = []
        if cause == "debezium-schema-envelope":
            key = _option_key(incident, first.fmt, "schema-include")
            out.append(self.code_patch("debezium-json.schema-include", f"'{key}' = 'true'", self.say("schema include")))
        if cause == "replica-identity-not-full":
            m = CAPTURED_TABLE.search(first.record or "")
            name = f"{m['schema']}.{m['table']}" if m else "<schema>.<table>"
            out.append(self.ops_patch("set the table's replica identity to FULL",
                                      self.say("replica identity", table=name),
                                      snippet=f"ALTER TABLE {name} REPLICA IDENTITY FULL;   -- in Postgres"))
        if cause == "unsupported-change-type" and first.fmt == "debezium-json":
            out.append(self.ops_patch("skip the change type at the capture", self.say("skip change type"),
                                      snippet=f"skipped.operations={first.op}   # the Debezium connector's "
                                              "configuration ('t' by default since Debezium 2.0)"))
        if cause == "not-schema-registry-framed":
            k = first.kafka or {"topic": "<topic>", "partition": "<partition>", "offset": "<offset>"}
            out.append(self.ops_patch("check the record's first bytes and its producer", self.say("check magic byte"),
                                      snippet=MAGIC_BYTE_SNIPPET.format(**k)))
        if cause in ("not-schema-registry-framed", "malformed-record"):
            connection = "'connector' = 'kafka', 'topic' = '…', …, " if first.wrapped_by_kafka else \
                "'connector' = 'filesystem', 'path' = '…', "
            sql = RAW_TABLE + SQL_PARSE.get(first.fmt, "") if first.fmt in SQL_PARSE else ""
            snippet = sql.format(table=table, connection=connection) + DATASTREAM_DEAD_LETTER
            out.append(self.code_patch("read the payload with the raw format and parse it in SQL (dead letters)",
                                       snippet, self.say("dead letters")))
        if cause in ("malformed-record", "replica-identity-not-full", "unsupported-change-type") \
                and first.fmt in SKIPPABLE:
            key = _option_key(incident, first.fmt, "ignore-parse-errors")
            debug = self.say("skip debug") if first.fmt == "json" and (incident.version_tuple or (0,)) >= (2, 3) \
                else self.say("skip none")
            prefix = self.say("skip value prefix", key=key) \
                if first.wrapped_by_kafka and not key.startswith("value.") else ""
            out.append(self.code_patch("skip unparsable records with the format's ignore-parse-errors",
                                       f"'{key}' = 'true'   -- drops every record that does not parse, silently",
                                       self.say("skip", key=key, fmt=first.fmt, debug=debug, prefix=prefix)))
        if cause in ("malformed-record", "undetermined"):
            where = self.say("where offset", **first.kafka) if first.kafka else self.say("where none")
            reason = self.say("find undetermined") if cause == "undetermined" else self.say("find record", where=where)
            out.append(self.ops_patch("find the record at its offset or line", reason))
        return out


def _reading(ev: Event) -> Reading | None:
    causes = [c for c in ev.chain if c.kind != "suppressed"]
    texts = [f"{c.cls}: {c.message}" for c in causes] or [ev.message]
    deepest = f"{causes[-1].cls}: {causes[-1].message}" if causes else ev.message
    kafka: dict[str, str] = {}
    wrapped = False
    fmt, message, record, field, op, no_before = None, None, None, None, None, None
    for text in texts:
        m = NO_BEFORE_IMAGE.search(text)
        if m:
            no_before = m["kind"]
            continue
        m = KAFKA_WRAPPER.search(text)
        if m:
            wrapped = True
            pos = CONSUMER_RECORD.search(m["record"] or "")
            if pos:
                kafka = {"topic": pos["topic"], "partition": pos["partition"], "offset": pos["offset"]}
            continue
        m = FIELD_FAILURE.search(text)
        if m:
            field = field or m["field"]
            continue
        for name, rx in FORMAT_MESSAGES:
            m = rx.search(text)
            if not m:
                continue
            if name == "cdc":
                name = m["cdc"].lower() + "-json"
                op = op or m.groupdict().get("op")
            # the most specific message wins: a CDC format's under the JSON one, the registry's under Avro's
            if fmt is None or fmt in ("json", "avro"):
                fmt, message = name, text
                record = m.groupdict().get("record") if name != "avro-confluent" else None
            break
    if fmt is None and (wrapped or field):
        # no format message: the converter's, or a DataStream schema's parser exception, names the format
        frame = next((m["fmt"] for f in ev.frames if (m := FORMAT_FRAME.search(f))), None)
        parser = next((name for c in reversed(causes) for name, rx in PARSER_PACKAGES if rx.search(c.cls)), None)
        fmt = frame or parser
        message = next((t for t in texts if FIELD_FAILURE.search(t)), None) if field else None
        if message is None and parser:
            message = next(t for t in reversed(texts) if any(rx.search(t) for _, rx in PARSER_PACKAGES))
    if fmt is None and not wrapped:
        return None
    message = message or next((t for t in texts if KAFKA_WRAPPER.search(t)), deepest)
    return Reading(ev, fmt or "unknown", message, record, kafka, wrapped, deepest, field, op, no_before)


def _same_record(a: Reading, b: Reading) -> bool:
    return ((a.fmt, a.record, a.field, a.cause, a.kafka.get("offset"))
            == (b.fmt, b.record, b.field, b.cause, b.kafka.get("offset")))


def _source_name(ev: Event) -> str | None:
    m = SOURCE_TASK.search(ev.message)
    if not m:
        return None
    return (m["name"] or m["table"]).strip()


def _table_name(source: str | None) -> str:
    name = re.sub(r"\W+", "_", source or "source").strip("_").lower()
    return name or "source"


def _option_key(incident: Incident, fmt: str, option: str) -> str:
    """The table option as the incident spells it: prefixed with 'value.' where the table declares 'value.format'."""
    value_format = any(True for _ in incident.find(r"'value\.format'\s*=\s*'" + re.escape(fmt) + "'"))
    return f"{'value.' if value_format else ''}{fmt}.{option}"


def _captured_table(record: str | None) -> str:
    m = CAPTURED_TABLE.search(record or "")
    return f"{m['schema']}.{m['table']}" if m else "the captured table"


def _preview(record: str) -> str:
    return record if len(record) <= PREVIEW_LIMIT else record[:PREVIEW_LIMIT] + f"… ({len(record)} characters)"
