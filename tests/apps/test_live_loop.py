"""The whole loop with real parts: a Flink standalone cluster fails, Prometheus (scraping Flink's own reporter, with
the rules of ``flink-runbooks alert-rules``) fires, Alertmanager posts to ``flink-runbooks serve``, which pulls the
cluster through the alert's ``flink_rest_url`` and triages it; the run's report names the failure's runbook. A
secret planted in the cluster's configuration reaches no byte serve writes nor any of its answers, and serve writes
nothing outside its out-root (its home and temporary folder hold only the caches of the libraries it runs).

One serve answers for every incident of the module, as in production; each incident has its own cluster,
Prometheus and Alertmanager, all on 127.0.0.1 and stopped by the test."""
from __future__ import annotations

import json
import os
import signal
import urllib.request

import pytest
from live_cluster import PLANTED, alertmanager, cluster, firing, jar, output_of, prometheus, serve
from support import everything_written

from flink_runbooks.apps.bench.flink_cluster import get_json, wait_until

pytestmark = [pytest.mark.live, pytest.mark.xdist_group("live")]

# Checkpoints every second, none may fail; three restarts a second apart, then the job fails.
CHECKPOINTING = {"execution.checkpointing.interval": "1 s",
                 "execution.checkpointing.tolerable-failed-checkpoints": 0,
                 "restart-strategy.fixed-delay.attempts": 3}
# Heartbeats every second: a TaskManager killed is noticed in seconds rather than Flink's default 50.
FAST_HEARTBEAT = {"heartbeat.interval": 1000, "heartbeat.timeout": 10000,
                  "restart-strategy.fixed-delay.attempts": 10}
# Every rule's condition holds this long before it fires: the failure has played out by then (the job restarted
# and, where its restarts run out, failed), as it has by the time a production rule's longer hold ends.
HOLD = "15s"
# What the libraries serve runs may keep in its home: caches and Jupyter's runtime files, never an incident.
HOME_ALLOWED = (".cache", ".local/share/jupyter", ".ipython", ".config", ".jupyter", "tmp")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve")
    with serve(folder) as (url, out_root):
        yield url, out_root, folder


def _runs_for(url: str, cluster_url: str) -> list[dict]:
    return [r for r in get_json(f"{url}/runs") if r["incident"] == cluster_url]


def _loop(served, tmp_path, running, provoke=lambda: None) -> dict:
    """Prometheus and Alertmanager watching ``running`` while ``provoke`` breaks it; returns serve's first run for
    the cluster once its pull is done (the cluster is then no longer needed)."""
    url = served[0]
    with alertmanager(tmp_path / "alertmanager", f"{url}/alerts") as am, \
            prometheus(tmp_path / "prometheus", running, am, hold=HOLD) as prom:
        wait_until("Prometheus to scrape the JobManager", 60,
                   lambda: get_json(f"{prom}/api/v1/query?query=flink_jobmanager_numRegisteredTaskManagers")
                   ["data"]["result"])
        provoke()
        try:
            run = wait_until("serve to accept an alert for the cluster", 240,
                             lambda: next(iter(_runs_for(url, running.url)), None))
            return wait_until("serve to pull the cluster", 240,
                              lambda: (doc := get_json(f"{url}/runs/{run['id']}"))["input"] and doc or
                              doc["status"] not in ("queued", "running") and doc)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}; firing: {firing(prom)}; alertmanager: {output_of(tmp_path / 'alertmanager')}"
                                 f"; serve: {output_of(served[2] / 'cwd')}") from None


def _finished(served, run: dict) -> dict:
    url = served[0]
    doc = wait_until("the triage to finish", 600, lambda: (d := get_json(f"{url}/runs/{run['id']}"))["status"]
                     not in ("queued", "running") and d, 2)
    assert doc["status"] == "done", (doc, output_of(served[2] / "cwd"))
    return doc


