"""Kafka client evidence in Flink logs: client config dumps, ``[Consumer clientId=…, groupId=…]`` lines, offset
commit failures of Flink's Kafka sources and how a source's readers were assigned partitions.

Kafka clients print their effective settings once per client as ``ConsumerConfig values:`` followed by indented
``key = value`` lines; ingestion keeps those lines as the event's ``body``. Everything here reads an
:class:`~flink_runbooks.model.Incident` and never touches files.
"""
from __future__ import annotations

import os
import re
import statistics
from dataclasses import dataclass, field

from flink_runbooks.model import Event, Incident
from flink_runbooks.parse.timestamps import seconds

# Kafka client defaults (2.x and 3.x) of the properties the runbooks discuss.
CLIENT_DEFAULTS = {
    "reconnect.backoff.ms": "50",
    "reconnect.backoff.max.ms": "1000",
    "connections.max.idle.ms": "540000",
    "request.timeout.ms": "30000",
    "default.api.timeout.ms": "60000",
    "retry.backoff.ms": "100",
    "metadata.max.age.ms": "300000",
}

_DUMP = re.compile(r"\b(?P<kind>Consumer|Producer|AdminClient)Config values:")
_BODY_ENTRY = re.compile(r"^(?P<key>[a-z][\w.-]*)\s?=\s?(?P<value>.*)$")
CLIENT_PREFIX = re.compile(
    r"\[(?P<kind>Consumer|Producer|AdminClient)\s+clientId=(?P<client>[^,\]\s]+)(?:,\s*groupId=(?P<group>[^\],]*))?"
    r"(?:,\s*transactionalId=[^\]]*)?\]")

# What a Kafka client line says, most specific first.
_CLIENT_EVENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("coordinator-unavailable", re.compile(
        r"Group coordinator (?P<node>\S+ \(id: -?\d+ rack: \S+\)) is unavailable or invalid"
        r"|Requesting disconnect from last known coordinator")),
    ("coordinator-discovered", re.compile(r"Discovered group coordinator (?P<node>\S+)")),
    ("connect-failed", re.compile(
        r"Connection to node (?P<node>-?\d+) \([^)]*\) could not be established|"
        r"Bootstrap broker \S+ \(id: -1 rack: \S+\) disconnected")),
    ("cancelled-in-flight", re.compile(
        r"Cancelled in-flight (?P<api>[A-Z_]+) request with correlation id \d+ due to node (?P<node>-?\d+) being "
        r"disconnected \(elapsed time since creation: (?P<created>\d+)ms, elapsed time since send: (?P<sent>\d+)ms")),
    ("request-timeout", re.compile(r"Disconnecting from node (?P<node>-?\d+) due to request timeout")),
    ("fetch-error", re.compile(r"Error sending fetch request \(sessionId=\S+, epoch=\S+\) to node (?P<node>-?\d+)")),
    ("disconnected", re.compile(r"\bNode (?P<node>-?\d+) disconnected\.")),
)

# Offset-commit failures: KafkaSource (FLIP-27, 1.12+ and the externalised connector for 1.x and 2.x) and the legacy
# FlinkKafkaConsumer (whose consumer thread and operator both report the same failure).
SOURCE_COMMIT_FAILED = re.compile(r"(?:Failed to\s+)?commit consumer offsets for\s+checkpoint\s+(?P<id>\d+)")
LEGACY_COMMIT_FAILED = re.compile(
    r"Async Kafka commit failed|Consumer subtask (?P<subtask>\d+) failed async Kafka commit")
LEGACY_THREAD_COMMIT_FAILED = re.compile(r"Committing offsets to Kafka failed")
COORDINATOR_ERRORS = ("CoordinatorNotAvailableException", "NotCoordinatorException",
                      "CoordinatorLoadInProgressException")
CONNECTION_ERRORS = ("DisconnectException", "TimeoutException", "NetworkException")


@dataclass
class ClientConfig:
    """One ``ConsumerConfig values:`` (or Producer/AdminClient) dump."""

    kind: str  # consumer | producer | admin
    values: dict[str, str]
    event: Event

    @property
    def client_id(self) -> str | None:
        return self.values.get("client.id") or None

    @property
    def group_id(self) -> str | None:
        return self.values.get("group.id") or None

    @property
    def source(self) -> str:
        label = {"consumer": "ConsumerConfig", "producer": "ProducerConfig", "admin": "AdminClientConfig"}[self.kind]
        return f"{label} values, {os.path.basename(self.event.file)}:{self.event.line}"


def client_configs(incident: Incident) -> list[ClientConfig]:
    """Every Kafka client config dump of the incident, in time order."""
    out = []
    for ev in incident.events:
        m = _DUMP.search(ev.message)
        if not m:
            continue
        values = {}
        for line in ev.body:
            entry = _BODY_ENTRY.match(line.strip())
            if entry:
                values[entry["key"]] = entry["value"].strip()
        if values:
            kind = {"Consumer": "consumer", "Producer": "producer", "AdminClient": "admin"}[m["kind"]]
            out.append(ClientConfig(kind, values, ev))
    return out


