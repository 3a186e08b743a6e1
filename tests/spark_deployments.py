"""Real Spark deployments on 127.0.0.1 for tests: a standalone master with one worker, and a Spark Connect server.

Each daemon runs in its own process group with its output in a log file under the caller's work directory, so a test
can show the tail of the log when something fails, and teardown kills the JVM together with whatever it forked
(executors, Python workers).
"""
from __future__ import annotations

import ctypes
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

import pyspark

SPARK_HOME = pathlib.Path(pyspark.__file__).resolve().parent
LOOPBACK = "127.0.0.1"
# The Python workers must run the interpreter that has flink_runbooks and pyarrow: the one running the tests.
WORKER_PYTHON = sys.executable
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
STARTUP_TIMEOUT_S = 180.0

# Warnings and errors, plus the INFO lines that tell a daemon is ready (and the worker's executor launches): a Connect
# server at INFO logs every session access, which would bury a failure's cause in the tail a test shows.
_DAEMON_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.master.name = org.apache.spark.deploy.master.Master
logger.master.level = info
logger.worker.name = org.apache.spark.deploy.worker
logger.worker.level = info
logger.connect.name = org.apache.spark.sql.connect.service.SparkConnectServer
logger.connect.level = info
"""


class DeploymentError(RuntimeError):
    """A Spark daemon did not come up; the message ends with the tail of its log."""


@dataclass
class SparkProcess:
    name: str
    popen: subprocess.Popen
    log: pathlib.Path

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return f"({self.log} unreadable)"
        return "\n".join(text.splitlines()[-lines:])

    def wait_for_log(self, pattern: str, timeout_s: float = STARTUP_TIMEOUT_S) -> re.Match:
        """Block until ``pattern`` appears in the log; fail early when the process exits first."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            match = regex.search(self.log.read_text(errors="replace"))
            if match:
                return match
            if self.popen.poll() is not None:
                raise DeploymentError(f"{self.name} exited with code {self.popen.returncode} before it was ready; "
                                      f"{self.log}:\n{self.tail()}")
            time.sleep(0.5)
        raise DeploymentError(f"{self.name} not ready after {timeout_s:.0f}s (waiting for /{pattern}/); "
                              f"{self.log}:\n{self.tail()}")

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM the whole process group, SIGKILL what is left after ``grace_s``."""
        if self.popen.poll() is None:
            _signal_group(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        # Executors and Python workers forked by the JVM may outlive it; they share its process group.
        _signal_group(self.popen.pid, signal.SIGKILL)
        try:
            self.popen.wait(5)
        except subprocess.TimeoutExpired:
            pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


try:
    _LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the child after fork should only make the call
except OSError:
    _LIBC = None
_PR_SET_PDEATHSIG = 1


def _terminate_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies, even by SIGKILL, so no JVM is left behind.

    spark-class and spark-submit exec the JVM, which keeps this setting (Linux only; elsewhere teardown must do).
    """
    prctl = getattr(_LIBC, "prctl", None)
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def loopback_env() -> dict[str, str]:
    """The environment of a CLI run against these deployments: Spark on 127.0.0.1, Python workers on the venv."""
    env = dict(os.environ)
    # A session started earlier in this process may have set it; the CLI picks its own errors-only config.
    env.pop("SPARK_CONF_DIR", None)
    # The deployment is chosen by the command line of each run only.
    env.pop("FLINK_RUNBOOKS_SPARK_MASTER", None)
    env.pop("FLINK_RUNBOOKS_SPARK_REMOTE", None)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP=LOOPBACK,
        SPARK_LOCAL_HOSTNAME=LOOPBACK,
        PYSPARK_PYTHON=WORKER_PYTHON,
        PYSPARK_DRIVER_PYTHON=WORKER_PYTHON,
    )
    return env


def _daemon_env(work_dir: pathlib.Path, heap: str) -> dict[str, str]:
    """``heap``: the launcher sizes master, worker and Connect server alike from SPARK_DAEMON_MEMORY (it ignores
    ``--driver-memory`` for the Connect server)."""
    conf_dir = work_dir / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "log4j2.properties").write_text(_DAEMON_LOG4J2)
    env = loopback_env()
    env.update(SPARK_CONF_DIR=str(conf_dir), SPARK_DAEMON_MEMORY=heap,
               # Scratch space of the daemons and the executors they launch stays in the test's directory.
               SPARK_LOCAL_DIRS=str(work_dir / "local"))
    return env


