"""Long runs say what they are doing on a terminal (stderr only), and nothing extra anywhere else."""
from __future__ import annotations

import os
import re
import pty
import subprocess
import sys

import pytest

from corpus import example
from flink_runbooks.collect.progress import scan_status

INCIDENT = example("checkpoint-tolerable-failure-threshold", "storage-permission-denied")
CLI = [sys.executable, "-m", "flink_runbooks", "diagnose", str(INCIDENT), "--format", "json"]


def _env(**extra):
    # A limit of 0 bytes sends even this small incident through Spark, where the scan progress comes from.
    return {**os.environ, "FLINK_RUNBOOKS_LOCAL_LIMIT_BYTES": "0", **extra}


@pytest.mark.slow  # starts a JVM in a fresh process
def test_progress_goes_to_a_terminal_stderr_and_never_to_stdout():
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(CLI, stdout=subprocess.PIPE, stderr=secondary, env=_env())
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    stdout = proc.stdout.read()
    assert proc.wait(timeout=300) == 1
    stderr = b"".join(chunks).decode(errors="replace")
    assert re.search(r"listed \d+ log file\(s\) \([\d.]+ MiB\) and 1 config file", stderr)
    assert "building the incident from" in stderr and "judging" in stderr
    assert stdout.lstrip().startswith(b"{") and b"listed" not in stdout


@pytest.mark.slow  # starts a JVM in a fresh process
def test_no_progress_when_stderr_is_not_a_terminal():
    proc = subprocess.run(CLI, capture_output=True, env=_env(), timeout=300)
    assert proc.returncode == 1
    assert b"listed" not in proc.stderr and b"scanning" not in proc.stderr


def test_scan_status_names_bytes_rate_and_time_left():
    line = scan_status(256 << 20, 1024 << 20, 4.0)
    assert line == "scanning logs: 256 MiB of 1,024 MiB (25%), 64 MiB/s, about 12 s left"
