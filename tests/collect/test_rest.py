"""Pulling an incident from a cluster's REST API: the bundle, redaction as it is written, and every way a pull fails.

The cluster's answers are genuine responses of Flink 1.20.3 (tests/collect/rest_responses/README.md), served from a
loopback HTTP server; the live tier (tests/apps/test_live.py) pulls from a running Flink."""
from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys

import pytest
from flink_runbooks.collect import rest
from flink_runbooks.model import NO_WATERMARK
from support import JOB, PLANTED, RECORDED, TM, RecordedCluster, recorded_cluster

CLI = [sys.executable, "-m", "flink_runbooks.apps.cli"]


@pytest.fixture
def cluster():
    with recorded_cluster() as url:
        yield url


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_pull_is_an_incident_bundle_with_a_manifest(cluster, tmp_path):
    report = rest.pull(cluster, tmp_path / "bundle")
    bundle = tmp_path / "bundle"
    assert report.flink_version == "1.20.3" and report.jobs == [JOB] and not report.partial
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["source"] == cluster and manifest["flink_version"] == "1.20.3" and manifest["partial"] is False
    assert {r["path"] for r in manifest["requests"]} >= {"/config", "/jobmanager/config", "/jobs/overview",
                                                          f"/jobs/{JOB}/exceptions?maxExceptions=20", "/taskmanagers"}
    assert (bundle / "rest" / "jobs" / JOB / "exceptions.json").is_file()
    assert "order 300 has no customer" in (bundle / "rest" / "jobs" / JOB / "exceptions.json").read_text()
    # the effective configuration as a file the parser reads, named as the release reads it
    conf = (bundle / "flink-conf.yaml").read_text()
    assert "rest.port: 18081" in conf and "s3.secret-key: ******" in conf
    # the JobManager and the TaskManager serve the same shared log folder: each file is pulled once, into log/shared/
    # rather than under a process it may not belong to
    logs = sorted(str(p.relative_to(bundle / "log")) for p in (bundle / "log").rglob("*") if p.is_file())
    assert logs == sorted(f"shared/{name}" for name in (
        "flink--client-vm.log", "flink--standalonesession-0-vm.log", "flink--taskexecutor-0-vm.log",
        "flink--taskexecutor-0-vm.out", "flink--standalonesession-0-vm.out"))


def test_no_secret_of_the_cluster_reaches_the_bundle(cluster, tmp_path):
    rest.pull(cluster, tmp_path / "bundle")
    written = [p for p in (tmp_path / "bundle").rglob("*") if p.is_file()]
    assert written and not [str(p) for p in written if PLANTED in p.read_text(errors="replace")]
    config = json.loads((tmp_path / "bundle" / "rest" / "jobs" / JOB / "config.json").read_text())
    assert config["execution-config"]["user-config"]["db.user"] == "orders"


