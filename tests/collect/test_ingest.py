"""Spark ingestion: layouts, multi-line records, line numbers, roles, versions, configs and bad input."""
from __future__ import annotations

import gzip
import pathlib

import pytest

from flink_runbooks.collect.listing import InputError

from flink_runbooks.diagnose import ingest

JM_LOG4J2 = """\
2024-03-01 10:00:00,000 INFO  org.apache.flink.runtime.entrypoint.ClusterEntrypoint        [] -  Starting StandaloneSessionClusterEntrypoint (Version: 1.18.1, Scala: 2.12, Rev:a8c8b1c, Date:2024-01-10T10:00:00+01:00)
2024-03-01 10:00:00,010 INFO  org.apache.flink.configuration.GlobalConfiguration           [] - Loading configuration property: execution.checkpointing.interval, 30s
2024-03-01 10:00:00,011 INFO  org.apache.flink.configuration.GlobalConfiguration           [] - Loading configuration property: s3.secret-key, ******
2024-03-01 10:00:00,012 INFO  org.apache.flink.configuration.GlobalConfiguration           [] - Loading configuration property: execution.checkpointing.timeout, 2 min
2024-03-01 10:05:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Triggering checkpoint 7 (type=CheckpointType{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}) @ 1709287500000 for job 0123456789abcdef0123456789abcdef.
2024-03-01 10:05:01,000 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Map (1/2) (a_b_0_0) switched from RUNNING to FAILED on tm-1 @ host (dataPort=1).
java.lang.RuntimeException: user code failed
\tat com.acme.Job.map(Job.java:42)
\tat org.apache.flink.streaming.api.operators.StreamMap.processElement(StreamMap.java:38)
Caused by: java.lang.IllegalStateException: bad record
\t... 2 more
2024-03-01 10:05:02,000 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job orders (0123456789abcdef0123456789abcdef) switched from state RUNNING to RESTARTING.
"""

TM_LOG4J1 = """\
2019-05-01 08:00:00,000 INFO  org.apache.flink.runtime.taskexecutor.TaskManagerRunner       - Starting TaskManager (Version: 1.8.3, Rev:3dfb6e7, Date:10.12.2019 @ 14:32:11 CET)
2019-05-01 08:00:01,000 INFO  org.apache.flink.runtime.taskexecutor.TaskManagerRunner       - Starting TaskManager with ResourceID: 8b1f2c
2019-05-01 08:10:00,000 WARN  org.apache.flink.runtime.taskmanager.Task                     - Source (1/1) switched from RUNNING to FAILED.
java.lang.OutOfMemoryError: Java heap space
\tat java.util.Arrays.copyOf(Arrays.java:3236)
"""


def _write(path: pathlib.Path, text: str) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_roles_versions_config_and_chains_from_a_directory(spark, tmp_path):
    _write(tmp_path / "log" / "flink-flink-standalonesession-0-host1.log", JM_LOG4J2)
    _write(tmp_path / "log" / "flink-flink-taskexecutor-0-host2.log", TM_LOG4J1)
    _write(tmp_path / "flink-conf.yaml", "execution.checkpointing.interval: 10s\n# comment\nstate.backend: rocksdb\n")
    inc = ingest([str(tmp_path)], spark)

    roles = {pathlib.Path(f.path).name: (f.role, f.host, f.layout) for f in inc.inputs if f.kind == "log"}
    assert roles["flink-flink-standalonesession-0-host1.log"] == ("jobmanager", "host1", "log4j2")
    assert roles["flink-flink-taskexecutor-0-host2.log"] == ("taskmanager", "host2", "log4j1")
    assert inc.flink_version == "1.18.1"  # the JobManager banner outranks an older TaskManager
    # the process printed 30s; the user's file says 10s: what the process loaded wins over the file
    assert inc.config.get("execution.checkpointing.interval") == "30s"
    assert inc.config.get("state.backend") == "rocksdb"
    assert inc.config.get("s3.secret-key") == "******"

    failed = next(ev for ev in inc.events if "switched from RUNNING to FAILED on" in ev.message)
    assert failed.line == 6 and failed.role == "jobmanager"
    assert [c.cls for c in failed.chain] == ["java.lang.RuntimeException", "java.lang.IllegalStateException"]
    assert failed.truncated
    oom = next(ev for ev in inc.events if ev.has_exception("OutOfMemoryError"))
    assert oom.role == "taskmanager" and oom.line == 3


