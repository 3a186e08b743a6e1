"""Incident automation: triage reports, patches, executed notebooks, failure modes, and the webhook server."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import sys
import subprocess
import threading
import time
import uuid
import urllib.error
import urllib.request

import pytest

from support import processes_marked
from corpus import ROOT, example
from flink_runbooks.apps import cli
from flink_runbooks.apps.triage import TriageError, triage

SLUG = "checkpoint-tolerable-failure-threshold"
TEST_NOTEBOOKS = ROOT / "tests" / "notebooks"


@pytest.mark.notebook
def test_triage_with_a_finding_writes_report_patches_and_executed_notebook(spark, tmp_path):
    src = example(SLUG, "storage-permission-denied")
    before = sorted((p, p.stat().st_mtime_ns) for p in src.rglob("*"))
    report = triage([str(src)], tmp_path / "out", spark=spark, runbooks=[SLUG])
    out = tmp_path / "out"
    assert report.exit_code == 1
    doc = json.loads((out / "report.json").read_text())
    assert doc["findings"][0]["runbook"] == SLUG and doc["findings"][0]["primary"]
    [run] = doc["runbooks"]
    assert run["status"] == "ok" and run["error"] is None and run["duration_s"] > 0
    assert pathlib.Path(run["notebook"]).exists() and pathlib.Path(run["html"]).exists()
    html = pathlib.Path(run["html"]).read_text()
    assert "storage-unwritable" in html and "<img" in html
    assert "open_runbook(" not in html, "setup code is hidden in the HTML"
    # The fix is to make the store writable (an action, no configuration file); retention, which lets the job
    # resume, is the restart-strategy finding's hardening. A store that refuses writes gets no tolerance.
    assert not (out / "patches" / "flink-conf.yaml.diff").exists()
    diff = (out / "patches" / "hardening" / "flink-conf.yaml.diff").read_text()
    assert "tolerable-failed-checkpoints" not in diff
    assert "+execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION" in diff
    assert "flinkConfiguration" in (out / "patches" / "hardening" / "flinkdeployment-patch.yaml").read_text()
    md = (out / "report.md").read_text()
    assert md.index("Primary") < md.index("Evidence") and "flink-flink-standalonesession-0-vm.log:412" in md
    assert sorted((p, p.stat().st_mtime_ns) for p in src.rglob("*")) == before, "inputs untouched"
    assert {p.name for p in out.iterdir()} == {"incident", "runbooks", "patches", "report.json", "report.md"}


def test_triage_of_a_healthy_incident_runs_nothing(spark, tmp_path):
    report = triage([str(example(SLUG, "healthy"))], tmp_path / "out", spark=spark)
    assert report.exit_code == 0 and report.runbooks == []
    assert not (tmp_path / "out" / "patches").exists()
    assert "No known failure found." in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.notebook
def test_failing_hanging_and_dying_runbooks_are_reported_while_others_finish(spark, tmp_path):
    report = triage([str(example(SLUG, "storage-permission-denied"))], tmp_path / "out", spark=spark,
                    runbooks=["succeeds", "raises", "hangs", "kernel-dies"], runbooks_dir=TEST_NOTEBOOKS,
                    # The kernels read the saved incident (no Spark); four starting at once on two cores still
                    # need some room before the hanging one is given up.
                    timeout_s=40, jobs=4)
    status = {r.runbook: r for r in report.runbooks}
    assert status["succeeds"].status == "ok"
    assert status["raises"].status == "failed"
    assert "RuntimeError: the runbook broke on purpose" in status["raises"].error
    assert status["raises"].error.startswith("cell ")
    assert status["hangs"].status == "timed out"
    assert status["kernel-dies"].status == "failed"
    assert report.exit_code == 3
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert {r["runbook"]: r["status"] for r in doc["runbooks"]}["hangs"] == "timed out"
    assert doc["findings"], "findings are still reported"


def test_existing_output_dir_is_refused_unless_forced(spark, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(TriageError, match="not empty"):
        triage([str(example(SLUG, "healthy"))], out, spark=spark)
    triage([str(example(SLUG, "healthy"))], out, spark=spark, force=True)
    assert (out / "keep.txt").read_text() == "mine" and (out / "report.json").exists()


def test_output_inside_the_inputs_is_refused(tmp_path):
    (tmp_path / "logs").mkdir()
    with pytest.raises(TriageError, match="inside the input"):
        triage([str(tmp_path / "logs")], tmp_path / "logs" / "out")


def test_cli_triage_bad_paths_and_json_report(spark, capsys, tmp_path):
    assert cli.main(["triage", str(tmp_path / "missing"), "--out", str(tmp_path / "o1")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    code = cli.main(["triage", str(example(SLUG, "healthy")), "--out", str(tmp_path / "o2"), "--format", "json"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["runbooks"] == []


# -- the webhook server ---------------------------------------------------------------------------------------

def _alert(location: str | None, version: str = "4") -> dict:
    annotations = {"summary": "Flink job failing"} | ({"flink_logs": location} if location else {})
    return {"version": version, "groupKey": "{}:{alertname=\"FlinkJobFailing\"}", "status": "firing",
            "receiver": "flink-runbooks", "groupLabels": {"alertname": "FlinkJobFailing"},
            "commonLabels": {"alertname": "FlinkJobFailing"}, "commonAnnotations": {}, "externalURL": "http://am:9093",
            "truncatedAlerts": 0,
            "alerts": [{"status": "firing", "labels": {"alertname": "FlinkJobFailing", "job": "orders"},
                        "annotations": annotations, "startsAt": "2026-11-22T02:54:11Z",
                        "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "http://prom/graph", "fingerprint": "abc"}]}


def _request(url: str, payload: dict | str | None = None) -> tuple[int, dict]:
    data = None if payload is None else (payload if isinstance(payload, str) else json.dumps(payload)).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                 method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture
def server(spark, tmp_path):
    import uvicorn

    from flink_runbooks.apps.serve import create_app

    logs_root = tmp_path / "logs"
    (logs_root / "incidents").mkdir(parents=True)
    for name in ("healthy", "storage-permission-denied"):
        target = logs_root / "incidents" / name
        shutil.copytree(example(SLUG, name), target)
    (logs_root / "escape").symlink_to(tmp_path, target_is_directory=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(str(logs_root), str(tmp_path / "runs"), spark=spark, timeout_s=300)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", tmp_path
    srv.should_exit = True
    thread.join(timeout=10)


def _wait(base: str, run: str, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, doc = _request(f"{base}/runs/{run}")
        assert code == 200
        if doc["status"] not in ("queued", "running"):
            return doc
        time.sleep(0.5)
    raise AssertionError("triage did not finish")


def test_webhook_round_trip_through_the_real_server(server):
    base, tmp = server
    code, doc = _request(f"{base}/alerts", _alert("incidents/healthy"))
    assert code == 202 and doc["status"] == "running"
    done = _wait(base, doc["run"])
    assert done["status"] == "done" and done["exit_code"] == 0
    assert done["report"]["findings"] == []
    assert pathlib.Path(done["out"]).parent == (tmp / "runs").resolve()


@pytest.mark.notebook
def test_a_repeated_alert_for_a_running_incident_joins_its_run_and_the_server_keeps_serving(server):
    base, _tmp = server
    code, first = _request(f"{base}/alerts", _alert("incidents/storage-permission-denied"))
    assert code == 202
    code, second = _request(f"{base}/alerts", _alert("incidents/storage-permission-denied"))
    # acknowledged (Alertmanager would send it again on any other status), with the run already under way
    assert code == 200 and second["run"] == first["run"] and second["repeat"] is True
    done = _wait(base, first["run"])
    assert done["status"] == "done" and done["exit_code"] in (1, 3), done.get("error")
    assert done["report"]["findings"][0]["runbook"] == SLUG
    assert _request(f"{base}/healthz") == (200, {"status": "ok"})


@pytest.mark.parametrize("location,status", [
    ("../outside", 403), ("escape", 403), ("/etc", 403), (".", 403), ("incidents/..", 403), ("incidents/nope", 404),
    (None, 400)])
def test_paths_outside_the_logs_root_and_missing_locations_are_refused(server, location, status):
    base, _tmp = server
    code, doc = _request(f"{base}/alerts", _alert(location))
    assert code == status, doc
    assert doc["detail"]


def test_malformed_payloads_get_a_4xx_with_a_reason(server):
    base, _tmp = server
    assert _request(f"{base}/alerts", "{not json")[0] == 422
    code, doc = _request(f"{base}/alerts", {"status": "firing"})
    assert code == 422 and doc["detail"]
    code, doc = _request(f"{base}/alerts", _alert("incidents/healthy", version="3"))
    assert code == 400 and "version" in doc["detail"]
    assert _request(f"{base}/runs/unknown")[0] == 404


def test_every_file_serve_would_read_is_resolved_under_the_logs_root(tmp_path):
    """Not only the named folder: a link inside it that leads out of the root refuses the whole alert."""
    from flink_runbooks.apps.serve import PathRejected, resolve_incident

    root, outside = tmp_path / "logs", tmp_path / "outside"
    (root / "a" / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "shadow.log").write_text("x\n")
    (root / "a" / "jobmanager.log").write_text("x\n")
    (root / "common").mkdir()
    (root / "common" / "common.log").write_text("x\n")
    (root / "a" / "sub" / "common.log").symlink_to(root / "common" / "common.log")  # inside the root: fine
    (root / "a" / "sub" / "loop").symlink_to(root / "a", target_is_directory=True)  # a loop ends the walk
    assert resolve_incident(root, "a") == (root / "a").resolve()
    (root / "a" / "sub" / "shadow.log").symlink_to(outside / "shadow.log")
    with pytest.raises(PathRejected) as refused:
        resolve_incident(root, "a")
    assert refused.value.status == 403 and "sub/shadow.log" in refused.value.reason
    (root / "a" / "sub" / "shadow.log").unlink()
    (root / "b").mkdir()
    (root / "b" / "etc").symlink_to("/etc", target_is_directory=True)
    with pytest.raises(PathRejected) as refused:
        resolve_incident(root, "b")
    assert refused.value.status == 403 and "etc" in refused.value.reason
    for location in (".", "./", "a/.."):
        with pytest.raises(PathRejected) as refused:
            resolve_incident(root, location)
        assert refused.value.status == 403


def test_an_alert_with_a_version_that_is_not_one_is_refused(tmp_path):
    from fastapi.testclient import TestClient

    from flink_runbooks.apps.serve import create_app

    (tmp_path / "logs" / "a").mkdir(parents=True)
    client = TestClient(create_app(str(tmp_path / "logs"), str(tmp_path / "runs")))
    payload = _alert("a")
    payload["alerts"][0]["annotations"]["flink_version"] = "99.9"
    answer = client.post("/alerts", json=payload)
    assert answer.status_code == 400 and "flink_version" in answer.json()["detail"]
    assert not list((tmp_path / "runs").iterdir())


def test_a_kernel_that_died_before_answering_is_started_again_but_a_failing_cell_is_not(monkeypatch, tmp_path):
    from flink_runbooks.apps import notebook_runner
    from flink_runbooks.apps.notebook_runner import NotebookRun

    def runs(*errors):
        queue = list(errors)

        def once(*_args, **_kwargs):
            error = queue.pop(0)
            return NotebookRun("failed" if error else "ok", 1.0, error, None)
        return once, queue

    once, left = runs("RuntimeError: Kernel died before replying to kernel_info", None)
    monkeypatch.setattr(notebook_runner, "_run_once", once)
    run = notebook_runner.run_notebook(tmp_path / "a.ipynb", tmp_path / "b.ipynb", parameters={}, cwd=tmp_path,
                                       timeout_s=10)
    assert run.status == "ok" and not left
    once, left = runs("cell 4: ValueError: bad input", None)
    monkeypatch.setattr(notebook_runner, "_run_once", once)
    run = notebook_runner.run_notebook(tmp_path / "a.ipynb", tmp_path / "b.ipynb", parameters={}, cwd=tmp_path,
                                       timeout_s=10)
    assert run.status == "failed" and run.error == "cell 4: ValueError: bad input" and left == [None]


# -- an output folder taken literally, an interrupted run, a full disk ----------------------------------------

@pytest.mark.notebook
def test_braces_in_out_are_part_of_the_folder_name_not_papermill_parameters(tmp_path):
    out = tmp_path / "b{job}" / "{incident_cache}"
    report = triage([str(example(SLUG, "healthy"))], out, runbooks=["succeeds"], runbooks_dir=TEST_NOTEBOOKS,
                    timeout_s=120)
    [run] = report.runbooks
    assert run.status == "ok", run.error
    assert pathlib.Path(run.notebook) == out / "runbooks" / "succeeds.ipynb" and pathlib.Path(run.notebook).exists()
    assert json.loads((out / "report.json").read_text())["status"] == "complete"


@pytest.mark.slow
@pytest.mark.parametrize("signum,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_an_interrupted_triage_says_so_in_report_json_exits_with_one_line_and_leaves_no_process(tmp_path, signum, code, word):
    marker = f"FLINK_RUNBOOKS_TEST_RUN={uuid.uuid4().hex}"
    env = os.environ | {marker.split("=")[0]: marker.split("=")[1]}
    out = tmp_path / "out"
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "flink-runbooks"), "triage", str(example(SLUG, "healthy")),
                             "--out", str(out), "--runbooks", "hangs", "--runbooks-dir", str(TEST_NOTEBOOKS),
                             "--timeout", "600"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120  # a guard against a hang, not a timing assertion
    while not list((out / "runbooks").glob("*.ipynb")) or len(processes_marked(marker)) < 3:
        assert proc.poll() is None and time.monotonic() < deadline, "the hanging runbook never started"
        time.sleep(0.2)
    proc.send_signal(signum)
    _stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code
    assert stderr.strip().splitlines() == [f"flink-runbooks: {word}; {out / 'report.json'} lists what completed"]
    doc = json.loads((out / "report.json").read_text())
    assert doc["status"] == "interrupted" and doc["stage"] == "runbooks"
    assert [(r["runbook"], r["status"]) for r in doc["runbooks"]] == [("hangs", "interrupted")]
    while processes_marked(marker):  # the kernel ends itself once papermill is gone
        assert time.monotonic() < deadline, f"left behind: {processes_marked(marker)}"
        time.sleep(0.2)


@pytest.fixture
def small_disk(tmp_path):
    """A real file system of 256 KiB (tmpfs), so writes fail with 'No space left on device' as on a full disk."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_one_line_exit_2_and_report_json_says_the_run_failed(small_disk, capsys):
    # Room for the reserved report.json and little else: the saved incident, the notebook or the patches fill it.
    (small_disk / "filler").write_bytes(b"\0" * 160 * 1024)
    out = small_disk / "out"
    code = cli.main(["triage", str(example("rocksdb-restore-corruption", "remote-checkpoint-corrupt-v1.20")),
                     "--out", str(out), "--runbooks", "succeeds", "--runbooks-dir", str(TEST_NOTEBOOKS)])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "No space left on device" in err and "internal error" not in err
    doc = json.loads((out / "report.json").read_text())
    assert doc["status"] == "failed" and "No space left on device" in doc["error"]
    assert doc["stage"] in ("save incident", "runbooks", "patches", "report")


