"""Write the example incidents of jdbc-connection-lost.

No MySQL or PostgreSQL server runs where the examples are made, so these incidents are written, not recorded. The
JobManager's and TaskManager's surrounding lines (start-up, the job's deployment, task failure and restart) are those
of a genuine Flink 1.20.3 recording, record-deserialization-failure/json-poison-1.20, with neutral adjustments (the
folder names, the failing task, times moved to the failure); the failure itself is written from the sources:
flink-connector-jdbc 3.3.0 (JdbcOutputFormat, GenericJdbcSinkFunction, the table executors, with their line numbers),
MySQL Connector/J 8.0.33 (LocalizedErrorMessages, ExceptionFactory, ClientPreparedStatement, SQLError) and pgjdbc
42.7.4 (BatchResultHandler, QueryExecutorImpl); Flink's frames from the 1.20.3 jars (javap line tables).

    .venv/bin/python scripts/record/jdbc-connection-lost/write_examples.py data/jdbc-connection-lost
"""
from __future__ import annotations

import datetime as dt
import pathlib
import re
import sys

RECORDING = pathlib.Path(__file__).resolve().parents[3] / "data/record-deserialization-failure/json-poison-1.20"
JM_LOG = "log/flink-flink-standalonesession-0-vm.log"
TM_LOG = "log/flink-flink-taskexecutor-0-vm.log"
TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
SINK_TASK = "GroupAggregate[3] -> Calc[4] -> Sink: customer_totals[5]"
SINK_ID = "78928ba23fb73b028c66459e79d29146_20ba6b65f97481d5570070de90e4e791"
SOURCE_ID = "78928ba23fb73b028c66459e79d29146_bc764cd8ddf7a0cff126f51c16239658"
JOB = "insert-into_default_catalog.default_database.customer_totals (f7a77b59f26b0857cc49597c4fddd05e)"
EG = "org.apache.flink.runtime.executiongraph.ExecutionGraph      "
DIST = "~[flink-dist-1.20.3.jar:1.20.3]"
RUNTIME = "~[flink-table-runtime-1.20.3.jar:1.20.3]"
JDBC = "~[flink-connector-jdbc-3.3.0-1.20.jar:3.3.0-1.20]"
MYSQL = "~[mysql-connector-j-8.0.33.jar:8.0.33]"
PG = "~[postgresql-42.7.4.jar:42.7.4]"


def prefix(name: str, folder: str, *, until: str) -> list[str]:
    """The recording's lines up to the first one matching ``until``, without the file source's split lines."""
    out = []
    for line in (RECORDING / name).read_text().splitlines():
        if re.search(until, line):
            break
        if re.search(r"StaticFileSplitEnumerator|LocalityAwareSplitAssigner|SourceReaderBase|SplitFetcher", line):
            continue
        out.append(line.replace("deser-json-poison", folder))
    return out


class Clock:
    def __init__(self, start: str):
        self.t = dt.datetime.strptime(start, "%Y-%m-%d %H:%M:%S,%f")

    def __call__(self, ms: int = 0) -> str:
        self.t += dt.timedelta(milliseconds=ms)
        return self.t.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def line(ts: str, level: str, logger: str, msg: str) -> str:
    return f"{ts} {level:<5} {logger:<60} [] - {msg}"


