"""Failed task snapshots: which phase of a checkpoint failed on the TaskManagers, for which checkpoint, and why.

Shared by the runbooks ``checkpoint-async-materialize-failure``, ``checkpoint-sync-phase-failure`` and
``hdfs-datanode-failure``. A TaskManager snapshot has two phases:

* the **synchronous** part runs in the task thread while the barrier is processed (``snapshotState``,
  ``prepareSnapshotPreBarrier``, RocksDB's native checkpoint, sinks flushing). Its failure surfaces as
  ``Could not perform checkpoint N for operator`` (wrapping ``Could not complete snapshot N``) and always fails the
  task; ``tolerable-failed-checkpoints`` never applies to it (Flink ≤ 1.8 could decline instead, with
  ``setFailOnCheckpointingErrors(false)``).
* the **asynchronous** part writes the state to the checkpoint storage in a background thread. Its failure is
  ``Could not materialize checkpoint N for operator``: up to 1.8 it failed the task (``AsynchronousException``);
  since 1.9 (FLINK-11662) it only declines the checkpoint (``Asynchronous task checkpoint failed``), which counts
  against the tolerable-failure threshold.

Nothing here touches files: functions read an :class:`~flink_runbooks.model.Incident`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flink_runbooks.evidence.checkpoints import CheckpointAttempt, checkpoint_history
from flink_runbooks.model import Event, Incident
from flink_runbooks.vocabulary.lifecycle import GLOBAL_FAILURE, JOB_FAILOVER, TASK_FAILED, TOLERABLE_FAILURES_EXCEEDED

# --------------------------------------------------------------------------------------------------------------------
# the wrappers that name the phase

MATERIALIZE = re.compile(r"Could not materialize checkpoint (?P<id>\d+) for operator (?P<op>[^\n]+?)\.?\}?$", re.M)
ASYNC_PART = re.compile(r"^(?P<op>[^\n]+?) - asynchronous part of checkpoint (?P<id>\d+) could not be completed\.$", re.M)
ASYNC_REASON = re.compile(r"Asynchronous task checkpoint failed")
PERFORM = re.compile(r"Could not perform checkpoint (?P<id>\d+) for operator (?P<op>[^\n]+?)\.?$", re.M)
COMPLETE_SNAPSHOT = re.compile(
    r"Could not complete snapshot (?P<id>\d+) for operator (?P<op>[^\n]+?)\.(?: Failure reason: [^\n]*)?$", re.M)
# Logged (DEBUG/INFO) when the task was already cancelled or failing: the snapshot failure is a consequence.
TASK_NOT_RUNNING = re.compile(r"while the invokable was not in state running|as task is not running anymore")
IGNORED_DECLINE = re.compile(r"Ignore decline of checkpoint (?P<id>\d+) as task is not running anymore")
# Causes that only say the task or job was being shut down.
CANCELLATION = re.compile(
    r"CancellationException|CancelTaskException|ClosedByInterruptException|InterruptedException|"
    r"AsynchronousCloseException|Task was cancel|was canceled|is being cancel|Stream closed|closed before|"
    r"registry is already closed")

# --------------------------------------------------------------------------------------------------------------------
# what went wrong underneath

FLUSH_CLOSE = re.compile(r"Could not flush (?:to file )?and close the file system output stream to (?P<path>\S+)")
OPEN_STREAM = re.compile(r"Could not open output stream for state backend")
CHECKPOINT_PATH = re.compile(r"(?P<dir>(?:[a-z][\w+.-]*:)?/[^\s'\"]*?)/chk-(?P<id>\d+)\b")

# (kind, pattern) most specific first; matched against the whole chain text of a failure.
STORAGE_ERRORS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("space", re.compile(
        r"DSQuotaExceededException|NSQuotaExceededException|quota of \S+ is exceeded|[Qq]uota exceeded|"
        r"No space left on device|DiskOutOfSpaceException|Out of space")),
    ("permission", re.compile(
        r"Permission denied|AccessControlException|AccessDeniedException|Access Denied|403 Forbidden|"
        r"Status Code: 403|Read-only file system|Mkdirs failed to create|not writable")),
    ("path-gone", re.compile(
        r"Path doesn't exist|No lease on|LeaseExpiredException|does not have any open files|"
        r"FileNotFoundException|File does not exist")),
    ("network", re.compile(
        r"SocketTimeoutException|Read timed out|[Cc]onnect timed out|ConnectTimeoutException|"
        r"timeout while waiting for channel|Connection reset|Connection refused|UnknownHostException|"
        r"NoRouteToHostException|Unable to execute HTTP request|Service Unavailable|SlowDown")),
)
STORAGE_CLIENT = re.compile(
    r"org\.apache\.hadoop\.(?:fs|hdfs|ipc)\.|com\.amazonaws\.|software\.amazon\.awssdk\.|org\.apache\.flink\.fs\.|"
    r"com\.aliyun\.oss\.|com\.google\.cloud\.storage\.|com\.microsoft\.azure\.")
ROCKSDB = re.compile(r"org\.rocksdb\.RocksDBException|RocksDBException")
ROCKSDB_LINK = re.compile(r"[Ww]hile link file to|Invalid cross-device link")

# HDFS write pipeline (DFS client on the TaskManager/JobManager, and the NameNode's answer to a block request)
ALL_DATANODES_BAD = re.compile(r"All datanodes (?P<nodes>[^\n]*?) ?are bad\. Aborting")
REPLACE_FAILED = re.compile(
    r"Failed to replace a bad datanode on the existing pipeline due to no more good datanodes being available to try"
    r"(?:\. \(Nodes: current=\[(?P<current>[^\n]*?)\], original=\[(?P<original>[^\n]*?)\]\))?")
REPLACE_POLICY = re.compile(r"The current failed datanode replacement policy is (?P<policy>\w+)")
MIN_REPLICATION = re.compile(
    r"File (?P<path>\S+) could only be (?:written|replicated) to (?P<written>\d+) "
    r"(?:of the (?P<min>\d+) minReplication nodes|nodes,? instead of minReplication \(=(?P<min_old>\d+)\))")
DATANODES_RUNNING = re.compile(
    r"There are (?P<running>\d+) datanode\(s\) running and (?P<excluded>\d+|no) node\(s\) are excluded")
EXCLUDING = re.compile(r"Excluding datanode (?:DatanodeInfoWithStorage\[)?(?P<addr>[\w.-]+:\d{2,5})")
DATANODE_ADDR = re.compile(r"(?:DatanodeInfoWithStorage\[)?(?P<addr>\b[\w-]+(?:\.[\w-]+)*:\d{2,5})(?=[,\]\s]|$)")
DATANODE_DISK_FULL = re.compile(
    r"DiskOutOfSpaceException|No space left on device|NOT_ENOUGH_STORAGE_SPACE|is less than the block size")
HADOOP_LOGGER = re.compile(r"org\.apache\.hadoop\.hdfs\.|DataStreamer|DFSClient|DFSOutputStream")
HDFS_FAILURE = re.compile(
    rf"{ALL_DATANODES_BAD.pattern}|{REPLACE_FAILED.pattern}|{MIN_REPLICATION.pattern}")


def storage_error(text: str) -> tuple[str, str] | None:
    """``(kind, matched text)`` of the first storage error found in ``text`` (kinds: space, permission, path-gone,
    network), or None."""
    for kind, rx in STORAGE_ERRORS:
        m = rx.search(text)
        if m:
            return kind, m.group(0)
    return None


def checkpoint_dir(text: str) -> str | None:
    """The directory that holds ``chk-N`` in a path of ``text`` (the job's checkpoint directory)."""
    m = CHECKPOINT_PATH.search(text)
    return m.group("dir") if m else None


def deepest_cause(events: list[Event]) -> str | None:
    """``Class: message`` of the deepest cause over ``events`` (the longest chain wins)."""
    best = max(events, key=lambda e: len([c for c in e.chain if c.kind != "suppressed"]), default=None)
    rc = best.root_cause if best else None
    if rc is None:
        return None
    return f"{rc.cls}: {rc.message}" if rc.message else rc.cls


# --------------------------------------------------------------------------------------------------------------------
# snapshot failures per checkpoint


@dataclass
class SnapshotFailure:
    """Every record about one checkpoint's failed snapshot in one phase (TaskManager and JobManager side)."""

    checkpoint_id: int | None
    phase: str  # async | sync
    operator: str | None = None
    events: list[Event] = field(default_factory=list)
    failed_task: bool = False  # the failure failed the task, not only the checkpoint
    first_index: int = 0  # position of the earliest record in the incident (time order)

    @property
    def text(self) -> str:
        return "\n".join(ev.text for ev in self.events)

    @property
    def cause(self) -> str | None:
        return deepest_cause(self.events)


def _fails_task(ev: Event) -> bool:
    return bool(TASK_FAILED.search(ev.message) or JOB_FAILOVER.search(ev.message) or GLOBAL_FAILURE.search(ev.message))


def snapshot_failures(incident: Incident, phase: str) -> list[SnapshotFailure]:
    """The failed snapshots of ``phase`` (``async`` or ``sync``), one per checkpoint id, in time order.

    Records logged while the task was already shutting down (``... while the invokable was not in state running``,
    ``Ignore decline ... as task is not running anymore``, causes that are only cancellation) are left out: they
    are consequences of another failure or of a cancel.
    """
    if phase not in ("async", "sync"):
        raise ValueError(f"phase must be 'async' or 'sync', not {phase!r}")
    wrappers = (MATERIALIZE, ASYNC_PART) if phase == "async" else (PERFORM, COMPLETE_SNAPSHOT)
    ignored = {int(m["id"]) for _, m in incident.find(IGNORED_DECLINE)}
    found: dict[int | None, SnapshotFailure] = {}
    for index, ev in enumerate(incident.events):
        if TASK_NOT_RUNNING.search(ev.message):
            continue
        match = next((m for rx in wrappers if (m := rx.search(ev.text))), None)
        if match is None and phase == "async" and ASYNC_REASON.search(ev.text) and not PERFORM.search(ev.text):
            match = re.search(r"Decline checkpoint (?P<id>\d+)", ev.message)
        if match is None:
            continue
        cid = int(match["id"])
        if cid in ignored:
            continue
        cause = deepest_cause([ev]) or ""
        if CANCELLATION.search(cause) and not _fails_task(ev):
            continue
        failure = found.get(cid)
        if failure is None:
            failure = found[cid] = SnapshotFailure(cid, phase, first_index=index)
        failure.events.append(ev)
        failure.operator = failure.operator or (match.groupdict().get("op") or "").strip() or None
        if phase == "sync":
            failure.failed_task = True  # a sync-phase failure is thrown out of the task: it always fails
        elif ev.has_exception("AsynchronousException") or _fails_task(ev):
            failure.failed_task = True
    return sorted(found.values(), key=lambda f: f.first_index)


def prior_discard(incident: Incident, failure: SnapshotFailure) -> Event | None:
    """An earlier record that ended the same checkpoint for another reason (a decline by another task, expiry,
    discard): the coordinator deleted ``chk-N`` while this task was still writing to it."""
    cid = failure.checkpoint_id
    if cid is None:
        return None
    own = {id(ev) for ev in failure.events}
    rx = re.compile(rf"Decline checkpoint {cid}\b|Checkpoint {cid} of job \w+ expired|Discarding checkpoint {cid}\b")
    earlier = [ev for ev in incident.events[:failure.first_index]
               if id(ev) not in own and rx.search(ev.message)
               and not (MATERIALIZE.search(ev.text) or ASYNC_REASON.search(ev.text))]  # not this task's own decline
    # Up to 1.9 the decline line carries no cause; the "Discarding checkpoint N" line right after it does.
    return next((ev for ev in earlier if ev.chain), earlier[0] if earlier else None)


# --------------------------------------------------------------------------------------------------------------------
# checkpoint history around the failures


def threshold_covered_ids(incident: Incident, history: list[CheckpointAttempt] | None = None) -> set[int]:
    """Ids of the failed checkpoints whose consecutive run ended in ``Exceeded checkpoint tolerable failure
    threshold`` (the ones the ``checkpoint-tolerable-failure-threshold`` runbook reports)."""
    from flink_runbooks.evidence.checkpoints import failed_streak_before

    history = checkpoint_history(incident) if history is None else history
    covered: set[int] = set()
    for ev, _ in incident.find(TOLERABLE_FAILURES_EXCEEDED):
        covered.update(a.checkpoint_id for a in failed_streak_before(history, ev))
    return covered


def longest_failed_streak(history: list[CheckpointAttempt]) -> int:
    """The most checkpoints that failed in a row (what ``tolerable-failed-checkpoints`` must ride out)."""
    best = run = 0
    for att in history:
        if att.outcome == "completed":
            run = 0
        elif att.outcome != "in progress":
            run += 1
            best = max(best, run)
    return best


def failure_bursts(history: list[CheckpointAttempt], ids: set[int]) -> list[list[int]]:
    """``ids`` grouped into runs that no completed checkpoint separates (history order)."""
    bursts: list[list[int]] = []
    current: list[int] = []
    for att in history:
        if att.outcome == "completed" and current:
            bursts.append(current)
            current = []
        elif att.checkpoint_id in ids:
            current.append(att.checkpoint_id)
    if current:
        bursts.append(current)
    known = {i for b in bursts for i in b}
    return bursts + [[i] for i in sorted(ids - known)]


def transient_blip(history: list[CheckpointAttempt], ids: set[int]) -> bool:
    """One short run of failures after which checkpoints completed again: the job rode it out and the storage
    recovered by itself, which is not worth a finding."""
    bursts = failure_bursts(history, ids)
    if len(bursts) != 1:
        return False
    order = [a.checkpoint_id for a in history]
    last = max((order.index(i) for i in bursts[0] if i in order), default=None)
    return last is not None and any(a.outcome == "completed" for a in history[last + 1:])


def proposed_tolerance(current: int | None, streak: int, floor: int = 3) -> int | None:
    """A ``tolerable-failed-checkpoints`` that rides out the observed run of failures with room to spare, or None
    when the current value already does."""
    wanted = max(floor, streak + 2)
    return wanted if (current or 0) < wanted else None


# --------------------------------------------------------------------------------------------------------------------
# HDFS datanode trouble


@dataclass
class DatanodeTrouble:
    """What the DFS client and the NameNode said about the HDFS write pipeline."""

    events: list[Event] = field(default_factory=list)  # records that carry an HDFS pipeline failure, time order
    all_bad: int = 0  # "All datanodes ... are bad. Aborting..."
    replace_failed: int = 0  # "Failed to replace a bad datanode on the existing pipeline"
    min_replication: int = 0  # "could only be written/replicated to 0 of the N minReplication nodes"
    running: int | None = None  # "There are K datanode(s) running"
    excluded: int | None = None  # "... and K node(s) are excluded" ("no" -> 0)
    excluded_said_no: bool = False
    replace_policy: str | None = None
    disk_full: str | None = None  # explicit disk-space message
    datanodes: set[str] = field(default_factory=set)  # addresses named in pipelines and exclusions
    excluding_events: list[Event] = field(default_factory=list)  # "Excluding datanode ..." lines
    paths: list[str] = field(default_factory=list)
    checkpoint_ids: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.events)


