"""``RecordTooLargeException``: a Kafka sink's producer refused a record, or the broker refused a batch, as too large.

Two limits, on two sides, tell the causes apart by the exception's own wording:

- the producer's ``max.request.size`` (1 MiB by default): ``The message is 1349520 bytes when serialized which is
  larger than 1048576, which is the value of the max.request.size configuration.`` (Kafka clients 2.5 and later;
  before, ``… larger than the maximum request size you have configured with the max.request.size configuration.``).
  The client checks one record's serialized size before any compression, so it names that record's size;
- the producer's ``buffer.memory`` (32 MiB): ``… larger than the total memory buffer you have configured with the
  buffer.memory configuration.``;
- the broker's ``message.max.bytes`` (1048588 by default), overridden per topic by ``max.message.bytes``: the
  produce response ``MESSAGE_TOO_LARGE``, thrown as ``The request included a message larger than the max message
  size the server will accept.`` A batch of several records is split and sent again first (``Got error produce
  response … splitting and retrying … Error: MESSAGE_TOO_LARGE``); only a batch that cannot be split fails, so a
  failure after the splits means a single record is over the topic's limit.

The same exception class thrown by a consumer (``… whose size is larger than the fetch size …``, brokers before
0.10.1) is a source's fault, not this runbook's.

Raising only the producer's limit when the broker's is the one exceeded changes nothing, and raising the producer's
limit above the topic's moves the failure to the broker: every patch that raises one names the other.
"""
from __future__ import annotations

import math
import re

from flink_runbooks.detectors.base import Detector, signature
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.evidence.kafka_clients import client_configs
from flink_runbooks.evidence.restore import SQL_OPERATOR
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "kafka-record-too-large"
MIB = 1 << 20
# KafkaProducer#ensureValidRecordSize (Kafka clients 2.5 – 3.9 and 4.x)
CLIENT_LIMIT = re.compile(r"The message is (?P<size>\d+) bytes when serialized which is larger than (?P<limit>\d+), "
                          r"which is the value of the max\.request\.size configuration")
# the same check up to Kafka clients 2.4 (Flink's Kafka connector up to 1.14)
OLD_CLIENT_LIMIT = re.compile(r"The message is (?P<size>\d+) bytes when serialized which is larger than the maximum "
                              r"request size you have configured with the max\.request\.size configuration")
BUFFER_LIMIT = re.compile(r"The message is (?P<size>\d+) bytes when serialized which is larger than the total memory "
                          r"buffer you have configured with the buffer\.memory configuration")
# Errors.MESSAGE_TOO_LARGE (Kafka 0.10 – 4.x)
BROKER_LIMIT = re.compile(r"The request included a message larger than the max message size the server will accept")
# Sender#completeBatch (0.11 – 4.x): a batch of several records refused by the broker is split and sent again
SPLIT = re.compile(r"Got error produce response in correlation id \d+ on topic-partition (?P<tp>[\w.-]+-\d+), "
                   r"splitting and retrying \((?P<left>-?\d+) attempts left\)\. Error: MESSAGE_TOO_LARGE")
# KafkaWriter$WriterCallback (KafkaSink): RecordMetadata#toString, "<topic>-<partition>@<offset>"
SINK_PARTITION = re.compile(r"Failed to send data to Kafka (?P<tp>[\w.-]+?-(?:-1|\d+))@-?\d+ with")
SQL_SINK = re.compile(r"org\.apache\.flink\.kafka\.shaded\.org\.apache\.kafka|KafkaDynamicSink|'connector'\s*=\s*'kafka'")
LEGACY_SINK = re.compile(r"FlinkKafkaProducer|FlinkKafkaException")
# Fetcher / FetchCollector (0.10.1 – 4.x): a consumer reading from a broker before 0.10.1; a source's fault, not a sink's
FETCH_TOO_LARGE = re.compile(r"whose size is larger than the fetch size \d+ and hence cannot be returned")

BROKER_DEFAULT = 1048588  # message.max.bytes (Kafka 0.11 – 4.x): 1 MiB + 12 bytes of record batch overhead
CLIENT_DEFAULT = 1048576  # max.request.size
BUFFER_DEFAULT = 33554432  # buffer.memory

_TOPIC_LIMIT = "ops:raise the topic's max.message.bytes to match"
_SHRINK = "code:keep records below the limit"


