"""Multi-line record assembly: chains, truncation, orphans, bare excerpts."""
from __future__ import annotations

import pytest

from flink_runbooks.parse.records import RecordAssembler, assemble

TOLERABLE_JM = """\
2026-11-22 02:54:11,389 INFO  org.apache.flink.runtime.jobmaster.JobMaster                 [] - Trying to recover from a global failure.
org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to Asynchronous task checkpoint failed., view the Checkpoint History tab or the Job Manager log to find out why continuous checkpoints failed.
\tat org.apache.flink.runtime.checkpoint.CheckpointFailureManager.checkFailureAgainstCounter(CheckpointFailureManager.java:212) ~[flink-dist-1.20.3.jar:1.20.3]
\tat java.lang.Thread.run(Thread.java:840) ~[?:?]
Caused by: org.apache.flink.util.SerializedThrowable: java.io.IOException: Mkdirs failed to create file:/ckpt/chk-3
\t... 4 more
2026-11-22 02:54:11,473 INFO  org.apache.flink.runtime.source.coordinator.SourceCoordinator [] - Marking checkpoint 3 as aborted.
"""

ROCKSDB_BLOG_EXCERPT = """\
2023-06-14 23:42:46
java.lang.Exception: Exception while creating StreamOperatorStateContext.
    at org.apache.flink.streaming.api.operators.StreamTaskStateInitializerImpl.streamOperatorStateContext(StreamTaskStateInitializerImpl.java:256)
Caused by: org.apache.flink.util.FlinkException: Could not restore keyed state backend for WindowOperator_e86e186b46037831968ebb9b688675bc_(1/2) from any of the 1 provided restore options.
    ... 11 more
Caused by: org.rocksdb.RocksDBException: Bad table magic number: expected 9863518390377041911, found 17223112372431451250 in /tmp/tm_10.9.2.0:6122-c46d5f/tmp/job_x/db/000210.sst
    at org.rocksdb.RocksDB.open(Native Method)"""


def test_chain_of_a_jobmanager_failure_with_serialized_throwable_unwrapped():
    recs = assemble(TOLERABLE_JM.splitlines())
    assert len(recs) == 2
    first = recs[0]
    assert first.message == "Trying to recover from a global failure."
    assert [c["cls"] for c in first.chain] == ["org.apache.flink.util.FlinkRuntimeException", "java.io.IOException"]
    assert first.chain[1]["kind"] == "caused_by"
    assert first.chain[1]["message"].startswith("Mkdirs failed")
    assert first.truncated
    assert recs[1].chain == []


def test_bare_excerpt_without_timestamps_and_cut_off():
    recs = assemble(ROCKSDB_BLOG_EXCERPT.splitlines())
    chained = [r for r in recs if r.chain]
    assert len(chained) == 1
    chain = chained[0].chain
    assert chain[0]["cls"] == "java.lang.Exception"
    assert chain[-1]["cls"] == "org.rocksdb.RocksDBException"
    assert chain[-1]["message"].startswith("Bad table magic number")


def test_unkept_header_does_not_adopt_the_next_stack_trace():
    """A stack trace under a header that Spark did not keep must not be glued onto an earlier kept record."""
    asm = RecordAssembler()
    out = []
    out.append(asm.feed(0, True, "2024-01-01 00:00:00,000 WARN  a.B [] - kept warning"))
    out.append(asm.feed(1, True, None))  # INFO header, not kept
    out.append(asm.feed(2, False, "org.apache.kafka.common.errors.DisconnectException: null"))
    out.append(asm.close())
    recs = [r for r in out if r]
    assert recs[0].message == "kept warning" and recs[0].chain == []
    assert recs[1].chain[0]["cls"].endswith("DisconnectException")
    assert recs[1].line_index == 2 and recs[1].ts is None


def test_second_top_level_exception_starts_a_new_record():
    lines = ["java.lang.IllegalStateException: first", "\tat a.B.c(B.java:1)",
             "java.lang.OutOfMemoryError: Java heap space"]
    recs = assemble(lines)
    assert [r.chain[0]["cls"] for r in recs] == ["java.lang.IllegalStateException", "java.lang.OutOfMemoryError"]


