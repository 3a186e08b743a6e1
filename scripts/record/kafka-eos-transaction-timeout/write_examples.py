"""Write the example incidents of kafka-eos-transaction-timeout.

No Kafka broker runs where the examples are made, so these incidents are written, not recorded: the Kafka client
texts are the client's own (Errors, TransactionManager, NetworkClient of the 2.4.1 and 3.2.3/3.4.0 tags, with their
line numbers), the sink's lines follow FlinkKafkaProducer / TwoPhaseCommitSinkFunction (Flink 1.13) and KafkaWriter /
KafkaCommitter (connector 1.17 / 3.0), and the log layout is that of genuine Flink logs (log4j2 default pattern,
standalone file names, start-up banner, state changes, checkpoint lines).

    .venv/bin/python scripts/record/kafka-eos-transaction-timeout/write_examples.py data/kafka-eos-transaction-timeout
"""
from __future__ import annotations

import json
import pathlib
import sys
from datetime import datetime, timedelta

TASK = "org.apache.flink.runtime.taskmanager.Task"
EXEC = "org.apache.flink.runtime.executiongraph.ExecutionGraph"
CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator"


class Log:
    def __init__(self, start: str):
        self.t = datetime.strptime(start, "%Y-%m-%d %H:%M:%S.%f")
        self.lines: list[str] = []

    def at(self, when: str | None = None, plus_ms: int = 0) -> "Log":
        if when:
            self.t = datetime.strptime(when, "%Y-%m-%d %H:%M:%S.%f")
        self.t += timedelta(milliseconds=plus_ms)
        return self

    def __call__(self, level: str, logger: str, message: str, *more: str, step: int = 7) -> "Log":
        self.t += timedelta(milliseconds=step)
        stamp = self.t.strftime("%Y-%m-%d %H:%M:%S,") + f"{self.t.microsecond // 1000:03d}"
        self.lines.append(f"{stamp} {level:<5} {logger:<60} [] - {message}")
        self.lines.extend(more)
        return self

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def banner(log: Log, role: str, version: str, rev: str, date: str, jvm: str = "1.8.0_292-b10") -> None:
    cls = ("org.apache.flink.runtime.entrypoint.ClusterEntrypoint" if role == "jm"
           else "org.apache.flink.runtime.taskexecutor.TaskManagerRunner")
    what = "StandaloneSessionClusterEntrypoint" if role == "jm" else "TaskManager"
    log("INFO", cls, "-" * 80, step=0)
    log("INFO", cls, f" Starting {what} (Version: {version}, Scala: 2.12, Rev:{rev}, Date:{date})", step=0)
    log("INFO", cls, " OS current user: flink", step=0)
    log("INFO", cls, f" JVM: OpenJDK 64-Bit Server VM - AdoptOpenJDK - {jvm}", step=0)
    log("INFO", cls, "-" * 80, step=1)


def conf_lines(log: Log, conf: dict[str, str]) -> None:
    for k, v in conf.items():
        log("INFO", "org.apache.flink.configuration.GlobalConfiguration",
            f"Loading configuration property: {k}, {v}", step=1)


def producer_config(log: Log, client: str, values: dict[str, str], version: str) -> None:
    base = {
        "acks": "-1", "batch.size": "16384", "bootstrap.servers": "[kafka-1.prod.internal:9092, kafka-2.prod.internal:9092, kafka-3.prod.internal:9092]",
        "buffer.memory": "33554432", "client.dns.lookup": "default" if version.startswith("2.") else "use_all_dns_ips",
        "client.id": client, "compression.type": "none", "connections.max.idle.ms": "540000",
        "delivery.timeout.ms": "120000", "enable.idempotence": "true" if not version.startswith("2.") else "false",
        "interceptor.classes": "[]", "key.serializer": "class org.apache.kafka.common.serialization.ByteArraySerializer",
        "linger.ms": "0", "max.block.ms": "60000", "max.in.flight.requests.per.connection": "5",
        "max.request.size": "1048576", "metadata.max.age.ms": "300000", "reconnect.backoff.max.ms": "1000",
        "reconnect.backoff.ms": "50", "request.timeout.ms": "30000", "retries": "2147483647", "retry.backoff.ms": "100",
        "sasl.jaas.config": "null", "security.protocol": "PLAINTEXT", "transaction.timeout.ms": "60000",
        "transactional.id": "null", "value.serializer": "class org.apache.kafka.common.serialization.ByteArraySerializer",
    }
    base.update(values)
    log("INFO", "org.apache.kafka.clients.producer.ProducerConfig", "ProducerConfig values: ",
        *[f"\t{k} = {v}" for k, v in sorted(base.items())], "")


def app_info(log: Log, version: str, commit: str, epoch_ms: int) -> None:
    log("INFO", "org.apache.kafka.common.utils.AppInfoParser", f"Kafka version: {version}")
    log("INFO", "org.apache.kafka.common.utils.AppInfoParser", f"Kafka commitId: {commit}")
    log("INFO", "org.apache.kafka.common.utils.AppInfoParser", f"Kafka startTimeMs: {epoch_ms}")