def task_frames() -> list[str]:
    """GroupAggregate -> Calc -> Sink chained, under a one-input task (flink-dist and flink-table-runtime 1.20.3)."""
    chain = [
        f"\tat org.apache.flink.streaming.runtime.tasks.CopyingChainingOutput.pushToOperator(CopyingChainingOutput.java:92) {DIST}",
        f"\tat org.apache.flink.streaming.runtime.tasks.CopyingChainingOutput.collect(CopyingChainingOutput.java:50) {DIST}",
        f"\tat org.apache.flink.streaming.runtime.tasks.CopyingChainingOutput.collect(CopyingChainingOutput.java:29) {DIST}",
        f"\tat org.apache.flink.streaming.api.operators.CountingOutput.collect(CountingOutput.java:60) {DIST}",
        f"\tat org.apache.flink.streaming.api.operators.CountingOutput.collect(CountingOutput.java:32) {DIST}",
        f"\tat org.apache.flink.streaming.api.operators.TimestampedCollector.collect(TimestampedCollector.java:52) {DIST}",
        f"\tat org.apache.flink.table.runtime.operators.aggregate.GroupAggFunction.processElement(GroupAggFunction.java:183) {RUNTIME}",
        f"\tat org.apache.flink.table.runtime.operators.aggregate.GroupAggFunction.processElement(GroupAggFunction.java:43) {RUNTIME}",
        f"\tat org.apache.flink.streaming.api.operators.KeyedProcessOperator.processElement(KeyedProcessOperator.java:83) {DIST}",
    ]
    n = (238, 157, 114, 65, 638, 231, 973, 917, 970, 949, 763, 575)
    task = [
        f"\tat org.apache.flink.streaming.runtime.tasks.OneInputStreamTask$StreamTaskNetworkOutput.emitRecord(OneInputStreamTask.java:{n[0]}) {DIST}",
        f"\tat org.apache.flink.streaming.runtime.io.AbstractStreamTaskNetworkInput.processElement(AbstractStreamTaskNetworkInput.java:{n[1]}) {DIST}",
        f"\tat org.apache.flink.streaming.runtime.io.AbstractStreamTaskNetworkInput.emitNext(AbstractStreamTaskNetworkInput.java:{n[2]}) {DIST}",
        f"\tat org.apache.flink.streaming.runtime.io.StreamOneInputProcessor.processInput(StreamOneInputProcessor.java:{n[3]}) {DIST}",
        f"\tat org.apache.flink.streaming.runtime.tasks.StreamTask.processInput(StreamTask.java:{n[4]}) {DIST}",
        f"\tat org.apache.flink.streaming.runtime.tasks.mailbox.MailboxProcessor.runMailboxLoop(MailboxProcessor.java:{n[5]}) {DIST}",
        f"\tat org.apache.flink.streaming.runtime.tasks.StreamTask.runMailboxLoop(StreamTask.java:{n[6]}) {DIST}",
        f"\tat org.apache.flink.streaming.runtime.tasks.StreamTask.invoke(StreamTask.java:{n[7]}) {DIST}",
        f"\tat org.apache.flink.runtime.taskmanager.Task.runWithSystemExitMonitoring(Task.java:{n[8]}) {DIST}",
        f"\tat org.apache.flink.runtime.taskmanager.Task.restoreAndInvoke(Task.java:{n[9]}) {DIST}",
        f"\tat org.apache.flink.runtime.taskmanager.Task.doRun(Task.java:{n[10]}) {DIST}",
        f"\tat org.apache.flink.runtime.taskmanager.Task.run(Task.java:{n[11]}) {DIST}",
        "\tat java.base/java.lang.Thread.run(Thread.java:840) [?:?]",
    ]
    return chain + task


