"""What a long run is doing, on a terminal: files listed, bytes scanned of the total, rate, time left, then the
detectors. Written to stderr only when stderr is a terminal; stdout (text or JSON for automation) never sees it."""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Callable, Iterator, TextIO

Say = Callable[[str], None]


def _mib(n: float) -> str:
    return f"{n / (1 << 20):,.0f} MiB" if n >= 10 << 20 else f"{n / (1 << 20):,.1f} MiB"


class TerminalProgress:
    """One status line, rewritten in place; ``done`` ends it with a newline."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._width = 0

    def __call__(self, message: str) -> None:
        line = f"flink-runbooks: {message}"
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = len(line)

    def done(self) -> None:
        if self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def for_stderr() -> TerminalProgress | None:
    return TerminalProgress(sys.stderr) if sys.stderr.isatty() else None


def scan_status(done_bytes: float, total_bytes: int, elapsed_s: float) -> str:
    rate = done_bytes / elapsed_s if elapsed_s > 0 else 0.0
    left = (total_bytes - done_bytes) / rate if rate > 0 else None
    return (f"scanning logs: {_mib(done_bytes)} of {_mib(total_bytes)} ({done_bytes / max(total_bytes, 1):.0%})"
            + (f", {_mib(rate)}/s" if rate else "")
            + (f", about {left:.0f} s left" if left is not None and done_bytes else ""))


@contextlib.contextmanager
def watch_spark_scan(spark, total_bytes: int, say: Say | None, interval_s: float = 0.5) -> Iterator[None]:
    """Report the scan's progress from Spark's status tracker while the body runs.

    The scan is one stage whose tasks are the file splits, of nearly equal size, so finished tasks times the mean
    split size is the bytes read.
    """
    tracker = getattr(getattr(spark, "sparkContext", None), "statusTracker", None) if say else None
    if tracker is None:  # Spark Connect has no status tracker on the client
        yield
        return
    status = tracker()
    stop = threading.Event()
    started = time.monotonic()

    def poll() -> None:
        while not stop.wait(interval_s):
            done = total = 0
            for stage_id in status.getActiveStageIds():
                info = status.getStageInfo(stage_id)
                if info is not None:
                    done, total = done + info.numCompletedTasks, total + info.numTasks
            if total:
                say(scan_status(total_bytes * done / total, total_bytes, time.monotonic() - started))

    thread = threading.Thread(target=poll, name="scan-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
