"""RocksDB ``while link file to …/chk-N.tmp/NNN.sst: …: Not supported``: the RocksDB directory cannot hard-link.

An incremental RocksDB snapshot starts with RocksDB's native checkpoint, which hard-links the live SST files into a
``chk-N.tmp`` directory next to the database. That needs a file system with hard links; network shares (Azure File
Share/SMB, some NFS setups), FUSE mounts and FAT do not have them, so every checkpoint fails in its synchronous
phase and the task fails over.
"""
from __future__ import annotations

import os
import re

from flink_runbooks.vocabulary import keys
from flink_runbooks.model import Finding, Incident, RootCause
from flink_runbooks.evidence.rocksdb import common_dir, instance_base, is_within, rocksdb_dirs, split_dirs, strip_scheme
from flink_runbooks.detectors.base import Detector
from flink_runbooks.vocabulary.wordings import Wording

LINK_FAILED = re.compile(r"[Ww]hile link file to (?P<dst>/\S+?): (?P<src>/\S+?): (?P<err>[^\n]+)")
# Path words that name a network, cloud or FUSE file system.
REMOTE_FS_HINT = re.compile(r"(?i)azure|afs|smb|cifs|nfs|efs|fuse|gcs|s3fs|blob|share|vfat|fat32|netapp|gluster|ceph")
FALLBACK_LOCALDIR = "/tmp/rocksdb"


