"""A checkpoint or savepoint is restored but its files are gone: ``FileNotFoundException`` on restore.

Two places notice it. The JobManager, when a submission names a snapshot (``-s``/``execution.state-recovery.path``):
``Cannot find checkpoint or savepoint file/directory '<path>' on file system '<fs>'.`` or ``Cannot find meta data
file '_metadata' in directory '<path>'.``; the job fails at once. A TaskManager, when the metadata was found but a
state file it lists is not: ``Could not restore keyed|operator state backend for <op> from any of the N provided
restore options`` caused by ``FileNotFoundException: <path> (No such file or directory)`` (local file systems; HDFS:
``File does not exist``, S3: ``No such file or directory: s3a://…``); the task fails and every restart fails again.

Why the files are missing decides what to do:

- the checkpoint directory is a local path (``file://`` or none) while the cluster spans several hosts: each
  TaskManager wrote its state to its own disk, and a restore on another host (or the JobManager reading
  ``_metadata``) finds nothing;
- the snapshot was restored in CLAIM mode by a job that then owned it and deleted it once subsumed, and it is
  restored again;
- files were removed: retention (older ``chk-N`` are deleted when newer ones complete), object-store lifecycle rules
  or clean-up scripts (incremental checkpoints keep referencing files under ``shared/`` written long before), or
  another job or person cleaned the directory;
- the path is not a snapshot at all: ``<checkpoint dir>/<job id>`` instead of one of its ``chk-N``;
- the checkpoint was moved or copied elsewhere and restored from there: a checkpoint's ``_metadata`` names its state
  files by absolute path (only savepoints are self-contained and can be moved), so the missing files lie outside the
  restored checkpoint's own directory tree (``<dir>/<job id>/``: its ``chk-N``, ``shared/``, ``taskowned/``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence import cluster
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.evidence.rocksdb import split_dirs, strip_scheme
from flink_runbooks.evidence.restore import CHECKPOINT_DIR_KEY, CLAIM_MODE_KEY, restored_snapshots, savepoint_starts
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording
from flink_runbooks.vocabulary.lifecycle import CHECKPOINT_COMPLETED

NO_METADATA = re.compile(r"Cannot find meta data file '_metadata' in directory '(?P<path>[^']+)'")
NO_SNAPSHOT = re.compile(r"Cannot find checkpoint or savepoint file/directory '(?P<path>[^']+)'")
RESTORE_OPTIONS = re.compile(r"Could not restore (?P<what>keyed|operator) state backend for (?P<op>\S+) from any of "
                             r"the (?P<n>\d+) provided restore options")
MISSING_FILE = re.compile(
    r"FileNotFoundException: (?:(?P<a>\S+) \(No such file or directory\)|File (?P<b>\S+) does not exist"
    r"|File does not exist: (?P<c>\S+)|No such file or directory: (?P<d>\S+)|(?P<e>\S+) \(Not Found\))"
    r"|NoSuchFileException: (?P<f>\S+)")
CLAIM_MODE = re.compile(r"(?:restoreMode|claimMode|recoveryClaimMode|RestoreMode|RecoveryClaimMode)[=:' ]+\W?CLAIM\b"
                        r"|in CLAIM mode|claim-mode[=:]\s*CLAIM\b|savepoint-restore-mode[=:]\s*CLAIM\b")
# Where incremental checkpoints keep the files several checkpoints share (Flink's
# AbstractFsCheckpointStorageAccess.CHECKPOINT_SHARED_STATE_DIR, under the job's checkpoint directory).
CHECKPOINT_SHARED_STATE_DIR = "shared"
# A checkpoint's own tree: <checkpoint dir>/<job id>/ holding chk-N, shared/ and taskowned/.
CHECKPOINT_TREE = re.compile(r"^(?P<tree>.*?)/(?:chk-\d+|shared|taskowned)(?:/|$)")
SNAPSHOT_DIR = re.compile(r"(?P<dir>\S*?/(?:chk-\d+|savepoint-[0-9a-f]{6}-[0-9a-f]{12}))(?:/|$)")

_OTHER = "ops:restore from another snapshot"
_NEXT = ("a listing of the snapshot's directory in the checkpoint storage (`ls -la <path>` / `aws s3 ls --recursive` / "
         "`hdfs dfs -ls -R`), the storage's lifecycle or clean-up rules, the claim mode of earlier restores of this "
         "path (`grep -n \"from savepoint\\|CLAIM\" jobmanager.log`), and the hosts of the JobManager and "
         "TaskManagers next to the checkpoint directory's scheme.")


class StateRestoreFilesMissing(Detector):
    slug = "state-restore-files-missing"
    title = "Checkpoint or savepoint files missing on restore"
    category = "state-restore"
    meaning = ("A job restores a checkpoint or savepoint whose files are not there (FileNotFoundException, missing "
               "_metadata): the directory is not shared by all hosts, or the files were deleted.")
    exception_classes = ("java.io.FileNotFoundException", "org.apache.flink.util.FlinkException")
    versions = "1.9 – 2.x"
    config_keys = (
        "execution.checkpointing.dir",
        "execution.checkpointing.savepoint-dir",
        "execution.checkpointing.num-retained",
        "execution.checkpointing.incremental",
        "execution.state-recovery.claim-mode",
        "execution.state-recovery.path",
    )
    signatures = (
        r"Cannot find meta data file '_metadata' in directory",
        r"Cannot find checkpoint or savepoint file/directory",
        r"FileNotFoundException: .*(?:No such file or directory|does not exist|Not Found)",
        r"NoSuchFileException: ",
        r"Could not restore (?:keyed|operator) state backend for .+ from any of the \d+ provided restore options",
        r"Restoring job [0-9a-f]{32} from ",
        r"Completed checkpoint \d+ for job [0-9a-f]{32}",
        r"claimMode|restoreMode|CLAIM mode|RecoveryClaimMode",
    )
    wordings = (
        Wording("state-restore-files-missing",
                r"Cannot find meta data file '_metadata' in directory '[^']+'",
                "1.9 – 2.x", "AbstractFsCheckpointStorage(Access)#resolveCheckpointPointer (1.9.3, 1.13.6, 1.17.2, "
                "1.20.3, 2.3.0)",
                "java.io.FileNotFoundException: Cannot find meta data file '_metadata' in directory '/data/flink/"
                "savepoints/savepoint-a1b2c3-0123456789ab'. Please try to load the checkpoint/savepoint directly "
                "from the metadata file instead of the directory."),
        Wording("state-restore-files-missing",
                r"Cannot find checkpoint or savepoint file/directory '[^']+' on file system",
                "1.9 – 2.x", "AbstractFsCheckpointStorage(Access)#resolveCheckpointPointer (1.9.3, 1.20.3, 2.3.0)",
                "java.io.FileNotFoundException: Cannot find checkpoint or savepoint file/directory 'file:/data/flink/"
                "checkpoints/3f1c9e0a7b2d4c6e8f0a1b2c3d4e5f60/chk-12' on file system 'file'."),
    )
    root_causes = (
        RootCause("checkpoint-dir-not-shared",
                  "The checkpoint directory is a local path while the cluster runs on several hosts: each "
                  "TaskManager wrote its state to its own disk, so a restore elsewhere (or the JobManager reading "
                  "_metadata) finds nothing.",
                  "A missing file under a local checkpoint directory (file:// or no scheme) and TaskManagers on more "
                  "than one host, or on another host than the JobManager.",
                  patches=("flink:execution.checkpointing.dir", "flink:execution.checkpointing.savepoint-dir",
                           "ops:share the checkpoint directory")),
        RootCause("claim-mode-deleted",
                  "The snapshot was restored in CLAIM mode: the job that restored it took ownership and deleted it "
                  "once newer checkpoints subsumed it; restoring the same path again finds it gone.",
                  "An earlier restore of the same path in CLAIM mode in the logs (or the configured claim mode), "
                  "then the path missing.",
                  patches=("ops:restore the claiming job's newest checkpoint", "flink:execution.state-recovery.claim-mode")),
        RootCause("files-deleted",
                  "Files of the snapshot were deleted from a shared checkpoint storage: retention (subsumed "
                  "checkpoints), an object-store lifecycle rule or clean-up job, or a person or another job cleaning "
                  "the directory; incremental checkpoints still reference files under shared/ written long ago.",
                  "The snapshot's directory or _metadata exists (or existed: it completed in these logs) but a file "
                  "it lists is missing, on a storage every host shares.",
                  patches=(_OTHER, "ops:stop deleting files the checkpoints still use",
                           "flink:execution.checkpointing.num-retained")),
        RootCause("checkpoint-relocated",
                  "The checkpoint was moved or copied to another place and restored from there: a checkpoint's "
                  "_metadata names its state files by their absolute paths, so the restore still reads them at the "
                  "original place, where they are gone. Only savepoints are self-contained and can be moved.",
                  "The restored checkpoint (chk-N) lies in one directory while the missing state file lies outside "
                  "its tree (<dir>/<job id>/: chk-N, shared/, taskowned/), under another directory.",
                  patches=("ops:restore from the checkpoint's original location",
                           "ops:move state with a savepoint")),
        RootCause("not-a-snapshot-path",
                  "The restore path is not a snapshot: it names the job's checkpoint directory (or the checkpoint "
                  "root) instead of one of its chk-N directories or a savepoint directory, so there is no _metadata.",
                  "'Cannot find meta data file _metadata' for a directory that ends in a job id or is the configured "
                  "checkpoint directory.",
                  patches=("ops:restore a chk-N or savepoint directory",)),
        RootCause("undetermined",
                  "A restore misses files, but the logs do not show why: the path may be wrong, or the snapshot "
                  "removed.",
                  "The missing path alone: no earlier sign of the snapshot, no claim mode, no host information.",
                  patches=(_OTHER,),
                  would_change="A local checkpoint directory with TaskManagers on several hosts (not shared); an "
                               "earlier CLAIM restore of the path (claimed and deleted); the snapshot completed or "
                               "found earlier in the logs (files deleted afterwards).",
                  next_evidence=_NEXT),
    )

    templates = {
        "head": "The job cannot be restored from its snapshot: {what}{consequence} ",
        "no metadata": "the snapshot {snapshot} has no _metadata file",
        "no snapshot": "the snapshot {snapshot} does not exist",
        "missing file": "the state file {path} does not exist",
        "refused": " (the JobManager refused the submission).",
        "every attempt fails": ", so every restore attempt fails the task.",
        "not-a-snapshot-path": "That path is a directory that holds snapshots (the job's checkpoint directory or the "
                               "checkpoint root), not a snapshot: restore one of its chk-N directories (the newest "
                               "complete one) or a savepoint directory. Nothing was deleted.",
        "checkpoint-dir-not-shared": "The checkpoint directory is a local path ({local_dir}) while the TaskManagers "
                                     "run on {count} host(s) ({hosts}): each wrote its state to its own disk, so a "
                                     "restore on another host finds nothing. Checkpoints and savepoints need a file "
                                     "system every host shares (S3, HDFS, GCS, an NFS mounted at the same path).",
        "claim-mode-deleted": "The snapshot was restored in CLAIM mode before: the job that restored it owned it and "
                              "deleted it once newer checkpoints subsumed it. Restore that job's newest checkpoint "
                              "instead, and restore shared snapshots in NO_CLAIM mode.",
        "files-deleted": "{when}{who}{shared}Restore from another complete snapshot; the one named is unusable.",
        "complete when written": "It was complete when written (these logs show it), so files were removed "
                                 "afterwards: ",
        "removed after writing": "Files were removed after the snapshot was written: ",
        "savepoint deleted": "Flink never deletes a savepoint, so a person, a clean-up job, an object-store lifecycle "
                             "rule or another job cleaning the directory removed them. ",
        "checkpoint deleted": "retention of older checkpoints (subsumed ones are deleted), an object-store lifecycle "
                              "rule, a clean-up job, or a person or another job cleaning the directory. ",
        "shared files": "Incremental checkpoints keep referencing files under shared/ that were written many "
                        "checkpoints ago: a lifecycle rule or clean-up that removes 'old' files breaks the newest "
                        "checkpoint. ",
        "checkpoint-relocated": "The restored checkpoint {restored} is not where it was written: its _metadata names "
                                "the state files by their absolute paths under {original}, and they are not there "
                                "any more (the checkpoint was moved or copied, and the original removed). Checkpoints "
                                "cannot be relocated; only savepoints can. Nothing inside the restored copy is "
                                "missing.",
        "relocated note": "the restore reads the checkpoint at its new place",
        "restore original": "A checkpoint restores only from where it was written: put its files back at {original} "
                            "(or mount the storage at that path again) and restore from there.",
        "move with savepoint": "To move state to another storage, take a savepoint (self-contained: its files are "
                               "named relative to it) and move that, or restore the checkpoint at its original place "
                               "and take a savepoint into the new one.",
        "undetermined": "The logs do not show why: a mistyped path, a snapshot of another job, or a removed one. Root "
                        "cause undetermined.",
        "claimed note": "an earlier job restored this snapshot in CLAIM mode{configured}: it owned the snapshot and "
                        "deleted it once subsumed",
        "configured claim": " ({key}: CLAIM)",
        "complete note": "the snapshot was complete when it was written",
        "submission note": "the submission names the snapshot",
        "no-metadata note": "the snapshot directory has no _metadata",
        "no-snapshot note": "the snapshot directory does not exist",
        "missing-file note": "a state file the restore needs does not exist",
        "next attempt note": "the next attempt fails the same way",
        "restore a snapshot": "A snapshot is a directory with a _metadata file: a chk-N under the job's checkpoint "
                              "directory, or a savepoint-… directory. Pick the newest one that has _metadata.",
        "shared checkpoints": "A directory every JobManager and TaskManager host reads and writes (S3, HDFS, GCS, or "
                              "an NFS mounted at the same path everywhere); a local path only works on a single host.",
        "shared savepoints": "Savepoints have the same need: every host writes its part of the savepoint.",
        "share the directory": "Until the storage is shared, the state written on each host is only on that host: "
                               "copy every host's part of the snapshot into one place only if a restore must succeed "
                               "now.",
        "restore the claimer's": "The job that restored the snapshot in CLAIM mode owns its successors: restore its "
                                 "newest retained checkpoint (or a savepoint of it).",
        "no claim": "NO_CLAIM (the default) never deletes the restored snapshot: the new job takes its own full "
                    "checkpoint first. Use CLAIM only when no one else restores that snapshot again.",
        "restore another": "This snapshot is incomplete; start from another complete one (the newest retained "
                           "checkpoint or a savepoint, which is self-contained) after checking its files exist.",
        "stop deleting": "Exclude the checkpoint directory from object-store lifecycle/expiration rules and clean-up "
                         "scripts: Flink deletes what it no longer needs itself.{shared}",
        "shared references": " Incremental checkpoints reference files under shared/ for as long as any retained "
                             "checkpoint uses them, whatever their age.",
        "retain more": "Keep several complete checkpoints (now {retained}) so that another one is there when the "
                       "newest cannot be restored; retention deletes subsumed ones, so do not restore a chk-N older "
                       "than the retained ones.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = self._failures(incident)
        if not failures:
            return []
        jm_side = [f for f in failures if f[1] in ("no-metadata", "no-snapshot")]
        # the process's own log (JobManager for a refused submission, TaskManager for a restore) over CLI copies
        own = "taskmanager" if not jm_side else "jobmanager"
        primary = sorted(jm_side or failures, key=lambda f: (f[0].role != own, -len(f[0].chain)))[0]
        event, kind, missing = primary
        snapshot = _snapshot_of(missing, incident)
        restores = [(ev, m) for ev, m in restored_snapshots(incident)]
        starts = savepoint_starts(incident)
        claims = self._claims(incident, snapshot)
        configured_claim = (incident.config.get(CLAIM_MODE_KEY) or "").upper() == "CLAIM"
        # an earlier job of these logs started from the same snapshot (and ran on it) before this restore
        earlier = [s.event for s in starts if _same(s.path, snapshot) and s.event.ts and event.ts
                   and s.event.ts < event.ts and not _same_submission(s.event, event)]
        if configured_claim and earlier and not claims:
            claims = earlier[:1]
        scheme, local_dir = _checkpoint_dir(incident, missing)
        hosts = _hosts(incident)
        multi_host = len(hosts["taskmanagers"]) > 1 or bool(
            hosts["jobmanager"] and hosts["taskmanagers"] and not hosts["taskmanagers"] <= hosts["jobmanager"])
        completed = self._completed_before(incident, snapshot, event)
        found_before = any(_same(m["path"], snapshot) for ev, m in restores if m["path"]) and kind == "missing-file"

        restored = _restored_checkpoint(incident, event)
        relocated = kind == "missing-file" and restored is not None and not _within(missing, _tree(restored.path))
        if kind == "no-metadata" and _is_container_dir(missing, incident):
            cause = "not-a-snapshot-path"
        elif relocated:
            cause = "checkpoint-relocated"
            snapshot = restored.path
        elif scheme == "file" and multi_host:
            cause = "checkpoint-dir-not-shared"
        elif claims or (configured_claim and kind in ("no-metadata", "no-snapshot")):
            cause = "claim-mode-deleted"
        elif kind == "missing-file" or kind == "no-metadata" or completed:
            cause = "files-deleted"
        else:
            cause = "undetermined"
        confidence = {"not-a-snapshot-path": 0.85, "checkpoint-relocated": 0.85, "checkpoint-dir-not-shared": 0.85, "claim-mode-deleted": 0.85 if claims else 0.6,
                      "files-deleted": 0.8 if (completed or found_before or kind != "no-snapshot") else 0.6,
                      "undetermined": 0.45}[cause]
        if is_excerpt(incident) and cause != "undetermined":
            confidence -= 0.15

        shared_file = bool(missing and f"/{CHECKPOINT_SHARED_STATE_DIR}/" in missing)
        details = {
            "missing": missing or "not named",
            "snapshot": snapshot or "unknown",
            "noticed_by": "the JobManager at submission" if kind in ("no-metadata", "no-snapshot")
                          else "a TaskManager while restoring state",
            "what_is_missing": {"no-metadata": "the snapshot's _metadata file",
                                "no-snapshot": "the whole snapshot directory",
                                "missing-file": "a state file under shared/ (incremental checkpoints)" if shared_file
                                                else "a state file the snapshot's _metadata lists"}[kind],
            "checkpoint_dir": incident.config.get(CHECKPOINT_DIR_KEY) or "not in the configuration",
            "taskmanager_hosts": sorted(hosts["taskmanagers"]) or "unknown",
            "claim_mode": ("CLAIM (an earlier restore of this path)" if claims else
                           incident.config.get(CLAIM_MODE_KEY) or "not set (NO_CLAIM)"),
            "completed_in_these_logs": "yes" if completed else "no",
            "restore_attempts_failed": _attempts(failures, jm_side),
        }
        if relocated:
            details["original_location"] = _tree(missing)
        evidence, notes, add = evidence_trail()
        if relocated:
            add(restored.event, self.say("relocated note"))
        if claims:
            add(claims[0], self.say("claimed note", configured=self.say("configured claim", key=CLAIM_MODE_KEY)
                                    if configured_claim else ""))
        if completed is not None:
            add(completed, self.say("complete note"))
        start = next((s for s in reversed(starts) if _same(s.path, snapshot)), None)
        add(start.event if start else None, self.say("submission note"))
        add(event, self.say(f"{kind} note"))
        later = next((ev for ev, k, _ in failures if ev is not event and k == kind and ev.role == event.role
                      and _attempt_of(ev) not in (None, _attempt_of(event))), None)
        if later is not None and kind == "missing-file":
            add(later, self.say("next attempt note"))
        summary = self._summary(cause, kind, missing, snapshot, hosts, local_dir, claims, shared_file, completed)
        patches = self._patches(incident, cause, snapshot, claims, local_dir, shared_file, missing)
        return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details)]

    # -- readings ---------------------------------------------------------------------------------------------------

    @staticmethod
    def _failures(incident: Incident) -> list[tuple[Event, str, str | None]]:
        out = []
        for ev in incident.events:
            text = ev.text
            m = NO_METADATA.search(text)
            if m:
                out.append((ev, "no-metadata", m["path"]))
                continue
            m = NO_SNAPSHOT.search(text)
            if m:
                out.append((ev, "no-snapshot", m["path"]))
                continue
            if RESTORE_OPTIONS.search(text) or "StreamOperatorStateContext" in text:
                m = MISSING_FILE.search(text)
                if m:
                    out.append((ev, "missing-file", next(g for g in m.groups() if g)))
        return out

    @staticmethod
    def _claims(incident: Incident, snapshot: str | None) -> list[Event]:
        if not snapshot:
            return []
        return [ev for ev in incident.events if CLAIM_MODE.search(ev.text) and _mentions(ev.text, snapshot)]

    @staticmethod
    def _completed_before(incident: Incident, snapshot: str | None, failure: Event) -> Event | None:
        m = re.search(r"/(?P<job>[0-9a-f]{32})/chk-(?P<id>\d+)", snapshot or "")
        if m:
            for ev, c in incident.find(CHECKPOINT_COMPLETED):
                if c["id"] == m["id"] and c["job"] == m["job"]:
                    return ev
        m = re.search(r"savepoint-(?P<short>[0-9a-f]{6})-[0-9a-f]{12}", snapshot or "")
        if m:
            name = m.group(0)
            return next((ev for ev in incident.events if name in ev.message and ev is not failure
                         and re.search(r"[Ss]avepoint (?:stored in|completed)|Completed checkpoint", ev.message)),
                        None)
        return None

    # -- text -----------------------------------------------------------------------------------------------------

    def _summary(self, cause, kind, missing, snapshot, hosts, local_dir, claims, shared_file, completed) -> str:
        what = (self.say("no metadata", snapshot=snapshot) if kind == "no-metadata" else
                self.say("no snapshot", snapshot=snapshot or missing) if kind == "no-snapshot" else
                self.say("missing file", path=missing))
        head = self.say("head", what=what, consequence=self.say("refused") if kind != "missing-file"
                        else self.say("every attempt fails"))
        if cause == "checkpoint-dir-not-shared":
            return head + self.say(cause, local_dir=local_dir, count=len(hosts["taskmanagers"]),
                                   hosts=", ".join(sorted(hosts["taskmanagers"])))
        if cause == "checkpoint-relocated":
            return head + self.say(cause, restored=snapshot, original=_tree(missing))
        if cause == "files-deleted":
            savepoint = "savepoint-" in (snapshot or "")
            return head + self.say(
                cause, when=self.say("complete when written") if completed else self.say("removed after writing"),
                who=self.say("savepoint deleted") if savepoint else self.say("checkpoint deleted"),
                shared=self.say("shared files") if shared_file else "")
        return head + self.say(cause)

    def _patches(self, incident, cause, snapshot, claims, local_dir, shared_file, missing=None):
        patches = []
        if cause == "checkpoint-relocated":
            original = _tree(missing)
            chk = (snapshot or "").rstrip("/").rsplit("/", 1)[-1]
            patches.append(self.ops_patch(
                "restore from the checkpoint's original location", self.say("restore original", original=original),
                snippet=f"# copy the checkpoint's files back to where they were written\n"
                        f"cp -r {_bare(_tree(snapshot))}/. {_bare(original)}/\n"
                        f"flink run -s {original}/{chk} <your job arguments>"))
            patches.append(self.ops_patch(
                "move state with a savepoint", self.say("move with savepoint"),
                snippet=f"flink run -s {original}/{chk} <your job arguments>   # at the original place\n"
                        "flink stop --savepointPath <new place>/savepoints <job id>   # then restore from the "
                        "savepoint", urgent=False))
        if cause == "not-a-snapshot-path":
            bare = re.sub(r"^file:/*", "/", snapshot or "").rstrip("/")
            patches.append(self.ops_patch(
                "restore a chk-N or savepoint directory", self.say("restore a snapshot"),
                snippet=f"ls -d {bare}/chk-*/_metadata {bare}/*/chk-*/_metadata 2>/dev/null | sort -V | tail -3\n"
                        f"flink run -s {bare}/chk-<N> <your job arguments>"))
        if cause == "checkpoint-dir-not-shared":
            patches.append(self.flink_patch(
                incident, CHECKPOINT_DIR_KEY, "s3://<bucket>/flink/checkpoints", self.say("shared checkpoints")))
            if incident.config.get("execution.checkpointing.savepoint-dir"):
                patches.append(self.flink_patch(
                    incident, "execution.checkpointing.savepoint-dir", "s3://<bucket>/flink/savepoints",
                    self.say("shared savepoints")))
            patches.append(self.ops_patch(
                "share the checkpoint directory", self.say("share the directory"),
                snippet=f"# on every host: what it holds of the snapshot\nls -la {local_dir or '<checkpoint dir>'}"))
        if cause == "claim-mode-deleted":
            claimer = _claiming_job(claims)
            base = (incident.config.get(CHECKPOINT_DIR_KEY) or "<checkpoint dir>").rstrip("/")
            patches.append(self.ops_patch(
                "restore the claiming job's newest checkpoint", self.say("restore the claimer's"),
                snippet=f"ls -d {base}/{claimer or '<claiming job id>'}/chk-*\nflink run -s "
                        f"{base}/{claimer or '<claiming job id>'}/chk-<newest> <your job arguments>"))
            patches.append(self.flink_patch(
                incident, CLAIM_MODE_KEY, "NO_CLAIM", self.say("no claim")))
        if cause in ("files-deleted", "undetermined"):
            patches.append(self.ops_patch(
                "restore from another snapshot", self.say("restore another"),
                snippet=f"ls -la {_parent(snapshot)}\nflink run -s <complete snapshot path> <your job arguments>"))
        if cause == "files-deleted":
            patches.append(self.ops_patch(
                "stop deleting files the checkpoints still use",
                self.say("stop deleting", shared=self.say("shared references") if shared_file else "")))
            retained = incident.config.get_int("execution.checkpointing.num-retained") or 1
            if retained < 3 and "/chk-" in (snapshot or "") + (_checkpoint_of_shared(incident) or ""):
                patches.append(self.flink_patch(
                    incident, "execution.checkpointing.num-retained", "3", self.say("retain more", retained=retained)))
        return patches


def _is_container_dir(path: str | None, incident: Incident) -> bool:
    """A directory that holds snapshots rather than one: ``<checkpoint dir>/<job id>`` or the checkpoint dir."""
    if not path:
        return False
    bare = re.sub(r"^\w+:/*", "/", path).rstrip("/")
    if re.search(r"/[0-9a-f]{32}$", bare):
        return True
    configured = incident.config.get(CHECKPOINT_DIR_KEY)
    return bool(configured) and re.sub(r"^\w+:/*", "/", configured).rstrip("/") == bare


def _attempt_of(ev: Event) -> str | None:
    m = re.search(r"\(\d+/\d+\)#(\d+)", ev.message)
    return m.group(1) if m else None


def _attempts(failures: list[tuple[Event, str, str | None]], jm_side: list) -> int:
    """Restore attempts that failed: the task attempt numbers (``(1/1)#2``) of the TaskManagers' failure reports
    (several tasks of one attempt fail together), else the JobManager's refusals."""
    reports = [ev for ev, k, _ in failures if k == "missing-file" and ev.role == "taskmanager"
               and "switched from" in ev.message]
    numbers = {m.group(1) for ev in reports for m in [re.search(r"\(\d+/\d+\)#(\d+)", ev.message)] if m}
    return (len(numbers) or len(reports) or len({ev.ts for ev, _, _ in jm_side if ev.role == "jobmanager"}) or 1)


def _snapshot_of(path: str | None, incident: Incident) -> str | None:
    """The snapshot directory (``.../chk-N`` or ``.../savepoint-…``) a missing path belongs to, else the path."""
    if not path:
        return None
    m = SNAPSHOT_DIR.search(path)
    if m:
        return m["dir"]
    if f"/{CHECKPOINT_SHARED_STATE_DIR}/" in path:
        restores = [m["path"] for _, m in restored_snapshots(incident) if m["path"]]
        if restores:
            return restores[-1]
    return path.rstrip("/")


def _checkpoint_of_shared(incident: Incident) -> str | None:
    restores = [m["path"] for _, m in restored_snapshots(incident) if m["path"]]
    return restores[-1] if restores else None


def _same(a: str | None, b: str | None) -> bool:
    def norm(p: str) -> str:
        return re.sub(r"^file:/*", "/", p).rstrip("/.").removesuffix("/_metadata")
    return bool(a and b) and norm(a) == norm(b)


def _mentions(text: str, snapshot: str) -> bool:
    bare = re.sub(r"^file:/*", "/", snapshot).rstrip("/")
    return bare in re.sub(r"file:/+", "/", text)


def _parent(path: str | None) -> str:
    if not path:
        return "<checkpoint dir>/<job id>/"
    return re.sub(r"^file:/*", "/", path).rsplit("/", 1)[0] + "/"


def _checkpoint_dir(incident: Incident, missing: str | None) -> tuple[str | None, str | None]:
    configured = incident.config.get(CHECKPOINT_DIR_KEY)
    candidates = split_dirs(configured)[:1] if configured else []
    if missing:
        candidates.append(missing)
    for c in candidates:
        scheme, path = strip_scheme(c)
        if scheme:
            return scheme, path
    return None, None


def _hosts(incident: Incident) -> dict[str, set[str]]:
    inv = cluster.inventory(incident)
    tms = {tm.host for tm in inv.taskmanagers.values() if tm.host}
    jm = {f.host for f in incident.inputs if f.role == "jobmanager" and f.host}
    address = incident.config.get("jobmanager.rpc.address")
    if address:
        jm.add(address)
    local = {"localhost", "127.0.0.1"}
    if tms <= local and jm <= local | set():
        return {"taskmanagers": tms, "jobmanager": jm}
    return {"taskmanagers": tms - local or tms, "jobmanager": jm}


def _same_submission(a: Event, b: Event) -> bool:
    """Both lines belong to the submission that failed (within a few seconds of each other)."""
    from flink_runbooks.parse.timestamps import seconds_between

    gap = seconds_between(a.ts, b.ts) if a.ts and b.ts else None
    return gap is not None and abs(gap) < 5


def _claiming_job(claims: list[Event]) -> str | None:
    for ev in claims:
        m = re.search(r"Starting job (?P<job>[0-9a-f]{32})", ev.text) or re.search(r"\b(?P<job>[0-9a-f]{32})\b", ev.text)
        if m:
            return m["job"]
    return None



@dataclass
class RestoredCheckpoint:
    event: Event
    path: str


def _restored_checkpoint(incident: Incident, failure: Event) -> RestoredCheckpoint | None:
    """The checkpoint (a chk-N, not a savepoint) the job restored last before ``failure``, or None."""
    # the restore's own line, else the submission naming the snapshot ("Starting job … from savepoint <chk-N>")
    candidates = [(ev, m["path"]) for ev, m in restored_snapshots(incident)] or \
                 [(start.event, start.path) for start in savepoint_starts(incident)]
    found = None
    for ev, path in candidates:
        if path and re.search(r"/chk-\d+/?$", path) and (ev.ts or "") <= (failure.ts or "~"):
            found = RestoredCheckpoint(ev, path.rstrip("/"))
    return found


def _bare(path: str | None) -> str:
    """A local path without ``file:`` (other schemes kept)."""
    return re.sub(r"^file:/*", "/", path or "")


def _tree(path: str | None) -> str:
    """The checkpoint tree a path belongs to (``<dir>/<job id>``), else its parent directory."""
    if not path:
        return "<checkpoint dir>/<job id>"
    m = CHECKPOINT_TREE.match(path.rstrip("/") + "/")
    return m["tree"] if m else path.rstrip("/").rsplit("/", 1)[0]


def _within(path: str | None, tree: str) -> bool:
    """Whether ``path`` lies under the directory ``tree`` (``file:`` spellings of a local path alike)."""
    if not path:
        return True
    return (_bare(path).rstrip("/") + "/").startswith(_bare(tree).rstrip("/") + "/")
