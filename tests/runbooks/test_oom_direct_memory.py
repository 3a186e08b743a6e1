"""Detector oom-direct-memory: who allocates direct buffers, whether they come back, budgets from the memory model."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.evidence.memory import derive_jobmanager_memory, derive_taskmanager_memory
from flink_runbooks.render.patches import render_config_diff

SLUG = "oom-direct-memory"
MIB = 1 << 20
ENRICHED = ("Direct buffer memory. The direct out-of-memory error has occurred. This can mean two things: either "
            "job(s) require(s) a larger size of JVM direct memory or there is a direct memory leak. The direct memory "
            "can be allocated by user code or some of its dependencies. In this case "
            "'taskmanager.memory.task.off-heap.size' configuration option should be increased. [...] The task "
            "executor has to be shutdown...")
USER = """\tat java.nio.ByteBuffer.allocateDirect(ByteBuffer.java:332) ~[?:?]
\tat scenario.ScenarioJob$StatefulMap.map(ScenarioJob.java:111) ~[blob_p-5b27bb8f40f2941acf0373bfec8fe966d5d2b432-d43b153427e447ac39e458ad12f439c0:?]
\tat org.apache.flink.streaming.api.operators.StreamMap.processElement(StreamMap.java:38) ~[flink-dist-1.20.3.jar:1.20.3]"""
PARQUET = """\tat java.nio.ByteBuffer.allocateDirect(ByteBuffer.java:317) ~[?:?]
\tat org.apache.parquet.hadoop.codec.SnappyCompressor.setInput(SnappyCompressor.java:97) ~[events-archiver-1.4.2.jar:?]
\tat org.apache.flink.formats.parquet.ParquetBulkWriter.addElement(ParquetBulkWriter.java:52) ~[events-archiver-1.4.2.jar:?]"""
NETTY = """\tat org.apache.flink.runtime.io.network.netty.CreditBasedPartitionRequestClientHandler.exceptionCaught(CreditBasedPartitionRequestClientHandler.java:201) ~[flink-dist_2.12-1.14.6.jar:1.14.6]
Caused by: java.lang.OutOfMemoryError: Direct buffer memory
\tat java.nio.Bits.reserveMemory(Bits.java:695) ~[?:1.8.0_392]
\tat org.apache.flink.shaded.netty4.io.netty.buffer.PoolArena$DirectArena.allocateDirect(PoolArena.java:758) ~[flink-dist_2.12-1.14.6.jar:1.14.6]
\tat org.apache.flink.shaded.netty4.io.netty.buffer.PoolArena$DirectArena.newChunk(PoolArena.java:734) ~[flink-dist_2.12-1.14.6.jar:1.14.6]"""
DEFAULT_TM = {"taskmanager.memory.process.size": "1728m", "taskmanager.numberOfTaskSlots": "1"}


def _incident(text, config=None, version="1.20.3", file="taskmanager.log"):
    inc = incident_from_text(text, config, version, file=file)
    for ev in inc.events:
        ev.role = "taskmanager"
    return inc


def _attempt(n, started, failed, frames=USER, message=ENRICHED, tm_banner_before=False):
    att = f"cc6584d09c5587c8d315c540611843ef_857e9877747f27b5e758680f3644828a_0_{n}"
    banner = (f"{started} INFO  org.apache.flink.runtime.taskexecutor.TaskManagerRunner      [] -  Starting TaskManager "
              f"(Version: 1.20.3, Scala: 2.12, Rev:01e3a6d, Date:2025-09-20T02:22:05+02:00)\n" if tm_banner_before else "")
    return f"""{banner}{started} INFO  org.apache.flink.runtime.taskmanager.Task                    [] - stateful-map (1/1)#{n} ({att}) switched from INITIALIZING to RUNNING.
{failed} WARN  org.apache.flink.runtime.taskmanager.Task                    [] - stateful-map (1/1)#{n} ({att}) switched from RUNNING to FAILED with failure cause:
java.lang.OutOfMemoryError: {message}
{frames}
"""


def _flink(finding):
    return {p.key: p for p in finding.patches if p.target == "flink"}


def test_memory_not_given_back_after_a_restart_is_a_leak():
    text = (_attempt(0, "2026-11-22 03:04:44,246", "2026-11-22 03:04:47,084")
            + _attempt(1, "2026-11-22 03:04:52,275", "2026-11-22 03:04:52,873"))
    [finding] = get_detector(SLUG).detect(_incident(text, DEFAULT_TM))
    assert finding.root_cause.slug == "direct-memory-leak"
    assert finding.details["seconds_running_before_oom"] == [2.8, 0.6]
    patches = _flink(finding)
    assert patches["taskmanager.jvm-exit-on-oom"].proposed == "true"
    assert patches["taskmanager.memory.task.off-heap.size"].proposed == "256m"
    assert "stopgap" in patches["taskmanager.memory.task.off-heap.size"].reason
    assert any(p.target == "ops" and "NativeMemoryTracking" in p.snippet for p in finding.patches)


def test_a_new_taskmanager_between_the_ooms_is_not_a_leak():
    text = (_attempt(0, "2026-11-22 03:04:44,246", "2026-11-22 03:04:47,084")
            + _attempt(1, "2026-11-22 03:05:52,275", "2026-11-22 03:05:52,873", tm_banner_before=True))
    [finding] = get_detector(SLUG).detect(_incident(text, DEFAULT_TM))
    assert finding.root_cause.slug == "user-code-direct-memory"


def test_slow_growth_over_hours_that_repeats_is_a_leak():
    text = (_attempt(0, "2024-03-01 00:00:00,000", "2024-03-01 05:10:00,000")
            + _attempt(1, "2024-03-01 05:10:02,000", "2024-03-01 10:31:00,000"))
    [finding] = get_detector(SLUG).detect(_incident(text, DEFAULT_TM))
    assert finding.root_cause.slug == "direct-memory-leak"
    assert "5.2 h" in finding.summary


def test_library_buffers_without_a_budget_get_one_per_slot():
    conf = {"taskmanager.memory.process.size": "4096m", "taskmanager.numberOfTaskSlots": "4"}
    text = (_attempt(0, "2023-12-04 02:11:40,000", "2023-12-04 02:26:02,117", PARQUET)
            + _attempt(1, "2023-12-04 02:26:04,000", "2023-12-04 02:39:07,841", PARQUET))
    [finding] = get_detector(SLUG).detect(_incident(text, conf, version="1.16.3"))
    assert finding.root_cause.slug == "user-code-direct-memory"
    assert "SnappyCompressor.setInput" in finding.summary
    patches = _flink(finding)
    assert patches["taskmanager.memory.task.off-heap.size"].proposed == "512m"  # 128m x 4 slots
    grown = {**conf, "taskmanager.memory.process.size": patches["taskmanager.memory.process.size"].proposed,
             "taskmanager.memory.task.off-heap.size": "512m"}
    before, after = derive_taskmanager_memory(conf, (1, 16)), derive_taskmanager_memory(grown, (1, 16))
    assert after.task_off_heap == 512 * MIB and after.direct >= before.direct + 512 * MIB
    assert after.task_heap >= before.task_heap and after.managed >= before.managed


def test_an_existing_task_off_heap_budget_is_doubled():
    conf = {**DEFAULT_TM, "taskmanager.memory.task.off-heap.size": "200m"}
    text = _attempt(0, "2023-12-04 02:11:40,000", "2023-12-04 02:26:02,117", PARQUET)
    [finding] = get_detector(SLUG).detect(_incident(text, conf))
    patch = _flink(finding)["taskmanager.memory.task.off-heap.size"]
    assert (patch.current, patch.proposed) == ("200m", "400m")


def test_flinks_own_netty_gets_more_framework_off_heap():
    text = ("2023-11-28 12:04:51,380 WARN  org.apache.flink.runtime.taskmanager.Task                    [] - aggregate "
            "(131/192)#0 (9b2d6e0f1a7c4b3e8d5f2a1c0e9b7d64) switched from RUNNING to FAILED with failure cause: "
            "org.apache.flink.runtime.io.network.netty.exception.LocalTransportException: Direct buffer memory "
            "(connection to 'ip-10-0-3-17.ec2.internal/10.0.3.17:41233')\n" + NETTY)
    conf = {"taskmanager.memory.process.size": "8192m", "taskmanager.numberOfTaskSlots": "8"}
    [finding] = get_detector(SLUG).detect(_incident(text, conf, version="1.14.6"))
    assert finding.root_cause.slug == "framework-off-heap-too-small"
    assert "PoolArena$DirectArena.allocateDirect" in finding.summary
    patches = _flink(finding)
    assert patches["taskmanager.memory.framework.off-heap.size"].proposed == "256m"
    assert "taskmanager.memory.task.off-heap.size" not in patches
    grown = {**conf, "taskmanager.memory.framework.off-heap.size": "256m",
             "taskmanager.memory.process.size": patches["taskmanager.memory.process.size"].proposed}
    before, after = derive_taskmanager_memory(conf, (1, 14)), derive_taskmanager_memory(grown, (1, 14))
    assert after.framework_off_heap == 256 * MIB and after.task_heap >= before.task_heap


def test_network_pool_cut_short_by_a_jvm_option_removes_the_option():
    text = """\
