"""Detector pyflink-udf-failure: the Python traceback inside a Java trace names the job's file, line and exception,
a module missing on the workers, or an interpreter that is missing or lacks PyFlink."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_files, incident_from_text, line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors

SLUG = "pyflink-udf-failure"
TASK = "Source: orders[1] -> PythonCalc[2] -> Sink: prices[3] (1/1)#0 (24bdf9cbe05e827578907603b5c7cbab_cbc357ccb763df2852fee8c4fc7d55f2_0_0)"
SITE = "/usr/local/lib/python3.10/site-packages"


def _harness_failure(traceback: list[str], exception: str) -> str:
    return "\n".join([
        line("00:44:00,660", f"{TASK} switched from RUNNING to FAILED with failure cause:", level="WARN",
             logger="org.apache.flink.runtime.taskmanager.Task"),
        "java.lang.RuntimeException: Failed to close remote bundle",
        "\tat org.apache.flink.streaming.api.runners.python.beam.BeamPythonFunctionRunner.finishBundle(BeamPythonFunctionRunner.java:444)",
        "Caused by: java.lang.RuntimeException: Error received from SDK harness for instruction 3: Traceback (most recent call last):",
        f'  File "{SITE}/apache_beam/runners/worker/sdk_worker.py", line 295, in _execute',
        "    response = task()",
        *traceback,
        exception,
        "",
        "\tat org.apache.beam.runners.fnexecution.control.FnApiControlClient$ResponseStreamObserver.onNext(FnApiControlClient.java:180)",
    ])


def _detect(text: str, config: dict | None = None, version: str = "1.20.3"):
    return get_detector(SLUG).detect(incident_from_text(text, config or {}, version, file="taskmanager.log"))


@pytest.mark.parametrize("name, mode", [("udf-raises-process-1.20.3", "process"), ("udf-raises-thread-1.20.3", "thread"),
                                        ("udf-raises-process-2.3.0", "process"), ("udf-raises-thread-2.3.0", "thread")])
def test_genuine_function_raising_names_the_jobs_file_line_and_exception(spark, name, mode):
    primary = run_detectors(ingest([str(example(SLUG, name))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "user-function-raised")
    d = primary.details
    assert d["file"].endswith("/job/orders_job.py") and d["line"] == 28 and d["function"] == "unit_price"
    assert (d["exception"], d["message"], d["execution_mode"]) == ("ZeroDivisionError", "float division by zero", mode)
    assert "ZeroDivisionError: float division by zero in unit_price" in primary.summary
    assert "ended 3 attempts" in primary.summary
    [patch] = primary.patches
    assert patch.target == "code" and "except ZeroDivisionError" in patch.snippet and "unit_price" in patch.reason


def test_genuine_process_mode_failure_shows_the_code_line(spark):
    primary = run_detectors(ingest([str(example(SLUG, "udf-raises-process-1.20.3"))], spark)).primary
    assert primary.details["code"] == "return round_price(amount / quantity)"
    assert "(`return round_price(amount / quantity)`)" in primary.summary


@pytest.mark.parametrize("name", ["module-missing-1.20.3", "module-missing-2.3.0"])
def test_genuine_module_not_shipped_proposes_python_files(spark, name):
    primary = run_detectors(ingest([str(example(SLUG, name))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "module-missing-on-workers")
    assert primary.details["missing_module"] == "order_rules"
    assert "while cloudpickle loaded the function" in primary.summary
    assert [(p.key, p.proposed) for p in primary.patches] == [("python.files", "order_rules.py"),
                                                              ("python.requirements", "requirements.txt")]


def test_genuine_missing_interpreter_proposes_the_clients(spark):
    primary = run_detectors(ingest([str(example(SLUG, "bad-python-executable-1.20.3"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "python-interpreter-missing")
    assert primary.details["program"] == "/usr/local/bin/python3.8"
    assert "ended 3 attempts" in primary.summary  # one per attempt, not one per log record of it
    [patch] = primary.patches
    assert (patch.key, patch.proposed, patch.current) == ("python.executable", "/opt/pyflink-venv/bin/python",
                                                          "/usr/local/bin/python3.8")


def test_genuine_thread_mode_without_the_virtualenv_on_the_path(spark):
    primary = run_detectors(ingest([str(example(SLUG, "thread-mode-venv-not-on-path-1.20.3"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "interpreter-without-pyflink")
    assert primary.details["missing_module"] == "pemja" and primary.details["execution_mode"] == "thread"
    [patch] = primary.patches
    assert patch.key == "python.pythonpath" and patch.proposed.startswith("/opt/pyflink-venv/lib/python3.")


def test_genuine_job_that_runs_is_not_claimed(spark):
    diagnosis = run_detectors(ingest([str(example(SLUG, "near-miss-udf-ok-1.20.3"))], spark))
    assert diagnosis.primary is None
    assert all(f.runbook != SLUG for f in diagnosis.findings)


def test_the_deepest_frame_of_the_jobs_code_is_named_not_the_library_it_called():
    text = _harness_failure([
        '  File "/opt/jobs/enrich/enrich_orders.py", line 57, in enrich',
        "    order = parse_order(raw)",
        '  File "/opt/jobs/enrich/enrich_orders.py", line 41, in parse_order',
        "    payload = json.loads(raw)",
        '  File "/usr/local/lib/python3.10/json/__init__.py", line 346, in loads',
        "    return _default_decoder.decode(s)",
        f'  File "{SITE}/simplejson/decoder.py", line 337, in decode',
        "    obj, end = self.raw_decode(s, idx=_w(s, 0).end())",
    ], "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)")
    [f] = _detect(text)
    assert f.root_cause.slug == "user-function-raised"
    assert (f.details["file"], f.details["line"], f.details["function"]) == ("/opt/jobs/enrich/enrich_orders.py", 41,
                                                                             "parse_order")
    assert f.details["exception"] == "json.decoder.JSONDecodeError"
    assert f.details["task"].startswith("Source: orders[1] -> PythonCalc[2]")


def test_a_module_of_pyflink_itself_missing_is_the_interpreter_and_a_virtualenv_is_shipped():
    text = _harness_failure([
        f'  File "{SITE}/pyflink/fn_execution/pickle.py", line 29, in loads',
        "    return cloudpickle.loads(payload)",
    ], "ModuleNotFoundError: No module named 'cloudpickle'")
    [f] = _detect(text, {"python.executable": "/usr/bin/python3"})
    assert f.root_cause.slug == "interpreter-without-pyflink"
    assert "apache-flink==" in f.summary
    assert [(p.key, p.proposed) for p in f.patches] == [("python.archives", "venv.zip"),
                                                        ("python.executable", "venv.zip/venv/bin/python")]


def test_an_interpreter_the_taskmanager_may_not_run():
    text = "\n".join([
        line("00:46:37,232", f"{TASK} switched from INITIALIZING to FAILED with failure cause:", level="WARN",
             logger="org.apache.flink.runtime.taskmanager.Task"),
        'java.io.IOException: Cannot run program "/opt/venvs/orders/bin/python": error=13, Permission denied',
        "\tat java.base/java.lang.ProcessBuilder.start(ProcessBuilder.java:1143)",
        "\tat org.apache.flink.python.util.PythonEnvironmentManagerUtils.execute(PythonEnvironmentManagerUtils.java:176)",
    ])
    [f] = _detect(text, {"python.executable": "/opt/venvs/orders/bin/python"})
    assert f.root_cause.slug == "python-interpreter-missing"
    assert "may not run (error=13)" in f.summary


def test_another_program_that_cannot_run_is_not_this_runbook():
    text = 'java.io.IOException: Cannot run program "hadoop": error=2, No such file or directory\n'
    assert _detect(text) == []


def test_pasted_excerpt_names_the_jobs_function(tmp_path):
    inc = incident_from_files(tmp_path, {"ticket.txt": (example(SLUG, "ticket-datastream-keyerror-1.20") /
                                                        "ticket.txt").read_text()}, "1.20.3")
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "user-function-raised")
    assert (primary.details["function"], primary.details["line"], primary.details["exception"]) == (
        "parse_order", 41, "KeyError")
    assert primary.confidence <= 0.75 and "From an excerpt" in primary.summary


def test_a_traceback_cut_before_the_exception_is_undetermined(tmp_path):
    inc = incident_from_files(tmp_path, {"ticket.txt": (example(SLUG, "ticket-cut-before-exception-1.18") /
                                                        "ticket.txt").read_text()}, "1.18.1")
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "undetermined")
    assert "Collect next" in primary.summary
    assert [p.key for p in primary.patches] == ["collect the Python traceback"]


def test_genuine_job_script_failing_on_the_client_is_not_a_workers_failure(spark):
    # the same ModuleNotFoundError, printed by the client's Python process before "Python process exits with code: 1"
    diagnosis = run_detectors(ingest([str(example(SLUG, "near-miss-client-module-missing-1.20.3"))], spark))
    assert diagnosis.primary is None


def test_a_workers_traceback_pasted_alone_is_read_and_a_clients_is_not(tmp_path):
    worker = "\n".join([
        "Traceback (most recent call last):",
        f'  File "{SITE}/apache_beam/runners/worker/sdk_worker.py", line 295, in _execute',
        "    response = task()",
        f'  File "{SITE}/pyflink/fn_execution/table/operations.py", line 102, in process_element',
        "    return self.func(value)",
        '  File "/opt/jobs/prices.py", line 12, in unit_price',
        "    return amount / quantity",
        "ZeroDivisionError: division by zero",
    ])
    primary = run_detectors(incident_from_files(tmp_path / "worker", {"paste.txt": worker + "\n"}, "1.20.3")).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "user-function-raised")
    assert (primary.details["file"], primary.details["line"]) == ("/opt/jobs/prices.py", 12)
    client = "\n".join([
        "Traceback (most recent call last):",
        '  File "/opt/jobs/prices.py", line 3, in <module>',
        "    from order_rules import round_price",
        "ModuleNotFoundError: No module named 'order_rules'",
    ])
    findings = run_detectors(incident_from_files(tmp_path / "client", {"paste.txt": client + "\n"}, "1.20.3")).findings
    assert all(f.runbook != SLUG for f in findings)


def test_genuine_worker_killed_without_a_traceback_is_undetermined_and_says_where_to_look(spark):
    primary = run_detectors(ingest([str(example(SLUG, "worker-killed-1.20.3"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "undetermined")
    assert "CANCELLED: client cancelled" in primary.summary and "OOM killer" in primary.summary
    [patch] = primary.patches
    assert "dmesg" in patch.snippet