def chained_failure(cause_head: str, cause_frames: list[str], more: int) -> list[str]:
    """The two ExceptionInChainedOperatorException wrappers (GroupAggregate -> Calc -> Sink) around the sink's error."""
    outer = ["org.apache.flink.streaming.runtime.tasks.ExceptionInChainedOperatorException: Could not forward element "
             "to next operator", *task_frames()]
    inner = ["Caused by: org.apache.flink.streaming.runtime.tasks.ExceptionInChainedOperatorException: Could not "
             "forward element to next operator",
             f"\tat org.apache.flink.streaming.runtime.tasks.CopyingChainingOutput.pushToOperator(CopyingChainingOutput.java:92) {DIST}",
             f"\tat org.apache.flink.streaming.runtime.tasks.CopyingChainingOutput.collect(CopyingChainingOutput.java:50) {DIST}",
             f"\tat org.apache.flink.streaming.runtime.tasks.CopyingChainingOutput.collect(CopyingChainingOutput.java:29) {DIST}",
             f"\tat org.apache.flink.streaming.api.operators.CountingOutput.collect(CountingOutput.java:60) {DIST}",
             f"\tat org.apache.flink.streaming.api.operators.CountingOutput.collect(CountingOutput.java:32) {DIST}",
             "\tat StreamExecCalc$27.processElement(Unknown Source) ~[?:?]",
             f"\tat org.apache.flink.streaming.runtime.tasks.CopyingChainingOutput.pushToOperator(CopyingChainingOutput.java:75) {DIST}",
             "\t... 23 more"]
    sink = [f"Caused by: {cause_head}", *cause_frames,
            f"\tat org.apache.flink.connector.jdbc.internal.GenericJdbcSinkFunction.invoke(GenericJdbcSinkFunction.java:58) {JDBC}",
            f"\tat org.apache.flink.table.runtime.operators.sink.SinkOperator.processElement(SinkOperator.java:65) {RUNTIME}",
            f"\tat org.apache.flink.streaming.runtime.tasks.CopyingChainingOutput.pushToOperator(CopyingChainingOutput.java:75) {DIST}",
            f"\t... {more} more"]
    return outer + inner + sink


SCHEDULER = [
    f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.attemptFlush(JdbcOutputFormat.java:198) {JDBC}",
    f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.flush(JdbcOutputFormat.java:172) {JDBC}",
    f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.lambda$open$0(JdbcOutputFormat.java:112) {JDBC}",
    "\tat java.base/java.util.concurrent.Executors$RunnableAdapter.call(Executors.java:539) [?:?]",
    "\tat java.base/java.util.concurrent.FutureTask.runAndReset(FutureTask.java:305) [?:?]",
    "\tat java.base/java.util.concurrent.ScheduledThreadPoolExecutor$ScheduledFutureTask.run(ScheduledThreadPoolExecutor.java:305) [?:?]",
    "\tat java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136) [?:?]",
    "\tat java.base/java.util.concurrent.ThreadPoolExecutor$Worker.run(ThreadPoolExecutor.java:635) [?:?]",
    "\tat java.base/java.lang.Thread.run(Thread.java:840) [?:?]",
]
EXECUTORS = [
    f"\tat org.apache.flink.connector.jdbc.statement.FieldNamedPreparedStatementImpl.executeBatch(FieldNamedPreparedStatementImpl.java:65) {JDBC}",
    f"\tat org.apache.flink.connector.jdbc.internal.executor.TableSimpleStatementExecutor.executeBatch(TableSimpleStatementExecutor.java:65) {JDBC}",
    f"\tat org.apache.flink.connector.jdbc.internal.executor.TableBufferReducedStatementExecutor.executeBatch(TableBufferReducedStatementExecutor.java:98) {JDBC}",
]


