"""The crash-looping shape of a benchmark bundle: what a troubled standalone cluster leaves behind.

A JobManager and eight TaskManagers on one machine restart again and again. Every TaskManager lives a few minutes
of cluster time: it replays the genuine start-up section of a Flink 1.20.3 TaskManager log (banner, JVM options,
classpath, program arguments, loaded configuration, plugins, actor systems, memory configuration, up to its
registration at the ResourceManager), writes ordinary work, then stops on SIGTERM with the genuine shutdown lines.
Each start gets its own ResourceID, ports, registration id and directories, as a real restart does; the other lines
stay as Flink wrote them.

The JobManager restarts more rarely, replaying its own start-up and shutdown sections. It registers every
TaskManager start, and for every TaskManager death it writes the job's restart as Flink does: the peer task that
lost its input fails with the genuine ``RemoteTransportException``, the job switches to RESTARTING, every task is
cancelled, and after the restart delay the job restores the latest checkpoint and redeploys every task once all
TaskManagers are back. Checkpoints trigger and complete between restarts.

The bundle ends with the same incident as the healthy shape (the JobManager and TaskManager logs of a checkpoint
storage failure as the current files, its configuration and client log beside them), and a Kafka commit failure
streak sits in the oldest, gzipped file of one TaskManager.

Files are named as Flink names them for processes on one host ``vm``::

    jobmanager/flink-flink-standalonesession-0-vm.log        current file: the incident's JobManager log
    jobmanager/flink-flink-standalonesession-0-vm.log.N      rolled files: the history before it
    taskmanager-NN/flink-flink-taskexecutor-N-vm.log[.N]     TaskManager N (0: the incident's), oldest of every
                                                             third gzipped
"""
from __future__ import annotations

import bisect
import datetime as dt
import heapq
import random
import re
import pathlib

from flink_runbooks.apps.bench.generate import (
    DATA, EARLIER_INCIDENT, MAIN_INCIDENT, NOISE_JOB, ROLL_BYTES, _Clock, _first_ms, _jobmanager_noise, _last_ms,
    _LOG4J_TS, _read_lines, _RolledWriter, _shift_timestamps, _taskmanager_noise, finish_manifest, main_incident_logs,
)

TASKMANAGERS = 8
EARLIER_TASKMANAGER = 3  # its oldest file is gzipped (every third TaskManager's is)
TM_LIFE_MS = (180_000, 420_000)  # a TaskManager is stopped every three to seven minutes
TM_RESTART_GAP_MS = (4_000, 15_000)  # until its supervisor has started it again
JM_LIFE_MS = (40 * 60_000, 90 * 60_000)
JM_RESTART_GAP_MS = (8_000, 20_000)
RESTART_DELAY_MS = 5_000  # as restart-strategy.fixed-delay.delay in the replayed configuration
RUNNING_SHARE = 0.6  # of the history the job runs and checkpoints; the rest it waits for a TaskManager to come back
JOB_RESTART_BYTES = 36_000  # what one job restart adds to the JobManager log (failure, cancellation, redeployment)
# The history ends before the incident starts: the last JobManager shutdown, then the incident's own start-up.
HISTORY_END_BEFORE_INCIDENT_MS = 40_000

JOB_NAME = "orders-enricher"
PARALLELISM = 8
SOURCE = "Source: orders"
# (task name, vertex id): the source is chained with the enrichment, the sink writer reads from it by key.
VERTICES = (("Source: orders -> Enrichment", "cbc357ccb763df2852fee8c4fc7d55f2"),
            ("Sink: enriched-orders: Writer", "0a448493b4782967b150582570326227"))
CHECKPOINT_DIR = "file:/data/flink/ckpt-threshold-1.20.3/ckpt"
SLOT_PROFILE = ("ResourceProfile{cpuCores=1, taskHeapMemory=384.000mb (402653174 bytes), taskOffHeapMemory=0 bytes, "
                "managedMemory=512.000mb (536870920 bytes), networkMemory=128.000mb (134217730 bytes)}")

# Where the genuine lines come from.
_TM_EXAMPLE = MAIN_INCIDENT / "log" / "flink-flink-taskexecutor-0-vm.log"
_JM_EXAMPLE = MAIN_INCIDENT / "log" / "flink-flink-standalonesession-0-vm.log"
_TM_LOST_EXAMPLE = DATA / "taskmanager-lost" / "process-killed-kill9" / "log" / "flink-flink-standalonesession-0-vm.log"

