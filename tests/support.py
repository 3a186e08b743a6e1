"""Helpers several test modules share: a static file server and real Chromium for page tests, the processes a run
left behind, and a cluster that answers the REST pull as a real Flink did."""
from __future__ import annotations

import contextlib
import functools
import http.server
import pathlib
import tempfile
import json
import threading
import time
import urllib.parse
from typing import Iterator

from corpus import ROOT

from flink_runbooks.apps.bench.flink_cluster import processes_marked  # noqa: F401 - shared by the tests

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium tries to reach Google's hosts, which a closed network refuses.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def loopback_server(handler) -> Iterator[http.server.ThreadingHTTPServer]:
    """``handler`` (a request handler class) serving on 127.0.0.1, a free port, for as long as the block runs; yields
    the server (its ``server_port``; a test may shut it down early to play a server that goes away)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


@contextlib.contextmanager
def serve_directory(directory: pathlib.Path) -> Iterator[str]:
    """``directory`` over HTTP on 127.0.0.1 (a free port) for as long as the block runs; yields its base URL."""
    with loopback_server(functools.partial(_QuietHandler, directory=str(directory))) as server:
        yield f"http://127.0.0.1:{server.server_port}/"


@contextlib.contextmanager
def chromium(prefix: str = "browser-"):
    """A Playwright browser context of Debian's Chromium with a fresh profile, closed after the block."""
    import pytest

    if not pathlib.Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (scripts/setup.sh does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix=prefix) as profile:
        context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                       args=CHROMIUM_ARGS)
        try:
            yield context
        finally:
            context.close()


def everything_written(root: pathlib.Path) -> str:
    """Every byte under ``root`` as text, the saved incidents' Parquet decoded too (compressed bytes hide text)."""
    import pyarrow.parquet as pq

    texts = []
    for path in sorted(root.rglob("*")):
        texts.append(str(path))
        if path.is_file():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
            if path.suffix == ".parquet":
                texts.append(json.dumps(pq.read_table(path).to_pylist(), default=str))
    return "\n".join(texts)


# -- a cluster that answers as a real Flink 1.20.3 did (tests/collect/rest_responses/README.md) -----------------------

RECORDED = ROOT / "tests" / "collect" / "rest_responses" / "flink-1.20.3"
JOB = "07c9d40d8814a6b09219d4b848236f00"
TM = "127.0.0.1:33099-2ce93c"
# Planted in a TaskManager log line and in the job's user configuration: no byte written may hold it.
PLANTED = "hunter2-planted-in-the-cluster"


def _recorded_name(path: str) -> str:
    return path.lstrip("/").replace("/", "__").replace("?", "__").replace("=", "__")


class RecordedCluster(http.server.BaseHTTPRequestHandler):
    """Answers as the recorded cluster did; ``faults`` (path -> HTTP status or "hang") and ``headers`` are set by a
    test."""

    faults: dict = {}
    seen: list = []

    def do_GET(self):  # noqa: N802 - the handler's name in http.server
        self.path = urllib.parse.unquote(self.path)
        type(self).seen.append((self.path, self.headers.get("Authorization")))
        fault = self.faults.get(self.path)
        if fault == "hang":
            time.sleep(5)
            return
        if isinstance(fault, int):
            self.send_error(fault)
            return
        body = self._body()
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes | None:
        for prefix in ("/jobmanager/logs/", f"/taskmanagers/{TM}/logs/"):
            if self.path.startswith(prefix):
                name = self.path[len(prefix):]
                log = RECORDED / "logs" / name
                if name == "flink--taskexecutor-0-vm.log":
                    # a Kafka client's JAAS line with a password, as a misconfigured client logs it
                    return log.read_bytes() + (
                        b"2026-11-27 23:29:59,000 INFO  org.apache.kafka.clients.consumer.ConsumerConfig [] - "
                        b"sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
                        b"username=\"orders\" password=\"" + PLANTED.encode() + b"\";\n")
                return log.read_bytes() if log.is_file() else (b"" if name.endswith(".out") else None)
        recorded = RECORDED / _recorded_name(self.path)
        if not recorded.is_file():
            return None
        if self.path == f"/jobs/{JOB}/config":
            doc = json.loads(recorded.read_text())
            doc.setdefault("execution-config", {})["user-config"] = {"db.password": PLANTED, "db.user": "orders"}
            return json.dumps(doc).encode()
        return recorded.read_bytes()

    def log_message(self, *args):  # quiet
        pass


@contextlib.contextmanager
def recorded_cluster() -> Iterator[str]:
    """A loopback HTTP server answering the pull's GETs with the recorded responses; yields its URL."""
    RecordedCluster.faults, RecordedCluster.seen = {}, []
    with loopback_server(RecordedCluster) as server:
        yield f"http://127.0.0.1:{server.server_port}"
