"""Write the Kafka examples of record-deserialization-failure (no broker can run here): the JobManager log of a
Flink 1.20.3 cluster in the layout of genuine 1.20.3 logs, with the texts and frames of flink-connector-kafka
3.3.0-1.20 (KafkaRecordEmitter, KafkaDeserializationSchemaWrapper, DynamicKafkaDeserializationSchema,
KafkaValueOnlyDeserializerWrapper at v3.3.0), of flink-json 1.20.3 (DebeziumJsonDeserializationSchema line numbers
from the jar, REPLICA_IDENTITY_EXCEPTION checked in 1.11.4, 1.20.3 and 2.3.0), of the Kafka client 3.4.0 (ConsumerRecord.toString) and of Confluent's serializers 7.5.0
(AbstractKafkaSchemaSerDe.getByteBuffer "Unknown magic byte!").

    python3 scripts/record/record-deserialization-failure/write_examples.py data/record-deserialization-failure
"""
import sys
from pathlib import Path

BANNER = ("{t} INFO  org.apache.flink.runtime.entrypoint.ClusterEntrypoint        [] -  Starting "
          "StandaloneSessionClusterEntrypoint (Version: 1.20.3, Scala: 2.12, Rev:01e3a6d, Date:2025-09-20T02:22:05+02:00)")
GRAPH = "org.apache.flink.runtime.executiongraph.ExecutionGraph      "
DIST = "~[flink-dist-1.20.3.jar:1.20.3]"
KAFKA_JAR = "~[flink-sql-connector-kafka-3.3.0-1.20.jar:3.3.0-1.20]"
TASK_THREAD = [
    "\tat org.apache.flink.connector.base.source.reader.SourceReaderBase.pollNext(SourceReaderBase.java:203) ~[flink-connector-files-1.20.3.jar:1.20.3]",
    f"\tat org.apache.flink.streaming.api.operators.SourceOperator.emitNext(SourceOperator.java:443) {DIST}",
    f"\tat org.apache.flink.streaming.runtime.io.StreamTaskSourceInput.emitNext(StreamTaskSourceInput.java:68) {DIST}",
    f"\tat org.apache.flink.streaming.runtime.io.StreamOneInputProcessor.processInput(StreamOneInputProcessor.java:65) {DIST}",
    f"\tat org.apache.flink.streaming.runtime.tasks.StreamTask.processInput(StreamTask.java:638) {DIST}",
    f"\tat org.apache.flink.streaming.runtime.tasks.mailbox.MailboxProcessor.runMailboxLoop(MailboxProcessor.java:231) {DIST}",
    f"\tat org.apache.flink.streaming.runtime.tasks.StreamTask.runMailboxLoop(StreamTask.java:973) {DIST}",
    f"\tat org.apache.flink.streaming.runtime.tasks.StreamTask.invoke(StreamTask.java:917) {DIST}",
    f"\tat org.apache.flink.runtime.taskmanager.Task.runWithSystemExitMonitoring(Task.java:970) {DIST}",
    f"\tat org.apache.flink.runtime.taskmanager.Task.restoreAndInvoke(Task.java:949) {DIST}",
    f"\tat org.apache.flink.runtime.taskmanager.Task.doRun(Task.java:763) {DIST}",
    f"\tat org.apache.flink.runtime.taskmanager.Task.run(Task.java:575) {DIST}",
    "\tat java.base/java.lang.Thread.run(Thread.java:840) ~[?:?]",
]
# A job jar's own classes (a DataStream job that packs the connector) print as ~[?:?], like genuine 1.20.3 logs.
USER_JAR = "~[?:?]"


def emitter(jar: str) -> list[str]:
    return [
        "java.io.IOException: Failed to deserialize consumer record due to",
        f"\tat org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter.emitRecord(KafkaRecordEmitter.java:56) {jar}",
        f"\tat org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter.emitRecord(KafkaRecordEmitter.java:34) {jar}",
        *TASK_THREAD,
    ]

