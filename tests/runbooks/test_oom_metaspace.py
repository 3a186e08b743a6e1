"""Detector oom-metaspace: a metaspace too small for the job told apart from class loaders leaking across submissions
and restarts; metaspace sized with the TaskManager and JobManager memory models."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.evidence.memory import derive_jobmanager_memory, derive_taskmanager_memory
from flink_runbooks.render.patches import render_config_diff

SLUG = "oom-metaspace"
MIB = 1 << 20
TM_MESSAGE = ("Metaspace. The metaspace out-of-memory error has occurred. This can mean two things: either the job "
              "requires a larger size of JVM metaspace to load classes or there is a class loading leak. In the first "
              "case 'taskmanager.memory.jvm-metaspace.size' configuration option should be increased. If the error "
              "persists (usually in cluster after several job (re-)submissions) then there is probably a class "
              "loading leak in user code or some of its dependencies which has to be investigated and fixed. The "
              "task executor has to be shutdown...")
FATAL = f"""\
2023-10-12 16:41:07,118 ERROR org.apache.flink.runtime.taskexecutor.TaskManagerRunner      [] - Fatal error occurred while executing the TaskManager. Shutting it down...
java.lang.OutOfMemoryError: {TM_MESSAGE}
\tat java.lang.ClassLoader.defineClass1(Native Method) ~[?:?]
\tat org.apache.flink.util.ChildFirstClassLoader.loadClassWithoutExceptionHandling(ChildFirstClassLoader.java:71) ~[flink-dist-1.17.2.jar:1.17.2]"""
DEFAULT_TM = {"taskmanager.memory.process.size": "1728m"}


def _incident(text, config=None, version="1.17.2", role="taskmanager"):
    """Dispatcher and execution-graph records come from the JobManager, the rest from ``role``."""
    inc = incident_from_text(text, config, version, file=f"{role}.log")
    for ev in inc.events:
        on_jobmanager = (ev.logger or "").startswith(("org.apache.flink.runtime.dispatcher",
                                                      "org.apache.flink.runtime.executiongraph"))
        ev.role = "jobmanager" if on_jobmanager else role
    return inc


def _submission(ts: str, job: str, name: str = "orders-enricher") -> str:
    return (f"{ts} INFO  org.apache.flink.runtime.dispatcher.StandaloneDispatcher     [] - Received JobGraph submission "
            f"'{name}' ({job}).\n"
            f"{ts} INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job {name} ({job}) switched "
            f"from state CREATED to RUNNING.\n")


def _restart(ts: str, n: int, job: str = "71c4e2a90b3d5f6e8a1c2b3d4e5f6071") -> str:
    att = f"{job}_{'0' * 31}1_0_{n}"
    return (f"{ts} INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - upsert (1/2) ({att}) "
            f"switched from INITIALIZING to FAILED on 10.30.4.12:36117-91ad4c @ 10.30.4.12 (dataPort=39125).\n"
            f"java.sql.SQLTransientConnectionException: HikariPool-{n + 1} - Connection is not available, request "
            f"timed out after 30000ms.\n"
            f"Caused by: java.net.ConnectException: Connection refused\n"
            f"{ts} INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job cdc-mirror ({job}) "
            f"switched from state RUNNING to RESTARTING.\n")


def _flink(finding):
    return {p.key: p for p in finding.patches if p.target == "flink"}


def test_first_attempt_dying_means_the_metaspace_is_too_small_for_the_job():
    conf = {"taskmanager.memory.process.size": "1536m", "taskmanager.memory.jvm-metaspace.size": "128m"}
    text = _submission("2023-10-12 16:40:59,000", "0123456789abcdef0123456789abcdef") + FATAL
    [finding] = get_detector(SLUG).detect(_incident(text, conf))
    assert finding.root_cause.slug == "metaspace-too-small"
    assert "first attempt" in finding.summary and finding.confidence >= 0.8
    patches = _flink(finding)
    assert (patches["taskmanager.memory.jvm-metaspace.size"].current,
            patches["taskmanager.memory.jvm-metaspace.size"].proposed) == ("128m", "256m")
    assert patches["taskmanager.memory.process.size"].proposed == "1664m"
    before = derive_taskmanager_memory(conf, (1, 17))
    after = derive_taskmanager_memory({k: p.proposed for k, p in patches.items()}, (1, 17))
    assert after.metaspace == 256 * MIB and after.task_heap >= before.task_heap


def test_a_bare_excerpt_cannot_rule_out_a_leak_and_says_so():
    [finding] = get_detector(SLUG).detect(_incident(f"java.lang.OutOfMemoryError: {TM_MESSAGE}", DEFAULT_TM,
                                                    version=None, role="unknown"))
    # no start in view: a leak over earlier submissions is as likely as a small metaspace, so no cause is named
    assert finding.root_cause.slug == "undetermined" and finding.confidence < 0.5
    assert "cannot be told from a metaspace that is too small" in finding.summary
    assert "Collect next: the JobManager log since the cluster started" in finding.summary
    assert not [p for p in finding.patches if p.target == "flink"]  # a bigger metaspace would hide a leak


def test_several_submissions_before_the_oom_are_a_class_loader_leak():
    text = "".join(_submission(f"2023-10-12 {h:02d}:06:02,410", f"{h:032x}") for h in range(8, 16)) + FATAL
    [finding] = get_detector(SLUG).detect(_incident(text, DEFAULT_TM))
    assert finding.root_cause.slug == "classloader-leak"
    assert finding.details["job_submissions_before_oom"] == 8
    assert "8 job submissions reached this cluster" in finding.summary
    ops = next(p for p in finding.patches if p.target == "ops")
    assert "lib/" in ops.reason and "application mode" in ops.reason
    assert "classloader.check-leaked-classloader: false" in ops.reason and "benign" in ops.reason
    grow = _flink(finding)["taskmanager.memory.jvm-metaspace.size"]
    assert grow.proposed == "384m" and "stopgap" in grow.reason


def test_closed_classloader_warnings_are_a_class_loader_leak():
    text = ("2023-10-12 16:40:01,000 WARN  org.apache.flink.runtime.taskmanager.Task                    [] - "
            "Exception in thread 'HikariPool-3 housekeeper'\njava.lang.IllegalStateException: Trying to access closed "
            "classloader. Please check if you store classloaders directly or indirectly in static fields. If the "
            "stacktrace suggests that the leak occurs in a third party library and cannot be fixed immediately, you "
            "can disable this check with the configuration 'classloader.check-leaked-classloader'.\n" + FATAL)
    [finding] = get_detector(SLUG).detect(_incident(text, DEFAULT_TM))
    assert finding.root_cause.slug == "classloader-leak"
    assert finding.details["closed_classloader_warnings"] == 1


def test_a_restart_loop_before_the_oom_points_at_the_restarts():
    text = _submission("2025-05-20 01:15:05,000", "71c4e2a90b3d5f6e8a1c2b3d4e5f6071", "cdc-mirror") + "".join(
        _restart(f"2025-05-20 01:{16 + n:02d}:00,000", n) for n in range(5)) + FATAL.replace("2023-10-12 16:41",
                                                                                            "2025-05-20 01:30")
    [finding] = get_detector(SLUG).detect(_incident(text, DEFAULT_TM, version="2.0.0"))
    assert finding.root_cause.slug == "restart-loop-leak"
    assert finding.details["restarts_before_oom"] == 5
    assert finding.details["first_fault_of_restarts"] == "java.net.ConnectException: Connection refused"
    assert any(p.target == "ops" and "Connection refused" in p.reason for p in finding.patches)


def test_plain_metaspace_oom_wrapped_by_the_table_planner_is_recognised():
    text = """\
