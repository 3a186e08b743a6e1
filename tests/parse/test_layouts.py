"""Header parsing of every supported layout, and the JVM regexes agreeing with the Python parser."""
from __future__ import annotations

import doctest
import re

import pytest

from flink_runbooks.parse import layouts

from flink_runbooks.parse import records

SAMPLES = {
    "log4j2": "2026-11-22 02:54:11,377 WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger or complete checkpoint 3 for job f48410cfc8f27e85a01838c5b64de860. (0 consecutive failed attempts so far)",
    "log4j1": "2019-10-15 12:33:53,699 INFO  org.apache.flink.streaming.api.operators.AbstractStreamOperator  - Could not complete snapshot 1 for operator testOperator (1/2).",
    "thread": "2019-02-16 11:26:29.378 [Checkpoint Timer] INFO org.apache.flink.runtime.checkpoint.CheckpointCoordinator - Triggering checkpoint 1389046 @ 1550287589373 for job 599a6ac3c371874d12ebf024978cadbc.",
    "thread-after-level": "2021-07-01 10:00:00,000 ERROR [flink-akka.actor.default-dispatcher-5] org.apache.flink.runtime.jobmaster.JobMaster - Job failed.",
    "iso": "2024-05-02T08:15:01.120Z INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - Trying to recover from a global failure.",
    "iso-offset": "2024-05-02T08:15:01,120+02:00 WARN org.apache.flink.runtime.taskmanager.Task - Task failed.",
    "docker-compose": "jobmanager-1  | 2024-05-02 08:15:01,120 INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - Trying to recover from a global failure.",
    "kubernetes-cri": "2024-05-02T08:15:01.123456789Z stdout F 2024-05-02 08:15:01,120 ERROR org.apache.flink.runtime.taskmanager.Task [] - Task failed.",
    "kubectl-timestamps": "2024-05-02T08:15:01.123456789Z 2024-05-02 08:15:01,120 ERROR org.apache.flink.runtime.taskmanager.Task [] - Task failed.",
    "platform-tag": "[dinky] 2025-05-06 11:02:40 CST INFO  org.apache.flink.configuration.GlobalConfiguration 160 lambda$logConfiguration$0 - Loading configuration property: rest.port, 8081",
    "operator": "2024-05-01 10:02:11,482 o.a.f.k.o.s.AbstractFlinkService [ERROR][streaming/orders] HA metadata not available to restore from last state.",
    "bare": "INFO  [] - Loading configuration property: taskmanager.memory.process.size, 1728m",
    "json": '{"timestamp":"2024-01-01T00:00:00.000Z","level":"ERROR","loggerName":"org.apache.flink.runtime.taskmanager.Task","message":"Task failed","throwableInformation":"java.lang.OutOfMemoryError: Java heap space\\n\\tat x.Y.z(Y.java:1)"}',
}
NOT_HEADERS = [
    "\tat org.apache.flink.runtime.taskmanager.Task.run(Task.java:550)",
    "Caused by: java.io.IOException: Mkdirs failed to create file:/ckpt/chk-3",
    "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.",
    "\t... 4 more",
    "\tallow.auto.create.topics = true",
]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_layout_is_a_header_in_python_and_in_the_jvm_regex(name):
    line = SAMPLES[name]
    header = layouts.parse_header(line)
    assert header is not None, name
    assert re.match(layouts.HEADER_JAVA, line), name
    assert header.level in {"INFO", "WARN", "ERROR"}
    assert header.message


@pytest.mark.parametrize("line", NOT_HEADERS)
def test_continuation_lines_are_not_headers(line):
    assert layouts.parse_header(line) is None
    assert not re.match(layouts.HEADER_JAVA, line)


def test_fields_of_the_default_layout():
    h = layouts.parse_header(SAMPLES["log4j2"])
    assert (h.ts, h.level, h.logger, h.layout) == (
        "2026-11-22 02:54:11.377", "WARN", "org.apache.flink.runtime.checkpoint.CheckpointFailureManager", "log4j2")
    assert h.message.startswith("Failed to trigger or complete checkpoint 3")


def test_log4j1_and_thread_variants_are_told_apart():
    assert layouts.parse_header(SAMPLES["log4j1"]).layout == "log4j1"
    assert layouts.parse_header(SAMPLES["thread"]).thread == "Checkpoint Timer"
    assert layouts.parse_header(SAMPLES["thread-after-level"]).thread == "flink-akka.actor.default-dispatcher-5"


