"""HDFS write pipeline failures under checkpoint storage: ``All datanodes ... are bad. Aborting...``, ``Failed to
replace a bad datanode``, ``could only be written to 0 of the N minReplication nodes``.

The DFS client on the TaskManager (or JobManager) writes every block through a pipeline of datanodes. The NameNode
picks them (and says ``could only be written to 0 ...`` when it cannot find one), the client drops datanodes that
fail mid-write and may ask for replacements (``replace-datanode-on-failure``). The counts in the NameNode's message
tell the causes apart: ``0 datanode(s) running`` (all down), ``K running and no node(s) are excluded`` (the NameNode
itself refused them: full disks, decommissioning), ``K running and K excluded`` (the client could not reach them).
"""
from __future__ import annotations

from flink_runbooks.evidence.checkpoints import checkpoint_history
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.evidence.snapshot_failures import (ALL_DATANODES_BAD, FLUSH_CLOSE, HDFS_FAILURE, MIN_REPLICATION, REPLACE_FAILED,
                                 DatanodeTrouble, datanode_trouble, decline_instead_of_fail_patch, is_legacy,
                                 longest_failed_streak, snapshot_failures, threshold_covered_ids, tolerance_patches,
                                 transient_blip)
from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.vocabulary.lifecycle import GLOBAL_FAILURE, TASK_FAILED, TOLERABLE_FAILURES_EXCEEDED
from flink_runbooks.vocabulary.wordings import Wording

HADOOP_PREFIX = "flink.hadoop."  # Flink copies flink.hadoop.* keys into the Hadoop configuration of its HDFS file system
REPLACE_POLICY_KEY = "dfs.client.block.write.replace-datanode-on-failure.policy"
REPLACE_BEST_EFFORT_KEY = "dfs.client.block.write.replace-datanode-on-failure.best-effort"
SMALL_CLUSTER = 3  # Hadoop's guidance: with 3 datanodes or fewer there is no spare one to replace a failed one


