"""The whole loop with real parts: a Flink standalone cluster fails, Prometheus (scraping Flink's own reporter, with
the rules of ``flink-runbooks alert-rules``) fires, Alertmanager posts to ``flink-runbooks serve``, which pulls the
cluster through the alert's ``flink_rest_url`` and triages it; the run's report names the failure's runbook. A
secret planted in the cluster's configuration reaches no byte serve writes nor any of its answers, and serve writes
nothing outside its out-root (its home and temporary folder hold only the caches of the libraries it runs).

One serve answers for every incident (the ``served`` fixture), as in production; each incident has its own cluster,
Prometheus and Alertmanager, all on 127.0.0.1 and stopped by the test (tests/live_cluster.py). Code that throws on
every attempt goes round the same loop in tests/apps/test_live.py, on both releases."""
from __future__ import annotations

import json
import os
import signal

import pytest
from live_cluster import alert_loop, cluster, jar, triaged

from flink_runbooks.apps.bench.flink_cluster import wait_until

pytestmark = [pytest.mark.live, pytest.mark.xdist_group("live")]

# Checkpoints every second, none may fail; three restarts a second apart, then the job fails.
CHECKPOINTING = {"execution.checkpointing.interval": "1 s",
                 "execution.checkpointing.tolerable-failed-checkpoints": 0,
                 "restart-strategy.fixed-delay.attempts": 3}
# Heartbeats every second: a TaskManager killed is noticed in seconds rather than Flink's default 50.
FAST_HEARTBEAT = {"heartbeat.interval": 1000, "heartbeat.timeout": 10000,
                  "restart-strategy.fixed-delay.attempts": 10}


def test_a_checkpoint_directory_that_stops_being_writable_alerts_and_is_triaged(served, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    with cluster("2.3.0", tmp_path / "cluster", config={**CHECKPOINTING, "execution.checkpointing.dir":
                                                        f"file://{checkpoints}"}) as running:
        job = running.submit(jar(running, "CountingJob"), "CountingJob")
        wait_until("two completed checkpoints", 120,
                   lambda: running.get(f"/jobs/{job}/checkpoints")["counts"]["completed"] >= 2)

        def directory_becomes_a_file():
            # The job's folder replaced by a file: no checkpoint folder can be made under it, even by root.
            job_folder = checkpoints / job
            job_folder.rename(tmp_path / "moved-away")
            job_folder.write_text("not a folder\n")

        run = alert_loop(served, tmp_path, running, directory_becomes_a_file)
    runbook, cause, doc = triaged(served, run)
    assert (runbook, cause) == ("checkpoint-tolerable-failure-threshold", "storage-unwritable"), doc["headline"]
    assert "FileAlreadyExistsException" in json.dumps(doc["report"])  # the fault as Flink logged it


def test_a_taskmanager_killed_while_its_job_runs_alerts_and_is_triaged(served, tmp_path):
    with cluster("2.3.0", tmp_path / "cluster", config=FAST_HEARTBEAT) as running:
        job = running.submit(jar(running, "CountingJob"), "CountingJob")
        wait_until("the job to run", 120, lambda: running.job_state(job) == "RUNNING")
        [busy] = running.taskmanager_pids()  # the only one yet: the job's task runs on it
        running.start_taskmanager()  # where the job restarts
        run = alert_loop(served, tmp_path, running, lambda: os.kill(busy, signal.SIGKILL))
    runbook, cause, doc = triaged(served, run)
    assert (runbook, cause) == ("taskmanager-lost", "process-killed"), doc["headline"]