def datanode_trouble(incident: Incident) -> DatanodeTrouble:
    """Collect every HDFS pipeline failure of the incident.

    The same DFS error is logged once by the client thread (``DataStreamer``/``DFSClient``) and again inside every
    Flink record that wraps it; counts come from the client's own records when the logs have them.
    """
    out = DatanodeTrouble()
    for ev, _ in incident.find(EXCLUDING):
        out.excluding_events.append(ev)
        out.datanodes.update(m["addr"] for m in EXCLUDING.finditer(ev.text))
    out.events = [ev for ev, _ in incident.find(HDFS_FAILURE)]
    client = [ev for ev in out.events if ev.logger and HADOOP_LOGGER.search(ev.logger)]
    for ev in client or out.events:
        text = ev.text
        out.all_bad += bool(ALL_DATANODES_BAD.search(text))
        out.replace_failed += bool(REPLACE_FAILED.search(text))
        out.min_replication += bool(MIN_REPLICATION.search(text))
    for ev in out.events:
        text = ev.text
        if m := ALL_DATANODES_BAD.search(text):
            out.datanodes.update(d["addr"] for d in DATANODE_ADDR.finditer(m["nodes"]))
        if m := REPLACE_FAILED.search(text):
            for part in (m["current"], m["original"]):
                if part:
                    out.datanodes.update(d["addr"] for d in DATANODE_ADDR.finditer(part))
        if m := REPLACE_POLICY.search(text):
            out.replace_policy = m["policy"]
        if m := MIN_REPLICATION.search(text):
            out.paths.append(m["path"])
        if m := DATANODES_RUNNING.search(text):
            out.running = int(m["running"])
            out.excluded_said_no = m["excluded"] == "no"
            out.excluded = 0 if out.excluded_said_no else int(m["excluded"])
        if m := DATANODE_DISK_FULL.search(text):
            out.disk_full = out.disk_full or m.group(0)
        out.checkpoint_ids.update(int(m["id"]) for rx in (CHECKPOINT_PATH, MATERIALIZE, PERFORM) for m in rx.finditer(text))
        if m := FLUSH_CLOSE.search(text):
            out.paths.append(m["path"])
    return out


