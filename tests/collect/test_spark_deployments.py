"""`diagnose` through a Spark standalone cluster (--master spark://) and a Spark Connect server (--remote sc://).

Both deployments run for real on 127.0.0.1 (see spark_deployments.py) and must give exactly the diagnosis of local
mode: the same findings with the same evidence and patches, and the same summary of the inputs.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import signal
import subprocess
import sys

import pytest

from corpus import example
from flink_runbooks.apps import cli
from spark_deployments import ConnectServer, StandaloneCluster, loopback_env, start_connect_server, start_standalone

pytestmark = [pytest.mark.cluster, pytest.mark.xdist_group("test_spark_deployments")]

CLI = pathlib.Path(sys.executable).with_name("flink-runbooks")
CLI_TIMEOUT_S = 300

PERMISSION_DENIED = example("checkpoint-tolerable-failure-threshold", "storage-permission-denied")
# A JobManager and three TaskManager logs, one of them gzipped.
FROZEN_TASKMANAGER = example("tm-heartbeat-timeout", "frozen-jvm")
# Rolled logs that were gzipped, a second TaskManager and a RocksDB LOG file without an extension.
CORRUPT_ROCKSDB = example("rocksdb-restore-corruption", "remote-checkpoint-corrupt-v1.20")

INCIDENTS = {
    "one-taskmanager": [str(PERMISSION_DENIED)],
    "three-taskmanagers-one-gzipped": [str(FROZEN_TASKMANAGER)],
}
# Listing without the JVM (Spark Connect) expands globs and takes single files in Python: worth its own cases.
CONNECT_ONLY_INPUTS = {
    "glob-of-gzipped-logs-and-a-config-file": [str(CORRUPT_ROCKSDB / "log" / "*.gz"),
                                               str(CORRUPT_ROCKSDB / "flink-conf.yaml")],
}


# ------------------------------------------------------------------------------------------------ deployments

@pytest.fixture(scope="module")
def standalone(tmp_path_factory) -> StandaloneCluster:
    cluster = start_standalone(tmp_path_factory.mktemp("standalone"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory) -> ConnectServer:
    server = start_connect_server(tmp_path_factory.mktemp("connect"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def local_diagnosis(spark):
    """The reference: the same command in local mode, run in this process on the session's local[2] Spark."""
    cache: dict[tuple[str, ...], tuple[int, dict]] = {}

    def diagnose(paths: list[str]) -> tuple[int, dict]:
        key = tuple(paths)
        if key not in cache:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = cli.main(["diagnose", *paths, "--format", "json"])
            cache[key] = (code, json.loads(out.getvalue()))
        return cache[key]

    return diagnose


# ------------------------------------------------------------------------------------------------ helpers

def run_diagnose(paths: list[str], *spark_args: str,
                 deployment: StandaloneCluster | ConnectServer | None = None) -> subprocess.CompletedProcess:
    """``flink-runbooks diagnose PATHS --format json SPARK_ARGS`` as a user would run it."""
    argv = [str(CLI), "diagnose", *paths, "--format", "json", *spark_args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=loopback_env(),
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=CLI_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(argv)} still running after {CLI_TIMEOUT_S}s\nstderr:\n{err[-4000:]}\n"
                    f"{deployment.logs_tail() if deployment else ''}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def comparable(doc: dict) -> dict:
    """The diagnosis as deployments must agree on it.

    Input files are compared as a set: Hadoop lists a directory in the filesystem's order, the JVM-less listing used
    with Spark Connect in sorted order, and neither order means anything.
    """
    doc = json.loads(json.dumps(doc))
    doc["inputs"]["files"].sort(key=lambda f: f["path"])
    return doc


