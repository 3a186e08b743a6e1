"""What a person waits for, besides the big bundles: a pasted stack trace, triage of an incident that matches
several runbooks, the site build, pulling and diagnosing a live cluster and the two test tiers. Each is timed in a
fresh process, as a user runs it. ``python -m flink_runbooks.apps.bench.waits live`` (or ``paste``, ``triage``,
``site``) times those alone and prints their rows."""
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


LIVE_RELEASE = "2.3.0"
LIVE_TASKMANAGERS = 2


def live_cluster(work: pathlib.Path, say=print) -> dict:
    """``diagnose URL`` of a standalone cluster (a JobManager and two TaskManagers on this machine) whose job failed:
    the pull of its REST documents and of every log it serves, then the diagnosis, in one fresh process."""
    from flink_runbooks.apps.bench.flink_cluster import (THROWING_JOB, flink_home, job_jar, standalone_cluster,
                                                         wait_until)

    what = f"pull and diagnose of a live cluster (a JobManager, {LIVE_TASKMANAGERS} TaskManagers)"
    home = flink_home(LIVE_RELEASE)
    if home is None:
        note = f"skipped: Flink {LIVE_RELEASE} is not installed (scripts/setup-flink.sh {LIVE_RELEASE} installs it)"
        say(f"[waits] {note}")
        return {"what": what, "seconds": None, "note": note}
    folder = pathlib.Path(tempfile.mkdtemp(prefix="bench-live-", dir=work))
    restarts = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 2,
                "restart-strategy.fixed-delay.delay": "1 s"}
    try:
        with standalone_cluster(home, folder / "cluster", taskmanagers=LIVE_TASKMANAGERS, config=restarts) as cluster:
            job = cluster.submit(job_jar(home, THROWING_JOB, folder), "ThrowingJob")
            wait_until("the job to fail", 180, lambda: cluster.job_state(job) == "FAILED", 1)
            pulled = folder / "pulled"
            seconds, proc = _timed([sys.executable, "-m", "flink_runbooks", "diagnose", cluster.url, "--format", "json",
                                    "--pull-dir", str(pulled)])
        files = [p for p in pulled.rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    primary = next((f["runbook"] for f in json.loads(proc.stdout)["findings"] if f["primary"]), None)
    return {"what": what, "seconds": seconds,
            "note": f"Flink {LIVE_RELEASE}, {len(files)} files ({size / 2**20:.1f} MiB) pulled; primary: {primary}"}


def test_tier(target: str) -> dict:
    """``make test-fast`` or ``make test`` as a developer runs it (the Makefile's markers and workers)."""
    seconds, proc = _timed(["make", target], ok=(0, 2))  # 2: tests failed, which the note shows
    summary = next((line for line in reversed(proc.stdout.strip().splitlines()) if " in " in line), "")
    return {"what": f"`make {target}`", "seconds": seconds, "note": summary.strip("= ")}


def run_waits(work: pathlib.Path, with_tests: bool, say=print) -> list[dict]:
    work.mkdir(parents=True, exist_ok=True)
    steps = [(name, step) for name, step in STEPS.items() if with_tests or not name.startswith("make ")]
    return [_run_step(label, step, work, say) for label, step in steps]


STEPS = {"paste": pasted_trace, "triage": triage_five, "site": site_build, "live": live_cluster,
         "make test-fast": lambda _work: test_tier("test-fast"), "make test": lambda _work: test_tier("test")}


def _run_step(label: str, step, work: pathlib.Path, say) -> dict:
    say(f"[waits] {label} ...")
    return step(work)


def markdown(rows: list[dict]) -> str:
    lines = ["| what a person waits for | time | grep -E over the same bytes | plain Python | note |",
             "|---|---|---|---|---|"]
    for r in rows:
        grep = f"{r['grep_s']:.2f} s" if "grep_s" in r else "–"
        python = f"{r['python_s']:.2f} s" if "python_s" in r else "–"
        seconds = "–" if r["seconds"] is None else f"{r['seconds']:.1f} s"
        lines.append(f"| {r['what']} | {seconds} | {grep} | {python} | {r['note']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    names = sys.argv[1:] or ["live"]
    unknown = [n for n in names if n not in STEPS]
    if unknown:
        raise SystemExit(f"unknown step(s) {', '.join(unknown)}; steps: {', '.join(STEPS)}")
    out = pathlib.Path(__file__).resolve().parents[4] / "build" / "bench" / "waits"
    out.mkdir(parents=True, exist_ok=True)
    print(markdown([_run_step(name, STEPS[name], out, print) for name in names]), end="")
