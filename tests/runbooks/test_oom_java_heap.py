"""Detector oom-java-heap: whose heap ran out and what filled it, patches sized with Flink's memory model."""
from __future__ import annotations

import shutil

import pytest

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.evidence.memory import derive_jobmanager_memory, derive_taskmanager_memory
from flink_runbooks.evidence.memory.oom import occurrences
from flink_runbooks.render.patches import render_config_diff

SLUG = "oom-java-heap"
MIB = 1 << 20
ATT = "cc6584d09c5587c8d315c540611843ef_857e9877747f27b5e758680f3644828a_0_{}"
DIST = "~[flink-dist-1.20.3.jar:1.20.3]"


def _incident(text: str, config: dict | None = None, version: str | None = "1.20.3", role: str = "taskmanager"):
    inc = incident_from_text(text, config, version, file=f"{role}.log")
    for ev in inc.events:
        ev.role = role
    return inc


def _task_oom(frames: str, message: str = "Java heap space", attempt: int = 0, ts: str = "2026-11-22 03:04:10,769",
              started: str = "2026-11-22 03:04:05,856") -> str:
    return f"""\
{started} INFO  org.apache.flink.runtime.taskmanager.Task                    [] - stateful-map -> sink (1/1)#{attempt} ({ATT.format(attempt)}) switched from INITIALIZING to RUNNING.
{ts} WARN  org.apache.flink.runtime.taskmanager.Task                    [] - stateful-map -> sink (1/1)#{attempt} ({ATT.format(attempt)}) switched from RUNNING to FAILED with failure cause:
java.lang.OutOfMemoryError: {message}
{frames}"""


USER_FRAMES = f"""\tat com.acme.Thumbnailer$Cache.put(Thumbnailer.java:109) ~[blob_p-5b27bb8f40f2941acf0373bfec8fe966d5d2b432-fcb0286db1e8d2466a4d880d7c85aca0:?]
\tat org.apache.flink.streaming.api.operators.StreamMap.processElement(StreamMap.java:38) {DIST}
\tat org.apache.flink.runtime.taskmanager.Task.run(Task.java:575) {DIST}"""
STATE_FRAMES = f"""\tat java.util.ArrayList.add(ArrayList.java:467) ~[?:?]
\tat org.apache.flink.runtime.state.heap.HeapListState.add(HeapListState.java:101) {DIST}
\tat org.apache.flink.streaming.runtime.operators.windowing.WindowOperator.processElement(WindowOperator.java:404) {DIST}"""
FLINK_FRAMES = f"""\tat org.apache.flink.types.StringValue.readString(StringValue.java:781) {DIST}
\tat org.apache.flink.api.common.typeutils.base.StringSerializer.deserialize(StringSerializer.java:75) {DIST}
\tat org.apache.flink.runtime.io.network.api.serialization.SpillingAdaptiveSpanningRecordDeserializer.getNextRecord(SpillingAdaptiveSpanningRecordDeserializer.java:67) {DIST}"""
DEFAULT_TM = {"taskmanager.memory.process.size": "1728m", "taskmanager.numberOfTaskSlots": "1"}


def _flink(finding):
    return {p.key: p for p in finding.patches if p.target == "flink"}


def test_heap_state_backend_frames_move_state_to_rocksdb():
    inc = _incident(_task_oom(STATE_FRAMES), {**DEFAULT_TM, "state.backend.type": "hashmap"})
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "heap-state-backend"
    assert "HeapListState.add" in finding.summary
    patches = _flink(finding)
    assert patches["state.backend.type"].proposed == "rocksdb"
    assert patches["state.backend.type"].current == "hashmap"
    assert patches["execution.checkpointing.incremental"].proposed == "true"
    assert any(p.target == "code" and "EmbeddedRocksDBStateBackend" in p.snippet for p in finding.patches)


@pytest.mark.parametrize("version,command", [("1.17.2", "bin/flink stop --type canonical --savepointPath"),
                                             ("1.14.6", "bin/flink stop --savepointPath")])
def test_switching_to_rocksdb_says_a_canonical_savepoint_is_needed(version, command):
    inc = _incident(_task_oom(STATE_FRAMES), {**DEFAULT_TM, "state.backend": "hashmap"}, version=version)
    [finding] = get_detector(SLUG).detect(inc)
    switch = next(p for p in finding.patches if p.key == "savepoint before the backend switch")
    assert "A checkpoint cannot change the state backend" in switch.reason and "canonical format" in switch.reason
    assert switch.snippet.startswith(command) and "bin/flink run -s <savepoint-path>" in switch.snippet