def test_prefixes_are_stripped_and_timestamps_normalised():
    for name in ("docker-compose", "kubernetes-cri", "kubectl-timestamps"):
        h = layouts.parse_header(SAMPLES[name])
        assert h.ts == "2024-05-02 08:15:01.120", name
    assert layouts.parse_header(SAMPLES["iso"]).ts == "2024-05-02 08:15:01.120"


def test_json_record_carries_its_stack_trace():
    recs = records.assemble([SAMPLES["json"]])
    assert len(recs) == 1
    assert recs[0].chain[0]["cls"] == "java.lang.OutOfMemoryError"
    assert recs[0].chain[0]["message"] == "Java heap space"


def test_exception_and_config_lines_match_the_jvm_regexes():
    assert re.match(layouts.EXCEPTION_LINE_JAVA, "Caused by: org.rocksdb.RocksDBException: Bad table magic number")
    assert re.match(layouts.EXCEPTION_LINE_JAVA, "org.apache.kafka.common.errors.DisconnectException: null")
    assert re.match(layouts.EXCEPTION_LINE_JAVA, "jobmanager-1  | \t... 12 more")
    assert re.match(layouts.CONFIG_LINE_JAVA, "\tsasl.jaas.config = [hidden]")
    assert not re.match(layouts.EXCEPTION_LINE_JAVA, "\tat org.apache.flink.runtime.taskmanager.Task.run(Task.java:550)")


def test_docstring_samples():
    for module in (layouts, records):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


# ------------------------------------------------------------------------------------------- pasted and wrapped text

@pytest.mark.parametrize("line, rest", [
    ("10:41:07 2021/06/15  (): Caused by: java.lang.OutOfMemoryError: Java heap space", "Caused by: java.lang.OutOfMemoryError: Java heap space"),
    ("taskmanager_1  | Exception in thread \"Thread-1\" java.lang.OutOfMemoryError: Java heap space", "Exception in thread \"Thread-1\" java.lang.OutOfMemoryError: Java heap space"),
    ("[pod/flink-taskmanager-1-1/flink-main-container] \tat org.apache.flink.runtime.taskmanager.Task.run(Task.java:575)", "\tat org.apache.flink.runtime.taskmanager.Task.run(Task.java:575)"),
    ("Apr 22 03:12:44 worker-3 flink[3188]: java.io.IOException: No space left on device", "java.io.IOException: No space left on device"),
    ("2024-05-02T08:15:01.123456789Z \tat org.apache.flink.X.y(X.java:1)", "\tat org.apache.flink.X.y(X.java:1)"),
    ("bob [10:22]> \"RemoteTransportException: Connection unexpectedly closed", "RemoteTransportException: Connection unexpectedly closed"),
    ("just a sentence: with a colon", "just a sentence: with a colon"),
])
def test_constant_prefixes_are_stripped_before_structure(line, rest):
    assert layouts.strip_prefix(line) == rest


@pytest.mark.parametrize("line", [
    "2024-05-02T08:15:01.123456789Z stdout F \tat org.apache.flink.X.y(X.java:1)",
    "2024-05-02T08:15:01.123456789Z stdout F Caused by: java.io.IOException: x",
    "2024-05-02T08:15:01.123456789Z \tat org.apache.flink.X.y(X.java:1)",
    "2024-05-02T08:15:01.123456789Z ",
    '{"log":"\\tat org.apache.flink.X.y(X.java:1)\\n","stream":"stdout","time":"2024-05-02T08:15:01Z"}',
])
def test_a_runtime_prefix_before_a_continuation_line_is_not_a_record_start(line):
    import pyarrow as pa
    import pyarrow.compute as pc

    assert not re.match(layouts.HEADER_JAVA, line)
    assert pc.match_substring_regex(pa.array([line]), layouts.re2(layouts.HEADER_JAVA)).to_pylist() == [False]