2024-02-06 15:20:33,210 ERROR org.apache.flink.runtime.taskexecutor.TaskManagerRunner      [] - Terminating TaskManagerRunner with exit code 1.
org.apache.flink.util.FlinkException: Failed to start the TaskManagerRunner.
Caused by: java.lang.OutOfMemoryError: Could not allocate enough memory segments for NetworkBufferPool (required (Mb): 514, allocated (Mb): 255, missing (Mb): 259). Cause: Direct buffer memory
\tat org.apache.flink.runtime.io.network.buffer.NetworkBufferPool.<init>(NetworkBufferPool.java:165) ~[flink-dist-1.18.1.jar:1.18.1]"""
    conf = {"taskmanager.memory.process.size": "4096m", "taskmanager.memory.network.fraction": "0.15",
            "env.java.opts.taskmanager": "-XX:MaxDirectMemorySize=256m -XX:+UseG1GC"}
    [finding] = get_detector(SLUG).detect(_incident(text, conf, version="1.18.1"))
    assert finding.root_cause.slug == "network-memory-exceeds-max-direct"
    assert "could not start" in finding.summary and "-XX:MaxDirectMemorySize=256m in env.java.opts.taskmanager" in finding.summary
    [patch] = [p for p in finding.patches if p.target == "flink"]
    assert (patch.key, patch.proposed) == ("env.java.opts.taskmanager", "-XX:+UseG1GC")
    without_flag = _incident(text, {"taskmanager.memory.process.size": "4096m"}, version="1.18.1")
    [finding] = get_detector(SLUG).detect(without_flag)
    assert [p.target for p in finding.patches] == ["ops"] and "770m" in finding.patches[0].reason


def test_jdk17_wording_of_a_wrapped_direct_oom_is_recognised():
    text = """\