_EG = "org.apache.flink.runtime.executiongraph.ExecutionGraph"
_JOBMASTER = "org.apache.flink.runtime.jobmaster.JobMaster"
_DISPATCHER = "org.apache.flink.runtime.dispatcher.StandaloneDispatcher"
_RM = "org.apache.flink.runtime.resourcemanager.StandaloneResourceManager"
_SLOTS = "org.apache.flink.runtime.resourcemanager.slotmanager.FineGrainedSlotManager"
_SYNCER = "org.apache.flink.runtime.resourcemanager.slotmanager.DefaultSlotStatusSyncer"
_COORDINATOR = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator"
_SOURCE_COORDINATOR = "org.apache.flink.runtime.source.coordinator.SourceCoordinator"
_REMOTING = "org.apache.pekko.remote.ReliableDeliverySupervisor"

_UUID = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![0-9A-Za-z])")
_HEX32 = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{32}(?![0-9A-Za-z])")
_PORT = re.compile(r"(?:localhost:|127\.0\.0\.1:|port: )(\d{5})(?!\d)")
_RESOURCE_SUFFIX = re.compile(r"localhost:\d{5}-([0-9a-f]{6})(?![0-9a-f])")
_JAAS = re.compile(r"jaas-(\d+)\.conf")


class _Stamp:
    """log4j timestamps for milliseconds since the epoch, the second formatted once."""

    def __init__(self) -> None:
        self._second = None
        self._text = ""

    def __call__(self, ms: int) -> str:
        second, milli = divmod(ms, 1000)
        if second != self._second:
            self._second = second
            self._text = dt.datetime.fromtimestamp(second, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        return f"{self._text},{milli:03d}"


class _Section:
    """Consecutive lines of a genuine log, replayed at another time with other per-start values.

    The lines are cut once into literal text, timestamp offsets and the values a new process start changes, so a
    replay is one join."""

    def __init__(self, lines: list[str], variables: dict[str, str]) -> None:
        first = _first_ms(lines)
        self.duration_ms = _last_ms(lines) - first
        self.lines = len(lines)
        token = re.compile("|".join(rf"(?<![0-9A-Za-z]){re.escape(v)}(?![0-9A-Za-z])"
                                    for v in sorted(variables, key=len, reverse=True)) or r"(?!)")
        parts: list = []
        for line in lines:
            m = _LOG4J_TS.match(line)
            if m:
                when = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
                parts.append(int(when.timestamp() * 1000) + int(m.group(2)) - first)
                line = line[m.end():]
            pos = 0
            for t in token.finditer(line):
                parts.append(line[pos:t.start()])
                parts.append((t.group(),))
                pos = t.end()
            parts.append(line[pos:] + "\n")
        self._parts = _merge_literals(parts)

    def render(self, start_ms: int, values: dict[str, str], stamp: _Stamp) -> str:
        out = []
        for part in self._parts:
            kind = type(part)
            if kind is str:
                out.append(part)
            elif kind is int:
                out.append(stamp(start_ms + part))
            else:
                out.append(values[part[0]])
        return "".join(out)


def _merge_literals(parts: list) -> list:
    merged: list = []
    for part in parts:
        if type(part) is str and merged and type(merged[-1]) is str:
            merged[-1] += part
        elif part != "":
            merged.append(part)
    return merged


class _ProcessLog:
    """The start-up and shutdown sections of one genuine process log and the values that differ per start: ports,
    ResourceID suffix, ids, temporary directories. ``fixed`` values are supplied by the caller at every start."""

    def __init__(self, path: pathlib.Path, startup_ends: str, startup_inclusive: bool, fixed: tuple[str, ...] = ()):
        lines = _read_lines(path)
        end = next(i for i, line in enumerate(lines) if startup_ends in line) + (1 if startup_inclusive else 0)
        shutdown = next(i for i, line in enumerate(lines) if "RECEIVED SIGNAL 15: SIGTERM" in line)
        startup, tail = lines[:end], lines[shutdown:]
        text = "\n".join(startup + tail)
        self.start_stop_bytes = len(text) + 1
        self.kinds: dict[str, str] = {}
        for rx, kind in ((_UUID, "uuid"), (_HEX32, "hex32"), (_PORT, "port"), (_RESOURCE_SUFFIX, "hex6"),
                         (_JAAS, "digits")):
            for m in rx.finditer(text):
                value = m.group(1) if rx.groups else m.group(0)
                if value.strip("0-") and value not in self.kinds:
                    self.kinds[value] = kind
        for value in fixed:
            self.kinds[value] = "fixed"
        self.startup = _Section(startup, self.kinds)
        self.shutdown = _Section(tail, self.kinds)

    def new_values(self, rng: random.Random, fixed: dict[str, str]) -> dict[str, str]:
        values = {}
        for value, kind in self.kinds.items():
            if kind == "fixed":
                values[value] = fixed[value]
            elif kind == "uuid":
                h = f"{rng.getrandbits(128):032x}"  # as java.util.UUID.randomUUID(): version 4, IETF variant
                values[value] = f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"
            elif kind == "hex32":
                values[value] = f"{rng.getrandbits(128):032x}"
            elif kind == "hex6":
                values[value] = f"{rng.getrandbits(24):06x}"
            elif kind == "port":
                values[value] = str(rng.randint(32768, 60999))
            else:
                values[value] = str(rng.randint(10 ** (len(value) - 1), 10 ** len(value) - 1))
        return values


def _group(pattern: str, text: str) -> str:
    return re.search(pattern, text).group(1)


class _Examples:
    """The genuine material of the shape, read once."""

    def __init__(self) -> None:
        jm_text = _JM_EXAMPLE.read_text(encoding="utf-8")
        self.jm_id = _group(r"jm_([0-9a-f]{32})", jm_text)
        self.jobmanager = _ProcessLog(_JM_EXAMPLE, "Registering TaskManager with ResourceID", startup_inclusive=False)
        tm_text = _TM_EXAMPLE.read_text(encoding="utf-8")
        # The TaskManager's log names itself (taskexecutor-0) and its ResourceManager (the JobManager's id).
        self.tm_log_name = "flink-flink-taskexecutor-0-vm"
        self.taskmanager = _ProcessLog(_TM_EXAMPLE, "Successful registration at resource manager",
                                       startup_inclusive=True, fixed=(self.jm_id, self.tm_log_name))
        self.tm_rpc_port, self.tm_resource_suffix = re.search(
            r"Starting TaskManager with ResourceID: localhost:(\d+)-([0-9a-f]+)", tm_text).groups()
        self.tm_data_port = _group(r"listening internally on port: (\d+)", tm_text)
        self.tm_metrics_port = _group(r"flink-metrics@localhost:(\d+)", tm_text)
        self.tm_registration_id = _group(r"under registration id ([0-9a-f]{32})", tm_text)
        # A peer's task loses its input when a TaskManager goes away: the genuine exception and its stack.
        lost = _read_lines(_TM_LOST_EXAMPLE)
        first = next(i for i, line in enumerate(lost) if "RemoteTransportException: Connection unexpectedly closed" in line)
        last = first + 1
        while last < len(lost) and lost[last].startswith("\tat "):
            last += 1
        self.lost_peer = lost[first]
        self.lost_peer_address = re.search(r"'localhost/127\.0\.0\.1:\d+ \[ \S+ \] '", lost[first]).group(0)
        self.lost_peer_stack = "\n".join(lost[first + 1:last])


def _line(ts: str, level: str, logger: str, message: str) -> str:
    return f"{ts} {level:<5} {logger:<60} [] - {message}"


class _TaskManagerStart:
    """What the rest of the cluster knows about one TaskManager start."""

    __slots__ = ("tm", "resource_id", "rpc_port", "metrics_port", "data_port", "registration_id")

    def __init__(self, tm: int, values: dict[str, str], examples: _Examples) -> None:
        self.tm = tm
        self.rpc_port = values[examples.tm_rpc_port]
        self.resource_id = f"localhost:{self.rpc_port}-{values[examples.tm_resource_suffix]}"
        self.metrics_port = values[examples.tm_metrics_port]
        self.data_port = values[examples.tm_data_port]
        self.registration_id = values[examples.tm_registration_id]


def _bytes_per_ms(write_block, blocks: int) -> float:
    """Log bytes per millisecond of cluster time written by ``write_block(rng, clock)``, measured on a sample."""
    rng = random.Random(0)
    clock = _Clock(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    start, written = clock.ms, 0
    for _ in range(blocks):
        written += sum(len(line) + 1 for line in write_block(rng, clock))
    return written / max(clock.ms - start, 1)


class _Plan:
    """The cluster time the history covers, so that the bundle has about the size asked for while every process
    follows the same clock: the history ends shortly before the incident starts."""

    def __init__(self, examples: _Examples, history_bytes: int, incident_start: int, earlier_span: int) -> None:
        # What a TaskManager writes per millisecond: its work, plus a start-up and a shutdown every life.
        mean_life = sum(TM_LIFE_MS) / 2
        mean_cycle = mean_life + sum(TM_RESTART_GAP_MS) / 2 + examples.taskmanager.startup.duration_ms
        work_rate = _bytes_per_ms(lambda r, c: _taskmanager_noise(r, c, 1), 100)
        self.tm_rate = (work_rate * mean_life + examples.taskmanager.start_stop_bytes) / mean_cycle
        # What the JobManager writes: checkpoints while the job runs, a job restart per TaskManager stop.
        jm_rate = RUNNING_SHARE * _bytes_per_ms(lambda r, c: _jobmanager_noise(r, c, [0], 1), 200) \
            + TASKMANAGERS * JOB_RESTART_BYTES / mean_cycle
        # The Kafka streak takes its genuine time (over twenty minutes) and must be over before the history ends:
        # on a short history its TaskManager was started before the oldest JobManager log kept.
        self.earlier_lead = earlier_span + 180_000
        span = max(int(history_bytes / (TASKMANAGERS * self.tm_rate + jm_rate)), 60_000)
        for _ in range(3):  # that TaskManager does no other work while the streak lasts: the others cover for it
            idle = max(earlier_span - max(self.earlier_lead - span, 0), 0)
            span = max(int((history_bytes + self.tm_rate * idle) / (TASKMANAGERS * self.tm_rate + jm_rate)), 60_000)
        self.end = incident_start - HISTORY_END_BEFORE_INCIDENT_MS
        self.start = self.end - span
        self.earlier_deadline = self.end - self.earlier_lead + 60_000
        self.tm_bytes = int(self.tm_rate * span)


def generate_crashloop(out: pathlib.Path, size_bytes: int, seed: int) -> dict:
    """Write the crash-looping bundle into the (empty) directory ``out``; return its manifest."""
    rng = random.Random(seed)
    examples = _Examples()
    stamp = _Stamp()
    main_logs = main_incident_logs(out)
    jm_incident = _read_lines(main_logs["flink-flink-standalonesession-0-vm.log"])
    tm_incident = _read_lines(main_logs["flink-flink-taskexecutor-0-vm.log"])
    earlier = _read_lines(next(iter(sorted(EARLIER_INCIDENT.glob("taskmanager-*.log")))))
    incident_bytes = sum(p.stat().st_size for p in main_logs.values())
    plan = _Plan(examples, max(size_bytes - incident_bytes, 0), _first_ms(jm_incident),
                 _last_ms(earlier) - _first_ms(earlier))
    jm_lives = _jobmanager_lives(rng, examples, plan.start, plan.end)
    manifest = {"size_bytes": size_bytes, "seed": seed, "shape": "crashloop", "starts": 0, "job_restarts": 0,
                "injected": [], "files": 0}
    log_bytes = incident_bytes
    events: list[tuple] = []  # (ms, order, kind, _TaskManagerStart): what the JobManager hears about
    for tm in range(TASKMANAGERS):
        log_bytes += _write_taskmanager(out, tm, rng, examples, stamp, plan, jm_lives, earlier, events, manifest)
        if tm == 0:
            name = "flink-flink-taskexecutor-0-vm.log"
            (out / "taskmanager-00" / name).write_text("\n".join(tm_incident) + "\n", encoding="utf-8")
            manifest["injected"].append({"incident": str(MAIN_INCIDENT.relative_to(DATA)),
                                         "file": f"taskmanager-00/{name}", "line": 1})

    jm_dir = out / "jobmanager"
    jm_dir.mkdir()
    jm_name = "flink-flink-standalonesession-0-vm.log"
    jm_writer = _RolledWriter(jm_dir, jm_name, 0, gzip_oldest=False, newest_is_current=False)
    timeline = _JobManagerTimeline(rng, examples, stamp, jm_writer)
    timeline.run(jm_lives, events)
    jm_writer.finish()
    log_bytes += jm_writer.written
    manifest["starts"] += len(jm_lives)
    manifest["job_restarts"] = timeline.job_restarts
    (jm_dir / jm_name).write_text("\n".join(jm_incident) + "\n", encoding="utf-8")
    manifest["injected"].insert(0, {"incident": str(MAIN_INCIDENT.relative_to(DATA)),
                                    "file": f"jobmanager/{jm_name}", "line": 1})
    return finish_manifest(out, manifest, log_bytes)


def _write_taskmanager(out: pathlib.Path, tm: int, rng: random.Random, examples: _Examples, stamp: _Stamp,
                       plan: _Plan, jm_lives: list[tuple], earlier: list[str], events: list[tuple],
                       manifest: dict) -> int:
    """The rolled history of TaskManager ``tm``: lives of a few minutes, each a replayed start-up, work and a
    shutdown; its starts and stops go to ``events``. TaskManager 0 is stopped before the incident (which starts
    it again); the others are still running. Returns the bytes written."""
    tm_dir = out / f"taskmanager-{tm:02d}"
    tm_dir.mkdir()
    name = f"flink-flink-taskexecutor-{tm}-vm.log"
    writer = _RolledWriter(tm_dir, name, plan.tm_bytes, gzip_oldest=tm % 3 == 0, newest_is_current=tm != 0)
    inject_earlier = tm == EARLIER_TASKMANAGER
    first_start = min(plan.start, plan.end - plan.earlier_lead) if inject_earlier else plan.start
    clock = _Clock(dt.datetime.fromtimestamp(first_start / 1000, dt.timezone.utc))
    clock.tick(3_000 + tm * 700 + rng.randint(0, 500))  # TaskManagers come up after the JobManager
    last_life = False
    while not last_life:
        fixed = {examples.jm_id: _jm_id_at(jm_lives, clock.ms, examples.jm_id),
                 examples.tm_log_name: f"flink-flink-taskexecutor-{tm}-vm"}
        values = examples.taskmanager.new_values(rng, fixed)
        start = _TaskManagerStart(tm, values, examples)
        section = examples.taskmanager.startup
        writer.write_text(section.render(clock.ms, values, stamp), section.lines)
        clock.tick(section.duration_ms)
        manifest["starts"] += 1
        events.append((clock.ms, len(events), "registered", start))
        life_end = clock.ms + rng.randint(*TM_LIFE_MS)
        last_life = life_end >= plan.end
        while clock.ms < min(life_end, plan.end):
            writer.write(_taskmanager_noise(rng, clock, tm))
            if inject_earlier and (writer.written >= min(plan.tm_bytes, ROLL_BYTES) // 2
                                   or clock.ms >= plan.earlier_deadline):
                # In the middle of the oldest (gzipped) file: a Kafka commit failure streak that ended by itself.
                inject_earlier = False
                file_index, line = writer.line_number()
                shifted = _shift_timestamps(earlier, clock.ms - _first_ms(earlier))
                writer.write(shifted)
                clock.tick(_last_ms(shifted) - _first_ms(shifted))
                manifest["injected"].append({"incident": str(EARLIER_INCIDENT.relative_to(DATA)),
                                             "file_index": file_index, "line": line})
        if last_life and tm != 0:
            break  # still running when the incident starts
        clock.tick(rng.randint(50, 400))
        values[examples.jm_id] = _jm_id_at(jm_lives, clock.ms, examples.jm_id)
        section = examples.taskmanager.shutdown
        writer.write_text(section.render(clock.ms, values, stamp), section.lines)
        events.append((clock.ms, len(events), "stopped", start))
        clock.tick(section.duration_ms + rng.randint(*TM_RESTART_GAP_MS))
    rolled = writer.finish()
    for entry in manifest["injected"]:
        if "file_index" in entry:
            entry["file"] = str(rolled[entry.pop("file_index")].relative_to(out))
    return writer.written


def _jobmanager_lives(rng: random.Random, examples: _Examples, history_start: int, history_end: int) -> list[tuple]:
    """(start ms, stop ms, per-start values) of every JobManager life; the last one is stopped after the last
    TaskManager death, just before the incident's JobManager starts."""
    lives = []
    start = history_start
    while True:
        stop = start + rng.randint(*JM_LIFE_MS)
        if stop >= history_end - JM_LIFE_MS[0] // 2:
            stop = history_end + HISTORY_END_BEFORE_INCIDENT_MS // 2
        lives.append((start, stop, examples.jobmanager.new_values(rng, {})))
        if stop > history_end:
            return lives
        start = stop + rng.randint(*JM_RESTART_GAP_MS)


def _jm_id_at(lives: list[tuple], ms: int, jm_id: str) -> str:
    """The ResourceManager a TaskManager talks to at ``ms``: the JobManager started last before it (``jm_id`` is
    the JobManager's id in the genuine log, which each start replaces)."""
    index = max(bisect.bisect_right([life[0] for life in lives], ms) - 1, 0)
    return lives[index][2][jm_id]


class _JobManagerTimeline:
    """Writes the JobManager's history in time order from the TaskManager starts and stops it hears about."""

    def __init__(self, rng: random.Random, examples: _Examples, stamp: _Stamp, writer: _RolledWriter) -> None:
        self.rng, self.examples, self.stamp, self.writer = rng, examples, stamp, writer
        self.clock = _Clock(dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
        self.buffer: list[str] = []
        self.alive = False
        self.registered: dict[int, _TaskManagerStart] = {}  # at the ResourceManager of the running JobManager
        self.running: dict[int, _TaskManagerStart] = {}  # TaskManager processes up, whether registered or not
        self.job_state = "NONE"  # NONE, RUNNING, RESTARTING, SCHEDULED
        self.job_epoch = 0
        self.graph = ""
        self.attempt = 0
        self.deployed: list[tuple[int, int, int]] = []  # (vertex, subtask, tm) of the running attempt
        self.checkpoint = [0]
        self.completed: tuple[int, int] | None = None  # (checkpoint id, trigger ms)
        self.job_restarts = 0

    # -- output

    def _ts(self, low: int = 1, high: int = 15) -> str:
        self.clock.tick(self.rng.randint(low, high))
        return self.clock.log4j()

    def _emit(self, level: str, logger: str, message: str, low: int = 1, high: int = 15) -> None:
        self.buffer.append(_line(self._ts(low, high), level, logger, message))

    def _flush(self, force: bool = False) -> None:
        if self.buffer and (force or len(self.buffer) >= 5000):
            self.writer.write(self.buffer)
            self.buffer = []

    def _write_text(self, text: str, lines: int) -> None:
        self._flush(force=True)
        self.writer.write_text(text, lines)

    # -- the timeline

    def run(self, lives: list[tuple], tm_events: list[tuple]) -> None:
        heap = list(tm_events)
        for start, stop, values in lives:
            heap.append((start, -2, "jm_start", values))
            heap.append((stop, -1, "jm_stop", values))
        heapq.heapify(heap)
        order = len(heap)
        while heap:
            at, _, kind, payload = heapq.heappop(heap)
            self._checkpoints_until(at)
            self.clock.ms = max(self.clock.ms, at)
            later = getattr(self, "_on_" + kind)(payload)
            for when, follow, data in later or ():
                order += 1
                heapq.heappush(heap, (when, order, follow, data))
            self._flush()
        self._flush(force=True)

    def _checkpoints_until(self, at: int) -> None:
        # One checkpoint takes up to about six seconds of JobManager log; stop before the next event.
        while self.job_state == "RUNNING" and self.clock.ms + 6_000 < at:
            lines = _jobmanager_noise(self.rng, self.clock, self.checkpoint, 1)
            trigger = int(lines[0].rsplit("@ ", 1)[1].split(" ", 1)[0])
            self.completed = (self.checkpoint[0], trigger)
            self.buffer.extend(lines)

    def _on_jm_start(self, values: dict[str, str]) -> list[tuple]:
        section = self.examples.jobmanager.startup
        self._write_text(section.render(self.clock.ms, values, self.stamp), section.lines)
        self.clock.tick(section.duration_ms)
        self.alive = True
        self.job_state = "NONE"
        self.registered = {}
        for tm in sorted(self.running):  # TaskManagers that outlived the JobManager register with the new one
            self._register(self.running[tm], 300, 2_000)
        # The client submits the job again a few seconds after the cluster is up.
        return [(self.clock.ms + self.rng.randint(3_000, 8_000), "submit", None)]

    def _on_jm_stop(self, values: dict[str, str]) -> None:
        section = self.examples.jobmanager.shutdown
        self._write_text(section.render(self.clock.ms, values, self.stamp), section.lines)
        self.clock.tick(section.duration_ms)
        self.alive = False
        self.job_state = "NONE"
        self.job_epoch += 1
        self.registered = {}

    def _on_submit(self, _payload) -> list[tuple] | None:
        if not self.alive:
            return None
        job = f"'{JOB_NAME}' ({NOISE_JOB})"
        self._emit("INFO", _DISPATCHER, f"Received JobGraph submission {job}.")
        self._emit("INFO", _DISPATCHER, f"Submitting job {job}.")
        self._emit("INFO", _JOBMASTER, f"Initializing job {job}.", 20, 80)
        # The job sets its own strategy in code (fixed delay, no limit): the cluster's two attempts do not apply.
        self._emit("INFO", _JOBMASTER, f"Using restart back off time strategy FixedDelayRestartBackoffTimeStrategy("
                                       f"maxNumberRestartAttempts=2147483647, backoffTimeMS={RESTART_DELAY_MS}) for "
                                       f"{JOB_NAME} ({NOISE_JOB}).", 40, 90)
        self.graph = f"{self.rng.getrandbits(128):032x}"
        self.attempt, self.checkpoint[0], self.completed = 0, 0, None
        self._emit("INFO", _EG, f"Created execution graph {self.graph} for job {NOISE_JOB}.", 30, 120)
        self._emit("INFO", _COORDINATOR, "No checkpoint found during restore.", 20, 60)
        self._emit("INFO", _JOBMASTER, f"Starting execution of job {job} under job master id "
                                       f"00000000000000000000000000000000.", 5, 30)
        self._emit("INFO", _JOBMASTER, "Starting scheduling with scheduling strategy "
                                       "[org.apache.flink.runtime.scheduler.strategy.PipelinedRegionSchedulingStrategy]")
        self._emit("INFO", _EG, f"Job {JOB_NAME} ({NOISE_JOB}) switched from state CREATED to RUNNING.", 0, 2)
        self._schedule()
        return None

    def _on_registered(self, start: _TaskManagerStart) -> None:
        self.running[start.tm] = start
        if self.alive:
            self._register(start, 0, 30)

    def _register(self, start: _TaskManagerStart, low: int, high: int) -> None:
        self._emit("INFO", _RM, f"Registering TaskManager with ResourceID {start.resource_id} (pekko.tcp://flink@"
                                f"localhost:{start.rpc_port}/user/rpc/taskmanager_0) at ResourceManager", low, high)
        self._emit("INFO", _SLOTS, f"Registering task executor {start.resource_id} under {start.registration_id} at "
                                   f"the slot manager.", 10, 60)
        self.registered[start.tm] = start
        if self.job_state == "SCHEDULED" and len(self.registered) == TASKMANAGERS:
            self._deploy()

    def _on_stopped(self, start: _TaskManagerStart) -> list[tuple] | None:
        self.running.pop(start.tm, None)
        if not self.alive or self.registered.get(start.tm) is not start:
            return None
        self._emit("INFO", _RM, f"Closing TaskExecutor connection {start.resource_id} because: The TaskExecutor is "
                                f"shutting down.", 8, 20)
        self._emit("INFO", _SLOTS, f"Unregistering task executor {start.registration_id} from the slot manager.", 0, 2)
        del self.registered[start.tm]
        if self.job_state != "RUNNING":
            return None
        return [(self._job_fails(start), "restart", self.job_epoch)]

    def _job_fails(self, lost: _TaskManagerStart) -> int:
        """The sink subtask reading from the stopped TaskManager fails, the job cancels every task; returns when
        the restart delay is over."""
        for port in (lost.metrics_port, lost.rpc_port):
            system = "flink-metrics" if port == lost.metrics_port else "flink"
            self._emit("WARN", _REMOTING, f"Association with remote system [pekko.tcp://{system}@localhost:{port}] "
                                          f"has failed, address is now gated for [50] ms. Reason: [Disassociated] ", 5, 30)
        peers = [(v, s, tm) for v, s, tm in self.deployed if v == 1 and tm != lost.tm and tm in self.registered]
        vertex, subtask, peer_tm = peers[self.rng.randrange(len(peers))] if peers else self.deployed[-1]
        peer = self.registered.get(peer_tm, lost)
        failed = self._attempt_id(vertex, subtask)
        self._emit("INFO", _EG, f"{self._task(vertex, subtask)} ({failed}) switched from RUNNING to FAILED on "
                                f"{peer.resource_id} @ localhost (dataPort={peer.data_port}).", 5, 40)
        cause = self.examples.lost_peer.replace(self.examples.lost_peer_address,
                                                f"'localhost/127.0.0.1:{lost.data_port} [ {lost.resource_id} ] '")
        self.buffer.append(cause)
        self.buffer.append(self.examples.lost_peer_stack)
        self._emit("INFO", _JOBMASTER, f"{len(self.deployed)} tasks will be restarted to recover the failed task "
                                       f"{failed}.", 5, 10)
        self._emit("INFO", _EG, f"Job {JOB_NAME} ({NOISE_JOB}) switched from state RUNNING to RESTARTING.", 0, 2)
        self.job_state = "RESTARTING"
        self.job_restarts += 1
        others = [(v, s) for v, s, _tm in self.deployed if (v, s) != (vertex, subtask)]
        for v, s in others:
            if v == 0:
                self._emit("INFO", _SOURCE_COORDINATOR, f"Removing registered reader after failure for subtask {s} "
                                                        f"(#{self.attempt}) of source {SOURCE}.", 0, 3)
            self._emit("INFO", _EG, f"{self._task(v, s)} ({self._attempt_id(v, s)}) switched from RUNNING to "
                                    f"CANCELING.", 0, 5)
        for v, s in others:
            self._emit("INFO", _EG, f"{self._task(v, s)} ({self._attempt_id(v, s)}) switched from CANCELING to "
                                    f"CANCELED.", 2, 25)
        self._emit("INFO", _SLOTS, f"Clearing resource requirements of job {NOISE_JOB}", 0, 5)
        self.deployed = []
        return self.clock.ms + RESTART_DELAY_MS

    def _on_restart(self, epoch: int) -> None:
        if epoch != self.job_epoch or not self.alive or self.job_state != "RESTARTING":
            return
        self._emit("INFO", _EG, f"Job {JOB_NAME} ({NOISE_JOB}) switched from state RESTARTING to RUNNING.", 0, 2)
        self.attempt += 1
        if self.completed:
            n, trigger = self.completed
            self._emit("INFO", _COORDINATOR, f"Restoring job {NOISE_JOB} from Checkpoint {n} @ {trigger} for "
                                             f"{NOISE_JOB} located at {CHECKPOINT_DIR}/{NOISE_JOB}/chk-{n}.", 0, 3)
            self._emit("INFO", _COORDINATOR, "No master state to restore", 5, 20)
            for s in range(PARALLELISM - 1, -1, -1):
                self._emit("INFO", _SOURCE_COORDINATOR, f"Recovering subtask {s} to checkpoint {n} for source "
                                                        f"{SOURCE} to checkpoint.", 0, 1)
        self._schedule()

    def _schedule(self) -> None:
        for v in range(len(VERTICES)):
            for s in range(PARALLELISM):
                self._emit("INFO", _EG, f"{self._task(v, s)} ({self._attempt_id(v, s)}) switched from CREATED to "
                                        f"SCHEDULED.", 0, 2)
        self._emit("INFO", _SLOTS, f"Received resource requirements from job {NOISE_JOB}: [ResourceRequirement"
                                   f"{{resourceProfile=ResourceProfile{{UNKNOWN}}, numberOfRequiredSlots={PARALLELISM}}}]")
        self.job_state = "SCHEDULED"
        if len(self.registered) == TASKMANAGERS:
            self._deploy()

    def _deploy(self) -> None:
        """Every TaskManager is back: one slot on each, both vertices' subtask ``i`` in the slot of the ``i``-th."""
        tms = sorted(self.registered)
        allocations = {tm: f"{self.rng.getrandbits(128):032x}" for tm in tms}
        for tm in tms:
            self._emit("INFO", _SYNCER, f"Starting allocation of slot {allocations[tm]} from "
                                        f"{self.registered[tm].resource_id} for job {NOISE_JOB} with resource profile "
                                        f"{SLOT_PROFILE}.", 5, 40)
        self.deployed = [(v, s, tms[s]) for v in range(len(VERTICES)) for s in range(PARALLELISM)]
        for v, s, tm in self.deployed:
            start, task, attempt_id = self.registered[tm], self._task(v, s), self._attempt_id(v, s)
            self._emit("INFO", _EG, f"{task} ({attempt_id}) switched from SCHEDULED to DEPLOYING.", 5, 60)
            self._emit("INFO", _EG, f"Deploying {task} (attempt #{self.attempt}) with attempt id {attempt_id} and "
                                    f"vertex id {VERTICES[v][1]}_{s} to {start.resource_id} @ localhost (dataPort="
                                    f"{start.data_port}) with allocation id {allocations[tm]}", 0, 1)
        for v, s, _tm in self.deployed:
            self._emit("INFO", _EG, f"{self._task(v, s)} ({self._attempt_id(v, s)}) switched from DEPLOYING to "
                                    f"INITIALIZING.", 20, 120)
        for v, s, _tm in self.deployed:
            if v == 0:
                self._emit("INFO", _SOURCE_COORDINATOR, f"Source {SOURCE} registering reader for parallel task {s} "
                                                        f"(#{self.attempt}) @ localhost", 20, 200)
            self._emit("INFO", _EG, f"{self._task(v, s)} ({self._attempt_id(v, s)}) switched from INITIALIZING to "
                                    f"RUNNING.", 5, 120)
        self.job_state = "RUNNING"

    def _task(self, vertex: int, subtask: int) -> str:
        return f"{VERTICES[vertex][0]} ({subtask + 1}/{PARALLELISM})"

    def _attempt_id(self, vertex: int, subtask: int) -> str:
        return f"{self.graph}_{VERTICES[vertex][1]}_{subtask}_{self.attempt}"
