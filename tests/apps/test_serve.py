"""The webhook server's guarantees: it reads only the incident folder it resolved (a swap after the check reads
nothing outside the logs root), runs a bounded number of triages with the rest queued in order, and keeps every
run's state on disk across a restart."""
from __future__ import annotations

import errno
import json
import os
import pathlib
import shutil
import stat
import threading
import time
import types

import pytest
from fastapi.testclient import TestClient

from support import everything_written, processes_marked
from corpus import example
from flink_runbooks.apps import serve
from flink_runbooks.collect import rest
from flink_runbooks.apps import triage as triage_module

PLANTED_NAME = "planted-outside.log"
PLANTED_TEXT = "OUTSIDE-THE-ROOT-5d1c9e"


def _alert(location: str) -> dict:
    return {"version": "4", "status": "firing", "receiver": "flink-runbooks",
            "alerts": [{"status": "firing", "labels": {"alertname": "FlinkJobFailing"},
                        "annotations": {"flink_logs": location}}]}


def _plant_outside(directory: pathlib.Path) -> pathlib.Path:
    """A folder outside the logs root whose file would be diagnosed (and named) if it were ever read."""
    directory.mkdir(parents=True)
    (directory / PLANTED_NAME).write_text(
        "2026-11-22 02:54:11,000 ERROR org.apache.flink.runtime.taskexecutor.TaskManagerRunner [] - Fatal error "
        f"occurred in the TaskExecutor ({PLANTED_TEXT}).\njava.lang.OutOfMemoryError: Java heap space {PLANTED_TEXT}\n"
        "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n")
    return directory


def _swap_for_link(folder: pathlib.Path, target: pathlib.Path) -> None:
    folder.rename(folder.with_name(folder.name + "-moved-away"))
    folder.symlink_to(target, target_is_directory=True)


def _wait(client: TestClient, run_id: str, until=lambda doc: doc["status"] not in ("queued", "running"),
          deadline_s: float = 120) -> dict:
    deadline = time.monotonic() + deadline_s
    while True:
        answer = client.get(f"/runs/{run_id}")
        assert answer.status_code == 200, answer.text
        doc = answer.json()
        if until(doc):
            return doc
        assert time.monotonic() < deadline, f"run {run_id} stayed {doc['status']}"
        time.sleep(0.05)


class BlockingTriage:
    """Stands in for triage where a test is about queueing and state: each call waits until its incident's gate
    opens, then writes a small report.json as the real one would."""

    def __init__(self):
        self.started: list[str] = []
        self.gates: dict[str, threading.Event] = {}
        self.lock = threading.Lock()
        self.all_open = False

    def gate(self, incident: str) -> threading.Event:
        with self.lock:
            gate = self.gates.setdefault(incident, threading.Event())
            if self.all_open:
                gate.set()
            return gate

    def __call__(self, paths, out, cancel=None, **_kwargs):
        incident = pathlib.Path(paths[0]).name
        self.started.append(incident)
        gate, deadline = self.gate(incident), time.monotonic() + 120
        while not gate.wait(timeout=0.05) and time.monotonic() < deadline:
            if cancel is not None and cancel.is_set():  # as the real triage stops its notebooks
                raise triage_module.TriageInterrupted("stopped")
        opened = gate.is_set()
        files = sorted(str(p.relative_to(paths[0])) for p in pathlib.Path(paths[0]).rglob("*"))
        pathlib.Path(out, "report.json").write_text(json.dumps({"status": "complete", "findings": [],
                                                                "files": files}))
        return types.SimpleNamespace(exit_code=0 if opened else 3)

    def release_all(self) -> None:
        with self.lock:
            self.all_open = True
            for gate in self.gates.values():
                gate.set()


@pytest.fixture
def blocking_triage(monkeypatch):
    fake = BlockingTriage()
    monkeypatch.setattr(triage_module, "triage", fake)
    yield fake
    fake.release_all()


def _incidents(root: pathlib.Path, *names: str) -> pathlib.Path:
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "jobmanager.log").write_text(f"2026-11-22 02:54:11,000 INFO  x [] - {name}\n")
    return root


# -- reading only what was resolved ------------------------------------------------------------------------------

