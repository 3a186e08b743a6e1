"""Kubernetes inputs: a FlinkDeployment (as `kubectl get flinkdeployment NAME -o yaml` prints it, or the manifest
applied) is the configuration of its pods: `spec.flinkConfiguration`, the memory options the operator derives from
the pods' resources, and the release of `spec.flinkVersion`. The shape follows the Flink Kubernetes Operator's own
examples (examples/basic.yaml) and its FlinkConfigBuilder."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
from flink_runbooks.diagnose import ingest
from flink_runbooks.collect.listing import list_inputs
from flink_runbooks.parse.config import ConfigError, flink_resource_kind, parse_flink_resource
from flink_runbooks.parse.kubernetes import records_of

PLANTED = "AKIAPLANTEDFLINKDEP001"
DEPLOYMENT = f"""\
apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata:
  name: orders
  namespace: streaming
spec:
  image: flink:1.18
  flinkVersion: v1_18
  flinkConfiguration:
    taskmanager.numberOfTaskSlots: "2"
    state.backend.type: rocksdb
    s3.access-key: {PLANTED}
  serviceAccount: flink
  jobManager:
    resource:
      memory: "2048m"
      cpu: 1
  taskManager:
    resource:
      memory: "4096m"
      cpu: 2
  job:
    jarURI: local:///opt/flink/usrlib/orders.jar
    parallelism: 4
    upgradeMode: savepoint
status:
  jobStatus:
    state: RUNNING
