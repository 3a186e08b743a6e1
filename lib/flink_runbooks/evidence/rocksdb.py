"""RocksDB state backend evidence: working directories, task-local state and where a failed restore read its files.

Flink puts each RocksDB instance under ``<localdir>/job_<job id>_op_<operator>_uuid_<uuid>/db`` (older releases add
a ``flink-io-<uuid>`` level when the directory comes from ``io.tmp.dirs``). With task-local recovery a copy of each
snapshot also lives under ``<local state root>/localState…/aid_…/jid_…/vtx_…_sti_N/chk_N``. A restore either opens
that local copy or downloads the checkpoint's files first; which one happened decides what to do about a corrupt file.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from flink_runbooks.parse.config import EffectiveConfig
from flink_runbooks.model import Event, Incident
from flink_runbooks.parse.timestamps import seconds

INSTANCE_DIR = re.compile(
    r"(?P<base>/[^\s:'\"]*?)/(?:flink-io-[\w-]+/)?job_(?P<job>[0-9a-f]{32})_op_(?P<op>[^\s/]+?)_uuid_[0-9a-f-]{36}")
LOCAL_STATE_DIR = re.compile(r"(?P<root>/[^\s'\"]*?)/localState[^/\s]*/aid_[0-9a-f]+/jid_(?P<job>[0-9a-f]{32})/"
                             r"vtx_[0-9a-f]+_sti_\d+/chk_(?P<chk>\d+)")

# ------------------------------------------------------------------------------------------------ configuration


def split_dirs(value: str | None) -> list[str]:
    """Flink's directory lists: ``,`` or the path separator ``:`` (not inside a URI scheme)."""
    if not value:
        return []
    parts = re.split(r",|:(?!//)", value)
    return [p.strip() for p in parts if p.strip()]


def strip_scheme(uri: str | None) -> tuple[str | None, str | None]:
    """``file:///mnt/x`` -> ``("file", "/mnt/x")``; ``/mnt/x`` -> ``("file", "/mnt/x")``; ``s3://b/x`` -> ``("s3", "b/x")``."""
    if not uri:
        return None, None
    m = re.match(r"^([a-zA-Z][\w+.-]*):(?://)?(.*)$", uri.strip())
    if not m:
        return "file", uri.strip()
    scheme, rest = m.group(1).lower(), m.group(2)
    if scheme == "file":
        return "file", "/" + rest.lstrip("/")
    return scheme, rest


@dataclass
class RocksDBDirs:
    localdirs: list[str]
    localdir_key: str | None  # the key the directories came from, None when Flink's default applies
    checkpoint_dir: str | None
    local_state_dirs: list[str]
    local_recovery: bool | None


def rocksdb_dirs(config: EffectiveConfig) -> RocksDBDirs:
    localdirs = split_dirs(config.get("state.backend.rocksdb.localdir"))
    key = "state.backend.rocksdb.localdir" if localdirs else None
    if not localdirs:
        localdirs = split_dirs(config.get("io.tmp.dirs"))
        key = "io.tmp.dirs" if localdirs else None
    return RocksDBDirs(
        localdirs=[strip_scheme(d)[1] or d for d in localdirs],
        localdir_key=key,
        checkpoint_dir=config.get("execution.checkpointing.dir"),
        local_state_dirs=split_dirs(config.get("execution.checkpointing.local-backup.dirs")),
        local_recovery=config.get_bool("execution.state-recovery.from-local"),
    )


def instance_base(path: str | None) -> str | None:
    """The RocksDB base directory (the localdir in use) of a path inside an instance directory."""
    m = INSTANCE_DIR.search(path or "")
    return m.group("base") if m else None


def common_dir(a: str, b: str) -> str:
    """The deepest directory two absolute paths share (``/`` at least)."""
    pa = [p for p in a.split("/") if p]
    pb = [p for p in b.split("/") if p]
    out = []
    for x, y in zip(pa, pb):
        if x != y:
            break
        out.append(x)
    return "/" + "/".join(out)


def is_within(path: str, parent: str) -> bool:
    path, parent = path.rstrip("/"), parent.rstrip("/")
    return path == parent or path.startswith(parent + "/")


# ------------------------------------------------------------------------------------------------ restore failures

CORRUPTION = re.compile(
    r"Bad table magic number|Corruption: |[Bb]lock checksum mismatch|bad checksum type|Sst file size mismatch|"
    r"truncated block read|file is too short|[Cc]hecksum mismatch|[Nn]ot an sstable|bad block (?:contents|handle)")
