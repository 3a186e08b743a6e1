"""The SparkSession every entry point shares (CLI, notebooks, tests)."""
from __future__ import annotations

import os
import socket
import sys

# Every file split becomes its own partition (open cost == split size), so a partition holds the lines of one
# block of one file, in order; that is what lets the workers count line numbers and assemble stack traces
# without a shuffle.
SPLIT_BYTES = 128 * 1024 * 1024
# Spark's own configuration directory for the driver: only log4j2.properties (errors only, on stderr).
_SPARK_CONF_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark-conf")
# What the pipeline relies on in every session; Spark Connect applies them to the client's session on the server.
_SESSION_SETTINGS = {
    "spark.sql.files.maxPartitionBytes": str(SPLIT_BYTES),
    "spark.sql.files.openCostInBytes": str(SPLIT_BYTES),
    "spark.sql.execution.arrow.maxRecordsPerBatch": "50000",
    "spark.sql.session.timeZone": "UTC",
    # The inputs are listed already (files, not directories): above 32 paths Spark would otherwise run a job just to
    # look at them again, about ten seconds for three thousand files.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
}
# The driver JVM schedules and moves Arrow batches; the scanning runs in Python workers. Its optimising compiler
# costs more start-up time (about 2 s of a 9 s start) than it earns back in a diagnosis.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
# How long an unreachable Spark Connect server or standalone master may keep the command waiting: left alone, the
# Connect client retries for ten minutes and a standalone driver gives up after a minute with a Java stack trace.
PROBE_TIMEOUT_S = 10.0
STANDALONE_DEFAULT_PORT = 7077


class SparkUnavailable(Exception):
    """The Spark deployment asked for cannot be used (bad URL, server down); the message is one line for the user."""


def get_spark(master: str | None = None, remote: str | None = None, app_name: str = "flink-runbooks"):
    """Return the active session or build one.

    ``master``: ``local[N]`` (default ``local[2]``) or ``spark://host:port``; ``remote``: a Spark Connect URL
    (``sc://host:port``). Environment fallbacks: ``FLINK_RUNBOOKS_SPARK_MASTER``, ``FLINK_RUNBOOKS_SPARK_REMOTE``.
    Raises :class:`SparkUnavailable` when a ``spark://`` master or a Connect server does not answer.
    """
    from pyspark.sql import SparkSession

    if master is None and remote is None:  # an explicit --master must not be overridden by a remote from the env
        remote = os.environ.get("FLINK_RUNBOOKS_SPARK_REMOTE")
        master = os.environ.get("FLINK_RUNBOOKS_SPARK_MASTER")
    master = master or "local[2]"
    # Python workers must run the interpreter that has this package and pyarrow.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The driver JVM starts before any SparkConf is read; its logging comes from the conf dir on its classpath.
    os.environ.setdefault("SPARK_CONF_DIR", _SPARK_CONF_DIR)
    if remote:
        _check_connect_server(remote)
        return SparkSession.builder.remote(remote).appName(app_name).config(map=_SESSION_SETTINGS).getOrCreate()
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if master.startswith("spark://"):
        _check_standalone_master(master)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", os.environ.get("FLINK_RUNBOOKS_DRIVER_MEMORY", "1g"))
        .config("spark.driver.extraJavaOptions", os.environ.get("FLINK_RUNBOOKS_DRIVER_JAVA_OPTIONS",
                                                                DRIVER_JAVA_OPTIONS))
        .config(map=_SESSION_SETTINGS)
    )
    with _jvm_stderr_filtered():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# Lines the JVM prints on start-up that say nothing to a user: Spark's launcher always adds the incubating Vector API.
_JVM_NOISE = (b"WARNING: Using incubator modules",)


class _jvm_stderr_filtered:
    """Start the driver JVM with its stderr on a pipe that drops the start-up noise and passes everything else on.

    The JVM keeps the pipe for its life (one thread forwards it); this process gets its own stderr back at once."""

    def __enter__(self):
        import threading

        try:
            sys.stderr.flush()
            self._saved = os.dup(2)
            read_end, write_end = os.pipe()
        except OSError:
            self._saved = None
            return self
        os.dup2(write_end, 2)
        os.close(write_end)
        target = self._saved

        def forward() -> None:
            with os.fdopen(read_end, "rb", buffering=0) as pipe:
                for line in iter(pipe.readline, b""):
                    if not line.startswith(_JVM_NOISE):
                        try:
                            os.write(target, line)
                        except OSError:
                            return

        threading.Thread(target=forward, name="jvm-stderr", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if self._saved is not None:
            sys.stderr.flush()
            os.dup2(self._saved, 2)


def _check_connect_server(remote: str) -> None:
    """Fail fast, in one line, on a Spark Connect URL that is malformed or has no server behind it."""
    from pyspark.errors import PySparkException

    try:
        from pyspark.sql.connect.client import DefaultChannelBuilder

        endpoint = DefaultChannelBuilder(remote).endpoint
    except ImportError as exc:  # grpcio and friends are optional for pyspark
        raise SparkUnavailable(f"Spark Connect needs packages that are not installed ({exc}); "
                               f"install requirements.txt") from exc
    except (PySparkException, ValueError) as exc:
        raise SparkUnavailable(f"invalid Spark Connect URL: {exc}") from exc
    host, _, port = endpoint.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        # The URL may carry a token: name the endpoint only.
        raise SparkUnavailable(f"cannot reach the Spark Connect server at sc://{endpoint}: "
                               f"{exc.strerror or exc}") from exc


def _check_standalone_master(master: str) -> None:
    """Fail fast, in one line, when no master of a ``spark://host:port[,host:port]`` URL accepts connections."""
    from urllib.parse import urlsplit

    errors = []
    for hostport in master[len("spark://"):].split(","):
        try:
            url = urlsplit("spark://" + hostport.strip())
            address = (url.hostname, url.port or STANDALONE_DEFAULT_PORT)
        except ValueError as exc:
            raise SparkUnavailable(f"invalid Spark master URL {master}: {exc}") from exc
        if not url.hostname:
            raise SparkUnavailable(f"invalid Spark master URL {master}: no host")
        try:
            socket.create_connection(address, timeout=PROBE_TIMEOUT_S).close()
            return
        except OSError as exc:
            errors.append(exc.strerror or str(exc))
    raise SparkUnavailable(f"cannot reach the Spark master at {master}: {'; '.join(dict.fromkeys(errors))}")
