"""Helpers several test modules share: a static file server and real Chromium for page tests, and the processes a
run left behind."""
from __future__ import annotations

import contextlib
import functools
import http.server
import os
import pathlib
import tempfile
import threading
from typing import Iterator

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium tries to reach Google's hosts, which a closed network refuses.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve_directory(directory: pathlib.Path) -> Iterator[str]:
    """``directory`` over HTTP on 127.0.0.1 (a free port) for as long as the block runs; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_QuietHandler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


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


def processes_marked(marker: str) -> list[int]:
    """Processes other than this one whose environment carries ``marker``: what a run started and left running."""
    found = []
    for proc in pathlib.Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if marker.encode() in (proc / "environ").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                pass
    return found