MISSING_SST = re.compile(r"No such file or directory.*?\.sst|\.sst\b.*?No such file or directory")
DISK_FULL = re.compile(r"No space left on device|Disk quota exceeded|ENOSPC")
RESTORE_CONTEXT = re.compile(
    r"Could not restore keyed state backend|Exception while creating StreamOperatorStateContext|"
    r"Error while opening RocksDB instance|Exception while restoring keyed state backend|"
    r"Caught unexpected exception|Bad table magic number")
ALTERNATIVE = re.compile(r"from alternative \((?P<k>\d+)/(?P<n>\d+)\)")
ALL_OPTIONS = re.compile(r"Could not restore keyed state backend for (?P<op>\S+) from any of the (?P<n>\d+) provided "
                         r"restore options")
SST_PATH = re.compile(r"(/[^\s:,'\"]+\.sst)\b")

REMOTE_FRAMES = re.compile(r"restoreFromRemoteState|transferRemoteStateToLocalDirectory|RocksDBStateDownloader|"
                           r"downloadDataForAllStateHandles|restoreWithRescaling|restoreDBInstanceFromStateHandle")
LOCAL_ONLY_FRAMES = re.compile(r"restoreWithoutRescaling")  # 1.13–1.19: the local path calls restoreFromLocalState directly
# What a TaskManager logs right before it opens RocksDB on restore (INFO).
RESTORE_START = re.compile(
    r"Starting RocksDB incremental recovery in operator .*?State Handles=\[(?P<h1>Incremental\w+KeyedStateHandle)|"
    r"Starting to restore from state handle: (?P<h2>Incremental\w+KeyedStateHandle)|"
    r"(?P<download>Start downloading remote state to local directory)|"
    r"(?P<nolocal>Did not find registered local state for checkpoint) (?P<chk>\d+)")
RESTORE_DONE = re.compile(r"Finished RocksDB incremental recovery in operator|Finished restoring from state handle")
CHECKPOINT_RESTORED = re.compile(
    r"Restoring job (?P<job>[0-9a-f]{32}) from (?:latest valid checkpoint: )?(?P<kind>Checkpoint|Savepoint) "
    r"(?P<id>\d+) @ \d+ for [0-9a-f]{32}(?: located at (?P<path>\S+?))?\.?$")
SHARED_FILE = re.compile(r"File State: (?P<remote>\S+) \[(?P<bytes>\d+) bytes\], localPath='(?P<local>[^']+)'")


@dataclass
class RestoreFailure:
    event: Event
    kind: str  # corruption | missing-file | disk-full
    message: str  # the deepest cause that tells the kind
    sst: str | None
    source: str = "unknown"  # local | remote | unknown
    source_evidence: str = ""
    alternative: tuple[int, int] | None = None
    terminal: bool = False  # the restore gave up (no alternative left)


@dataclass
class RestoreAttempt:
    failures: list[RestoreFailure] = field(default_factory=list)

    @property
    def sources(self) -> set[str]:
        return {f.source for f in self.failures if f.source != "unknown"}

    @property
    def terminal(self) -> bool:
        return any(f.terminal for f in self.failures)

    @property
    def ts(self) -> str | None:
        return next((f.event.ts for f in self.failures if f.event.ts), None)


def _kind(event: Event) -> tuple[str, str] | None:
    links = [c for c in event.chain if c.kind != "suppressed"] or list(event.chain)
    for link in reversed(links):
        text = f"{link.cls}: {link.message}"
        if DISK_FULL.search(text):
            return "disk-full", text
        if CORRUPTION.search(link.message):
            return "corruption", text
        if link.simple_name == "RocksDBException" and MISSING_SST.search(link.message):
            return "missing-file", text
    return None


def restore_failures(incident: Incident) -> list[RestoreFailure]:
    """Failed RocksDB restores whose cause is a corrupt, missing or unwritable file, with where they read from."""
    out: list[RestoreFailure] = []
    starts: dict[str, list[tuple[int, Event, re.Match[str]]]] = {}
    for ev in incident.events:
        m = RESTORE_START.search(ev.message)
        if m:
            starts.setdefault(ev.file, []).append((ev.line, ev, m))
    last_failure_line: dict[str, int] = {}
    for ev in incident.events:
        kind = _kind(ev)
        if kind is None:
            continue
        text = ev.text
        if not (RESTORE_CONTEXT.search(text) or any("RocksDB.open" in f or "Restore" in f for f in ev.frames)):
            continue
        if kind[0] == "disk-full" and not RESTORE_CONTEXT.search(text):
            continue
        sst = next(iter(SST_PATH.findall(kind[1])), None)
        failure = RestoreFailure(ev, kind[0], kind[1], sst)
        if m := ALTERNATIVE.search(ev.message):
            failure.alternative = (int(m["k"]), int(m["n"]))
        failure.terminal = bool(ALL_OPTIONS.search(text) or "Exception while creating StreamOperatorStateContext" in text)
        failure.source, failure.source_evidence = _source(ev, failure, starts.get(ev.file, []),
                                                          last_failure_line.get(ev.file, 0), incident.config)
        last_failure_line[ev.file] = ev.line
        out.append(failure)
    return out