def _answers(served, run_id: str) -> str:
    """Every answer serve gives about the run, as a user or a chat bot reads them."""
    url, texts = served[0], []
    for path in ("/runs", f"/runs/{run_id}", f"/runs/{run_id}/report.md", f"/runs/{run_id}/report.html"):
        with urllib.request.urlopen(url + path, timeout=10) as response:
            texts.append(response.read().decode())
    return "\n".join(texts)


def _nothing_leaked_nor_written_elsewhere(served, run_id: str) -> None:
    _url, out_root, folder = served
    assert PLANTED not in everything_written(out_root)
    assert PLANTED not in _answers(served, run_id)
    home = folder / "home"
    assert not list((folder / "logs-root").iterdir())
    assert [p.name for p in (folder / "cwd").iterdir()] == ["out.log"]
    elsewhere = [str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()
                 and not str(p.relative_to(home)).startswith(HOME_ALLOWED)]
    assert elsewhere == []
    assert PLANTED not in everything_written(home)


def _primary(served, run: dict) -> tuple[str, str, dict]:
    doc = _finished(served, run)
    primary = next(f for f in doc["report"]["findings"] if f["primary"])
    _nothing_leaked_nor_written_elsewhere(served, run["id"])
    return primary["runbook"], primary["root_cause"]["slug"], doc


@pytest.mark.parametrize("version", ["1.20.3", "2.3.0"])
def test_a_checkpoint_directory_that_stops_being_writable_alerts_and_is_triaged(served, version, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    with cluster(version, tmp_path / "cluster", config={**CHECKPOINTING, "execution.checkpointing.dir":
                                                        f"file://{checkpoints}"}) as running:
        job = running.submit(jar(running, "CountingJob"), "CountingJob")
        wait_until("two completed checkpoints", 120,
                   lambda: running.get(f"/jobs/{job}/checkpoints")["counts"]["completed"] >= 2)

        def directory_becomes_a_file():
            # The job's folder replaced by a file: no checkpoint folder can be made under it, even by root.
            job_folder = checkpoints / job
            job_folder.rename(tmp_path / "moved-away")
            job_folder.write_text("not a folder\n")

        run = _loop(served, tmp_path, running, directory_becomes_a_file)
    runbook, cause, doc = _primary(served, run)
    assert (runbook, cause) == ("checkpoint-tolerable-failure-threshold", "storage-unwritable"), doc["headline"]


@pytest.mark.parametrize("version", ["2.3.0"])
def test_code_that_throws_on_every_attempt_alerts_and_is_triaged(served, version, tmp_path):
    # Restarts three seconds apart: Prometheus, started once the job runs, sees them.
    with cluster(version, tmp_path / "cluster", config={"restart-strategy.fixed-delay.delay": "3 s"}) as running:
        running.submit(jar(running, "ThrowingJob"), "ThrowingJob")
        run = _loop(served, tmp_path, running)
    runbook, cause, doc = _primary(served, run)
    assert (runbook, cause) == ("restart-strategy-exhausted", "same-fault-every-attempt"), doc["headline"]
    assert "order 300 has no customer" in json.dumps(doc["report"])


@pytest.mark.parametrize("version", ["2.3.0"])
def test_a_taskmanager_killed_while_its_job_runs_alerts_and_is_triaged(served, version, tmp_path):
    with cluster(version, tmp_path / "cluster", config=FAST_HEARTBEAT) as running:
        job = running.submit(jar(running, "CountingJob"), "CountingJob")
        wait_until("the job to run", 120, lambda: running.job_state(job) == "RUNNING")
        [busy] = running.taskmanager_pids()  # the only one yet: the job's task runs on it
        running.start_taskmanager()  # where the job restarts
        run = _loop(served, tmp_path, running, lambda: os.kill(busy, signal.SIGKILL))
    runbook, cause, doc = _primary(served, run)
    assert (runbook, cause) == ("taskmanager-lost", "process-killed"), doc["headline"]
