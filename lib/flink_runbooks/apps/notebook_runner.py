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
import time
from dataclasses import dataclass
from typing import Any

KERNEL = "flink-runbooks"
# Cells whose code a reader does not need (parameters, the call into lib/): pages show only their output.
HIDDEN_INPUT_TAGS = frozenset({"setup", "parameters", "injected-parameters"})


@dataclass
class NotebookRun:
    status: str  # ok | failed | timed out
    duration_s: float
    error: str | None  # the failing cell and its message
    executed: pathlib.Path | None  # the executed notebook, when papermill wrote one


# A kernel that dies before it answers at all lost a race for its ports with another kernel starting at the same
# moment (jupyter_client picks free ports, then binds them): nothing of the notebook ran, so it is started again.
KERNEL_START_FAILED = re.compile(r"Kernel died before replying to kernel_info|Kernel didn't respond in \d+ seconds")
KERNEL_START_ATTEMPTS = 3


def run_notebook(source: pathlib.Path, executed: pathlib.Path, *, parameters: dict[str, Any], cwd: pathlib.Path,
                 timeout_s: float) -> NotebookRun:
    """Execute ``source`` into ``executed`` with ``parameters``; never raises for a failing notebook."""
    started = time.monotonic()
    for _attempt in range(KERNEL_START_ATTEMPTS):
        run = _run_once(source, executed, parameters=parameters, cwd=cwd, timeout_s=timeout_s)
        if run.status != "failed" or not KERNEL_START_FAILED.search(run.error or ""):
            break
    run.duration_s = round(time.monotonic() - started, 2)
    return run


def _run_once(source: pathlib.Path, executed: pathlib.Path, *, parameters: dict[str, Any], cwd: pathlib.Path,
              timeout_s: float) -> NotebookRun:
    cmd = [sys.executable, "-m", "papermill", str(source), str(executed), "-k", KERNEL, "--cwd", str(cwd),
           "--no-progress-bar", "--execution-timeout", str(int(timeout_s))]
    if parameters:
        cmd += ["-y", json.dumps(parameters)]  # JSON is YAML: values keep their types
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _stdout, stderr = proc.communicate(timeout=timeout_s)
        status = "ok" if proc.returncode == 0 else "failed"
        error = None if proc.returncode == 0 else papermill_error(executed, stderr)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        status, error = "timed out", f"still running after {timeout_s:g}s; killed"
    return NotebookRun(status, round(time.monotonic() - started, 2), error, executed if executed.exists() else None)


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
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if re.search(r"Error|Exception|died|Dead", line):
            return line.strip()[:500]
    return (lines[-1] if lines else "papermill failed without a message")[:500]