2024-05-02 08:15:01,120 WARN  org.apache.flink.runtime.taskmanager.Task                    [] - async-enrich (1/2)#0 (3c8e1f0a9b2d4e6f7a1c5b9d0e3f2a48_0a448493b4782967b150582570326227_0_0) switched from RUNNING to FAILED with failure cause:
java.util.concurrent.ExecutionException: io.netty.handler.codec.EncoderException: java.lang.OutOfMemoryError: Cannot reserve 16777216 bytes of direct buffer memory (allocated: 134201344, limit: 134217728)
\tat io.netty.buffer.PoolArena$DirectArena.newChunk(PoolArena.java:701) ~[enricher-2.3.jar:?]"""
    [finding] = get_detector(SLUG).detect(_incident(text, DEFAULT_TM, version="1.19.1"))
    assert finding.root_cause.slug == "user-code-direct-memory"
    assert "io.netty.buffer.PoolArena$DirectArena.newChunk" in finding.summary


def test_the_budget_lands_in_the_config_file_of_the_incident_version():
    text = _attempt(0, "2023-12-04 02:11:40,000", "2023-12-04 02:26:02,117", PARQUET)
    diffs = {}
    for version in ("1.11.6", "2.0.0"):
        inc = _incident(text, dict(DEFAULT_TM), version=version)
        [finding] = get_detector(SLUG).detect(inc)
        diffs[version] = render_config_diff(finding.patches, inc.config, version)
    assert diffs["1.11.6"].startswith("--- a/flink-conf.yaml") and diffs["2.0.0"].startswith("--- a/config.yaml")
    for diff in diffs.values():
        assert "+taskmanager.memory.task.off-heap.size: 256m" in diff
        assert "+taskmanager.memory.process.size: 2276m" in diff  # the TaskManager's 1728m, grown to keep every pool


def test_the_jobmanagers_direct_memory_is_its_off_heap_memory():
    text = """\
