"""Alerting rules from the catalogue: valid for Prometheus (its own promtool checks and unit-tests them), each rule
points to a runbook of the catalogue and carries the annotation serve pulls the cluster from."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import yaml
from flink_runbooks.apps.alert_rules import render, rules
from flink_runbooks.catalogue import slugs

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
SITE = "https://runbooks.example"


def _write_rules(tmp_path) -> str:
    path = tmp_path / "flink.rules.yml"
    path.write_text(render(site_url=SITE, rest_url="http://orders-jm:8081"))
    return str(path)


def test_every_rule_points_to_a_runbook_of_the_catalogue():
    assert {r.runbook for r in rules()} <= set(slugs())


def test_prometheus_accepts_the_rules(tmp_path):
    check = subprocess.run([PROMTOOL, "check", "rules", _write_rules(tmp_path)], capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(rules())} rules found" in check.stdout


def test_the_rules_fire_on_flinks_metrics_with_their_runbook_and_the_cluster_to_pull(tmp_path):
    """promtool's unit tests: a job that restarts and a TaskManager whose metaspace fills raise their alerts."""
    rules_file = _write_rules(tmp_path)
    labels = 'job_id="0123", job_name="orders-enrichment", instance="jm:9249"'
    tm = 'tm_id="tm-1", instance="tm-1:9249"'
    (tmp_path / "test.yml").write_text(yaml.safe_dump({
        "rule_files": [rules_file],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                {"series": f"flink_jobmanager_job_numRestarts{{{labels}}}", "values": "0 0 1 2 3 4 5 6"},
                {"series": f"flink_taskmanager_Status_JVM_Memory_Metaspace_Used{{{tm}}}", "values": "250x20"},
                {"series": f"flink_taskmanager_Status_JVM_Memory_Metaspace_Max{{{tm}}}", "values": "256x20"},
            ],
            "alert_rule_test": [
                {"eval_time": "6m", "alertname": "FlinkJobRestarting", "exp_alerts": [{
                    "exp_labels": {"severity": "critical", "job_id": "0123", "job_name": "orders-enrichment",
                                   "instance": "jm:9249"},
                    "exp_annotations": {
                        "summary": "Flink job orders-enrichment restarted in the last 5 minutes",
                        "runbook": "restart-strategy-exhausted",
                        "runbook_url": f"{SITE}/runbooks/restart-strategy-exhausted.html",
                        "flink_rest_url": "http://orders-jm:8081"}}]},
                {"eval_time": "15m", "alertname": "FlinkMetaspaceNearMax", "exp_alerts": [{
                    "exp_labels": {"severity": "warning", "tm_id": "tm-1", "instance": "tm-1:9249"},
                    "exp_annotations": {
                        "summary": "TaskManager tm-1 uses over 90 % of its metaspace", "runbook": "oom-metaspace",
                        "runbook_url": f"{SITE}/runbooks/oom-metaspace.html",
                        "flink_rest_url": "http://orders-jm:8081"}}]},
                {"eval_time": "15m", "alertname": "FlinkHeapNearMax", "exp_alerts": []},
            ],
        }],
    }))
    test = subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / "test.yml")], capture_output=True, text=True,
                          timeout=60)
    assert test.returncode == 0, test.stdout + test.stderr


def test_the_prometheus_operator_resource_holds_the_same_rules():
    doc = yaml.safe_load(render("prometheusrule", site_url=SITE))
    assert doc["kind"] == "PrometheusRule" and doc["apiVersion"] == "monitoring.coreos.com/v1"
    assert doc["spec"] == yaml.safe_load(render(site_url=SITE))


def test_for_makes_every_rule_fire_after_the_same_hold_and_prometheus_accepts_it(tmp_path):
    run = subprocess.run([sys.executable, "-m", "flink_runbooks.apps.cli", "alert-rules", "--for", "5s"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    held = {rule["alert"]: rule["for"] for rule in yaml.safe_load(run.stdout)["groups"][0]["rules"]}
    assert held == {r.alert: "5s" for r in rules()}
    (tmp_path / "held.rules.yml").write_text(run.stdout)
    check = subprocess.run([PROMTOOL, "check", "rules", str(tmp_path / "held.rules.yml")], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("args", [["--format", "yaml"], ["--checkpoint-timeout-ms", "soon"], ["--for", "5"],
                                  ["--for", "soon"]])
def test_a_bad_option_is_one_line_and_exit_2(args):
    run = subprocess.run([sys.executable, "-m", "flink_runbooks.apps.cli", "alert-rules", *args], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
