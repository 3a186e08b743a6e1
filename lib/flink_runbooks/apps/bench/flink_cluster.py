"""A real Flink standalone session cluster on 127.0.0.1, for the live benchmark and the live test tier.

It runs from a distribution that ``scripts/setup-flink.sh`` installs under ``build/flink/<version>/pyflink``, with a
configuration written into its own folder: every port chosen free on 127.0.0.1, logs, temporary files, the job
archive and the HistoryServer's files in that folder, the Prometheus reporter on a range of free ports (one port
per process). Every process it starts carries a marker in its environment, so whatever a stop script leaves behind
is killed when the block ends, even after a failure.
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Iterator

ROOT = pathlib.Path(__file__).resolve().parents[4]
FLINK_ROOT = ROOT / "build" / "flink"
PROMETHEUS_REPORTER = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory"
THROWING_JOB = ROOT / "tests" / "apps" / "live_jobs" / "ThrowingJob.java"


def flink_home(version: str) -> pathlib.Path | None:
    """The installed distribution of ``version``, or None when scripts/setup-flink.sh has not installed it."""
    home = FLINK_ROOT / version / "pyflink"
    return home if (home / "bin" / "start-cluster.sh").is_file() else None


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(count: int) -> range:
    """``count`` consecutive ports free on 127.0.0.1 (Flink's reporter takes a range, one port per process)."""
    for _ in range(100):
        first = free_port()
        wanted = range(first, first + count)
        if wanted.stop > 65535:
            continue
        with contextlib.ExitStack() as held:
            try:
                for port in wanted:
                    s = held.enter_context(contextlib.closing(socket.socket()))
                    s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return wanted
    raise RuntimeError(f"no {count} consecutive free ports on 127.0.0.1")


def processes_marked(marker: str) -> list[int]:
    """Processes other than this one whose environment carries ``marker``: what a run started and left running."""
    found = []
    for proc in pathlib.Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if marker.encode() in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def stop_marked(marker: str, grace_s: float = 10) -> None:
    """Stops every process carrying ``marker``: SIGTERM (a JVM runs its shutdown hooks), then SIGKILL for any left
    after ``grace_s`` (the stop scripts do the same, one process after the other and slower)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in processes_marked(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        with contextlib.suppress(TimeoutError):
            wait_until("the marked processes to end", grace_s, lambda: not processes_marked(marker), 0.2)
            return


def get_json(url: str, timeout: float = 5) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def wait_until(what: str, seconds: float, condition: Callable[[], Any], interval: float = 0.5) -> Any:
    """The first true value of ``condition`` (an unreachable or half-started server counts as not yet)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, KeyError):
            if value := condition():
                return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {seconds:g} s waiting for {what}")


def _java_opts(home: pathlib.Path) -> str:
    """The JVM options the distribution's own configuration sets for every process (the module opens 17 needs)."""
    lines = (home / "conf" / "config.yaml").read_text().splitlines()
    return next((line.split("all:", 1)[1].strip() for line in lines if line.strip().startswith("all:")), "")


@dataclass
class Cluster:
    url: str
    home: pathlib.Path
    folder: pathlib.Path
    env: dict[str, str]
    marker: str
    metrics_ports: range  # the Prometheus reporter's ports: the JobManager's and each TaskManager's
    history_url: str
    archive: pathlib.Path  # where the JobManager archives finished jobs for the HistoryServer

    def get(self, path: str) -> Any:
        return get_json(self.url + path)

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        """A script of the distribution's ``bin/`` against this cluster's configuration."""
        return subprocess.run([str(self.home / "bin" / args[0]), *args[1:]], env=self.env, cwd=self.folder,
                              check=True, capture_output=True, text=True, timeout=timeout)

    def submit(self, jar: str, main_class: str, *args: str) -> str:
        """Submits a job detached; returns its id once the cluster lists it."""
        known = {j["id"] for j in self.get("/jobs")["jobs"]}
        self.run("flink", "run", "-d", "-c", main_class, jar, *args)
        return wait_until("the job to be listed", 60,
                          lambda: next((j["id"] for j in self.get("/jobs")["jobs"] if j["id"] not in known), None))

    def job_state(self, job_id: str) -> str:
        return self.get(f"/jobs/{job_id}")["state"]

    def taskmanagers(self) -> int:
        return self.get("/overview")["taskmanagers"]

    def taskmanager_pids(self) -> list[int]:
        return sorted(pid for pid in processes_marked(self.marker) if _is_taskmanager(pid))

    def start_taskmanager(self) -> None:
        before = self.taskmanagers()
        self.run("taskmanager.sh", "start")
        wait_until("the new TaskManager to register", 120, lambda: self.taskmanagers() > before)

    @contextlib.contextmanager
    def history_server(self) -> Iterator[str]:
        """The HistoryServer over this cluster's job archive, stopped after the block; yields its URL."""
        try:
            self.run("historyserver.sh", "start")
            wait_until("the HistoryServer", 120, lambda: get_json(self.history_url + "/config"))
            yield self.history_url
        finally:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self.run("historyserver.sh", "stop", timeout=60)