class RocksDBHardlinkNotSupported(Detector):
    slug = "rocksdb-hardlink-not-supported"
    title = "RocksDB working directory does not support hard links"
    category = "state-backends"
    meaning = ("RocksDB's native checkpoint could not hard-link SST files because state.backend.rocksdb.localdir is "
               "on a file system without hard links, so every incremental checkpoint fails.")
    exception_classes = ("org.rocksdb.RocksDBException",)
    versions = "1.8 – 2.x"
    layer = 0
    config_keys = (
        "state.backend.rocksdb.localdir",
        "io.tmp.dirs",
        "execution.checkpointing.dir",
        "execution.checkpointing.incremental",
        "state.backend.type",
    )
    signatures = (
        r"[Ww]hile link file to ",
        r"Could not complete snapshot \d+ for operator",
    )
    frames = (r"takeDBNativeCheckpoint",)
    root_causes = (
        RootCause("localdir-on-checkpoint-storage",
                  "RocksDB's working directory was put on the checkpoint storage's mount (a network share or FUSE "
                  "file system), which has no hard links.",
                  "state.backend.rocksdb.localdir (the path in the message) lies inside or next to a file:// "
                  "checkpoint directory on the same mount.",
                  patches=("flink:state.backend.rocksdb.localdir", "ops:check the new directory",
                           "ops:stopgap without a local disk")),
        RootCause("localdir-on-network-fs",
                  "RocksDB's working directory is on a network, cloud or FUSE file system without hard links.",
                  "The failing path (state.backend.rocksdb.localdir, or io.tmp.dirs when it is unset) is not the "
                  "checkpoint storage but a mount such as Azure Files, SMB/NFS, a FUSE bucket or FAT.",
                  patches=("flink:state.backend.rocksdb.localdir", "ops:check the new directory",
                           "ops:stopgap without a local disk")),
    )

    wordings = (
        Wording("rocksdb-hardlink-not-supported", r"[Ww]hile link file to \S+/chk-\d+\.tmp/\S+: \S+: (?:Not supported|Operation not permitted)",
                "1.8 – 2.x", "RocksDB native checkpoint (RocksDBException via RocksIncrementalSnapshotStrategy); the OS error depends on the file system (EOPNOTSUPP, or EPERM on vfat)",
                "org.rocksdb.RocksDBException: While link file to /data/rocksdb/db/chk-5.tmp/000012.sst: /data/rocksdb/db/000012.sst: Not supported"),
    )

    templates = {
        "head": "RocksDB could not hard-link SST files for {checkpoints}: '{error}'. RocksDB's native checkpoint "
                "needs hard links in its working directory {localdir}. ",
        "counted": "{count} checkpoint(s) ({ids})",
        "localdir-on-checkpoint-storage": "It is {where}, a shared file system without hard links. Keep checkpoints "
                                          "there and move RocksDB's working directory to a local disk ({proposed}).",
        "inside": "inside the checkpoint directory {checkpoint_dir}",
        "same mount": "on the same mount as the checkpoint directory {checkpoint_dir} (both under {parent})",
        "localdir-on-network-fs": "That directory is on a file system without hard links (network share, FUSE or "
                                  "FAT); move it to a local disk ({proposed}). Checkpoints can stay where they are.",
        # evidence notes
        "note link failed": "hard link {file} into chk-{checkpoint}.tmp failed: {error}",
        "note jobmanager": "the JobManager sees the task fail with it",
        "note again": "checkpoint {checkpoint} fails the same way",
        # patches
        "local disk": "RocksDB is a local embedded database: its working directory belongs on a local disk (ideally a "
                      "local SSD), not on the checkpoint storage or a network share. It holds no data that must "
                      "survive the TaskManager; checkpoints keep going to {checkpoint_dir}.",
        "check the new directory": "Make sure the new directory exists on every TaskManager, is on a local file "
                                   "system with hard links and has room for the state of all slots.",
        "check snippet": "df -T {localdir}   # the current one: expect a network/FUSE/FAT type here\n"
                         "mkdir -p {proposed} && touch {proposed}/a && ln {proposed}/a {proposed}/b && rm "
                         "{proposed}/a {proposed}/b && df -hT {proposed}",
        "stopgap": "Only if no local disk can be had: full snapshots do not hard-link, at the price of bigger and "
                   "slower checkpoints.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        hits = [(ev, m) for ev in incident.events for m in [LINK_FAILED.search(ev.text)] if m]
        if not hits:
            return []
        first_ev, first = next(((ev, m) for ev, m in hits if ev.role == "taskmanager"), hits[0])
        src, dst, err = first["src"], first["dst"], first["err"].strip().rstrip(".")
        dirs = rocksdb_dirs(incident.config)
        failing = instance_base(src) or os.path.dirname(os.path.dirname(os.path.dirname(src)))
        configured = next((d for d in dirs.localdirs if is_within(src, d)), dirs.localdirs[0] if dirs.localdirs else None)
        localdir = configured or failing
        scheme, ckpt_path = strip_scheme(dirs.checkpoint_dir)
        shared_parent = _shared_mount(localdir, scheme, ckpt_path, incident)
        if shared_parent:
            cause, confidence = "localdir-on-checkpoint-storage", 0.9
        else:
            cause, confidence = "localdir-on-network-fs", 0.8 if (configured or dirs.checkpoint_dir) else 0.65
        checkpoints = sorted({int(c) for ev, m in hits for c in re.findall(r"/chk-(\d+)\.tmp/", m["dst"])})
        proposed = _proposed_localdir(incident, localdir, shared_parent)
        details = {
            "failed_links": len(hits),
            "checkpoints_failed": checkpoints,
            "error": err,
            "failing_path": src,
            "rocksdb_localdir": f"{localdir} (from {dirs.localdir_key})" if dirs.localdir_key else
                                f"{localdir} (seen in the message; not in the given configuration)",
            "checkpoint_dir": dirs.checkpoint_dir or "unknown",
            "same_mount_as_checkpoints": shared_parent or "no",
            "path_suggests": ", ".join(sorted({h.lower() for h in REMOTE_FS_HINT.findall(localdir or "")})) or "nothing",
        }
        evidence = [first_ev]
        notes = {0: self.say("note link failed", file=os.path.basename(dst),
                             checkpoint=checkpoints[0] if checkpoints else "N", error=err)}
        others = [ev for ev, _ in hits if ev is not first_ev]
        jm = next((ev for ev in others if ev.role == "jobmanager"), None)
        if jm is not None:
            notes[len(evidence)] = self.say("note jobmanager")
            evidence.append(jm)
        if len(checkpoints) > 1:
            last = next(ev for ev, m in reversed(hits) if f"/chk-{checkpoints[-1]}.tmp/" in m["dst"])
            if last not in evidence:
                notes[len(evidence)] = self.say("note again", checkpoint=checkpoints[-1])
                evidence.append(last)
        counted = (self.say("counted", count=len(checkpoints), ids=", ".join(map(str, checkpoints[:6]))) if checkpoints
                   else "checkpoints")
        summary = self.say("head", checkpoints=counted, error=err, localdir=localdir)
        if cause == "localdir-on-checkpoint-storage":
            where = (self.say("inside", checkpoint_dir=dirs.checkpoint_dir) if shared_parent == "inside"
                     else self.say("same mount", checkpoint_dir=dirs.checkpoint_dir, parent=shared_parent))
            summary += self.say(cause, where=where, proposed=proposed)
        else:
            summary += self.say(cause, proposed=proposed)
        return [self.finding(cause, summary, evidence, confidence=confidence, notes=notes, details=details,
                             patches=self._patches(incident, cause, localdir, proposed, dirs))]

    def _patches(self, incident: Incident, cause, localdir, proposed, dirs):
        version = incident.version_tuple
        incremental = keys.name_for("execution.checkpointing.incremental", version)
        return [
            self.flink_patch(incident, "state.backend.rocksdb.localdir", proposed,
                             self.say("local disk", checkpoint_dir=dirs.checkpoint_dir or "the checkpoint storage")),
            self.ops_patch("check the new directory", self.say("check the new directory"),
                           snippet=self.say("check snippet", localdir=localdir, proposed=proposed)),
            self.ops_patch("stopgap without a local disk", self.say("stopgap"), snippet=f"{incremental}: false"),
        ]


def _shared_mount(localdir: str | None, scheme: str | None, ckpt_path: str | None, incident: Incident) -> str | None:
    """``"inside"``, the shared parent directory, or None: whether RocksDB's directory is on the checkpoints' mount."""
    if not localdir or scheme != "file" or not ckpt_path:
        return None
    if is_within(localdir, ckpt_path):
        return "inside"
    parent = common_dir(localdir, ckpt_path)
    if len([p for p in parent.split("/") if p]) < 2:
        return None
    # A parent that also holds directories known to be local (logs, temp files) is a plain directory, not the mount.
    local = split_dirs(incident.config.get("io.tmp.dirs")) + split_dirs(incident.config.get("env.log.dir"))
    if any(is_within(d, parent) for d in local):
        return None
    return parent


def _proposed_localdir(incident: Incident, localdir: str | None, shared_parent: str | None) -> str:
    """A local directory for RocksDB: under io.tmp.dirs when that is not on the failing mount, else /tmp/rocksdb."""
    bad = shared_parent if shared_parent and shared_parent != "inside" else localdir
    for tmp in split_dirs(incident.config.get("io.tmp.dirs")):
        tmp = strip_scheme(tmp)[1] or tmp
        if bad and not is_within(tmp, bad) and not is_within(bad, tmp) and not REMOTE_FS_HINT.search(tmp):
            return tmp.rstrip("/") + "/rocksdb"
    return FALLBACK_LOCALDIR