"""


def test_the_configuration_of_a_flinkdeployment_is_its_flink_configuration_and_resources():
    assert flink_resource_kind(DEPLOYMENT) == "FlinkDeployment"
    entries, version = parse_flink_resource(DEPLOYMENT, "orders.yaml")
    assert version == "1.18"
    assert {k: v for k, v, _ in entries} == {
        "taskmanager.numberOfTaskSlots": "2", "state.backend.type": "rocksdb", "s3.access-key": PLANTED,
        "jobmanager.memory.process.size": "2048m", "taskmanager.memory.process.size": "4096m"}
    assert dict((k, line) for k, _, line in entries)["state.backend.type"] == 11


def test_a_memory_option_set_in_the_configuration_wins_over_the_resources():
    text = DEPLOYMENT.replace('    taskmanager.numberOfTaskSlots: "2"\n',
                              '    taskmanager.numberOfTaskSlots: "2"\n    taskmanager.memory.process.size: 3g\n')
    entries, _ = parse_flink_resource(text, "orders.yaml")
    assert [v for k, v, _ in entries if k == "taskmanager.memory.process.size"] == ["3g"]


def test_a_broken_flinkdeployment_is_named():
    with pytest.raises(ConfigError, match="orders.yaml"):
        parse_flink_resource("kind: FlinkDeployment\nspec: [\n", "orders.yaml")


def test_a_flinkdeployment_in_an_incident_folder_is_read_as_its_configuration(tmp_path):
    (tmp_path / "orders-flinkdeployment.yaml").write_text(DEPLOYMENT)
    (tmp_path / "values.yaml").write_text("replicaCount: 2\n")  # any other YAML stays out
    incident = ingest([str(tmp_path)])
    assert (incident.flink_version, incident.version_source.split(" (")[0]) == ("1.18", "FlinkDeployment spec.flinkVersion")
    assert incident.config.get("taskmanager.memory.process.size") == "4096m"
    source = incident.config.lookup("state.backend.type").source
    assert source.path.endswith("orders-flinkdeployment.yaml") and source.line == 11
    assert incident.config.get("s3.access-key") == "******"
    # its configuration, and its status (the job RUNNING) as records
    assert [(f.path.rsplit("/", 1)[-1], f.kind) for f in incident.inputs] == [
        ("orders-flinkdeployment.yaml", "config"), ("orders-flinkdeployment.yaml", "log")]


def test_no_secret_of_a_flinkdeployment_reaches_the_report(tmp_path):
    (tmp_path / "orders.yaml").write_text(DEPLOYMENT)
    run = subprocess.run([sys.executable, "-m", "flink_runbooks.apps.cli", "diagnose", str(tmp_path / "orders.yaml"),
                          "--format", "json"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and PLANTED not in run.stdout + run.stderr
    assert json.loads(run.stdout)["inputs"]["config_keys"] == 5


# ------------------------------------------------------------------------------------------------ documents as records

KUBERNETES = pathlib.Path(__file__).parent / "kubernetes"


def _records(name: str) -> list[tuple[int, str]]:
    text = (KUBERNETES / name).read_text()
    lines, _ = records_of(text, name)
    assert len(lines) >= text.count("\n")  # the facts stand on the document's own lines
    return [(i + 1, line) for i, line in enumerate(lines) if line.strip()]


def test_core_v1_events_become_records_with_their_time_object_and_count():
    (line, record), (_, normal) = _records("events.json")
    assert line == 25  # the event's uid in events.json
    assert record.startswith("2024-05-01 10:02:11,000 WARN  kubernetes.event [] - Event Warning FailedScheduling "
                             "from default-scheduler on Pod orders-taskmanager-1-3 (taskmanager, namespace streaming) "
                             "(14 times, last at 2024-05-01T10:06:41Z): 0/3 nodes are available: 3 Insufficient memory.")
    assert " INFO  kubernetes.event " in normal


def test_events_k8s_io_v1_events_in_yaml_are_read_too():
    records = [r for _, r in _records("events.yaml")]
    assert "FailedCreate from replicaset-controller on ReplicaSet orders-taskmanager-5f7c9d8b6" in records[0]
    assert "exceeded quota: compute-quota" in records[0]
    assert records[1].startswith("2024-05-01 10:04:05,512 WARN  kubernetes.event [] - Event Warning BackOff from kubelet "
                                 "on Pod orders-taskmanager-7d9f8c6b5-q2x8z (taskmanager, namespace streaming) (6 times")


def test_a_pod_in_crashloop_names_its_last_termination_limit_and_wait():
    records = dict(_records("pod-taskmanager-crashloop.json"))
    killed = next(r for r in records.values() if "OOMKilled" in r)
    assert killed.startswith("2024-05-01 10:03:58,000 WARN  kubernetes.pod [] - Pod orders-taskmanager-7d9f8c6b5-q2x8z "
                             "(taskmanager, namespace streaming) container flink-main-container last state Terminated: "
                             "Reason: OOMKilled, Exit Code: 137")
    assert "      memory:  4Gi" in records.values()
    assert any("waiting: Reason: CrashLoopBackOff, Restart Count: 3" in r for r in records.values())
    assert not any("hunter2" in r or "KAFKA_PASSWORD" in r for r in records.values())


def test_describe_pod_events_table_and_state_blocks():
    [(line, record)] = _records("describe-pod-pending.txt")
    assert line == 47 and "Event Warning FailedScheduling from default-scheduler on Pod orders-taskmanager-1-3 " \
                          "(taskmanager, namespace streaming) (age 4m30s (x14 over 9m)): 0/3 nodes" in record


def test_the_status_of_a_flinkdeployment_becomes_records():
    records = [r for _, r in _records("flinkdeployment-failed.yaml")]
    assert any(r.startswith("2024-05-01 10:07:10,000 ERROR kubernetes.flinkdeployment [] - FlinkDeployment orders "
                            "(namespace streaming): error: org.apache.flink.kubernetes.operator.exception."
                            "ReconciliationException: org.apache.flink.runtime.jobmanager.scheduler."
                            "NoResourceAvailableException: Could not acquire the minimum required resources.")
               for r in records)
    assert any("WARN  kubernetes.flinkdeployment [] - FlinkDeployment orders (namespace streaming): job "
               "orders-enrichment 4f1c0b7e2a9d8c6b5a4f3e2d1c0b9a8f status RESTARTING" in r for r in records)


def test_documents_in_a_folder_are_diagnosed_and_evidence_points_at_them(tmp_path):
    for name in ("pod-taskmanager-crashloop.json", "flinkdeployment-failed.yaml"):
        (tmp_path / name).write_text((KUBERNETES / name).read_text())
    incident = ingest([str(tmp_path)])
    kill = next(ev for ev in incident.events if "OOMKilled" in ev.message)
    assert (kill.file, kill.line, kill.logger) == (str(tmp_path / "pod-taskmanager-crashloop.json"), 82, "kubernetes.pod")
    assert incident.config.get("taskmanager.memory.process.size") == "4096m"
    run = subprocess.run([sys.executable, "-m", "flink_runbooks.apps.cli", "diagnose", str(tmp_path), "--format",
                          "json"], capture_output=True, text=True, timeout=120)
    report = json.loads(run.stdout)
    primary = report["findings"][0]
    assert (run.returncode, primary["runbook"]) == (1, "container-memory-exceeded")
    assert "hunter2" not in run.stdout


def test_scheduling_refused_for_taskmanagers_is_no_resource_available_naming_the_reason(tmp_path):
    (tmp_path / "describe.txt").write_text((KUBERNETES / "describe-pod-pending.txt").read_text())
    (tmp_path / "events.yaml").write_text((KUBERNETES / "events.yaml").read_text())
    run = subprocess.run([sys.executable, "-m", "flink_runbooks.apps.cli", "diagnose", str(tmp_path), "--format",
                          "json"], capture_output=True, text=True, timeout=120)
    finding = next(f for f in json.loads(run.stdout)["findings"] if f["runbook"] == "no-resource-available")
    assert finding["root_cause"]["slug"] == "workers-not-provisioned"
    assert "no node had room (Insufficient memory)" in finding["summary"]
    assert "ResourceQuota compute-quota" in finding["summary"]


def test_a_document_over_the_cap_is_refused_with_a_warning(tmp_path, monkeypatch):
    from flink_runbooks.parse import kubernetes

    monkeypatch.setattr(kubernetes, "MAX_DOCUMENT_BYTES", 1024)
    (tmp_path / "events.json").write_text((KUBERNETES / "events.json").read_text())
    (tmp_path / "jobmanager.log").write_text("2024-05-01 10:00:00,000 INFO  x.Y [] - up\n")
    listed = list_inputs(None, [str(tmp_path)])
    assert [uri.rsplit("/", 1)[-1] for uri, _ in listed.logs] == ["jobmanager.log"]
    assert "events.json looks like a Kubernetes document of 0.0 MiB, more than the 0 MiB" in listed.warnings[0]


def test_broken_documents_and_plain_logs_are_not_mistaken(tmp_path):
    (tmp_path / "events.json").write_text('{"apiVersion": "v1", "kind": "List", "items": [\n')
    (tmp_path / "taskmanager-1-1-previous").write_text("2024-05-01T10:00:00.123456789Z 2024-05-01 10:00:00,123 "
                                                        "INFO  org.apache.flink.runtime.taskexecutor.TaskExecutor [] - x\n")
    listed = list_inputs(None, [str(tmp_path)])
    assert [uri.rsplit("/", 1)[-1] for uri, _ in listed.logs] == ["taskmanager-1-1-previous"]
    assert any("broken JSON in" in w and "events.json" in w for w in listed.warnings)


def test_kubectl_get_events_wide_and_all_namespaces_tables_are_read():
    header = ("NAMESPACE   LAST SEEN   TYPE      REASON   OBJECT                     SUBOBJECT                               "
              "SOURCE    MESSAGE                                    FIRST SEEN   COUNT   NAME")
    row = ("streaming   8s          Warning   Failed   pod/orders-taskmanager-1-1   spec.containers{flink-main-container}   "
           "kubelet   Error: ImagePullBackOff                    4m10s        17      orders-taskmanager-1-1.17cb")
    lines, _ = records_of(f"$ kubectl get events -A -o wide\n{header}\n{row}\n", "events.txt")
    assert lines[2] == ("WARN  kubernetes.event [] - Event Warning Failed from kubelet on Pod orders-taskmanager-1-1 "
                        "(taskmanager, namespace streaming) (last seen 8s ago, 17 times, first seen 4m10s ago): "
                        "Error: ImagePullBackOff")


def test_describe_events_are_dated_from_the_start_time_and_the_scheduled_age():
    text = (KUBERNETES / "describe-pod-pending.txt").read_text()
    assert "Start Time:" not in text  # a Pending pod has none: its events stay undated (the fixture's test above)
    dated = text.replace("Node:             <none>\n", "Node:             <none>\nStart Time:       Wed, 01 May 2024 "
                                                        "10:00:00 +0000\n").replace(
        "  Warning  FailedScheduling", "  Normal   Scheduled         10m                  default-scheduler  "
                                       "Successfully assigned streaming/orders-taskmanager-1-3 to node-1\n"
                                       "  Warning  FailedScheduling")
    records = [line for line in records_of(dated, "describe.txt")[0] if line]
    # printed at 10:00:00 + 10m; the FailedScheduling first happened 9m before that
    assert records[0].startswith("2024-05-01 10:00:00,000 INFO  kubernetes.event [] - Event Normal Scheduled")
    assert records[1].startswith("2024-05-01 10:01:00,000 WARN  kubernetes.event [] - Event Warning FailedScheduling")
