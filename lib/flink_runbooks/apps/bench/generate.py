"""Write a realistic incident bundle of a given size: one JobManager and many TaskManagers, rolled and gzipped
files, three layouts, long stack traces, and two genuine incidents injected at known places.

Two shapes: ``healthy`` (below) and ``crashloop`` (:mod:`.crashloop`: every process restarts every few minutes, each
start replays a genuine start-up section, each TaskManager death restarts the job), which ends with the same
incident.

Layout of a bundle::

    flink-conf.yaml                                  the configuration of the injected incident
    flink-flink-client-vm.log                        the client log of the injected incident
    jobmanager/flink-flink-standalonesession-0-flink-jm.log      current file: the incident's JobManager log
    jobmanager/flink-flink-standalonesession-0-flink-jm.log.N    rolled files: the history before it
    taskmanager-00/...taskexecutor-0-flink-tm-00.log             current file: the incident's TaskManager log
    taskmanager-NN/...                                           log4j2 layout, Kubernetes CRI prefix or JSON

The history is noise a healthy job writes: user-code INFO lines, checkpoint lifecycle, Kafka chatter and WARN
records with 30-frame stack traces. Injected incidents keep their own lines; only their timestamps are shifted so
they fit the timeline. Generation is deterministic for a given size, seed and shape.
"""
from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import pathlib
import random
import re
import shutil

DATA = pathlib.Path(__file__).resolve().parents[4] / "data"
# The incident the bundle ends with (genuine Flink 1.20.3 logs) and one found earlier in a rolled, gzipped file.
MAIN_INCIDENT = DATA / "checkpoint-tolerable-failure-threshold" / "storage-permission-denied"
EARLIER_INCIDENT = DATA / "kafka-offset-commit-failure" / "coordinator-unavailable-rolling-restart"

# Flink's log4j default rolls at 100 MB; this cluster rolls at 32 MB so every size has rolled and gzipped files.
ROLL_BYTES = 32 * 1024 * 1024
JOBMANAGER_SHARE = 0.08
TASKMANAGERS = 12
SHAPES = ("healthy", "crashloop")
NOISE_JOB = "7d3c2f0e8b1a4c6d9e5f0a1b2c3d4e5f"
_LOG4J_TS = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(\d{3})")

