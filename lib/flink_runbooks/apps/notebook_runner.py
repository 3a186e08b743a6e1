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


def run_notebook(source: pathlib.Path, executed: pathlib.Path, *, parameters: dict[str, Any], cwd: pathlib.Path,
                 timeout_s: float) -> NotebookRun:
    """Execute ``source`` into ``executed`` with ``parameters``; never raises for a failing notebook."""
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
