"""Executing a runbook notebook, for every application that does (triage, the site): papermill in its own process
group, so a hung or dead kernel is killed with everything it started and reported, never waited on."""
from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

KERNEL = "flink-runbooks"


@dataclass
class NotebookRun:
    status: str  # ok | failed | timed out | interrupted
    duration_s: float
    error: str | None  # the failing cell and its message
    executed: pathlib.Path | None  # the executed notebook, when papermill wrote one


# A kernel that dies before it answers at all lost a race for its ports with another kernel starting at the same
# moment (jupyter_client picks free ports, then binds them): nothing of the notebook ran, so it is started again.
KERNEL_START_FAILED = re.compile(r"Kernel died before replying to kernel_info|Kernel didn't respond in \d+ seconds")
KERNEL_START_ATTEMPTS = 3


# How often a running notebook looks at its cancel event: the delay between Ctrl-C and its kernel being stopped.
CANCEL_POLL_S = 0.25


def run_notebook(source: pathlib.Path, executed: pathlib.Path, *, parameters: dict[str, Any], cwd: pathlib.Path,
                 timeout_s: float, cancel: threading.Event | None = None) -> NotebookRun:
    """Execute ``source`` into ``executed`` with ``parameters``; never raises for a failing notebook. Once ``cancel``
    is set, a running notebook is killed (with its kernel) and one not yet started is not started."""
    started = time.monotonic()
    cancel = cancel or threading.Event()
    if cancel.is_set():
        return NotebookRun("interrupted", 0.0, "interrupted before it started", None)
    for _attempt in range(KERNEL_START_ATTEMPTS):
        run = _run_once(source, executed, parameters=parameters, cwd=cwd, timeout_s=timeout_s, cancel=cancel)
        if run.status != "failed" or not KERNEL_START_FAILED.search(run.error or ""):
            break
    run.duration_s = round(time.monotonic() - started, 2)
    return run


def literal_path(path: pathlib.Path) -> str:
    """A path papermill takes as it is: papermill fills ``{name}`` in its input and output paths from the notebook's
    parameters, so an output folder named ``b{job}`` would fail and ``{incident_cache}`` would write elsewhere."""
    return str(path).replace("{", "{{").replace("}", "}}")


def _run_once(source: pathlib.Path, executed: pathlib.Path, *, parameters: dict[str, Any], cwd: pathlib.Path,
              timeout_s: float, cancel: threading.Event) -> NotebookRun:
    cmd = [sys.executable, "-m", "papermill", literal_path(source), literal_path(executed), "-k", KERNEL,
           "--cwd", str(cwd), "--no-progress-bar", "--execution-timeout", str(int(timeout_s))]
    if parameters:
        cmd += ["-y", json.dumps(parameters)]  # JSON is YAML: values keep their types
    started = time.monotonic()
    # Its own process group: a timeout or an interrupt kills papermill with everything it started; the kernel (in a
    # session of its own) ends itself when its parent papermill is gone (ipykernel's parent poller).
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = started + timeout_s
    try:
        while True:
            try:
                _stdout, stderr = proc.communicate(timeout=max(0.0, min(CANCEL_POLL_S, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if cancel.is_set():
                    _kill(proc)
                    return NotebookRun("interrupted", round(time.monotonic() - started, 2),
                                       f"interrupted after {time.monotonic() - started:.0f}s; killed", None)
                if time.monotonic() >= deadline:
                    _kill(proc)
                    return NotebookRun("timed out", round(time.monotonic() - started, 2),
                                       f"still running after {timeout_s:g}s; killed",
                                       executed if executed.exists() else None)
    except BaseException:
        _kill(proc)  # an interrupt of this thread leaves no papermill behind
        raise
    status = "ok" if proc.returncode == 0 else "failed"
    error = None if proc.returncode == 0 else papermill_error(executed, stderr)
    return NotebookRun(status, round(time.monotonic() - started, 2), error, executed if executed.exists() else None)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def papermill_error(executed: pathlib.Path, stderr: str) -> str:
    """The failing cell and its message, from the executed notebook when it was written, else papermill's stderr."""
    try:
        import nbformat

        nb = nbformat.read(executed, as_version=4)
        for index, cell in enumerate(nb.cells):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    return f"cell {index}: {output.get('ename')}: {output.get('evalue')}"
    except Exception:
        pass
    # the interrupt jupyter_client sends every kernel before shutting it down is no error of the notebook's
    lines = [line for line in stderr.strip().splitlines() if line.strip() and "KeyboardInterrupt caught in kernel" not in line]
    for line in reversed(lines):
        if re.search(r"Error|Exception|died|Dead", line):
            return line.strip()[:500]
    return (lines[-1] if lines else "papermill failed without a message")[:500]