ENVELOPE = ('{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"int64","optional":false,'
            '"field":"id"},{"type":"string","optional":true,"field":"status"}],"optional":true,'
            '"name":"shop.public.orders.Value","field":"before"}],"optional":false,'
            '"name":"shop.public.orders.Envelope"},"payload":{"before":null,"after":{"id":77120,"status":"PAID"},'
            '"source":{"connector":"postgresql","db":"shop","schema":"public","table":"orders"},"op":"c",'
            '"ts_ms":1795850101223}}')


def debezium_trace(offset: int) -> list[str]:
    record = (f"ConsumerRecord(topic = shop.public.orders, partition = 2, leaderEpoch = 7, offset = {offset}, "
              f"CreateTime = 1795850101240, serialized key size = 28, serialized value size = {len(ENVELOPE)}, "
              "headers = RecordHeaders(headers = [], isReadOnly = false), key = [B@5b0a1c3e, value = [B@2f7c19d4)")
    return [
        *emitter(KAFKA_JAR),
        f"Caused by: java.io.IOException: Failed to deserialize consumer record {record}.",
        f"\tat org.apache.flink.connector.kafka.source.reader.deserializer.KafkaDeserializationSchemaWrapper.deserialize(KafkaDeserializationSchemaWrapper.java:59) {KAFKA_JAR}",
        f"\tat org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter.emitRecord(KafkaRecordEmitter.java:53) {KAFKA_JAR}",
        "\t... 14 more",
        f"Caused by: java.io.IOException: Corrupt Debezium JSON message '{ENVELOPE}'.",
        "\tat org.apache.flink.formats.json.debezium.DebeziumJsonDeserializationSchema.deserialize(DebeziumJsonDeserializationSchema.java:184) ~[flink-json-1.20.3.jar:1.20.3]",
        f"\tat org.apache.flink.streaming.connectors.kafka.table.DynamicKafkaDeserializationSchema.deserialize(DynamicKafkaDeserializationSchema.java:115) {KAFKA_JAR}",
        f"\tat org.apache.flink.connector.kafka.source.reader.deserializer.KafkaDeserializationSchemaWrapper.deserialize(KafkaDeserializationSchemaWrapper.java:56) {KAFKA_JAR}",
        f"\tat org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter.emitRecord(KafkaRecordEmitter.java:53) {KAFKA_JAR}",
        "\t... 14 more",
        'Caused by: java.lang.NullPointerException: Cannot invoke "Object.toString()" because the return value of '
        '"org.apache.flink.table.data.GenericRowData.getField(int)" is null',
        "\tat org.apache.flink.formats.json.debezium.DebeziumJsonDeserializationSchema.deserialize(DebeziumJsonDeserializationSchema.java:152) ~[flink-json-1.20.3.jar:1.20.3]",
        f"\tat org.apache.flink.streaming.connectors.kafka.table.DynamicKafkaDeserializationSchema.deserialize(DynamicKafkaDeserializationSchema.java:115) {KAFKA_JAR}",
        f"\tat org.apache.flink.connector.kafka.source.reader.deserializer.KafkaDeserializationSchemaWrapper.deserialize(KafkaDeserializationSchemaWrapper.java:56) {KAFKA_JAR}",
        f"\tat org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter.emitRecord(KafkaRecordEmitter.java:53) {KAFKA_JAR}",
        "\t... 14 more",
    ]


UPDATE_WITHOUT_BEFORE = ('{"before":null,"after":{"id":90211,"customer_id":4417,"status":"SHIPPED",'
                         '"amount":"AfQ="},"source":{"version":"2.5.4.Final","connector":"postgresql","name":"shop",'
                         '"ts_ms":1795853922114,"snapshot":"false","db":"shop","sequence":"[\\"2207465872\\",'
                         '\\"2207466120\\"]","schema":"public","table":"orders","txId":8812431,'
                         '"lsn":2207466120,"xmin":null},"op":"u","ts_ms":1795853922387,"transaction":null}')


