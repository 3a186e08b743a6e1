"""``Failure to finalize checkpoint`` caused by ``.../chk-N/_metadata already exists``: who else wrote chk-N."""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.evidence.checkpoint_analysis import (APPLICATION_MODE_JOB_ID, NOT_DISCARDED, JobRun, failovers, job_runs,
                                   job_state_changes, run_at)
from flink_runbooks.evidence.checkpoints import checkpoint_history
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.detectors.base import Detector, version_key
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.vocabulary.lifecycle import JOB_FAILOVER, TOLERABLE_FAILURES_EXCEEDED
from flink_runbooks.vocabulary.wordings import Wording

DIR_KEY = "execution.checkpointing.dir"
RETAINED_KEY = "execution.checkpointing.num-retained"
SUBDIR_KEY = "execution.checkpointing.create-subdir"
# The release that brought the option (state.checkpoints.create-subdir; execution.checkpointing.create-subdir from
# 1.20): before it, Flink always writes <dir>/<job id>/chk-N and ignores the key.
SUBDIR_SINCE = (1, 19)
# Keep only the newest checkpoint: fewer chk-N directories lie ahead of a restore point or under another writer's
# counter (a production deployment sharing an NFS mount cut its retention from 10 to 1 for this reason).
FEWER_RETAINED = 1
TOLERABLE_KEY = "execution.checkpointing.tolerable-failed-checkpoints"

# 1.16+: "Target file <path>/chk-N/_metadata already exists." (FsCheckpointMetadataOutputStream);
# older local FS: "java.nio.file.FileAlreadyExistsException: File already exists: <path>/chk-N/_metadata";
# HDFS: "org.apache.hadoop.fs.FileAlreadyExistsException: <path>/chk-N/_metadata for client <ip> already exists".
# A pasted trace may wrap the path right before "/_metadata".
COLLISION = re.compile(
    r"(?:Target file |File already exists: |FileAlreadyExistsException: )?(?P<path>\S*?chk-(?P<id>\d+))\s?/_metadata"
    r"(?:(?: for client \S+)? already exists|\b)")
COLLISION_TEXT = re.compile(r"_metadata(?: for client \S+)? already exists|File already exists: \S*_metadata")
JOB_IN_PATH = re.compile(r"/(?P<job>[0-9a-f]{32})/chk-\d+$")
FAILED_FOR_JOB = re.compile(r"checkpoint (?P<id>\d+) for job (?P<job>[0-9a-f]{32})")
FAILOVER = re.compile(rf"{JOB_FAILOVER.pattern}|Trying to recover from a global failure")


@dataclass
class Collision:
    event: Event
    checkpoint_id: int
    job: str | None
    path: str  # .../chk-N

    @property
    def base_dir(self) -> str:
        """The configured checkpoint directory: the path without /<job-id>/chk-N (or /chk-N)."""
        return re.sub(r"/(?:[0-9a-f]{32}/)?chk-\d+$", "", self.path)


