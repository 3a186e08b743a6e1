"""A live incident: a real Flink standalone cluster (PyPI's distribution, one 1.x and one 2.x release, installed by
scripts/setup-flink.sh) runs a job whose code throws on every attempt until its restarts are exhausted;
`flink-runbooks diagnose <REST URL>` pulls the cluster and names the failure. A secret planted in the cluster's
configuration reaches no byte written.

The cluster runs from a configuration in the test's own folder, binds every port to 127.0.0.1 (ports chosen free)
and is stopped by the test, with any JVM it leaves behind."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from corpus import ROOT
from support import processes_marked

pytestmark = [pytest.mark.live, pytest.mark.xdist_group("live")]

RELEASES = ("1.20.3", "2.3.0")
JOB_SOURCE = ROOT / "tests" / "apps" / "live_jobs" / "ThrowingJob.java"
# Flink masks keys that say "secret" or "password" itself; an access key it prints as it is.
PLANTED = "AKIAPLANTEDLIVE7F3A0001"
CLI = [sys.executable, "-m", "flink_runbooks.apps.cli"]


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _wait(what: str, seconds: float, condition):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if condition():
                return
        time.sleep(1)
    raise AssertionError(f"timed out after {seconds:g} s waiting for {what}")


@contextlib.contextmanager
def flink_cluster(version: str, folder):
    """A standalone session cluster of ``version`` with one TaskManager; yields its REST URL."""
    home = ROOT / "build" / "flink" / version / "pyflink"
    assert (home / "bin" / "start-cluster.sh").is_file(), \
        f"Flink {version} is not installed: run scripts/setup-flink.sh {version} (make test does)"
    conf, log, tmp = folder / "conf", folder / "log", folder / "tmp"
    for d in (conf, log, tmp):
        d.mkdir(parents=True)
    for f in home.joinpath("conf").glob("log4j*.properties"):
        (conf / f.name).write_text(f.read_text())
    java_opts = next(line.split("all:", 1)[1].strip() for line in (home / "conf" / "config.yaml").read_text().splitlines()
                     if line.strip().startswith("all:"))
    rest_port, rpc_port = _free_port(), _free_port()
    marker = f"FLINK_RUNBOOKS_LIVE_{os.getpid()}_{rest_port}"
    (conf / "config.yaml").write_text(f"""\
env.java.opts.all: {java_opts}
env.log.dir: {log}
jobmanager.bind-host: 127.0.0.1
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: {rpc_port}
jobmanager.memory.process.size: 1024m
taskmanager.bind-host: 127.0.0.1
taskmanager.host: 127.0.0.1
taskmanager.numberOfTaskSlots: 1
taskmanager.memory.process.size: 1024m
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: {rest_port}
io.tmp.dirs: {tmp}
restart-strategy.type: fixed-delay
restart-strategy.fixed-delay.attempts: 2
restart-strategy.fixed-delay.delay: 1 s
s3.access-key: {PLANTED}
""")
    (conf / "masters").write_text(f"127.0.0.1:{rest_port}\n")
    (conf / "workers").write_text("127.0.0.1\n")
    env = {**os.environ, "FLINK_CONF_DIR": str(conf), marker: "1"}
    url = f"http://127.0.0.1:{rest_port}"
    try:
        subprocess.run([str(home / "bin" / "start-cluster.sh")], env=env, cwd=folder, check=True,
                       capture_output=True, timeout=120)
        _wait("the JobManager with one TaskManager", 120, lambda: _get(f"{url}/overview")["taskmanagers"] == 1)
        yield url, home, env
    finally:
        subprocess.run([str(home / "bin" / "stop-cluster.sh")], env=env, cwd=folder, capture_output=True, timeout=120)
        for pid in processes_marked(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _job_jar(home, folder) -> str:
    classes = folder / "classes"
    classes.mkdir()
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{home}/lib/*", str(JOB_SOURCE)], check=True,
                   capture_output=True, timeout=180)
    jar = folder / "job.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True, capture_output=True, timeout=60)
    return str(jar)


@pytest.mark.parametrize("version", RELEASES)
def test_a_failing_job_on_a_live_cluster_is_pulled_and_diagnosed(version, tmp_path):
    with flink_cluster(version, tmp_path / "cluster") as (url, home, env):
        jar = _job_jar(home, tmp_path)
        subprocess.run([str(home / "bin" / "flink"), "run", "-d", "-c", "ThrowingJob", jar], env=env, check=True,
                       capture_output=True, timeout=180)
        _wait("the job to fail", 180, lambda: any(j["state"] == "FAILED" for j in _get(f"{url}/jobs/overview")["jobs"]))
        out = tmp_path / "pulled"
        run = subprocess.run(CLI + ["diagnose", url, "--format", "json", "--pull-dir", str(out)],
                             capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    assert doc["flink_version"] == version
    primary = next(f for f in doc["findings"] if f["primary"])
    assert (primary["runbook"], primary["root_cause"]["slug"]) == ("restart-strategy-exhausted",
                                                                    "same-fault-every-attempt")
    assert "order 300 has no customer" in primary["summary"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"] == url and manifest["partial"] is False and len(manifest["jobs"]) == 1
    exceptions = out / "rest" / "jobs" / manifest["jobs"][0] / "exceptions.json"
    assert "order 300 has no customer" in exceptions.read_text()
    written = [p for p in out.rglob("*") if p.is_file()]
    assert not [str(p) for p in written if PLANTED in p.read_text(errors="replace")]
    assert PLANTED not in run.stdout + run.stderr