class KafkaRecordTooLarge(Detector):
    slug = SLUG
    title = "Kafka record too large for the producer or the broker"
    category = "connectors"
    meaning = ("A Kafka sink's producer refused a record larger than its max.request.size (or buffer.memory), or the "
               "broker refused a batch larger than the topic's max.message.bytes: the sink fails and the job "
               "restarts on the same record.")
    versions = ("1.x – 2.x (KafkaSink, FlinkKafkaProducer, the SQL Kafka connector); the client's wording checked in "
                "Kafka 0.10.2 – 4.x, its max.request.size wording changed in 2.5")
    exception_classes = ("org.apache.kafka.common.errors.RecordTooLargeException",)
    config_keys = ("restart-strategy.type",)
    collect_next = ("the TaskManager log of the failing sink (the `ProducerConfig values:` dump with max.request.size, "
                    "batch.size and compression.type), and the topic's limit (`kafka-configs.sh --describe "
                    "--entity-type topics --entity-name <topic> --all | grep max.message.bytes`)")
    signatures = (
        r"bytes when serialized which is larger than",
        BROKER_LIMIT.pattern,
        r"splitting and retrying \(-?\d+ attempts left\)\. Error: MESSAGE_TOO_LARGE",
        r"Failed to send data to Kafka",
        r"RecordTooLargeException",
        r"ProducerConfig values:",
        r"^\s*(?:max\.request\.size|batch\.size|buffer\.memory|compression\.type|bootstrap\.servers|linger\.ms) = ",
    )
    wordings = (
        Wording(SLUG, signature(CLIENT_LIMIT), "1.15 – 2.x",
                "org.apache.kafka.clients.producer.KafkaProducer#ensureValidRecordSize (Kafka clients 2.5 – 3.9 and "
                "4.x; the connector's client since Flink 1.15)",
                "org.apache.kafka.common.errors.RecordTooLargeException: The message is 1349520 bytes when serialized "
                "which is larger than 1048576, which is the value of the max.request.size configuration."),
        Wording(SLUG, signature(OLD_CLIENT_LIMIT), "1.4 – 1.14",
                "org.apache.kafka.clients.producer.KafkaProducer#ensureValidRecordSize (Kafka clients 0.10 – 2.4)",
                "org.apache.kafka.common.errors.RecordTooLargeException: The message is 2211840 bytes when serialized "
                "which is larger than the maximum request size you have configured with the max.request.size "
                "configuration."),
        Wording(SLUG, BROKER_LIMIT.pattern, "1.4 – 2.x",
                "org.apache.kafka.common.protocol.Errors.MESSAGE_TOO_LARGE (Kafka 0.10 – 4.x), the broker's answer",
                "org.apache.kafka.common.errors.RecordTooLargeException: The request included a message larger than "
                "the max message size the server will accept."),
    )
    root_causes = (
        RootCause("record-exceeds-max-request-size",
                  "One record, serialized, is larger than the producer's max.request.size: the client refuses it "
                  "before sending, so the sink fails on it at every restart.",
                  "RecordTooLargeException 'The message is N bytes when serialized which is larger than X, which is "
                  "the value of the max.request.size configuration.'",
                  patches=("kafka:max.request.size", "kafka:properties.max.request.size", _TOPIC_LIMIT, _SHRINK)),
        RootCause("record-exceeds-buffer-memory",
                  "One record is larger than the producer's whole buffer.memory: it can never be buffered.",
                  "RecordTooLargeException '… larger than the total memory buffer you have configured with the "
                  "buffer.memory configuration.'",
                  patches=("kafka:buffer.memory", "kafka:properties.buffer.memory", _TOPIC_LIMIT, _SHRINK)),
        RootCause("broker-limit-exceeded",
                  "The broker refused the batch: it is larger than the topic's max.message.bytes (the broker's "
                  "message.max.bytes unless the topic overrides it). The producer's own limit let it through, so "
                  "raising that changes nothing.",
                  "RecordTooLargeException 'The request included a message larger than the max message size the "
                  "server will accept.' (MESSAGE_TOO_LARGE), often after 'splitting and retrying' warnings.",
                  patches=(_TOPIC_LIMIT, "kafka:compression.type", "kafka:properties.compression.type", _SHRINK)),
        RootCause("batches-split-by-broker",
                  "The broker refused batches larger than the topic's max.message.bytes and the producer split and "
                  "resent them: nothing failed yet, but every such batch costs a round trip and a retry.",
                  "'Got error produce response … splitting and retrying … Error: MESSAGE_TOO_LARGE' warnings without "
                  "a RecordTooLargeException.",
                  patches=("kafka:batch.size", "kafka:properties.batch.size", _TOPIC_LIMIT)),
        RootCause("undetermined",
                  "A RecordTooLargeException, but not which limit was exceeded.",
                  "RecordTooLargeException without its message.",
                  patches=(_TOPIC_LIMIT,),
                  next_evidence="the exception's complete message (the record's size and which limit, the "
                                "producer's or the broker's), the `ProducerConfig values:` dump of the sink, and the "
                                "topic's max.message.bytes (`kafka-configs.sh --describe --entity-type topics "
                                "--entity-name <topic> --all`)."),
    )

    templates = {
        "head": "The Kafka sink{where} failed: {what}. ",
        "where": " writing to {partition}",
        "what client": "a record of {size:,} bytes is larger than the producer's max.request.size of {limit}",
        "what old client": "a record of {size:,} bytes is larger than the producer's max.request.size{limit}",
        "what buffer": "a record of {size:,} bytes is larger than the producer's buffer.memory{limit}",
        "what broker": "the broker refused a batch as larger than the topic's max.message.bytes",
        "what split": "the broker refused batches as too large and the producer split them",
        "limit bytes": "{value:,} bytes",
        "limit of": " of {value:,} bytes",
        "record-exceeds-max-request-size": "The client checks each record's serialized size (before compression) "
                                           "against max.request.size and refuses it before sending; the job fails on "
                                           "the same record at every restart. The record is {over:,} bytes "
                                           "({percent}%) over. Raising max.request.size alone is not enough: the "
                                           "topic's max.message.bytes (broker default {broker:,} bytes) must accept "
                                           "{size:,} bytes too, or the broker refuses it next.",
        "record-exceeds-buffer-memory": "A record larger than the producer's whole buffer can never be sent; the "
                                        "topic's limit must accept it too before raising buffer.memory helps.",
        "broker-limit-exceeded": "The producer's own limit let the batch through (max.request.size {client}), so "
                                 "raising it changes nothing: the topic's max.message.bytes (or the broker's "
                                 "message.max.bytes) is the limit exceeded.{split}",
        "split": " The producer had already split the batch {count} time(s) ({partitions}): a single record is "
                 "over the topic's limit.",
        "batches-split-by-broker": "The producer's batches reach {batch} and the topic accepts less; "
                                   "{count} batch(es) on {partitions} were split and resent. Nothing failed yet, "
                                   "but a single record over the topic's limit will fail the sink.",
        "undetermined": "A RecordTooLargeException was thrown, but its message does not say which limit.",
        "excerpt": " This is an excerpt: the producer's settings and the topic are not in it.",
        "note failure": "the record too large: {what}",
        "note split": "the broker refused a batch; the producer split it",
        "note config": "the producer's settings",
        "raise client": "The producer refuses records over max.request.size: {value} ({mib} MiB) admits the "
                        "{size:,}-byte record with room to spare. Raise the topic's max.message.bytes to the same "
                        "value first (the action below), or the broker refuses what the client now sends.",
        "raise buffer": "buffer.memory must hold at least one record of {size:,} bytes (and the batches in flight).",
        "topic limit": "{why} Check the topic's limit and the brokers' message.max.bytes, and raise the topic's "
                       "max.message.bytes to at least {value} bytes; the broker's replica.fetch.max.bytes and the "
                       "consumers of the topic must accept that size too (consumers since Kafka 0.10.1 fetch a "
                       "batch larger than their fetch size, older ones stop).",
        "topic why client": "The producer's and the topic's limits must match: a record the producer now accepts "
                            "is refused by the broker if the topic's limit is lower.",
        "topic why broker": "The topic's limit is the one the batch exceeded.",
        "topic why split": "The topic's limit is lower than the producer's batches.",
        "topic why unknown": "Which side's limit was exceeded is not in the message.",
        "topic snippet": "kafka-configs.sh --bootstrap-server {servers} --describe --entity-type topics --entity-name "
                         "{topic} --all | grep max.message.bytes\n"
                         "kafka-configs.sh --bootstrap-server {servers} --describe --entity-type brokers --all | grep "
                         "-E 'message.max.bytes|replica.fetch.max.bytes'\n"
                         "kafka-configs.sh --bootstrap-server {servers} --alter --entity-type topics --entity-name "
                         "{topic} --add-config max.message.bytes={value}",
        "shrink": "Or keep records under the limit: a record of {size} is unusual for a stream; split it, drop "
                  "fields the consumers do not read, or store the payload elsewhere and send its reference.",
        "shrink snippet": "// before the sink: find the records that are too large (and where they come from)\n"
                          "stream.filter(r -> serializedSize(r) < {limit})  // or route the others to a side output",
        "compress": "The broker checks the batch as sent, compressed: {codec} compression shrinks most payloads "
                    "(text, JSON) several times, so the same records fit under the topic's limit. It does not "
                    "help the producer's own max.request.size check, which counts the uncompressed size.",
        "smaller batches": "Batches of batch.size {current} are larger than the topic accepts; keep batch.size "
                           "below the topic's max.message.bytes so the broker does not refuse and split them.",
        "unknown size": "this size",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failure = self._failure(incident)
        splits = [(ev, m) for ev, m in incident.find(SPLIT)]
        if failure is None and not splits:
            return []
        producer = next((c for c in client_configs(incident) if c.kind == "producer"), None)
        values = producer.values if producer else {}
        sql = self._sql(incident)
        evidence, notes, add = evidence_trail()
        partitions = sorted({m["tp"] for _, m in splits})
        sink_partitions = [m["tp"] for _, m in incident.find(SINK_PARTITION)]
        # "<topic>--1": the client refused the record before a partition was chosen
        partition = next((tp for tp in sink_partitions if not tp.endswith("--1")), None)
        partition = partition or (partitions[0] if partitions else None)
        named = partition or (sink_partitions[0] if sink_partitions else None)
        topic = named.removesuffix("--1").rsplit("-", 1)[0] if named and not named.endswith("--1") else (
            named.removesuffix("--1") if named else None)
        servers = values.get("bootstrap.servers", "").strip("[]").split(",")[0].strip() or "<bootstrap servers>"
        details: dict = {"sink": "Kafka SQL connector" if sql else "FlinkKafkaProducer (legacy)" if self._legacy(
            incident) else "KafkaSink"}
        if partition:
            details["partition"] = partition
        if topic:
            details["topic"] = topic
        for key in ("max.request.size", "batch.size", "compression.type", "buffer.memory"):
            if key in values:
                details[f"producer {key}"] = values[key]

        if failure is not None:
            event, kind, m = failure
            size = int(m["size"]) if kind in ("client", "old client", "buffer") else None
            limit = int(m["limit"]) if kind == "client" else None
            if kind == "old client" and values.get("max.request.size", "").isdigit():
                limit = int(values["max.request.size"])
            if kind == "buffer":
                limit = int(values["buffer.memory"]) if values.get("buffer.memory", "").isdigit() else None
            what = self._what(kind, size, limit)
            add(event, self.say("note failure", what=what))
        else:
            event, kind, m, size, limit = splits[-1][0], "split", None, None, None
            what = self.say("what split")
        for ev, _ in splits[:2]:
            add(ev, self.say("note split"))
        if producer is not None:
            add(producer.event, self.say("note config"))
        if size is not None:
            details["record size"] = size
        if limit is not None:
            details["limit"] = limit

        where = self.say("where", partition=partition or topic) if partition or topic else ""
        summary = self.say("head", where=where, what=what)
        confidence = 0.9
        if kind in ("client", "old client"):
            cause = "record-exceeds-max-request-size"
            over = size - (limit or CLIENT_DEFAULT)
            summary += self.say(cause, over=over, percent=round(100 * over / (limit or CLIENT_DEFAULT)),
                                broker=BROKER_DEFAULT, size=size)
        elif kind == "buffer":
            cause = "record-exceeds-buffer-memory"
            summary += self.say(cause)
        elif kind == "broker":
            cause = "broker-limit-exceeded"
            split = self.say("split", count=len(splits), partitions=", ".join(partitions)) if splits else ""
            summary += self.say(cause, client=values.get("max.request.size", f"{CLIENT_DEFAULT} by default"),
                                split=split)
            details["batches split before"] = len(splits)
        elif kind == "split":
            cause = "batches-split-by-broker"
            summary += self.say(cause, batch=f"batch.size {values['batch.size']}" if "batch.size" in values
                                else "sizes", count=len(splits), partitions=", ".join(partitions))
            confidence = 0.8
        else:
            cause, confidence = "undetermined", 0.4
            summary += self.say("undetermined")
        if is_excerpt(incident) and producer is None:
            summary += self.say("excerpt")
            confidence -= 0.1
        patches = self._patches(cause, sql, values, producer, size, servers, topic or "<topic>")
        return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details, severity="warning" if cause == "batches-split-by-broker" else "failure")]

    # ------------------------------------------------------------------------------------------------ readings

    @staticmethod
    def _failure(incident: Incident) -> tuple[Event, str, re.Match[str] | None] | None:
        """The first failure whose text holds a RecordTooLargeException wording, with which limit it names."""
        for kind, rx in (("client", CLIENT_LIMIT), ("old client", OLD_CLIENT_LIMIT), ("buffer", BUFFER_LIMIT),
                         ("broker", BROKER_LIMIT)):
            found = [(ev, m) for ev, m in incident.find(rx) if not SPLIT.search(ev.message)]
            if found:
                found.sort(key=lambda h: (not h[0].chain, h[0].ts or "", h[0].line))
                return found[0][0], kind, found[0][1]
        bare = [ev for ev, _ in incident.find(r"RecordTooLargeException") if not FETCH_TOO_LARGE.search(ev.text)]
        return (bare[0], "unknown", None) if bare else None

    def _what(self, kind: str, size: int | None, limit: int | None) -> str:
        if kind == "client":
            return self.say("what client", size=size, limit=self.say("limit bytes", value=limit))
        if kind == "old client":
            return self.say("what old client", size=size,
                            limit=self.say("limit of", value=limit) if limit else "")
        if kind == "buffer":
            return self.say("what buffer", size=size, limit=self.say("limit of", value=limit) if limit else "")
        if kind == "broker":
            return self.say("what broker")
        return "RecordTooLargeException"

    @staticmethod
    def _sql(incident: Incident) -> bool:
        return any(SQL_SINK.search(ev.text) or SQL_OPERATOR.search(ev.message) for ev in incident.events)

    @staticmethod
    def _legacy(incident: Incident) -> bool:
        return any(LEGACY_SINK.search(ev.text) for ev in incident.events)

    # ------------------------------------------------------------------------------------------------ patches

    def _patches(self, cause, sql, values, producer, size, servers, topic):
        source = producer.source if producer else None
        key = (lambda k: f"properties.{k}" if sql else k)  # noqa: E731 - the SQL connector's spelling

        def topic_limit(why: str, value: int | str) -> object:
            return self.ops_patch("raise the topic's max.message.bytes to match",
                                  self.say("topic limit", why=self.say(why), value=value),
                                  snippet=self.say("topic snippet", servers=servers, topic=topic, value=value))

        if cause == "record-exceeds-max-request-size":
            mib = max(2, math.ceil(size * 1.2 / MIB))
            value = str(mib * MIB)
            return [
                topic_limit("topic why client", value),
                self.kafka_patch(key("max.request.size"), value,
                                 self.say("raise client", value=value, mib=mib, size=size),
                                 values.get("max.request.size"), source if "max.request.size" in values else None),
                self.code_patch("keep records below the limit", self.say("shrink snippet", limit=size - 1),
                                self.say("shrink", size=f"{size:,} bytes")),
            ]
        if cause == "record-exceeds-buffer-memory":
            value = str(max(BUFFER_DEFAULT, math.ceil(size * 2 / MIB) * MIB))
            return [
                topic_limit("topic why client", size),
                self.kafka_patch(key("buffer.memory"), value, self.say("raise buffer", size=size),
                                 values.get("buffer.memory"), source if "buffer.memory" in values else None),
                self.code_patch("keep records below the limit", self.say("shrink snippet", limit=size - 1),
                                self.say("shrink", size=f"{size:,} bytes")),
            ]
        if cause == "broker-limit-exceeded":
            limit = values.get("max.request.size", str(CLIENT_DEFAULT))
            out = [topic_limit("topic why broker", f"<the largest record's size, at most {limit}>")]
            if values.get("compression.type", "none") == "none":
                out.append(self.kafka_patch(key("compression.type"), "lz4", self.say("compress", codec="lz4"),
                                            values.get("compression.type"),
                                            source if "compression.type" in values else None))
            out.append(self.code_patch("keep records below the limit",
                                       self.say("shrink snippet", limit="<the topic's max.message.bytes>"),
                                       self.say("shrink", size=self.say("unknown size"))))
            return out
        if cause == "batches-split-by-broker":
            current = values.get("batch.size")
            out = []
            if current and current.isdigit() and int(current) > BROKER_DEFAULT:
                out.append(self.kafka_patch(key("batch.size"), "16384", self.say("smaller batches", current=current),
                                            current, source))
            out.append(topic_limit("topic why split", current or "<batch.size>"))
            return out
        return [topic_limit("topic why unknown", "<the largest record's size>")]

