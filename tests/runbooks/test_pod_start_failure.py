"""Detector pod-start-failure: a JobManager or TaskManager pod that never runs on Kubernetes, named with its role
and the event that says why (quota with what is left, scheduling, image pull with its reason, a missing ConfigMap,
a crash loop with the container's own last lines); a pod only Pending is undetermined with what to collect; a pod
that ran and was later OOMKilled is container-memory-exceeded's, and Flink waiting for slots comes after it."""
from __future__ import annotations

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors
from flink_runbooks.parse.kubernetes import records_of

SLUG = "pod-start-failure"


def _diagnose(name: str, spark):
    return run_detectors(ingest([str(example(SLUG, name))], spark))


def _finding(diagnosis):
    return next(f for f in diagnosis.findings if f.runbook == SLUG)


def test_a_quota_refusing_taskmanagers_is_the_root_cause_before_the_slot_wait(spark):
    d = _diagnose("taskmanager-quota-exceeded-native-1.20", spark)
    primary = d.primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "resource-quota-exceeded")
    assert "no-resource-available" in {f.runbook for f in d.findings}  # the consequence, listed after
    assert "TaskManager pod orders-taskmanager-1-5" in primary.summary
    assert "ResourceQuota flink-quota" in primary.summary and "limited limits.memory=9728Mi" in primary.summary
    assert "Could not create pod orders-taskmanager-1-5" in primary.evidence[0].text
    quota = next(p for p in primary.patches if p.target == "ops")
    assert "1216Mi left of limits.memory" in quota.reason and "-n streaming" in quota.snippet
    smaller = next(p for p in primary.patches if p.target == "flink")
    assert (smaller.key, smaller.proposed, smaller.current) == ("taskmanager.memory.process.size", "1216m", "1728m")


def test_a_pasted_quota_trace_without_config_proposes_only_the_quota_action(spark):
    primary = _diagnose("pasted-quota-stack-trace", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "resource-quota-exceeded")
    assert "team-analytics" in primary.summary and "sessions-taskmanager-1-7" in primary.summary
    assert [p.target for p in primary.patches] == ["ops"]
    assert "1 left of limits.cpu" in primary.patches[0].reason


