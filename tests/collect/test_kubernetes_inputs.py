"""Kubernetes inputs: a FlinkDeployment (as `kubectl get flinkdeployment NAME -o yaml` prints it, or the manifest
applied) is the configuration of its pods: `spec.flinkConfiguration`, the memory options the operator derives from
the pods' resources, and the release of `spec.flinkVersion`. The shape follows the Flink Kubernetes Operator's own
examples (examples/basic.yaml) and its FlinkConfigBuilder."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from flink_runbooks.diagnose import ingest
from flink_runbooks.parse.config import ConfigError, flink_resource_kind, parse_flink_resource

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
    assert [f.path.rsplit("/", 1)[-1] for f in incident.inputs] == ["orders-flinkdeployment.yaml"]


def test_no_secret_of_a_flinkdeployment_reaches_the_report(tmp_path):
    (tmp_path / "orders.yaml").write_text(DEPLOYMENT)
    run = subprocess.run([sys.executable, "-m", "flink_runbooks.apps.cli", "diagnose", str(tmp_path / "orders.yaml"),
                          "--format", "json"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and PLANTED not in run.stdout + run.stderr
    assert json.loads(run.stdout)["inputs"]["config_keys"] == 5