class CheckpointMetadataAlreadyExists(Detector):
    slug = "checkpoint-metadata-already-exists"
    title = "Checkpoint metadata file already exists"
    category = "checkpointing"
    meaning = ("The JobManager could not write chk-N/_metadata because the file was already there: another run or "
               "deployment wrote a checkpoint with the same job id and number into the same directory.")
    exception_classes = ("org.apache.flink.runtime.checkpoint.CheckpointException", "java.io.IOException",
                         "java.nio.file.FileAlreadyExistsException", "org.apache.hadoop.fs.FileAlreadyExistsException")
    versions = "1.x, 2.x (the 'Target file ... already exists' wording since 1.16; older versions name the file system's exception)"
    layer = 0
    config_keys = (
        "execution.checkpointing.dir",
        "execution.checkpointing.num-retained",
        "execution.checkpointing.create-subdir",
        "execution.checkpointing.externalized-checkpoint-retention",
        "execution.state-recovery.path",
        "execution.checkpointing.tolerable-failed-checkpoints",
        "high-availability.cluster-id",
        "kubernetes.cluster-id",
    )
    signatures = (
        r"_metadata(?: for client \S+)? already exists",
        r"File already exists: \S*_metadata",
        r"Received JobGraph submission",
        r"No checkpoint found during restore",
        r"Starting job \w+ from savepoint",
        r"Reset the checkpoint ID of job",
        r"Checkpoint with ID \d+ at '[^']*' not discarded",
    )
    root_causes = (
        RootCause("job-id-reused",
                  "A new run reused the job id of an earlier run and started its checkpoint counter over in the same "
                  "directory, where that run's checkpoints were still retained.",
                  "The colliding run started without restoring ('No checkpoint found during restore', counter from "
                  "1); the same job id ran before (fixed id of application mode, HA cluster id, resubmitted with the "
                  "same id) and its chk-N was retained.",
                  patches=("flink:execution.checkpointing.dir", "ops:checkpoint directory per deployment",
                           "ops:job id handling", "ops:restore instead of starting over",
                           "flink:execution.checkpointing.num-retained")),
        RootCause("restored-behind-newer-checkpoints",
                  "The job restored from an older checkpoint while newer chk-N directories of the same job id were "
                  "still there, so the resumed counter ran into them.",
                  "'Restoring job … from Checkpoint N' / 'Reset the checkpoint ID' shortly before the collision on "
                  "N+1…; several checkpoints retained (num-retained > 1) or another deployment on the same directory.",
                  patches=("flink:execution.checkpointing.dir", "flink:execution.checkpointing.num-retained",
                           "ops:one writer per checkpoint directory")),
        RootCause("concurrent-writers",
                  "Two deployments write checkpoints of the same job id into the same directory at the same time "
                  "(e.g. a shared NFS mount).",
                  "Collisions in the middle of a run after its own checkpoints completed, repeating, or two "
                  "JobManagers running the same job id at the same time.",
                  patches=("flink:execution.checkpointing.dir", "flink:execution.checkpointing.num-retained",
                           "ops:checkpoint directory per deployment", "ops:one writer per checkpoint directory")),
        RootCause("shared-dir-without-job-subdir",
                  "Job-id sub-directories are disabled, so every job of the directory writes the same chk-N.",
                  "create-subdir is false and the colliding path has no job-id segment.",
                  patches=("flink:execution.checkpointing.create-subdir", "flink:execution.checkpointing.num-retained",
                           "ops:checkpoint directory per job")),
    )

    wordings = (
        Wording("checkpoint-metadata-already-exists", r"_metadata already exists|Metadata file already exists|already exists: .*/chk-\d+/_metadata",
                "1.3 – 2.x", "FsCheckpointMetadataOutputStream / LocalFileSystem (FileAlreadyExistsException)",
                "java.io.IOException: Target file file:/ckpt/0a4f2b7c9d1e3f5a6b8c0d2e4f6a8b0c/chk-12/_metadata already exists."),
    )

    templates = {
        "head": "Checkpoint metadata already existed for {names}{of_job} in {base_dir}, so the checkpoint could not "
                "be finalized. ",
        "why": "Why: {verdict} Evidence: {why}.",
        "failed over": " The job failed over ({times} time(s)).",
        "kept running": " The job kept running (a later checkpoint completed, within "
                        "tolerable-failed-checkpoints={tolerable}); the colliding checkpoint was lost.",
        "fails over": " A finalization failure counts against tolerable-failed-checkpoints (unset here: 0), so the "
                      "job fails over on it; these logs end before showing the failover.",
        "outcome unknown": " Whether the job kept running is unknown: tolerable-failed-checkpoints={tolerable} lets "
                           "{tolerable} such failure(s) in a row pass, and the logs end before a later checkpoint.",
        # the evidence of the verdict ("why")
        "subdir off": "{key} is false ({source})",
        "subdir not read": "the path has no job-id directory ({key}: false in {source} is not read by Flink "
                           "{version}: the option came with 1.19)",
        "no job segment": "the path has no job-id directory",
        "shared dir": "{said}, so {path} is shared by every job writing to {base_dir}",
        "other jobmanager": "another JobManager ({jobmanager}) ran job {job} at the same time and checkpointed into "
                            "the same directory",
        "restored behind": "the run restored from {restored} and its next checkpoint chk-{checkpoint} already existed",
        "fresh start": "the run of job {job} started without restoring, so its counter began at 1 and "
                       "chk-{checkpoint} of an earlier run with that id was still there{kept}{earlier}",
        "kept": " ({checkpoints} retained)",
        "earlier run": "; an earlier run of the same job id is in these logs",
        "own checkpoints": "the run had completed {count} checkpoint(s) of its own before chk-{checkpoint} turned out "
                           "to exist: someone else wrote it",
        "repeats": "collisions repeat on several checkpoint numbers after the restore",
        "low counter": "chk-{checkpoint} collided{kind}: a counter that starts over finds the checkpoints of an "
                       "earlier run with that id",
        "for kind": " for the {kind}",
        "someone else": "chk-{checkpoint} was written by someone else while this job was running (no restore or fresh "
                        "start around it in these logs)",
        # what the job id is
        "zero job id": "the fixed job id of application mode without HA (all zeros)",
        "derived job id": "the fixed job id that application mode derives from the HA cluster id",
        "reused job id": "reused across runs",
        # evidence notes
        "note collision": "chk-{checkpoint}/_metadata already existed: the checkpoint could not be finalized",
        "note earlier run": "an earlier run of job {job} started here",
        "note retained": "that run's checkpoint was retained in the directory",
        "note run": "the colliding run started here",
        "note restored": "…and restored from checkpoint {checkpoint}",
        "note fresh": "…without restoring any checkpoint: the counter starts at 1",
        "note threshold": "the finalization failure exhausted the tolerable-failure threshold: the job failed over",
        "note again": "chk-{checkpoint} collided too",
        # patches
        "own dir": "One checkpoint directory per deployment: two deployments (or two runs of a fixed application-mode "
                   "job id) never write the same chk-N then.",
        "name it": " These logs do not say what tells the deployments apart (no Kubernetes namespace or cluster id), "
                   "so pick the name per deployment.",
        "job subdir": "Keep each job's checkpoints under <dir>/<job-id>/ so jobs sharing the directory do not "
                      "collide.",
        "dir per job": "Flink {version} has no option for job-id sub-directories (state.checkpoints.create-subdir "
                       "came with 1.19): give every job a checkpoint directory of its own, in its submission or its "
                       "code.",
        "fewer retained": "{retained} retained checkpoints leave {retained} chk-N directories behind: {narrows}. This "
                          "narrows the collisions; the change above (one directory per writer) is what ends them.",
        "ahead of restore": "they lie ahead of an older restore point; with one, the restore point is the newest "
                            "checkpoint",
        "other writer": "every one of them is a chk-N the other writer's counter can run into",
        "restarted counter": "an earlier run's retained chk-N are what a restarted counter runs into",
        "every job": "every job of the directory can run into each of them",
        "restore instead": "A run that reuses a job id must resume from that id's newest retained checkpoint (its "
                           "counter then continues after it), or the old directory must be moved away before a fresh "
                           "start.",
        "restore snippet": "bin/flink run -s {restore} ...\n"
                           "# or, to start fresh: move {base_dir}/{job} away first",
        "job id": "The job id {job} is {kind}. Let each new submission get its own id (do not pin "
                  "$internal.pipeline.job-id), or keep the fixed id only together with a directory of its own per "
                  "deployment.",
        "one writer": "Give every deployment its own checkpoint storage (separate NFS mounts or prefixes) and never "
                      "run two deployments with the same HA cluster id / job id at once.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        collisions = self._collisions(incident)
        if not collisions:
            return []
        first = collisions[0]
        runs = job_runs(incident)
        run = run_at(runs, first.job, first.event.ts)
        earlier = [r for r in runs if r.job == first.job and r is not run and (r.started or "") < (first.event.ts or "~")]
        history = checkpoint_history(incident)
        retained_all = _retained_ids(incident, first.job)
        retained = {i: ev for i, ev in retained_all.items() if (ev.ts or "") <= (first.event.ts or "~")}
        cause, why = self._cause(incident, collisions, run, earlier, history, retained)

        failover_events = [ev for ev in incident.events if FAILOVER.search(ev.message) and ev.ts and first.event.ts
                           and ev.ts >= first.event.ts and _finalize_failure(ev)]
        threshold = [ev for ev, m in incident.find(TOLERABLE_FAILURES_EXCEEDED) if "finalize" in (m["reason"] or "finalize")
                     and (ev.ts or "~") >= (first.event.ts or "")]
        failed_over = bool(threshold or failover_events)
        kept_running = not failed_over and _kept_running(incident, history, first)

        evidence, notes = self._evidence(collisions, run, earlier, retained, threshold)
        tolerable = incident.config.get_int(TOLERABLE_KEY)
        # A finalization failure counts against the tolerable-failure threshold (FINALIZE_CHECKPOINT_FAILURE), whose
        # default is 0: unless the threshold allows it, the job fails over on the first one.
        if failed_over:
            outcome = self.say("failed over", times=failovers(threshold) or 1)
        elif kept_running:
            outcome = self.say("kept running", tolerable=tolerable)
        elif not tolerable:
            outcome = self.say("fails over")
        else:
            outcome = self.say("outcome unknown", tolerable=tolerable)
        summary = (self.say("head", names=", ".join(f"chk-{c.checkpoint_id}" for c in collisions[:5]),
                            of_job=f" of job {first.job}" if first.job else "", base_dir=first.base_dir)
                   + self.say("why", verdict=self.cause(cause).summary, why=why) + outcome)
        details = {
            "collisions": [f"chk-{c.checkpoint_id}" for c in collisions],
            "job_id": first.job,
            "job_id_kind": self._job_id_kind(first.job),
            "checkpoint_dir": first.base_dir,
            "runs_of_job_in_logs": len([r for r in runs if r.job == first.job]),
            "restored_from": run.restored_from if run else None,
            "started_without_restore": bool(run and run.fresh),
            "retained_checkpoints_seen": sorted(retained) or None,
            "num_retained": incident.config.get(RETAINED_KEY) or "unset (1)",
            "failed_over": failed_over if failed_over or kept_running else "unknown (the logs end before it shows)",
            "why": why,
        }
        return [self.finding(
            cause, summary, evidence,
            confidence=0.9 if run is not None else 0.65,
            patches=self._patches(incident, cause, first, run, earlier, retained_all),
            severity="warning" if kept_running else "failure",
            notes=notes,
            details={k: v for k, v in details.items() if v is not None},
        )]

    # -- evidence extraction

    @staticmethod
    def _collisions(incident: Incident) -> list[Collision]:
        out: dict[tuple[str | None, int], Collision] = {}
        for ev in incident.events:
            text = ev.text
            if not COLLISION_TEXT.search(text) and not ("_metadata" in text and "already exists" in text):
                continue
            m = COLLISION.search(text)
            if not m:
                continue
            path = m["path"]
            jm = JOB_IN_PATH.search(path)
            fm = FAILED_FOR_JOB.search(ev.message)
            job = jm["job"] if jm else fm["job"] if fm else None
            key = (job, int(m["id"]))
            out.setdefault(key, Collision(ev, int(m["id"]), job, path))  # one collision is logged more than once
        # the same collision repeated in a record that does not name the job (a failover's cause)
        named = {cid for job, cid in out if job is not None}
        found = [c for (job, cid), c in out.items() if job is not None or cid not in named]
        return sorted(found, key=lambda c: (c.event.ts or "", c.event.line))

    def _cause(self, incident, collisions, run: JobRun | None, earlier: list[JobRun], history, retained):
        """The root cause and the evidence that names it (a clause of the summary)."""
        first = collisions[0]
        # a release before the option ignores the key
        subdir = incident.config.get_bool(SUBDIR_KEY) if _has_subdir_option(incident) else None
        # The default keeps <dir>/<job-id>/chk-N: a full path without the job-id segment means it was turned off.
        no_job_segment = bool(re.match(r"^(?:\w+:)?/", first.path)) and not JOB_IN_PATH.search(first.path)
        if subdir is False or (subdir is None and no_job_segment):
            where = incident.config.lookup(SUBDIR_KEY)
            if where and not _has_subdir_option(incident):
                said = self.say("subdir not read", key=where.key, source=where.source, version=incident.flink_version)
            elif where:
                said = self.say("subdir off", key=where.key, source=where.source)
            else:
                said = self.say("no job segment")
            return "shared-dir-without-job-subdir", self.say("shared dir", said=said, path=first.path,
                                                             base_dir=first.base_dir)
        other_jm = _other_jobmanager_active(incident, first)
        if other_jm:
            return "concurrent-writers", self.say("other jobmanager", jobmanager=other_jm, job=first.job)
        own_before = [a for a in history if a.job == first.job and a.outcome == "completed" and run is not None
                      and (a.finished or "") >= (run.started or "") and (a.finished or "~") < (first.event.ts or "")]
        if run is not None and run.restored_from is not None:
            ahead = first.checkpoint_id - run.restored_from
            if 0 < ahead <= 3 and not own_before:
                restored = run.restore_path or f"checkpoint {run.restored_from}"
                return "restored-behind-newer-checkpoints", self.say("restored behind", restored=restored,
                                                                     checkpoint=first.checkpoint_id)
        if run is not None and run.fresh and not own_before:
            kept = (self.say("kept", checkpoints=", ".join(f"chk-{i}" for i in sorted(retained))) if retained
                    else "")
            return "job-id-reused", self.say("fresh start", job=first.job, checkpoint=first.checkpoint_id, kept=kept,
                                             earlier=self.say("earlier run") if earlier else "")
        if own_before:
            return "concurrent-writers", self.say("own checkpoints", count=len(own_before),
                                                  checkpoint=first.checkpoint_id)
        if len({c.checkpoint_id for c in collisions}) > 1 and run is not None and run.restored_from is not None:
            return "concurrent-writers", self.say("repeats")
        if first.checkpoint_id <= 3 or APPLICATION_MODE_JOB_ID.match(first.job or ""):
            kind = self._job_id_kind(first.job)
            return "job-id-reused", self.say("low counter", checkpoint=first.checkpoint_id,
                                             kind=self.say("for kind", kind=kind) if kind else "")
        return "concurrent-writers", self.say("someone else", checkpoint=first.checkpoint_id)

    def _job_id_kind(self, job: str | None) -> str | None:
        if not job:
            return None
        if job == "0" * 32:
            return self.say("zero job id")
        if APPLICATION_MODE_JOB_ID.match(job):
            return self.say("derived job id")
        return None

    # -- presentation

    def _evidence(self, collisions, run, earlier, retained, threshold):
        evs, notes, add = evidence_trail()

        first = collisions[0]
        add(first.event, self.say("note collision", checkpoint=first.checkpoint_id))
        for r in earlier[-1:]:
            add(r.start_event, self.say("note earlier run", job=r.job))
        for ev in retained.values():
            add(ev, self.say("note retained"))
            break
        if run is not None:
            add(run.submitted or run.start_event, self.say("note run"))
            if run.restore_event is not None:
                add(run.restore_event, self.say("note restored", checkpoint=run.restored_from))
            elif run.fresh_event is not None:
                add(run.fresh_event, self.say("note fresh"))
        if threshold:
            add(threshold[0], self.say("note threshold"))
        for c in collisions[1:3]:
            add(c.event, self.say("note again", checkpoint=c.checkpoint_id))
        return evs, notes

    # -- patches

    def _patches(self, incident: Incident, cause: str, first: Collision, run: JobRun | None, earlier, retained):
        cfg = incident.config
        patches = []
        # Concurrent writers run the same job: only a deployment identity (namespace, cluster id) tells them apart.
        name = _deployment_name(incident, run, earlier, by_job_name=cause in ("job-id-reused",))
        current_dir = (cfg.get(DIR_KEY) or first.base_dir).rstrip("/")
        wants_own_dir = cause != "job-id-reused" or APPLICATION_MODE_JOB_ID.match(first.job or "")
        if wants_own_dir and name and not current_dir.endswith("/" + name):
            patches.append(self.flink_patch(incident, DIR_KEY, current_dir + "/" + name, self.say("own dir")))
        elif wants_own_dir and not name and cause != "shared-dir-without-job-subdir":
            patches.append(self.ops_patch(
                "checkpoint directory per deployment", self.say("own dir") + self.say("name it"),
                snippet=f"{version_key(incident, DIR_KEY)}: {current_dir}/<deployment-name>"))
        if cause == "shared-dir-without-job-subdir" and _has_subdir_option(incident):
            patches.append(self.flink_patch(incident, SUBDIR_KEY, "true", self.say("job subdir")))
        elif cause == "shared-dir-without-job-subdir":
            dir_key = version_key(incident, DIR_KEY)
            patches.append(self.ops_patch(
                "checkpoint directory per job", self.say("dir per job", version=incident.flink_version),
                snippet=f"flink run -D {dir_key}={current_dir}/<job-name> ...\n"
                        f"// or in the job: env.getCheckpointConfig().setCheckpointStorage(\"{current_dir}/<job-name>\");"
                        f"  (1.13+; before: env.setStateBackend(new FsStateBackend(\"{current_dir}/<job-name>\")))"))
        retained_now = cfg.get_int(RETAINED_KEY) or 1
        if retained_now > FEWER_RETAINED:
            narrows = {
                "restored-behind-newer-checkpoints": "ahead of restore",
                "concurrent-writers": "other writer",
                "job-id-reused": "restarted counter",
                "shared-dir-without-job-subdir": "every job",
            }[cause]
            patches.append(self.flink_patch(incident, RETAINED_KEY, str(FEWER_RETAINED),
                                            self.say("fewer retained", retained=retained_now,
                                                     narrows=self.say(narrows))))
        if cause == "job-id-reused":
            last = max(retained) if retained else None
            path = (retained[last].message if last is not None else None)
            path = NOT_DISCARDED.search(path)["path"] if path and NOT_DISCARDED.search(path) else None
            restore = path or f"{first.base_dir}/{first.job}/chk-<newest>"
            patches.append(self.ops_patch(
                "restore instead of starting over", self.say("restore instead"),
                snippet=self.say("restore snippet", restore=restore, base_dir=first.base_dir, job=first.job)))
            patches.append(self.ops_patch(
                "job id handling",
                self.say("job id", job=first.job, kind=self._job_id_kind(first.job) or self.say("reused job id"))))
        if cause in ("concurrent-writers", "restored-behind-newer-checkpoints"):
            patches.append(self.ops_patch("one writer per checkpoint directory", self.say("one writer")))
        return patches


def _has_subdir_option(incident: Incident) -> bool:
    """Whether the incident's release reads create-subdir (an unknown release is given the benefit of the doubt)."""
    v = incident.version_tuple
    return v is None or tuple(v[:2]) >= SUBDIR_SINCE


def _kept_running(incident: Incident, history, first: Collision) -> bool:
    """A checkpoint of the same job completed after the collision: the failure was tolerated."""
    return any(a.job == first.job and a.outcome == "completed" and a.finished and first.event.ts
               and a.finished > first.event.ts for a in history)


def _retained_ids(incident: Incident, job: str | None) -> dict[int, Event]:
    out = {}
    for ev, m in incident.find(NOT_DISCARDED):
        if job is None or job in m["path"]:
            out[int(m["id"])] = ev
    return out


def _finalize_failure(ev: Event) -> bool:
    return "finalize" in ev.text.lower()


def _other_jobmanager_active(incident: Incident, first: Collision) -> str | None:
    """Another JobManager log that checkpointed the same job id around the collision."""
    if not first.job or not first.event.ts:
        return None
    changes = job_state_changes(incident)
    own = first.event.file
    for c in changes:
        if c.job == first.job and c.event.file != own and c.event.role == "jobmanager" and c.new == "RUNNING" \
                and (c.ts or "~") <= first.event.ts:
            ended = [d for d in changes if d.job == first.job and d.event.file == c.event.file
                     and d.new in ("FINISHED", "CANCELED", "FAILED", "SUSPENDED") and (d.ts or "") >= (c.ts or "")]
            if not ended or (ended[0].ts or "~") >= first.event.ts:
                return c.event.host or "/".join(c.event.file.rsplit("/", 2)[-2:])
    return None


def _deployment_name(incident: Incident, run: JobRun | None, earlier: list[JobRun], by_job_name: bool) -> str | None:
    cfg = incident.config
    parts = [cfg.get(k) for k in ("kubernetes.namespace", "kubernetes.cluster-id")]
    if parts[1]:
        return _slug("-".join(p for p in parts if p))
    for key in ("high-availability.cluster-id", "yarn.application.name"):
        value = cfg.get(key)
        if value and value.strip("/") not in ("default", ""):
            return _slug(value)
    if not by_job_name:
        return None
    name = (run.name if run else None) or next((r.name for r in reversed(earlier) if r.name), None)
    return _slug(name) if name else None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "deployment"