def test_before_1_13_the_backend_switch_cannot_carry_the_state():
    inc = _incident(_task_oom(STATE_FRAMES), {**DEFAULT_TM, "state.backend": "filesystem"}, version="1.12.7")
    [finding] = get_detector(SLUG).detect(inc)
    switch = next(p for p in finding.patches if p.key == "savepoint before the backend switch")
    assert "before Flink 1.13" in switch.reason


def test_state_backend_keys_are_rendered_for_the_incident_version():
    inc = _incident(_task_oom(STATE_FRAMES), {**DEFAULT_TM, "state.backend": "hashmap"}, version="1.15.4")
    [finding] = get_detector(SLUG).detect(inc)
    old = render_config_diff(finding.patches, inc.config, "1.15.4")
    new = render_config_diff(finding.patches, inc.config, "1.20.3")
    assert "+state.backend: rocksdb" in old and "+state.backend.incremental: true" in old
    assert "+state.backend.type: rocksdb" in new and "+execution.checkpointing.incremental: true" in new


def test_heap_backend_with_growing_checkpoints_is_the_state_even_without_frames():
    job = "5d3f0c9be1a24e7f8e6a2c1b9d4f7a30"
    ckpts = "\n".join(
        f"2023-04-17 08:{10 + 5 * i:02d}:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - "
        f"Completed checkpoint {i} for job {job} ({size * MIB} bytes, checkpointDuration=30000 ms, finalizationTime=90 ms)."
        for i, size in enumerate((600, 900, 1300, 1700), 1))
    text = ckpts + "\n" + _task_oom("", ts="2023-04-17 08:40:00,000", started="2023-04-17 08:00:00,000")
    inc = _incident(text, {**DEFAULT_TM, "state.backend.type": "hashmap"})
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "heap-state-backend"
    assert finding.details["completed_checkpoints"] == 4
    assert "600m → 1700m" in finding.summary


def test_user_code_frames_with_the_heap_backend_move_idle_managed_memory_to_the_heap():
    inc = _incident(_task_oom(USER_FRAMES), dict(DEFAULT_TM))
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "user-code-holds-objects"
    assert "com.acme.Thumbnailer$Cache.put" in finding.summary
    patches = _flink(finding)
    # 1728m: 384m task heap, 512m managed of 1280m Flink memory; 2x the heap takes 384m from managed -> 0.1
    assert patches["taskmanager.memory.managed.fraction"].proposed == "0.1"
    assert "taskmanager.memory.process.size" not in patches
    after = derive_taskmanager_memory({**DEFAULT_TM, "taskmanager.memory.managed.fraction": "0.1"}, (1, 20))
    assert after.task_heap >= 768 * MIB - (1 << 16) and after.process == 1728 * MIB
    assert "-XX:+HeapDumpOnOutOfMemoryError" in patches["env.java.opts.taskmanager"].proposed
    assert any(p.target == "ops" and "Thumbnailer$Cache.put" in p.reason for p in finding.patches)


def test_flink_frames_and_a_small_heap_per_slot_double_the_task_heap():
    conf = {"taskmanager.memory.process.size": "1728m", "taskmanager.numberOfTaskSlots": "4",
            "state.backend.type": "rocksdb"}
    inc = _incident(_task_oom(FLINK_FRAMES), conf)
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "task-heap-too-small"
    assert finding.details["task_heap_per_slot"] == "96m"
    proposed = _flink(finding)["taskmanager.memory.process.size"]
    assert (proposed.current, proposed.proposed) == ("1728m", "2561m")
    after = derive_taskmanager_memory({**conf, "taskmanager.memory.process.size": "2561m"}, (1, 20))
    before = derive_taskmanager_memory(conf, (1, 20))
    assert after.task_heap >= 2 * before.task_heap - (1 << 16)
    assert after.managed >= before.managed and after.network >= before.network


def test_flink_frames_without_the_heap_s_size_are_only_a_best_guess():
    """'Too small' needs the size: frames in Flink's code alone rule out the job and the state backend, no more."""
    [guess] = get_detector(SLUG).detect(_incident(_task_oom(FLINK_FRAMES)))
    assert guess.root_cause.slug == "task-heap-too-small" and guess.confidence < 0.5
    assert "memory configuration" in guess.root_cause.next_evidence
    conf = {"taskmanager.memory.process.size": "1728m", "taskmanager.numberOfTaskSlots": "4"}
    [named] = get_detector(SLUG).detect(_incident(_task_oom(FLINK_FRAMES), conf))
    assert named.root_cause.slug == "task-heap-too-small" and named.confidence >= 0.75