# --------------------------------------------------------------------------------------------------------------------
# patches the three runbooks share

TOLERABLE_KEY = "execution.checkpointing.tolerable-failed-checkpoints"
LEGACY_BEHAVIOUR_UNTIL = (1, 8)  # the last release line where a failed snapshot fails the task by default
CONFIG_TOLERANCE_SINCE = (1, 10)  # ExecutionCheckpointingOptions: the key exists in the configuration file
DECLINE_INSTEAD_OF_FAIL = (
    "// Flink 1.4 - 1.8: a failed snapshot declines the checkpoint instead of failing the task\n"
    "env.getCheckpointConfig().setFailOnCheckpointingErrors(false);\n"
    "// the same switch on the ExecutionConfig:\n"
    "// env.getConfig().setFailTaskOnCheckpointError(false);"
)


def is_legacy(incident: Incident, evidence: list[Event] | None = None) -> bool | None:
    """True for Flink ≤ 1.8 (snapshot failures fail the task by default), False for 1.9+, None when unknown.

    Without a version, an ``AsynchronousException`` around ``Could not materialize checkpoint`` is the ≤ 1.8 path.
    """
    v = incident.version_tuple
    if v is not None:
        return tuple(v[:2]) <= LEGACY_BEHAVIOUR_UNTIL
    if evidence and any(ev.has_exception("AsynchronousException") and MATERIALIZE.search(ev.text) for ev in evidence):
        return True
    return None


