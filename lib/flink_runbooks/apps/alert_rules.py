"""``flink-runbooks alert-rules``: Prometheus alerting rules on Flink's own metrics, each pointing to its runbook.

The metric names are those Flink's Prometheus reporter exports (``flink_<scope>_<metric>``, the job's labels
``job_id`` and ``job_name``): job metrics of the JobManager (``numRestarts``, ``numberOfFailedCheckpoints``,
``lastCheckpointDuration``), the cluster's (``numRegisteredTaskManagers``, ``numRunningJobs``), the TaskManagers' JVM
(``Status.JVM.Memory.Heap/Metaspace/Direct``) and task back pressure (``backPressuredTimeMsPerSecond``, 1.13+). Each
rule carries ``runbook_url`` (the runbook's page on the published site) and, when given, ``flink_rest_url``: the
annotation ``flink-runbooks serve`` pulls the cluster from.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

# Prometheus's duration: units from milliseconds to years, largest first (1h30m).
DURATION = re.compile(r"^(?:\d+y)?(?:\d+w)?(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?(?:\d+ms)?$")


def prometheus_duration(text: str) -> str:
    """``text`` if Prometheus reads it as a duration (``30s``, ``1h30m``, ``0s``), else ValueError."""
    if not text or not DURATION.match(text):
        raise ValueError(f"{text!r} is not a Prometheus duration such as 30s, 5m or 1h30m")
    return text


@dataclass(frozen=True)
class Rule:
    alert: str
    expr: str
    for_: str
    runbook: str  # the slug whose page explains it
    summary: str
    severity: str = "warning"


def rules(checkpoint_timeout_ms: int = 600_000, expected_taskmanagers: int | None = None) -> list[Rule]:
    near_timeout = int(checkpoint_timeout_ms * 0.8)
    lost = (f"flink_jobmanager_numRegisteredTaskManagers < {expected_taskmanagers}" if expected_taskmanagers
            else "delta(flink_jobmanager_numRegisteredTaskManagers[5m]) < 0")
    return [
        Rule("FlinkJobRestarting", "increase(flink_jobmanager_job_numRestarts[5m]) > 0", "1m",
             "restart-strategy-exhausted", "Flink job {{ $labels.job_name }} restarted in the last 5 minutes",
             "critical"),
        Rule("FlinkJobNotRunning", "flink_jobmanager_numRunningJobs < 1", "2m", "restart-strategy-exhausted",
             "No Flink job is running on {{ $labels.instance }}", "critical"),
        Rule("FlinkCheckpointsFailing", "increase(flink_jobmanager_job_numberOfFailedCheckpoints[10m]) > 0", "0m",
             "checkpoint-tolerable-failure-threshold", "Checkpoints of {{ $labels.job_name }} are failing"),
        Rule("FlinkCheckpointNearTimeout", f"flink_jobmanager_job_lastCheckpointDuration > {near_timeout}", "5m",
             "checkpoint-expired", "Checkpoints of {{ $labels.job_name }} take over 80 % of the checkpoint timeout"),
        Rule("FlinkTaskManagerLost", lost, "0m", "taskmanager-lost",
             "A TaskManager left the Flink cluster on {{ $labels.instance }}", "critical"),
        Rule("FlinkHeapNearMax", "flink_taskmanager_Status_JVM_Memory_Heap_Used "
             "/ flink_taskmanager_Status_JVM_Memory_Heap_Max > 0.9", "10m", "oom-java-heap",
             "TaskManager {{ $labels.tm_id }} uses over 90 % of its heap"),
        Rule("FlinkMetaspaceNearMax", "flink_taskmanager_Status_JVM_Memory_Metaspace_Used "
             "/ flink_taskmanager_Status_JVM_Memory_Metaspace_Max > 0.9", "10m", "oom-metaspace",
             "TaskManager {{ $labels.tm_id }} uses over 90 % of its metaspace"),
        Rule("FlinkDirectMemoryNearMax", "flink_taskmanager_Status_JVM_Memory_Direct_MemoryUsed "
             "/ flink_taskmanager_Status_JVM_Memory_Direct_TotalCapacity > 0.95", "10m", "oom-direct-memory",
             "TaskManager {{ $labels.tm_id }} uses over 95 % of its direct memory"),
        Rule("FlinkBackPressured", "max by (job_name) (flink_taskmanager_job_task_backPressuredTimeMsPerSecond) > 800",
             "15m", "checkpoint-expired", "Flink job {{ $labels.job_name }} is back-pressured"),
    ]


def rule_groups(site_url: str = "", rest_url: str = "", checkpoint_timeout_ms: int = 600_000,
                expected_taskmanagers: int | None = None, hold: str | None = None) -> dict:
    """The rules as a Prometheus rule file (``groups:``); ``hold`` replaces every rule's ``for``."""
    base = site_url.rstrip("/")
    out = []
    for r in rules(checkpoint_timeout_ms, expected_taskmanagers):
        annotations = {"summary": r.summary, "runbook": r.runbook}
        if base:
            annotations["runbook_url"] = f"{base}/runbooks/{r.runbook}.html"
        if rest_url:
            annotations["flink_rest_url"] = rest_url
        out.append({"alert": r.alert, "expr": r.expr, "for": hold or r.for_, "labels": {"severity": r.severity},
                    "annotations": annotations})
    return {"groups": [{"name": "flink-runbooks", "rules": out}]}


def render(fmt: str = "rules", **options) -> str:
    groups = rule_groups(**options)
    if fmt == "prometheusrule":
        doc = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
               "metadata": {"name": "flink-runbooks", "labels": {"role": "alert-rules"}}, "spec": groups}
    else:
        doc = groups
    return yaml.safe_dump(doc, sort_keys=False, width=120)