2024-01-22 16:50:11,300 ERROR org.apache.flink.runtime.entrypoint.ClusterEntrypoint        [] - Fatal error occurred in the cluster entrypoint.
java.lang.OutOfMemoryError: Direct buffer memory. The direct out-of-memory error has occurred. This can mean two things: either Flink Master requires a larger size of JVM direct memory or there is a direct memory leak. The direct memory can be allocated by user code or some of its dependencies. In this case 'jobmanager.memory.off-heap.size' configuration option should be increased. [...] The Flink Master has to be shutdown...
\tat org.apache.flink.shaded.netty4.io.netty.buffer.PoolArena$DirectArena.newChunk(PoolArena.java:734) ~[flink-dist-1.17.2.jar:1.17.2]"""
    conf = {"jobmanager.memory.process.size": "1600m"}
    inc = incident_from_text(text, conf, "1.17.2")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.details["process"] == "jobmanager" and finding.details["fatal"]
    assert "jobmanager.memory.off-heap.size" in finding.summary and "128m" in finding.summary
    patches = _flink(finding)
    assert set(patches) == {"jobmanager.memory.off-heap.size", "jobmanager.memory.process.size"}
    assert (patches["jobmanager.memory.off-heap.size"].proposed, patches["jobmanager.memory.process.size"].proposed) == (
        "256m", "1728m")
    after = derive_jobmanager_memory({**conf, **{k: p.proposed for k, p in patches.items()}}, (1, 17))
    assert after.off_heap == 256 * MIB and after.heap >= derive_jobmanager_memory(conf, (1, 17)).heap


def test_a_quoted_direct_oom_in_a_log_message_is_no_finding():
    text = ('2024-07-02 09:46:41,331 WARN  com.acme.media.ingest.ThumbnailClient                       [] - thumbnail-svc '
            'answered 503 for asset 88213: {"error":"java.lang.OutOfMemoryError: Direct buffer memory"}; retrying in 2 s')
    inc = _incident(text, DEFAULT_TM)
    assert get_detector(SLUG).detect(inc) == [] and run_detectors(inc).findings == []
    # an exception whose message only mentions one is not an OutOfMemoryError either
    wrapped = ("java.io.IOException: thumbnail-svc returned 503: java.lang.OutOfMemoryError: Direct buffer memory\n"
               "\tat com.acme.media.ingest.ThumbnailClient.fetch(ThumbnailClient.java:88) ~[image-ingest-2.1.jar:?]")
    assert get_detector(SLUG).detect(_incident(wrapped, DEFAULT_TM)) == []


def test_genuine_incident_direct_memory_leak(spark):
    inc = ingest([str(example(SLUG, "user-code-direct-leak"))], spark)
    primary = run_detectors(inc).primary
    assert primary.runbook == SLUG and primary.root_cause.slug == "direct-memory-leak"
    assert primary.details["seconds_running_before_oom"] == [2.8, 0.6]
    assert primary.details["jvm_direct_memory"] == "256m"
    diff = render_config_diff(primary.patches, inc.config, inc.flink_version)
    assert "+taskmanager.memory.task.off-heap.size: 256m" in diff and "+taskmanager.jvm-exit-on-oom: true" in diff


@pytest.mark.parametrize("name,cause", [("parquet-sink-direct-buffers", "user-code-direct-memory"),
                                        ("netty-framework-high-parallelism", "framework-off-heap-too-small"),
                                        ("jvm-opts-cap-direct-memory", "network-memory-exceeds-max-direct")])
def test_written_incidents_through_ingest(spark, name, cause):
    primary = run_detectors(ingest([str(example(SLUG, name))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, cause)


def test_healthy_and_near_miss_incidents_give_nothing(spark):
    for name in ("healthy", "quoted-oom-in-user-log"):
        inc = ingest([str(example(SLUG, name))], spark)
        assert get_detector(SLUG).detect(inc) == [], name
