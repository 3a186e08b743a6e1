"""Write the example incidents of cdc-binlog-unavailable.

No MySQL server runs where the examples are made, so these incidents are written, not recorded. The JobManager's and
TaskManager's surrounding lines (start-up, a stop-with-savepoint, the start from that savepoint, the task's states)
are those of a genuine Flink 1.20.3 recording, savepoint-state-unmapped/healthy-1.20.3, with neutral adjustments
(folder and operator names, the second run moved days later); the source's lines and its failure are written from
the sources of Flink CDC 3.3.0 (StatefulTaskContext, BinlogSplitReader, MySqlSplitReader, with their line numbers;
BinlogOffset's map printed in Java's HashMap order) and Debezium 1.9.8 (the SourceInfo struct, the wrap of the
server's error), Flink's frames from a genuine 1.20.3 trace (SourceReaderBase, SplitFetcher).

    .venv/bin/python scripts/record/cdc-binlog-unavailable/write_examples.py data/cdc-binlog-unavailable
"""
from __future__ import annotations

import datetime as dt
import pathlib
import re
import sys

RECORDING = pathlib.Path(__file__).resolve().parents[3] / "data/savepoint-state-unmapped/healthy-1.20.3"
JM_LOG = "log/flink-flink-standalonesession-0-vm.log"
TM_LOG = "log/flink-flink-taskexecutor-0-vm.log"
TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")
SECOND_RUN = "2026-11-24 21:45:18,835"  # the submission that starts from the savepoint
RENAMES = (("Source: numbers -> pace", "Source: orders_cdc[1] -> Calc[2]"), ("Source: numbers", "Source: orders_cdc[1]"),
           ("counter -> Sink: sink", "GroupAggregate[4] -> Sink: order_totals[5]"), ("unmapped-healthy", "cdc-orders"))
CDC = "~[flink-sql-connector-mysql-cdc-3.3.0.jar:3.3.0]"
FILES = "~[flink-connector-files-1.20.3.jar:1.20.3]"
DIST = "~[flink-dist-1.20.3.jar:1.20.3]"
PKG = "org.apache.flink.cdc.connectors.mysql"
SOURCE_ATTEMPT = "Source: orders_cdc[1] -> Calc[2] (1/1)#0 (010885735ecec0b0a6788e7e3b916624_ca88eee0095684d687a1b6495617f957_0_0)"
SOURCE_EXEC = "Source: orders_cdc[1] -> Calc[2] (1/1) (010885735ecec0b0a6788e7e3b916624_ca88eee0095684d687a1b6495617f957_0_0)"
SINK_EXEC = ("GroupAggregate[4] -> Sink: order_totals[5] (1/1) "
             "(010885735ecec0b0a6788e7e3b916624_0da08f51eaa85fc298e176a139b3649a_0_0)")
EG = "org.apache.flink.runtime.executiongraph.ExecutionGraph"


def shifted(lines: list[str], after: str, delta: dt.timedelta) -> list[str]:
    """The recording's lines, renamed, with every time from ``after`` on moved by ``delta``."""
    out = []
    for line in lines:
        for old, new in RENAMES:
            line = line.replace(old, new)
        m = TS.match(line)
        if m and m.group(1) >= after:
            t = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f") + delta
            line = t.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3] + line[len(m.group(1)):]
        out.append(line)
    return out


def upto(name: str, pattern: str) -> list[str]:
    lines = (RECORDING / name).read_text().splitlines()
    return lines[:next(i for i, line in enumerate(lines) if re.search(pattern, line))]


def line(ts: str, level: str, logger: str, msg: str) -> str:
    return f"{ts} {level:<5} {logger:<60} [] - {msg}"


def reader_failure(cause: list[str], reader_frames: list[str], more: int) -> list[str]:
    """The source reader's wrappers (flink-connector-base as the 1.20.3 recording prints it) around the split reader's
    exception."""
    return [
        "java.lang.RuntimeException: One or more fetchers have encountered exception",
        f"\tat org.apache.flink.connector.base.source.reader.fetcher.SplitFetcherManager.checkErrors(SplitFetcherManager.java:333) {FILES}",
        f"\tat org.apache.flink.connector.base.source.reader.SourceReaderBase.getNextFetch(SourceReaderBase.java:228) {FILES}",
        f"\tat org.apache.flink.connector.base.source.reader.SourceReaderBase.pollNext(SourceReaderBase.java:190) {FILES}",
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
        "Caused by: java.lang.RuntimeException: SplitFetcher thread 0 received unexpected exception while polling the records",
        f"\tat org.apache.flink.connector.base.source.reader.fetcher.SplitFetcher.runOnce(SplitFetcher.java:168) {FILES}",
        f"\tat org.apache.flink.connector.base.source.reader.fetcher.SplitFetcher.run(SplitFetcher.java:117) {FILES}",
        "\tat java.base/java.util.concurrent.Executors$RunnableAdapter.call(Executors.java:539) ~[?:?]",
        "\tat java.base/java.util.concurrent.FutureTask.run(FutureTask.java:264) ~[?:?]",
        "\tat java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136) ~[?:?]",
        "\tat java.base/java.util.concurrent.ThreadPoolExecutor$Worker.run(ThreadPoolExecutor.java:635) ~[?:?]",
        "\t... 1 more",
        f"Caused by: {cause[0]}", *cause[1:], *reader_frames,
        f"\tat {PKG}.source.reader.MySqlSplitReader.pollSplitRecords(MySqlSplitReader.java:112) {CDC}",
        f"\tat {PKG}.source.reader.MySqlSplitReader.fetch(MySqlSplitReader.java:83) {CDC}",
        f"\tat org.apache.flink.connector.base.source.reader.fetcher.FetchTask.run(FetchTask.java:58) {FILES}",
        f"\tat org.apache.flink.connector.base.source.reader.fetcher.SplitFetcher.runOnce(SplitFetcher.java:165) {FILES}",
        f"\t... {more} more",
    ]