@pytest.mark.parametrize("stage", ["ingest", "diagnose"])
def test_a_ctrl_c_before_the_runbooks_start_leaves_report_json_saying_interrupted(monkeypatch, tmp_path, stage):
    from flink_runbooks.apps import triage as triage_module
    from flink_runbooks.collect import ingest as ingest_module

    def ctrl_c(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ingest_module if stage == "ingest" else triage_module,
                        "ingest" if stage == "ingest" else "run_detectors", ctrl_c)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        triage([str(example(SLUG, "healthy"))], out)
    assert json.loads((out / "report.json").read_text()) == {"status": "interrupted", "stage": stage, "out": str(out)}


def test_a_runbook_named_without_a_notebook_leaves_report_json_saying_the_run_failed(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(TriageError, match="no runbook notebook for not-a-runbook"):
        triage([str(example(SLUG, "healthy"))], out, runbooks=["not-a-runbook"], runbooks_dir=TEST_NOTEBOOKS)
    doc = json.loads((out / "report.json").read_text())
    assert doc["status"] == "failed" and "no runbook notebook for not-a-runbook" in doc["error"]


@pytest.mark.notebook
def test_a_successful_papermill_run_ends_without_a_keyboard_interrupt_error(tmp_path):
    import nbformat

    incident = example("user-code-exception", "poison-record-1.20")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("from flink_runbooks import notebook as nb\n"
                                  f"run = nb.open_runbook('user-code-exception', [{str(incident)!r}])"),
        # what ipykernel logs when jupyter_client's interrupt before shutdown lands while it handles a message
        nbformat.v4.new_code_cell("get_ipython().kernel.log.error('KeyboardInterrupt caught in kernel.')"),
    ]
    source = tmp_path / "runbook.ipynb"
    nbformat.write(notebook, source)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib")}
    done = subprocess.run([sys.executable, "-m", "papermill", str(source), str(tmp_path / "out.ipynb"), "-k", "flink-runbooks",
                           "--no-progress-bar"], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "KeyboardInterrupt" not in done.stderr and "ERROR" not in done.stderr


def test_a_failed_runs_error_is_not_the_interrupt_sent_at_shutdown(tmp_path):
    from flink_runbooks.apps.notebook_runner import papermill_error

    stderr = ("Executing notebook with kernel: flink-runbooks\n"
              "the kernel went away\n"
              "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.\n")
    assert papermill_error(tmp_path / "never-written.ipynb", stderr) == "the kernel went away"