def replica_identity_trace() -> list[str]:
    record = (f"ConsumerRecord(topic = shop.public.orders, partition = 0, leaderEpoch = 4, offset = 1183307, "
              f"CreateTime = 1795853922391, serialized key size = 14, serialized value size = "
              f"{len(UPDATE_WITHOUT_BEFORE)}, headers = RecordHeaders(headers = [], isReadOnly = false), "
              "key = [B@3c5e8a71, value = [B@61b7f0d2)")
    json_jar = "~[flink-json-1.20.3.jar:1.20.3]"
    return [
        *emitter(KAFKA_JAR),
        f"Caused by: java.io.IOException: Failed to deserialize consumer record {record}.",
        f"\tat org.apache.flink.connector.kafka.source.reader.deserializer.KafkaDeserializationSchemaWrapper.deserialize(KafkaDeserializationSchemaWrapper.java:59) {KAFKA_JAR}",
        f"\tat org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter.emitRecord(KafkaRecordEmitter.java:53) {KAFKA_JAR}",
        "\t... 14 more",
        f"Caused by: java.io.IOException: Corrupt Debezium JSON message '{UPDATE_WITHOUT_BEFORE}'.",
        f"\tat org.apache.flink.formats.json.debezium.DebeziumJsonDeserializationSchema.deserialize(DebeziumJsonDeserializationSchema.java:184) {json_jar}",
        f"\tat org.apache.flink.streaming.connectors.kafka.table.DynamicKafkaDeserializationSchema.deserialize(DynamicKafkaDeserializationSchema.java:115) {KAFKA_JAR}",
        f"\tat org.apache.flink.connector.kafka.source.reader.deserializer.KafkaDeserializationSchemaWrapper.deserialize(KafkaDeserializationSchemaWrapper.java:56) {KAFKA_JAR}",
        f"\tat org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter.emitRecord(KafkaRecordEmitter.java:53) {KAFKA_JAR}",
        "\t... 14 more",
        'Caused by: java.lang.IllegalStateException: The "before" field of UPDATE message is null, if you are using '
        "Debezium Postgres Connector, please check the Postgres table has been set REPLICA IDENTITY to FULL level.",
        f"\tat org.apache.flink.formats.json.debezium.DebeziumJsonDeserializationSchema.deserialize(DebeziumJsonDeserializationSchema.java:159) {json_jar}",
        f"\tat org.apache.flink.streaming.connectors.kafka.table.DynamicKafkaDeserializationSchema.deserialize(DynamicKafkaDeserializationSchema.java:115) {KAFKA_JAR}",
        f"\tat org.apache.flink.connector.kafka.source.reader.deserializer.KafkaDeserializationSchemaWrapper.deserialize(KafkaDeserializationSchemaWrapper.java:56) {KAFKA_JAR}",
        f"\tat org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter.emitRecord(KafkaRecordEmitter.java:53) {KAFKA_JAR}",
        "\t... 14 more",
    ]


def magic_byte_trace() -> list[str]:
    user_jar = USER_JAR
    return [
        *emitter(USER_JAR),
        "Caused by: org.apache.kafka.common.errors.SerializationException: Unknown magic byte!",
        f"\tat io.confluent.kafka.serializers.AbstractKafkaSchemaSerDe.getByteBuffer(AbstractKafkaSchemaSerDe.java:599) {user_jar}",
        f"\tat io.confluent.kafka.serializers.AbstractKafkaAvroDeserializer$DeserializationContext.<init>(AbstractKafkaAvroDeserializer.java:386) {user_jar}",
        f"\tat io.confluent.kafka.serializers.AbstractKafkaAvroDeserializer.deserialize(AbstractKafkaAvroDeserializer.java:184) {user_jar}",
        f"\tat io.confluent.kafka.serializers.KafkaAvroDeserializer.deserialize(KafkaAvroDeserializer.java:108) {user_jar}",
        f"\tat io.confluent.kafka.serializers.KafkaAvroDeserializer.deserialize(KafkaAvroDeserializer.java:103) {user_jar}",
        f"\tat org.apache.flink.connector.kafka.source.reader.deserializer.KafkaValueOnlyDeserializerWrapper.deserialize(KafkaValueOnlyDeserializerWrapper.java:91) {user_jar}",
        f"\tat org.apache.flink.connector.kafka.source.reader.KafkaRecordEmitter.emitRecord(KafkaRecordEmitter.java:53) {user_jar}",
        "\t... 14 more",
    ]