def test_unschedulable_names_the_shortage_most_nodes_give(spark):
    primary = _diagnose("taskmanager-unschedulable-insufficient-cpu-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "unschedulable")
    assert primary.details["shortage"].startswith("3 Insufficient cpu, 1 node(s) had untolerated taint")
    assert "add nodes" in primary.patches[0].reason


def test_an_unauthorized_pull_proposes_the_pull_secret_for_the_jobmanager(spark):
    primary = _diagnose("jobmanager-image-pull-unauthorized-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "image-pull-failure")
    assert "JobManager pod orders-6f9c8d7b54-vx2mq" in primary.summary
    assert "the registry refused the credentials" in primary.summary
    assert any("401 Unauthorized" in e.text for e in primary.evidence)
    assert any(p.key == "kubernetes.container.image.pull-secrets" for p in primary.patches)


def test_a_missing_configmap_is_named_and_dated_from_the_describe(spark):
    primary = _diagnose("jobmanager-configmap-missing-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "configmap-or-secret-missing")
    assert "its configmap hadoop-config-orders does not exist" in primary.summary
    # Start Time 08:15:02 + the Scheduled event's 6m2s = printed at 08:21:04; FailedMount first 6m1s before
    assert primary.first_seen.startswith("2024-05-02 08:15:03")
    assert "kubectl get configmap hadoop-config-orders -n streaming" in primary.patches[0].snippet


def test_a_crash_loop_quotes_the_exit_code_and_the_container_own_log(spark):
    primary = _diagnose("taskmanager-crash-loop-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "crash-loop")
    assert "exit code 1, Error" in primary.summary
    assert "AccessDeniedException: /opt/flink/plugins-custom/metrics-datadog" in primary.summary
    assert "--previous" in primary.patches[0].snippet


def test_a_kill_for_memory_at_start_is_container_memory_exceeded_first_and_noted_here(spark):
    d = _diagnose("oomkilled-at-start-limit-below-process-1.20", spark)
    assert (d.primary.runbook, d.primary.root_cause.slug) == ("container-memory-exceeded",
                                                              "container-smaller-than-process")
    ours = _finding(d)
    assert ours.root_cause.slug == "oomkilled-at-start" and "9 s after it started" in ours.summary


def test_a_pod_only_pending_is_undetermined_and_says_what_to_collect(spark):
    primary = _diagnose("pending-without-events-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "undetermined")
    assert primary.confidence <= 0.5
    assert "kubectl get events -n <namespace> --sort-by=.lastTimestamp" in primary.summary
    assert "kubectl describe pod orders-taskmanager-1-2" in primary.patches[0].snippet


def test_a_pod_that_ran_for_hours_before_its_oom_kill_is_not_claimed(spark):
    d = _diagnose("near-miss-oomkilled-after-hours-1.20", spark)
    assert d.primary.runbook == "container-memory-exceeded"
    assert SLUG not in {f.runbook for f in d.findings}


def test_a_pod_scheduled_after_a_wait_is_not_claimed():
    text = ("2024-05-02 08:10:00,000 WARN  kubernetes.event [] - Event Warning FailedScheduling from default-scheduler "
            "on Pod orders-taskmanager-1-3 (taskmanager): 0/3 nodes are available: 3 Insufficient memory.\n"
            "2024-05-02 08:12:10,000 INFO  kubernetes.event [] - Event Normal Started from kubelet on Pod "
            "orders-taskmanager-1-3 (taskmanager): Started container flink-main-container\n")
    assert get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3", file="events.log")) == []


def test_kubectl_tables_become_records_with_pod_and_reason():
    events = ("LAST SEEN   TYPE      REASON             OBJECT                       MESSAGE\n"
              "2m10s       Warning   FailedScheduling   pod/orders-taskmanager-1-3   0/3 nodes are available: "
              "3 Insufficient memory.\n")
    lines, _ = records_of(events, "events.txt")
    assert lines[1] == ("WARN  kubernetes.event [] - Event Warning FailedScheduling on Pod orders-taskmanager-1-3 "
                        "(taskmanager) (last seen 2m10s ago): 0/3 nodes are available: 3 Insufficient memory.")
    pods = ("NAME                     READY   STATUS             RESTARTS      AGE\n"
            "orders-taskmanager-1-1   0/1     CrashLoopBackOff   5 (42s ago)   4m12s\n"
            "orders-taskmanager-1-2   1/1     Running            0             4m12s\n")
    lines, _ = records_of(pods, "pods.txt")
    assert lines[1].startswith("WARN  kubernetes.pod [] - Pod orders-taskmanager-1-1 (taskmanager) STATUS "
                               "CrashLoopBackOff (READY 0/1, RESTARTS 5 (42s ago)")
    assert lines[2].startswith("INFO  kubernetes.pod [] - Pod orders-taskmanager-1-2 (taskmanager) STATUS Running")


def test_a_limit_range_refusing_the_jobmanager_names_its_keys(spark):
    primary = _diagnose("jobmanager-limit-range-operator-1.19", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "limit-range-refused")
    assert "JobManager pod payments-7c5d9f8b46-8xk2w" in primary.summary
    assert "maximum memory per Container is 4Gi, the pod asks 6Gi" in primary.summary
    assert "jobmanager.memory.process.size" in primary.patches[0].reason


_CREATED = ("2024-05-02 08:14:12,447 INFO  org.apache.flink.kubernetes.KubernetesResourceManagerDriver  [] - Creating "
            "new TaskManager pod with name orders-taskmanager-1-1 and resource <4096,1.0>.\n")
_REGISTERED = ("2024-05-02 08:14:21,240 INFO  org.apache.flink.runtime.resourcemanager.active.ActiveResourceManager "
               "[] - Worker orders-taskmanager-1-1 is registered.\n")
_KILLED = ("2024-05-02 08:14:31,512 INFO  org.apache.flink.runtime.resourcemanager.active.ActiveResourceManager [] - "
           "Worker orders-taskmanager-1-1 is terminated. Diagnostics: Pod terminated, container termination statuses: "
           "[flink-main-container(exitCode=137, reason=OOMKilled, message=null)], pod status: Failed(reason=null, "
           "message=null)\n")


def _flink_findings(text: str):
    return get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3", file="jobmanager.log"))


def test_flink_own_termination_line_of_a_worker_that_never_registered_is_a_kill_at_start():
    [finding] = _flink_findings(_CREATED + _KILLED)
    assert finding.root_cause.slug == "oomkilled-at-start"
    assert "before the TaskManager registered" in finding.summary
    assert "reason=OOMKilled" in finding.evidence[0].text


def test_a_worker_that_registered_and_was_later_killed_is_not_claimed():
    assert _flink_findings(_CREATED + _REGISTERED + _KILLED) == []


def test_a_termination_line_without_the_pod_creation_in_the_log_is_not_claimed():
    assert _flink_findings(_KILLED) == []  # the log may start after the worker registered


def _table_findings(status: str):
    pods = ("NAME                     READY   STATUS                       RESTARTS      AGE\n"
            f"orders-taskmanager-1-1   0/1     {status:<28} 3 (20s ago)   4m\n")
    lines, _ = records_of(pods, "pods.txt")
    return get_detector(SLUG).detect(incident_from_text("\n".join(lines) + "\n", {}, "1.20.3", file="pods.log"))


def test_the_statuses_of_kubectl_get_pods_name_their_cause():
    assert _table_findings("ErrImagePull")[0].root_cause.slug == "image-pull-failure"
    assert _table_findings("CreateContainerConfigError")[0].root_cause.slug == "configmap-or-secret-missing"
    assert _table_findings("Init:CrashLoopBackOff")[0].root_cause.slug == "crash-loop"
    assert _table_findings("Init:0/1")[0].root_cause.slug == "undetermined"
    assert _table_findings("OOMKilled") == []  # ran or not, the table does not say: container-memory-exceeded's


def _quota_findings(requested: str, used: str, limited: str, version: str):
    text = (_CREATED.replace("orders-taskmanager-1-1", "orders-taskmanager-1-7")
            + "2024-05-02 08:14:12,958 WARN  org.apache.flink.kubernetes.KubernetesResourceManagerDriver  [] - Could "
              "not create pod orders-taskmanager-1-7, exception: java.util.concurrent.CompletionException: "
              "org.apache.flink.kubernetes.shaded.io.fabric8.kubernetes.client.KubernetesClientException: Failure "
              "executing: POST at: https://10.96.0.1/api/v1/namespaces/analytics/pods. Message: pods "
              f"\"orders-taskmanager-1-7\" is forbidden: exceeded quota: team, requested: {requested}, used: {used}, "
              f"limited: {limited}. Received status: Status(apiVersion=v1, code=403).\n")
    config = {"execution.target": "kubernetes-session", "kubernetes.cluster-id": "orders"}
    [finding] = get_detector(SLUG).detect(incident_from_text(text, config, version, file="jobmanager.log"))
    return finding


def test_a_smaller_taskmanager_is_proposed_only_when_it_fits_what_the_quota_has_left():
    cpu = _quota_findings("limits.cpu=2", "limits.cpu=15", "limits.cpu=16", "1.20.3")
    assert [(p.key, p.proposed) for p in cpu.patches if p.target == "flink"] == [("kubernetes.taskmanager.cpu.amount", "1")]
    old = _quota_findings("limits.cpu=2", "limits.cpu=15", "limits.cpu=16", "1.16.3")
    assert [p.key for p in old.patches if p.target == "flink"] == ["kubernetes.taskmanager.cpu"]
    tight = _quota_findings("limits.memory=4Gi", "limits.memory=15Gi", "limits.memory=15616Mi", "1.20.3")
    assert [p.target for p in tight.patches] == ["ops"]  # 256Mi left: no TaskManager worth running fits
    assert "256Mi left of limits.memory" in tight.patches[0].reason