def test_a_folder_swapped_for_a_link_after_the_check_reads_nothing_outside_the_root(monkeypatch, tmp_path):
    """The real triage runs after the folder was replaced by a link to a folder outside the root: it reads the
    snapshot taken through the folder serve opened, so the outside file reaches neither the report nor the API."""
    logs_root, out_root = tmp_path / "logs", tmp_path / "reports"
    shutil.copytree(example("checkpoint-tolerable-failure-threshold", "healthy"), logs_root / "orders")
    outside = _plant_outside(tmp_path / "outside")
    real_triage = triage_module.triage
    given = []

    def swap_then_triage(paths, out, **kwargs):
        given.append(list(paths))
        _swap_for_link(logs_root / "orders", outside)
        return real_triage(paths, out, **kwargs)

    monkeypatch.setattr(triage_module, "triage", swap_then_triage)
    no_notebooks = tmp_path / "no-notebooks"  # a finding would report its runbook failed rather than start a kernel
    no_notebooks.mkdir()
    client = TestClient(serve.create_app(str(logs_root), str(out_root), runbooks_dir=str(no_notebooks)))
    answer = client.post("/alerts", json=_alert("orders"))
    assert answer.status_code == 202, answer.text
    run = _wait(client, answer.json()["run"])

    assert given, "triage was never called"
    assert run["status"] == "done", run
    assert run["report"]["findings"] == []
    # It read the incident's own files, under their names in the folder, in the run's snapshot of it.
    read = sorted(f["path"] for f in run["report"]["inputs"]["files"])
    snapshot = pathlib.Path(run["out"], serve.SNAPSHOT_DIR, "orders")
    names = sorted(str(p.relative_to(logs_root / "orders-moved-away")) for p in
                   (logs_root / "orders-moved-away").rglob("*") if p.is_file() and p.stat().st_size
                   and p.name != "expected.json")
    assert read == [str(snapshot / name) for name in names], read
    listing = client.get("/runs").text
    for text in (json.dumps(run), listing, everything_written(out_root)):
        assert PLANTED_NAME not in text and PLANTED_TEXT not in text
    assert run["incident"] == str(logs_root.resolve() / "orders")
    assert not pathlib.Path(run["out"], serve.SNAPSHOT_DIR).exists(), "the raw logs' snapshot is removed after"


def test_a_folder_swapped_between_the_check_and_the_open_is_refused(monkeypatch, blocking_triage, tmp_path):
    logs_root = _incidents(tmp_path / "logs", "orders")
    outside = _plant_outside(tmp_path / "outside")
    checked = serve.resolve_incident

    def check_then_swap(root, location):
        folder = checked(root, location)
        _swap_for_link(logs_root / "orders", outside)
        return folder

    monkeypatch.setattr(serve, "resolve_incident", check_then_swap)
    client = TestClient(serve.create_app(str(logs_root), str(tmp_path / "reports")))
    answer = client.post("/alerts", json=_alert("orders"))
    assert answer.status_code == 409, answer.text
    assert "changed" in answer.json()["detail"]
    assert blocking_triage.started == []
    assert client.get("/runs").json() == []


def test_the_snapshot_follows_links_only_inside_the_root_and_takes_each_file_once(tmp_path):
    root = tmp_path / "logs"
    folder = root / "orders"
    (folder / "sub").mkdir(parents=True)
    (folder / "jobmanager.log").write_text("jm\n")
    (folder / "taskmanager.log").write_text("tm\n")
    (folder / "nested").mkdir()
    (folder / "nested" / "rolled.log").write_text("rolled\n")
    (root / "common").mkdir()
    (root / "common" / "common.log").write_text("common\n")
    (folder / "sub" / "common.log").symlink_to("../../common/common.log")  # inside the root: followed
    (folder / "sub" / "loop").symlink_to(folder, target_is_directory=True)  # a loop ends
    (folder / "again.log").symlink_to("jobmanager.log")  # a second way to a file already taken
    os.mkfifo(folder / "pipe.log")  # never opened for reading (it would block)
    outside = _plant_outside(tmp_path / "outside")

    handle = serve.open_incident(root, serve.resolve_incident(root, "orders"))
    # Replaced after the check, while the folder is open: a file and a directory now lead out of the root.
    (folder / "taskmanager.log").unlink()
    (folder / "taskmanager.log").symlink_to(outside / PLANTED_NAME)
    shutil.rmtree(folder / "nested")
    (folder / "nested").symlink_to(outside, target_is_directory=True)
    try:
        snap = serve.snapshot_incident(handle, tmp_path / "run" / "input" / "orders")
    finally:
        handle.close()

    dest = tmp_path / "run" / "input" / "orders"
    files = {str(p.relative_to(dest)): p.read_text() for p in dest.rglob("*") if p.is_file()}
    assert files.keys() in ({"jobmanager.log", "sub/common.log"}, {"again.log", "sub/common.log"})
    assert files["sub/common.log"] == "common\n"
    assert PLANTED_TEXT not in everything_written(tmp_path / "run")
    assert not any(p.is_symlink() for p in dest.rglob("*"))
    assert any(w.startswith("taskmanager.log links outside the logs root") for w in snap.warnings), snap.warnings
    assert any(w.startswith("nested links outside the logs root") for w in snap.warnings), snap.warnings
    assert any(w.startswith("pipe.log is not a regular file") for w in snap.warnings), snap.warnings
    # Same file system: hard links to the very files, nothing copied; only this user can enter the snapshot.
    assert (snap.files, snap.linked, snap.copied) == (2, 2, 0)
    assert (dest / "sub" / "common.log").stat().st_ino == (root / "common" / "common.log").stat().st_ino
    assert stat.S_IMODE((tmp_path / "run" / "input").stat().st_mode) == 0o700