class HdfsDatanodeFailure(Detector):
    slug = "hdfs-datanode-failure"
    title = "HDFS write pipeline failed: no usable datanodes"
    category = "checkpointing"
    meaning = ("The HDFS client could not write a checkpoint (or sink) file because no datanode would take the "
               "block: datanodes down, full, unreachable, or lost from the write pipeline without a replacement.")
    exception_classes = ("java.io.IOException", "org.apache.hadoop.ipc.RemoteException")
    versions = "1.x, 2.x with HDFS checkpoint storage (Hadoop 2.x and 3.x client wording)"
    layer = 0
    config_keys = (
        "flink.hadoop.dfs.client.block.write.replace-datanode-on-failure.policy",
        "flink.hadoop.dfs.client.block.write.replace-datanode-on-failure.best-effort",
        "execution.checkpointing.tolerable-failed-checkpoints",
        "execution.checkpointing.dir",
        "env.hadoop.conf.dir",
    )
    signatures = (
        r"All datanodes .* are bad",
        r"Failed to replace a bad datanode",
        r"could only be (?:written|replicated) to \d+ ",
        r"Excluding datanode ",
        r"Exception in createBlockOutputStream",
    )
    root_causes = (
        RootCause("pipeline-recovery-failure",
                  "Datanodes failed while the block was being written and the client could not rebuild the write "
                  "pipeline (no spare datanode, or every datanode of the pipeline failed).",
                  "'All datanodes [...] are bad. Aborting...' or 'Failed to replace a bad datanode on the existing "
                  "pipeline' (with the replacement policy) from the DFS client.",
                  patches=("flink:execution.checkpointing.tolerable-failed-checkpoints",
                           "flink:flink.hadoop.dfs.client.block.write.replace-datanode-on-failure.best-effort",
                           "flink:flink.hadoop.dfs.client.block.write.replace-datanode-on-failure.policy",
                           "code:CheckpointConfig#setFailOnCheckpointingErrors",
                           "code:CheckpointConfig#setTolerableCheckpointFailureNumber", "ops:datanode health",
                           "ops:hdfs-site.xml of the Flink processes")),
        RootCause("datanodes-down",
                  "No datanode was running: the NameNode had nowhere to place the block.",
                  "'could only be written to 0 of the N minReplication nodes. There are 0 datanode(s) running'.",
                  patches=("ops:start the datanodes",)),
        RootCause("datanode-disks-full",
                  "Datanodes were running but the NameNode refused all of them for new blocks, usually because their "
                  "remaining space is below the block size.",
                  "'There are K datanode(s) running and no node(s) are excluded' (the client excluded none), or an "
                  "explicit DiskOutOfSpaceException / 'No space left on device'.",
                  patches=("ops:datanode disk space",)),
        RootCause("datanodes-unreachable",
                  "The client excluded every running datanode after failing to open a pipeline to it (network, "
                  "firewall, overloaded datanodes).",
                  "'There are K datanode(s) running and K node(s) are excluded', with 'Exception in "
                  "createBlockOutputStream' / 'Excluding datanode' lines before it.",
                  patches=("flink:execution.checkpointing.tolerable-failed-checkpoints",
                           "code:CheckpointConfig#setTolerableCheckpointFailureNumber",
                           "ops:network from the Flink hosts to the datanodes")),
        RootCause("datanodes-unavailable",
                  "The NameNode found no datanode for the block; the message does not say why.",
                  "'could only be replicated to 0 nodes' without the running/excluded counts.",
                  patches=("ops:datanode state",)),
    )

    wordings = (
        Wording("hdfs-datanode-failure", r"All datanodes \[?DatanodeInfoWithStorage\[.*\]? are bad\. Aborting|could only be (?:written|replicated) to 0 nodes",
                "1.3 – 2.x", "HDFS client DataStreamer / NameNode (RemoteException)",
                "java.io.IOException: All datanodes [DatanodeInfoWithStorage[10.0.0.7:9866,DS-1,DISK]] are bad. Aborting..."),
    )

    templates = {
        "head": "HDFS could not store the {what} files{which}: {counts}. {impact} Why: {why}{size}",
        "which": " of checkpoint(s) {ids}{more}",
        "all bad": "'All datanodes ... are bad' {count} time(s)",
        "no replacement": "no datanode to replace a failed one {count} time(s){policy}",
        "policy": " (policy {policy})",
        "no target": "no datanode for a new block {count} time(s){nodes}",
        "nodes": " ({running} datanode(s) running, {excluded} excluded)",
        "failed over": "The job failed over{sync}.",
        "sync phase": " (the failure was in the synchronous snapshot phase, which always fails the task)",
        "checkpoints failed": "Checkpoints failed while it lasted. No failover shows in these logs, but checkpoints "
                              "failing on storage I/O count against tolerable-failed-checkpoints (default 0), so "
                              "whether the job kept running is unknown: look for 'Exceeded checkpoint tolerable "
                              "failure threshold' or RESTARTING in the JobManager log.",
        "no failover": "No failover shows in these logs; whether the job kept running is unknown.",
        "size": " {count} datanode(s) seen.",
        "excluded": "the client excluded a datanode it could not write to",
        "no spare": "no spare datanode to replace the failed one in the pipeline",
        "none for the block": "the NameNode found no datanode for the block",
        "pipeline failed": "every datanode of the write pipeline failed",
        "sync snapshot failed": "the synchronous snapshot of checkpoint {id} failed on it: the task failed",
        "not materialized": "checkpoint {id} could not be materialized because of it",
        "threshold exceeded": "the failed checkpoints exceeded the tolerable-failure threshold: the job failed over",
        "small cluster": "Only {datanodes} datanode(s) are in play: there is no spare datanode to replace a failed "
                         "one, so the {policy} policy aborts the write. Hadoop recommends NEVER for clusters of "
                         "{small} datanodes or fewer.",
        "best effort": "Keep writing with the remaining datanodes when no replacement can be found, instead of "
                       "aborting the checkpoint file.",
        "client setting": "{why} Flink passes flink.hadoop.* keys to its HDFS client.",
        "hdfs-site.xml": "The same client setting in the Hadoop configuration Flink reads (HADOOP_CONF_DIR), for "
                         "versions or deployments that do not pass flink.hadoop.* keys.",
        "hdfs-site snippet": "<property>\n"
                             "  <name>{key}</name>\n"
                             "  <value>{value}</value>\n"
                             "</property>",
        "datanode health": "Datanodes dropped out of write pipelines: check their logs around the failure time for "
                           "disk errors, GC pauses and 'xceiver' limits (dfs.datanode.max.transfer.threads), and "
                           "their state in the report.",
        "start the datanodes": "The NameNode had no live datanode: bring the datanodes back (and check why they "
                               "stopped).",
        "datanode disk space": "The NameNode refused every running datanode for new blocks: free or add disk space "
                               "(a datanode needs at least one block size of room per volume), or finish "
                               "decommissioning.",
        "network": "The client could not open a pipeline to any datanode: check that the TaskManager hosts reach the "
                   "datanodes' data transfer port (firewall, DNS, dfs.client.use.datanode.hostname in containers) "
                   "and that the datanodes are not overloaded.",
        "datanode state": "Check which datanodes are live and their free space.",
        "decline instead of fail": "Flink <= 1.8 only: a failed snapshot declines the checkpoint instead of failing "
                                   "the task, so a short HDFS outage no longer restarts the job (from 1.9 on "
                                   "synchronous-phase failures always fail the task).",
        "ride it out": "Ride out short HDFS incidents: a few failed checkpoints then do not fail the job over (up to "
                       "{streak} failed in a row here). It does not fix the datanodes.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        trouble = datanode_trouble(incident)
        if not trouble:
            return []
        cause, confidence = self._cause(trouble)
        sync = [f for f in snapshot_failures(incident, "sync") if HDFS_FAILURE.search(f.text)]
        async_ = [f for f in snapshot_failures(incident, "async") if HDFS_FAILURE.search(f.text)]
        history = checkpoint_history(incident)
        covered = threshold_covered_ids(incident, history) & trouble.checkpoint_ids
        first_ts = min((ev.ts for ev in trouble.events if ev.ts), default=None)
        threshold_after = [ev for ev, _ in incident.find(TOLERABLE_FAILURES_EXCEEDED) if first_ts is None or (ev.ts or "~") >= first_ts]
        task_failed = (bool(sync) or any(f.failed_task for f in async_)
                       or any(TASK_FAILED.search(ev.message) or GLOBAL_FAILURE.search(ev.message)
                              for ev in trouble.events))
        # Without time stamps (an excerpt, logs stripped of them) the threshold cannot be tied to checkpoint ids
        # through the history; the threshold exceeded after the storage errors is then the failover itself.
        failed_over = task_failed or bool(covered) or (bool(threshold_after)
                                                       and (not trouble.checkpoint_ids or first_ts is None))
        in_checkpoints = bool(sync or async_ or trouble.checkpoint_ids
                              or any(FLUSH_CLOSE.search(ev.text) for ev in trouble.events))
        if not failed_over and self._rode_it_out(history, trouble, async_):
            return []
        phase = "sync" if sync else "async" if async_ or trouble.checkpoint_ids else None
        datanodes = _cluster_size(trouble)
        streak = longest_failed_streak(history)

        evidence, notes = self._evidence(trouble, sync, async_, threshold_after if failed_over else [])
        details = {
            "pipeline_failures": trouble.all_bad,
            "replacement_failures": trouble.replace_failed,
            "no_target_failures": trouble.min_replication,
            "datanodes_running": trouble.running,
            "datanodes_excluded": ("no" if trouble.excluded_said_no else trouble.excluded),
            "datanodes_seen": sorted(trouble.datanodes),
            "replace_datanode_policy": trouble.replace_policy,
            "disk_space_message": trouble.disk_full,
            "checkpoints_affected": sorted(trouble.checkpoint_ids),
            "where": "checkpoint storage" if in_checkpoints else "HDFS writes of the job (sink or other)",
            "snapshot_phase": phase,
            "failed_over": failed_over,
        }
        return [self.finding(
            cause, self._summary(cause, trouble, failed_over, in_checkpoints, phase, datanodes), evidence,
            confidence=confidence, severity="failure" if failed_over else "warning", notes=notes,
            details={k: v for k, v in details.items() if v is not None and v != []},
            patches=self._patches(incident, cause, trouble, datanodes, phase, streak, sync),
        )]

    @staticmethod
    def _rode_it_out(history, trouble: DatanodeTrouble, async_) -> bool:
        """A single short HDFS hiccup after which checkpoints completed again, without any failover."""
        ids = trouble.checkpoint_ids | {f.checkpoint_id for f in async_ if f.checkpoint_id is not None}
        if ids:
            return transient_blip(history, ids)
        last = max((ev.ts for ev in trouble.events if ev.ts), default=None)
        return last is not None and any(a.outcome == "completed" and (a.finished or "") > last for a in history)

    @staticmethod
    def _cause(t: DatanodeTrouble) -> tuple[str, float]:
        if t.disk_full:
            return "datanode-disks-full", 0.9
        if t.min_replication and t.running == 0:
            return "datanodes-down", 0.95
        if t.min_replication and t.running and t.excluded_said_no:
            return "datanode-disks-full", 0.75
        if t.min_replication and t.running and t.excluded:
            return "datanodes-unreachable", 0.85 if t.excluding_events else 0.75
        if t.all_bad or t.replace_failed:
            return "pipeline-recovery-failure", 0.9
        return "datanodes-unavailable", 0.6

    def _evidence(self, t: DatanodeTrouble, sync, async_, thresholds: list[Event]):
        evs, notes, add = evidence_trail()

        if t.excluding_events:
            add(t.excluding_events[0], self.say("excluded"))
        for ev in t.events:
            if REPLACE_FAILED.search(ev.text):
                add(ev, self.say("no spare"))
                break
        for ev in t.events:
            if MIN_REPLICATION.search(ev.text):
                add(ev, self.say("none for the block"))
                break
        for ev in t.events:
            if ALL_DATANODES_BAD.search(ev.text):
                add(ev, self.say("pipeline failed"))
                break
        if sync:
            culprit = max(sync[0].events, key=lambda e: len(e.chain))
            add(culprit, self.say("sync snapshot failed", id=sync[0].checkpoint_id))
        elif async_:
            culprit = max(async_[0].events, key=lambda e: len(e.chain))
            add(culprit, self.say("not materialized", id=async_[0].checkpoint_id))
        if thresholds:
            add(thresholds[0], self.say("threshold exceeded"))
        return evs, notes

    def _summary(self, cause: str, t: DatanodeTrouble, failed_over: bool, in_checkpoints: bool, phase: str | None,
                 datanodes: int | None) -> str:
        counts = []
        if t.all_bad:
            counts.append(self.say("all bad", count=t.all_bad))
        if t.replace_failed:
            counts.append(self.say("no replacement", count=t.replace_failed,
                                   policy=self.say("policy", policy=t.replace_policy) if t.replace_policy else ""))
        if t.min_replication:
            nodes = (self.say("nodes", running=t.running, excluded="none" if t.excluded_said_no else t.excluded)
                     if t.running is not None else "")
            counts.append(self.say("no target", count=t.min_replication, nodes=nodes))
        ids = sorted(t.checkpoint_ids)
        which = self.say("which", ids=", ".join(map(str, ids[:6])), more=" …" if len(ids) > 6 else "") if ids else ""
        if failed_over:
            impact = self.say("failed over", sync=self.say("sync phase") if phase == "sync" else "")
        else:
            impact = self.say("checkpoints failed" if in_checkpoints else "no failover")
        return self.say("head", what="checkpoint" if in_checkpoints else "HDFS", which=which, counts="; ".join(counts),
                        impact=impact, why=self.cause(cause).summary,
                        size=self.say("size", count=datanodes) if datanodes else "")

    def _patches(self, incident: Incident, cause: str, t: DatanodeTrouble, datanodes: int | None, phase: str | None,
                 streak: int, sync):
        patches = []
        v = incident.version_tuple
        report = "hdfs dfsadmin -report"
        if cause == "pipeline-recovery-failure":
            if t.replace_failed:
                small = datanodes is not None and datanodes <= SMALL_CLUSTER
                key, value = (REPLACE_POLICY_KEY, "NEVER") if small else (REPLACE_BEST_EFFORT_KEY, "true")
                why = (self.say("small cluster", datanodes=datanodes, policy=t.replace_policy or "DEFAULT",
                                small=SMALL_CLUSTER) if small else self.say("best effort"))
                patches.append(self.flink_patch(incident, HADOOP_PREFIX + key, value,
                                                self.say("client setting", why=why)))
                patches.append(self.ops_patch(
                    "hdfs-site.xml of the Flink processes", self.say("hdfs-site.xml"),
                    snippet=self.say("hdfs-site snippet", key=key, value=value)))
            patches.append(self.ops_patch(
                "datanode health", self.say("datanode health"),
                snippet=f"{report}\n{report} -dead"))
        elif cause == "datanodes-down":
            patches.append(self.ops_patch(
                "start the datanodes", self.say("start the datanodes"),
                snippet=f"{report} -live\n{report} -dead"))
        elif cause == "datanode-disks-full":
            patches.append(self.ops_patch(
                "datanode disk space", self.say("datanode disk space"),
                snippet=f"{report} | grep -E '^Name:|DFS Remaining|Decommission'"))
        elif cause == "datanodes-unreachable":
            probes = "\n".join(f"nc -vz {a.rsplit(':', 1)[0]} {a.rsplit(':', 1)[1]}" for a in sorted(t.datanodes)[:6])
            patches.append(self.ops_patch(
                "network from the Flink hosts to the datanodes", self.say("network"),
                snippet=probes or f"{report} -live"))
        else:
            patches.append(self.ops_patch("datanode state", self.say("datanode state"), snippet=report))
        if phase == "sync":
            if is_legacy(incident, [ev for f in sync for ev in f.events]) is not False:
                patches.append(decline_instead_of_fail_patch(self, self.say("decline instead of fail")))
        elif (v is None or tuple(v[:2]) >= (1, 9)) and cause in ("pipeline-recovery-failure", "datanodes-unreachable"):
            # Only for an HDFS that comes back by itself: with no datanode up or every disk full, tolerance would
            # only postpone the failover.
            patches += tolerance_patches(self, incident, streak, self.say("ride it out", streak=streak))
        return patches


def _cluster_size(t: DatanodeTrouble) -> int | None:
    """Datanodes in play: the NameNode's count when it gave one, else the distinct addresses the client named."""
    if t.running:
        return t.running
    return len(t.datanodes) or None