def test_a_pasted_message_after_a_trace_is_the_next_record_with_its_own_message():
    lines = ["Discarding checkpoint 42 of job 0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c.",
             "org.apache.flink.runtime.checkpoint.decline.CheckpointDeclineTaskNotReadyException: Task Source (3/3) was not running",
             "\tat org.apache.flink.runtime.taskmanager.Task$1.run(Task.java:1166)",
             "Source (1/3) (51e930268c63effa) switched from RUNNING to FAILED.",
             "java.lang.Exception: Could not materialize checkpoint 42 for operator Source (1/3).",
             "\tat org.apache.flink.streaming.runtime.tasks.StreamTask$AsyncCheckpointRunnable.run(StreamTask.java:884)"]
    first, second = assemble(lines)
    assert first.message.startswith("Discarding checkpoint 42") and first.chain[0]["message"] == "Task Source (3/3) was not running"
    assert second.message.endswith("switched from RUNNING to FAILED.") and second.line_index == 3
    assert second.chain[0]["message"] == "Could not materialize checkpoint 42 for operator Source (1/3)."


def test_a_json_record_whose_trace_field_holds_two_records_gives_both():
    trace = ("Discarding checkpoint 42 of job 0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c.\\n"
             "java.lang.IllegalStateException: first\\n\\tat a.B.c(B.java:1)\\n"
             "Source (1/3) switched from RUNNING to FAILED.\\n"
             "java.io.IOException: second\\n\\tat a.B.d(B.java:2)")
    recs = assemble(['{"level": "ERROR", "stack_trace": "' + trace + '"}'])
    assert [r.chain[0]["cls"] for r in recs] == ["java.lang.IllegalStateException", "java.io.IOException"]
    assert recs[0].message.startswith("Discarding checkpoint 42") and recs[1].level == "ERROR"


def test_kafka_config_dump_lines_become_the_body():
    lines = ["2024-01-01 00:00:00,000 INFO  org.apache.kafka.clients.consumer.ConsumerConfig [] - ConsumerConfig values: ",
             "\tallow.auto.create.topics = true", "\treconnect.backoff.ms = 50",
             "2024-01-01 00:00:00,001 INFO  a.B [] - next"]
    recs = assemble(lines)
    assert recs[0].body == ["allow.auto.create.topics = true", "reconnect.backoff.ms = 50"]


def test_wrapped_message_continues_the_last_exception():
    lines = ["2023-04-10 13:48:39,366 WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to",
             "Caused by: java.io.IOException: Target file file:/opt/flink/pm/checkpoint/000000006e6b13320000000000000000/chk-1",
             "/_metadata already exists."]
    recs = assemble(lines)
    assert recs[0].chain[0]["message"].endswith("chk-1 /_metadata already exists.")


# ------------------------------------------------------------------------------------------- pasted and wrapped text

def _chain(lines):
    return [r.chain for r in assemble(lines) if r.chain]


def test_a_message_wrapped_by_a_ticket_tool_is_joined_back():
    lines = ["org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException: Connection unexpectedly",
             "closed by remote task manager 'tm-3/10.0.0.3:40000'. This might indicate that the remote task manager",
             "was lost."]
    [chain] = _chain(lines)
    assert chain[0]["message"] == ("Connection unexpectedly closed by remote task manager 'tm-3/10.0.0.3:40000'. This "
                                   "might indicate that the remote task manager was lost.")


def test_a_class_name_cut_in_two_and_a_record_cut_after_its_level_are_joined_back():
    lines = ["2019-11-07 16:12:30,140 INFO",
             "org.apache.flink.runtime.executiongraph.ExecutionGraph        - Job enrich (4f7b5c3a2e1d0c9b8a7f6e5d4c3b2a10)",
             "switched from state RUNNING to FAILING.",
             "org.apache.flink.runtime.checkpoint.decline.CheckpointDeclineTaskNotReadyExcepti",
             "on: Task Source: Custom Source (2/4) was not running"]
    [rec] = assemble(lines)
    assert rec.level == "INFO" and rec.logger.endswith("ExecutionGraph")
    assert rec.message == "Job enrich (4f7b5c3a2e1d0c9b8a7f6e5d4c3b2a10) switched from state RUNNING to FAILING."
    assert rec.chain[0]["cls"] == "org.apache.flink.runtime.checkpoint.decline.CheckpointDeclineTaskNotReadyException"
    assert rec.chain[0]["message"] == "Task Source: Custom Source (2/4) was not running"


