"""The lines Flink logs when a job, a task or a checkpoint changes state: one named pattern per line, read by the
evidence modules and the detectors alike.

Job: ``Job <name> (<id>) switched from state RUNNING to RESTARTING.``; task: ``<task> (1/2)#0 (<attempt id>)
switched from DEPLOYING to RUNNING.`` (the ``state`` word only appears in job lines); checkpoints: the
CheckpointCoordinator's ``Triggering``, ``Completed``, ``expired``, ``Decline`` and ``Failed to trigger`` lines.
"""
from __future__ import annotations

import re

JOB_ID = r"[0-9a-f]{32}"

# -- jobs
# Any state change of a job, with its name, id and both states.
JOB_STATE = re.compile(
    r"Job (?P<name>.*?) \((?P<job>[0-9a-f]{32})\) switched from state (?P<from>[A-Z_]+) to (?P<to>[A-Z_]+)")
# The job leaves RUNNING because of a failure: a failover (RESTARTING), a global failure (FAILING) or the end.
JOB_FAILOVER = re.compile(r"switched from state RUNNING to (?:RESTARTING|FAILING|FAILED)")
# The job runs again: first start, after a restart, after a JobManager failover (RECONCILING).
JOB_RUNNING = re.compile(r"switched from state (?P<previous>CREATED|RESTARTING|INITIALIZING|RECONCILING) to RUNNING")
# The job ended successfully: its last state change on the JobManager, or what the client prints when the job it
# waited for finished (JobExecutionResult.toString: "Program execution finished", "Job with JobID {} has finished.",
# "Job Runtime: {} ms"; 1.20.3, 2.3.0).
JOB_FINISHED = re.compile(r"Job .*?\((?P<job>[0-9a-f]{32})\) switched from state \w+ to FINISHED|"
                          r"Job with JobID (?P<client_job>[0-9a-f]{32}) has finished\.")
# The JobManager lost leadership and suspended the job.
JOB_SUSPENDED = re.compile(r"Job .*\((?P<job>[0-9a-f]{32})\) switched from state \w+ to SUSPENDED")
# The scheduler restarts the whole job after a failure no region can contain.
GLOBAL_FAILURE = re.compile(r"Trying to recover from a global failure")
# The restart strategy gives up (1.10+).
RECOVERY_SUPPRESSED = re.compile(r"Recovery is suppressed by (?P<strategy>\w+)(?P<args>\([^)]*\))?")

# A source's split enumerator failed on the JobManager and fails the job over, the way a failed task does: an ERROR
# of SourceCoordinator ("Uncaught exception in the SplitEnumerator for Source {} while {}. Triggering job failover.")
# or of SourceCoordinatorContext ("Exception while handling result from async call in {}. Triggering job failover.",
# {} the coordinator thread "SourceCoordinator-<source>"), the enumerator's exception below it (1.13.6, 1.20.3, 2.3.0).
COORDINATOR_FAILOVER = re.compile(
    r"(?:Uncaught exception in the SplitEnumerator for Source (?P<source>.+?) while .*?|"
    r"Exception while handling result from async call in (?:SourceCoordinator-)?(?P<coordinator>.+?))\. "
    r"Triggering job failover")

# -- tasks
# A task (attempt) is up: deployed and initialised.
TASK_RUNNING = re.compile(r"switched from (?:INITIALIZING|DEPLOYING) to RUNNING")
# A task attempt failed.
TASK_FAILED = re.compile(r"switched from (?:RUNNING|DEPLOYING|INITIALIZING|CREATED|SCHEDULED) to FAILED")
# A task ended its input (bounded sources and the operators after them).
TASK_FINISHED = re.compile(r"(?P<task>\S.*?) \([0-9a-f_]+\) switched from RUNNING to FINISHED")
# A cancelled task is gone (its thread ended before the cancellation watchdog fired).
TASK_CANCELED = re.compile(r"^(?P<task>.+? \(\d+/\d+\))(?:#\d+)? \([0-9a-f_]+\) switched from CANCELING to CANCELED")

# -- checkpoints
CHECKPOINT_TRIGGERED = re.compile(r"Triggering (?:checkpoint|savepoint) (?P<id>\d+)\b.*? for job (?P<job>[0-9a-f]{32})")
# Size and duration as 1.11+ print them (``(123 bytes, checkpointDuration=45 ms``) or older ones (``in 45 ms``).
CHECKPOINT_COMPLETED = re.compile(
    r"Completed checkpoint (?P<id>\d+) for job (?P<job>[0-9a-f]{32})(?: \((?P<bytes>\d+) bytes"
    r"(?:, checkpointDuration=(?P<dur>\d+) ms| in (?P<dur_old>\d+) ms)?)?"
)
CHECKPOINT_EXPIRED = re.compile(r"Checkpoint (?P<id>\d+) of job (?P<job>[0-9a-f]{32}) expired before completing")
CHECKPOINT_DECLINED = re.compile(
    r"Decline checkpoint (?P<id>\d+) by task (?P<task>\S+)(?: of job (?P<job>[0-9a-f]{32}))?")
CHECKPOINT_FAILED = re.compile(
    r"Failed to trigger or complete checkpoint (?P<id>\d+) for job (?P<job>[0-9a-f]{32})\.?"
    r"(?: \((?P<consecutive>\d+) consecutive failed attempts so far\))?"
)
CHECKPOINT_TRIGGER_FAILED = re.compile(r"Failed to trigger checkpoint (?:(?P<id>\d+) )?for job (?P<job>[0-9a-f]{32})")
# Up to 1.8 the decline's cause is printed under the record that discards the checkpoint, not the decline line.
CHECKPOINT_DISCARDED = re.compile(rf"Discarding checkpoint (?P<id>\d+) of job (?P<job>{JOB_ID})")
# The job fails because too many checkpoints failed in a row (1.17+ name the reason of the latest).
TOLERABLE_FAILURES_EXCEEDED = re.compile(
    r"Exceeded checkpoint tolerable failure threshold\.?(?: The latest checkpoint failed due to (?P<reason>.+?), view)?"
)