def test_the_pulled_bundle_is_diagnosed_like_any_incident_folder(cluster, tmp_path):
    run = subprocess.run(CLI + ["diagnose", cluster, "--format", "json", "--pull-dir", str(tmp_path / "pulled")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    primary = next(f for f in doc["findings"] if f["primary"])
    assert primary["runbook"] == "restart-strategy-exhausted"
    assert primary["root_cause"]["slug"] == "same-fault-every-attempt"
    assert "order 300 has no customer" in primary["summary"]
    # the REST documents beside the logs are not read as logs
    assert not [w for w in doc["warnings"] if "rest/" in w or "manifest.json" in w]
    assert f"pulled {cluster} into {tmp_path / 'pulled'}" in run.stderr


def test_a_log_over_the_cap_keeps_its_newest_lines(cluster, tmp_path):
    report = rest.pull(cluster, tmp_path / "bundle", max_log_bytes=4096)
    session = next((tmp_path / "bundle" / "log").rglob("flink--standalonesession-0-vm.log"))
    text = session.read_text()
    assert len(text) <= 4096 and text.endswith("\n")
    assert text.splitlines()[-1] == (RECORDED / "logs" / session.name).read_text().splitlines()[-1]
    assert any("flink--standalonesession-0-vm.log" in w and "only the newest" in w for w in report.warnings)


def test_a_taskmanager_that_cannot_be_read_is_a_warning_not_a_failure(cluster, tmp_path):
    RecordedCluster.faults = {f"/taskmanagers/{TM}/logs": 500, f"/jobs/{JOB}/checkpoints/config": 404}
    report = rest.pull(cluster, tmp_path / "bundle")
    assert not report.partial and report.logs
    assert any(f"/taskmanagers/{TM}/logs" in w and "500" in w for w in report.warnings)
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert any(r["path"] == f"/taskmanagers/{TM}/logs" and r["status"] == 500 for r in manifest["requests"])


def test_a_cluster_that_stops_answering_leaves_a_partial_bundle(cluster, tmp_path):
    RecordedCluster.faults = {"/taskmanagers": "hang"}
    report = rest.pull(cluster, tmp_path / "bundle", timeout=0.5)
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert report.partial and manifest["partial"] is True
    assert any("timed out" in w for w in manifest["warnings"])
    assert (tmp_path / "bundle" / "flink-conf.yaml").is_file()


def test_credentials_are_sent_and_never_written(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv(rest.TOKEN_ENV, "token-planted-xyz")
    with_user = cluster.replace("http://", "http://ops:pw-planted@")
    rest.pull(with_user, tmp_path / "bundle")
    assert {auth for _, auth in RecordedCluster.seen} == {"Bearer token-planted-xyz"}
    written = "".join(p.read_text(errors="replace") for p in (tmp_path / "bundle").rglob("*") if p.is_file())
    assert "token-planted-xyz" not in written and "pw-planted" not in written
    assert json.loads((tmp_path / "bundle" / "manifest.json").read_text())["source"] == cluster


@pytest.mark.parametrize("url, says", [
    ("http://127.0.0.1:{free}", "connection refused"),
    ("ftp://127.0.0.1/", "is not an http:// or https:// URL"),
    ("http://no-such-host.invalid:8081", "unknown host"),
])
def test_an_unusable_url_is_one_line_and_exit_2(url, says, tmp_path):
    run = subprocess.run(CLI + ["pull", url.format(free=_free_port()), "--out", str(tmp_path / "b")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and says in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert not (tmp_path / "b").exists()


def test_a_server_that_is_not_flink_is_named(tmp_path):
    from support import serve_directory

    (tmp_path / "site").mkdir()
    with serve_directory(tmp_path / "site") as url:
        with pytest.raises(rest.PullError, match="HTTP 404"):
            rest.pull(url, tmp_path / "b")
        (tmp_path / "site" / "config").write_text('{"refresh-interval": 3000}')
        with pytest.raises(rest.PullError, match="not as a Flink REST endpoint"):
            rest.pull(url, tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_an_unknown_job_lists_the_jobs_there_are(cluster, tmp_path):
    with pytest.raises(rest.PullError, match=f"no job 'billing' .*orders-enrichment \\({JOB}\\)"):
        rest.pull(cluster, tmp_path / "b", job="billing")
    assert rest.pull(cluster, tmp_path / "c", job="orders-enrichment").jobs == [JOB]


def test_a_pull_never_writes_into_a_folder_that_holds_files(cluster, tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("mine")
    with pytest.raises(rest.PullError, match="not an empty folder"):
        rest.pull(cluster, tmp_path / "b")
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["notes.txt"]


def test_a_slow_server_is_given_up_on_with_the_reason(tmp_path):
    with contextlib.closing(socket.socket()) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)  # accepts, never answers
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(rest.PullError, match="timed out"):
            rest.pull(url, tmp_path / "b", timeout=0.5)


def test_tls_without_a_trusted_certificate_says_how_to_trust_it(tmp_path):
    with pytest.raises(rest.PullError, match="cannot read the CA certificate"):
        rest.RestClient("https://127.0.0.1:1", ca_cert=str(tmp_path / "missing.pem"))
    client = rest.RestClient("https://127.0.0.1:1", insecure=True)
    assert client.base == "https://127.0.0.1:1"


def test_only_http_urls_are_pulled():
    assert rest.is_rest_url("http://jm:8081") and rest.is_rest_url("HTTPS://jm")
    assert not rest.is_rest_url("/var/log/flink") and not rest.is_rest_url("hdfs://nn/logs")
    assert rest.shown_url("https://ops:secret@jm.example:8443/base/") == "https://jm.example:8443/base"


def test_the_pulled_folder_is_recognised_only_by_its_manifest(tmp_path):
    from flink_runbooks.collect.listing import _is_pulled_bundle

    (tmp_path / "manifest.json").write_text('{"name": "an application\'s own manifest"}')
    assert not _is_pulled_bundle(str(tmp_path))
    (tmp_path / "manifest.json").write_text('{"source": "http://jm:8081", "requests": []}')
    assert _is_pulled_bundle(str(tmp_path))


def test_a_historyserver_without_logs_is_diagnosed_from_the_exception_history(cluster, tmp_path):
    """A HistoryServer serves the jobs' documents but no cluster configuration, logs or TaskManagers: the exception
    history becomes the records, and the version is the cluster's own answer."""
    RecordedCluster.faults = {"/jobmanager/config": 404, "/jobmanager/logs": 404, "/taskmanagers": 404}
    report = rest.pull(cluster, tmp_path / "bundle")
    assert not report.partial
    assert report.logs == [f"log/exception-history/{JOB}.log"]
    assert any("exception history" in w for w in report.warnings)
    run = subprocess.run(CLI + ["diagnose", str(tmp_path / "bundle"), "--format", "json"], capture_output=True,
                         text=True, timeout=300)
    doc = json.loads(run.stdout)
    assert doc["flink_version"] == "1.20.3"
    primary = next(f for f in doc["findings"] if f["primary"])
    assert primary["runbook"] == "restart-strategy-exhausted"
    assert "order 300 has no customer" in primary["summary"]


def test_the_exception_history_is_derived_only_when_no_jobmanager_log_was_pulled(cluster, tmp_path):
    report = rest.pull(cluster, tmp_path / "bundle")
    assert not (tmp_path / "bundle" / "log" / "exception-history").exists()
    assert not any("exception history" in w for w in report.warnings)


def test_a_redirect_is_not_followed_with_the_credentials(tmp_path, monkeypatch):
    import http.server
    import threading

    class Redirecting(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:9/config")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(rest.TOKEN_ENV, "token-planted-xyz")
    try:
        with pytest.raises(rest.PullError, match="HTTP 302"):
            rest.pull(f"http://127.0.0.1:{server.server_address[1]}", tmp_path / "b")
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("version", ["1.20.3", "2.3.0"])
def test_a_taskmanager_hosting_a_task_that_hangs_in_cancellation_gives_its_thread_dump(version, tmp_path):
    """Genuine responses of a job whose task ignores interruption (rest_responses/jobs/StuckJob.java): the vertex
    is CANCELING, so the pull asks which TaskManager hosts the subtask and takes that TaskManager's thread dump."""
    from replay import STUCK, replayed_cluster

    with replayed_cluster(STUCK[version]) as url:
        report = rest.pull(url, tmp_path / "bundle")
    dumps = list((tmp_path / "bundle" / "log").glob("taskmanager-*/thread-dump.txt"))
    assert len(dumps) == 1 and str(dumps[0].relative_to(tmp_path / "bundle")) in report.logs
    text = dumps[0].read_text()
    # jstack's form: the task thread by name and state, then its frames, the job's own among them
    assert '"Source: Sequence Source -> Map -> Sink: Print to Std. Out (1/1)#0" Id=' in text
    assert "\tat com.example.orders.StuckJob$1.map(StuckJob.java:" in text
    requests = json.loads((tmp_path / "bundle" / "manifest.json").read_text())["requests"]
    assert [r["path"] for r in requests if r["path"].endswith("/thread-dump")]
    assert list((tmp_path / "bundle" / "rest" / "jobs").glob("*/vertices/*.json"))


def test_no_thread_dump_is_taken_when_no_task_hangs(cluster, tmp_path):
    rest.pull(cluster, tmp_path / "bundle")
    assert not list((tmp_path / "bundle").rglob("thread-dump.txt"))
    assert not [path for path, _auth in RecordedCluster.seen if path.endswith("/thread-dump")]


def test_failure_labels_are_written_as_the_cluster_gave_them():
    """Failure enrichers' labels (1.18+) classify a failure; they are no secret and survive redaction (a label that
    holds a credential is masked like any value)."""
    doc = {"exceptionHistory": {"entries": [{"exceptionName": "java.io.IOException", "stacktrace": "x",
                                             "failureLabels": {"type": "USER", "team": "orders",
                                                               "token": "hunter2-planted-in-the-cluster"}}]}}
    labels = rest._redacted(doc)["exceptionHistory"]["entries"][0]["failureLabels"]
    assert labels["type"] == "USER" and labels["team"] == "orders" and "hunter2" not in labels["token"]


@pytest.mark.parametrize("version", ["1.20.3", "2.3.0"])
def test_a_bundle_reads_back_as_plain_data_whatever_the_release(version, tmp_path):
    """1.20.3 names a failure's TaskManager in ``location`` and ``endpoint``, 2.3.0 only in ``endpoint`` and has no
    legacy ``root-exception``; both read back the same (genuine responses of a job labelled by a failure enricher)."""
    from replay import LABELLED, replayed_cluster

    with replayed_cluster(LABELLED[version]) as url:
        rest.pull(url, tmp_path / "bundle")
    snapshot, warnings = rest.read_bundle(tmp_path / "bundle")
    assert not warnings and snapshot.flink_version == version
    job, = snapshot.jobs
    assert (job.name, job.state, job.has_history) == ("orders-enrichment", "FAILED", True)
    roots = [entry.root for entry in job.history]
    assert [r.exception.rsplit(".", 1)[-1] for r in roots] == ["IllegalStateException", "IllegalStateException",
                                                                "JobException"]
    assert roots[0].task.endswith("(1/1) - execution #0") and roots[0].location.startswith("localhost:")
    assert roots[-1].task is None  # the restart strategy's verdict is a global failure
    assert all(r.labels == {"team": "orders", "type": "USER"} for r in roots)
    tm, = snapshot.taskmanagers
    assert tm.memory["totalProcessMemory"] == 1 << 30 and tm.memory["jvmMetaspace"] > 0
    # a bundle is recognised by its manifest only
    (tmp_path / "bundle" / "manifest.json").unlink()
    assert rest.read_bundle(tmp_path / "bundle") == (None, [])


def test_a_saved_incident_keeps_what_its_rest_documents_say(cluster, tmp_path):
    """The notebooks open a saved incident: its exception history, checkpoints and TaskManagers come back with it."""
    from flink_runbooks.collect.store import load_incident, save_incident
    from flink_runbooks.diagnose import ingest

    rest.pull(cluster, tmp_path / "bundle")
    incident = ingest([str(tmp_path / "bundle")])
    reloaded = load_incident(save_incident(incident, tmp_path / "saved"))
    assert reloaded.rest == incident.rest and len(reloaded.rest[0].jobs[0].history) == 3


def test_a_streamed_log_never_takes_much_more_than_twice_its_cap_on_disk(tmp_path):
    dest = tmp_path / "jobmanager.log"
    sizes = []

    def chunks():
        for i in range(2_000):
            yield f"line {i} with token=abcdef0123456789 and some more text to fill the chunk\n".encode() * 10
            if dest.exists():
                sizes.append(dest.stat().st_size)

    total, cut = rest.write_redacted_tail(chunks(), dest, 8192)
    text = dest.read_text()
    assert cut and total > 1_000_000 and len(text.encode()) <= 8192
    assert max(sizes) <= 3 * 8192
    assert text.splitlines()[-1].startswith("line 1999 ") and "abcdef0123456789" not in text


def _serving_a_pulled_bundle(bundle):
    """A loopback JobManager answering the pull's GETs from the REST documents a genuine pull wrote (the folder of an
    example incident): the watermarks page as written, the subtasks' metric list as the ids the documents hold, and
    each subtask's metrics filtered by its ``get=`` as Flink filters them."""
    import http.server
    import urllib.parse

    from support import loopback_server

    rest_dir = bundle / "rest"
    jid = json.loads((bundle / "manifest.json").read_text())["jobs"][0]
    vertices = rest_dir / "jobs" / jid / "vertices"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the handler's name in http.server
            url = urllib.parse.urlsplit(self.path)
            path, get = url.path, urllib.parse.parse_qs(url.query).get("get", [""])[0]
            parts = path.strip("/").split("/")
            doc = None
            if path == "/config":
                doc = json.loads((rest_dir / "config.json").read_text())
            elif path == "/jobs/overview":
                doc = json.loads((rest_dir / "jobs-overview.json").read_text())
            elif path == f"/jobs/{jid}":
                doc = json.loads((rest_dir / "jobs" / jid / "job.json").read_text())
            elif len(parts) == 5 and parts[4] == "watermarks":
                doc = json.loads((vertices / f"{parts[3]}{rest.WATERMARKS_SUFFIX}").read_text())
            elif len(parts) >= 6 and parts[4] == "subtasks":
                metrics = json.loads((vertices / f"{parts[3]}{rest.SUBTASK_METRICS_SUFFIX}").read_text())
                if parts[5] == "metrics":
                    ids = {m["id"] for listed in metrics.values() for m in listed}
                    doc = [{"id": i} for i in sorted(ids | {"buffers.inPoolUsage", "mailboxLatencyMs_p99"})]
                else:
                    wanted = set(get.split(","))
                    doc = [m for m in metrics.get(parts[5], []) if m["id"] in wanted]
            if doc is None:
                self.send_error(404)
                return
            body = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    return jid, loopback_server(Handler)


@pytest.mark.parametrize("example", ["idle-split-1.20", "idle-split-2.3"])
def test_a_running_jobs_watermarks_and_subtask_metrics_are_pulled_and_read_back(example, tmp_path):
    """Per vertex of a running job: its watermarks page and, per subtask, only the metrics that tell an idle source
    subtask apart (records, watermarks, source lags), never the hundred others a subtask has."""
    from corpus import example as example_folder

    jid, server = _serving_a_pulled_bundle(example_folder("watermark-stalled", example))
    with server as running:
        report = rest.pull(f"http://127.0.0.1:{running.server_port}", tmp_path / "bundle")
    assert report.jobs == [jid]
    asked = [r["path"] for r in json.loads((tmp_path / "bundle" / "manifest.json").read_text())["requests"]]
    per_subtask = [p for p in asked if "/subtasks/" in p and "?get=" in p]
    assert len(per_subtask) == 4  # two vertices of two subtasks
    assert not [p for p in per_subtask if "buffers." in p or "mailbox" in p]
    snapshot, warnings = rest.read_bundle(tmp_path / "bundle")
    job, = snapshot.jobs
    source, windows = job.vertices
    assert source.name.startswith("Source: clicks[1]") and windows.name.startswith("GlobalWindowAggregate[5]")
    records = {s: m.get("Source__clicks[1].numRecordsOut") for s, m in source.subtask_metrics.items()}
    assert sorted(records.values()) == [0, 120]
    if windows.watermarks:  # 1.20.3; 2.3.0 answered the page with [] and each subtask's metric holds it
        assert windows.watermarks == {"0": NO_WATERMARK, "1": NO_WATERMARK}
    assert {m["currentInputWatermark"] for m in windows.subtask_metrics.values()} == {NO_WATERMARK}
    assert windows.documents["watermarks"].endswith(f"{windows.id}{rest.WATERMARKS_SUFFIX}")