def test_a_json_escaped_trace_on_one_line_is_read_as_its_lines():
    line = ('"stack_trace": "java.lang.IllegalStateException: boom\\n\\tat com.acme.A.b(A.java:1)\\n'
            'Caused by: java.io.IOException: No space left on device"')
    [chain] = _chain([line])
    assert [c["cls"] for c in chain] == ["java.lang.IllegalStateException", "java.io.IOException"]


def test_docker_json_log_lines_are_read_as_the_lines_they_wrap():
    import json

    raw = ["2024-05-02 08:15:01,120 WARN  org.apache.flink.runtime.taskmanager.Task [] - Task failed.",
           "java.lang.IllegalStateException: boom", "\tat com.acme.A.b(A.java:1)", "Caused by: java.io.IOException: x"]
    lines = [json.dumps({"log": r + "\n", "stream": "stdout", "time": "2024-05-02T08:15:01Z"}) for r in raw]
    [rec] = assemble(lines)
    assert rec.level == "WARN" and [c["kind"] for c in rec.chain] == ["top", "caused_by"]
    assert rec.frames == ["at com.acme.A.b(A.java:1)"]


_FLINK_LINE = "2024-03-05 11:02:17,433 WARN  org.apache.flink.runtime.taskmanager.Task [] - Map (1/1)#0 switched " \
              "from RUNNING to FAILED with failure cause:"
_SHIPPED_TRACE = "java.io.IOException: Could not flush\n\tat com.acme.Sink.flush(Sink.java:7)\n" \
                 "Caused by: java.net.SocketTimeoutException: Read timed out\n\tat java.net.Socket.read(Socket.java:1)"
_LOGGER = "org.apache.flink.runtime.taskmanager.Task"
# How log shippers and log stores export one Flink record whose trace was folded into the same document (their
# documented field names): the process's own line in a field, or the fields apart with the trace in one of them.
SHIPPED_EXPORTS = {
    "fluent-bit multiline, kubernetes filter": {"date": 1709636537.433, "log": _FLINK_LINE + "\n" + _SHIPPED_TRACE,
                                                "kubernetes": {"pod_name": "orders-taskmanager-1-1"}},
    "docker json-file joined by a multiline parser": {"log": _FLINK_LINE + "\n" + _SHIPPED_TRACE + "\n",
                                                      "stream": "stdout", "time": "2024-03-05T11:02:17.433Z"},
    "Elasticsearch hit": {"_index": "logs-flink", "_id": "x1", "_source": {
        "@timestamp": "2024-03-05T11:02:17.433Z", "message": _FLINK_LINE + "\n" + _SHIPPED_TRACE}},
    "Google Cloud Logging text entry": {"textPayload": _FLINK_LINE + "\n" + _SHIPPED_TRACE, "severity": "WARNING",
                                        "timestamp": "2024-03-05T11:02:17.433Z"},
    "CloudWatch export": {"timestamp": 1709636537433, "message": _FLINK_LINE + "\n" + _SHIPPED_TRACE},
    "ECS, nested error": {"@timestamp": "2024-03-05T11:02:17.433Z", "log": {"level": "WARN", "logger": _LOGGER},
                          "message": "Map (1/1)#0 switched from RUNNING to FAILED with failure cause:",
                          "error": {"stack_trace": _SHIPPED_TRACE}},
    "message holding its trace": {"@timestamp": "2024-03-05T11:02:17.433Z", "level": "WARN", "logger_name": _LOGGER,
                                  "message": "Map (1/1)#0 switched from RUNNING to FAILED with failure cause:\n"
                                             + _SHIPPED_TRACE},
}


@pytest.mark.parametrize("shape", SHIPPED_EXPORTS)
def test_a_record_exported_by_a_log_shipper_keeps_its_trace(shape):
    import json

    [rec] = assemble([json.dumps(SHIPPED_EXPORTS[shape])])
    assert rec.level == "WARN" and rec.ts.startswith("2024-03-05 11:02:17"), (rec.level, rec.ts)
    assert rec.message.startswith("Map (1/1)#0 switched from RUNNING to FAILED")
    assert [c["cls"] for c in rec.chain] == ["java.io.IOException", "java.net.SocketTimeoutException"]
    assert rec.frames[0] == "at com.acme.Sink.flush(Sink.java:7)"


