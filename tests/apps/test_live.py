"""A live incident: a real Flink standalone cluster (PyPI's distribution, one 1.x and one 2.x release, installed by
scripts/setup-flink.sh) runs a job whose code throws on every attempt until its restarts are exhausted.

- The alert loop: Prometheus scraping Flink's reporter fires, Alertmanager posts to ``flink-runbooks serve``, which
  pulls the cluster and triages it (tests/apps/test_live_loop.py has the other failures on the same loop).
- ``flink-runbooks diagnose <REST URL>`` pulls the cluster, every endpoint it asks answers, and names the failure.
- The cluster's HistoryServer, reading the archive the JobManager wrote, is pulled and diagnosed the same way: it
  serves no logs, so the job's exception history is what the diagnosis reads.

A secret planted in the cluster's configuration reaches no byte written. The cluster runs from a configuration in
the test's own folder, binds every port to 127.0.0.1 (ports chosen free) and is stopped by the test, with any JVM it
leaves behind (tests/live_cluster.py)."""
from __future__ import annotations

import json
import re
import subprocess

import pytest
from live_cluster import CLI, PLANTED, RELEASES, alert_loop, cluster, jar, triaged

from flink_runbooks.apps.bench.flink_cluster import get_json, wait_until

pytestmark = [pytest.mark.live, pytest.mark.xdist_group("live")]

# What the pull asks of a JobManager (besides /config and /jobs/overview), per job and per TaskManager.
JOB_ENDPOINTS = ("/jobs/{jid}", "/jobs/{jid}/exceptions?maxExceptions=20", "/jobs/{jid}/checkpoints",
                 "/jobs/{jid}/checkpoints/config", "/jobs/{jid}/config")
CLUSTER_ENDPOINTS = ("/config", "/jobs/overview", "/jobmanager/config", "/jobmanager/logs", "/taskmanagers")
# Checkpointing on (into the JobManager's memory), so the job's checkpoint documents exist; restarts three seconds
# apart, so Prometheus sees them.
OPTIONS = {"execution.checkpointing.interval": "1 s", "restart-strategy.fixed-delay.delay": "3 s"}
FAILURE = ("restart-strategy-exhausted", "same-fault-every-attempt")


def _diagnose(target: str, *options: str) -> tuple[subprocess.CompletedProcess, dict]:
    run = subprocess.run(CLI + ["diagnose", target, "--format", "json", *options], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 1, run.stderr
    return run, json.loads(run.stdout)


def _primary(doc: dict) -> dict:
    return next(f for f in doc["findings"] if f["primary"])


def _nothing_holds_the_secret(folder, *texts: str) -> None:
    written = [p for p in folder.rglob("*") if p.is_file()]
    assert not [str(p) for p in written if PLANTED in p.read_text(errors="replace")]
    assert not [t for t in texts if PLANTED in t]


@pytest.mark.parametrize("version", RELEASES)
def test_a_job_that_throws_on_every_attempt_alerts_and_is_triaged_pulled_and_diagnosed_from_its_history(
        version, served, tmp_path):
    out, history = tmp_path / "pulled", tmp_path / "pulled-from-history"
    with cluster(version, tmp_path / "cluster", taskmanagers=2, config=OPTIONS) as running:
        job = running.submit(jar(running, "ThrowingJob"), "ThrowingJob")
        alerted = alert_loop(served, tmp_path, running)
        wait_until("the job to fail", 180, lambda: running.job_state(job) == "FAILED", 1)
        run, doc = _diagnose(running.url, "--pull-dir", str(out))
        with running.history_server() as history_url:
            wait_until("the HistoryServer to list the job", 120,
                       lambda: [j for j in get_json(f"{history_url}/jobs/overview")["jobs"] if j["jid"] == job])
            pull = subprocess.run(CLI + ["pull", history_url, "--out", str(history)], capture_output=True, text=True,
                                  timeout=300)
        assert pull.returncode == 0, pull.stderr
        history_run, history_doc = _diagnose(str(history))

    runbook, cause, triage = triaged(served, alerted)
    assert (runbook, cause) == FAILURE, triage["headline"]

    assert doc["flink_version"] == version
    primary = _primary(doc)
    assert (primary["runbook"], primary["root_cause"]["slug"]) == FAILURE
    assert "order 300 has no customer" in primary["summary"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"] == running.url and manifest["partial"] is False and manifest["jobs"] == [job]
    answered = {r["path"]: r["status"] for r in manifest["requests"]}
    managers = json.loads((out / "rest" / "taskmanagers.json").read_text())["taskmanagers"]
    assert len(managers) == 2
    asked = [*CLUSTER_ENDPOINTS, *(p.format(jid=job) for p in JOB_ENDPOINTS),
             *(f"/taskmanagers/{tm['id']}{part}" for tm in managers for part in ("", "/logs"))]
    assert {path: answered.get(path) for path in asked} == {path: 200 for path in asked}
    logs = [r for r in manifest["requests"] if re.search(r"/logs/[^/]+$", r["path"])]
    assert logs and all(r["status"] == 200 and "error" not in r for r in logs)
    # The processes share a log folder here, and each serves all of it: the TaskManagers' logs come with the
    # JobManager's, each pulled once.
    assert any("standalonesession" in p for p in manifest["logs"]) and any("taskexecutor" in p for p in manifest["logs"])
    assert "order 300 has no customer" in (out / "rest" / "jobs" / job / "exceptions.json").read_text()
    _nothing_holds_the_secret(out, run.stdout, run.stderr)

    history_manifest = json.loads((history / "manifest.json").read_text())
    assert history_manifest["jobs"] == [job] and history_manifest["flink_version"] == version
    assert f"log/exception-history/{job}.log" in history_manifest["logs"]
    assert "order 300 has no customer" in (history / "log" / "exception-history" / f"{job}.log").read_text()
    primary = _primary(history_doc)
    assert (primary["runbook"], primary["root_cause"]["slug"]) == FAILURE
    _nothing_holds_the_secret(history, history_run.stdout, history_run.stderr, pull.stdout, pull.stderr)
