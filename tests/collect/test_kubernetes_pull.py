"""`pull k8s://NAMESPACE/NAME` against a loopback HTTP server that answers the Kubernetes API's paths with the
documented shapes (tests/collect/kubernetes/): the official client really makes its requests."""
from __future__ import annotations

import http.server
import json
import pathlib
import subprocess
import sys

import pytest
import yaml

from support import loopback_server

KUBERNETES = pathlib.Path(__file__).parent / "kubernetes"
POD = json.loads((KUBERNETES / "pod-taskmanager-crashloop.json").read_text())
POD_NAME = POD["metadata"]["name"]
EVENTS = yaml.safe_load((KUBERNETES / "events.yaml").read_text())
DEPLOYMENT = yaml.safe_load((KUBERNETES / "flinkdeployment-failed.yaml").read_text())
DEPLOYMENT["spec"]["flinkConfiguration"]["s3.secret-key"] = "planted-secret-value"
LOG = "2024-05-01 10:03:50,001 INFO  org.apache.flink.runtime.taskexecutor.TaskExecutor [] - password=hunter3\n"


def _api_server(answers: dict[str, tuple[int, object]]):
    """A loopback API server answering each path with its recorded status and document (404 otherwise)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the http.server API)
            path = self.path.split("?")[0]
            query = self.path.partition("?")[2]
            status, body = answers.get(path + ("?previous" if "previous=true" in query else ""),
                                       (404, {"kind": "Status", "code": 404, "reason": "NotFound"}))
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    return loopback_server(Handler)


def _kubeconfig(tmp_path, port: int) -> pathlib.Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "reader", "namespace": "streaming"}}],
        "users": [{"name": "reader", "user": {"token": "planted-token-value"}}]}))
    return path


def _answers(events_status: int = 200) -> dict:
    ns = "/api/v1/namespaces/streaming"
    return {
        "/apis/flink.apache.org/v1beta1/namespaces/streaming/flinkdeployments/orders": (200, DEPLOYMENT),
        f"{ns}/pods": (200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [POD]}),
        f"{ns}/events": (events_status, {"apiVersion": "v1", "kind": "EventList", "metadata": {},
                                         "items": [{**e, "apiVersion": "v1", "involvedObject": e["regarding"],
                                                    "message": e["note"]} for e in EVENTS["items"]]}
                         if events_status == 200 else {"kind": "Status", "code": 403, "reason": "Forbidden"}),
        f"{ns}/pods/{POD_NAME}/log": (200, LOG),
        f"{ns}/pods/{POD_NAME}/log?previous": (200, LOG),
    }


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "flink_runbooks.apps.cli", *args], capture_output=True, text=True,
                          timeout=180, env=env)


def test_a_flinkdeployment_is_pulled_into_a_bundle_that_diagnoses(tmp_path):
    with _api_server(_answers()) as server:
        config = _kubeconfig(tmp_path, server.server_port)
        run = _cli("pull", "k8s://streaming/orders", "--out", str(tmp_path / "bundle"), "--kubeconfig", str(config))
        assert run.returncode == 0, run.stderr
        manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
        assert (manifest["source"], manifest["context"], manifest["partial"]) == ("k8s://streaming/orders", "lab", False)
        assert all(r["status"] == 200 for r in manifest["requests"])
        assert sorted(manifest["logs"]) == [f"log/{POD_NAME}/flink-main-container-previous.log",
                                            f"log/{POD_NAME}/flink-main-container.log"]
        written = "".join(p.read_text() for p in (tmp_path / "bundle").rglob("*") if p.is_file())
        for secret in ("hunter2-planted-secret", "hunter3", "planted-secret-value", "planted-token-value"):
            assert secret not in written
        report = json.loads(_cli("diagnose", str(tmp_path / "bundle"), "--format", "json").stdout)
        # the bundle holds two faults: the crash-looping TaskManager killed for memory after it ran, and the quota
        # refusing a pod of another ReplicaSet earlier (pod-start-failure, named first by time)
        found = {f["runbook"]: f["root_cause"]["slug"] for f in report["findings"]}
        assert found["container-memory-exceeded"] == "jvm-overhead-too-small"
        assert found["pod-start-failure"] == "resource-quota-exceeded"


def test_an_unknown_object_is_one_line_and_exit_2(tmp_path):
    with _api_server({"/api/v1/namespaces/streaming/pods": (200, {"apiVersion": "v1", "kind": "PodList",
                                                                   "metadata": {}, "items": []})}) as server:
        run = _cli("pull", "k8s://streaming/nothing", "--out", str(tmp_path / "b"), "--kubeconfig",
                   str(_kubeconfig(tmp_path, server.server_port)))
    assert run.returncode == 2
    assert run.stderr.strip() == "flink-runbooks: no FlinkDeployment, FlinkSessionJob or pod named nothing in namespace streaming " \
                                 "(k8s://streaming/nothing, context lab)"


def test_forbidden_events_are_named_and_the_rest_is_pulled(tmp_path):
    with _api_server(_answers(events_status=403)) as server:
        run = _cli("pull", "k8s://streaming/orders", "--out", str(tmp_path / "b"), "--kubeconfig",
                   str(_kubeconfig(tmp_path, server.server_port)))
    assert run.returncode == 0
    assert "HTTP 403" in run.stderr and "forbidden" in run.stderr
    assert (tmp_path / "b" / "log" / POD_NAME / "flink-main-container.log").is_file()


def test_a_server_that_goes_away_leaves_a_partial_bundle(tmp_path):
    from flink_runbooks.collect import kubernetes

    real = kubernetes._Session.call
    with _api_server(_answers()) as server:
        def call(self, path, fn, *args, **kwargs):
            if "/log" in path:  # the server goes away before the first log is read
                server.shutdown()
                server.server_close()
            return real(self, path, fn, *args, **kwargs)

        kubernetes._Session.call = call
        try:
            report = kubernetes.pull("k8s://streaming/orders", tmp_path / "b",
                                     kubeconfig=str(_kubeconfig(tmp_path, server.server_port)), timeout=3)
        finally:
            kubernetes._Session.call = real
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert report.partial and manifest["partial"]
    assert (tmp_path / "b" / "kubernetes" / "pods.json").is_file()
    assert any(r.get("error") for r in manifest["requests"])


def test_no_kubeconfig_is_one_line_and_exit_2(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": ":".join(sys.path)}
    run = _cli("pull", "k8s://streaming/orders", "--out", str(tmp_path / "b"), env=env)
    assert run.returncode == 2
    assert run.stderr.strip().startswith("flink-runbooks: no kubeconfig: ") and len(run.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("url", ["k8s://Streaming/orders", "k8s://streaming"])
def test_a_malformed_k8s_url_is_refused(tmp_path, url):
    run = _cli("pull", url, "--out", str(tmp_path / "b"), "--kubeconfig", str(tmp_path / "none"))
    assert run.returncode == 2 and "k8s://NAMESPACE/NAME" in run.stderr


def test_a_log_over_the_cap_keeps_its_newest_lines_redacted(tmp_path):
    from flink_runbooks.collect import kubernetes

    long_log = "".join(f"2024-05-01 10:03:{i % 60:02d},001 INFO  org.apache.flink.runtime.taskexecutor.TaskExecutor "
                       f"[] - line {i} password=hunter3\n" for i in range(20_000))
    answers = _answers()
    answers[f"/api/v1/namespaces/streaming/pods/{POD_NAME}/log"] = (200, long_log)
    with _api_server(answers) as server:
        report = kubernetes.pull("k8s://streaming/orders", tmp_path / "bundle",
                                 kubeconfig=str(_kubeconfig(tmp_path, server.server_port)), max_log_bytes=64 << 10)
    kept = (tmp_path / "bundle" / "log" / POD_NAME / "flink-main-container.log").read_text()
    assert len(kept.encode()) <= 64 << 10
    assert kept.splitlines()[0].startswith("2024-05-01") and kept.splitlines()[-1].split(" - ")[1].startswith("line 19999")
    assert "hunter3" not in kept
    assert any("flink-main-container.log" in w and "only the newest" in w for w in report.warnings)