def test_kubernetes_prefixed_stack_traces_stay_one_record():
    prefix = "2024-05-02T08:15:01.123456789Z stdout F "
    lines = [prefix + "2024-05-02 08:15:01,120 ERROR org.apache.flink.runtime.taskmanager.Task [] - Task failed.",
             prefix + "java.lang.IllegalStateException: boom", prefix + "\tat com.acme.A.b(A.java:1)",
             prefix + "Caused by: java.io.IOException: x", prefix]
    recs = assemble(lines)
    assert len(recs) == 1 and len(recs[0].chain) == 2 and recs[0].frames == ["at com.acme.A.b(A.java:1)"]


def test_a_line_left_short_by_a_wrap_before_a_long_word_is_joined_back_with_its_space():
    # Wrapped at 80: the task id did not fit after "from task", nor the job id after "of job".
    lines = ["2025-04-02 14:09:56,988 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Received late",
             "message for now expired checkpoint attempt 57 from task",
             "7d2c9e4b1a3f5c6e8d0a2b4c6e8f0a1b_0a448493b4782967b150582570326227_3_0 of job",
             "1b7e3a9c5d0f2e4a6b8c1d3e5f7a9b0c at tm-1-2 @ 10.244.2.34 (dataPort=39121)."]
    [rec] = assemble(lines)
    assert rec.message == ("Received late message for now expired checkpoint attempt 57 from task "
                           "7d2c9e4b1a3f5c6e8d0a2b4c6e8f0a1b_0a448493b4782967b150582570326227_3_0 of job "
                           "1b7e3a9c5d0f2e4a6b8c1d3e5f7a9b0c at tm-1-2 @ 10.244.2.34 (dataPort=39121).")


def test_a_long_token_is_joined_without_a_space_only_where_it_was_cut_at_the_wrap_width():
    lines = ["2022-06-20 11:00:01,225 INFO  org.apache.flink.runtime.resourcemanager.StandaloneResourceManager [] - x",
             "[] - Registering TaskManager with ResourceID 5566778899aabbccddeeff0011223344 plus a",
             "Registering TaskManager with ResourceID 5566778899aabbccddeeff0011223344",
             "(akka.tcp://flink@flink-tm-b.dc2:36102/user/rpc/taskmanager_0) at",
             "ResourceManager"]
    recs = assemble(lines)
    # 72 characters is a common wrap width, but a line of 80 came before: that line ended at a space.
    assert "5566778899aabbccddeeff0011223344 (akka.tcp://flink@flink-tm-b.dc2:36102" in recs[-1].message + " ".join(recs[-1].body)
    cut = ["Caused by: java.io.IOException: Target file",
           "file:/opt/flink/pm/checkpoint/000000006e6b13320000000000000000/chk-6/_metadata",
           "already exists.",
           "\tat org.apache.flink.runtime.state.filesystem.FsCheckpointMetadataOutputStream.g"]
    [rec] = assemble(["x" * 80, *cut])
    assert rec.chain[-1]["message"].endswith("chk-6/_metadata already exists.")


def test_a_class_name_cut_by_a_wrap_stays_in_its_chain():
    lines = ["2022-03-14 09:05:58,302 WARN  org.apache.flink.runtime.taskmanager.Task [] - Map (2/2)#0 switched from INITIALIZING",
             "to FAILED with failure cause: org.apache.flink.util.FlinkRuntimeException: boom",
             "\tat java.lang.Thread.run(Thread.java:829) ~[?:?]",
             "Caused by: org.apache.flink.shaded.guava18.com.google.common.util.concurrent.Unc",
             "heckedExecutionException: org.apache.flink.api.common.InvalidProgramException:",
             "Table program cannot be compiled.",
             "Caused by: java.lang.OutOfMemoryError: Metaspace"]
    [rec] = assemble(lines)
    assert [c["cls"].rsplit(".", 1)[-1] for c in rec.chain] == [
        "FlinkRuntimeException", "UncheckedExecutionException", "OutOfMemoryError"]
    assert rec.chain[1]["message"].startswith("org.apache.flink.api.common.InvalidProgramException:")


