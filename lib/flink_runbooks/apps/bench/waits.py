"""What a person waits for, besides the big bundles: a pasted stack trace, triage of an incident that matches
several runbooks, the site build and the two test tiers. Each is timed in a fresh process, as a user runs it."""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from flink_runbooks.apps.bench import baselines

ROOT = pathlib.Path(__file__).resolve().parents[4]
DATA = ROOT / "data"
# Two genuine Flink 1.20.3 incidents side by side: together they match five runbooks.
TRIAGE_SOURCES = ("checkpoint-expired/backpressure-aligned-timeout-10s",
                  "rocksdb-hardlink-not-supported/localdir-on-checkpoint-mount-v1.20")
PASTE_SOURCE = "checkpoint-tolerable-failure-threshold/storage-permission-denied"


def _timed(cmd: list[str], ok=(0, 1)) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd[:4])} exited {proc.returncode}: {proc.stderr.strip()[-1500:]}")
    return seconds, proc


def pasted_trace(work: pathlib.Path) -> dict:
    """The failure chain of a genuine JobManager log, without timestamps, as it is pasted into a ticket."""
    log = next((DATA / PASTE_SOURCE).rglob("*standalonesession*.log"))
    lines = log.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "Exceeded checkpoint tolerable failure threshold" in line)
    paste = work / "ticket.txt"
    paste.write_text("\n".join(lines[start:start + 60]) + "\n")
    seconds, proc = _timed([sys.executable, "-m", "flink_runbooks", "diagnose", str(paste), "--format", "json"])
    grep_s, _ = baselines.run_grep([paste])
    python_s, _ = baselines.python_reader([paste])
    primary = next((f["runbook"] for f in json.loads(proc.stdout)["findings"] if f["primary"]), None)
    return {"what": "diagnose of a pasted stack trace", "bytes": paste.stat().st_size, "seconds": seconds,
            "grep_s": grep_s, "python_s": python_s, "note": f"primary: {primary}"}


def triage_five(work: pathlib.Path) -> dict:
    incident = work / "triage-incident"
    shutil.rmtree(incident, ignore_errors=True)
    for source in TRIAGE_SOURCES:
        shutil.copytree(DATA / source, incident / source.replace("/", "__"),
                        ignore=shutil.ignore_patterns("expected.json"))
    out = pathlib.Path(tempfile.mkdtemp(prefix="bench-triage-"))
    try:
        seconds, proc = _timed([sys.executable, "-m", "flink_runbooks", "triage", str(incident), "--out", str(out),
                                "--force", "--format", "json"])
        report = json.loads(proc.stdout)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    statuses = [r["status"] for r in report["runbooks"]]
    return {"what": f"triage of an incident that matches {len(statuses)} runbooks", "seconds": seconds,
            "note": f"{statuses.count('ok')} of {len(statuses)} notebooks ok"}


def site_build(work: pathlib.Path) -> dict:
    out = work / "site"
    seconds, proc = _timed([sys.executable, "-m", "flink_runbooks", "site", "--out", str(out)], ok=(0,))
    pages = len(list((out / "runbooks").glob("*.html")))
    return {"what": f"the site build ({pages} runbooks)", "seconds": seconds, "note": f"{pages} pages"}


def test_tier(target: str) -> dict:
    """``make test-fast`` or ``make test`` as a developer runs it (the Makefile's markers and workers)."""
    seconds, proc = _timed(["make", target], ok=(0, 2))  # 2: tests failed, which the note shows
    summary = next((line for line in reversed(proc.stdout.strip().splitlines()) if " in " in line), "")
    return {"what": f"`make {target}`", "seconds": seconds, "note": summary.strip("= ")}


def run_waits(work: pathlib.Path, with_tests: bool, say=print) -> list[dict]:
    work.mkdir(parents=True, exist_ok=True)
    steps = [("pasted trace", lambda: pasted_trace(work)), ("triage", lambda: triage_five(work)),
             ("site", lambda: site_build(work))]
    if with_tests:
        steps += [("make test-fast", lambda: test_tier("test-fast")), ("make test", lambda: test_tier("test"))]
    rows = []
    for label, step in steps:
        say(f"[waits] {label} ...")
        rows.append(step())
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| what a person waits for | time | grep -E over the same bytes | plain Python | note |",
             "|---|---|---|---|---|"]
    for r in rows:
        grep = f"{r['grep_s']:.2f} s" if "grep_s" in r else "–"
        python = f"{r['python_s']:.2f} s" if "python_s" in r else "–"
        lines.append(f"| {r['what']} | {r['seconds']:.1f} s | {grep} | {python} | {r['note']} |")
    return "\n".join(lines) + "\n"