_FRAMES = [
    "java.base/sun.nio.ch.NioSocketImpl.timedRead(NioSocketImpl.java:288) ~[?:?]",
    "java.base/sun.nio.ch.NioSocketImpl.implRead(NioSocketImpl.java:314) ~[?:?]",
    "java.base/sun.nio.ch.NioSocketImpl.read(NioSocketImpl.java:355) ~[?:?]",
    "java.base/sun.nio.ch.NioSocketImpl$1.read(NioSocketImpl.java:808) ~[?:?]",
    "java.base/java.net.Socket$SocketInputStream.read(Socket.java:966) ~[?:?]",
    "java.base/java.io.BufferedInputStream.fill(BufferedInputStream.java:244) ~[?:?]",
    "java.base/java.io.BufferedInputStream.read1(BufferedInputStream.java:284) ~[?:?]",
    "java.base/java.io.BufferedInputStream.read(BufferedInputStream.java:343) ~[?:?]",
    "java.base/sun.net.www.http.HttpClient.parseHTTPHeader(HttpClient.java:791) ~[?:?]",
    "java.base/sun.net.www.http.HttpClient.parseHTTP(HttpClient.java:726) ~[?:?]",
    "java.base/sun.net.www.protocol.http.HttpURLConnection.getInputStream0(HttpURLConnection.java:1688) ~[?:?]",
    "java.base/sun.net.www.protocol.http.HttpURLConnection.getInputStream(HttpURLConnection.java:1589) ~[?:?]",
    "java.base/java.net.HttpURLConnection.getResponseCode(HttpURLConnection.java:529) ~[?:?]",
    "com.example.orders.CustomerClient.fetch(CustomerClient.java:88) ~[orders-enricher-4.2.1.jar:?]",
    "com.example.orders.CustomerClient.lookup(CustomerClient.java:61) ~[orders-enricher-4.2.1.jar:?]",
    "com.example.orders.EnrichmentFunction.processElement(EnrichmentFunction.java:142) ~[orders-enricher-4.2.1.jar:?]",
    "com.example.orders.EnrichmentFunction.processElement(EnrichmentFunction.java:37) ~[orders-enricher-4.2.1.jar:?]",
    "org.apache.flink.streaming.api.operators.KeyedProcessOperator.processElement(KeyedProcessOperator.java:83) ~[flink-dist-1.20.3.jar:1.20.3]",
    "org.apache.flink.streaming.runtime.tasks.OneInputStreamTask$StreamTaskNetworkOutput.emitRecord(OneInputStreamTask.java:238) ~[flink-dist-1.20.3.jar:1.20.3]",
    "org.apache.flink.streaming.runtime.io.AbstractStreamTaskNetworkInput.processElement(AbstractStreamTaskNetworkInput.java:157) ~[flink-dist-1.20.3.jar:1.20.3]",
    "org.apache.flink.streaming.runtime.io.AbstractStreamTaskNetworkInput.emitNext(AbstractStreamTaskNetworkInput.java:114) ~[flink-dist-1.20.3.jar:1.20.3]",
    "org.apache.flink.streaming.runtime.io.StreamOneInputProcessor.processInput(StreamOneInputProcessor.java:65) ~[flink-dist-1.20.3.jar:1.20.3]",
    "org.apache.flink.streaming.runtime.tasks.StreamTask.processInput(StreamTask.java:638) ~[flink-dist-1.20.3.jar:1.20.3]",
    "org.apache.flink.streaming.runtime.tasks.mailbox.MailboxProcessor.runMailboxLoop(MailboxProcessor.java:231) ~[flink-dist-1.20.3.jar:1.20.3]",
    "org.apache.flink.streaming.runtime.tasks.StreamTask.runMailboxLoop(StreamTask.java:973) ~[flink-dist-1.20.3.jar:1.20.3]",
    "org.apache.flink.streaming.runtime.tasks.StreamTask.invoke(StreamTask.java:917) ~[flink-dist-1.20.3.jar:1.20.3]",
    "org.apache.flink.runtime.taskmanager.Task.runWithSystemExitMonitoring(Task.java:970) ~[flink-dist-1.20.3.jar:1.20.3]",
    "org.apache.flink.runtime.taskmanager.Task.doRun(Task.java:949) ~[flink-dist-1.20.3.jar:1.20.3]",
    "org.apache.flink.runtime.taskmanager.Task.run(Task.java:763) ~[flink-dist-1.20.3.jar:1.20.3]",
    "java.base/java.lang.Thread.run(Thread.java:840) [?:?]",
]