def test_a_wrapped_exception_is_not_glued_to_a_short_line_unless_that_line_ends_before_its_message():
    lines = ["java.lang.RuntimeException: first failure of the job",
             "org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task",
             "Caused by: org.apache.flink.util.SerializedThrowable:",
             "org.apache.flink.runtime.checkpoint.CheckpointException: Task local checkpoint failure."]
    recs = assemble(lines)
    assert [c["cls"].rsplit(".", 1)[-1] for r in recs for c in r.chain] == [
        "RuntimeException", "CheckpointException", "CheckpointException"]
    assert recs[-1].chain[-1]["message"] == "Task local checkpoint failure."


def test_a_json_record_cut_by_the_line_limit_keeps_the_trace_read_so_far():
    import json

    trace = "java.io.IOException: No space left on device\n\tat com.acme.A.b(A.java:1)\n" + "\tat com.acme.A.c(A.java:2)\n" * 200
    line = json.dumps({"level": "ERROR", "stack_trace": trace})[:4096]
    [rec] = assemble([line])
    assert rec.level == "ERROR" and rec.chain[0]["cls"] == "java.io.IOException"


PYTHON_IN_JAVA = """\
2026-11-29 00:44:00,660 WARN  org.apache.flink.runtime.taskmanager.Task                    [] - PythonCalc[2] (1/1)#0 switched from RUNNING to FAILED with failure cause:
java.lang.RuntimeException: Failed to close remote bundle
\tat org.apache.flink.streaming.api.runners.python.beam.BeamPythonFunctionRunner.finishBundle(BeamPythonFunctionRunner.java:444) ~[?:1.20.3]
Caused by: java.lang.RuntimeException: Error received from SDK harness for instruction 1: Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/apache_beam/runners/worker/sdk_worker.py", line 295, in _execute
    response = task()
               ^^^^^^
  File "pyflink/fn_execution/beam/beam_operations_fast.pyx", line 196, in pyflink.fn_execution.beam.beam_operations_fast.FunctionOperation.process
  File "/data/flink/job/orders_job.py", line 28, in unit_price
    return round_price(amount / quantity)
                       ~~~~~~~^~~~~~~~~~
ZeroDivisionError: float division by zero

\tat org.apache.beam.runners.fnexecution.control.FnApiControlClient$ResponseStreamObserver.onNext(FnApiControlClient.java:180) ~[?:1.20.3]
2026-11-29 00:44:00,665 INFO  org.apache.flink.runtime.taskmanager.Task                    [] - Freeing task resources for PythonCalc[2] (1/1)#0.
"""


def test_a_python_traceback_inside_a_java_trace_stays_in_its_record():
    recs = assemble(PYTHON_IN_JAVA.splitlines())
    assert len(recs) == 2
    failure = recs[0]
    assert [(c["kind"], c["cls"]) for c in failure.chain] == [
        ("top", "java.lang.RuntimeException"), ("caused_by", "java.lang.RuntimeException"),
        ("python", "ZeroDivisionError")]
    assert failure.chain[-1]["message"] == "float division by zero"
    assert failure.body == [
        "Traceback (most recent call last):",
        'File "/opt/venv/lib/python3.11/site-packages/apache_beam/runners/worker/sdk_worker.py", line 295, in _execute',
        "    response = task()",
        'File "pyflink/fn_execution/beam/beam_operations_fast.pyx", line 196, in '
        "pyflink.fn_execution.beam.beam_operations_fast.FunctionOperation.process",
        'File "/data/flink/job/orders_job.py", line 28, in unit_price',
        "    return round_price(amount / quantity)"]
    # the Java frames after the traceback are still the failure's
    assert failure.frames[-1].startswith("at org.apache.beam.runners.fnexecution.control.FnApiControlClient")


def test_a_bare_pasted_traceback_cut_off_keeps_its_frames():
    recs = assemble(['Traceback (most recent call last):',
                     '  File "/opt/jobs/enrich_orders.py", line 41, in parse_order',
                     '    sku = payload["sku"]'])
    assert len(recs) == 1
    assert recs[0].message == "Traceback (most recent call last):"
    assert recs[0].body[-2:] == ['File "/opt/jobs/enrich_orders.py", line 41, in parse_order', '    sku = payload["sku"]']
    assert recs[0].chain == []