def _is_taskmanager(pid: int) -> bool:
    try:
        return b"TaskManagerRunner" in pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@contextlib.contextmanager
def standalone_cluster(home: pathlib.Path, folder: pathlib.Path, *, taskmanagers: int = 1, slots: int = 1,
                       config: dict[str, Any] | None = None) -> Iterator[Cluster]:
    """A standalone session cluster of the distribution at ``home`` with ``taskmanagers`` TaskManagers (their
    options overridden or extended by ``config``); yields it once every TaskManager has registered, and stops it
    and everything it started when the block ends."""
    conf, log, tmp, archive = folder / "conf", folder / "log", folder / "tmp", folder / "archive"
    for d in (conf, log, tmp, archive):
        d.mkdir(parents=True, exist_ok=True)
    for f in home.joinpath("conf").glob("log4j*.properties"):
        (conf / f.name).write_text(f.read_text())
    rest_port, rpc_port, history_port = free_port(), free_port(), free_port()
    metrics = free_ports(taskmanagers + 2)  # a spare: a TaskManager started later
    marker = f"FLINK_RUNBOOKS_LIVE_{os.getpid()}_{rest_port}"
    options: dict[str, Any] = {
        "env.java.opts.all": _java_opts(home),
        "env.log.dir": log,
        "env.pid.dir": tmp,
        "jobmanager.bind-host": "127.0.0.1",
        "jobmanager.rpc.address": "127.0.0.1",
        "jobmanager.rpc.port": rpc_port,
        "jobmanager.memory.process.size": "1024m",
        "taskmanager.bind-host": "127.0.0.1",
        "taskmanager.host": "127.0.0.1",
        "taskmanager.numberOfTaskSlots": slots,
        "taskmanager.memory.process.size": "1024m",
        "rest.address": "127.0.0.1",
        "rest.bind-address": "127.0.0.1",
        "rest.port": rest_port,
        "io.tmp.dirs": tmp,
        "web.tmpdir": tmp,
        "metrics.reporter.prom.factory.class": PROMETHEUS_REPORTER,
        "metrics.reporter.prom.port": f"{metrics.start}-{metrics.stop - 1}",
        "jobmanager.archive.fs.dir": f"file://{archive}",
        "historyserver.archive.fs.dir": f"file://{archive}",
        "historyserver.archive.fs.refresh-interval": 1000,
        "historyserver.web.address": "127.0.0.1",
        "historyserver.web.port": history_port,
        "historyserver.web.tmpdir": tmp / "history",
        **(config or {}),
    }
    (conf / "config.yaml").write_text("".join(f"{key}: {value}\n" for key, value in options.items()))
    (conf / "masters").write_text(f"127.0.0.1:{rest_port}\n")
    (conf / "workers").write_text("127.0.0.1\n" * taskmanagers)
    env = {**os.environ, "FLINK_CONF_DIR": str(conf), "FLINK_LOG_DIR": str(log), marker: "1"}
    cluster = Cluster(f"http://127.0.0.1:{rest_port}", home, folder, env, marker, metrics,
                      f"http://127.0.0.1:{history_port}", archive)
    try:
        cluster.run("start-cluster.sh", timeout=120)
        wait_until(f"the JobManager with {taskmanagers} TaskManager(s)", 120,
                   lambda: cluster.taskmanagers() == taskmanagers)
        yield cluster
    finally:
        stop_marked(marker)


def job_jar(home: pathlib.Path, source: pathlib.Path, folder: pathlib.Path) -> str:
    """The job ``source`` (one Java file) compiled against the distribution's jars, as a jar in ``folder``."""
    classes = folder / f"classes-{source.stem}"
    classes.mkdir(parents=True)
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{home}/lib/*", str(source)], check=True,
                   capture_output=True, timeout=180)
    jar = folder / f"{source.stem}.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True, capture_output=True, timeout=60)
    return str(jar)