def test_gzip_and_rolled_files_are_read(spark, tmp_path):
    with gzip.open(tmp_path / "taskmanager.log.2.gz", "wt") as fh:
        fh.write(TM_LOG4J1)
    _write(tmp_path / "taskmanager.log.1", TM_LOG4J1)
    inc = ingest([str(tmp_path)], spark)
    files = sorted(pathlib.Path(f.path).name for f in inc.inputs)
    assert files == ["taskmanager.log.1", "taskmanager.log.2.gz"]
    assert len([ev for ev in inc.events if ev.has_exception("java.lang.OutOfMemoryError")]) == 2


def test_line_numbers_stay_exact_across_file_blocks(spark, tmp_path):
    noise = "".join(f"2024-03-01 10:00:{i % 60:02d},000 INFO  a.b.C [] - noise line {i}\n" for i in range(3000))
    text = noise + "2024-03-01 11:00:00,000 ERROR a.b.C [] - the needle\n" + noise
    _write(tmp_path / "jobmanager.log", text)
    inc = ingest([str(tmp_path / "jobmanager.log")], spark, split_bytes=16 * 1024)
    needle = [ev for ev in inc.events if ev.message == "the needle"]
    assert [ev.line for ev in needle] == [3001]


def test_glob_selects_files(spark, tmp_path):
    _write(tmp_path / "a" / "taskmanager.log", TM_LOG4J1)
    _write(tmp_path / "b" / "jobmanager.log", JM_LOG4J2)
    inc = ingest([str(tmp_path / "*" / "task*.log")], spark)
    assert [pathlib.Path(f.path).name for f in inc.inputs] == ["taskmanager.log"]


def test_missing_path_is_a_clear_error(spark, tmp_path):
    with pytest.raises(InputError, match="no such file or directory"):
        ingest([str(tmp_path / "nope")], spark)


def test_empty_directory_is_a_clear_error(spark, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="nothing to read"):
        ingest([str(tmp_path / "empty")], spark)


def test_empty_binary_and_unknown_files_are_named_in_warnings(spark, tmp_path):
    _write(tmp_path / "jobmanager.log", JM_LOG4J2)
    (tmp_path / "empty.log").write_text("")
    (tmp_path / "core.log").write_bytes(bytes(range(256)) * 64)
    _write(tmp_path / "weird.log", "just some words\nwithout any structure\n")
    inc = ingest([str(tmp_path)], spark)
    text = "\n".join(inc.warnings)
    assert "empty.log is empty" in text
    assert "core.log looks binary" in text
    assert "weird.log: unknown log layout" in text
    assert not any(ev.file.endswith("core.log") for ev in inc.events)
    assert any(ev.file.endswith("jobmanager.log") for ev in inc.events)


def test_non_utf8_bytes_are_read_with_a_warning(spark, tmp_path):
    data = JM_LOG4J2.encode() + "2024-03-01 10:06:00,000 ERROR a.b.C [] - caf\xe9 broken\n".encode("latin-1")
    (tmp_path / "jobmanager.log").write_bytes(data)
    inc = ingest([str(tmp_path)], spark)
    assert any("not valid UTF-8" in w for w in inc.warnings)
    assert any("broken" in ev.message for ev in inc.events)