@pytest.mark.parametrize("line, level", [
    ("INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job x switched from state RUNNING to FAILING.", "INFO"),
    ('{"log":"2024-05-02 08:15:01,120 ERROR org.apache.flink.runtime.taskmanager.Task [] - Task failed.\\n","stream":"stdout","time":"2024-05-02T08:15:01Z"}', "ERROR"),
    ("bob [10:22]: 2023-05-12 10:23:45,123 ERROR org.apache.flink.runtime.taskmanager.Task [] - boom", "ERROR"),
])
def test_records_without_time_stamps_in_docker_json_or_behind_unknown_prefixes_are_read(line, level):
    assert re.match(layouts.HEADER_JAVA, line)
    assert layouts.parse_header(line).level == level


def test_wrapped_records_are_kept_whole_and_excerpts_line_by_line():
    import numpy as np
    import pyarrow as pa

    lines = ["2019-11-07 16:12:30,140 INFO",
             "org.apache.flink.runtime.executiongraph.ExecutionGraph        - Job enrich",
             "(4f7b5c3a2e1d0c9b8a7f6e5d4c3b2a10) switched from state RUNNING to FAILING.",
             "2019-11-07 16:12:30,141 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator     - Triggering checkpoint 2 @ 1 for job 4f.",
             "2019-11-07 16:12:30,142 INFO  org.apache.flink.runtime.taskmanager.Task - nothing to see here"]
    header = np.array([True, False, False, True, True])
    keep = np.array([False, False, True, True, False])  # the job-state signature matched only the last piece
    assert layouts.widen_kept(pa.array(lines), header, keep).tolist() == [True, True, True, True, False]
    excerpt = pa.array(["Any idea?", "RemoteTransportException: Connection unexpectedly closed"])
    assert layouts.widen_kept(excerpt, np.array([False, False]), np.array([False, True])).tolist() == [True, True]


def test_a_line_left_short_by_a_wrap_before_a_long_word_is_kept_with_the_rest():
    import numpy as np
    import pyarrow as pa

    lines = ["2020-06-02 10:12:58,934 INFO  org.apache.flink.yarn.YarnResourceManager",
             "- Closing TaskExecutor connection container_1590912340115_0032_01_000002",
             "because: Container",
             "[pid=19211,containerID=container_1590912340115_0032_01_000002] is running beyond",
             "virtual memory limits. Killing container.",
             "2020-06-02 10:12:58,935 INFO  org.apache.flink.yarn.YarnResourceManager - other"]
    header = np.array([True, False, False, False, False, True])
    keep = np.array([False, False, False, False, True, False])
    assert layouts.widen_kept(pa.array(lines), header, keep).tolist() == [True, True, True, True, True, False]


def test_the_kubernetes_operator_layout_keeps_the_resource_in_the_message():
    h = layouts.parse_header(SAMPLES["operator"])
    assert (h.ts, h.level, h.logger, h.layout) == (
        "2024-05-01 10:02:11.482", "ERROR", "o.a.f.k.o.s.AbstractFlinkService", "operator")
    assert h.message == "[streaming/orders] HA metadata not available to restore from last state."
    padded = layouts.parse_header("2024-05-01 10:02:12,001 o.a.f.k.o.c.FlinkDeploymentController [INFO ] Starting reconciliation")
    assert (padded.level, padded.message) == ("INFO", "Starting reconciliation")


def test_the_lines_under_a_kept_python_frame_are_kept_up_to_the_exception_that_ends_the_traceback():
    import numpy as np
    import pyarrow as pa

    lines = ["2026-11-29 00:44:00,660 WARN  org.apache.flink.runtime.taskmanager.Task [] - PythonCalc[2] (1/1)#0 failed",
             "java.lang.RuntimeException: Error received from SDK harness for instruction 1: Traceback (most recent "
             "call last):",
             '  File "/data/flink/job/orders_job.py", line 28, in unit_price',
             "    return round_price(amount / quantity)",
             "                       ~~~~~~~^~~~~~~~~~",
             "ZeroDivisionError: float division by zero",
             "",
             "\tat org.apache.beam.sdk.util.MoreFutures.get(MoreFutures.java:61)",
             "2026-11-29 00:44:00,665 INFO  org.apache.flink.runtime.taskmanager.Task [] - Freeing task resources"]
    header = np.array([True, False, False, False, False, False, False, False, True])
    frame = bool(re.match(layouts.PYTHON_FRAME_JAVA, lines[2]))
    keep = np.array([True, True, frame, False, False, False, False, False, False])
    assert frame
    assert layouts.widen_kept(pa.array(lines), header, keep).tolist() == [True] * 6 + [False] * 3
