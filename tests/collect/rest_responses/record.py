"""Record a real Flink cluster's answers to the pull: ``python tests/collect/rest_responses/record.py 1.20.3 stuck``.

Starts a standalone session cluster of the release installed under build/flink/<version> (every port on 127.0.0.1)
and pulls it once the scenario's moment has come, writing each response body to ``flink-<version>-<scenario>/``
under its path's name (``/`` and ``?=`` become ``__``) and the log files to ``logs/``. Scenarios:

- ``stuck``: ``jobs/StuckJob.java`` with checkpoints every second and a 1.5 s timeout, pulled once the job failed
  over and its task hangs in cancellation;
- ``labelled``: the live tests' ``ThrowingJob`` with the failure enricher ``jobs/OrdersFailureEnricher.java``
  installed as a plugin, pulled once the job FAILED (its exception history carries failure labels).
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
sys.path[:0] = [str(ROOT / "lib"), str(ROOT / "tests"), str(ROOT / "tests" / "apps")]

from flink_runbooks.collect import rest  # noqa: E402
from test_live import flink_cluster  # noqa: E402  (the live tests' cluster, its configuration extended below)

CHECKPOINTING = """\
execution.checkpointing.interval: 1 s
execution.checkpointing.timeout: 1500 ms
execution.checkpointing.tolerable-failed-checkpoints: 1
"""


def _get(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


ENRICHER = """\
jobmanager.failure-enrichers: com.example.orders.OrdersFailureEnricher,com.example.orders.OrdersFailureEnricher$Factory
"""


def record(version: str, scenario: str = "stuck") -> pathlib.Path:
    out = HERE / f"flink-{version}-{scenario}"
    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        original = pathlib.Path.write_text

        def with_checkpointing(path, text, *args, **kwargs):
            if path.name == "config.yaml" and "rest.port" in text:
                text += CHECKPOINTING if scenario == "stuck" else ENRICHER
            return original(path, text, *args, **kwargs)

        pathlib.Path.write_text = with_checkpointing
        if scenario == "labelled":
            os.environ["FLINK_PLUGINS_DIR"] = str(_enricher_plugin(folder, version))
        try:
            with flink_cluster(version, folder) as (url, home, env):
                pathlib.Path.write_text = original
                classes = folder / "classes"
                classes.mkdir()
                sources = ([HERE / "jobs" / "StuckJob.java"] if scenario == "stuck"
                           else [ROOT / "tests" / "apps" / "live_jobs" / "ThrowingJob.java"])
                subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{home}/lib/*", *map(str, sources)],
                               check=True, timeout=180)
                subprocess.run(["jar", "cf", str(folder / "job.jar"), "-C", str(classes), "."], check=True)
                main = "com.example.orders.StuckJob" if scenario == "stuck" else "ThrowingJob"
                subprocess.run([str(home / "bin" / "flink"), "run", "-d", "-c", main, str(folder / "job.jar")],
                               env=env, check=True, capture_output=True, timeout=120)
                _wait_for(url, scenario)
                time.sleep(3)
                opened = rest.RestClient._open

                def tee(self, path):
                    response = opened(self, path)
                    body = response.read()
                    name = urllib.parse.unquote(path)
                    dest = (out / "logs" / name.rsplit("/", 1)[1] if "/logs/" in name
                            else out / name.lstrip("/").replace("/", "__").replace("?", "__").replace("=", "__"))
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(body)
                    return _Replay(response, body)

                rest.RestClient._open = tee
                try:
                    rest.pull(url, folder / "bundle")
                finally:
                    rest.RestClient._open = opened
        finally:
            pathlib.Path.write_text = original
    home = ROOT / "build" / "flink" / version / "pyflink"
    _neutral_paths(out, str(folder), str(home.resolve()), str(home))
    return out


def _enricher_plugin(folder: pathlib.Path, version: str) -> pathlib.Path:
    """A plugins folder holding the failure enricher as the plugin Flink loads (its factory named as a service)."""
    home = ROOT / "build" / "flink" / version / "pyflink"
    classes = folder / "enricher"
    services = classes / "META-INF" / "services"
    services.mkdir(parents=True)
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{home}/lib/*",
                    str(HERE / "jobs" / "OrdersFailureEnricher.java")], check=True, timeout=180)
    (services / "org.apache.flink.core.failure.FailureEnricherFactory").write_text(
        "com.example.orders.OrdersFailureEnricher$Factory\n")
    plugins = folder / "plugins"
    (plugins / "orders-failure-enricher").mkdir(parents=True)
    subprocess.run(["jar", "cf", str(plugins / "orders-failure-enricher" / "enricher.jar"), "-C", str(classes), "."],
                   check=True)
    return plugins


def _wait_for(url: str, scenario: str) -> None:
    """Until the job's task hangs in cancellation (stuck) or the job FAILED (labelled)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        jobs = _get(f"{url}/jobs/overview")["jobs"]
        details = _get(f"{url}/jobs/{jobs[0]['jid']}") if jobs else {}
        if scenario == "stuck" and any((v.get("tasks") or {}).get("CANCELING") for v in details.get("vertices", [])):
            return
        if scenario == "labelled" and details.get("state") == "FAILED":
            return
        time.sleep(0.5)
    raise SystemExit(f"the job never reached the moment of the {scenario} scenario")


def _neutral_paths(out: pathlib.Path, *paths: str) -> None:
    """The run's own folders as /data/flink and the installation as /opt/flink, as in the other recordings."""
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            for old, new in ((paths[1], "/opt/flink"), (paths[2], "/opt/flink"), (paths[0], "/data/flink")):
                text = text.replace(old.encode(), new.encode())
            path.write_bytes(text)


class _Replay:
    def __init__(self, response, body):
        self.status, self._body = response.status, body
        response.close()

    def read(self, size=-1):
        chunk, self._body = (self._body, b"") if size is None or size < 0 else (self._body[:size], self._body[size:])
        return chunk

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    print(record(sys.argv[1] if len(sys.argv) > 1 else "1.20.3", sys.argv[2] if len(sys.argv) > 2 else "stuck"))
