"""The state changes Flink logs for jobs and tasks, as the evidence modules and detectors read them.

Job: ``Job <name> (<id>) switched from state RUNNING to RESTARTING.``; task: ``<task> (1/2)#0 (<attempt id>)
switched from DEPLOYING to RUNNING.`` (the ``state`` word only appears in job lines).
"""
from __future__ import annotations

import re

# The job leaves RUNNING because of a failure: a failover (RESTARTING), a global failure (FAILING) or the end.
JOB_FAILOVER = re.compile(r"switched from state RUNNING to (?:RESTARTING|FAILING|FAILED)")
# The job runs again: first start, after a restart, after a JobManager failover (RECONCILING).
JOB_RUNNING = re.compile(r"switched from state (?P<previous>CREATED|RESTARTING|INITIALIZING|RECONCILING) to RUNNING")
# A task (attempt) is up: deployed and initialised.
TASK_RUNNING = re.compile(r"switched from (?:INITIALIZING|DEPLOYING) to RUNNING")