def _source(ev: Event, failure: RestoreFailure, starts, after_line: int, config: EffectiveConfig) -> tuple[str, str]:
    """Where the failed restore read its files: the task-local copy or the checkpoint storage."""
    if failure.alternative and failure.alternative[1] > 1:
        k, n = failure.alternative
        if k < n:
            return "local", f"alternative {k} of {n}: the task-local copy is tried before the checkpoint storage"
    frames = "\n".join(ev.frames)
    if REMOTE_FRAMES.search(frames):
        return "remote", "the stack shows the download from the checkpoint storage"
    paths = " ".join(filter(None, [failure.sst, failure.message]))
    if LOCAL_STATE_DIR.search(paths) or any(d and d in paths for d in rocksdb_dirs(config).local_state_dirs):
        return "local", "the corrupt file is in the task-local state directory"
    # The restore announcements before the failure, in the same file and after the previous failure: the handle
    # type names the source; a download or "no local state" for this operator says it came from the storage.
    previous = [(line, m) for line, e, m in starts if after_line < line < ev.line and _within(e.ts, ev.ts, 120)]
    handles = [(line, m.group("h1") or m.group("h2")) for line, m in previous if m.group("h1") or m.group("h2")]
    downloads = [line for line, m in previous if m.group("download")]
    if handles:
        line, handle = handles[-1]
        if handle == "IncrementalLocalKeyedStateHandle" and not any(d > line for d in downloads):
            return "local", f"line {line}: the restore opened the task-local copy"
        return "remote", f"line {line}: the restore read {handle} (files from the checkpoint storage)"
    if downloads:
        return "remote", f"line {downloads[-1]}: the state was downloaded from the checkpoint storage"
    text = ev.text
    for line, m in previous:
        vertex = re.search(r"- ([0-9a-f]{32}) - \d+\)", m.string)
        if m.group("nolocal") and (vertex is None or vertex.group(1) in text):
            return "remote", f"line {line}: no task-local copy was found, so the state came from the checkpoint storage"
    if "restoreFromLocalState" in frames and LOCAL_ONLY_FRAMES.search(frames):
        return "local", "the stack opens the task-local copy without downloading"
    return "unknown", ""


def _within(a: str | None, b: str | None, limit_s: float) -> bool:
    sa, sb = seconds(a), seconds(b)
    return sa is None or sb is None or 0 <= sb - sa <= limit_s


def restore_attempts(failures: list[RestoreFailure], window_s: float = 3.0) -> list[RestoreAttempt]:
    """Failures close in time are one restore attempt (the TaskManager and JobManager report it several times)."""
    attempts: list[RestoreAttempt] = []
    for f in sorted(failures, key=lambda f: (f.event.ts or "", f.event.file, f.event.line)):
        last = attempts[-1] if attempts else None
        if last and (f.event.ts is None or last.ts is None or _within(last.failures[-1].event.ts, f.event.ts, window_s)):
            last.failures.append(f)
        else:
            attempts.append(RestoreAttempt([f]))
    return attempts


@dataclass
class RestoredCheckpoint:
    event: Event
    checkpoint_id: int
    kind: str  # Checkpoint | Savepoint
    job: str
    path: str | None


def restored_checkpoints(incident: Incident) -> list[RestoredCheckpoint]:
    out = []
    for ev in incident.events:
        m = CHECKPOINT_RESTORED.search(ev.message)
        if m:
            out.append(RestoredCheckpoint(ev, int(m["id"]), m["kind"], m["job"], m["path"]))
    return out


def remote_files(incident: Incident) -> dict[str, tuple[str, int]]:
    """Local SST name -> (remote file, size) from the restore announcements of the incident."""
    out: dict[str, tuple[str, int]] = {}
    for ev in incident.events:
        if "KeyedStateHandle" in ev.message:
            for m in SHARED_FILE.finditer(ev.message):
                out[os.path.basename(m["local"])] = (m["remote"], int(m["bytes"]))
    return out
