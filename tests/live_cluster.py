"""The live tier's parts, each a real program on 127.0.0.1 started and stopped by the test: a Flink standalone
cluster (:mod:`flink_runbooks.apps.bench.flink_cluster`, which the benchmark shares) with its jobs, Prometheus
scraping the cluster's reporter with the rules of ``flink-runbooks alert-rules``, Alertmanager posting to
``flink-runbooks serve``. Every process carries a marker in its environment and is stopped when its block ends,
whatever happened in it."""
from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from typing import Iterator

import pytest
import yaml
from corpus import ROOT

from support import everything_written

from flink_runbooks.apps.bench.flink_cluster import (Cluster, flink_home, free_port, get_json, job_jar,
                                                     standalone_cluster, stop_marked, wait_until)

RELEASES = ("1.20.3", "2.3.0")
JOBS = ROOT / "tests" / "apps" / "live_jobs"
# Flink masks keys that say "secret" or "password" itself; an access key it prints as it is.
PLANTED = "AKIAPLANTEDLIVE7F3A0001"
CLI = [sys.executable, "-m", "flink_runbooks.apps.cli"]
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
ALERTMANAGER = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"
# A job that fails fast enough for a test: two restarts, a second apart.
FAILING_FAST = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": 2,
                "restart-strategy.fixed-delay.delay": "1 s"}


def home_of(version: str) -> pathlib.Path:
    home = flink_home(version)
    if home is None:
        pytest.fail(f"Flink {version} is not installed: run scripts/setup-flink.sh {version} (make test does)")
    return home


@contextlib.contextmanager
def cluster(version: str, folder: pathlib.Path, **options) -> Iterator[Cluster]:
    """A standalone cluster of ``version`` whose configuration holds a planted access key."""
    config = {"s3.access-key": PLANTED, **FAILING_FAST, **options.pop("config", {})}
    with standalone_cluster(home_of(version), folder, config=config, **options) as running:
        yield running


_JARS: dict[tuple[pathlib.Path, str], str] = {}


def jar(running: Cluster, name: str) -> str:
    """The job ``name`` of tests/apps/live_jobs compiled for the cluster's release, once per test run."""
    key = (running.home, name)
    if key not in _JARS:
        _JARS[key] = job_jar(running.home, JOBS / f"{name}.java", running.folder)
    return _JARS[key]