def test_gc_overhead_and_plain_excerpts_are_heap_ooms():
    excerpt = "java.lang.OutOfMemoryError: GC overhead limit exceeded\n\tat java.util.HashMap.resize(HashMap.java:704)"
    [finding] = get_detector(SLUG).detect(_incident(excerpt, DEFAULT_TM, version=None, role="unknown"))
    assert finding.root_cause.slug == "task-heap-too-small"
    assert finding.details["message"] == "GC overhead limit exceeded"


def test_a_single_oversized_array_gets_no_heap_growth():
    inc = _incident(_task_oom(USER_FRAMES, "Requested array size exceeds VM limit"), dict(DEFAULT_TM))
    [finding] = get_detector(SLUG).detect(inc)
    assert "above ~2 GB" in finding.summary
    assert not [p for p in finding.patches if p.target == "flink"]


def test_inline_failure_cause_of_1_12_to_1_14_is_read():
    text = ("2022-06-08 14:43:19,000 WARN  org.apache.flink.runtime.taskmanager.Task                    [] - enrich (2/4)#0 "
            "(a07c2e91d4b35f6e8c1d0b2a9e4f6c13) switched from RUNNING to FAILED with failure cause: "
            "java.lang.OutOfMemoryError: Java heap space\n" + FLINK_FRAMES)
    [finding] = get_detector(SLUG).detect(_incident(text, DEFAULT_TM, version="1.13.6"))
    assert finding.details["occurrences"] == 1 and finding.details["task"] == "enrich"


def test_the_jobmanager_copy_and_the_job_records_of_one_failure_count_once():
    tm = _task_oom(USER_FRAMES)
    jm = f"""\
2026-11-22 03:04:10,929 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - stateful-map -> sink (1/1) ({ATT.format(0)}) switched from RUNNING to FAILED on localhost:33031-b9cf66 @ localhost (dataPort=40187).
java.lang.OutOfMemoryError: Java heap space
2026-11-22 03:04:10,966 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job thumbnailer (79be94ae59708cd243ea1eef58fa38ed) switched from state RUNNING to FAILING.
org.apache.flink.runtime.JobException: Recovery is suppressed by NoRestartBackoffTimeStrategy
Caused by: java.lang.OutOfMemoryError: Java heap space"""
    inc = _incident(tm + "\n" + jm, DEFAULT_TM)
    [occ] = occurrences(inc, "heap")
    assert occ.attempt == ATT.format(0) and len(occ.reports) == 3
    assert occ.taskmanager == "localhost:33031-b9cf66"


def test_jobmanager_heap_grows_the_jobmanager_and_moves_checkpoints_off_it():
    text = """\
2022-01-19 07:41:37,902 ERROR org.apache.flink.runtime.entrypoint.ClusterEntrypoint        [] - Fatal error occurred in the cluster entrypoint.
java.lang.OutOfMemoryError: Java heap space. A heap space-related out-of-memory error has occurred. This can mean two things: either Flink Master requires a larger size of JVM heap space or there is a memory leak. In the first case, 'jobmanager.memory.heap.size' can be used to increase the amount of available heap memory.
\tat org.apache.flink.runtime.checkpoint.metadata.MetadataV3Serializer.serializeStreamStateHandle(MetadataV3Serializer.java:520) ~[flink-dist_2.11-1.12.7.jar:1.12.7]"""
    conf = {"jobmanager.memory.process.size": "1600m", "state.backend": "jobmanager",
            "state.savepoints.dir": "hdfs://nameservice1/flink/savepoints"}
    inc = _incident(text, conf, version="1.12.7", role="jobmanager")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "jobmanager-heap"
    assert "handling checkpoints" in finding.summary
    patches = _flink(finding)
    assert (patches["jobmanager.memory.process.size"].current, patches["jobmanager.memory.process.size"].proposed) == (
        "1600m", "2703m")
    grown = derive_jobmanager_memory({**conf, "jobmanager.memory.process.size": "2703m"}, (1, 12))
    assert grown.heap >= 2 << 30
    # 1.12 spellings in the patches themselves (JSON, tables), not only in the diff
    assert patches["state.backend"].proposed == "filesystem"
    assert patches["state.checkpoints.dir"].proposed == "hdfs://nameservice1/flink/checkpoints"
    diff = render_config_diff(finding.patches, inc.config, "1.12.7")
    assert "+state.backend: filesystem" in diff and "+state.checkpoints.dir: hdfs://nameservice1/flink/checkpoints" in diff


