"""A loopback cluster that answers the pull's GETs with the responses recorded in a folder of
tests/collect/rest_responses/ (one file per path, ``/`` and ``?=`` as ``__``; log files under ``logs/``)."""
from __future__ import annotations

import contextlib
import http.server
import pathlib
import urllib.parse
from typing import Iterator

from support import loopback_server

RESPONSES = pathlib.Path(__file__).resolve().parent / "collect" / "rest_responses"
# Flink 1.20.3 and 2.3.0, a job whose checkpoints expire until it fails over and whose task then hangs in
# cancellation (rest_responses/jobs/StuckJob.java, recorded by rest_responses/record.py)
STUCK = {"1.20.3": RESPONSES / "flink-1.20.3-stuck", "2.3.0": RESPONSES / "flink-2.3.0-stuck"}
# the failing job of tests/apps/live_jobs/ThrowingJob.java on a cluster with a failure enricher
# (rest_responses/jobs/OrdersFailureEnricher.java): its exception history carries failure labels
LABELLED = {"1.20.3": RESPONSES / "flink-1.20.3-labelled", "2.3.0": RESPONSES / "flink-2.3.0-labelled"}


def recorded_name(path: str) -> str:
    return path.lstrip("/").replace("/", "__").replace("?", "__").replace("=", "__")


@contextlib.contextmanager
def replayed_cluster(folder: pathlib.Path) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the handler's name in http.server
            path = urllib.parse.unquote(self.path)
            if "/logs/" in path:
                recorded = folder / "logs" / path.rsplit("/", 1)[1]
            else:
                recorded = folder / recorded_name(path)
            if not recorded.is_file():
                self.send_error(404)
                return
            body = recorded.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with loopback_server(Handler) as server:
        yield f"http://127.0.0.1:{server.server_port}"