def assert_same_diagnosis(result: subprocess.CompletedProcess, local: tuple[int, dict],
                          deployment: StandaloneCluster | ConnectServer) -> None:
    context = f"\ncommand: {' '.join(result.args)}\nstderr:\n{result.stderr[-4000:]}\n{deployment.logs_tail()}"
    assert result.returncode == local[0], f"exit code {result.returncode}, local mode {local[0]}{context}"
    doc, expected = comparable(json.loads(result.stdout)), comparable(local[1])
    # Part by part first, so that a failure names what differs; then the rest of the document.
    assert [(f["runbook"], f["root_cause"]["slug"], f["severity"], f["primary"]) for f in doc["findings"]] == \
        [(f["runbook"], f["root_cause"]["slug"], f["severity"], f["primary"]) for f in expected["findings"]], context
    assert [[(e["file"], e["line"]) for e in f["evidence"]] for f in doc["findings"]] == \
        [[(e["file"], e["line"]) for e in f["evidence"]] for f in expected["findings"]], context
    assert [f["patches"] for f in doc["findings"]] == [f["patches"] for f in expected["findings"]], context
    assert doc["inputs"] == expected["inputs"], context
    assert doc == expected, context


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    context = f"\ncommand: {' '.join(result.args)}\nstdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-4000:]}"
    assert result.returncode == cli.EXIT_BAD_INPUT, f"exit code {result.returncode}{context}"
    assert result.stdout == "", context
    lines = [line for line in result.stderr.splitlines() if not line.startswith("WARNING: Using incubator modules")]
    assert len(lines) == 1 and lines[0].startswith("flink-runbooks: "), context
    for fragment in fragments:
        assert fragment in lines[0], context


# ------------------------------------------------------------------------------------------------ standalone

@pytest.mark.parametrize("paths", INCIDENTS.values(), ids=INCIDENTS.keys())
def test_standalone_cluster_gives_the_local_diagnosis(standalone, local_diagnosis, paths):
    result = run_diagnose(paths, "--master", standalone.master_url, deployment=standalone)
    assert_same_diagnosis(result, local_diagnosis(paths), standalone)
    # The work ran in executors the worker launched, not in a driver that fell back to local mode.
    executor_logs = list(standalone.work_dir.glob("worker-work/app-*/*/stderr"))
    assert executor_logs, f"the worker launched no executor\n{standalone.logs_tail()}"


def test_unreachable_standalone_master_is_a_one_line_error():
    result = run_diagnose([str(PERMISSION_DENIED)], "--master", "spark://127.0.0.1:1")
    assert_one_line_error(result, "cannot reach the Spark master at spark://127.0.0.1:1")


# ------------------------------------------------------------------------------------------------ Spark Connect

@pytest.mark.parametrize("paths", [*INCIDENTS.values(), *CONNECT_ONLY_INPUTS.values()],
                         ids=[*INCIDENTS.keys(), *CONNECT_ONLY_INPUTS.keys()])
def test_spark_connect_gives_the_local_diagnosis(connect_server, local_diagnosis, paths):
    result = run_diagnose(paths, "--remote", connect_server.url, deployment=connect_server)
    assert_same_diagnosis(result, local_diagnosis(paths), connect_server)


def test_spark_connect_reads_file_uris(connect_server, local_diagnosis):
    # README: inputs may be Hadoop-FS URIs; file: is the one every deployment can read.
    paths = [PERMISSION_DENIED.as_uri()]
    result = run_diagnose(paths, "--remote", connect_server.url, deployment=connect_server)
    assert_same_diagnosis(result, local_diagnosis(paths), connect_server)


def test_spark_connect_missing_path_is_a_one_line_error(connect_server, tmp_path):
    missing = tmp_path / "no-such-incident"
    result = run_diagnose([str(missing)], "--remote", connect_server.url)
    assert_one_line_error(result, f"no such file or directory: {missing}")


def test_spark_connect_folder_without_logs_is_a_one_line_error(connect_server, tmp_path):
    empty = tmp_path / "empty-incident"
    empty.mkdir()
    result = run_diagnose([str(empty)], "--remote", connect_server.url)
    assert_one_line_error(result, f"nothing to read under {empty}")


def test_unreachable_spark_connect_server_is_a_one_line_error():
    result = run_diagnose([str(PERMISSION_DENIED)], "--remote", "sc://127.0.0.1:1/;token=not-to-be-shown")
    assert_one_line_error(result, "cannot reach the Spark Connect server at sc://127.0.0.1:1")
    assert "not-to-be-shown" not in result.stderr