@contextlib.contextmanager
def _process(cmd: list[str], folder: pathlib.Path, marker: str, env: dict | None = None) -> Iterator[None]:
    """``cmd`` running in ``folder`` (its output in ``folder/out.log``), stopped after the block."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "out.log", "wb") as log:
        process = subprocess.Popen(cmd, cwd=folder, stdout=log, stderr=subprocess.STDOUT,
                                   env={**(env or os.environ), marker: "1"})
    try:
        yield
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=20)
        stop_marked(marker)
        process.wait()


def output_of(folder: pathlib.Path) -> str:
    return (folder / "out.log").read_text(errors="replace")[-3000:]


@contextlib.contextmanager
def alertmanager(folder: pathlib.Path, webhook: str) -> Iterator[str]:
    """Alertmanager sending every firing group at once to ``webhook``; yields its URL."""
    port = free_port()
    folder.mkdir(parents=True)
    (folder / "alertmanager.yml").write_text(yaml.safe_dump({
        # one group per scrape job, here one cluster: its alerts make one notification, so one triage
        "route": {"receiver": "flink-runbooks", "group_by": ["job"], "group_wait": "1s",
                  "group_interval": "2s", "repeat_interval": "1h"},
        "receivers": [{"name": "flink-runbooks",
                       "webhook_configs": [{"url": webhook, "send_resolved": False}]}]}))
    url = f"http://127.0.0.1:{port}"
    with _process([ALERTMANAGER, "--config.file=alertmanager.yml", f"--storage.path={folder / 'data'}",
                   f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="], folder,
                  f"FLINK_RUNBOOKS_LIVE_AM_{port}"):
        wait_until("Alertmanager", 60, lambda: get_json(f"{url}/api/v2/status"), 0.2)
        yield url


@contextlib.contextmanager
def prometheus(folder: pathlib.Path, running: Cluster, alertmanager_url: str, hold: str = "0s",
               expected_taskmanagers: int | None = None) -> Iterator[str]:
    """Prometheus scraping every reporter port of ``running`` each second, with the rules ``alert-rules`` writes
    for it (``--for hold``), alerting ``alertmanager_url``; yields its URL."""
    port = free_port()
    folder.mkdir(parents=True)
    rules = [*CLI, "alert-rules", "--rest-url", running.url, "--site-url", "https://runbooks.example",
             "--for", hold]
    if expected_taskmanagers:
        rules += ["--expected-taskmanagers", str(expected_taskmanagers)]
    (folder / "flink.rules.yml").write_text(subprocess.run(rules, check=True, capture_output=True, text=True,
                                                           timeout=60).stdout)
    (folder / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["flink.rules.yml"],
        "alerting": {"alertmanagers": [{"static_configs": [
            {"targets": [alertmanager_url.removeprefix("http://")]}]}]},
        "scrape_configs": [{"job_name": "flink", "static_configs": [
            {"targets": [f"127.0.0.1:{p}" for p in running.metrics_ports]}]}]}))
    url = f"http://127.0.0.1:{port}"
    with _process([PROMETHEUS, "--config.file=prometheus.yml", f"--storage.tsdb.path={folder / 'data'}",
                   f"--web.listen-address=127.0.0.1:{port}"], folder, f"FLINK_RUNBOOKS_LIVE_PROM_{port}"):
        wait_until("Prometheus", 60, lambda: get_json(f"{url}/api/v1/status/runtimeinfo"), 0.2)
        yield url


def firing(prometheus_url: str) -> list[str]:
    alerts = get_json(f"{prometheus_url}/api/v1/alerts")["data"]["alerts"]
    return sorted({a["labels"]["alertname"] for a in alerts if a["state"] == "firing"})


@dataclass(frozen=True)
class Served:
    """A running ``flink-runbooks serve``: its URL, its out-root and the folder holding its home (also its
    temporary folder), its working folder and its (empty) logs root."""

    url: str
    out_root: pathlib.Path
    folder: pathlib.Path


@contextlib.contextmanager
def serve(folder: pathlib.Path) -> Iterator[Served]:
    """``flink-runbooks serve`` with its own home, temporary folder and working folder under ``folder``."""
    port = free_port()
    home, logs_root, out_root = folder / "home", folder / "logs-root", folder / "out-root"
    for d in (home / "tmp", logs_root, out_root):
        d.mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(home / "tmp")}
    url = f"http://127.0.0.1:{port}"
    with _process([*CLI, "serve", "--host", "127.0.0.1", "--port", str(port), "--logs-root", str(logs_root),
                   "--out-root", str(out_root), "--jobs", "2", "--allow-rest-url", "http://127.0.0.1"], folder / "cwd", f"FLINK_RUNBOOKS_LIVE_SERVE_{port}",
                  env):
        wait_until("flink-runbooks serve", 60, lambda: get_json(f"{url}/healthz"), 0.2)
        yield Served(url, out_root, folder)


# Every rule's condition holds this long before it fires: the failure has played out by then (the job restarted
# and, where its restarts run out, failed), as it has by the time a production rule's longer hold ends.
HOLD = "10s"
# What the libraries serve runs may keep in its home: caches and Jupyter's runtime files, never an incident.
HOME_ALLOWED = (".cache", ".local/share/jupyter", ".ipython", ".config", ".jupyter", "tmp")


def alert_loop(served: Served, folder: pathlib.Path, running: Cluster, provoke=lambda: None) -> dict:
    """Prometheus and Alertmanager watching ``running`` while ``provoke`` breaks it; returns serve's first run for
    the cluster once its pull is done (the cluster is then no longer needed)."""
    with alertmanager(folder / "alertmanager", f"{served.url}/alerts") as am, \
            prometheus(folder / "prometheus", running, am, hold=HOLD) as prom:
        wait_until("Prometheus to scrape the JobManager", 60,
                   lambda: get_json(f"{prom}/api/v1/query?query=flink_jobmanager_numRegisteredTaskManagers")
                   ["data"]["result"])
        provoke()
        try:
            run = wait_until("serve to accept an alert for the cluster", 240, lambda: next(
                (r for r in get_json(f"{served.url}/runs") if r["incident"] == running.url), None))
            return wait_until("serve to pull the cluster", 240,
                              lambda: (doc := get_json(f"{served.url}/runs/{run['id']}"))["input"] and doc or
                              doc["status"] not in ("queued", "running") and doc)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}; firing: {firing(prom)}; alertmanager: {output_of(folder / 'alertmanager')}"
                                 f"; serve: {output_of(served.folder / 'cwd')}") from None


def _answers(served: Served, run_id: str) -> str:
    """Every answer serve gives about the run, as a user or a chat bot reads them."""
    texts = []
    for path in ("/runs", f"/runs/{run_id}", f"/runs/{run_id}/report.md", f"/runs/{run_id}/report.html"):
        with urllib.request.urlopen(served.url + path, timeout=10) as response:
            texts.append(response.read().decode())
    return "\n".join(texts)


def nothing_leaked_nor_written_elsewhere(served: Served, run_id: str) -> None:
    assert PLANTED not in everything_written(served.out_root)
    assert PLANTED not in _answers(served, run_id)
    home = served.folder / "home"
    assert not list((served.folder / "logs-root").iterdir())
    assert [p.name for p in (served.folder / "cwd").iterdir()] == ["out.log"]
    elsewhere = [str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()
                 and not str(p.relative_to(home)).startswith(HOME_ALLOWED)]
    assert elsewhere == []
    assert PLANTED not in everything_written(home)


def triaged(served: Served, run: dict) -> tuple[str, str, dict]:
    """The finished run's primary finding (runbook, root cause) and the run, once nothing leaked."""
    doc = wait_until("the triage to finish", 600, lambda: (d := get_json(f"{served.url}/runs/{run['id']}"))["status"]
                     not in ("queued", "running") and d, 2)
    assert doc["status"] == "done", (doc, output_of(served.folder / "cwd"))
    primary = next(f for f in doc["report"]["findings"] if f["primary"])
    nothing_leaked_nor_written_elsewhere(served, run["id"])
    return primary["runbook"], primary["root_cause"]["slug"], doc