def mysql_batch_error(message: list[str], tail: list[str]) -> list[str]:
    """MySQL Connector/J 8.0.33: executeBatchSerially keeps going after a failed statement, then throws a
    BatchUpdateException over the first CommunicationsException; the driver's socket read ended (EOFException)."""
    first, *rest = message
    return [
        f"java.sql.BatchUpdateException: {first}", *rest,
        f"\tat com.mysql.cj.jdbc.exceptions.SQLError.createBatchUpdateException(SQLError.java:224) {MYSQL}",
        f"\tat com.mysql.cj.jdbc.ClientPreparedStatement.executeBatchSerially(ClientPreparedStatement.java:816) {MYSQL}",
        f"\tat com.mysql.cj.jdbc.ClientPreparedStatement.executeBatchInternal(ClientPreparedStatement.java:418) {MYSQL}",
        f"\tat com.mysql.cj.jdbc.StatementImpl.executeBatch(StatementImpl.java:795) {MYSQL}",
        *EXECUTORS, *tail,
        f"Caused by: com.mysql.cj.jdbc.exceptions.CommunicationsException: {first}", *rest,
        f"\tat com.mysql.cj.jdbc.exceptions.SQLError.createCommunicationsException(SQLError.java:175) {MYSQL}",
        f"\tat com.mysql.cj.jdbc.exceptions.SQLExceptionsMapping.translateException(SQLExceptionsMapping.java:64) {MYSQL}",
        f"\tat com.mysql.cj.jdbc.ClientPreparedStatement.executeInternal(ClientPreparedStatement.java:916) {MYSQL}",
        f"\tat com.mysql.cj.jdbc.ClientPreparedStatement.executeUpdateInternal(ClientPreparedStatement.java:1061) {MYSQL}",
        f"\tat com.mysql.cj.jdbc.ClientPreparedStatement.executeBatchSerially(ClientPreparedStatement.java:795) {MYSQL}",
        f"\t... {len(tail) + len(EXECUTORS) + 2} more",
        f"Caused by: com.mysql.cj.exceptions.CJCommunicationsException: {first}", *rest,
        f"\tat com.mysql.cj.exceptions.ExceptionFactory.createException(ExceptionFactory.java:61) {MYSQL}",
        f"\tat com.mysql.cj.exceptions.ExceptionFactory.createException(ExceptionFactory.java:105) {MYSQL}",
        f"\tat com.mysql.cj.exceptions.ExceptionFactory.createException(ExceptionFactory.java:150) {MYSQL}",
        f"\tat com.mysql.cj.exceptions.ExceptionFactory.createCommunicationsException(ExceptionFactory.java:166) {MYSQL}",
        f"\tat com.mysql.cj.protocol.a.NativeProtocol.readMessage(NativeProtocol.java:582) {MYSQL}",
        f"\tat com.mysql.cj.protocol.a.NativeProtocol.checkErrorMessage(NativeProtocol.java:762) {MYSQL}",
        f"\tat com.mysql.cj.NativeSession.execSQL(NativeSession.java:657) {MYSQL}",
        f"\tat com.mysql.cj.jdbc.ClientPreparedStatement.executeInternal(ClientPreparedStatement.java:893) {MYSQL}",
        "\t... 3 more",
        "Caused by: java.io.EOFException: Can not read response from server. Expected to read 4 bytes, read 0 bytes "
        "before connection was unexpectedly lost.",
        f"\tat com.mysql.cj.protocol.FullReadInputStream.readFully(FullReadInputStream.java:67) {MYSQL}",
        f"\tat com.mysql.cj.protocol.a.SimplePacketReader.readHeaderLocal(SimplePacketReader.java:81) {MYSQL}",
        f"\tat com.mysql.cj.protocol.a.SimplePacketReader.readHeader(SimplePacketReader.java:63) {MYSQL}",
        f"\tat com.mysql.cj.protocol.a.TimeTrackingPacketReader.readHeader(TimeTrackingPacketReader.java:52) {MYSQL}",
        f"\tat com.mysql.cj.protocol.a.TimeTrackingPacketReader.readHeader(TimeTrackingPacketReader.java:41) {MYSQL}",
        f"\tat com.mysql.cj.protocol.a.MultiPacketReader.readHeader(MultiPacketReader.java:54) {MYSQL}",
        f"\tat com.mysql.cj.protocol.a.MultiPacketReader.readHeader(MultiPacketReader.java:44) {MYSQL}",
        f"\tat com.mysql.cj.protocol.a.NativeProtocol.readMessage(NativeProtocol.java:576) {MYSQL}",
        "\t... 9 more",
    ]


def write(folder: pathlib.Path, files: dict[str, list[str] | str]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else "\n".join(content) + "\n")