def decline_instead_of_fail_patch(detector, reason: str):
    """The pre-1.9 switch (FLINK-4809) that turns snapshot failures into declined checkpoints, as job code."""
    return detector.code_patch("CheckpointConfig#setFailOnCheckpointingErrors", DECLINE_INSTEAD_OF_FAIL, reason)


def tolerance_patches(detector, incident: Incident, streak: int, reason: str) -> list:
    """Raise ``tolerable-failed-checkpoints`` above the observed run of failures (config key from 1.10, API from
    1.9); nothing when the current value already rides it out."""
    current = incident.config.get_int(TOLERABLE_KEY)
    proposed = proposed_tolerance(current, streak)
    if proposed is None:
        return []
    v = incident.version_tuple
    out = []
    if v is None or tuple(v[:2]) >= CONFIG_TOLERANCE_SINCE:
        out.append(detector.flink_patch(incident, TOLERABLE_KEY, str(proposed), reason))
    out.append(detector.code_patch(
        "CheckpointConfig#setTolerableCheckpointFailureNumber",
        f"env.getCheckpointConfig().setTolerableCheckpointFailureNumber({proposed});",
        "The same in job code (Flink 1.9+); a value set in the job wins over the configuration file."))
    return out


_HDFS_DENIED = re.compile(
    r"user=(?P<user>[^,\s]+), access=(?P<access>\w+), inode=\"(?P<inode>[^\"]+)\":(?P<owner>[^:\s]+):(?P<group>[^:\s]+):"
    r"(?P<mode>[dl-][rwxtsST-]{9})")
