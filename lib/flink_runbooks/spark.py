"""The SparkSession every entry point shares (CLI, notebooks, tests)."""
from __future__ import annotations

import os
import sys

# Every file split becomes its own partition (open cost == split size), so a partition holds the lines of one
# block of one file, in order; that is what lets the workers count line numbers and assemble stack traces
# without a shuffle.
SPLIT_BYTES = 128 * 1024 * 1024
# Spark's own configuration directory for the driver: only log4j2.properties (errors only, on stderr).
_SPARK_CONF_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark-conf")


def get_spark(master: str | None = None, remote: str | None = None, app_name: str = "flink-runbooks"):
    """Return the active session or build one.

    ``master``: ``local[N]`` (default ``local[2]``) or ``spark://host:port``; ``remote``: a Spark Connect URL
    (``sc://host:port``). Environment fallbacks: ``FLINK_RUNBOOKS_SPARK_MASTER``, ``FLINK_RUNBOOKS_SPARK_REMOTE``.
    """
    from pyspark.sql import SparkSession

    remote = remote or os.environ.get("FLINK_RUNBOOKS_SPARK_REMOTE")
    master = master or os.environ.get("FLINK_RUNBOOKS_SPARK_MASTER") or "local[2]"
    # Python workers must run the interpreter that has this package and pyarrow.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The driver JVM starts before any SparkConf is read; its logging comes from the conf dir on its classpath.
    os.environ.setdefault("SPARK_CONF_DIR", _SPARK_CONF_DIR)
    if remote:
        return SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.files.maxPartitionBytes", str(SPLIT_BYTES))
        .config("spark.sql.files.openCostInBytes", str(SPLIT_BYTES))
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "50000")
        .config("spark.driver.memory", os.environ.get("FLINK_RUNBOOKS_DRIVER_MEMORY", "1g"))
        .config("spark.sql.session.timeZone", "UTC")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