# ------------------------------------------------------------------------ MySQL closed the idle connection, 1.20

IDLE_MESSAGE = [
    "The last packet successfully received from the server was 28,803,112 milliseconds ago. The last packet sent "
    "successfully to the server was 28,803,113 milliseconds ago. is longer than the server configured value of "
    "'wait_timeout'. You should consider either expiring and/or testing connection validity before use in your "
    "application, increasing the server configured values for client timeouts, or using the Connector/J connection "
    "property 'autoReconnect=true' to avoid this problem.",
]


def idle_wait_timeout(out: pathlib.Path) -> None:
    folder = "jdbc-idle-sink"
    jm = prefix(JM_LOG, folder, until=r"switched from RUNNING to FAILED|Received uncaught exception")
    tm = prefix(TM_LOG, folder, until=r"switched from RUNNING to FAILED|Received uncaught exception")
    clock = Clock("2026-11-29 06:18:25,861")  # eight hours after the job started writing
    batch = mysql_batch_error(IDLE_MESSAGE, SCHEDULER)
    first_ts = clock()
    tm.append(line(first_ts, "ERROR", "org.apache.flink.connector.jdbc.internal.JdbcOutputFormat",
                   "JDBC executeBatch error, retry times = 0"))
    tm += batch
    cause = ["java.lang.RuntimeException: Writing records to JDBC failed.",
             f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.checkFlushException(JdbcOutputFormat.java:138) {JDBC}",
             f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.writeRecord(JdbcOutputFormat.java:143) {JDBC}"]
    failure = chained_failure(cause[0], cause[1:], 23)
    failure += ["Caused by: java.io.IOException: java.sql.BatchUpdateException: " + IDLE_MESSAGE[0],
                f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.flush(JdbcOutputFormat.java:178) {JDBC}",
                f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.lambda$open$0(JdbcOutputFormat.java:112) {JDBC}",
                "\t... 6 more"]
    failure += ["Caused by: " + batch[0]] + batch[1:]
    attempt = f"{SINK_TASK} (1/1)#0 ({SINK_ID}_0_0)"
    ts = clock(1013)
    tm.append(line(ts, "WARN", "org.apache.flink.runtime.taskmanager.Task",
                   f"{attempt} switched from RUNNING to FAILED with failure cause:"))
    tm += failure
    tm.append(line(clock(1), "INFO", "org.apache.flink.runtime.taskmanager.Task",
                   f"Freeing task resources for {attempt}."))
    tm.append(line(clock(25), "INFO", "org.apache.flink.runtime.taskexecutor.TaskExecutor",
                   f"Un-registering task and sending final execution state FAILED to JobManager for task {SINK_TASK} "
                   f"(1/1)#0 {SINK_ID}_0_0."))
    jm.append(line(clock(56), "INFO", EG, f"{SINK_TASK} (1/1) ({SINK_ID}_0_0) switched from RUNNING to FAILED on "
                   "localhost:37083-c9bc6b @ localhost (dataPort=33291)."))
    jm += failure
    jm += [
        line(clock(6), "INFO", "org.apache.flink.runtime.jobmaster.JobMaster                ",
             f"2 tasks will be restarted to recover the failed task {SINK_ID}_0_0."),
        line(clock(0), "INFO", EG, f"Job {JOB} switched from state RUNNING to RESTARTING."),
        line(clock(0), "INFO", EG, f"Source: order_feed[1] (1/1) ({SOURCE_ID}_0_0) switched from RUNNING to CANCELING."),
        line(clock(28), "INFO", EG, f"Source: order_feed[1] (1/1) ({SOURCE_ID}_0_0) switched from CANCELING to CANCELED."),
        line(clock(4), "INFO", "org.apache.flink.runtime.resourcemanager.slotmanager.FineGrainedSlotManager",
             "Clearing resource requirements of job f7a77b59f26b0857cc49597c4fddd05e"),
        line(clock(1994), "INFO", EG, f"Job {JOB} switched from state RESTARTING to RUNNING."),
    ]
    base = out / "idle-wait-timeout-sink-1.20"
    conf = (RECORDING / "flink-conf.yaml").read_text().replace("deser-json-poison", folder)
    write(base, {JM_LOG: jm, TM_LOG: tm, "flink-conf.yaml": conf})


# ------------------------------------------------------------------------ PostgreSQL, every retry broke, 1.20

PG_MESSAGE = ("Batch entry 0 INSERT INTO customer_totals(customer, total) VALUES (('c-07'), ('1843.20'::numeric)) ON "
              "CONFLICT (customer) DO UPDATE SET customer=EXCLUDED.customer, total=EXCLUDED.total was aborted: An I/O "
              "error occurred while sending to the backend.  Call getNextException to see other errors in the batch.")


def pg_batch_error() -> list[str]:
    return [
        f"java.sql.BatchUpdateException: {PG_MESSAGE}",
        f"\tat org.postgresql.jdbc.BatchResultHandler.handleError(BatchResultHandler.java:162) {PG}",
        f"\tat org.postgresql.core.v3.QueryExecutorImpl.execute(QueryExecutorImpl.java:585) {PG}",
        f"\tat org.postgresql.jdbc.PgStatement.internalExecuteBatch(PgStatement.java:888) {PG}",
        f"\tat org.postgresql.jdbc.PgStatement.executeBatch(PgStatement.java:912) {PG}",
        f"\tat org.postgresql.jdbc.PgPreparedStatement.executeBatch(PgPreparedStatement.java:1739) {PG}",
        *EXECUTORS,
        f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.attemptFlush(JdbcOutputFormat.java:198) {JDBC}",
        f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.flush(JdbcOutputFormat.java:172) {JDBC}",
        f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.writeRecord(JdbcOutputFormat.java:151) {JDBC}",
        f"\tat org.apache.flink.connector.jdbc.internal.GenericJdbcSinkFunction.invoke(GenericJdbcSinkFunction.java:58) {JDBC}",
        f"\tat org.apache.flink.table.runtime.operators.sink.SinkOperator.processElement(SinkOperator.java:65) {RUNTIME}",
        "Caused by: org.postgresql.util.PSQLException: An I/O error occurred while sending to the backend.",
        f"\tat org.postgresql.core.v3.QueryExecutorImpl.execute(QueryExecutorImpl.java:586) {PG}",
        "\t... 12 more",
        "Caused by: java.net.SocketException: Connection reset",
        "\tat java.base/sun.nio.ch.NioSocketImpl.implRead(NioSocketImpl.java:323) ~[?:?]",
        "\tat java.base/sun.nio.ch.NioSocketImpl.read(NioSocketImpl.java:350) ~[?:?]",
        "\tat java.base/java.net.Socket$SocketInputStream.read(Socket.java:966) ~[?:?]",
        f"\tat org.postgresql.core.VisibleBufferedInputStream.readMore(VisibleBufferedInputStream.java:192) {PG}",
        f"\tat org.postgresql.core.VisibleBufferedInputStream.ensureBytes(VisibleBufferedInputStream.java:159) {PG}",
        f"\tat org.postgresql.core.VisibleBufferedInputStream.ensureBytes(VisibleBufferedInputStream.java:144) {PG}",
        f"\tat org.postgresql.core.VisibleBufferedInputStream.read(VisibleBufferedInputStream.java:76) {PG}",
        f"\tat org.postgresql.core.PGStream.receiveChar(PGStream.java:476) {PG}",
        f"\tat org.postgresql.core.v3.QueryExecutorImpl.processResults(QueryExecutorImpl.java:2174) {PG}",
        f"\tat org.postgresql.core.v3.QueryExecutorImpl.execute(QueryExecutorImpl.java:580) {PG}",
        "\t... 12 more",
    ]


def postgres_retries(out: pathlib.Path) -> None:
    folder = "jdbc-pg-sink"
    tm = prefix(TM_LOG, folder, until=r"switched from RUNNING to FAILED|Received uncaught exception")
    clock = Clock("2026-11-28 22:41:07,204")
    batch = pg_batch_error()
    for i in range(3):
        tm.append(line(clock(1000 * i + 37), "ERROR", "org.apache.flink.connector.jdbc.internal.JdbcOutputFormat",
                       f"JDBC executeBatch error, retry times = {i}"))
        tm += batch
    cause = ["java.io.IOException: Writing records to JDBC failed.",
             f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.writeRecord(JdbcOutputFormat.java:154) {JDBC}"]
    failure = chained_failure(cause[0], cause[1:], 23)
    failure += [f"Caused by: java.io.IOException: java.sql.BatchUpdateException: {PG_MESSAGE}",
                f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.flush(JdbcOutputFormat.java:178) {JDBC}",
                f"\tat org.apache.flink.connector.jdbc.internal.JdbcOutputFormat.writeRecord(JdbcOutputFormat.java:151) {JDBC}",
                "\t... 29 more"]
    failure += ["Caused by: " + batch[0]] + batch[1:]
    attempt = f"{SINK_TASK} (1/1)#0 ({SINK_ID}_0_0)"
    tm.append(line(clock(12), "WARN", "org.apache.flink.runtime.taskmanager.Task",
                   f"{attempt} switched from RUNNING to FAILED with failure cause:"))
    tm += failure
    tm.append(line(clock(1), "INFO", "org.apache.flink.runtime.taskmanager.Task", f"Freeing task resources for {attempt}."))
    write(out / "postgres-retries-exhausted-1.20", {TM_LOG: tm})


# ------------------------------------------------------------------------ pasted: a lookup could not reconnect

LOOKUP_TRACE = """java.lang.RuntimeException: Reestablish JDBC connection failed
	at org.apache.flink.connector.jdbc.core.table.source.JdbcRowDataLookupFunction.lookup(JdbcRowDataLookupFunction.java:176)
	at org.apache.flink.table.functions.LookupFunction.eval(LookupFunction.java:52)
	at LookupFunction$14.flatMap(Unknown Source)
	at org.apache.flink.table.runtime.operators.join.lookup.LookupJoinRunner.doFetch(LookupJoinRunner.java:110)
	at org.apache.flink.table.runtime.operators.join.lookup.LookupJoinRunner.processElement(LookupJoinRunner.java:92)
	at org.apache.flink.table.runtime.operators.join.lookup.LookupJoinRunner.processElement(LookupJoinRunner.java:35)
	at org.apache.flink.streaming.api.operators.ProcessOperator.processElement(ProcessOperator.java:66)
Caused by: com.mysql.cj.jdbc.exceptions.CommunicationsException: Communications link failure

The last packet sent successfully to the server was 0 milliseconds ago. The driver has not received any packets from the server.
	at com.mysql.cj.jdbc.exceptions.SQLError.createCommunicationsException(SQLError.java:175)
	at com.mysql.cj.jdbc.exceptions.SQLExceptionsMapping.translateException(SQLExceptionsMapping.java:64)
	at com.mysql.cj.jdbc.ConnectionImpl.createNewIO(ConnectionImpl.java:825)
	at com.mysql.cj.jdbc.ConnectionImpl.<init>(ConnectionImpl.java:446)
	at com.mysql.cj.jdbc.ConnectionImpl.getInstance(ConnectionImpl.java:239)
	at com.mysql.cj.jdbc.NonRegisteringDriver.connect(NonRegisteringDriver.java:188)
	at org.apache.flink.connector.jdbc.datasource.connections.SimpleJdbcConnectionProvider.getOrEstablishConnection(SimpleJdbcConnectionProvider.java:123)
	at org.apache.flink.connector.jdbc.core.table.source.JdbcRowDataLookupFunction.establishConnectionAndStatement(JdbcRowDataLookupFunction.java:190)
	at org.apache.flink.connector.jdbc.core.table.source.JdbcRowDataLookupFunction.lookup(JdbcRowDataLookupFunction.java:170)
	... 31 more
Caused by: com.mysql.cj.exceptions.CJCommunicationsException: Communications link failure

The last packet sent successfully to the server was 0 milliseconds ago. The driver has not received any packets from the server.
	at com.mysql.cj.exceptions.ExceptionFactory.createCommunicationsException(ExceptionFactory.java:166)
	at com.mysql.cj.protocol.a.NativeSocketConnection.connect(NativeSocketConnection.java:89)
	at com.mysql.cj.NativeSession.connect(NativeSession.java:120)
	at com.mysql.cj.jdbc.ConnectionImpl.connectOneTryOnly(ConnectionImpl.java:945)
	at com.mysql.cj.jdbc.ConnectionImpl.createNewIO(ConnectionImpl.java:815)
	... 36 more
Caused by: java.net.ConnectException: Connection refused
	at java.base/sun.nio.ch.Net.pollConnect(Native Method)
	at java.base/sun.nio.ch.Net.pollConnectNow(Net.java:672)
"""


def pasted_lookup(out: pathlib.Path) -> None:
    write(out / "ticket-lookup-reconnect-refused", {"ticket.txt": LOOKUP_TRACE})


# ------------------------------------------------------------------------ near miss: a key conflict, not a connection

NEAR_MISS = f"""Our JDBC sink keeps restarting, the TaskManager log says:

2026-11-28 23:02:11,418 ERROR org.apache.flink.connector.jdbc.internal.JdbcOutputFormat        [] - JDBC executeBatch error, retry times = 0
java.sql.BatchUpdateException: Duplicate entry 'c-07-2026-11-28' for key 'daily_totals.PRIMARY'
	at com.mysql.cj.jdbc.exceptions.SQLError.createBatchUpdateException(SQLError.java:224) {MYSQL}
	at com.mysql.cj.jdbc.ClientPreparedStatement.executeBatchSerially(ClientPreparedStatement.java:816) {MYSQL}
	at com.mysql.cj.jdbc.ClientPreparedStatement.executeBatchInternal(ClientPreparedStatement.java:418) {MYSQL}
	at com.mysql.cj.jdbc.StatementImpl.executeBatch(StatementImpl.java:795) {MYSQL}
	at org.apache.flink.connector.jdbc.statement.FieldNamedPreparedStatementImpl.executeBatch(FieldNamedPreparedStatementImpl.java:65) {JDBC}
Caused by: java.sql.SQLIntegrityConstraintViolationException: Duplicate entry 'c-07-2026-11-28' for key 'daily_totals.PRIMARY'
	at com.mysql.cj.jdbc.exceptions.SQLError.createSQLException(SQLError.java:117) {MYSQL}
	at com.mysql.cj.jdbc.exceptions.SQLExceptionsMapping.translateException(SQLExceptionsMapping.java:122) {MYSQL}
	... 14 more
2026-11-28 23:02:14,431 ERROR org.apache.flink.connector.jdbc.internal.JdbcOutputFormat        [] - JDBC executeBatch error, retry times = 3
java.sql.BatchUpdateException: Duplicate entry 'c-07-2026-11-28' for key 'daily_totals.PRIMARY'
"""


def near_miss(out: pathlib.Path) -> None:
    write(out / "near-miss-duplicate-key-1.20", {"ticket.txt": NEAR_MISS})


if __name__ == "__main__":
    target = pathlib.Path(sys.argv[1])
    idle_wait_timeout(target)
    postgres_retries(target)
    pasted_lookup(target)
    near_miss(target)