def test_a_five_megabyte_line_is_cut_not_fatal(spark, tmp_path):
    huge = "2024-03-01 10:00:00,000 ERROR a.b.C [] - " + "x" * (5 * 1024 * 1024) + "\n"
    _write(tmp_path / "jobmanager.log", huge + JM_LOG4J2)
    inc = ingest([str(tmp_path)], spark)
    big = inc.events[0] if inc.events[0].message.startswith("x") else next(e for e in inc.events if e.message.startswith("xxx"))
    assert len(big.message) < 5000
    assert inc.flink_version == "1.18.1"


def test_broken_yaml_is_a_warning_and_logs_are_still_read(spark, tmp_path):
    _write(tmp_path / "config.yaml", "execution:\n  checkpointing:\n    interval: 10s\n   timeout: [oops\n")
    _write(tmp_path / "jobmanager.log", JM_LOG4J2)
    inc = ingest([str(tmp_path)], spark)
    assert any("config.yaml" in w and "line" in w for w in inc.warnings)
    assert inc.config.get("execution.checkpointing.timeout") == "2 min"


def test_version_override_and_excerpt_without_timestamps(spark, tmp_path):
    _write(tmp_path / "ticket.txt", "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.\n"
                                    "    at org.apache.flink.runtime.checkpoint.CheckpointFailureManager.checkFailureAgainstCounter\n(Checkpoint")
    inc = ingest([str(tmp_path / "ticket.txt")], spark, flink_version="1.16.2")
    assert inc.flink_version == "1.16.2" and inc.version_source == "--flink-version"
    assert inc.inputs[0].layout == "excerpt"
    assert inc.events[0].chain[0].cls == "org.apache.flink.util.FlinkRuntimeException"


def test_docker_compose_prefixed_log(spark, tmp_path):
    lines = [f"jobmanager-1  | {line}" for line in JM_LOG4J2.splitlines()]
    _write(tmp_path / "compose.log", "\n".join(lines) + "\n")
    inc = ingest([str(tmp_path)], spark)
    failed = next(ev for ev in inc.events if "switched from RUNNING to FAILED on" in ev.message)
    assert [c.cls for c in failed.chain] == ["java.lang.RuntimeException", "java.lang.IllegalStateException"]


def test_an_elasticsearch_export_of_flink_records_is_diagnosed_on_both_paths(spark, tmp_path):
    """A log store's export (one JSON document per record, the trace folded into its message) names the failure
    as the log it came from would, in this process and through Spark."""
    import json

    from flink_runbooks.diagnose import run_detectors

    trace = ("org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.\n"
             "\tat org.apache.flink.runtime.checkpoint.CheckpointFailureManager.checkFailureAgainstCounter("
             "CheckpointFailureManager.java:212)\n"
             "Caused by: java.io.IOException: Mkdirs failed to create file:/ckpt/chk-3")
    hits = [{"_index": "flink-2024.03.05", "_source": {"@timestamp": "2024-03-05T11:02:17.433Z", "message": (
        "2024-03-05 11:02:17,433 INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - "
        "Trying to recover from a global failure.\n" + trace)}}]
    _write(tmp_path / "export.ndjson", "\n".join(json.dumps(h) for h in hits) + "\n")
    for path in (None, spark):
        primary = run_detectors(ingest([str(tmp_path)], path)).primary
        assert primary is not None and primary.runbook == "checkpoint-tolerable-failure-threshold"


_FLINK_CONF = ("# production settings\njobmanager.rpc.address: flink-jm\ntaskmanager.numberOfTaskSlots: 4\n"
               "state.backend.type: rocksdb\nexecution.checkpointing.interval: 1 min\n")