def consumer_config(incident: Incident, group_ids: set[str] | None = None) -> ClientConfig | None:
    """The dump of a source reader's consumer: of the failing group when known, TaskManager dumps first."""
    consumers = [c for c in client_configs(incident) if c.kind == "consumer"]
    if group_ids:
        consumers = [c for c in consumers if c.group_id in group_ids] or consumers
    # The enumerator's own client (partition discovery) is not the one that commits.
    readers = [c for c in consumers if "enumerator" not in (c.client_id or "")] or consumers
    readers.sort(key=lambda c: (c.event.role != "taskmanager", c.event.ts or "", c.event.line))
    return readers[0] if readers else None


def current_value(config: ClientConfig | None, key: str) -> tuple[str | None, str | None]:
    """``(value, where it came from)``: the dump's value, else the Kafka default (said so), else nothing."""
    if config is not None and key in config.values:
        return config.values[key], config.source
    if key in CLIENT_DEFAULTS:
        where = "Kafka client default" + ("" if config is not None else " (no ConsumerConfig dump in the logs)")
        return CLIENT_DEFAULTS[key], where
    return None, None


def as_int(value: str | None) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


@dataclass
class ClientLine:
    """A Kafka client log line with the client it came from."""

    event: Event
    what: str  # one of the _CLIENT_EVENTS names
    kind: str | None
    client_id: str | None
    group_id: str | None
    node: str | None = None
    api: str | None = None  # for cancelled in-flight requests
    sent_ms: int | None = None


def client_lines(incident: Incident) -> list[ClientLine]:
    out = []
    for ev in incident.events:
        text = ev.message if ev.message else "\n".join(ev.body)
        for what, rx in _CLIENT_EVENTS:
            m = rx.search(text)
            if not m:
                continue
            prefix = CLIENT_PREFIX.search(text)
            groups = m.groupdict()
            out.append(ClientLine(
                ev, what,
                prefix["kind"].lower() if prefix else None,
                prefix["client"] if prefix else None,
                (prefix["group"] or None) if prefix else None,
                groups.get("node"), groups.get("api"),
                int(groups["sent"]) if groups.get("sent") else None))
            break
    return out


@dataclass
class CommitFailure:
    event: Event
    checkpoint_id: int | None
    causes: list[str]  # simple class names of the chain
    api: str  # "KafkaSource" | "FlinkKafkaConsumer"
    subtask: int | None = None

    @property
    def coordinator(self) -> bool:
        return any(c in COORDINATOR_ERRORS for c in self.causes) or "coordinator is not available" in self.event.text

    @property
    def connection(self) -> bool:
        return any(c in CONNECTION_ERRORS for c in self.causes)


def commit_failures(incident: Incident) -> list[CommitFailure]:
    """Offset-commit failures in time order (the legacy consumer's duplicate report is dropped)."""
    out: list[CommitFailure] = []
    legacy_thread: list[CommitFailure] = []
    for ev in incident.events:
        text = ev.text
        causes = [c.simple_name for c in ev.chain if c.kind != "suppressed"]
        m = SOURCE_COMMIT_FAILED.search(text)
        if m:
            out.append(CommitFailure(ev, int(m["id"]), causes, "KafkaSource"))
            continue
        m = LEGACY_COMMIT_FAILED.search(text)
        if m:
            out.append(CommitFailure(ev, None, causes, "FlinkKafkaConsumer",
                                     int(m["subtask"]) if m["subtask"] else None))
            continue
        if LEGACY_THREAD_COMMIT_FAILED.search(text):
            legacy_thread.append(CommitFailure(ev, None, causes, "FlinkKafkaConsumer"))
    # The consumer thread's line and the operator's line report the same failure; keep the thread's only when the
    # operator's is absent (an excerpt of one of them).
    if not any(f.api == "FlinkKafkaConsumer" for f in out):
        out += legacy_thread
    return sorted(out, key=lambda f: (f.event.ts or "", f.event.file, f.event.line))


@dataclass
class CommitRound:
    """The failures of one commit: one checkpoint (or, without ids, one burst of failures)."""

    checkpoint_id: int | None
    ts: str | None
    failures: list[CommitFailure] = field(default_factory=list)


def commit_rounds(failures: list[CommitFailure], burst_seconds: float = 5.0) -> list[CommitRound]:
    rounds: dict[object, CommitRound] = {}
    order: list[CommitRound] = []
    last: CommitRound | None = None
    for f in failures:
        if f.checkpoint_id is not None:
            key: object = ("id", f.checkpoint_id)
        elif last is not None and last.checkpoint_id is None and _gap_s(last.ts, f.event.ts) is not None \
                and _gap_s(last.ts, f.event.ts) <= burst_seconds:
            key = ("burst", id(last))
        else:
            key = ("burst", id(f))
        rnd = rounds.get(key)
        if rnd is None:
            rnd = CommitRound(f.checkpoint_id, f.event.ts)
            rounds[key] = rnd
            order.append(rnd)
        rnd.failures.append(f)
        last = rnd
    return order