2022-03-14 09:06:12,002 WARN  org.apache.flink.runtime.taskmanager.Task                    [] - GroupWindowAggregate (2/2)#0 (b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0) switched from INITIALIZING to FAILED with failure cause: org.apache.flink.util.FlinkRuntimeException: org.apache.flink.api.common.InvalidProgramException: Table program cannot be compiled. This is a bug. Please file an issue.
\tat org.apache.flink.table.runtime.generated.CompileUtils.compile(CompileUtils.java:76) ~[flink-table-blink_2.12-1.13.6.jar:1.13.6]
Caused by: org.apache.flink.api.common.InvalidProgramException: Table program cannot be compiled. This is a bug. Please file an issue.
Caused by: java.lang.OutOfMemoryError: Metaspace
\tat java.lang.ClassLoader.defineClass1(Native Method) ~[?:?]"""
    [finding] = get_detector(SLUG).detect(_incident(text, {"taskmanager.memory.process.size": "1536m",
                                                          "taskmanager.memory.jvm-metaspace.size": "128m"}, "1.13.6"))
    assert finding.details["occurrences"] == 1 and finding.details["fatal"] is False


def test_jobmanager_metaspace_grows_the_jobmanager_model():
    text = """\
2024-01-22 16:40:02,100 INFO  org.apache.flink.runtime.dispatcher.StandaloneDispatcher     [] - Received JobGraph submission 'sql-job' (8a3f63a1c4e3f0e5b8e2a1c9d7f6e5a4).
2024-01-22 16:50:11,300 ERROR org.apache.flink.runtime.entrypoint.ClusterEntrypoint        [] - Fatal error occurred in the cluster entrypoint.
java.lang.OutOfMemoryError: Metaspace. The metaspace out-of-memory error has occurred. This can mean two things: either Flink Master requires a larger size of JVM metaspace to load classes or there is a class loading leak. In the first case 'jobmanager.memory.jvm-metaspace.size' configuration option should be increased. If the error persists (usually in cluster after several job (re-)submissions) then there is probably a class loading leak in user code or some of its dependencies which has to be investigated and fixed. The Flink Master has to be shutdown..."""
    conf = {"jobmanager.memory.process.size": "1600m"}
    for version in ("1.11.6", "2.0.0"):
        inc = _incident(text, conf, version=version, role="jobmanager")
        [finding] = get_detector(SLUG).detect(inc)
        assert finding.details["process"] == "jobmanager"
        patches = _flink(finding)
        assert patches["jobmanager.memory.jvm-metaspace.size"].proposed == "512m"
        assert patches["jobmanager.memory.process.size"].proposed == "1856m"
        after = derive_jobmanager_memory({**conf, **{k: p.proposed for k, p in patches.items()}}, (2, 0))
        before = derive_jobmanager_memory(conf, (2, 0))
        assert after.metaspace == 512 * MIB and after.heap >= before.heap
        diff = render_config_diff(finding.patches, inc.config, version)
        assert diff.startswith("--- a/flink-conf.yaml" if version == "1.11.6" else "--- a/config.yaml")


def test_metaspace_usage_in_gc_logs_without_an_oom_is_no_finding():
    text = _submission("2024-01-22 09:40:11,300", "0123456789abcdef0123456789abcdef", "pricing-rules") + \
        "[2024-01-22T09:39:21.300+0000][gc,metaspace] GC(3) Metaspace: 102400K(106496K)->61000K(65536K)\n"
    inc = _incident(text, DEFAULT_TM, version="1.18.1")
    assert get_detector(SLUG).detect(inc) == [] and run_detectors(inc).findings == []


@pytest.mark.parametrize("name,cause", [("session-resubmissions-leak", "classloader-leak"),
                                        ("restart-loop-leak", "restart-loop-leak"),
                                        ("metaspace-too-small-sql-job", "metaspace-too-small")])
def test_example_incidents_through_ingest(spark, name, cause):
    inc = ingest([str(example(SLUG, name))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, cause)
    if name == "restart-loop-leak":
        # 2.0's standard YAML: the grown metaspace lands nested under taskmanager.memory
        diff = render_config_diff(primary.patches, inc.config, inc.flink_version)
        assert "--- a/config.yaml" in diff and "+    jvm-metaspace.size: 384m" in diff


def test_healthy_and_near_miss_incidents_give_nothing(spark):
    for name in ("healthy", "resubmissions-metaspace-reclaimed"):
        inc = ingest([str(example(SLUG, name))], spark)
        assert get_detector(SLUG).detect(inc) == [], name


def test_before_1_10_the_limit_is_the_jvm_option_and_only_its_value_changes(spark):
    inc = ingest([str(example(SLUG, "max-metaspace-in-java-opts-1.9"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "metaspace-too-small")
    assert "192m, -XX:MaxMetaspaceSize in env.java.opts.taskmanager" in primary.summary
    assert [(p.key, p.proposed) for p in primary.patches] == [
        ("env.java.opts.taskmanager", "-XX:+UseG1GC -XX:MaxMetaspaceSize=384m")]  # the G1 option kept


def test_before_1_10_without_the_jvm_options_no_size_is_guessed(tmp_path):
    from corpus import incident_from_files
    log = ("2020-05-02 11:00:00,000 INFO  org.apache.flink.runtime.taskmanager.Task                     - Map (1/4) "
           "(6c1a2b3c4d5e6f708192a3b4c5d6e7f8) switched from RUNNING to FAILED.\njava.lang.OutOfMemoryError: Metaspace\n")
    inc = incident_from_files(tmp_path, {"taskmanager.log": log}, version="1.9.3")
    [finding] = get_detector(SLUG).detect(inc)
    assert "size unknown" in finding.summary and "JVM options the incident does not hold" in finding.summary
    assert not [p for p in finding.patches if p.target == "flink"]
