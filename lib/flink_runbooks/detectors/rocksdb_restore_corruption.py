"""RocksDB restore fails on a corrupt SST file (``Bad table magic number``, checksum mismatch, truncated file).

``Exception while creating StreamOperatorStateContext`` → ``Could not restore keyed state backend`` →
``Caught unexpected exception`` → ``Error while opening RocksDB instance`` → ``RocksDBException: <corruption>``.
What to do depends on where the restore read the file: the task-local copy (local recovery) or the checkpoint
storage (downloaded), and whether the disk ran full.
"""
from __future__ import annotations

import collections
import os

from flink_runbooks.model import Finding, Incident, RootCause
from flink_runbooks.evidence.rocksdb import (
    RestoreAttempt, RestoreFailure, restore_attempts, restore_failures, restored_checkpoints, remote_files,
    rocksdb_dirs,
)
from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.vocabulary.wordings import Wording

DEFAULT_TMP = "/tmp"  # io.tmp.dirs defaults to java.io.tmpdir
RETAINED_CHECKPOINTS = 3  # enough to step back past one bad checkpoint
LOCAL_RECOVERY_KEY = "execution.state-recovery.from-local"
RETAINED_KEY = "execution.checkpointing.num-retained"


class RocksDBRestoreCorruption(Detector):
    slug = "rocksdb-restore-corruption"
    title = "RocksDB state restore fails on a corrupt SST file"
    category = "state-backends"
    meaning = ("A task could not open RocksDB while restoring its keyed state because an SST file is corrupt, "
               "truncated or missing; the restore fails on every attempt until a good copy is used.")
    exception_classes = ("org.rocksdb.RocksDBException", "org.apache.flink.runtime.state.BackendBuildingException",
                         "org.apache.flink.util.FlinkException")
    versions = "1.8 – 2.x (wording of the RocksDB message depends on the bundled RocksDB)"
    layer = 0
    config_keys = (
        "execution.state-recovery.from-local",
        "execution.checkpointing.local-backup.dirs",
        "execution.checkpointing.num-retained",
        "execution.checkpointing.incremental",
        "state.backend.rocksdb.localdir",
        "execution.checkpointing.dir",
    )
    signatures = (
        r"Bad table magic number|[Bb]lock checksum mismatch|bad checksum type|Sst file size mismatch|"
        r"truncated block read",
        r"Did not find registered local state for checkpoint",
        r"Start downloading remote state to local directory",
        r"Starting RocksDB incremental recovery in operator",
        r"Starting to restore from state handle: ",
        r"Finished (?:RocksDB incremental recovery in operator|restoring from state handle)",
        r"Exception while restoring keyed state backend",
    )
    frames = (
        r"RocksDBIncrementalRestoreOperation\.(?:restore\w*|transferRemoteStateToLocalDirectory|"
        r"downloadDataForAllStateHandles|initBaseDB\w*)",
        r"RocksDBStateDownloader\.",
        r"org\.rocksdb\.RocksDB\.open\(",
    )
    root_causes = (
        RootCause("remote-checkpoint-corrupt",
                  "The checkpoint's files in the checkpoint storage are corrupt or incomplete: every restore that "
                  "downloads them fails the same way, on any TaskManager.",
                  "The failing restore downloaded its files (no task-local state found, 'Start downloading remote "
                  "state', a remote state handle or download frames) and the same checkpoint fails on every attempt.",
                  patches=("flink:execution.checkpointing.num-retained", "flink:execution.state-recovery.from-local",
                           "ops:check the checkpoint storage", "ops:restart from an older snapshot")),
        RootCause("local-state-corrupt",
                  "The task-local copy used by local recovery is corrupt (a TaskManager killed while writing it, or "
                  "a failing disk).",
                  "The failing restore opened the task-local copy (local state handle, a localState path, or the "
                  "first of several restore alternatives) while local recovery is on.",
                  patches=("flink:execution.checkpointing.num-retained", "flink:execution.state-recovery.from-local",
                           "ops:wipe the task-local state")),
        RootCause("disk-full",
                  "The TaskManager's disk for RocksDB ran full during the restore, so files were cut short or "
                  "could not be written.",
                  "'No space left on device' / 'Disk quota exceeded' in the failed restore.",
                  patches=("flink:execution.checkpointing.num-retained", "ops:free the RocksDB disk")),
        RootCause("undetermined",
                  "A RocksDB restore failed on a corrupt file, but the logs do not show whether it came from the "
                  "task-local copy or from the checkpoint storage.",
                  "The restore failure alone (an excerpt): no download lines, no local or remote state handle.",
                  patches=("flink:execution.checkpointing.num-retained", "ops:restart from an older snapshot"),
                  would_change="'Start downloading remote state' or a remote state handle before the failure points "
                               "at the checkpoint storage; a localState path or a local state handle at the "
                               "task-local copy.",
                  next_evidence="the failing TaskManager's log from the task's deployment to the failure (restore "
                                "and download lines: `grep -n -E \"Restoring|download|localState\" taskmanager*.log`), "
                                "whether local recovery is on (state.backend.local-recovery / "
                                "execution.state-recovery.from-local), and the checkpoint's files in the storage."),
    )

    wordings = (
        Wording("rocksdb-restore-corruption", r"(?:Bad table magic number|Corruption: block checksum mismatch|Sst file size mismatch)",
                "1.3 – 2.x", "RocksDB (RocksDBException while opening restored SST files)",
                "org.rocksdb.RocksDBException: Bad table magic number: expected 9863518390377041911, found 0 in /data/rocksdb/job/db/000042.sst"),
    )

    templates = {
        "head": "Restoring RocksDB state from {which} failed {attempts} time(s) with '{message}'. ",
        "disk-full": "The TaskManager's disk ran full during the restore: RocksDB's working directory ({where}) needs "
                     "room for the whole state of its slots. Free or enlarge that disk; the checkpoint itself may be "
                     "fine.",
        "temp dir": "{tmp} (io.tmp.dirs unset: the JVM temp dir)",
        "local-state-corrupt": "The failing restore opened the task-local copy (local recovery), so the file on the "
                               "TaskManager's disk is bad, not necessarily the checkpoint. {outcome}",
        "recovered": "Flink then restored from the checkpoint storage and the job went on: wipe the local state "
                     "directory and check that disk.",
        "not recovered": "No restore option succeeded: wipe the local copy and restart from the checkpoint storage.",
        "undetermined": "Root cause undetermined: the logs do not show whether the file came from the task-local copy "
                        "or from the checkpoint storage. Until that is known, restarting from an older retained "
                        "checkpoint or a savepoint is the safe way back.",
        "remote-checkpoint-corrupt": "{no_local_copy}the restore downloaded the files from the checkpoint storage and "
                                     "they are corrupt: every retry fails the same way. Restart from an older "
                                     "retained checkpoint or a savepoint; with incremental checkpoints an older "
                                     "checkpoint can share the same bad file.",
        "no local copy": "Local recovery was on, but there was no task-local copy to use (the task moved to another "
                         "TaskManager), so ",
        # evidence notes
        "restores note": "the job restores {checkpoint}",
        "failure note": "{message}{read_from}",
        "read locally": " — read from the task-local copy ({evidence})",
        "read remotely": " — read from the checkpoint storage ({evidence})",
        "gave up note": "the restore gave up: no restore option left",
        "again note": "attempt {attempt} fails the same way",
        # patches
        "check the checkpoint storage": "Compare the size of the shared files of the checkpoint with what the restore "
                                        "announced (details) and look for partial uploads, lifecycle rules or tools "
                                        "that rewrote them; a storage without durable writes (fsync) can lose the end "
                                        "of files on a crash.",
        "wipe the task-local state": "Delete the corrupt task-local copy on the affected TaskManager (Flink falls "
                                     "back to the checkpoint storage) and check that disk (dmesg, SMART) before "
                                     "trusting it again.",
        "local recovery off": "Restore from the checkpoint storage only until the disk is trusted again; turn it back "
                              "on afterwards, it makes recovery faster. {aligned_only}",
        "aligned only": "Task-local recovery is only supported for aligned checkpoints (as of Flink 1.17); with "
                        "unaligned checkpoints the job restores from the checkpoint storage.",
        "free the RocksDB disk": "Give RocksDB's working directory room for the full state of every slot on the "
                                 "TaskManager (plus compaction headroom), or point state.backend.rocksdb.localdir at "
                                 "a bigger local disk, then restart from the same checkpoint; it was never the "
                                 "problem.",
        "retain": "Keep {retain} completed checkpoints so there is an older one to restart from when the latest "
                  "cannot be restored (currently {retained}).",
        "local recovery on": "Task-local recovery: a task that fails over to the same TaskManager restores from its "
                             "local copy instead of downloading the checkpoint (what a production Flink 1.16 "
                             "deployment hitting this error did). It does not help when the TaskManager is lost. "
                             "{aligned_only}{unaligned}",
        "unaligned on": " This job enables unaligned checkpoints, so it would gain nothing until they are off.",
        "older snapshot": "Stop the job and start it from the previous retained checkpoint or the latest savepoint "
                          "(flink run -s <path>); if none exists, start without state only as a last resort.",
        "previous checkpoint": "Checkpoint {checkpoint} cannot be restored; start from checkpoint {previous} "
                               "(retained: {retained}). With incremental checkpoints it may share the bad file: if it "
                               "fails the same way, use the latest savepoint.",
        "only one retained": "Checkpoint {checkpoint} cannot be restored and it is the only one retained "
                             "(num-retained {retained}): start from the latest savepoint; starting without state "
                             "loses it.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = restore_failures(incident)
        if not failures:
            return []
        attempts = restore_attempts(failures)
        for attempt in attempts:  # the attempt's other reports (WARN, task failure) share what one of them showed
            known = next((f for f in attempt.failures if f.source != "unknown"), None)
            for f in attempt.failures:
                if known is not None and f.source == "unknown" and f.event.file == known.event.file:
                    f.source, f.source_evidence = known.source, known.source_evidence
        sources = collections.Counter(s for a in attempts for s in a.sources)
        if any(f.kind == "disk-full" for f in failures):
            cause, confidence = "disk-full", 0.85
        elif sources["remote"]:
            cause, confidence = "remote-checkpoint-corrupt", 0.9
        elif sources["local"]:
            cause, confidence = "local-state-corrupt", 0.85
        else:
            # Neither a download nor a local copy shows: which file is bad (and so what to do) is not known.
            cause, confidence = "undetermined", 0.4
        # A corrupt local copy alone is survivable: Flink falls back to the checkpoint storage.
        recovered = cause == "local-state-corrupt" and not any(a.terminal for a in attempts)
        dirs = rocksdb_dirs(incident.config)
        restored = restored_checkpoints(incident)
        checkpoint = restored[-1] if restored else None
        files = remote_files(incident)
        ssts = sorted({os.path.basename(f.sst) for f in failures if f.sst})
        hosts = sorted({f.event.host or os.path.basename(f.event.file) for f in failures
                        if f.event.role == "taskmanager"})
        details = {
            "restore_attempts_failed": len(attempts),
            "attempts_by_source": {s: n for s, n in sources.items()} or {"unknown": len(attempts)},
            "rocksdb_message": failures[0].message,
            "corrupt_files": ssts or "not named in the message",
            "taskmanagers": hosts or "unknown",
            "restored_checkpoint": (f"{checkpoint.kind.lower()} {checkpoint.checkpoint_id}"
                                    + (f" at {checkpoint.path}" if checkpoint.path else "")) if checkpoint else "unknown",
            "local_recovery": {True: "on", False: "off", None: "off (default)"}[dirs.local_recovery],
            "retained_checkpoints": incident.config.get(RETAINED_KEY) or "1 (default)",
            "rocksdb_localdir": ", ".join(dirs.localdirs) or f"{DEFAULT_TMP} (io.tmp.dirs default)",
        }
        for sst in ssts:
            if sst in files:
                details[f"remote copy of {sst}"] = f"{files[sst][0]} ({files[sst][1]} bytes)"
        evidence, notes = self._evidence(failures, attempts, restored[0] if restored else None, cause)
        summary = self._summary(cause, failures, attempts, checkpoint, dirs, recovered, confidence)
        patches = self._patches(incident, cause, checkpoint, dirs, failures, recovered)
        return [self.finding(cause, summary, evidence, confidence=confidence, patches=patches,
                             severity="warning" if recovered else "failure", notes=notes, details=details)]

    def _evidence(self, failures: list[RestoreFailure], attempts: list[RestoreAttempt], checkpoint, cause):
        evidence, notes, add = evidence_trail()

        if checkpoint is not None:
            add(checkpoint.event, self.say("restores note",
                                           checkpoint=f"{checkpoint.kind.lower()} {checkpoint.checkpoint_id}"))
        # The task's own failure report carries the whole chain; the builder's ERROR line only the RocksDB part.
        ranked = sorted(failures, key=lambda f: (f.source == "unknown", f.event.role != "taskmanager",
                                                  f.event.level == "ERROR", f.event.ts or "", f.event.line))
        decisive = ranked[0]
        read_from = "" if decisive.source == "unknown" else self.say(
            "read locally" if decisive.source == "local" else "read remotely", evidence=decisive.source_evidence)
        add(decisive.event, self.say("failure note", message=decisive.message[:120], read_from=read_from))
        terminal = next((f for f in failures if f.terminal and f.event is not decisive.event), None)
        add(terminal.event if terminal else None, self.say("gave up note"))
        if len(attempts) > 1:
            last = sorted(attempts[-1].failures, key=lambda f: (f.event.level == "ERROR", f.event.line))[0]
            add(last.event, self.say("again note", attempt=len(attempts)))
        return evidence, notes

    def _summary(self, cause, failures, attempts, checkpoint, dirs, recovered, confidence) -> str:
        which = (f"{checkpoint.kind.lower()} {checkpoint.checkpoint_id}" if checkpoint else "the checkpoint")
        head = self.say("head", which=which, attempts=len(attempts), message=failures[0].message[:160])
        if cause == "disk-full":
            where = ", ".join(dirs.localdirs) or self.say("temp dir", tmp=DEFAULT_TMP)
            return head + self.say(cause, where=where)
        if cause == "local-state-corrupt":
            return head + self.say(cause, outcome=self.say("recovered" if recovered else "not recovered"))
        if cause == "undetermined":
            return head + self.say(cause)
        return head + self.say("remote-checkpoint-corrupt",
                               no_local_copy=self.say("no local copy") if dirs.local_recovery else "")

    def _patches(self, incident: Incident, cause, checkpoint, dirs, failures, recovered):
        cfg = incident.config
        patches = []
        retained = cfg.get_int(RETAINED_KEY) or 1
        if cause in ("remote-checkpoint-corrupt", "local-state-corrupt", "undetermined") and not recovered:
            patches.append(self._restart_patch(cfg, checkpoint, retained))
        if cause == "remote-checkpoint-corrupt":
            patches.append(self.ops_patch("check the checkpoint storage", self.say("check the checkpoint storage")))
        if cause == "local-state-corrupt":
            roots = dirs.local_state_dirs or ["<taskmanager working dir>"]
            root = next((os.path.dirname(os.path.dirname(f.sst)) for f in failures
                         if f.sst and "localState" in f.sst), None)
            job = checkpoint.job if checkpoint else "<job id>"
            patches.append(self.ops_patch(
                "wipe the task-local state", self.say("wipe the task-local state"),
                snippet="\n".join(f"rm -rf {r}/localState*/aid_*/jid_{job}" for r in roots)
                        + (f"\n# the corrupt copy: {root}" if root else "")))
            if dirs.local_recovery:
                patches.append(self.flink_patch(
                    incident, LOCAL_RECOVERY_KEY, "false",
                    self.say("local recovery off", aligned_only=self.say("aligned only"))))
        if cause == "disk-full":
            localdirs = dirs.localdirs or [DEFAULT_TMP]
            patches.append(self.ops_patch(
                "free the RocksDB disk", self.say("free the RocksDB disk"),
                snippet="\n".join(f"df -h {d}; du -sh {d}/*" for d in localdirs)))
        if retained < RETAINED_CHECKPOINTS:
            patches.append(self.flink_patch(
                incident, RETAINED_KEY, str(RETAINED_CHECKPOINTS),
                self.say("retain", retain=RETAINED_CHECKPOINTS, retained=retained)))
        if cause == "remote-checkpoint-corrupt" and not dirs.local_recovery:
            unaligned = cfg.get_bool("execution.checkpointing.unaligned.enabled")
            patches.append(self.flink_patch(
                incident, LOCAL_RECOVERY_KEY, "true",
                self.say("local recovery on", aligned_only=self.say("aligned only"),
                         unaligned=self.say("unaligned on") if unaligned else "")))
        return patches

    def _restart_patch(self, cfg, checkpoint, retained: int):
        if checkpoint is None or checkpoint.kind != "Checkpoint":
            return self.ops_patch("restart from an older snapshot", self.say("older snapshot"))
        base = checkpoint.path or ""
        if "/chk-" in base:
            base = base.rsplit("/chk-", 1)[0]
        elif cfg.get("execution.checkpointing.dir"):
            base = f"{cfg.get('execution.checkpointing.dir').rstrip('/')}/{checkpoint.job}"
        else:
            base = f"<checkpoint dir>/{checkpoint.job}"
        previous = checkpoint.checkpoint_id - 1
        if retained > 1 and previous > 0:
            reason = self.say("previous checkpoint", checkpoint=checkpoint.checkpoint_id, previous=previous,
                              retained=retained)
            snippet = f"flink run -s {base}/chk-{previous} <your job arguments>"
        else:
            reason = self.say("only one retained", checkpoint=checkpoint.checkpoint_id, retained=retained)
            snippet = "flink run -s <latest savepoint path> <your job arguments>"
        return self.ops_patch("restart from an older snapshot", reason, snippet=snippet)