def jm_log(job: str, jid: str, task: str, vertex: str, trace, times: list[str], start: str) -> str:
    out = [BANNER.format(t=f"2026-11-27 {start},412")]
    out.append(f"2026-11-27 {times[0]},101 INFO  {GRAPH} [] - Job {job} ({jid}) switched from state CREATED to RUNNING.")
    for attempt, t in enumerate(times[1:]):
        last = attempt == len(times) - 2
        out.append(f"2026-11-27 {t},318 INFO  {GRAPH} [] - {task} ({vertex}_0_{attempt}) switched from RUNNING to "
                   f"FAILED on 10.40.3.17:41235-6f1c2a @ flink-tm-3.shop.internal (dataPort=39811).")
        out.extend(trace())
        if last:
            out.append(f"2026-11-27 {t},344 INFO  {GRAPH} [] - Job {job} ({jid}) switched from state RUNNING to FAILING.")
            out.append("org.apache.flink.runtime.JobException: Recovery is suppressed by "
                       "FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=3, backoffTimeMS=10000)")
            out.append(f"2026-11-27 {t},561 INFO  {GRAPH} [] - Job {job} ({jid}) switched from state FAILING to FAILED.")
        else:
            out.append(f"2026-11-27 {t},344 INFO  {GRAPH} [] - Job {job} ({jid}) switched from state RUNNING to RESTARTING.")
            nxt = times[attempt + 2]
            out.append(f"2026-11-27 {nxt[:-2]}{int(nxt[-2:]) - 1:02d},350 INFO  {GRAPH} [] - Job {job} ({jid}) switched "
                       "from state RESTARTING to RUNNING.")
    return "\n".join(out) + "\n"


def main(dest: Path) -> None:
    cdc = dest / "debezium-schema-envelope-kafka-1.20" / "log"
    cdc.mkdir(parents=True, exist_ok=True)
    offsets = iter([4410982, 4410982, 4410982, 4410982])
    (cdc / "jobmanager.log").write_text(jm_log(
        "insert-into_default_catalog.default_database.orders_mirror", "7c1e94d2b0a3f5e8d6c2a1b9e4f70312",
        "Source: orders_cdc[1] -> Calc[2] -> ConstraintEnforcer[3] -> Sink: orders_mirror[3] (3/4)",
        "0b1f2e3d4c5a69788796a5b4c3d2e1f0_bc764cd8ddf7a0cff126f51c16239658_2",
        lambda: debezium_trace(next(offsets)), ["09:14:02", "09:14:09", "09:14:20", "09:14:31", "09:14:42"],
        "09:12:47"))
    identity = dest / "replica-identity-default-kafka-1.20" / "log"
    identity.mkdir(parents=True, exist_ok=True)
    (identity / "jobmanager.log").write_text(jm_log(
        "insert-into_default_catalog.default_database.order_status", "3a9d0c7e51b84f26a0e4d8c2b6f19e57",
        "Source: orders_changes[1] -> Calc[2] -> Sink: order_status[3] (1/2)",
        "8d4c2b0a9e7f6d5c4b3a29180f7e6d5c_bc764cd8ddf7a0cff126f51c16239658_0",
        replica_identity_trace, ["11:58:40", "12:18:42", "12:18:53", "12:19:04", "12:19:15"], "11:57:31"))
    magic = dest / "unknown-magic-byte-kafka-1.20" / "log"
    magic.mkdir(parents=True, exist_ok=True)
    (magic / "jobmanager.log").write_text(jm_log(
        "payments-enricher", "d41f0a6b7c2e4d8f9a1b3c5e7f902468",
        "Source: payments -> Map -> Sink: enriched-payments (2/6)",
        "5e2a7c9b1d3f4a6b8c0d2e4f6a8b0c1d_cbc357ccb763df2852fee8c4fc7d55f2_1",
        magic_byte_trace, ["16:40:11", "16:52:37", "16:52:48", "16:52:59", "16:53:10"], "16:39:02"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
