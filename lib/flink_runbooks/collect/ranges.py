"""Local files through Spark as byte ranges: each task reads its splits as bytes and scans them.

Spark's text source hands a Python worker one row per line, so moving the lines alone costs more than scanning them
(1 GB in 6.7 s on two cores, before a pattern is evaluated). Here Spark only schedules: a task gets a list of byte
ranges of files that every worker can open (a file system path on the machine, or mounted on every worker), reads them
with :func:`~flink_runbooks.collect.local.line_blocks` and hands whole buffers to the same partition code as the
in-process path (:mod:`.local`), so records, statistics and line numbers are the ones it gives. Files on other file
systems (HDFS, S3) still go through Spark's text source (:func:`~flink_runbooks.collect.scan.scan_logs`).
"""
from __future__ import annotations

import functools
import re
from typing import Sequence

from flink_runbooks.collect.listing import local_path

# A task's share of the bytes: large files are cut into splits of this size, small files are packed together up to
# it (one task per small file would cost about 0.15 s each, which thousands of rolled files turn into minutes).
RANGE_BYTES = 64 << 20
# Compressed files cannot be split; gzip is read whole by one task (other codecs never come here).
_GZIP = re.compile(r"(?i)\.gz$")


def splits(files: Sequence[tuple[str, int]], range_bytes: int = RANGE_BYTES) -> list[list[tuple[str, int, int | None]]]:
    """The tasks for ``(uri, size)`` files: each a list of ``(uri, start, end)`` ranges (``end`` None: to the end of
    the file), in file order."""
    tasks: list[list[tuple[str, int, int | None]]] = []
    packed: list[tuple[str, int, int | None]] = []
    packed_bytes = 0
    for uri, size in files:
        if _GZIP.search(uri) or size <= range_bytes // 4:
            if packed and packed_bytes + size > range_bytes:
                tasks.append(packed)
                packed, packed_bytes = [], 0
            packed.append((uri, 0, None))
            packed_bytes += size * (8 if _GZIP.search(uri) else 1)
            continue
        for start in range(0, size, range_bytes):
            end = start + range_bytes
            tasks.append([(uri, start, end if end < size else None)])
    if packed:
        tasks.append(packed)
    return tasks


def readable_here(uri: str) -> bool:
    """Whether a log file can go through the range scan: a local path, plain or gzipped."""
    from flink_runbooks.collect.local import _READABLE

    path = local_path(uri)
    return path is not None and bool(_READABLE.search(path))


def _scan_tasks(batches, tasks, patterns):
    """mapInArrow body: the task ids of this partition -> the scan's rows for their ranges."""
    from flink_runbooks.collect.local import _partitions
    from flink_runbooks.collect.scan import _assemble_partition

    def lines():
        for batch in batches:
            for task in batch.column("id").to_pylist():
                for uri, start, end in tasks[task]:
                    yield from _partitions(uri, start, end)

    yield from _assemble_partition(lines(), patterns)


def scan_ranges(spark, files: Sequence[tuple[str, int]], prefilter,
                range_bytes: int = RANGE_BYTES):
    """The Spark plan for local ``(uri, size)`` files: one partition per task of :func:`splits`. Returns the number of
    partitions and a DataFrame with the rows of :func:`~flink_runbooks.collect.scan.scan_logs`."""
    from flink_runbooks.collect.scan import _spark_schema, line_patterns

    tasks = splits(files, range_bytes)
    ids = spark.range(0, len(tasks), 1, numPartitions=max(len(tasks), 1))
    scan = functools.partial(_scan_tasks, tasks=tasks, patterns=line_patterns(prefilter))
    return len(tasks), ids.mapInArrow(scan, _spark_schema())