def _start(name: str, argv: list[str], work_dir: pathlib.Path, env: dict[str, str]) -> SparkProcess:
    work_dir.mkdir(parents=True, exist_ok=True)
    log = work_dir / f"{name}.log"
    with open(log, "wb") as out:
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                 cwd=work_dir, start_new_session=True, preexec_fn=_terminate_with_parent)
    return SparkProcess(name, popen, log)


@dataclass
class StandaloneCluster:
    work_dir: pathlib.Path  # master.log, worker.log; the worker's work dir (executor logs) is worker-work/
    master_url: str = ""
    processes: list[SparkProcess] = field(default_factory=list)

    def logs_tail(self) -> str:
        return "\n".join(f"--- {p.log}\n{p.tail()}" for p in self.processes)

    def stop(self) -> None:
        for p in reversed(self.processes):
            p.stop()


def start_standalone(work_dir: pathlib.Path, cores: int = 2, memory: str = "1g") -> StandaloneCluster:
    """A master and one worker bound to 127.0.0.1; returns once the worker has registered with the master."""
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    # Master and worker only schedule and route messages: a small heap keeps the shared machine usable.
    env = _daemon_env(work_dir, heap="256m")
    cluster = StandaloneCluster(work_dir)
    try:
        # Port 0: the master binds a free port and logs it, so no other process can take it in between.
        master = _start("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                                   "--port", "0", "--webui-port", "0"], work_dir, env)
        cluster.processes.append(master)
        cluster.master_url = master.wait_for_log(r"Starting Spark master at (spark://\S+)").group(1)
        worker = _start("worker", [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                                   "--port", "0", "--webui-port", "0", "--cores", str(cores), "--memory", memory,
                                   "--work-dir", str(work_dir / "worker-work"), cluster.master_url], work_dir, env)
        cluster.processes.append(worker)
        worker.wait_for_log(r"Successfully registered with master")
    except BaseException:
        cluster.stop()
        raise
    return cluster


@dataclass
class ConnectServer:
    url: str
    process: SparkProcess

    def logs_tail(self) -> str:
        return f"--- {self.process.log}\n{self.process.tail()}"

    def stop(self) -> None:
        self.process.stop()


def start_connect_server(work_dir: pathlib.Path, master: str = "local[2]", attempts: int = 3) -> ConnectServer:
    """A Spark Connect server on a free loopback port; returns once it accepts connections.

    Its tasks run in its own JVM (``master`` local) with Python workers on the venv's interpreter.
    """
    last_error: DeploymentError | None = None
    for attempt in range(attempts):
        port = free_port()
        argv = [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master", master,
            "--class", CONNECT_SERVER_CLASS,
            "--name", "Spark Connect server (flink-runbooks tests)",
            "--conf", f"spark.connect.grpc.binding.address={LOOPBACK}",
            "--conf", f"spark.connect.grpc.binding.port={port}",
            "--conf", "spark.ui.enabled=false",
        ]
        process = _start(f"connect-{attempt}", argv, work_dir, _daemon_env(work_dir, heap="1g"))
        try:
            process.wait_for_log(r"Spark Connect server started")
            _wait_for_port(port, process)
            return ConnectServer(f"sc://{LOOPBACK}:{port}", process)
        except DeploymentError as exc:
            process.stop()
            last_error = exc
            # Another process may have taken the port between the probe and the bind: try another one.
            if "Address already in use" not in process.tail(200):
                raise
        except BaseException:
            process.stop()
            raise
    assert last_error is not None
    raise last_error


def _wait_for_port(port: int, process: SparkProcess, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((LOOPBACK, port), timeout=1):
                return
        except OSError:
            if process.popen.poll() is not None:
                break
            time.sleep(0.3)
    raise DeploymentError(f"{process.name}: nothing listens on {LOOPBACK}:{port}; {process.log}:\n{process.tail()}")