CHECK_FRAMES = [
    f"\tat {PKG}.debezium.task.context.StatefulTaskContext.loadStartingOffsetState(StatefulTaskContext.java:205) {CDC}",
    f"\tat {PKG}.debezium.task.context.StatefulTaskContext.configure(StatefulTaskContext.java:129) {CDC}",
    f"\tat {PKG}.debezium.reader.BinlogSplitReader.submitSplit(BinlogSplitReader.java:118) {CDC}",
]


def check_message(file: str, pos: int, ts_ms: int) -> str:
    """StatefulTaskContext's message over Debezium's SourceInfo struct (Kafka Connect's Struct#toString, non-null
    fields in schema order)."""
    struct = (f"Struct{{version=1.9.8.Final,connector=mysql,name=mysql_binlog_source,ts_ms={ts_ms},db=,server_id=0,"
              f"file={file},pos={pos},row=0}}")
    return (f"java.lang.IllegalStateException: The connector is trying to read binlog starting at {struct}, but this "
            "is no longer available on the server. Reconfigure the connector to use a snapshot when needed.")


def write(folder: pathlib.Path, files: dict[str, list[str] | str]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else "\n".join(content) + "\n")


def epoch_ms(ts: str) -> int:
    return int(dt.datetime.strptime(ts, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


# ------------------------------------------------------------------- the job resumed from a savepoint 9 days later

def savepoint_after_downtime(out: pathlib.Path) -> None:
    delta = dt.timedelta(days=9, hours=11, minutes=32, seconds=10, milliseconds=417)
    jm = shifted(upto(JM_LOG, r"switched from state RUNNING to CANCELLING"), SECOND_RUN, delta)
    tm = shifted(upto(TM_LOG, r"2026-11-24 21:45:23,774"), SECOND_RUN, delta)
    last_event = "2026-11-24 21:45:05,912"  # the source's last binlog event before the savepoint
    offset = (f"{{ts_sec={epoch_ms(last_event) // 1000}, file=mysql-bin.000123, pos=88213, kind=SPECIFIC, row=0, "
              "event=2, server_id=1}")
    t0 = dt.datetime(2026, 12, 4, 9, 17, 29, 611000)

    def at(ms: int) -> str:
        return (t0 + dt.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]

    context = f"{PKG}.debezium.task.context.StatefulTaskContext"
    tm += [
        line(at(0), "INFO", f"{PKG}.source.reader.MySqlSourceReader", "Source reader 0 adds split(s) [MySqlBinlogSplit"
             "{splitId='binlog-split', offset=" + offset + ", endOffset={ts_sec=0, file=, pos=-9223372036854775808, "
             "kind=NON_STOPPING, row=0, event=0}, isSuspended=false}]"),
        line(at(412), "INFO", context, f"Starting offset is initialized to {offset}"),
        line(at(431), "INFO", context, "Connector requires binlog file 'mysql-bin.000123', but MySQL only has "
             "mysql-bin.000131, mysql-bin.000132, mysql-bin.000133"),
    ]
    check = check_message("mysql-bin.000123", 88213, epoch_ms(at(433)))
    failure = reader_failure([check], CHECK_FRAMES, 6)
    tm += [line(at(448), "WARN", "org.apache.flink.runtime.taskmanager.Task",
                f"{SOURCE_ATTEMPT} switched from RUNNING to FAILED with failure cause:"), *failure,
           line(at(449), "INFO", "org.apache.flink.runtime.taskmanager.Task", f"Freeing task resources for {SOURCE_ATTEMPT}.")]
    jm += [line(at(497), "INFO", EG, f"{SOURCE_EXEC} switched from RUNNING to FAILED on localhost:40435-93d5f8 @ "
                "localhost (dataPort=38227)."), *failure,
           line(at(503), "INFO", "org.apache.flink.runtime.jobmaster.JobMaster",
                "2 tasks will be restarted to recover the failed task "
                "010885735ecec0b0a6788e7e3b916624_ca88eee0095684d687a1b6495617f957_0_0."),
           line(at(503), "INFO", EG, "Job order-counter (0c81906694adfe199ad0331187864186) switched from state RUNNING "
                "to RESTARTING."),
           line(at(504), "INFO", EG, f"{SINK_EXEC} switched from RUNNING to CANCELING."),
           line(at(521), "INFO", EG, f"{SINK_EXEC} switched from CANCELING to CANCELED.")]
    conf = (RECORDING / "flink-conf.yaml").read_text().replace("unmapped-healthy", "cdc-orders")
    write(out / "savepoint-restore-after-downtime-1.20", {JM_LOG: jm, TM_LOG: tm, "flink-conf.yaml": conf})


# ------------------------------------------------------------------- restarted against a promoted replica (GTIDs)

OLD_UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
NEW_UUID = "7d3a9b41-0c5e-11ef-8a6b-0242ac120003"


def failover_gtids(out: pathlib.Path) -> None:
    tm = shifted(upto(TM_LOG, r"2026-11-24 21:45:06,433"), "9999", dt.timedelta())
    t0 = dt.datetime(2026, 11, 24, 23, 2, 41, 118000)

    def at(ms: int) -> str:
        return (t0 + dt.timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]

    context = f"{PKG}.debezium.task.context.StatefulTaskContext"
    offset = (f"{{ts_sec=1764025349, file=mysql-bin.000412, pos=5127733, kind=SPECIFIC, gtids={OLD_UUID}:1-104811, "
              "row=0, event=1, server_id=1}")
    tm += [
        line(at(0), "INFO", context, f"Starting offset is initialized to {offset}"),
        line(at(9), "INFO", context, f"Merging server GTID set {NEW_UUID}:1-88420 with restored GTID set "
             f"{OLD_UUID}:1-104811"),
        line(at(10), "INFO", context, f"Merged GTID set is {OLD_UUID}:1-104811"),
        line(at(11), "INFO", context, f"Connector last known GTIDs are {OLD_UUID}:1-104811, but MySQL has "
             f"{NEW_UUID}:1-88420"),
    ]
    check = check_message("mysql-bin.000412", 5127733, epoch_ms(at(12)))
    attempt = ("Source: orders_cdc[1] -> Calc[2] (1/1)#1 "
               "(7606abdb3387a21c4497a51294b60bd3_ca88eee0095684d687a1b6495617f957_0_1)")
    tm += [line(at(27), "WARN", "org.apache.flink.runtime.taskmanager.Task",
                f"{attempt} switched from RUNNING to FAILED with failure cause:"), *reader_failure([check], CHECK_FRAMES, 6),
           line(at(28), "INFO", "org.apache.flink.runtime.taskmanager.Task", f"Freeing task resources for {attempt}.")]
    write(out / "failover-replica-gtids-1.20", {TM_LOG: tm})


# ------------------------------------------------------------------- pasted: the server's error 1236, nothing else

PASTED = """Caused by: io.debezium.DebeziumException: Could not find first log file name in binary log index file Error code: 1236; SQLSTATE: HY000.
	at io.debezium.connector.mysql.MySqlStreamingChangeEventSource.wrap(MySqlStreamingChangeEventSource.java:1489)
	at io.debezium.connector.mysql.MySqlStreamingChangeEventSource$ReaderThreadLifecycleListener.onCommunicationFailure(MySqlStreamingChangeEventSource.java:1545)
	... 4 more
Caused by: com.github.shyiko.mysql.binlog.network.ServerException: Could not find first log file name in binary log index file
	at com.github.shyiko.mysql.binlog.BinaryLogClient.listenForEventPackets(BinaryLogClient.java:1043)
	... 3 more
"""


def pasted(out: pathlib.Path) -> None:
    write(out / "ticket-error-1236-trace", {"ticket.txt": PASTED})


# ------------------------------------------------------------------- near miss: a table whose schema is unknown

NEAR_MISS = """The CDC job fails right after we added shop.refunds to 'table-name':

Caused by: io.debezium.DebeziumException: Encountered change event for table shop.refunds whose schema isn't known to this connector
	at io.debezium.connector.mysql.MySqlStreamingChangeEventSource.informAboutUnknownTableIfRequired(MySqlStreamingChangeEventSource.java:754)
	at io.debezium.connector.mysql.MySqlStreamingChangeEventSource.handleUpdateTableMetadata(MySqlStreamingChangeEventSource.java:721)
"""


def near_miss(out: pathlib.Path) -> None:
    write(out / "near-miss-schema-unknown", {"ticket.txt": NEAR_MISS})


if __name__ == "__main__":
    target = pathlib.Path(sys.argv[1])
    savepoint_after_downtime(target)
    failover_gtids(target)
    pasted(target)
    near_miss(target)
