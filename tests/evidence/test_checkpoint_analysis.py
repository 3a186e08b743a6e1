"""checkpoint_analysis: job runs and restores, trigger aborts in every generation's wording, statistics."""
from __future__ import annotations

import pytest

from corpus import incident_from_text
from flink_runbooks.evidence.checkpoint_analysis import (ceil_duration_ms, failovers, growth, job_runs, job_state_at,
                                                job_state_changes, not_ready_aborts)
from flink_runbooks.vocabulary.units import human_duration

JOB = "599a6ac3c371874d12ebf024978cadbc"


def test_job_runs_tell_fresh_starts_from_restores_across_versions():
    text = f"""2024-01-01 10:00:00,000 INFO  org.apache.flink.runtime.dispatcher.StandaloneDispatcher     [] - Received JobGraph submission 'orders' ({JOB}).
2024-01-01 10:00:00,100 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - No checkpoint found during restore.
2024-01-01 10:00:00,200 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job orders ({JOB}) switched from state CREATED to RUNNING.
2024-01-01 10:01:00,000 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job orders ({JOB}) switched from state RUNNING to RESTARTING.
2024-01-01 10:01:05,000 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job orders ({JOB}) switched from state RESTARTING to RUNNING.
2024-01-01 10:02:00,000 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job orders ({JOB}) switched from state RUNNING to CANCELED.
2024-01-01 11:00:00,000 INFO  org.apache.flink.runtime.dispatcher.StandaloneDispatcher     [] - Received JobGraph submission {JOB} (orders).
2024-01-01 11:00:00,100 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Starting job {JOB} from savepoint file:/sp/{JOB}/chk-12 ()
2024-01-01 11:00:00,150 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Reset the checkpoint ID of job {JOB} to 13.
2024-01-01 11:00:00,200 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job orders ({JOB}) switched from state CREATED to RUNNING.
2024-01-01 12:00:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Restoring job {JOB} from latest valid checkpoint: Checkpoint 40 @ 1550287589373 for {JOB}."""
    inc = incident_from_text(text)
    first, second = job_runs(inc)
    assert (first.name, first.fresh, first.restarts, first.ended) == ("orders", True, 1, "2024-01-01 10:02:00.000")
    assert (second.restored_from, second.counter_reset_to, second.fresh) == (12, 13, None)
    changes = job_state_changes(inc)
    assert job_state_at(changes, JOB, "2024-01-01 10:01:02.000") == "RESTARTING"
    assert job_state_at(changes, JOB, "2024-01-01 10:01:30.000") == "RUNNING"


@pytest.mark.parametrize("line,kind,state", [
    # <= 1.8: the decline's cause under the "Discarding checkpoint" record
    (f"2019-02-16 11:26:29.630 [flink-akka.actor.default-dispatcher-68] INFO org.apache.flink.runtime.checkpoint.CheckpointCoordinator - Discarding checkpoint 1389046 of job {JOB}.\n"
     "org.apache.flink.runtime.checkpoint.decline.CheckpointDeclineTaskNotReadyException: Task Source: Kafka (3/3) was not running",
     "declined-not-ready", None),
    # 1.9 - 1.13
    (f"2021-01-01 10:00:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator     - Checkpoint triggering task Source: Kafka (1/4) of job {JOB} is not in state RUNNING but DEPLOYING instead. Aborting checkpoint.",
     "state", "DEPLOYING"),
    # 1.14+
    (f"2024-01-01 10:00:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger checkpoint for job {JOB} since Checkpoint triggering task Source: Kafka (1/4) of job {JOB} is not being executed at the moment. Aborting checkpoint. Failure reason: Not all required tasks are currently running..",
     "not-executed", None),
    (f"2024-01-01 10:00:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger checkpoint for job {JOB} since Some tasks of the job have already finished and checkpointing with finished tasks is not enabled. Failure reason: Not all required tasks are currently running..",
     "finished-not-enabled", "FINISHED"),
])
def test_not_ready_aborts_in_every_wording(line, kind, state):
    [abort] = not_ready_aborts(incident_from_text(line))
    assert (abort.kind, abort.state, abort.job) == (kind, state, JOB)


def test_unrelated_trigger_failures_are_not_not_ready_aborts():
    line = (f"2024-01-01 10:00:00,000 INFO  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to "
            f"trigger checkpoint for job {JOB} since Checkpoint was declined (task is closing).")
    assert not_ready_aborts(incident_from_text(line)) == []


def test_statistics_helpers():
    assert growth([1, 1, 1, 4, 4, 4]) == 4.0 and growth([5, 6]) is None
    assert ceil_duration_ms(95_513) == 100_000 and ceil_duration_ms(1250) == 2000 and ceil_duration_ms(611_000) == 660_000
    assert human_duration(95_513) == "96 s" and human_duration(1250) == "1250 ms"


def test_one_failover_logged_several_times_counts_once():
    text = "\n".join(f"2024-01-01 10:00:0{s},{ms:03d} INFO  x.Y [] - Trying to recover from a global failure."
                     for s, ms in ((1, 998), (2, 3), (2, 40), (9, 0)))
    assert failovers(incident_from_text(text).events) == 2