def test_a_quoted_oom_and_heap_warnings_without_an_oom_are_no_finding():
    text = """\
2023-11-20 10:15:12,000 WARN  com.acme.risk.monitoring.HeapUsageReporter                   [] - Heap usage 94% (1398 MB of 1487 MB); last week's incident was java.lang.OutOfMemoryError: Java heap space
[2023-11-20T10:15:14.118+0000] GC(1427) Pause Full (G1 Compaction Pause) 1481M->1302M(1487M) 1843.771ms"""
    inc = _incident(text, DEFAULT_TM)
    assert get_detector(SLUG).detect(inc) == []
    assert run_detectors(inc).findings == []


def test_genuine_incident_user_code_retains_records(spark):
    inc = ingest([str(example(SLUG, "user-code-retains-records"))], spark)
    primary = run_detectors(inc).primary
    assert primary.runbook == SLUG and primary.root_cause.slug == "user-code-holds-objects"
    assert primary.details["occurrences"] == 2
    assert primary.details["task_heap"] == "384m" and "Final TaskExecutor Memory configuration" in primary.details[
        "memory_source"]
    assert "scenario.ScenarioJob$StatefulMap.map" in primary.summary


@pytest.mark.parametrize("name,cause", [("heap-state-window-growth", "heap-state-backend"),
                                        ("task-heap-too-small", "task-heap-too-small"),
                                        ("jobmanager-heap-checkpoints", "jobmanager-heap")])
def test_written_incidents_through_ingest(spark, name, cause):
    primary = run_detectors(ingest([str(example(SLUG, name))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, cause)


def test_healthy_and_near_miss_incidents_give_nothing(spark):
    for name in ("healthy", "gc-pressure-without-oom"):
        inc = ingest([str(example(SLUG, name))], spark)
        assert get_detector(SLUG).detect(inc) == [], name


def test_an_oom_without_frames_or_sizes_names_no_cause_and_says_what_to_collect():
    [finding] = get_detector(SLUG).detect(_incident(_task_oom("")))
    assert finding.root_cause.slug == "undetermined" and finding.confidence < 0.5
    assert "Collect next: the full stack trace from the TaskManager log" in finding.summary
    assert not any(p.key.startswith("taskmanager.memory") for p in finding.patches)  # no size without a size
    assert finding.would_change.startswith("Frames of the heap state backend")


def test_moving_heap_state_to_rocksdb_gives_managed_memory_back(tmp_path):
    """A managed fraction lowered for the heap backend would starve RocksDB: the switch proposes removing it."""
    incident = tmp_path / "incident"
    shutil.copytree(example(SLUG, "heap-state-window-growth"), incident)
    (incident / "expected.json").unlink()
    conf = incident / "flink-conf.yaml"
    conf.write_text(conf.read_text() + "\ntaskmanager.memory.managed.fraction: 0.1\n")
    diagnosis = run_detectors(ingest([str(incident)]))
    assert not diagnosis.errors
    finding = next(f for f in diagnosis.findings if f.runbook == SLUG)
    assert finding.root_cause.slug == "heap-state-backend"
    managed = next(p for p in finding.patches if p.key == "taskmanager.memory.managed.fraction")
    assert managed.proposed is None and managed.current == "0.1"


def test_before_1_10_the_heap_and_the_state_backend_key_are_those_of_the_release(tmp_path):
    from corpus import incident_from_files
    head = "2020-05-02 10:00:00,{} INFO  org.apache.flink.runtime.taskexecutor.TaskManagerRunner       -  {}"
    log = "\n".join([
        head.format("001", "Starting TaskManager (Version: 1.9.3, Rev:6d23b2c, Date:21.04.2020 @ 09:59:24 CST)"),
        head.format("100", "Maximum heap size: 922 MiBytes"),
        "2020-05-02 11:00:00,000 INFO  org.apache.flink.runtime.taskmanager.Task                     - Window (1/4) "
        "(6c1a2b3c4d5e6f708192a3b4c5d6e7f8) switched from RUNNING to FAILED.",
        "java.lang.OutOfMemoryError: Java heap space",
        "\tat org.apache.flink.runtime.state.heap.CopyOnWriteStateTable.put(CopyOnWriteStateTable.java:320)",
        "\tat org.apache.flink.runtime.taskmanager.Task.run(Task.java:711)"]) + "\n"
    inc = incident_from_files(tmp_path, {"taskmanager.log": log, "flink-conf.yaml": "taskmanager.heap.size: 1024m\n"})
    [finding] = get_detector("oom-java-heap").detect(inc)
    assert finding.root_cause.slug == "heap-state-backend"
    assert "922m of JVM heap shared by all the TaskManager's slots" in finding.summary
    assert "state.backend not set" in finding.summary and "state.backend.type" not in finding.summary
    assert "managed memory the heap backend leaves idle" not in finding.summary  # no managed memory for RocksDB in 1.9