def longest_consecutive_run(rounds: list[CommitRound]) -> list[CommitRound]:
    """The longest run of rounds whose checkpoint ids follow each other (empty when no ids are known)."""
    with_ids = sorted((r for r in rounds if r.checkpoint_id is not None), key=lambda r: r.checkpoint_id)
    best: list[CommitRound] = []
    run: list[CommitRound] = []
    for r in with_ids:
        if run and r.checkpoint_id == run[-1].checkpoint_id + 1:
            run.append(r)
        else:
            run = [r]
        if len(run) > len(best):
            best = list(run)
    return best


def _gap_s(a: str | None, b: str | None) -> float | None:
    sa, sb = seconds(a), seconds(b)
    return None if sa is None or sb is None else sb - sa


def cadence(times: list[str | None]) -> tuple[float | None, float | None]:
    """``(median gap in seconds, coefficient of variation)`` of successive timestamps; (None, None) below 3 gaps."""
    secs = sorted(s for s in (seconds(t) for t in times) if s is not None)
    gaps = [b - a for a, b in zip(secs, secs[1:]) if b - a > 0]
    if len(gaps) < 3:
        return None, None
    median = statistics.median(gaps)
    spread = statistics.pstdev(gaps) / statistics.mean(gaps) if statistics.mean(gaps) else None
    return median, spread


# -------------------------------------------------------------------------------------------- partition assignment

_REGISTERING_READER = re.compile(r"Source (?P<source>.+?) registering reader for parallel task (?P<task>\d+)")
_SPLIT_PARTITION = re.compile(r"Partition: (?P<tp>[\w.-]+-\d+)")
_DISCOVERED = re.compile(r"Discovered new partitions: \[(?P<list>[^\]]*)\]")
_LEGACY_NO_PARTITIONS = re.compile(r"Consumer subtask (?P<task>\d+) initially has no partitions to read from")
_LEGACY_READING = re.compile(
    r"Consumer subtask (?P<task>\d+) (?:will start reading|creating fetcher with offsets).*?"
    r"(?P<tps>(?:KafkaTopicPartition\{topic='[^']+', partition=\d+\}[^,\]]*,? ?)+)")
_LEGACY_TP = re.compile(r"topic='(?P<topic>[^']+)', partition=(?P<p>\d+)")
_ASSIGNED = re.compile(r"\b(?:Assigned to|Subscribed to) partition\(s\): (?P<list>.+)$")
_SOURCE_TASK = re.compile(r"Source: (?P<name>[^(]+?) \((?P<k>\d+)/(?P<n>\d+)\)")


@dataclass
class SourceAssignment:
    """How many readers a Kafka source ran and which partitions they were given."""

    readers: int | None = None
    readers_from: str = ""  # where the reader count was read
    partitions: set[str] = field(default_factory=set)
    idle_readers: set[int] = field(default_factory=set)  # subtasks seen without partitions
    events: list[Event] = field(default_factory=list)

    @property
    def topics(self) -> set[str]:
        return {tp.rsplit("-", 1)[0] for tp in self.partitions}

    @property
    def exceeds(self) -> bool:
        """More readers than partitions: some readers can never get one."""
        if self.idle_readers:
            return True
        return bool(self.readers and self.partitions and self.readers > len(self.partitions))


def source_assignment(incident: Incident) -> SourceAssignment:
    out = SourceAssignment()
    tasks: set[int] = set()
    for ev in incident.events:
        msg = ev.message
        if m := _REGISTERING_READER.search(msg):
            tasks.add(int(m["task"]))
            out.events.append(ev)
        elif "Assigning splits to readers" in msg or "Adding split(s) to reader" in msg:
            out.partitions.update(_SPLIT_PARTITION.findall(msg))
            out.events.append(ev)
        elif m := _DISCOVERED.search(msg):
            out.partitions.update(p.strip() for p in m["list"].split(",") if p.strip())
            out.events.append(ev)
        elif m := _LEGACY_NO_PARTITIONS.search(msg):
            out.idle_readers.add(int(m["task"]))
            tasks.add(int(m["task"]))
            out.events.append(ev)
        elif m := _LEGACY_READING.search(msg):
            tasks.add(int(m["task"]))
            out.partitions.update(f"{t['topic']}-{t['p']}" for t in _LEGACY_TP.finditer(m["tps"]))
            out.events.append(ev)
        elif m := _ASSIGNED.search(msg):
            out.partitions.update(p.strip() for p in m["list"].split(",") if re.match(r"^[\w.-]+-\d+$", p.strip()))
    if tasks:
        out.readers, out.readers_from = max(tasks) + 1, "readers registered with the split enumerator"
    else:
        counts = [int(m["n"]) for ev in incident.events for m in _SOURCE_TASK.finditer(ev.message)]
        if counts:
            out.readers, out.readers_from = max(counts), "source task names (k/N)"
    return out