def test_a_flink_configuration_under_another_name_is_read_as_configuration(tmp_path):
    from flink_runbooks.collect.listing import list_inputs

    (tmp_path / "prod-flink-conf.yaml").write_text(_FLINK_CONF)
    (tmp_path / "flink-conf.yaml.txt").write_text(_FLINK_CONF)
    (tmp_path / "config.yaml.bak").write_text("jobmanager:\n  rpc:\n    address: flink-jm\ntaskmanager:\n"
                                             "  numberOfTaskSlots: 4\nstate:\n  backend:\n    type: rocksdb\n")
    # other programs' YAML, a pasted trace and a log stay what they are
    (tmp_path / "docker-compose.yaml").write_text("services:\n  jobmanager:\n    image: flink:1.20\n"
                                                  "    command: jobmanager\n")
    (tmp_path / "application-config.yml").write_text("server.port: 8080\nspring.datasource.url: jdbc:mysql://db/app\n"
                                                     "management.endpoints.web.exposure.include: health\n")
    (tmp_path / "ticket.txt").write_text("java.lang.IllegalStateException: boom\n\tat com.acme.Job.map(Job.java:3)\n"
                                         "state.backend.type: rocksdb\n")
    (tmp_path / "jobmanager.log.1").write_text(
        "2024-05-02 10:00:00,000 INFO  org.apache.flink.configuration.GlobalConfiguration [] - Loading "
        "configuration property: jobmanager.rpc.address, flink-jm\n")
    listed = list_inputs(None, [str(tmp_path)])
    configs = sorted(uri.rsplit("/", 1)[-1] for uri in listed.configs)
    logs = sorted(uri.rsplit("/", 1)[-1] for uri, _size in listed.logs)
    assert configs == ["config.yaml.bak", "flink-conf.yaml.txt", "prod-flink-conf.yaml"]
    assert logs == ["jobmanager.log.1", "ticket.txt"]
    assert sorted(name.rsplit("/", 1)[-1] for name in listed.skipped) == ["application-config.yml",
                                                                          "docker-compose.yaml"]


def test_a_renamed_configuration_is_what_the_patches_are_written_against(tmp_path):
    import shutil

    from corpus import example
    from flink_runbooks.diagnose import run_detectors
    from flink_runbooks.render.patches import render_config_diff

    incident = tmp_path / "incident"
    shutil.copytree(example("config-value-invalid", "duration-unit-for-old-release-1.17"), incident)
    (incident / "flink-conf.yaml").rename(incident / "prod-flink-conf.yaml")
    d = run_detectors(ingest([str(incident)]))
    assert not any("prod-flink-conf.yaml" in w for w in d.incident.warnings)  # not skipped, not a log
    assert d.incident.config.file_path.endswith("prod-flink-conf.yaml")
    patches = [p for p in d.primary.patches if p.target == "flink"]
    assert [(p.key, p.current) for p in patches] == [("heartbeat.timeout", "2 min")]
    assert [(pathlib.Path(cv.source.path).name, cv.source.line) for cv in d.incident.config.history("heartbeat.timeout")
            if cv.source.kind == "file"] == [("prod-flink-conf.yaml", 17)]
    diff = render_config_diff(patches, d.incident.config, d.incident.flink_version)
    assert diff.startswith("--- a/prod-flink-conf.yaml") and "+heartbeat.timeout: 120000" in diff


def test_the_kubernetes_operators_banner_is_not_taken_for_flinks_release():
    from flink_runbooks.collect.ingest import detect_version
    from flink_runbooks.model import Event

    def line(message: str, n: int) -> Event:
        return Event(file="operator.log", line=n, ts=None, level="INFO", logger="o.a.f.k.o.FlinkOperator",
                     message=message, role="unknown")

    operator = line("Starting Flink Kubernetes Operator (Version: 1.13.0, Flink Version: 1.20.1, Rev:f3b0a1c)", 1)
    assert detect_version([operator], {}) == (None, None)
    flink = line("Starting StandaloneSessionClusterEntrypoint (Version: 1.20.3, Scala: 2.12, Rev:e4ae3e0)", 2)
    assert detect_version([operator, flink], {})[0] == "1.20.3"