def epoch(log: Log) -> int:
    return int(log.t.timestamp() * 1000)


def write(folder: pathlib.Path, files: dict[str, str], expected: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")


SOURCE = ("written, not recorded (no Kafka broker can run here): Kafka client {client} texts from the client's sources "
          "(Errors, TransactionManager, NetworkClient), the sink's lines from {sink}, in the layout of genuine Flink "
          "{flink} logs; generated by scripts/record/kafka-eos-transaction-timeout/write_examples.py")

# ------------------------------------------------------------------------------------------------ Flink 1.13

V113 = ("1.13.6", "b2ca390", "2022-02-03T14:54:22+01:00")
JOB113 = "5c1e0b7d9a2f4e61b8d3a0c4f7e29b16"
SINK113 = "Source: orders -> Map -> Sink: enriched-orders"
OP113 = "8f1e0cc2b3f3e4b3c8c2a1e0f3c4d5e6"
CONF113 = {
    "jobmanager.rpc.address": "flink-jm.prod.internal", "taskmanager.numberOfTaskSlots": "2",
    "parallelism.default": "2", "state.backend": "rocksdb", "state.checkpoints.dir": "s3://flink-prod/checkpoints",
    "execution.checkpointing.interval": "60 s", "restart-strategy": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "3", "restart-strategy.fixed-delay.delay": "10 s",
}


def conf_file(conf: dict[str, str]) -> str:
    return "".join(f"{k}: {v}\n" for k, v in conf.items())


def init_producer_failure_2_4(log: Log, attempt: str, number: int, state: str = "INITIALIZING") -> None:
    log("WARN", TASK, f"{SINK113} (1/2)#{number} ({attempt}) switched from {state} to FAILED with failure cause: "
        "org.apache.kafka.common.KafkaException: Unexpected error in InitProducerIdResponse; The transaction timeout "
        "is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).",
        "\tat org.apache.kafka.clients.producer.internals.TransactionManager$InitProducerIdHandler.handleResponse(TransactionManager.java:1151)",
        "\tat org.apache.kafka.clients.producer.internals.TransactionManager$TxnRequestHandler.onComplete(TransactionManager.java:1074)",
        "\tat org.apache.kafka.clients.ClientResponse.onComplete(ClientResponse.java:109)",
        "\tat org.apache.kafka.clients.NetworkClient.completeResponses(NetworkClient.java:569)",
        "\tat org.apache.kafka.clients.NetworkClient.poll(NetworkClient.java:561)",
        "\tat org.apache.kafka.clients.producer.internals.Sender.maybeSendAndPollTransactionalRequest(Sender.java:425)",
        "\tat org.apache.kafka.clients.producer.internals.Sender.runOnce(Sender.java:311)",
        "\tat org.apache.kafka.clients.producer.internals.Sender.run(Sender.java:244)",
        "\tat java.lang.Thread.run(Thread.java:748)", "")


def timeout_above_max_113(out: pathlib.Path) -> None:
    jm, tm = Log("2024-03-12 09:13:58.100"), Log("2024-03-12 09:14:01.300")
    banner(jm, "jm", *V113)
    conf_lines(jm, CONF113)
    banner(tm, "tm", *V113)
    jm.at("2024-03-12 09:14:20.000")
    jm("INFO", "org.apache.flink.runtime.dispatcher.StandaloneDispatcher",
       f"Received JobGraph submission {JOB113} (orders-enricher).")
    jm("INFO", "org.apache.flink.runtime.jobmaster.JobMaster",
       f"Using restart back off time strategy FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=3, "
       f"backoffTimeMS=10000) for orders-enricher ({JOB113}).")
    jm("INFO", EXEC, f"Job orders-enricher ({JOB113}) switched from state CREATED to RUNNING.")
    attempts = ["a41c2e7f90d3b6c158e2f04d7a9b3c61", "0d8e4b2a6c1f9e3d7b5a2c4e6f8a0b1c",
                "9b3a5c7e1d2f4a6b8c0e2d4f6a8b0c2e", "3e5f7a9b1c3d5e7f9a1b3c5d7e9f1a3b"]
    tm.at("2024-03-12 09:14:20.400")
    for i, att in enumerate(attempts):
        tm("INFO", "org.apache.flink.runtime.taskexecutor.TaskExecutor",
           f"Received task {SINK113} (1/2)#{i} ({att}), deploy into slot with allocation id 7c2d1e0f3a4b5c6d7e8f9a0b1c2d3e4f.")
        tm("INFO", TASK, f"{SINK113} (1/2)#{i} ({att}) switched from CREATED to DEPLOYING.")
        tm("INFO", TASK, f"{SINK113} (1/2)#{i} ({att}) switched from DEPLOYING to INITIALIZING.")
        tm("WARN", "org.apache.flink.streaming.connectors.kafka.FlinkKafkaProducer",
           "Property [transaction.timeout.ms] not specified. Setting it to 3600000 ms")
        tm("INFO", "org.apache.flink.streaming.connectors.kafka.FlinkKafkaProducer",
           "Starting FlinkKafkaInternalProducer (1/2) to produce into default topic orders-enriched")
        tid = f"{SINK113}-{OP113}-{i * 5 + 1}"
        producer_config(tm, f"producer-{tid}", {"transaction.timeout.ms": "3600000", "transactional.id": tid}, "2.4.1")
        tm("INFO", "org.apache.kafka.clients.producer.KafkaProducer",
           f"[Producer clientId=producer-{tid}, transactionalId={tid}] Instantiated a transactional producer.")
        tm("INFO", "org.apache.kafka.clients.producer.KafkaProducer",
           f"[Producer clientId=producer-{tid}, transactionalId={tid}] Overriding the default retries config to the "
           "recommended value of 2147483647 since the idempotent producer is enabled.")
        app_info(tm, "2.4.1", "c57222ae8cd7866b", epoch(tm))
        tm("INFO", "org.apache.kafka.clients.Metadata",
           f"[Producer clientId=producer-{tid}, transactionalId={tid}] Cluster ID: 4L6g3nShT-eMCtK--X86sw", step=212)
        init_producer_failure_2_4(tm, att, i)
        tm("INFO", TASK, f"Freeing task resources for {SINK113} (1/2)#{i} ({att}).")
        jm.at(tm.t.strftime("%Y-%m-%d %H:%M:%S.%f"), 20)
        jm("INFO", EXEC, f"{SINK113} (1/2) ({att}) switched from INITIALIZING to FAILED on 10.0.3.17:40213-6a9c1f "
           "@ ip-10-0-3-17.ec2.internal (dataPort=39321).",
           "org.apache.kafka.common.KafkaException: Unexpected error in InitProducerIdResponse; The transaction timeout "
           "is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).",
           "\tat org.apache.kafka.clients.producer.internals.TransactionManager$InitProducerIdHandler.handleResponse(TransactionManager.java:1151) ~[?:?]",
           "\tat org.apache.kafka.clients.producer.internals.TransactionManager$TxnRequestHandler.onComplete(TransactionManager.java:1074) ~[?:?]",
           "\tat org.apache.kafka.clients.ClientResponse.onComplete(ClientResponse.java:109) ~[?:?]",
           "\tat org.apache.kafka.clients.producer.internals.Sender.run(Sender.java:244) ~[?:?]",
           "\tat java.lang.Thread.run(Thread.java:748) ~[?:1.8.0_292]")
        if i < 3:
            jm("INFO", "org.apache.flink.runtime.executiongraph.failover.flip1.RestartPipelinedRegionFailoverStrategy",
               "Calculating tasks to restart to recover the failed task cbc357ccb763df2852fee8c4fc7d55f2_0.")
            jm("INFO", EXEC, f"Job orders-enricher ({JOB113}) switched from state RUNNING to RESTARTING.")
            jm.at(None, 10000)
            jm("INFO", EXEC, f"Job orders-enricher ({JOB113}) switched from state RESTARTING to RUNNING.")
            tm.at(jm.t.strftime("%Y-%m-%d %H:%M:%S.%f"), 80)
        else:
            jm("INFO", EXEC, f"Job orders-enricher ({JOB113}) switched from state RUNNING to FAILING.",
               "org.apache.flink.runtime.JobException: Recovery is suppressed by FixedDelayRestartBackoffTimeStrategy"
               "(maxNumberRestartAttempts=3, backoffTimeMS=10000)",
               "\tat org.apache.flink.runtime.executiongraph.failover.flip1.ExecutionFailureHandler.handleFailure(ExecutionFailureHandler.java:138) ~[flink-dist_2.12-1.13.6.jar:1.13.6]",
               "Caused by: org.apache.kafka.common.KafkaException: Unexpected error in InitProducerIdResponse; The "
               "transaction timeout is larger than the maximum value allowed by the broker (as configured by "
               "transaction.max.timeout.ms).",
               "\tat org.apache.kafka.clients.producer.internals.TransactionManager$InitProducerIdHandler.handleResponse(TransactionManager.java:1151) ~[?:?]",
               "\t... 1 more")
            jm("INFO", EXEC, f"Job orders-enricher ({JOB113}) switched from state FAILING to FAILED.")
    write(out / "timeout-above-broker-max-1.13", {
        "flink-conf.yaml": conf_file(CONF113),
        "log/flink-flink-standalonesession-0-flink-jm.log": jm.text(),
        "log/flink-flink-taskexecutor-0-flink-tm-1.log": tm.text(),
    }, {
        "description": "A Flink 1.13 job moves its sink to FlinkKafkaProducer with Semantic.EXACTLY_ONCE without "
                       "setting transaction.timeout.ms: the sink asks for its 1 h default, the brokers keep the "
                       "15 min transaction.max.timeout.ms, and every InitProducerId is refused until the fixed-delay "
                       "restarts run out.",
        "source": SOURCE.format(client="2.4.1", sink="FlinkKafkaProducer (Flink 1.13)", flink="1.13.6"),
        "flink_version": "1.13.6",
        "primary": "kafka-eos-transaction-timeout",
        "root_cause": "timeout-above-broker-max",
    })


def checkpoints(jm: Log, job: str, first: int, count: int, every_ms: int, size: int = 48211) -> None:
    for cid in range(first, first + count):
        jm.at(None, every_ms - 500)
        jm("INFO", CC, f"Triggering checkpoint {cid} (type=CHECKPOINT) @ {epoch(jm)} for job {job}.")
        jm.at(None, 480)
        jm("INFO", CC, f"Completed checkpoint {cid} for job {job} ({size + cid * 13} bytes in 473 ms).")


def expired_after_downtime_113(out: pathlib.Path, downtime_min: int, name: str) -> None:
    """The job is cancelled for a maintenance (its checkpoints retained), resubmitted ``downtime_min`` minutes later
    from checkpoint 212, and commits that checkpoint's transactions; with a 15 min transaction timeout the broker has
    aborted them by then when the downtime is longer."""
    conf = dict(CONF113, **{"execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION"})
    new_job = "b7d9f1a3c5e7092b4d6f8a0c2e4a6b8d"
    jm, tm = Log("2024-05-20 01:58:00.000"), Log("2024-05-20 01:58:03.000")
    banner(jm, "jm", *V113)
    conf_lines(jm, conf)
    banner(tm, "tm", *V113)
    jm.at("2024-05-20 02:00:00.000")
    jm("INFO", EXEC, f"Job orders-enricher ({JOB113}) switched from state CREATED to RUNNING.")
    checkpoints(jm, JOB113, 208, 5, 60_000)
    last_ok = jm.t
    jm.at(None, 21_000)
    jm("INFO", "org.apache.flink.runtime.jobmaster.JobMaster", f"Trying to cancel job with ID {JOB113}.")
    jm("INFO", EXEC, f"Job orders-enricher ({JOB113}) switched from state RUNNING to CANCELLING.")
    jm("INFO", EXEC, f"Job orders-enricher ({JOB113}) switched from state CANCELLING to CANCELED.", step=412)
    # the maintenance: the job is resubmitted from its last retained checkpoint
    jm.at(None, downtime_min * 60_000)
    jm("INFO", "org.apache.flink.runtime.dispatcher.StandaloneDispatcher",
       f"Received JobGraph submission {new_job} (orders-enricher).")
    jm("INFO", "org.apache.flink.runtime.checkpoint.CheckpointCoordinator",
       f"Starting job {new_job} from savepoint s3://flink-prod/checkpoints/{JOB113}/chk-212 ()")
    jm("INFO", CC, f"Restoring job {new_job} from Checkpoint 212 @ {int(last_ok.timestamp() * 1000) - 480} for "
       f"{JOB113} located at s3://flink-prod/checkpoints/{JOB113}/chk-212.")
    jm("INFO", EXEC, f"Job orders-enricher ({new_job}) switched from state CREATED to RUNNING.")
    tm.at(jm.t.strftime("%Y-%m-%d %H:%M:%S.%f"), 400)
    att = "6d0f2b4a8c1e3d5f7a9b0c2e4f6a8b1d"
    tm("INFO", TASK, f"{SINK113} (1/2)#0 ({att}) switched from DEPLOYING to INITIALIZING.")
    open_ms = int((tm.t - last_ok).total_seconds() * 1000) + 30_950
    for n, (tid_n, pid) in enumerate(((13, 5011), (14, 5012))):
        tid = f"{SINK113}-{OP113}-{tid_n}"
        state = f"KafkaTransactionState [transactionalId={tid}, producerId={pid}, epoch=0]"
        tm("WARN", "org.apache.flink.streaming.api.functions.sink.TwoPhaseCommitSinkFunction",
           f"Transaction {state} has been open for {open_ms + n * 3} ms. This is close to or even exceeding the "
           "transaction timeout of 900000 ms.")
        producer_config(tm, f"producer-{tid}", {"transaction.timeout.ms": "900000", "transactional.id": tid}, "2.4.1")
        tm("INFO", "org.apache.kafka.clients.producer.KafkaProducer",
           f"[Producer clientId=producer-{tid}, transactionalId={tid}] Instantiated a transactional producer.")
        app_info(tm, "2.4.1", "c57222ae8cd7866b", epoch(tm))
        tm("INFO", "org.apache.flink.streaming.connectors.kafka.internals.FlinkKafkaInternalProducer",
           f"Attempting to resume transaction {tid} with producerId {pid} and epoch 0", step=150)
        tm("WARN", "org.apache.flink.streaming.connectors.kafka.FlinkKafkaProducer",
           "Encountered error org.apache.kafka.common.errors.ProducerFencedException: Producer attempted an operation "
           "with an old epoch. Either there is a newer producer with the same transactionalId, or the producer's "
           f"transaction has been expired by the broker. while recovering transaction {state}. Presumably this "
           "transaction has been already committed before", step=40)
        tm("INFO", "org.apache.kafka.clients.producer.KafkaProducer",
           f"[Producer clientId=producer-{tid}, transactionalId={tid}] Closing the Kafka producer with timeoutMillis = "
           "0 ms.")
    tm("INFO", TASK, f"{SINK113} (1/2)#0 ({att}) switched from INITIALIZING to RUNNING.")
    jm.at(tm.t.strftime("%Y-%m-%d %H:%M:%S.%f"), 50_000)
    checkpoints(jm, new_job, 213, 3, 60_000)
    if downtime_min > 15:
        desc = (f"A Flink 1.13 job with FlinkKafkaProducer (EXACTLY_ONCE, transaction.timeout.ms 900000) is cancelled "
                f"for a maintenance and resubmitted {downtime_min} minutes later from its retained checkpoint 212. "
                "It commits that checkpoint's transactions, but the broker aborted them after 15 minutes: the "
                "commits are fenced, FlinkKafkaProducer assumes they were committed before, and the records written "
                "after checkpoint 212 are lost for read_committed consumers.")
        exp = {"primary": "kafka-eos-transaction-timeout", "root_cause": "transaction-timeout-too-short"}
    else:
        desc = (f"The same job is resubmitted from its retained checkpoint {downtime_min} minutes after the cancel. "
                "Its restored transactions had already been committed after checkpoint 212 completed, so their second "
                "commit is fenced and FlinkKafkaProducer says so ('Presumably this transaction has been already "
                "committed before'); they had been open well within the 15 min timeout. No data is lost: not this "
                "runbook.")
        exp = {"primary": None, "root_cause": None}
    write(out / name, {
        "flink-conf.yaml": conf_file(conf),
        "log/flink-flink-standalonesession-0-flink-jm.log": jm.text(),
        "log/flink-flink-taskexecutor-0-flink-tm-1.log": tm.text(),
    }, dict({"description": desc,
             "source": SOURCE.format(client="2.4.1", sink="FlinkKafkaProducer and TwoPhaseCommitSinkFunction "
                                                          "(Flink 1.13)", flink="1.13.6"),
             "flink_version": "1.13.6"}, **exp))


# ------------------------------------------------------------------------------------------------ KafkaSink (1.18)

V118 = ("1.18.1", "a8c8b1c", "2024-01-11T17:22:18+01:00")
WRITER = "Sink: enriched-orders Writer"


def kafka_sink_job(jm: Log, tm: Log, job: str, name: str, prefix: str, subtask_offset: int, attempt: str,
                   client: str = "3.4.0") -> None:
    jm("INFO", "org.apache.flink.runtime.dispatcher.StandaloneDispatcher", f"Received JobGraph submission '{name}' ({job}).")
    jm("INFO", EXEC, f"Job {name} ({job}) switched from state CREATED to RUNNING.")
    tm.at(jm.t.strftime("%Y-%m-%d %H:%M:%S.%f"), 300)
    tm("INFO", "org.apache.flink.runtime.taskexecutor.TaskExecutor",
       f"Received task {WRITER} (1/1)#0 ({attempt}), deploy into slot with allocation id "
       "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d.")
    tm("INFO", TASK, f"{WRITER} (1/1)#0 ({attempt}) switched from DEPLOYING to INITIALIZING.")
    tid = f"{prefix}-0-{subtask_offset}"
    producer_config(tm, f"producer-{tid}", {"transaction.timeout.ms": "900000", "transactional.id": tid,
                                            "enable.idempotence": "true"}, client)
    tm("INFO", "org.apache.kafka.clients.producer.KafkaProducer",
       f"[Producer clientId=producer-{tid}, transactionalId={tid}] Instantiated a transactional producer.")
    app_info(tm, client, "2e1947d240607d53", epoch(tm))
    tm("INFO", "org.apache.kafka.clients.producer.internals.TransactionManager",
       f"[Producer clientId=producer-{tid}, transactionalId={tid}] ProducerId set to 7004 with epoch {subtask_offset}",
       step=180)
    tm("INFO", TASK, f"{WRITER} (1/1)#0 ({attempt}) switched from INITIALIZING to RUNNING.")


def shared_prefix_118(out: pathlib.Path) -> None:
    conf = {"jobmanager.rpc.address": "flink-session.analytics.internal", "taskmanager.numberOfTaskSlots": "4",
            "execution.checkpointing.interval": "30 s", "state.checkpoints.dir": "s3://analytics/checkpoints",
            "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "2147483647",
            "restart-strategy.fixed-delay.delay": "10 s"}
    job_a, job_b = "7f3c9e1a5b2d4f6e8a0c1e3b5d7f9a2c", "e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2"
    jm, tm = Log("2024-09-03 13:59:00.000"), Log("2024-09-03 13:59:02.000")
    banner(jm, "jm", *V118, jvm="11/11.0.22+7")
    conf_lines(jm, conf)
    banner(tm, "tm", *V118, jvm="11/11.0.22+7")
    jm.at("2024-09-03 14:00:00.000")
    kafka_sink_job(jm, tm, job_a, "orders-enricher", "orders-eos", 1, "c0e2a4b6d8f0a2c4e6b8d0f2a4c6e8b0")
    jm.at(tm.t.strftime("%Y-%m-%d %H:%M:%S.%f"), 100)
    checkpoints(jm, job_a, 1, 6, 30_000)
    jm.at(None, 8_000)
    # the new version of the job is deployed next to the old one, with the same KafkaSink builder code
    kafka_sink_job(jm, tm, job_b, "orders-enricher", "orders-eos", 1, "5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b")
    tm.at(None, 9_000)
    tid = "orders-eos-0-7"
    tm("WARN", TASK, f"{WRITER} (1/1)#0 (c0e2a4b6d8f0a2c4e6b8d0f2a4c6e8b0) switched from RUNNING to FAILED with "
       "failure cause:",
       f"org.apache.kafka.common.errors.ProducerFencedException: Producer with transactionalId '{tid}' and "
       "ProducerIdAndEpoch(producerId=7004, epoch=7) has been fenced by another producer with the same transactionalId",
       "\tat org.apache.kafka.clients.producer.internals.TransactionManager.maybeFailWithError(TransactionManager.java:1003) ~[?:?]",
       "\tat org.apache.kafka.clients.producer.internals.TransactionManager.maybeAddPartition(TransactionManager.java:329) ~[?:?]",
       "\tat org.apache.kafka.clients.producer.KafkaProducer.doSend(KafkaProducer.java:1048) ~[?:?]",
       "\tat org.apache.kafka.clients.producer.KafkaProducer.send(KafkaProducer.java:962) ~[?:?]",
       "\tat org.apache.flink.connector.kafka.sink.KafkaWriter.write(KafkaWriter.java:204) ~[?:?]",
       "\tat org.apache.flink.streaming.runtime.operators.sink.SinkWriterOperator.processElement(SinkWriterOperator.java:158) ~[flink-dist-1.18.1.jar:1.18.1]",
       "\tat org.apache.flink.streaming.runtime.tasks.OneInputStreamTask$StreamTaskNetworkOutput.emitRecord(OneInputStreamTask.java:237) ~[flink-dist-1.18.1.jar:1.18.1]",
       "\tat org.apache.flink.runtime.taskmanager.Task.run(Task.java:562) [flink-dist-1.18.1.jar:1.18.1]",
       "\tat java.lang.Thread.run(Thread.java:829) [?:?]")
    jm.at(tm.t.strftime("%Y-%m-%d %H:%M:%S.%f"), 30)
    jm("INFO", EXEC, f"{WRITER} (1/1) (c0e2a4b6d8f0a2c4e6b8d0f2a4c6e8b0) switched from RUNNING to FAILED on "
       "10.4.1.22:36211-9f0e1d @ flink-tm-0.analytics.internal (dataPort=41003).",
       f"org.apache.kafka.common.errors.ProducerFencedException: Producer with transactionalId '{tid}' and "
       "ProducerIdAndEpoch(producerId=7004, epoch=7) has been fenced by another producer with the same transactionalId",
       "\tat org.apache.kafka.clients.producer.internals.TransactionManager.maybeFailWithError(TransactionManager.java:1003) ~[?:?]",
       "\tat org.apache.flink.connector.kafka.sink.KafkaWriter.write(KafkaWriter.java:204) ~[?:?]")
    jm("INFO", EXEC, f"Job orders-enricher ({job_a}) switched from state RUNNING to RESTARTING.")
    write(out / "shared-prefix-two-jobs-1.18", {
        "flink-conf.yaml": conf_file(conf),
        "log/flink-flink-standalonesession-0-flink-session.log": jm.text(),
        "log/flink-flink-taskexecutor-0-flink-tm-0.log": tm.text(),
    }, {
        "description": "A session cluster on Flink 1.18.1: a new version of the orders-enricher job is started next "
                       "to the old one (blue/green without a new transactional id prefix). Both KafkaSinks use "
                       "setTransactionalIdPrefix(\"orders-eos\"); the new job's writer initialises orders-eos-0-* and "
                       "fences the old job's producer, whose next send fails with ProducerFencedException.",
        "source": SOURCE.format(client="3.4.0", sink="KafkaWriter (flink-connector-kafka 3.0.2 for 1.18)",
                                flink="1.18.1"),
        "flink_version": "1.18.1",
        "primary": "kafka-eos-transaction-timeout",
        "root_cause": "shared-transactional-id-prefix",
    })


def healthy_118(out: pathlib.Path) -> None:
    conf = {"jobmanager.rpc.address": "flink-session.analytics.internal", "taskmanager.numberOfTaskSlots": "4",
            "execution.checkpointing.interval": "30 s", "state.checkpoints.dir": "s3://analytics/checkpoints"}
    job = "7f3c9e1a5b2d4f6e8a0c1e3b5d7f9a2c"
    jm, tm = Log("2024-09-03 13:59:00.000"), Log("2024-09-03 13:59:02.000")
    banner(jm, "jm", *V118, jvm="11/11.0.22+7")
    conf_lines(jm, conf)
    banner(tm, "tm", *V118, jvm="11/11.0.22+7")
    jm.at("2024-09-03 14:00:00.000")
    kafka_sink_job(jm, tm, job, "orders-enricher", "orders-enricher-prod", 1, "c0e2a4b6d8f0a2c4e6b8d0f2a4c6e8b0")
    jm.at(tm.t.strftime("%Y-%m-%d %H:%M:%S.%f"), 100)
    checkpoints(jm, job, 1, 20, 30_000)
    write(out / "healthy", {
        "flink-conf.yaml": conf_file(conf),
        "log/flink-flink-standalonesession-0-flink-session.log": jm.text(),
        "log/flink-flink-taskexecutor-0-flink-tm-0.log": tm.text(),
    }, {
        "description": "A KafkaSink with EXACTLY_ONCE, a 15 min transaction timeout and 30 s checkpoints: twenty "
                       "checkpoints complete and their transactions commit. Nothing goes wrong.",
        "source": SOURCE.format(client="3.4.0", sink="KafkaWriter (flink-connector-kafka 3.0.2 for 1.18)",
                                flink="1.18.1"),
        "flink_version": "1.18.1",
        "primary": None,
        "root_cause": None,
    })


def committer_fenced_after_outage_118(out: pathlib.Path) -> None:
    """A session cluster is lost (its host rebooted); 41 minutes later the job is resubmitted from its last retained
    checkpoint on a new cluster. The KafkaCommitter commits that checkpoint's transactions: the broker aborted them
    after the 15 min timeout, so the commit is fenced and the committer logs the data loss."""
    conf = {"jobmanager.rpc.address": "flink-session.analytics.internal", "taskmanager.numberOfTaskSlots": "4",
            "execution.checkpointing.interval": "30 s", "state.checkpoints.dir": "s3://analytics/checkpoints",
            "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION"}
    old_job, new_job = "7f3c9e1a5b2d4f6e8a0c1e3b5d7f9a2c", "0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a"
    jm_old, jm_new, tm = Log("2024-11-18 02:59:00.000"), Log("2024-11-18 03:50:00.000"), Log("2024-11-18 03:50:02.000")
    banner(jm_old, "jm", *V118, jvm="11/11.0.22+7")
    conf_lines(jm_old, conf)
    jm_old.at("2024-11-18 03:00:00.000")
    jm_old("INFO", EXEC, f"Job orders-enricher ({old_job}) switched from state CREATED to RUNNING.")
    checkpoints(jm_old, old_job, 50, 8, 30_000)
    last_ok = jm_old.t  # the host reboots here: the log ends
    banner(jm_new, "jm", *V118, jvm="11/11.0.22+7")
    conf_lines(jm_new, conf)
    jm_new.at((last_ok + eos_timedelta(minutes=41)).strftime("%Y-%m-%d %H:%M:%S.%f"))
    jm_new("INFO", "org.apache.flink.runtime.dispatcher.StandaloneDispatcher",
           f"Received JobGraph submission 'orders-enricher' ({new_job}).")
    jm_new("INFO", CC, f"Restoring job {new_job} from Checkpoint 57 @ {int(last_ok.timestamp() * 1000) - 480} for "
           f"{old_job} located at s3://analytics/checkpoints/{old_job}/chk-57.")
    jm_new("INFO", EXEC, f"Job orders-enricher ({new_job}) switched from state CREATED to RUNNING.")
    banner(tm.at(jm_new.t.strftime("%Y-%m-%d %H:%M:%S.%f"), -30_000), "tm", *V118, jvm="11/11.0.22+7")
    tm.at(jm_new.t.strftime("%Y-%m-%d %H:%M:%S.%f"), 400)
    committer = "Sink: enriched-orders Committer"
    att = "9c1e3a5b7d9f1b3d5f7a9c1e3b5d7f9a_0a448493b4782967b150582570326227_0_0"
    tm("INFO", TASK, f"{committer} (1/1)#0 ({att}) switched from DEPLOYING to INITIALIZING.")
    tid = "orders-eos-0-58"
    eos_producer = {"transaction.timeout.ms": "900000", "transactional.id": tid, "enable.idempotence": "true"}
    producer_config(tm, f"producer-{tid}", eos_producer, "3.4.0")
    app_info(tm, "3.4.0", "2e1947d240607d53", epoch(tm))
    tm("INFO", "org.apache.flink.connector.kafka.sink.FlinkKafkaInternalProducer",
       f"Attempting to resume transaction {tid} with producerId 7004 and epoch 3", step=140)
    tm("ERROR", "org.apache.flink.connector.kafka.sink.KafkaCommitter",
       "Unable to commit transaction (CommitRequestImpl{committable=KafkaCommittable{producerId=7004, epoch=3, "
       f"transactionalId={tid}}}, numRetries=0, state=RECEIVED}}) because its producer is already fenced. This means "
       "that you either have a different producer with the same 'transactional.id' (this is unlikely with the "
       "'KafkaSink' as all generated ids are unique and shouldn't be reused) or recovery took longer than "
       "'transaction.timeout.ms' (900000ms). In both cases this most likely signals data loss, please consult the "
       "Flink documentation for more details.",
       "org.apache.kafka.common.errors.ProducerFencedException: There is a newer producer with the same transactionalId "
       "which fences the current one.", step=60)
    tm("INFO", TASK, f"{committer} (1/1)#0 ({att}) switched from INITIALIZING to RUNNING.")
    jm_new.at(tm.t.strftime("%Y-%m-%d %H:%M:%S.%f"), 29_000)
    checkpoints(jm_new, new_job, 58, 4, 30_000)
    write(out / "committer-fenced-after-outage-1.18", {
        "flink-conf.yaml": conf_file(conf),
        "log/flink-flink-standalonesession-0-flink-session-old.log": jm_old.text(),
        "log/flink-flink-standalonesession-0-flink-session.log": jm_new.text(),
        "log/flink-flink-taskexecutor-0-flink-tm-0.log": tm.text(),
    }, {
        "description": "A Flink 1.18 session cluster with a KafkaSink (EXACTLY_ONCE, 15 min transaction timeout) "
                       "is lost with its host; the job is resubmitted on a new cluster 41 minutes later from its last "
                       "retained checkpoint 57. The KafkaCommitter's commit of that checkpoint's transaction is "
                       "fenced: the broker had aborted it after 15 minutes, and the committer says it most likely "
                       "signals data loss. The job itself keeps running.",
        "source": SOURCE.format(client="3.4.0", sink="KafkaCommitter (flink-connector-kafka 3.0.2 for 1.18)",
                                flink="1.18.1"),
        "flink_version": "1.18.1",
        "primary": "kafka-eos-transaction-timeout",
        "root_cause": "transaction-timeout-too-short",
    })


def eos_timedelta(**kw):
    return timedelta(**kw)


TICKET_117 = """\
Our Flink 1.17 job (KafkaSink, DeliveryGuarantee.EXACTLY_ONCE, flink-connector-kafka 1.17.1) won't start since we
switched the sink to exactly-once. setTransactionalIdPrefix("payments-eos") is set and we put
transaction.timeout.ms=3600000 in the producer properties as the docs say. TaskManager log:

2024-02-07 16:41:09,338 WARN  org.apache.flink.runtime.taskmanager.Task                    [] - Sink: payments-out Writer (2/4)#0 (b1e4b39ad9c7c1e4a8f1f5c2a0e7d3b9_e7a1c0f4d2b8a6c3e5f7a9b1d3c5e7f9_1_0) switched from INITIALIZING to FAILED with failure cause:
org.apache.kafka.common.KafkaException: Unexpected error in InitProducerIdResponse; The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).
	at org.apache.kafka.clients.producer.internals.TransactionManager$InitProducerIdHandler.handleResponse(TransactionManager.java:1418) ~[?:?]
	at org.apache.kafka.clients.producer.internals.TransactionManager$TxnRequestHandler.onComplete(TransactionManager.java:1322) ~[?:?]
	at org.apache.kafka.clients.ClientResponse.onComplete(ClientResponse.java:109) ~[?:?]
	at org.apache.kafka.clients.NetworkClient.completeResponses(NetworkClient.java:583) ~[?:?]
	at org.apache.kafka.clients.NetworkClient.poll(NetworkClient.java:575) ~[?:?]
	at org.apache.kafka.clients.producer.internals.Sender.maybeSendAndPollTransactionalRequest(Sender.java:418) ~[?:?]
	at org.apache.kafka.clients.producer.internals.Sender.runOnce(Sender.java:316) ~[?:?]
	at org.apache.kafka.clients.producer.internals.Sender.run(Sender.java:243) ~[?:?]
	at java.lang.Thread.run(Thread.java:829) ~[?:?]

Any idea? The brokers are MSK with default settings.
"""


def ticket_117(out: pathlib.Path) -> None:
    write(out / "ticket-excerpt-kafkasink-1.17", {"ticket.txt": TICKET_117}, {
        "description": "A support ticket: a Flink 1.17 KafkaSink switched to EXACTLY_ONCE with transaction.timeout.ms "
                       "3600000, against brokers with the default 15 min transaction.max.timeout.ms. Only the "
                       "TaskManager's failure is pasted; the broker's refusal names the cause.",
        "source": "ticket excerpt, written to the Kafka client 3.2.3 wording (TransactionManager line numbers of the "
                  "3.2.3 tag) and the layout of genuine Flink 1.17 TaskManager logs; the KafkaSink writer task name "
                  "as flink-connector-kafka 1.17 names it",
        "flink_version": "1.17",
        "primary": "kafka-eos-transaction-timeout",
        "root_cause": "timeout-above-broker-max",
    })


def main(dest: str) -> None:
    out = pathlib.Path(dest)
    timeout_above_max_113(out)
    expired_after_downtime_113(out, 94, "transaction-expired-after-downtime-1.13")
    expired_after_downtime_113(out, 3, "near-miss-restore-within-timeout-1.13")
    shared_prefix_118(out)
    committer_fenced_after_outage_118(out)
    healthy_118(out)
    ticket_117(out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data/kafka-eos-transaction-timeout")
