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
from typing import Iterator

import pytest
import yaml
from corpus import ROOT

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


def jar(running: Cluster, name: str) -> str:
    return job_jar(running.home, JOBS / f"{name}.java", running.folder)


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


@contextlib.contextmanager
def serve(folder: pathlib.Path) -> Iterator[tuple[str, pathlib.Path]]:
    """``flink-runbooks serve`` with its own home, temporary folder and working folder under ``folder``; yields its
    URL and its out-root."""
    port = free_port()
    home, logs_root, out_root = folder / "home", folder / "logs-root", folder / "out-root"
    for d in (home / "tmp", logs_root, out_root):
        d.mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(home / "tmp")}
    url = f"http://127.0.0.1:{port}"
    with _process([*CLI, "serve", "--host", "127.0.0.1", "--port", str(port), "--logs-root", str(logs_root),
                   "--out-root", str(out_root), "--jobs", "2"], folder / "cwd", f"FLINK_RUNBOOKS_LIVE_SERVE_{port}",
                  env):
        wait_until("flink-runbooks serve", 60, lambda: get_json(f"{url}/healthz"), 0.2)
        yield url, out_root