class _Clock:
    """Millisecond clock with cached second formatting (formatting a datetime per line would dominate)."""

    def __init__(self, start: dt.datetime) -> None:
        self.ms = int(start.timestamp() * 1000)
        self._second = None
        self._text = ""

    def tick(self, ms: int) -> None:
        self.ms += ms

    def log4j(self) -> str:
        second, milli = divmod(self.ms, 1000)
        if second != self._second:
            self._second = second
            self._text = dt.datetime.fromtimestamp(second, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        return f"{self._text},{milli:03d}"

    def iso(self) -> str:
        return self.log4j().replace(" ", "T").replace(",", ".") + "Z"


def _taskmanager_noise(rng: random.Random, clock: _Clock, subtask: int) -> list[str]:
    """One healthy stretch of a TaskManager log in log4j2 layout: mostly user code, some Flink and Kafka, a WARN
    with a stack trace now and then."""
    lines = []
    for _ in range(200):
        clock.tick(rng.randint(1, 40))
        ts = clock.log4j()
        roll = rng.random()
        if roll < 0.62:
            lines.append(f"{ts} INFO  com.example.orders.EnrichmentFunction                     [] - enriched order "
                         f"{rng.randint(10**8, 10**9)} for customer C{rng.randint(1, 10**6):07d} in "
                         f"{rng.randint(1, 90)} ms (cache hit ratio {rng.random():.3f})")
        elif roll < 0.85:
            lines.append(f"{ts} INFO  com.example.orders.OrderValidator                         [] - validated batch "
                         f"{rng.randint(1, 10**7)}: {rng.randint(100, 5000)} records, {rng.randint(0, 9)} rejected "
                         f"(schema v{rng.randint(3, 7)}, partition orders-{rng.randint(0, 47)})")
        elif roll < 0.93:
            lines.append(f"{ts} INFO  org.apache.flink.streaming.api.functions.sink.filesystem.Buckets [] - Subtask "
                         f"{subtask} checkpointing for checkpoint with id={rng.randint(1, 10**5)} (max part counter="
                         f"{rng.randint(1, 10**4)}).")
        elif roll < 0.99:
            lines.append(f"{ts} INFO  org.apache.kafka.clients.consumer.internals.SubscriptionState [] - [Consumer "
                         f"clientId=orders-enricher-{subtask}, groupId=orders-enricher] Resetting offset for partition "
                         f"orders-{rng.randint(0, 47)} to position FetchPosition{{offset={rng.randint(10**6, 10**9)}, "
                         f"offsetEpoch=Optional.empty, currentLeader=LeaderAndEpoch{{leader=Optional[kafka-2:9092 "
                         f"(id: 2 rack: null)], epoch=7}}}}.")
        else:
            lines.append(f"{ts} WARN  com.example.orders.EnrichmentFunction                     [] - customer service "
                         f"lookup failed for customer C{rng.randint(1, 10**6):07d}, retrying in 200 ms")
            lines.append("java.net.SocketTimeoutException: Read timed out")
            lines.extend("\tat " + f for f in _FRAMES)
    return lines


def _jobmanager_noise(rng: random.Random, clock: _Clock, checkpoint: list[int], checkpoints: int = 40) -> list[str]:
    """A healthy JobManager: checkpoints triggered and completed every few seconds, source coordinator chatter."""
    lines = []
    for _ in range(checkpoints):
        checkpoint[0] += 1
        n = checkpoint[0]
        clock.tick(rng.randint(2000, 3000))
        trigger = clock.ms
        lines.append(f"{clock.log4j()} INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Triggering "
                     f"checkpoint {n} (type=CheckpointType{{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}}) "
                     f"@ {trigger} for job {NOISE_JOB}.")
        for part in range(rng.randint(2, 5)):
            clock.tick(rng.randint(1, 30))
            lines.append(f"{clock.log4j()} INFO  org.apache.flink.runtime.source.coordinator.SourceCoordinator [] - "
                         f"Marking checkpoint {n} as completed for source Source: orders[{part + 1}].")
        duration = rng.randint(80, 900)
        clock.tick(duration)
        lines.append(f"{clock.log4j()} INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Completed "
                     f"checkpoint {n} for job {NOISE_JOB} ({rng.randint(10**6, 10**8)} bytes, checkpointDuration="
                     f"{duration} ms, finalizationTime={rng.randint(1, 20)} ms).")
        for _ in range(rng.randint(3, 8)):
            clock.tick(rng.randint(1, 200))
            if rng.random() < 0.95:  # resource requirements change rarely on a healthy job
                continue
            lines.append(f"{clock.log4j()} INFO  org.apache.flink.runtime.resourcemanager.slotmanager."
                         f"FineGrainedSlotManager [] - Received resource requirements from job {NOISE_JOB}: "
                         f"[ResourceRequirement{{resourceProfile=ResourceProfile{{UNKNOWN}}, numberOfRequiredSlots="
                         f"{rng.randint(8, 48)}}}]")
    return lines


def _as_cri(lines: list[str], clock: _Clock) -> list[str]:
    """What kubelet writes for a container: RFC 3339 time, stream, full/partial flag, then the line."""
    prefix = clock.iso().replace("Z", "123456Z")
    return [f"{prefix} stdout F {line}" for line in lines]


def _as_json(lines: list[str]) -> list[str]:
    """log4j2 EcsLayout: one JSON object per record, the stack trace inside the record."""
    out: list[str] = []
    for line in lines:
        m = re.match(r"^(\S+ \S+) (\w+)\s+(\S+)\s+\[\] - (.*)$", line)
        if m:
            ts = m.group(1).replace(" ", "T").replace(",", ".") + "Z"
            out.append(json.dumps({"@timestamp": ts, "ecs.version": "1.2.0", "log.level": m.group(2),
                                   "message": m.group(4), "process.thread.name": "Enrichment (3/8)#0",
                                   "log.logger": m.group(3)}, separators=(",", ":")))
        elif out:
            # A continuation line belongs to the previous record's stack trace.
            record = json.loads(out[-1])
            trace = record.get("error.stack_trace")
            if trace is None:
                record["error.type"], _, record["error.message"] = line.partition(": ")
                record["error.stack_trace"] = line
            else:
                record["error.stack_trace"] = trace + "\n" + line
            out[-1] = json.dumps(record, separators=(",", ":"))
    return out


def _shift_timestamps(lines: list[str], delta_ms: int) -> list[str]:
    out = []
    for line in lines:
        m = _LOG4J_TS.match(line)
        if m:
            when = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
            ms = int(when.timestamp() * 1000) + int(m.group(2)) + delta_ms
            stamp = dt.datetime.fromtimestamp(ms // 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            line = f"{stamp},{ms % 1000:03d}" + line[m.end():]
        out.append(line)
    return out


def _first_ms(lines: list[str]) -> int:
    for line in lines:
        m = _LOG4J_TS.match(line)
        if m:
            when = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
            return int(when.timestamp() * 1000) + int(m.group(2))
    raise ValueError("no log4j timestamp in the injected lines")


def _read_lines(path: pathlib.Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return fh.read().splitlines()


class _RolledWriter:
    """Writes one process's history into rolled files of at most ROLL_BYTES: ``name.N`` (oldest) ... ``name.1``,
    and ``name`` itself when the history reaches up to now."""

    def __init__(self, directory: pathlib.Path, name: str, budget: int, gzip_oldest: bool, newest_is_current: bool) -> None:
        self.directory, self.name, self.budget, self.gzip_oldest = directory, name, budget, gzip_oldest
        self.newest_is_current = newest_is_current
        self.files: list[tuple[pathlib.Path, int]] = []  # (path, lines) oldest first
        self.written = 0
        self._fh = None
        self._file_bytes = 0
        self._lines = 0

    def _open(self) -> None:
        path = self.directory / f"{self.name}.part{len(self.files)}"
        self._fh = open(path, "w", encoding="utf-8")
        self.files.append((path, 0))
        self._file_bytes = 0
        self._lines = 0

    def line_number(self) -> tuple[int, int]:
        """(index of the file being written, 1-based number of the next line in it)."""
        return len(self.files) - 1, self._lines + 1

    def write(self, lines: list[str]) -> None:
        self.write_text("\n".join(lines) + "\n", len(lines))

    def write_text(self, text: str, lines: int) -> None:
        """Write ``lines`` lines already joined, each ending with a newline."""
        if self._fh is None or self._file_bytes >= ROLL_BYTES:
            self._close_current()
            self._open()
        self._fh.write(text)
        size = len(text.encode("utf-8")) if not text.isascii() else len(text)
        self._file_bytes += size
        self.written += size
        self._lines += lines

    def full(self) -> bool:
        return self.written >= self.budget

    def _close_current(self) -> None:
        if self._fh is not None:
            self._fh.close()
            path, _ = self.files[-1]
            self.files[-1] = (path, self._lines)
            self._fh = None

    def finish(self) -> list[pathlib.Path]:
        """Rename the parts to rolled names (``.1`` is the newest rolled file) and gzip the oldest if asked."""
        self._close_current()
        final = []
        count = len(self.files)
        for index, (path, _lines) in enumerate(self.files):
            age = count - index - (1 if self.newest_is_current else 0)
            target = self.directory / (f"{self.name}.{age}" if age else self.name)
            path.rename(target)
            if index == 0 and self.gzip_oldest and age:
                gz = target.with_name(target.name + ".gz")
                # mtime=0: the same bundle byte for byte at every run
                with open(target, "rb") as src, open(gz, "wb") as raw, \
                        gzip.GzipFile(target.name, "wb", compresslevel=1, fileobj=raw, mtime=0) as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                target.unlink()
                target = gz
            final.append(target)
        return final


def generate(out: pathlib.Path, size_bytes: int, seed: int = 7, shape: str = "healthy") -> dict:
    """Write a bundle of about ``size_bytes`` of logs (uncompressed) into ``out`` and return its manifest: the
    shape, where each injected incident sits (file, first line), the process starts written before the incident
    and the exact uncompressed log bytes."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r} (one of {', '.join(SHAPES)})")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    if shape == "crashloop":
        from flink_runbooks.apps.bench.crashloop import generate_crashloop

        return generate_crashloop(out, size_bytes, seed)
    rng = random.Random(seed)
    main_logs = main_incident_logs(out)
    jm_incident = _read_lines(main_logs["flink-flink-standalonesession-0-vm.log"])
    tm_incident = _read_lines(main_logs["flink-flink-taskexecutor-0-vm.log"])
    incident_start = dt.datetime.fromtimestamp(_first_ms(jm_incident) / 1000, dt.timezone.utc)

    history_bytes = max(size_bytes - sum(p.stat().st_size for p in main_logs.values()), 0)
    # Every process's history ends where the incident starts; roughly 40 bytes of log per millisecond of cluster
    # time (the same rate at every size, so bigger bundles cover a longer history).
    span_ms = max(history_bytes // 40, 60_000)
    history_start = incident_start - dt.timedelta(milliseconds=span_ms)
    manifest = {"size_bytes": size_bytes, "seed": seed, "shape": "healthy", "starts": 0, "injected": [], "files": 0}
    log_bytes = sum(p.stat().st_size for p in main_logs.values())

    jm_dir = out / "jobmanager"
    jm_dir.mkdir()
    jm_name = "flink-flink-standalonesession-0-flink-jm.log"
    jm = _RolledWriter(jm_dir, jm_name, int(history_bytes * JOBMANAGER_SHARE), gzip_oldest=False,
                        newest_is_current=False)
    clock, checkpoint = _Clock(history_start), [0]
    while not jm.full():
        jm.write(_jobmanager_noise(rng, clock, checkpoint))
    jm.finish()
    log_bytes += jm.written
    (jm_dir / jm_name).write_text("\n".join(jm_incident) + "\n", encoding="utf-8")
    manifest["injected"].append({"incident": str(MAIN_INCIDENT.relative_to(DATA)),
                                 "file": f"jobmanager/{jm_name}", "line": 1})

    tm_budget = int(history_bytes * (1 - JOBMANAGER_SHARE) / TASKMANAGERS)
    earlier = {p.name: _read_lines(p) for p in EARLIER_INCIDENT.glob("taskmanager-*.log")}
    for tm in range(TASKMANAGERS):
        tm_dir = out / f"taskmanager-{tm:02d}"
        tm_dir.mkdir()
        layout = "cri" if tm % 6 == 4 else "json" if tm % 6 == 5 else "log4j2"
        name = {"cri": f"flink-taskmanager-{tm:02d}-container.log",
                "json": f"flink-flink-taskexecutor-0-flink-tm-{tm:02d}.json.log"}.get(
            layout, f"flink-flink-taskexecutor-0-flink-tm-{tm:02d}.log")
        writer = _RolledWriter(tm_dir, name, tm_budget, gzip_oldest=tm % 3 == 0, newest_is_current=tm != 0)
        clock = _Clock(history_start + dt.timedelta(milliseconds=rng.randint(0, 5000)))
        inject_earlier = tm == 3
        while not writer.full():
            block = _taskmanager_noise(rng, clock, tm)
            if layout == "cri":
                block = _as_cri(block, clock)
            elif layout == "json":
                block = _as_json(block)
            writer.write(block)
            if inject_earlier and writer.written >= min(tm_budget, ROLL_BYTES) // 2:
                # In the middle of the oldest (gzipped) file: a Kafka commit failure streak that ended by itself.
                inject_earlier = False
                file_index, line = writer.line_number()
                lines = next(iter(earlier.values()))
                shifted = _shift_timestamps(lines, clock.ms - _first_ms(lines))
                writer.write(shifted)
                clock.tick(_last_ms(shifted) - _first_ms(shifted))
                manifest["injected"].append({"incident": str(EARLIER_INCIDENT.relative_to(DATA)),
                                             "file_index": file_index, "line": line, "taskmanager": tm})
        rolled = writer.finish()
        log_bytes += writer.written
        for entry in manifest["injected"]:
            if entry.get("taskmanager") == tm and "file_index" in entry:
                entry["file"] = str(rolled[entry.pop("file_index")].relative_to(out))
                entry.pop("taskmanager")
        if tm == 0:
            (tm_dir / name).write_text("\n".join(tm_incident) + "\n", encoding="utf-8")
            manifest["injected"].append({"incident": str(MAIN_INCIDENT.relative_to(DATA)),
                                         "file": f"taskmanager-00/{name}", "line": 1})
    return finish_manifest(out, manifest, log_bytes)


def finish_manifest(out: pathlib.Path, manifest: dict, log_bytes: int) -> dict:
    """The manifest with what was written: files, bytes on disk, uncompressed log bytes."""
    files = [p for p in out.rglob("*") if p.is_file()]
    manifest["files"] = len(files)
    manifest["bytes_on_disk"] = sum(p.stat().st_size for p in files)
    manifest["log_bytes"] = log_bytes
    return manifest


def main_incident_logs(out: pathlib.Path) -> dict[str, pathlib.Path]:
    """Copy the main incident's configuration and client log into ``out``; its log files by name."""
    main_logs = {p.name: p for p in (MAIN_INCIDENT / "log").iterdir()}
    shutil.copy(MAIN_INCIDENT / "flink-conf.yaml", out / "flink-conf.yaml")
    shutil.copy(main_logs["flink-flink-client-vm.log"], out / "flink-flink-client-vm.log")
    return main_logs


def _last_ms(lines: list[str]) -> int:
    return _first_ms(lines[::-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a benchmark incident bundle; print its manifest.")
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--size", default="100MB", help="uncompressed size, e.g. 100MB, 1GB, 10GB")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--shape", choices=SHAPES, default="healthy",
                        help="healthy: a long-running cluster; crashloop: processes restarting every few minutes")
    args = parser.parse_args(argv)
    manifest = generate(args.out, parse_size(args.size), args.seed, args.shape)
    print(json.dumps(manifest, indent=2))
    return 0


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(?i)\s*(\d+(?:\.\d+)?)\s*([KMG]?)B?\s*", text)
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 100MB, 1GB)")
    return int(float(m.group(1)) * 1024 ** " KMG".index(m.group(2).upper() or " "))


if __name__ == "__main__":
    raise SystemExit(main())