def test_the_snapshot_copies_from_the_open_file_where_hard_links_cannot_be_made(monkeypatch, tmp_path):
    root = _incidents(tmp_path / "logs", "orders")

    def other_file_system(*_args, **_kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(serve.os, "link", other_file_system)
    handle = serve.open_incident(root, serve.resolve_incident(root, "orders"))
    try:
        snap = serve.snapshot_incident(handle, tmp_path / "run" / "input" / "orders")
    finally:
        handle.close()
    copy = tmp_path / "run" / "input" / "orders" / "jobmanager.log"
    assert (snap.linked, snap.copied) == (0, 1)
    assert copy.read_text() == (root / "orders" / "jobmanager.log").read_text()
    assert copy.stat().st_ino != (root / "orders" / "jobmanager.log").stat().st_ino
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600


# -- a bounded queue ---------------------------------------------------------------------------------------------

def test_triages_beyond_the_limit_wait_in_order_and_a_full_queue_is_refused(blocking_triage, tmp_path):
    logs_root = _incidents(tmp_path / "logs", "a", "b", "c", "d")
    client = TestClient(serve.create_app(str(logs_root), str(tmp_path / "reports"), max_concurrent=1, max_queued=2))
    accepted = []
    for name in ("a", "b", "c"):
        answer = client.post("/alerts", json=_alert(name))
        assert answer.status_code == 202, answer.text
        accepted.append(answer.json())
    assert [a["status"] for a in accepted] == ["running", "queued", "queued"]
    assert [a.get("position") for a in accepted] == [None, 1, 2]
    full = client.post("/alerts", json=_alert("d"))
    assert full.status_code == 503 and "waiting" in full.json()["detail"], full.text
    again = client.post("/alerts", json=_alert("b"))
    # a repeat of the group is acknowledged (any other status makes Alertmanager send it again) with the run
    assert again.status_code == 200 and again.json()["run"] == accepted[1]["run"] and again.json()["repeat"] is True

    listing = client.get("/runs").json()
    assert [(r["id"], r["status"]) for r in listing] == [(a["run"], s) for a, s in
                                                          zip(accepted, ("running", "queued", "queued"))]
    for queued in accepted[1:]:
        assert (pathlib.Path(queued["out"]) / serve.INCOMPLETE_MARK).exists()
    _wait(client, accepted[0]["run"], until=lambda doc: blocking_triage.started == ["a"])

    blocking_triage.gate("a").set()
    first = _wait(client, accepted[0]["run"])
    assert first["status"] == "done" and first["exit_code"] == 0
    assert first["report"]["files"] == ["jobmanager.log"]
    assert not (pathlib.Path(first["out"]) / serve.INCOMPLETE_MARK).exists()
    _wait(client, accepted[1]["run"], until=lambda doc: doc["status"] == "running")
    assert client.get(f"/runs/{accepted[2]['run']}").json()["position"] == 1
    assert client.post("/alerts", json=_alert("d")).status_code == 202  # a place in the queue is free again

    blocking_triage.release_all()
    for a in accepted[1:]:
        assert _wait(client, a["run"])["status"] == "done"
    assert blocking_triage.started[:3] == ["a", "b", "c"]


def test_the_default_limit_leaves_the_cores_to_each_triage_s_notebooks():
    assert serve.default_max_concurrent(1) == 1
    assert serve.default_max_concurrent(2) == 1
    assert serve.default_max_concurrent(8) == 4
    with pytest.raises(ValueError):
        serve.create_app("/nonexistent", "/nonexistent", max_concurrent=0)


# -- run state on disk -------------------------------------------------------------------------------------------

def test_a_restarted_server_answers_for_every_run_and_marks_unfinished_ones_interrupted(blocking_triage, tmp_path):
    logs_root = _incidents(tmp_path / "logs", "a", "b", "c")
    out_root = tmp_path / "reports"
    before = TestClient(serve.create_app(str(logs_root), str(out_root), max_concurrent=1))
    done = before.post("/alerts", json=_alert("a")).json()
    blocking_triage.gate("a").set()
    assert _wait(before, done["run"])["status"] == "done"
    running = before.post("/alerts", json=_alert("b")).json()
    queued = before.post("/alerts", json=_alert("c")).json()
    assert (running["status"], queued["status"]) == ("running", "queued")
    _wait(before, running["run"], until=lambda doc: doc["input"] is not None)
    del before  # the server stops without a word: its thread for "b" never finishes

    after = TestClient(serve.create_app(str(logs_root), str(out_root), max_concurrent=1))
    listing = after.get("/runs").json()
    assert [(r["id"], r["status"]) for r in listing] == [
        (done["run"], "done"), (running["run"], "interrupted"), (queued["run"], "interrupted")]
    old = after.get(f"/runs/{done['run']}").json()
    assert old["status"] == "done" and old["report"]["files"] == ["jobmanager.log"]
    for unfinished in (running, queued):
        view = after.get(f"/runs/{unfinished['run']}").json()
        assert view["status"] == "interrupted" and "stopped" in view["error"] and view["finished"]
        mark = pathlib.Path(unfinished["out"]) / serve.INCOMPLETE_MARK
        assert "interrupted" in mark.read_text()
    assert not pathlib.Path(running["out"], serve.SNAPSHOT_DIR).exists()
    assert not (pathlib.Path(done["out"]) / serve.INCOMPLETE_MARK).exists()
    # The folders are free again: a new alert for one of them is accepted.
    assert after.post("/alerts", json=_alert("b")).status_code == 202


def test_stopping_the_server_marks_its_unfinished_runs_interrupted_at_once(blocking_triage, tmp_path):
    logs_root = _incidents(tmp_path / "logs", "a", "b")
    out_root = tmp_path / "reports"
    with TestClient(serve.create_app(str(logs_root), str(out_root), max_concurrent=1)) as client:
        running = client.post("/alerts", json=_alert("a")).json()
        queued = client.post("/alerts", json=_alert("b")).json()
    for run in (running, queued):
        state = json.loads((out_root / serve.STATE_DIR / f"{run['run']}.json").read_text())
        assert state["status"] == "interrupted", state
        assert (pathlib.Path(run["out"]) / serve.INCOMPLETE_MARK).exists()


@pytest.mark.notebook
def test_stopping_the_server_stops_a_running_triage_s_notebooks_and_its_report_says_interrupted(monkeypatch, tmp_path):
    from corpus import ROOT

    slug = "checkpoint-tolerable-failure-threshold"
    logs_root = tmp_path / "logs"
    shutil.copytree(example(slug, "storage-permission-denied"), logs_root / "orders")
    # The incident's runbook is a notebook that never ends.
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    shutil.copy(ROOT / "tests" / "notebooks" / "hangs.ipynb", notebooks / f"{slug}.ipynb")
    marker = f"flink-runbooks-serve-stop-{os.getpid()}-{time.monotonic_ns()}"
    monkeypatch.setenv("FLINK_RUNBOOKS_TEST_RUN", marker)
    out_root = tmp_path / "reports"
    with TestClient(serve.create_app(str(logs_root), str(out_root), runbooks_dir=str(notebooks),
                                     timeout_s=600)) as client:
        run = client.post("/alerts", json=_alert("orders")).json()
        deadline = time.monotonic() + 120  # a guard against a hang, not a timing assertion
        while not list(pathlib.Path(run["out"], "runbooks").glob("*.ipynb")) or len(processes_marked(marker)) < 2:
            assert time.monotonic() < deadline, "the runbook never started"
            time.sleep(0.2)
    state = json.loads((out_root / serve.STATE_DIR / f"{run['run']}.json").read_text())
    assert state["status"] == "interrupted", state
    report = json.loads(pathlib.Path(run["out"], "report.json").read_text())
    assert report["status"] == "interrupted" and report["findings"]
    assert {r["runbook"]: r["status"] for r in report["runbooks"]}[slug] == "interrupted"
    while processes_marked(marker):  # papermill is killed; its kernel ends itself once papermill is gone
        assert time.monotonic() < deadline, f"left behind: {processes_marked(marker)}"
        time.sleep(0.2)


# -- live clusters: an alert that names a JobManager ---------------------------------------------------------------

def _rest_alert(url: str, status: str = "firing", **extra: str) -> dict:
    return {"version": "4", "status": status, "receiver": "flink-runbooks", "groupKey": "{}:{alertname=\"FlinkJobFailing\"}",
            "alerts": [{"status": status, "labels": {"alertname": "FlinkJobFailing", **extra},
                        "annotations": {"flink_rest_url": url}}]}


def test_a_resolved_notification_starts_nothing(blocking_triage, tmp_path):
    client = TestClient(serve.create_app(str(_incidents(tmp_path / "logs", "orders")), str(tmp_path / "reports")))
    answer = client.post("/alerts", json=_rest_alert("http://127.0.0.1:9", status="resolved"))
    assert answer.status_code == 200 and answer.json() == {"status": "resolved", "started": False}
    assert blocking_triage.started == [] and client.get("/runs").json() == []


def test_an_alert_naming_a_jobmanager_pulls_it_and_its_repeats_are_acknowledged(blocking_triage, tmp_path):
    from support import recorded_cluster

    client = TestClient(serve.create_app(str(_incidents(tmp_path / "logs", "orders")), str(tmp_path / "reports"),
                                         allowed_rest_urls=("http://127.0.0.1",)))
    with recorded_cluster() as url:
        first = client.post("/alerts", json=_rest_alert(url, job_name="orders-enrichment"))
        assert first.status_code == 202, first.text
        deadline = time.monotonic() + 60
        while not blocking_triage.started and time.monotonic() < deadline:  # the pull runs before the triage
            time.sleep(0.05)
        repeat = client.post("/alerts", json=_rest_alert(url, job_name="orders-enrichment"))
        # an alert about the same cluster without a job (a TaskManager lost) is the same incident, not a second pull
        cluster_wide = client.post("/alerts", json=_rest_alert(url))
    assert repeat.status_code == 200 and repeat.json()["run"] == first.json()["run"] and repeat.json()["repeat"]
    assert cluster_wide.status_code == 200 and cluster_wide.json()["run"] == first.json()["run"]
    run = client.get(f"/runs/{first.json()['run']}").json()
    pulled = pathlib.Path(run["out"]) / serve.PULLED_DIR
    assert run["incident"] == url and run["job"] == "orders-enrichment" and run["input"] == str(pulled)
    assert json.loads((pulled / "manifest.json").read_text())["jobs"] == ["07c9d40d8814a6b09219d4b848236f00"]
    assert blocking_triage.started == [serve.PULLED_DIR]


def test_an_alert_may_not_choose_where_the_pull_sends_the_rest_credentials(blocking_triage, tmp_path, monkeypatch):
    """A JobManager not allowed with --allow-rest-url is refused before any request: the pull would send the
    environment's token to it and serve back what it answered."""
    import http.server

    from support import loopback_server

    monkeypatch.setenv(rest.TOKEN_ENV, "planted-token-7f3a")
    requests = []

    class Recording(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append((self.path, dict(self.headers)))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    with loopback_server(Recording) as server:
        elsewhere = f"http://127.0.0.1:{server.server_port}"
        client = TestClient(serve.create_app(str(_incidents(tmp_path / "logs", "orders")), str(tmp_path / "reports"),
                                             allowed_rest_urls=("http://orders-jm:8081",)))
        answer = client.post("/alerts", json=_rest_alert(elsewhere))
        nothing_allowed = TestClient(serve.create_app(str(_incidents(tmp_path / "logs2", "orders")),
                                                      str(tmp_path / "reports2")))
        by_default = nothing_allowed.post("/alerts", json=_rest_alert(elsewhere))
    assert answer.status_code == 403 and "--allow-rest-url" in answer.json()["detail"]
    assert by_default.status_code == 403
    assert requests == [] and blocking_triage.started == [] and client.get("/runs").json() == []


@pytest.mark.parametrize("url, allowed", [
    ("http://orders-jm:8081", True),
    ("http://ORDERS-JM:8081/", True),
    ("http://orders-jm:8082", False),  # another port of the host
    ("https://orders-jm:8081", False),  # another scheme
    ("http://orders-jm:8081@attacker.example:8081", False),  # user info is not the host
    ("http://orders-jm.attacker.example:8081", False),
    ("http://history:8082/flink/history", True),  # under the allowed path
    ("http://history:8082/flinkother", False),
    ("http://any-port-host:31234", True),  # an allowed address without a port admits every port of the host
])
def test_allowed_rest_addresses_are_matched_by_scheme_host_port_and_path(url, allowed):
    entries = ("http://orders-jm:8081", "http://history:8082/flink", "http://any-port-host")
    assert serve.rest_url_allowed(url, entries) is allowed


def test_an_alert_with_a_url_that_is_not_http_is_refused(blocking_triage, tmp_path):
    client = TestClient(serve.create_app(str(_incidents(tmp_path / "logs", "orders")), str(tmp_path / "reports")))
    answer = client.post("/alerts", json=_rest_alert("file:///etc"))
    assert answer.status_code == 400 and "not an http" in answer.json()["detail"]


@pytest.mark.notebook
def test_a_pulled_cluster_is_triaged_with_a_headline_and_a_report_to_link_to(tmp_path):
    from support import PLANTED, recorded_cluster

    out_root = tmp_path / "reports"
    client = TestClient(serve.create_app(str(_incidents(tmp_path / "logs", "orders")), str(out_root), jobs=1,
                                         allowed_rest_urls=("http://127.0.0.1",)))
    with recorded_cluster() as url:
        run_id = client.post("/alerts", json=_rest_alert(url)).json()["run"]
        deadline = time.monotonic() + 600
        while (run := client.get(f"/runs/{run_id}").json())["status"] in serve.UNFINISHED:
            assert time.monotonic() < deadline, run
            time.sleep(1)
    assert run["status"] == "done", run
    assert run["headline"] == "restart-strategy-exhausted: same-fault-every-attempt (confidence high)"
    report = client.get(f"/runs/{run_id}/report.md")
    assert report.status_code == 200 and report.headers["content-type"].startswith("text/markdown")
    assert "restart-strategy-exhausted" in report.text
    written = [p for p in out_root.rglob("*") if p.is_file()]
    assert not [str(p) for p in written if PLANTED in p.read_text(errors="replace")]


def test_every_answer_about_a_run_links_its_report_as_markdown_and_as_a_page(blocking_triage, tmp_path):
    client = TestClient(serve.create_app(str(_incidents(tmp_path / "logs", "orders")), str(tmp_path / "reports")))
    run_id = client.post("/alerts", json=_alert("orders")).json()["run"]
    links = {"report_md": f"/runs/{run_id}/report.md", "report_html": f"/runs/{run_id}/report.html"}
    assert client.get(f"/runs/{run_id}").json().items() >= links.items()
    assert client.get(f"/runs/{run_id}/report.html").status_code == 404  # not before the triage is done
    repeat = client.post("/alerts", json=_alert("orders")).json()
    assert repeat.items() >= links.items()
    blocking_triage.release_all()
    _wait(client, run_id)
    assert client.get(f"/runs/{run_id}/runbooks/..%2F.runs.html").status_code == 404


@pytest.mark.notebook
def test_the_report_page_shows_markup_from_a_log_as_text(tmp_path):
    """A log line carrying a script tag: the page shows it as text, and the page forbids every script anyway."""
    logs_root = tmp_path / "logs"
    shutil.copytree(example("restart-strategy-exhausted", "same-fault-every-attempt"), logs_root / "orders")
    for log in (logs_root / "orders" / "log").iterdir():
        log.write_text(log.read_text().replace("Simulated failure:", "Simulated failure <script>alert('x')</script>:"))
    client = TestClient(serve.create_app(str(logs_root), str(tmp_path / "reports"), jobs=1))
    run_id = client.post("/alerts", json=_alert("orders")).json()["run"]
    run = _wait(client, run_id, deadline_s=600)
    assert run["status"] == "done", run
    page = client.get(run["report_html"])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'none'" in page.headers["content-security-policy"]
    assert "&lt;script&gt;alert('x')&lt;/script&gt;" in page.text and "<script" not in page.text
    assert "<h2>Primary: " in page.text  # the report's structure is markup: headings, code, the table of runbooks
    linked = [line.split('href="', 1)[1].split('"', 1)[0] for line in page.text.splitlines() if 'href="runbooks/' in line]
    assert linked and all(client.get(f"/runs/{run_id}/{href}").status_code == 200 for href in linked)