_QUOTA = re.compile(
    r"The (?P<what>DiskSpace|NameSpace) quota (?:\([^)]*\) )?of (?:directory )?(?P<dir>\S+) is exceeded: "
    r"(?P<numbers>quota ?= ?[^\n]*)")
_OBJECT_STORE = re.compile(r"(?P<scheme>s3[an]?|s3p|oss|gs|abfss?|wasbs?)://(?P<bucket>[^/\s]+)/?(?P<prefix>\S*)")


def _scheme(path: str | None) -> str:
    if not path:
        return "unknown"
    m = re.match(r"([a-z][\w+.-]*):", path)
    return m.group(1) if m else "file"


def storage_actions(detector, kind: str, text: str, directory: str | None) -> list:
    """Operational fixes for a checkpoint storage that refuses or fails writes, computed from the error text."""
    where = directory or "the checkpoint directory"
    scheme = _scheme(directory)
    local = re.sub(r"^file:(?://)?", "", directory) if directory and scheme == "file" else directory
    if kind == "permission":
        if m := _HDFS_DENIED.search(text):
            return [detector.ops_patch(
                "storage write permissions",
                f"HDFS refused {m['access']} access for user {m['user']} on {m['inode']} (owned by {m['owner']}:"
                f"{m['group']}, mode {m['mode']}). Give the user Flink runs as write access to the checkpoint "
                f"directory; no Flink setting makes checkpoints succeed while the storage refuses writes.",
                snippet=(f"hdfs dfs -ls -d {m['inode']}\n# as the HDFS superuser:\n"
                         f"hdfs dfs -chown -R {m['user']} {m['inode']}"))]
        if m := _OBJECT_STORE.search(directory or text):
            target = "/".join(p for p in (m["bucket"], m["prefix"].strip("/")) if p)
            probe = (f"aws s3 cp /etc/hostname s3://{target}/_write_probe   # with the TaskManagers' credentials"
                     if m["scheme"].startswith("s3") else None)
            return [detector.ops_patch(
                "storage write permissions",
                f"The object store denied the write. The TaskManagers' credentials need put, get, delete and list "
                f"permissions (s3:PutObject, s3:GetObject, s3:DeleteObject, s3:ListBucket on S3) on {target}.",
                snippet=probe)]
        return [detector.ops_patch(
            "storage write permissions",
            f"Make {where} writable for the user Flink runs as (and check it is not mounted read-only).",
            snippet=(f"ls -ld {local or where}\n"
                     "# the user Flink runs as (the official image uses 'flink', uid 9999):\n"
                     "ps -o user=,uid= -p \"$(pgrep -f 'org.apache.flink.runtime' | head -1)\"\n"
                     f"chown -R <flink-user>:<flink-group> {local or where}\n"
                     f"# or keep the owner and add an ACL: setfacl -R -m u:<flink-user>:rwX "
                     f"-m d:u:<flink-user>:rwX {local or where}"))]
    if kind == "space":
        if m := _QUOTA.search(text):
            what = "space" if m["what"] == "DiskSpace" else "file-count"
            return [detector.ops_patch(
                "checkpoint storage quota",
                f"The HDFS {what} quota of {m['dir']} is used up ({m['numbers'].strip()}). Remove checkpoints of jobs "
                f"that no longer run and raise the quota; the space quota counts every replica.",
                snippet=(f"hdfs dfs -count -q -h {m['dir']}\nhdfs dfs -du -h {m['dir']}\n"
                         f"# as the HDFS superuser, once you know the size needed:\n"
                         f"hdfs dfsadmin -set{'Space' if what == 'space' else ''}Quota <new quota> {m['dir']}"))]
        return [detector.ops_patch(
            "checkpoint storage space",
            f"The storage behind {where} is full. Free space (old checkpoints of jobs that no longer run) or add "
            f"capacity.",
            snippet=(f"df -h {local}" if scheme == "file" and local else
                     f"hdfs dfs -du -h {where}" if scheme in ("hdfs", "viewfs") else None))]
    if kind == "network":
        probe = (f"time hdfs dfs -ls {where}" if scheme in ("hdfs", "viewfs") else
                 f"time aws s3 ls {re.sub(r'^s3[anp]?://', 's3://', where)}/" if scheme.startswith("s3") else None)
        return [detector.ops_patch(
            "checkpoint storage reachability",
            f"Writes to {where} timed out or lost their connection. Check the storage's health and latency from the "
            f"TaskManager hosts; isolated failures are ridden out by tolerating a few failed checkpoints.",
            snippet=probe)]
    return [detector.ops_patch(
        "checkpoint storage health",
        f"Writing to {where} failed with an I/O error; the deepest cause in the evidence names the storage "
        f"problem to fix.")]
